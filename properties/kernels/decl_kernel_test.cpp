// The generic declared-format kernel (kernels/decl_math.hpp): the golden vectors of issue 6 worked
// out by hand from docs/FORMATS.md, the built-in integer formats reproduced bit for bit by their
// declarations, both packings, the poisoned-block markers and stochastic rounding's replay.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <vector>

#include "../generators.hpp"
#include "qtransit/common/decl_toml.hpp"
#include "qtransit/common/philox.hpp"
#include "qtransit/kernels/codec.hpp"
#include "qtransit/kernels/decl_math.hpp"
#include "qtransit/reference/formats.hpp"
// The CPU backend's batched words (round_words_scalar, round_words_avx512): a header of the backend's
// own, tested here directly.
#include "../../kernels/cpu/decl_fast.hpp"

namespace qt = qtransit;
using qt::FormatSpec;

namespace {
using qt::testing::to_bits;
uint32_t bits(float f) { return to_bits(f); }
FormatSpec fmt(const char* name) {
    auto f = qt::parse_format(name);
    EXPECT_TRUE(f.ok()) << name;
    return *f;
}
qt::kernels::EncodedTensor enc(const FormatSpec& f, const std::vector<float>& x, int64_t block,
                                qt::kernels::CodecOptions o = {}) {
    auto r = qt::kernels::encode(f, x, block, o);
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
    return r.ok() ? *r : qt::kernels::EncodedTensor{};
}
uint8_t scale_byte(const FormatSpec& f, float s) {
    uint8_t b[8] = {};
    qt::write_metadata(f, s, 0.0f, b);
    return b[0];
}
// An MX block: the values given, padded with zeros to 32.
std::vector<float> mx_block(std::vector<float> v) {
    v.resize(32, 0.0f);
    return v;
}
}  // namespace

TEST(DeclGolden, Fp8E4m3RoundsThenSaturates) {
    // absmax 448 -> s = fl32(448 / 448) = 1: the elements are rounded as they are.
    // 400 lies between 384 (1.100b 2^8) and 416 (1.101b 2^8) at spacing 32: 400 is the tie, and the
    // even mantissa is 384 (416 would be ties-away). 464 is the tie of 448 (1.110b) and 480
    // (1.111b, the NaN code): even -> 448. 465 rounds to 480, then saturates to 448.
    const auto f = fmt("fp8-e4m3");
    const auto u = enc(f, {448.0f, 400.0f, -448.0f}, 3);
    EXPECT_EQ(u.scales[0], 1.0f);
    EXPECT_EQ(qt::kernels::unpack_codes(u), (std::vector<int32_t>{0x7E, 0x7C, 0xFE}));  // 448, 384, -448
    const auto dec = qt::kernels::decode(u);
    EXPECT_EQ(dec[1], 384.0f);
    // With scale 2^0 by e8m0: mxfp8-e4m3, a block with absmax 465 -> floor(log2 465) - 8 = 0.
    const auto m = enc(fmt("mxfp8-e4m3"), mx_block({400.0f, 464.0f, 465.0f}), 32);
    EXPECT_EQ(scale_byte(fmt("mxfp8-e4m3"), m.scales[0]), 127);
    const auto q = qt::kernels::unpack_codes(m);
    EXPECT_EQ(q[0], 0x7C);  // 384
    EXPECT_EQ(q[1], 0x7E);  // 448
    EXPECT_EQ(q[2], 0x7E);  // 480 -> saturated 448
}

TEST(DeclGolden, Fp4E2m1) {
    // A 6 in the block: floor(log2 6) - emax_elem 2 = 0, scale 1. Ties to even mantissa:
    // 0.25 -> 0, 0.75 -> 1, 1.25 -> 1, 1.75 -> 2, 2.5 -> 2, 3.5 -> 4, 5 -> 4.
    const auto f = fmt("mxfp4");
    const auto t = enc(f, mx_block({6.0f, 0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f}), 32);
    EXPECT_EQ(scale_byte(f, t.scales[0]), 127);
    const auto d = qt::kernels::decode(t);
    const std::vector<float> want{6, 0, 1, 1, 2, 2, 4, 4};
    for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(d[i], want[i]) << i;
    // Codes: E2M1 bias 1: 6 = 0b0111, 1 = 0b0010, 2 = 0b0100, 4 = 0b0110; element 0 in the low nibble.
    EXPECT_EQ(t.codes[0], 0x07);        // 6, then 0
    EXPECT_EQ(t.codes[1], 0x22);        // 1, 1
    EXPECT_EQ(t.codes[2], 0x44);        // 2, 2
    EXPECT_EQ(t.codes[3], 0x66);        // 4, 4
}

