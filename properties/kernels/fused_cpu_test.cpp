// The CPU versions of the composite steps (fused.hpp) equal straightforward compositions of
// encode_block / decode_block, block by block, written here independently of fused.cpp. The GPU
// tests compare the CUDA kernels with these CPU versions, so this is the link to the codec.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "qtransit/common/bits.hpp"
#include "qtransit/kernels/codec.hpp"
#include "qtransit/kernels/fp16.hpp"
#include "qtransit/kernels/fused.hpp"
#include "qtransit/kernels/inputs.hpp"

namespace qt = qtransit;
namespace qk = qtransit::kernels;

namespace {
std::vector<float> make_input(const qt::FormatSpec& f, int64_t n, std::mt19937_64& rng, int trial) {
    const auto& dists = qk::all_distributions();
    std::vector<float> x(static_cast<size_t>(n));
    qk::generate_span(dists[static_cast<size_t>(trial) % dists.size()], rng(), static_cast<uint32_t>(trial), 0, x);
    if (f.kind == qt::FormatKind::kDs)
        for (float& v : x) v = std::fmod(v, 60000.0f);
    return x;
}
// Decode block j of an encoded tensor with decode_block.
std::vector<float> decode_block_of(const qk::EncodedTensor& t, int64_t j) {
    const int64_t first = j * t.block, len = std::min(t.block, t.elements - first);
    std::vector<float> out(static_cast<size_t>(len));
    qk::decode_block(t.format, t.codes.data() + j * t.format.code_bytes(t.block), len, t.scales[static_cast<size_t>(j)],
                     t.offsets.empty() ? 0.0f : t.offsets[static_cast<size_t>(j)], out.data());
    return out;
}
float h(float v) { return qk::round_f16(v); }
float bh(float v) { return qk::round_bf16(v); }
// The test's own spelling of D11 and D24: a value rounded to the accumulation type.
float to_acc(qt::Accum a, float v) { return a == qt::Accum::kFp16 ? h(v) : a == qt::Accum::kBf16 ? bh(v) : v; }
using qtransit::same_bits;
}  // namespace

TEST(FusedCpu, SwizzleIsChunkwiseEncodeInPeerOrder) {
    std::mt19937_64 rng(7101);
    for (const char* name : {"int8", "int4", "int3", "int6-asym", "ds-int4"}) {
        const auto f = *qt::parse_format(name);
        for (auto [N, G, S, B] : {std::tuple<int64_t, int64_t, int64_t, int64_t>{8, 4, 100, 32}, {6, 3, 37, 7},
                                  {4, 2, 5, 64}, {1, 1, 50, 16}}) {
            const auto x = make_input(f, N * S, rng, static_cast<int>(B));
            const auto lay = *qk::swizzle_layout(f, N * S, N, G, B);
            std::vector<uint8_t> c(static_cast<size_t>(lay.total_code_bytes()));
            std::vector<float> s(static_cast<size_t>(lay.total_blocks())), o(static_cast<size_t>(lay.total_offsets()));
            ASSERT_TRUE(qk::encode_swizzled_into(f, lay, x, B, c, s, o).ok());
            // Slot k = l' * nodes + m must hold chunk l' + G m, blocks restarting at the chunk.
            const int64_t nodes = N / G;
            int64_t byte = 0, blk = 0;
            for (int64_t lp = 0; lp < G; ++lp) {
                for (int64_t m = 0; m < nodes; ++m) {
                    const int64_t chunk = lp + G * m;
                    for (int64_t b0 = 0; b0 < S; b0 += B) {
                        const int64_t len = std::min(B, S - b0);
                        std::vector<uint8_t> codes(static_cast<size_t>(f.code_bytes(len)));
                        float sc = 0, off = 0;
                        ASSERT_TRUE(qk::encode_block(f, x.data() + chunk * S + b0, len, codes.data(), &sc, &off).ok());
                        ASSERT_TRUE(std::equal(codes.begin(), codes.end(), c.begin() + byte)) << name << " chunk " << chunk;
                        ASSERT_TRUE(same_bits(sc, s[static_cast<size_t>(blk)])) << name;
                        if (f.kind == qt::FormatKind::kAsym) {
                            ASSERT_TRUE(same_bits(off, o[static_cast<size_t>(blk)]));
                        }
                        byte += f.code_bytes(B);  // full blocks are block_bytes apart; the tail is last
                        ++blk;
                    }
                    byte = (lp * nodes + m + 1) * lay.chunk_code_bytes;
                }
            }
        }
    }
}

