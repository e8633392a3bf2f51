// The reference quantizer: a scalar emulation of every format of NUMERICS.md section 1, written
// from that text alone and independent of kernels/ (agreement between the two is the point), with
// the decisions of docs/DECISIONS.md. It is slow on purpose: plain loops, one element at a time.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "qtransit/common/format.hpp"
#include "qtransit/common/status.hpp"
#include "qtransit/common/transit.hpp"
#include "qtransit/reference/exact.hpp"

namespace qtransit::reference {

struct Quantized {
    FormatSpec format;
    int64_t block = 0;
    std::vector<float> scales;     // per block: s (int<b>, int<b>-asym) or the stored step Δ (ds-int<b>); NaN if poisoned
    std::vector<float> offsets;    // per block: lo (int<b>-asym, declared offset `min`; empty otherwise); NaN if poisoned
    std::vector<int32_t> codes;    // per element
    std::vector<float> decoded;    // per element
    std::vector<uint8_t> poisoned; // per block: 1 when the block was non-finite under `propagate`
    // Rotated formats (FORMATS.md section 9) only: the signs' key (the run's seed, the index of
    // element 0), which quantize sets and the bound needs.
    uint64_t sign_seed = 0;
    int64_t sign_first = 0;
};

// Quantize `x` block-wise (blocks of `block`, the last one may be short). Under Nonfinite::kError a
// NaN/inf (or a range overflow, docs/DECISIONS.md D3) is refused with an Error naming `site`'s
// tensor and rank and the element index (site.index_base + i) and its value.
//
// Declared formats (FormatKind::kDecl, docs/FORMATS.md): scales holds each block's scale as a binary32
// (e8m0: 2^e, NaN for a poisoned block), offsets each block's `lo` for an offset `min`. Stochastic
// rounding draws its random word from `key` (FORMATS.md section 4): Philox4x32-10 with key
// (lo32(seed), hi32(seed)) and counter (lo32(g / 4), hi32(g / 4), rank word, 4 | (hop << 8)), output
// word g mod 4, where g = site.index_base + i (as a uint64) and the rank word is site.rank (0xFFFFFFFF
// when site.rank < 0).
struct StochasticKey {
    uint64_t seed = 0;  // the run's seed (PathConfig::seed)
    uint32_t hop = 0;   // the quantization event's stage (QuantEvent::stage); 0 outside a collective
};
Result<Quantized> quantize(const FormatSpec& format, std::span<const float> x, int64_t block,
                           Nonfinite policy = Nonfinite::kError, const Site& site = {},
                           const StochasticKey& key = {});

// Decode codes with the given per-block scales/offsets (what a receiver does with the wire data).
// A NaN scale (or asym offset) decodes every element of its block to the quiet NaN 0x7FC00000 (D4);
// an asym block with scale 0 decodes to its offset lo exactly (D2). A rotated format rotates each
// block back with the signs of (sign_seed, sign_first + the block's start): quantize's seed and
// site.index_base.
std::vector<float> decode(const FormatSpec& format, std::span<const int32_t> codes,
                          std::span<const float> scales, std::span<const float> offsets, int64_t block,
                          uint64_t sign_seed = 0, int64_t sign_first = 0);

// Declared conventions (docs/FORMATS.md section 10): what a library with `format`'s conventions
// writes for one block x (finite or not), element by element, where its rules depart from the
// format's. `applied` names the conventions whose rule changed the result (bits of ConventionBit);
// 0 when the block is the format's own (no convention explains a difference in it, or the format
// has none). Only declared formats have conventions (finalize() keeps them off rotated, offset and
// stochastic formats).
enum ConventionBit : uint32_t {
    kConvNonfinite = 1,
    kConvScaleFloor = 2,
    kConvScaleSubnormals = 4,
    kConvDivideFloor = 8,
    kConvZeroScale = 16,
    kConvOverflow = 32,
    kConvElementSubnormals = 64,
    kConvDecodeOverflow = 128,
    // zero_sign = "any": never set by convention_block (it rewrites nothing); the codec check sets it
    // on a block whose only differences are the signs of zeros.
    kConvZeroSign = 256,
};
inline constexpr uint32_t kConvAll = 511;
// The TOML key of one bit ("divide_floor"), and the value the declaration gives it ("2^-126"...).
const char* convention_key(uint32_t bit);
std::string convention_rule(const Decl& d, uint32_t bit);
struct ConventionBlock {
    uint32_t applied = 0;
    bool any_scale = false;  // a poisoned block: its scale is not compared
    float scale = 0;         // the scale written (binary32; 2^e for e8m0)
    enum class Want : uint8_t { kValue, kZero, kNaN, kNonfinite, kAny };
    std::vector<Want> want;     // per element: exactly `value`, a zero of either sign, NaN, inf or NaN, anything
    std::vector<float> value;   // kValue: the decoded value (binary32 bits)
};
ConventionBlock convention_block(const FormatSpec& format, std::span<const float> x);

// Wire packing of the codes (NUMERICS 1.3/1.4): per block, restarting at every block.
std::vector<uint8_t> pack(const FormatSpec& format, std::span<const int32_t> codes, int64_t block);
std::vector<int32_t> unpack(const FormatSpec& format, std::span<const uint8_t> bytes, int64_t elements,
                            int64_t block);

// Binary16 rounding (RNE, subnormals, overflow to inf), the reference's own implementation.
float round_to_fp16(float v);
// quickreduce-q<b> (docs/FORMATS.md section 11): the encode factor of a group whose stored scale is
// dec, enc = rcp16(fl16(dec + 2^-24)) with the binary16 reciprocal correctly rounded and saturated at
// ±65504 where it overflows (1/+0 included): from the format's definition, for the reference's
// encode and the checker's bounds.
float quickreduce_enc(float dec);
// Bfloat16 rounding, the reference's own: an 8-bit significand with binary32's exponent range, RNE,
// subnormals kept (multiples of 2^-133), overflow to inf from (2 - 2^-8) 2^127 up, NaN kept.
float round_to_bf16(float v);
// v rounded to an accumulation type with the two above (fp32: v itself; D11, D24); for NCCL's FP8
// types (D41) rounded to binary16, then to FP8 with saturation at the largest finite value.
float round_to_accum(float v, Accum type);
// Whether round_to_accum(v, type) saturated: an FP8 type's value past its largest finite one.
bool saturates_in(float v, Accum type);
// A binary32 value cast to the type in one rounding (D49): FP8 straight from binary32 to nearest
// even, clamped to the largest finite value (__nv_cvt_float_to_fp8 with __NV_SATFINITE, torch's
// .to(float8)), not through binary16 as NCCL's add; the others as round_to_accum. What an FP8
// tensor's values are (an input type) and what an FP8 output is.
float cast_to_type(float v, Accum type);
// Whether cast_to_type(v, type) clamped.
bool cast_saturates(float v, Accum type);
// --divide (D27): v / n for a mean, the binary32 quotient rounded to `type` (the path's element type);
// for NCCL's FP8 types ncclAvg's pre-multiply (D41): v times avg_factor, rounded to binary16, then
// to FP8 with saturation.
float divide_to(float v, int64_t n, Accum type);
// ncclAvg's factor for an FP8 type: fl32(1/N) rounded to the FP8 type (nearest even, saturated).
float avg_factor(int64_t n, Accum type);

// The rigorous per-element error bound E(x_i) of element i (NUMERICS 1.x; for asym and ds the
// bound derived in formats.cpp), with the actual scale of its block. Not defined for poisoned blocks.
// int<b>: 1.1's s (1/2 + 2^-22 qmax) + 2^-149, plus max(0, a - qmax s) when s is subnormal (1.1's
// formula alone is false there; see formats.cpp). Declared formats: FORMATS.md section 6, from x, the
// block's scale and lo only (derived in decl.cpp). Rotated formats: the bound of FORMATS.md section 9
// from the block's exact rounding errors (rotated.cpp derives it).
Exact element_bound(const Quantized& q, std::span<const float> x, int64_t i);
// A rotated format's bound of every element of block k (rotated.cpp), exactly, from x, the block's
// codes and scale and the signs' key (q.sign_seed, q.sign_first).
std::vector<Exact> rotated_block_bounds(const Quantized& q, std::span<const float> x, int64_t k);

// ---- ds-int<b>-fm: DeepSpeed's recipe under --use_fast_math (docs/DECISIONS.md D23) ------------
// The scales and steps a fast-math build may produce for one block whose binary16 absmax is
// a16 > 0. With sigma0 = fl32(2^b / fl32(2 a16)) (the IEEE scale) and rho = 2^(b-1) / a16 (the exact
// quotient), an admissible scale is every binary32 value within 2 ulp(sigma0) of sigma0 (div.full's
// budget read from the rounded quotient, as the issue states it) or within 2 ulp(rho) of rho
// (CUDA's documented 2 ulp from the exact quotient); for each scale sigma an admissible step is
// every binary32 value within 1 ulp(fl32(1/sigma)) of fl32(1/sigma) or within 1 ulp(1/sigma) of
// 1/sigma (rcp.approx). The IEEE pair (sigma0, fl32(1/sigma0)) is always one of them.
struct DsAdmissible {
    float scale0 = 0, step0 = 0;            // the IEEE pair
    std::vector<float> scales;              // ascending; scale0 among them
    std::vector<std::vector<float>> steps;  // steps[i]: the admissible steps of scales[i], ascending
    float scale_max = 0, step_max = 0;      // the largest of each
    float step_min = 0;                     // the smallest step
    // max |1 - sigma Δ| over the admissible pairs. Exact: sigma Δ has at most 48 significant bits,
    // and 1 - sigma Δ is a difference of two doubles within a factor 2 of each other (Sterbenz).
    double tau = 0;
};
// bits = 4 or 8, a16 a positive binary16 value (finite, at most 65504).
DsAdmissible ds_admissible(int bits, float a16);

// Whether a kernel's output of a ds-int<b>-fm (or ds-int<b>) tensor is one of the results the
// admissible arithmetic gives: for every block, its stored step is admissible; for every element,
// some admissible scale whose admissible steps include the block's step gives its code
// (clamp(rne(fl32(fl16(x) sigma)))), and its decoded value is fl16(fl32(code step)) with the
// block's step. A block with binary16 absmax 0 must be the IEEE one (step 1, codes 0, decoded +0).
// `decoded` may be empty (codes and steps only). x, codes and decoded are per element, steps per
// block (blocks of `block` from the start of x, the last one short); the caller shards. Messages
// number elements from index_base.
struct AdmissibleCheck {
    bool holds = true;
    int64_t inadmissible_elements = 0;  // elements no admissible scale and step explains
    int64_t inadmissible_steps = 0;     // blocks whose step is not admissible
    int64_t first = -1;                 // the first inadmissible element (-1: none)
    std::string first_text;             // what is wrong with it, one line
};
AdmissibleCheck check_admissible(const FormatSpec& format, std::span<const float> x, int64_t block,
                                 std::span<const int32_t> codes, std::span<const float> steps,
                                 std::span<const float> decoded, int64_t index_base = 0);

struct BoundCheck {
    bool holds = true;             // |x_i - x̂_i| <= E(x_i) for every element, exactly
    int64_t first_violation = -1;  // index of the first element where it does not
    double max_error = 0;          // max |x_i - x̂_i| (rounded to double for reporting)
    double max_error_to_bound = 0; // max |x_i - x̂_i| / E(x_i)
};
// Exact check of every non-poisoned element.
BoundCheck check_bounds(const Quantized& q, std::span<const float> x);

}  // namespace qtransit::reference