TEST(DeclGolden, Fp6E3m2) {
    // 28 is E3M2's largest (1.11b 2^4): scale 1. 29 -> 28 (0b011111), 26 is the tie of 24
    // (1.10b, even) and 28 -> 24 = 0b011110.
    const auto f = fmt("mxfp6-e3m2");
    const auto t = enc(f, mx_block({28.0f, 29.0f, 26.0f}), 32);
    EXPECT_EQ(scale_byte(f, t.scales[0]), 127);
    const auto q = qt::kernels::unpack_codes(t);
    EXPECT_EQ(q[1], 0b011111);
    EXPECT_EQ(q[2], 0b011110);
}

TEST(DeclGolden, Mxfp8FloorAgainstRceil) {
    // All 480: floor(log2 480) - 8 = 0 -> byte 127, 480 rounds to 480 (the NaN code's value) and
    // saturates to 448 = 0x7E. rceil: the smallest e with 480 <= 448 2^e is 1 -> byte 128,
    // 480 / 2 = 240 = 1.111b 2^7 = 0x77.
    const auto fl = fmt("mxfp8-e4m3"), rc = fmt("mxfp8-e4m3-rceil");
    const std::vector<float> x(32, 480.0f);
    const auto a = enc(fl, x, 32), b = enc(rc, x, 32);
    EXPECT_EQ(scale_byte(fl, a.scales[0]), 127);
    EXPECT_EQ(scale_byte(rc, b.scales[0]), 128);
    EXPECT_EQ(a.codes[0], 0x7E);
    EXPECT_EQ(b.codes[0], 0x77);
    // FLT_MAX: floor(log2) = 127, 127 - 8 = 119 -> byte 246; FLT_MAX / 2^119 = 511.99.. rounds to
    // 512, saturates to 448 = 0x7E. rceil: FLT_MAX <= 448 2^120 -> byte 247; FLT_MAX / 2^120 =
    // 255.99.. rounds to 256 = 0x78.
    const std::vector<float> m(32, FLT_MAX);
    const auto c = enc(fl, m, 32), d = enc(rc, m, 32);
    EXPECT_EQ(scale_byte(fl, c.scales[0]), 246);
    EXPECT_EQ(scale_byte(rc, d.scales[0]), 247);
    EXPECT_EQ(c.codes[0], 0x7E);
    EXPECT_EQ(d.codes[0], 0x78);
}

TEST(DeclGolden, SignedZeroAndZeroBlock) {
    const auto f = fmt("mxfp8-e4m3");
    std::vector<float> x(32, 1.0f);
    x[5] = -FLT_TRUE_MIN;  // a negative subnormal rounds to -0 and keeps its sign
    const auto t = enc(f, x, 32);
    EXPECT_EQ(t.codes[5], 0x80);
    EXPECT_EQ(bits(qt::kernels::decode(t)[5]), 0x80000000u);
    const auto z = enc(f, std::vector<float>(32, 0.0f), 32);
    EXPECT_EQ(scale_byte(f, z.scales[0]), 0x00);
    EXPECT_EQ(z.scales[0], std::ldexp(1.0f, -127));  // byte 0 decodes to 2^-127, a binary32 subnormal
}

TEST(DeclGolden, Mxint8AndE5m2) {
    // mxint8: amax 127/64 -> floor(log2) = 0 -> scale 1; elements are k/64, saturated to +-127/64.
    const auto f = fmt("mxint8");
    const auto t = enc(f, mx_block({127.0f / 64, 1.0f, -127.0f / 64, 0.01f}), 32);
    EXPECT_EQ(scale_byte(f, t.scales[0]), 127);
    const auto q = qt::kernels::unpack_codes(t);
    EXPECT_EQ(q[0], 127);
    EXPECT_EQ(q[1], 64);
    EXPECT_EQ(q[2], -127);
    EXPECT_EQ(q[3], 1);  // 0.64 -> 1
    // fp8-e5m2: 57344 = 1.11b 2^15 is the largest (0x7B); 0.3 with s = 1 -> 0.3125 (1.01b 2^-2 = 0x35).
    const auto e = enc(fmt("fp8-e5m2"), {57344.0f, 1.0f, 0.3f}, 3);
    EXPECT_EQ(e.scales[0], 1.0f);
    EXPECT_EQ(qt::kernels::unpack_codes(e), (std::vector<int32_t>{0x7B, 0x3C, 0x35}));
}

