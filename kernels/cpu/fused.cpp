// CPU versions of the composite steps (fused.hpp): straight compositions of encode_into,
// decode_into and the sums of block_math.hpp.
#include "qtransit/kernels/fused.hpp"

#include <string>

namespace qtransit::kernels {

Result<SwizzleLayout> swizzle_layout(const FormatSpec& format, int64_t elements, int64_t ranks, int64_t ranks_per_node,
                                     int64_t block) {
    if (auto st = validate_block(block); !st) return st.error();
    if (format.rotated()) return make_error(ErrorCode::kInvalidArgument, format.name() + " is a rotated format: the fused steps do not rotate (encode and decode do)");
    if (ranks < 1 || ranks_per_node < 1 || ranks % ranks_per_node != 0 || elements < 0 || elements % ranks != 0)
        return make_error(ErrorCode::kInvalidArgument,
                          "swizzle: need N >= 1, G >= 1, N % G == 0 and M % N == 0 (N=" + std::to_string(ranks) +
                              ", G=" + std::to_string(ranks_per_node) + ", M=" + std::to_string(elements) + ")");
    SwizzleLayout l;
    l.ranks = ranks;
    l.ranks_per_node = ranks_per_node;
    l.elements = elements;
    l.chunk_elements = elements / ranks;
    const EncodedSizes sz = encoded_sizes(format, l.chunk_elements, block);
    l.chunk_blocks = sz.blocks;
    l.chunk_code_bytes = sz.code_bytes;
    l.chunk_offsets = sz.offsets;
    return l;
}

Status encode_swizzled_into(const FormatSpec& format, const SwizzleLayout& l, std::span<const float> x, int64_t block,
                            std::span<uint8_t> codes, std::span<float> scales, std::span<float> offsets,
                            const CodecOptions& options) {
    if (static_cast<int64_t>(x.size()) != l.elements || static_cast<int64_t>(codes.size()) != l.total_code_bytes() ||
        static_cast<int64_t>(scales.size()) != l.total_blocks() ||
        static_cast<int64_t>(offsets.size()) != l.total_offsets())
        return make_error(ErrorCode::kInvalidArgument, "encode_swizzled_into: buffers do not match the layout");
    const auto S = static_cast<size_t>(l.chunk_elements);
    for (int64_t k = 0; k < l.ranks; ++k) {
        const int64_t chunk = l.chunk_of_slot(k);
        CodecOptions o = options;
        o.site.index_base += chunk * l.chunk_elements;
        if (auto st = encode_into(format, x.subspan(static_cast<size_t>(chunk) * S, S), block,
                                  codes.subspan(static_cast<size_t>(k * l.chunk_code_bytes),
                                                static_cast<size_t>(l.chunk_code_bytes)),
                                  scales.subspan(static_cast<size_t>(k * l.chunk_blocks),
                                                 static_cast<size_t>(l.chunk_blocks)),
                                  offsets.subspan(static_cast<size_t>(k * l.chunk_offsets),
                                                  static_cast<size_t>(l.chunk_offsets)),
                                  o);
            !st)
            return st;
    }
    return Status::Ok();
}

namespace {
Status check_inputs(std::span<const EncodedTensor> inputs) {
    if (inputs.empty()) return make_error(ErrorCode::kInvalidArgument, "reduce: no inputs");
    const EncodedTensor& a = inputs.front();
    if (auto st = validate_block(a.block); !st) return st;
    if (a.format.rotated())
        return make_error(ErrorCode::kInvalidArgument, a.format.name() + " is a rotated format: the fused steps do not rotate (encode and decode do)");
    for (const auto& t : inputs)
        if (t.format.name() != a.format.name() || t.block != a.block || t.elements != a.elements)
            return make_error(ErrorCode::kInvalidArgument, "reduce: inputs differ in format, block or length");
    return Status::Ok();
}
}  // namespace

Result<std::vector<float>> reduce_decoded(std::span<const EncodedTensor> inputs, Accum accum) {
    if (auto st = check_inputs(inputs); !st) return st.error();
    std::vector<float> acc = decode(inputs.front(), 1);
    for (float& v : acc) v = accum_first(v, accum);
    std::vector<float> term;
    for (size_t g = 1; g < inputs.size(); ++g) {
        term = decode(inputs[g], 1);
        for (size_t i = 0; i < acc.size(); ++i) acc[i] = accum_add(acc[i], term[i], accum);
    }
    return acc;
}

Result<EncodedTensor> reduce_requantize(std::span<const EncodedTensor> inputs, Accum accum,
                                        const CodecOptions& options) {
    auto sum = reduce_decoded(inputs, accum);
    if (!sum.ok()) return sum.error();
    CodecOptions o = options;
    if (o.site.tensor == "input") o.site.tensor = "reduced sum";
    return encode(inputs.front().format, *sum, inputs.front().block, o);
}

Status decode_add(const EncodedTensor& in, std::span<const float> own, Accum accum, std::span<float> out) {
    if (static_cast<int64_t>(own.size()) != in.elements || static_cast<int64_t>(out.size()) != in.elements)
        return make_error(ErrorCode::kInvalidArgument, "decode_add: own and out must have the tensor's length");
    decode_into(in.format, in.block, in.codes, in.scales, in.offsets, out, 1, in.key);
    for (size_t i = 0; i < out.size(); ++i) out[i] = accum_add(accum_first(out[i], accum), own[i], accum);
    return Status::Ok();
}

}  // namespace qtransit::kernels
