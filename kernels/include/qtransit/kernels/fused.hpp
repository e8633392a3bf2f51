// The composite steps of the collective paths, on the CPU: qgZ's swizzled stage-1 encode, the fused
// dequantize-reduce-requantize of qgZ stage 2, and the decode-and-add of a ring hop. Each is the
// plain composition of encode/decode with the sums of block_math.hpp (accum_first, accum_add), so
// the CUDA versions (gpu.hpp) can be compared with them bit for bit.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "qtransit/common/status.hpp"
#include "qtransit/common/transit.hpp"
#include "qtransit/kernels/codec.hpp"

namespace qtransit::kernels {

// qgZ stage 1 (NUMERICS 3, a2a-hier-rs): a rank's M elements are N chunks of S = M / N; each chunk
// is quantized on its own (blocks restart at every chunk), and the encoded chunks are laid out so
// that local peer l' receives chunks {l' + G m : m = 0..nodes-1} as one contiguous run: slot
// k = l' * nodes + m holds chunk l' + G m. Slot k's codes start at k * chunk_code_bytes, its scales
// (and asym offsets) at k * chunk_blocks.
struct SwizzleLayout {
    int64_t ranks = 0, ranks_per_node = 0, elements = 0;  // N, G, M
    int64_t chunk_elements = 0;                           // S
    int64_t chunk_blocks = 0, chunk_code_bytes = 0, chunk_offsets = 0;
    int64_t nodes() const { return ranks / ranks_per_node; }
    int64_t chunk_of_slot(int64_t k) const { return (k / nodes()) + ranks_per_node * (k % nodes()); }
    int64_t total_code_bytes() const { return ranks * chunk_code_bytes; }
    int64_t total_blocks() const { return ranks * chunk_blocks; }
    int64_t total_offsets() const { return ranks * chunk_offsets; }
};
Result<SwizzleLayout> swizzle_layout(const FormatSpec& format, int64_t elements, int64_t ranks, int64_t ranks_per_node,
                                     int64_t block);

// Buffers sized by the layout's totals.
Status encode_swizzled_into(const FormatSpec& format, const SwizzleLayout& layout, std::span<const float> x,
                            int64_t block, std::span<uint8_t> codes, std::span<float> scales,
                            std::span<float> offsets, const CodecOptions& options = {});

// qgZ stage 2 fused: decode each input (all of the same format, block and length), sum them left
// to right in input order (fp32, or fp16 as D11 defines), and requantize the sum in the same
// format and block. A sum that overflows makes a non-finite block: refused or poisoned by policy.
Result<EncodedTensor> reduce_requantize(std::span<const EncodedTensor> inputs, Accum accum,
                                        const CodecOptions& options = {});
// The sum alone (before requantizing), for checks.
Result<std::vector<float>> reduce_decoded(std::span<const EncodedTensor> inputs, Accum accum);

// A ring hop: out_i = accum_add(accum_first(D(Q(P))_i), own_i): the decoded message is the left
// operand (NUMERICS 3, ring-rs).
Status decode_add(const EncodedTensor& in, std::span<const float> own, Accum accum, std::span<float> out);

}  // namespace qtransit::kernels