TEST(DeclGolden, Nf4HighNibbleFirstAndLowerTies) {
    const auto f = fmt("nf4");
    // absmax 1: s = 1. 0.5 is nearest 0.4407 (code 12); -1 -> 0; 0 -> 7. Exact midpoints go to the
    // lower code: 0.0795803 / 2 (between codes 7 and 8) -> 7, -0.0910500 / 2 (codes 6, 7) -> 6.
    const float m78 = 0.07958029955625534f / 2, m67 = -0.09105003625154495f / 2;
    const auto t = enc(f, {1.0f, -1.0f, 0.5f, 0.0f, m78, m67, -0.0f}, 7);
    EXPECT_EQ(t.scales[0], 1.0f);
    EXPECT_EQ(qt::kernels::unpack_codes(t), (std::vector<int32_t>{15, 0, 12, 7, 7, 6, 7}));
    EXPECT_EQ(t.codes[0], 0xF0);  // element 0 (15) in the high nibble
    EXPECT_EQ(t.codes[1], 0xC7);
    EXPECT_EQ(t.codes[2], 0x76);
    EXPECT_EQ(t.codes[3], 0x70);  // element 6, then the pad nibble 0
}

TEST(DeclKernel, PoisonedBlocksUnderPropagate) {
    qt::kernels::CodecOptions o;
    o.policy = qt::Nonfinite::kPropagate;
    std::vector<float> x(64, 1.0f);
    x[40] = INFINITY;
    const auto f = fmt("mxfp8-e4m3");
    const auto t = enc(f, x, 32, o);
    EXPECT_EQ(scale_byte(f, t.scales[0]), 119);  // floor(log2 1) - 8 = -8
    EXPECT_EQ(scale_byte(f, t.scales[1]), 0xFF);
    const auto d = qt::kernels::decode(t);
    EXPECT_EQ(d[0], 1.0f);
    for (int i = 32; i < 64; ++i) EXPECT_EQ(bits(d[static_cast<size_t>(i)]), 0x7FC00000u) << i;
    // Under `error` the first non-finite element is named.
    auto r = qt::kernels::encode(f, x, 32);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("element 40"), std::string::npos) << r.error().message;
}

TEST(DeclKernel, FixedBlockIsEnforced) {
    auto r = qt::kernels::encode(fmt("mxfp4"), std::vector<float>(64, 1.0f), 16);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("fixed blocks of 32"), std::string::npos) << r.error().message;
}

TEST(DeclKernel, StochasticRoundingReplaysAndDependsOnTheKey) {
    const auto f = fmt("int4-sr");
    std::vector<float> x(4096);
    for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(static_cast<float>(i)) * 7.0f;
    qt::kernels::CodecOptions a, b;
    a.seed = b.seed = 17;
    const auto t1 = enc(f, x, 32, a), t2 = enc(f, x, 32, b);
    EXPECT_EQ(t1.codes, t2.codes);
    b.seed = 18;
    EXPECT_NE(enc(f, x, 32, b).codes, t1.codes);
    b.seed = 17;
    b.hop = 1;
    EXPECT_NE(enc(f, x, 32, b).codes, t1.codes);
    b.hop = 0;
    b.site.rank = 3;
    EXPECT_NE(enc(f, x, 32, b).codes, t1.codes);
    // Every code is one of the two neighbours of x / s.
    const auto q = qt::kernels::unpack_codes(t1);
    for (size_t i = 0; i < x.size(); ++i) {
        const float v = x[i] / t1.scales[i / 32];
        EXPECT_TRUE(q[i] == std::floor(v) || q[i] == std::ceil(v)) << i << " " << v << " " << q[i];
    }
}

// ---- stochastic rounding's words (FORMATS.md section 4) -------------------------------------------
// The definition, word for word: element g's word is word (g & 3) of Philox4x32-10 with key
// (lo32(seed), hi32(seed)) at counter (lo32(g >> 2), hi32(g >> 2), rank word, 4 | (hop << 8)).
uint32_t spec_word(uint64_t seed, uint32_t rank_word, uint32_t hop, uint64_t g) {
    const uint64_t c = g >> 2;
    return qt::philox4x32_10(qt::Philox4x32{{static_cast<uint32_t>(c), static_cast<uint32_t>(c >> 32), rank_word, 4u | (hop << 8)}},
                             static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32))
        .v[g & 3];
}

