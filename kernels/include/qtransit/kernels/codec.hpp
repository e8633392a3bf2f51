// The production quantizer on the CPU: encode a tensor block-wise into its wire form (packed codes
// plus per-block metadata) and decode it back, with the block arithmetic of block_math.hpp.
// Vectorized straight loops (compiled for x86-64-v3/v4 with a run-time choice on x86-64) and
// threads over blocks for large tensors.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "qtransit/common/format.hpp"
#include "qtransit/common/status.hpp"
#include "qtransit/kernels/block_math.hpp"
#include "qtransit/kernels/hadamard.hpp"

namespace qtransit::kernels {

inline Kind kind_of(const FormatSpec& f) { return static_cast<Kind>(static_cast<uint8_t>(f.kind)); }

// The code of element i of a block's packed bytes, for any format (int32 as docs/FORMATS.md says).
int32_t unpack_code(const FormatSpec& f, const uint8_t* block_bytes, int64_t i);
// unpack_code of elements 0 .. n-1 of one block, into out (the simulation's ledger of every event).
void unpack_block_codes(const FormatSpec& f, const uint8_t* block_bytes, int64_t n, int32_t* out);

// The wire form of a quantized tensor: block j's codes start at byte j * code_bytes(block).
struct EncodedTensor {
    FormatSpec format;
    int64_t block = kDefaultBlock;
    int64_t elements = 0;
    std::vector<uint8_t> codes;   // packed codes of every block, in order
    std::vector<float> scales;    // per block: s, or the stored step Δ for ds-int<b>; NaN: poisoned
    std::vector<float> offsets;   // per block: lo (formats with an offset only, else empty)
    // A rotated format with random signs: what they were keyed by (the seed and the index of
    // element 0), so that decode() draws the same ones. Unused by every other format.
    SignKey key;

    int64_t blocks() const { return block > 0 ? (elements + block - 1) / block : 0; }
    int64_t wire_bytes() const { return format.wire_bytes(elements, block) + (elements > 0 ? format.tensor_bytes() : 0); }
};

// Sizes of the buffers encode_into() fills.
struct EncodedSizes {
    int64_t blocks = 0, code_bytes = 0, offsets = 0;
};
EncodedSizes encoded_sizes(const FormatSpec& format, int64_t elements, int64_t block);
// An EncodedTensor with its buffers sized for `elements` values (what every backend's encode fills).
EncodedTensor sized_encoded(const FormatSpec& format, int64_t elements, int64_t block);

struct CodecOptions {
    Nonfinite policy = Nonfinite::kError;
    Site site{};
    int threads = 0;  // 0: every hardware thread for large tensors, 1 for small ones
    // Stochastic rounding's key (docs/FORMATS.md section 4): with site.rank (the rank word; < 0:
    // 0xFFFFFFFF) and site.index_base (the index of element 0 in the tensor being quantized).
    uint64_t seed = 0;
    uint32_t hop = 0;
    // A codec plugin of a format with a tensor amax (nvfp4): the T to encode under; < 0: the
    // format's declared one. qtransit's own kernels take T from the FormatSpec instead.
    float tensor_amax = -1.0f;
};

// Check the arguments every entry point shares: block >= 1.
Status validate_block(int64_t block);

// Encode into caller-provided buffers (sizes from encoded_sizes()). On error nothing the caller can
// rely on was produced; the Error names the first offending element (docs/DECISIONS.md D5).
Status encode_into(const FormatSpec& format, std::span<const float> x, int64_t block,
                   std::span<uint8_t> codes, std::span<float> scales, std::span<float> offsets,
                   const CodecOptions& options = {});
Result<EncodedTensor> encode(const FormatSpec& format, std::span<const float> x, int64_t block,
                             const CodecOptions& options = {});
// Tests only: with false, encode_into encodes the declared formats the unfused way even where their
// fused AVX-512 paths apply (a rotated format: a chunk rotated into a buffer, then encoded; a plain
// one: a chunk's statistics, then its codes); true (the default) again.
void set_fused_encode(bool on);
// Tests only: with false, encode_into and decode_into run int2, int3, int5, int6 and int7 by their
// hand-written loops even where they would run their declared twins (the same declaration, through
// the declared formats' AVX-512 kernels); true (the default) again.
void set_declared_twins(bool on);

// Decode a whole tensor (out.size() == elements). key: a rotated format's sign key, as encode had it
// (the seed and site.index_base of its CodecOptions: sign_key()); block j's signs use key.first + j block.
void decode_into(const FormatSpec& format, int64_t block, std::span<const uint8_t> codes,
                 std::span<const float> scales, std::span<const float> offsets, std::span<float> out,
                 int threads = 0, const SignKey& key = {});
std::vector<float> decode(const EncodedTensor& t, int threads = 0);

// One block of `len` values on the calling thread, without allocating: what a collective does at
// every hop. codes must hold format.code_bytes(len) bytes; offset is written for asym only.
// Under the `error` policy a non-finite block (or a range overflow) is refused like encode_into.
Status encode_block(const FormatSpec& format, const float* x, int64_t len, uint8_t* codes, float* scale,
                    float* offset, const CodecOptions& options = {});
void decode_block(const FormatSpec& format, const uint8_t* codes, int64_t len, float scale, float offset, float* out,
                  const SignKey& key = {});
// The sign key encode drew a rotated format's signs from under these options.
inline SignKey sign_key(const CodecOptions& o) { return SignKey{o.seed, o.site.index_base}; }

// The Error for a block that encode refused under the `error` policy: names the first non-finite
// element, the element that overflows binary16 (ds-int<b>), or the block whose range overflows.
// `first` is the block's first index in the tensor. Shared by the CPU and CUDA backends.
Error describe_block_error(const FormatSpec& format, const float* block_values, int64_t len, int64_t first,
                           const Site& site);

// A declared format with scale `none` and no NaN code cannot mark a poisoned block: `propagate`
// refuses the block with this Error (first: the block's first index).
Error unmarkable_poison_error(const FormatSpec& format, int64_t first, const Site& site);

// What the refusal flag of a device encode says (gpu::encode_device_queued): `flag` is the lowest
// refused block, or ~0 for none; x holds the n values that were encoded, on the host, in blocks of
// `block`. Ok, or the Error the same encode gives on the CPU (describe_block_error under `error`,
// unmarkable_poison_error under `propagate`). A flag past the last block is an internal error.
Status refusal_of_flag(const FormatSpec& format, uint64_t flag, const float* x, int64_t n, int64_t block,
                       const CodecOptions& options);

// The codes as integers, one per element.
std::vector<int32_t> unpack_codes(const EncodedTensor& t);

}  // namespace qtransit::kernels