TEST(FusedCpu, ReduceRequantizeIsDecodeSumEncode) {
    std::mt19937_64 rng(7102);
    for (const auto& f : qt::builtin_formats()) {
        for (int trial = 0; trial < 4; ++trial) {
            const int G = 1 + 2 * trial;
            const int64_t n = std::uniform_int_distribution<int64_t>(1, 700)(rng);
            const int64_t B = std::uniform_int_distribution<int64_t>(1, 90)(rng);
            std::vector<qk::EncodedTensor> in;
            for (int g = 0; g < G; ++g) in.push_back(*qk::encode(f, make_input(f, n, rng, trial + g), B));
            for (auto accum : {qt::Accum::kFp32, qt::Accum::kFp16, qt::Accum::kBf16}) {
                qk::CodecOptions opt;
                opt.policy = qt::Nonfinite::kPropagate;
                const auto got = qk::reduce_requantize(in, accum, opt);
                ASSERT_TRUE(got.ok());
                for (int64_t j = 0; j < got->blocks(); ++j) {
                    std::vector<float> acc = decode_block_of(in[0], j);
                    for (float& v : acc) v = to_acc(accum, v);
                    for (int g = 1; g < G; ++g) {
                        const auto t = decode_block_of(in[static_cast<size_t>(g)], j);
                        for (size_t i = 0; i < acc.size(); ++i)
                            acc[i] = to_acc(accum, acc[i] + to_acc(accum, t[i]));
                    }
                    const int64_t len = static_cast<int64_t>(acc.size());
                    std::vector<uint8_t> codes(static_cast<size_t>(f.code_bytes(len)));
                    float sc = 0, off = 0;
                    ASSERT_TRUE(qk::encode_block(f, acc.data(), len, codes.data(), &sc, &off, opt).ok());
                    ASSERT_TRUE(std::equal(codes.begin(), codes.end(), got->codes.begin() + j * f.code_bytes(B)))
                        << f.name() << " block " << j;
                    ASSERT_TRUE(same_bits(sc, got->scales[static_cast<size_t>(j)])) << f.name();
                }
            }
        }
    }
}

TEST(FusedCpu, DecodeAddPutsTheDecodedMessageOnTheLeft) {
    std::mt19937_64 rng(7103);
    for (const auto& f : qt::builtin_formats()) {
        const int64_t n = 333, B = 40;
        const auto t = *qk::encode(f, make_input(f, n, rng, 2), B);
        const auto own = make_input(f, n, rng, 3);
        for (auto accum : {qt::Accum::kFp32, qt::Accum::kFp16, qt::Accum::kBf16}) {
            std::vector<float> out(static_cast<size_t>(n));
            ASSERT_TRUE(qk::decode_add(t, own, accum, out).ok());
            for (int64_t j = 0; j < t.blocks(); ++j) {
                const auto d = decode_block_of(t, j);
                for (size_t i = 0; i < d.size(); ++i) {
                    const float o = own[static_cast<size_t>(j * B) + i];
                    const float want = to_acc(accum, to_acc(accum, d[i]) + to_acc(accum, o));
                    ASSERT_TRUE(same_bits(want, out[static_cast<size_t>(j * B) + i])) << f.name();
                }
            }
        }
    }
}

TEST(FusedCpu, RefusesMismatchedInputsAndBadLayouts) {
    const auto f = *qt::parse_format("int8");
    std::vector<float> x(64, 1.0f);
    std::vector<qk::EncodedTensor> in{*qk::encode(f, x, 32), *qk::encode(f, x, 16)};
    EXPECT_FALSE(qk::reduce_requantize(in, qt::Accum::kFp32).ok());
    EXPECT_FALSE(qk::swizzle_layout(f, 100, 8, 3, 32).ok());
    EXPECT_FALSE(qk::swizzle_layout(f, 100, 8, 4, 32).ok());  // 100 % 8 != 0
}