TEST(DeclStochasticWords, RoundBitsAreTheDefinitionsWords) {
    // Golden words from an independent Philox4x32-10 (Python, checked against Random123's known
    // answers), seed 0x0123456789ABCDEF, rank word 3, hop 2: g across a multiple of 4, and across
    // counter 2^32 (g = 2^34), where the counter's high word starts to count.
    const struct {
        uint64_t g;
        uint32_t w;
    } golden[] = {{0, 0x59AF6306u},           {1, 0xEFE7EF0Au},           {2, 0x8493474Cu},
                  {3, 0x1F77EACDu},           {4, 0xD4BDF347u},           {5, 0x9905833Eu},
                  {7, 0x67E84498u},           {0x3FFFFFFFDu, 0xDC8E15A5u}, {0x3FFFFFFFEu, 0x50EDD02Au},
                  {0x3FFFFFFFFu, 0x0AD49575u}, {0x400000000u, 0xC18D2A35u}, {0x400000001u, 0xB4576F06u},
                  {0x400000002u, 0x877AAC16u}};
    for (const auto& t : golden) {
        EXPECT_EQ(spec_word(0x0123456789ABCDEFu, 3, 2, t.g), t.w) << t.g;
        for (int64_t i : {int64_t{0}, int64_t{1}, int64_t{6}}) {  // the same g, however it splits into base + i
            qt::kernels::RoundKey k{0x0123456789ABCDEFu, 3, 2, static_cast<int64_t>(t.g) - i};
            EXPECT_EQ(qt::kernels::round_bits(k, i), t.w) << t.g << " " << i;
        }
    }
    // Outside a collective (rank word 0xFFFFFFFF, hop 0), seed 17: one call's four words are
    // elements 0..3, the next call's elements 4..
    const uint32_t s17[] = {0x87A8A069u, 0xF4BD2E32u, 0xA6FB16C8u, 0xE5BCB15Du, 0xEA6FBF8Du, 0x18F92E75u};
    for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(qt::kernels::round_bits(qt::kernels::RoundKey{17, 0xFFFFFFFFu, 0, 0}, i), s17[i]) << i;
    // Against the definition for bases on either side of multiples of 4, of 2^32 and of 2^34, and
    // other keys.
    for (const uint64_t seed : {uint64_t{0}, uint64_t{17}, uint64_t{0xFEDCBA9876543210u}})
        for (const uint32_t rank_word : {0u, 5u, 0xFFFFFFFFu})
            for (const uint32_t hop : {0u, 1u, 3u})
                for (const int64_t base : {int64_t{0}, int64_t{1}, int64_t{3}, int64_t{4093}, (int64_t{1} << 32) - 5,
                                           (int64_t{1} << 34) - 7, (int64_t{1} << 40) + 2})
                    for (int64_t i = 0; i < 11; ++i)
                        EXPECT_EQ(qt::kernels::round_bits(qt::kernels::RoundKey{seed, rank_word, hop, base}, i),
                                  spec_word(seed, rank_word, hop, static_cast<uint64_t>(base + i)))
                            << seed << " " << rank_word << " " << hop << " " << base << " " << i;
}

