// A format declaration (docs/FORMATS.md): element type, scale, offset, rounding, packing. Plain
// data, trivially copyable, so that a kernel can take it by value on the device. It says *what* a
// format is; the arithmetic is written twice from docs/FORMATS.md (kernels/decl_math.hpp and
// reference/src/decl.cpp) and the two are compared bit for bit.
#pragma once

#include <cstdint>
#include <string>

#include "qtransit/common/hd.hpp"
#include "qtransit/common/status.hpp"

namespace qtransit {

enum class ElemType : uint8_t { kInt = 0, kFloat = 1, kTable = 2 };
enum class FloatSpecial : uint8_t { kIeee = 0, kNanOnly = 1, kNone = 2 };
// e8m0-even and e8m0-ceil are torchao's EVEN and CEIL (FORMATS.md section 2). The "-mul" scales take
// the block's absmax with a declared floor and a reciprocal product, as DeepEP's and FlashInfer's FP8
// casts do (FORMATS.md section 2): fp32-amax-mul stores fl32(a / A) and multiplies each element by
// fl32(A / a) (FlashInfer), fp32-amax-mul-rcp stores fl32(a fl32(1/A)) instead (DeepEP);
// e8m0-rceil-mul and pow2-rceil-mul round fl32(a fl32(1/A)) up to a power of two, stored as one
// E8M0 byte or as a binary32 (DeepEP's round_scale, with and without UE8M0); fp32-amax-mul-inv
// stores fl32(1 / m), the inverse scale a GEMM applies (torchao's float8 cast: FORMATS.md section 2).
// e8m0-fbgemm-even is FBGEMM's MX4 "even" shared exponent: a's bits plus 2^(22-M) - 1 (a step up only
// strictly above torchao's EVEN point), the exponent clamped to [-127, 125] (FORMATS.md section 2).
// fp32-eps-mul is FBGEMM's row-wise INT8: s = fl32(a / A), and each element (less the offset) is
// multiplied by m = fl32(A / fl32(a + eps)), eps the declared amax_eps (FORMATS.md section 2).
enum class ScaleType : uint8_t {
    kFp32Absmax = 0, kFp16Absmax = 1, kE8m0Floor = 2, kE8m0Rceil = 3, kNone = 4, kE8m0Even = 5, kE8m0Ceil = 6,
    kFp32AmaxMul = 7, kFp32AmaxMulRcp = 8, kE8m0RceilMul = 9, kPow2RceilMul = 10, kFp32AmaxMulInv = 11,
    kE8m0FbgemmEven = 12, kFp32EpsMul = 13, kE4m3TensorAmax = 14,
};
// A power-of-two scale stored as one E8M0 byte.
inline bool is_e8m0(ScaleType s) {
    return s == ScaleType::kE8m0Floor || s == ScaleType::kE8m0Rceil || s == ScaleType::kE8m0Even || s == ScaleType::kE8m0Ceil ||
           s == ScaleType::kE8m0RceilMul || s == ScaleType::kE8m0FbgemmEven;
}
// A power-of-two scale (E8M0, or pow2-rceil-mul's binary32): x / s is exact in the normal range.
inline bool is_pow2_scale(ScaleType s) { return is_e8m0(s) || s == ScaleType::kPow2RceilMul; }
// A scale whose element encode is x (less the offset) times a multiplier m rounded apart from the stored
// scale (so x / s and x m differ): fl32(A / max(a, amax_floor)) for fp32-amax-mul, fp32-amax-mul-rcp and
// fp32-amax-mul-inv, fl32(A / fl32(a + amax_eps)) for fp32-eps-mul, and NVFP4's
// min(fl32(1 / fl32(s_b S_dec)), FLT_MAX) for e4m3-tensor-amax (FORMATS.md section 2).
// (QT_HD: kernels/decl_math.hpp's decl_plan and decl_code_t call it on the device too.)
QT_HD bool multiplies(ScaleType s) {
    return s == ScaleType::kFp32AmaxMul || s == ScaleType::kFp32AmaxMulRcp || s == ScaleType::kFp32AmaxMulInv ||
           s == ScaleType::kFp32EpsMul || s == ScaleType::kE4m3TensorAmax;
}
// A scale computed from max(a, amax_floor) (the key `amax_floor`): the five "-mul" scales of the absmax.
inline bool takes_amax_floor(ScaleType s) {
    return s == ScaleType::kFp32AmaxMul || s == ScaleType::kFp32AmaxMulRcp || s == ScaleType::kFp32AmaxMulInv ||
           s == ScaleType::kE8m0RceilMul || s == ScaleType::kPow2RceilMul;
}
enum class Rounding : uint8_t { kNearestEven = 0, kNearestAway = 1, kNearestDown = 2, kTowardZero = 3, kStochastic = 4 };
enum class Packing : uint8_t { kLsbFirst = 0, kMsbFirst = 1 };
// A rotation of every block before it is quantized (FORMATS.md section 9): none, or the unnormalized
// Walsh-Hadamard transform (entries +-1), optionally after a random diagonal of +-1.
enum class Transform : uint8_t { kNone = 0, kHadamard = 1 };

const char* to_string(ElemType);
const char* to_string(FloatSpecial);
const char* to_string(ScaleType);
const char* to_string(Rounding);
const char* to_string(Packing);
const char* to_string(Transform);

inline constexpr int kMaxTable = 256;

// What another library's quantizer does at the extremes where it departs from the format's rules
// (docs/FORMATS.md section 10). Conventions change nothing qtransit computes (reference, kernels,
// bounds): they tell a codec check which differences from the format are a library's declared
// choice, so that such a difference is a named convention mismatch, reported apart, and not a
// failure. The default of every field is the format's own rule.
enum class ScaleFloorRule : uint8_t { kFormat = 0, kNone = 1, kValue = 2 };
// refuse: the format's (an error); poison: every element of the block decodes to NaN; propagate:
// each NaN or inf input decodes to inf or NaN, and the block's other elements are not compared
// (the library's scale came from a non-finite absmax).
// kSaturate (a format without a scale only): each NaN or inf element is written as the largest
// element value of its sign bit, as a saturating cast writes it (FBGEMM's HFP8); the others are the format's.
enum class NonfiniteRule : uint8_t { kRefuse = 0, kPoison = 1, kPropagate = 2, kSaturate = 3 };
const char* to_string(NonfiniteRule);  // its name in [conventions]: refuse, poison, propagate, saturate
struct Conventions {
    NonfiniteRule nonfinite = NonfiniteRule::kRefuse;  // a block holding NaN or inf
    ScaleFloorRule scale_floor = ScaleFloorRule::kFormat;  // fp32/fp16-absmax: the floor of s
    float scale_floor_value = 0;            // kValue: s = max(fl32(a / A), this), zero blocks too
    bool flush_scale_subnormals = false;    // scale_subnormals = "flush": a subnormal binary32 s becomes 0
    float divide_floor = 0;                 // > 0: where s < this, the quotient divides by divide_floor_by
    float divide_floor_by = 0;              // (0: divide_floor itself); s is still written and decodes
    bool zero_scale_ieee = false;           // zero_scale = "ieee": with s = 0, x / 0 as IEEE (0/0 NaN, x/0 inf)
    bool overflow_nonfinite = false;        // overflow = "nonfinite": past the largest value: inf or NaN
    bool flush_element_subnormals = false;  // element_subnormals = "flush": a subnormal element becomes 0
    bool decode_overflow_inf = false;       // decode_overflow = "inf": val * s past FLT_MAX is inf, not FLT_MAX
    // zero_sign = "any": where the format writes a zero (a decoded value, a scale, an offset) the
    // library may write the other zero. Not a rule that rewrites a block (any() leaves it out): the
    // codec check compares such a block's zeros as numbers, on every format (FORMATS.md section 10).
    bool zero_sign_any = false;
    // Whether the declaration has a [conventions] table at all.
    bool declared() const { return any() || zero_sign_any; }
    // The conventions that rewrite a block (convention_block): every one but zero_sign.
    bool any() const {
        return nonfinite != NonfiniteRule::kRefuse || decode_overflow_inf || scale_floor != ScaleFloorRule::kFormat || flush_scale_subnormals || divide_floor > 0 ||
               zero_scale_ieee || overflow_nonfinite || flush_element_subnormals;
    }
    friend bool operator==(const Conventions&, const Conventions&) = default;
};

struct Decl {
    // ---- declared -------------------------------------------------------------------------------
    ElemType elem = ElemType::kInt;
    int32_t bits = 8;              // code width, 2..8 (float: 1 + E + M; table: log2(count))
    // int
    bool is_signed = true;
    bool full_range = false;       // signed: [-2^(b-1), 2^(b-1)-1] instead of the restricted [-qmax, qmax]
    int32_t fraction_bits = 0;     // value = q * 2^-f
    // float
    int32_t exp_bits = 0, man_bits = 0, bias = 0;
    FloatSpecial special = FloatSpecial::kIeee;
    // table (values strictly increasing; table_size = 2^bits)
    int32_t table_size = 0;
    float table[kMaxTable] = {};
    // block-level
    ScaleType scale = ScaleType::kFp32Absmax;
    bool offset_min = false;
    Rounding rounding = Rounding::kNearestEven;
    Packing packing = Packing::kLsbFirst;
    int32_t fixed_block = 0;       // 0: any block size (--block); else the only one allowed
    // A 2-D block (the key `tile = [rows, cols]`, FORMATS.md section 8): a [R, C] tensor is quantized in
    // tiles of tile_rows x tile_cols, each one block of rows x cols elements (fixed_block) taken row by
    // row; 0: 1-D blocks of consecutive elements.
    int32_t tile_rows = 0, tile_cols = 0;
    Transform transform = Transform::kNone;  // hadamard: every block's length must be a power of two
    bool random_signs = false;     // hadamard only: a diagonal of +-1 keyed by (seed, block) first
    Conventions conventions;       // a library's choices at the extremes (section 10); none by default
    float amax_floor = 0;          // the "-mul" scales: a = max(absmax, amax_floor) (DeepEP 1e-4, FlashInfer 1e-12)
    float amax_eps = 0;            // fp32-eps-mul: m = fl32(A / fl32(a + amax_eps)) (FBGEMM 1e-20 on GPUs, 1e-8 on CPUs)
    bool decode_fma = false;       // decode = "fma" (offset min): sat(fl32(val s + lo)), one rounding (FBGEMM's fused decode)
    // e4m3-tensor-amax (NVFP4's second level): T, the amax of the tensor the blocks belong to, a
    // finite binary32 >= 0. Negative: not declared; finalize() makes it 448 A, whose tensor scale is 1.
    // `quantize` sets it to the amax of the tensor it is given (Transformer Engine's recipe).
    float tensor_amax = -1;

