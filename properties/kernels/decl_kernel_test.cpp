// The generic declared-format kernel (kernels/decl_math.hpp): the golden vectors of issue 6 worked
// out by hand from docs/FORMATS.md, the built-in integer formats reproduced bit for bit by their
// declarations, both packings, the poisoned-block markers and stochastic rounding's replay.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <vector>

#include "../generators.hpp"
#include "qtransit/kernels/codec.hpp"

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