// The CPU backend's batches (a call's words for n elements from any index_base) are round_bits'
// words: the scalar batch, and the AVX-512 one (32 counters, 128 elements, a batch) where the CPU
// has it. Nothing past out[n) is written.
TEST(DeclStochasticWords, BatchesEqualRoundBits) {
    namespace fast = qt::kernels::fast;
    constexpr uint32_t kGuard = 0xA5A5A5A5u;
    bool avx = false;
#if defined(__x86_64__)
    avx = fast::have_avx512();
#endif
    std::vector<int64_t> lengths;
    for (int64_t n = 0; n <= 100; ++n) lengths.push_back(n);
    for (int64_t n : {127, 128, 129, 131, 255, 256, 257, 259, 1000, 4096}) lengths.push_back(n);
    for (const int64_t base : {int64_t{0}, int64_t{1}, int64_t{2}, int64_t{3}, int64_t{33}, int64_t{4095},
                               (int64_t{1} << 32) - 3, (int64_t{1} << 34) - 129})
        for (const int64_t n : lengths) {
            const qt::kernels::RoundKey k{0x9E3779B97F4A7C15u, 2, 1, base};
            std::vector<uint32_t> want(static_cast<size_t>(n));
            for (int64_t i = 0; i < n; ++i) want[static_cast<size_t>(i)] = qt::kernels::round_bits(k, i);
            std::vector<uint32_t> s(static_cast<size_t>(n) + 4, kGuard);
            fast::round_words_scalar(k, n, s.data());
            for (int64_t i = 0; i < n; ++i) ASSERT_EQ(s[static_cast<size_t>(i)], want[static_cast<size_t>(i)]) << base << " " << n << " " << i;
            for (int64_t i = n; i < n + 4; ++i) ASSERT_EQ(s[static_cast<size_t>(i)], kGuard) << base << " " << n;
#if defined(__x86_64__)
            if (!avx) continue;
            std::vector<uint32_t> v(static_cast<size_t>(n) + 4, kGuard);
            fast::round_words_avx512(k, n, v.data());
            for (int64_t i = 0; i < n; ++i) ASSERT_EQ(v[static_cast<size_t>(i)], want[static_cast<size_t>(i)]) << base << " " << n << " " << i;
            for (int64_t i = n; i < n + 4; ++i) ASSERT_EQ(v[static_cast<size_t>(i)], kGuard) << base << " " << n;
#endif
        }
    if (!avx) GTEST_SKIP() << "no AVX-512 here: the scalar batches only";
}

// The AVX-512 steps of one full step (32 codes) against the byte loops they replace, for every
// code width and both packings: pack_q_avx512 against narrow_step + pack_step (from int32 codes
// with garbage above their low bits, as negative codes have; nothing written past the step's
// bytes), unpack_avx512 against unpack_step, and decode_step_avx512 against raw_value +
// scale_step (every code of the width among the random bytes, scales that saturate, a table, a
// 7-bit float). Each step must take the widths it claims: 4 and 8 bits either way and every
// lsb-first width.
TEST(DeclFastSteps, RegisterStepsEqualTheByteLoops) {
#if defined(__x86_64__)
    namespace fast = qt::kernels::fast;
    if (!fast::have_avx512()) GTEST_SKIP() << "no AVX-512 here";
    std::vector<qt::Decl> decls;
    for (int b = 2; b <= 8; ++b) {
        auto d = qt::declaration_of(FormatSpec(qt::FormatKind::kSym, b));
        ASSERT_TRUE(d.ok());
        decls.push_back(*d);
    }
    for (const char* name : {"mxfp4", "mxfp6-e3m2", "fp8-e4m3", "nf4", "int5-sr"}) decls.push_back(*fmt(name).decl);
    qt::Decl f7 = *fmt("mxfp6-e3m2").decl;  // a user's 7-bit float, e3m3: values by arithmetic
    f7.bits = 7;
    f7.man_bits = 3;
    decls.push_back(f7);
    uint64_t state = 0x9E3779B97F4A7C15u;
    const auto next = [&] {
        state ^= state << 13, state ^= state >> 7, state ^= state << 17;
        return state;
    };
    int claimed = 0;
    for (qt::Decl d : decls)
        for (const auto packing : {qt::Packing::kLsbFirst, qt::Packing::kMsbFirst}) {
            d.packing = packing;
            const bool lsb = packing == qt::Packing::kLsbFirst;
            const bool should = d.bits == 8 || d.bits == 4 || lsb;
            const int nbytes = 4 * d.bits;
            const fast::DecodePlan p = fast::decode_plan(d, true);
            for (int trial = 0; trial < 300; ++trial) {
                alignas(64) int32_t q[32];
                for (int i = 0; i < 32; ++i) q[i] = static_cast<int32_t>(next());
                alignas(64) uint8_t c[32];
                fast::narrow_step(q, c);
                uint8_t want[40], got[40];
                std::memset(want, 0, sizeof want);
                std::memset(got, 0xA5, sizeof got);
                fast::pack_step<fast::kStep>(d, c, fast::kStep, want);
                const bool packed = fast::pack_q_avx512(d.bits, lsb, q, got);
                ASSERT_EQ(packed, should) << d.bits << " " << lsb;
                if (packed) {
                    ASSERT_EQ(std::memcmp(got, want, static_cast<size_t>(nbytes)), 0) << d.bits << " " << lsb << " " << trial;
                    for (int k = nbytes; k < 40; ++k) ASSERT_EQ(got[k], 0xA5) << d.bits << " " << lsb;
                }
                // the wire bytes back to codes, then to values
                uint8_t wire[40];
                for (auto& w : wire) w = static_cast<uint8_t>(next());
                uint8_t codes[32];
                fast::unpack_step<fast::kStep>(d, wire, 0, fast::kStep, codes);
                alignas(64) int32_t idx[32];
                if (d.bits != 8) {
                    const bool unpacked = fast::unpack_avx512(d.bits, lsb, wire, reinterpret_cast<__m512i*>(idx));
                    ASSERT_EQ(unpacked, should) << d.bits << " " << lsb;
                    for (int i = 0; unpacked && i < 32; ++i) ASSERT_EQ(idx[i], codes[i]) << d.bits << " " << lsb << " " << i;
                }
                const float scales[] = {1.0f, 0.3f, 3e38f, 1e-30f};
                const float s = scales[trial % 4];
                float o[32], ref[32], v[32];
                for (int i = 0; i < 32; ++i) {
                    switch (p.mode) {
                        case fast::DecodePlan::kFloat: v[i] = fast::raw_value<fast::DecodePlan::kFloat>(p, codes[i]); break;
                        case fast::DecodePlan::kInt: v[i] = fast::raw_value<fast::DecodePlan::kInt>(p, codes[i]); break;
                        default: v[i] = fast::raw_value<fast::DecodePlan::kLookup>(p, codes[i]); break;
                    }
                }
                fast::scale_step<fast::kStep>(v, fast::kStep, s, ref);
                const bool decoded = d.bits == 8 ? fast::decode8_avx512(p, wire, s, o)
                                                 : fast::decode_step_avx512(p, lsb, wire, s, o);
                ASSERT_EQ(decoded, should && (p.small || p.mode != fast::DecodePlan::kLookup)) << d.bits << " " << lsb;
                if (!decoded) continue;
                ++claimed;
                for (int i = 0; i < 32; ++i) ASSERT_EQ(bits(o[i]), bits(ref[i])) << d.bits << " " << lsb << " " << i;
            }
        }
    EXPECT_GT(claimed, 300 * 12);
#else
    GTEST_SKIP() << "no AVX-512 on this architecture";
#endif
}