    // ---- derived by finalize() (what the kernels read) --------------------------------------------
    float amp = 0;                 // A: the scale maps a block's absmax (or range) onto it
    float amp_rcp = 0;             // fl32(1 / A): the "-rcp" and "rceil-mul" scales' constant
    int32_t emax_elem = 0;         // floor(log2 A)
    float vmax = 0, vmin = 0;      // largest and smallest finite element value
    int32_t qmin = 0, qmax = 0;    // int: the code range
    int32_t emin = 0;              // float: 1 - bias
    float max_finite = 0;          // float: the largest finite magnitude
    double mid[kMaxTable] = {};    // table: mid[i] = (table[i] + table[i+1]) / 2, exact
    // e4m3-tensor-amax, with K = 448 A: S_enc = min(fl32(K / T), FLT_MAX) (1 when T is 0 or that
    // is 0), S_dec = fl32(1 / S_enc), the block statistic's factor fl32(S_enc fl32(1 / A)), and the
    // decode's fl32(1 / K) (Transformer Engine's constants for E2M1: 2688 and RN(1/2688)).
    float t_enc = 0, t_dec = 0, t_blk = 0, t_rcp_k = 0;

    // Bytes of metadata per block: the scale's (4, 2, 1, 0) plus 4 for an offset.
    int metadata_bytes() const;
    int scale_bytes() const;
    // Smallest and largest code as the integers unpacking gives (int: signed values; float and
    // table: the raw unsigned code).
    int32_t code_min() const;
    int32_t code_max() const;
    // Whether the codes are two's complement (int signed) rather than plain unsigned.
    bool signed_codes() const { return elem == ElemType::kInt && is_signed; }
    bool rotated() const { return transform != Transform::kNone; }
    bool tiled() const { return tile_rows > 0; }
};

// Checks every field (a mistake is named by its TOML key) and fills the derived ones.
Status finalize(Decl& d);
// e4m3-tensor-amax: T = t (a finite binary32 >= 0) and the constants derived from it (a finalized d).
void set_tensor_amax(Decl& d, float t);

}  // namespace qtransit