// A tensor encoded from an index_base that is not a multiple of 4 (a block of a collective's chunk,
// say), in blocks of 32 and of 5 (a block may start in the middle of a Philox call): every code is
// int4-sr's rounding of v = x / s with its own element's word, U = (w >> 8) 2^-24 (FORMATS.md 4).
TEST(DeclStochasticWords, EncodeFromAnyIndexBase) {
    const auto f = fmt("int4-sr");
    std::vector<float> x(1000);
    for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(static_cast<float>(i)) * 7.0f;
    for (const int64_t block : {int64_t{32}, int64_t{5}})
        for (const int64_t base : {int64_t{0}, int64_t{1}, int64_t{7}, (int64_t{1} << 34) - 5}) {
            qt::kernels::CodecOptions o;
            o.seed = 3;
            o.site.index_base = base;
            const auto t = enc(f, x, block, o);
            const auto q = qt::kernels::unpack_codes(t);
            int64_t ups = 0;
            for (size_t i = 0; i < x.size(); ++i) {
                const float v = x[i] / t.scales[i / static_cast<size_t>(block)];
                const uint32_t w = spec_word(3, 0xFFFFFFFFu, 0, static_cast<uint64_t>(base) + i);
                const float av = std::fabs(v), fl = std::floor(av);
                const bool up = static_cast<double>(w >> 8) * 0x1p-24 < static_cast<double>(av) - static_cast<double>(fl);
                ups += up;
                const int64_t mag = static_cast<int64_t>(fl) + (up ? 1 : 0);
                const int64_t want = std::clamp<int64_t>(std::signbit(v) ? -mag : mag, f.decl->qmin, f.decl->qmax);
                ASSERT_EQ(q[i], want) << block << " " << base << " " << i << " " << v;
            }
            EXPECT_GT(ups, 100);  // the test sees both outcomes
        }
}

// "fl + 1 if U < fr": a draw U equal to the fraction rounds down. Scale `none` makes v = x, so
// x = j 2^-24 with j = w >> 8 (element i's own draw) puts fr exactly on U; x one 2^-24 above it
// rounds up. 4,096 elements of each kind (and their negatives), in blocks of 32 and of 5 (the fused
// encode's codes in registers, and its staged steps), against the reference too. A draw of 24 bits
// equals a given fraction once in 2^24 elements: random tensors never test the comparison's
// strictness.
TEST(DeclStochastic, ADrawEqualToTheFractionRoundsDown) {
    const auto f = qt::parse_declaration(
        "name = \"int8-none-sr\"\nscale = \"none\"\nrounding = \"stochastic\"\n[element]\ntype = \"int\"\nbits = 8\n"
        "range = \"full\"\n",
        "test");
    ASSERT_TRUE(f.ok()) << f.error().message;
    const int64_t n = 4 * 4096;
    std::vector<float> x(static_cast<size_t>(n));
    std::vector<int32_t> want(x.size());
    for (int64_t i = 0; i < n; ++i) {
        const uint32_t j = spec_word(5, 2, 0, static_cast<uint64_t>(i)) >> 8;
        const int kind = static_cast<int>(i % 4);  // equal, equal and negative, above, above and negative
        const uint32_t m = kind < 2 ? j : std::min<uint32_t>(j + 1, (1u << 24) - 1);
        x[static_cast<size_t>(i)] = std::ldexp(static_cast<float>(m), -24) * (kind % 2 ? -1.0f : 1.0f);
        const bool up = kind >= 2 && j + 1 < (1u << 24);
        want[static_cast<size_t>(i)] = (up ? 1 : 0) * (kind % 2 ? -1 : 1);
    }
    for (const int64_t block : {int64_t{32}, int64_t{5}}) {
        qt::kernels::CodecOptions o;
        o.seed = 5;
        o.site.rank = 2;
        const auto t = enc(*f, x, block, o);
        EXPECT_EQ(qt::kernels::unpack_codes(t), want) << block;
        const auto r = qt::reference::quantize(*f, x, block, qt::Nonfinite::kError, o.site, {o.seed, 0});
        ASSERT_TRUE(r.ok());
        EXPECT_EQ(r->codes, want) << block;
    }
}

// The declarations of int<b> and int<b>-asym, run by the generic kernel, give the hand-written
// kernels' bits: codes, scales, offsets and decoded values.
RC_GTEST_PROP(DeclKernel, IntDeclarationsReproduceTheHandWrittenKernels, ()) {
    const int b = *rc::gen::inRange(2, 9);
    const bool asym = *rc::gen::arbitrary<bool>();
    const FormatSpec hand(asym ? qt::FormatKind::kAsym : qt::FormatKind::kSym, b);
    auto d = qt::declaration_of(hand);
    RC_ASSERT(d.ok());
    const FormatSpec decl = qt::make_declared("copy", *d);
    const auto x = *qt::testing::block_values(200);
    const int64_t block = *rc::gen::inRange<int64_t>(1, 70);
    auto h = qt::kernels::encode(hand, x, block), g = qt::kernels::encode(decl, x, block);
    RC_ASSERT(h.ok() == g.ok());
    if (!h.ok()) {
        RC_ASSERT(h.error().code == g.error().code);
        return;
    }
    RC_ASSERT(h->codes == g->codes);
    RC_ASSERT(h->scales.size() == g->scales.size());
    for (size_t j = 0; j < h->scales.size(); ++j) RC_ASSERT(bits(h->scales[j]) == bits(g->scales[j]));
    for (size_t j = 0; j < h->offsets.size(); ++j) RC_ASSERT(bits(h->offsets[j]) == bits(g->offsets[j]));
    const auto dh = qt::kernels::decode(*h), dg = qt::kernels::decode(*g);
    for (size_t i = 0; i < dh.size(); ++i) RC_ASSERT(bits(dh[i]) == bits(dg[i]));
}

// Both packings round-trip every code of every declared built-in, whatever the block length.
RC_GTEST_PROP(DeclKernel, DecodeOfEncodeIsStableAcrossPackings, ()) {
    std::vector<FormatSpec> decl;
    for (const auto& f : qt::all_builtin_formats())
        if (f.kind == qt::FormatKind::kDecl) decl.push_back(f);
    const FormatSpec f = *rc::gen::elementOf(decl);
    qt::Decl d = *f.decl;
    d.packing = d.packing == qt::Packing::kLsbFirst ? qt::Packing::kMsbFirst : qt::Packing::kLsbFirst;
    const FormatSpec other = qt::make_declared("other-packing", d);
    const int64_t block = f.fixed_block() ? f.fixed_block() : *rc::gen::inRange<int64_t>(1, 70);
    auto x = *qt::testing::block_values(150);
    qt::kernels::CodecOptions o;
    o.seed = 5;
    auto a = qt::kernels::encode(f, x, block, o), b = qt::kernels::encode(other, x, block, o);
    RC_ASSERT(a.ok() == b.ok());
    if (!a.ok()) return;
    RC_ASSERT(qt::kernels::unpack_codes(*a) == qt::kernels::unpack_codes(*b));
    const auto da = qt::kernels::decode(*a), db = qt::kernels::decode(*b);
    for (size_t i = 0; i < da.size(); ++i) RC_ASSERT(bits(da[i]) == bits(db[i]));
    if (f.bits == 4 && block % 2 == 0 && !a->codes.empty())  // the nibbles are swapped
        RC_ASSERT(static_cast<uint8_t>((a->codes[0] << 4) | (a->codes[0] >> 4)) == b->codes[0]);
}

// torchao's EVEN and CEIL scales (e8m0-even, e8m0-ceil) and FBGEMM's even (e8m0-fbgemm-even, and
// fbgemm-mx4 itself): the kernels read a's bits, the reference
// the exact thresholds (FORMATS.md section 2); both agree bit for bit on random blocks and on blocks
// whose absmax sits at, or an ulp either side of, every threshold.
RC_GTEST_PROP(DeclKernel, E8m0EvenAndCeilEqualTheReference, ()) {
    static const std::vector<FormatSpec> variants = [] {
        std::vector<FormatSpec> v;
        for (const char* base : {"mxfp8-e4m3", "mxfp8-e5m2", "mxfp6-e2m3", "mxfp6-e3m2", "mxfp4", "mxint8"})
            for (qt::ScaleType t : {qt::ScaleType::kE8m0Even, qt::ScaleType::kE8m0Ceil, qt::ScaleType::kE8m0FbgemmEven}) {
                qt::Decl d = *qt::parse_format(base).value().decl;
                d.scale = t;
                if (!qt::finalize(d).ok()) continue;  // even needs a float element
                v.push_back(qt::make_declared(std::string(base) + "-" + qt::to_string(t), d));
            }
        v.push_back(*qt::parse_format("fbgemm-mx4"));
        return v;
    }();
    const FormatSpec f = *rc::gen::elementOf(variants);
    auto x = *qt::testing::block_values(32);
    if (*rc::gen::arbitrary<bool>()) {
        const qt::Decl& d = *f.decl;
        const int k = *rc::gen::inRange(-140, 127);
        const bool even = d.scale == qt::ScaleType::kE8m0Even || d.scale == qt::ScaleType::kE8m0FbgemmEven;
        float at = even ? std::ldexp(2.0f - std::ldexp(1.0f, -d.man_bits - 1), k) : std::ldexp(1.0f, k);
        // FBGEMM's subnormal threshold: a carry out of the 23 fraction bits
        if (d.scale == qt::ScaleType::kE8m0FbgemmEven && k < -126) at = 0x1p-126f - std::ldexp(1.0f, -127 - d.man_bits) + 0x1p-149f;
        float a = at;
        for (int u = *rc::gen::inRange(-2, 3); u != 0; u += u < 0 ? 1 : -1) a = std::nextafter(a, u < 0 ? 0.0f : FLT_MAX);
        if (std::isfinite(a) && a > 0) {
            for (float& v : x)
                if (!(std::fabs(v) <= a)) v = a / 3;
            x[static_cast<size_t>(*rc::gen::inRange<int>(0, static_cast<int>(x.size())))] = a;
        }
    }
    for (float& v : x)
        if (!std::isfinite(v)) v = 1.0f;  // refusals are the other tests' subject: every case compares values
    const auto k = qt::kernels::encode(f, x, 32, {});
    const auto r = qt::reference::quantize(f, x, 32);
    RC_ASSERT(k.ok() == r.ok());
    RC_ASSERT(k.ok());
    RC_ASSERT(qt::kernels::unpack_codes(*k) == r->codes);
    for (size_t j = 0; j < r->scales.size(); ++j) RC_ASSERT(bits(k->scales[j]) == bits(r->scales[j]));
    const auto dk = qt::kernels::decode(*k);
    for (size_t i = 0; i < dk.size(); ++i) RC_ASSERT(bits(dk[i]) == bits(r->decoded[i]));
}
