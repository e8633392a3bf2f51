// Golden vectors of the declared formats (docs/FORMATS.md), our own test data, through
// reference::quantize: each expected code is worked out by hand from FORMATS.md sections 2-4.
#include <gtest/gtest.h>

#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "qtransit/common/decl.hpp"
#include "qtransit/common/format.hpp"
#include "qtransit/common/philox.hpp"
#include "qtransit/reference/formats.hpp"

namespace qtransit::reference {
namespace {

FormatSpec fmt(const std::string& name) {
    auto f = parse_format(name);
    EXPECT_TRUE(f.ok()) << name;
    return f.value();
}

Quantized q_of(const std::string& name, const std::vector<float>& x, int64_t block = 0) {
    const FormatSpec f = fmt(name);
    auto q = quantize(f, x, block > 0 ? block : static_cast<int64_t>(x.size()));
    EXPECT_TRUE(q.ok()) << name << ": " << (q.ok() ? "" : q.error().message);
    return q.value();
}

uint8_t scale_byte(const Quantized& q, int64_t k = 0) {
    uint8_t b[8] = {};
    write_metadata(q.format, q.scales[k], q.format.has_offset() ? q.offsets[k] : 0.0f, b);
    return b[0];
}

// fp8-e4m3 with the block {448, x}, |x| <= 448: s = fl32(448 / 448) = 1, so v = x.
int32_t e4m3_code(float x) { return q_of("fp8-e4m3", {448.0f, x}).codes[1]; }

// E4M3 elements with scale `none` (s = 1): beyond 448 an absmax scale would move, this does not.
FormatSpec e4m3_unscaled() {
    Decl d = *fmt("fp8-e4m3").decl;
    d.scale = ScaleType::kNone;
    EXPECT_TRUE(finalize(d).ok());
    return make_declared("test-e4m3-unscaled", d);
}

TEST(DeclGolden, E4m3RoundsToNearestEvenAndSaturates) {
    EXPECT_EQ(q_of("fp8-e4m3", {448.0f, 1.0f}).scales[0], 1.0f);
    // 400 = 12.5 * 32 in binade 8 (step 32): a tie between 384 (mantissa 100) and 416 (101) -> 384
    // (ties-away would give 416).
    EXPECT_EQ(e4m3_code(400.0f), 0x7C);  // 0 1111 100 = 384
    EXPECT_EQ(q_of("fp8-e4m3", {448.0f, 400.0f}).decoded[1], 384.0f);
    const FormatSpec un = e4m3_unscaled();
    const auto q = quantize(un, std::vector<float>{464.0f, 465.0f, -465.0f, 1e30f}, 4).value();
    EXPECT_EQ(q.codes[0], 0x7E);  // a tie between 448 (110) and 480 (111): 448
    EXPECT_EQ(q.codes[1], 0x7E);  // rounds to 480, saturates to 448 (0x7F is NaN)
    EXPECT_EQ(q.codes[2], 0xFE);
    EXPECT_EQ(q.codes[3], 0x7E);
    EXPECT_EQ(q.decoded[1], 448.0f);
    EXPECT_EQ(e4m3_code(0x1p-9f), 0x01);  // the smallest subnormal 2^-6 * 2^-3
    EXPECT_EQ(e4m3_code(0x1p-10f), 0x00);  // a tie between 0 and 2^-9: even (0)
    EXPECT_EQ(e4m3_code(-0x1p-11f), 0x80);  // rounds to zero, keeps the sign
}

TEST(DeclGolden, Fp4RoundingTable) {
    // mxfp4 (E2M1, values 0 0.5 1 1.5 2 3 4 6); a block containing 6 has e = floor(log2 6) - 2 = 0.
    const std::vector<std::pair<float, float>> cases{{0.25f, 0.0f}, {0.75f, 1.0f}, {1.25f, 1.0f}, {1.75f, 2.0f},
                                                     {2.5f, 2.0f},  {3.5f, 4.0f},  {5.0f, 4.0f}};
    for (const auto& [in, want] : cases) {
        std::vector<float> x(32, 0.0f);
        x[0] = 6.0f;
        x[1] = in;
        x[2] = -in;
        const Quantized q = q_of("mxfp4", x, 32);
        EXPECT_EQ(q.scales[0], 1.0f);
        EXPECT_EQ(scale_byte(q), 127);
        EXPECT_EQ(q.decoded[1], want) << in;
        EXPECT_EQ(q.decoded[2], -want) << in;
    }
    std::vector<float> x(32, 0.0f);
    x[0] = 6.0f;
    x[1] = 7.0f;  // floor(log2 7) - 2 = 0 still; 7 ties 6 and 8 -> 8 (even), saturates to 6 (0b0111)
    const Quantized q = q_of("mxfp4", x, 32);
    EXPECT_EQ(q.codes[1], 0x7);
    EXPECT_EQ(q.codes[0], 0x7);
}

TEST(DeclGolden, Fp6E3m2) {
    // mxfp6-e3m2: E3 M2 bias 3, max 28 (0 111 11). A block with 28: e = floor(log2 28) - 4 = 0.
    std::vector<float> x(32, 0.0f);
    x[0] = 28.0f;
    x[1] = 29.0f;  // beyond 28 (the next step would be 32): saturates
    x[2] = 26.0f;  // binade 16, step 4: a tie between 24 (0 111 10) and 28 (0 111 11) -> 24 (even)
    // The absmax 29 has floor(log2 29) = 4 = emax_elem: e = 0.
    const Quantized q = q_of("mxfp6-e3m2", x, 32);
    EXPECT_EQ(q.scales[0], 1.0f);
    EXPECT_EQ(q.codes[1], 0b011111);
    EXPECT_EQ(q.codes[2], 0b011110);
    EXPECT_EQ(q.decoded[2], 24.0f);
}

TEST(DeclGolden, Mxfp8FloorAndRceil) {
    const std::vector<float> x(32, 480.0f);
    // floor: e = floor(log2 480) - 8 = 0, byte 127; v = 480 saturates to 448 = 0x7E.
    const Quantized f = q_of("mxfp8-e4m3", x, 32);
    EXPECT_EQ(scale_byte(f), 127);
    EXPECT_EQ(f.codes[0], 0x7E);
    // rceil: the smallest e with 480 <= 448 2^e is 1, byte 128; v = 240 = 0 1110 111 = 0x77.
    const Quantized r = q_of("mxfp8-e4m3-rceil", x, 32);
    EXPECT_EQ(scale_byte(r), 128);
    EXPECT_EQ(r.codes[0], 0x77);
    EXPECT_EQ(r.decoded[0], 480.0f);
    // FLT_MAX: floor gives e = 127 - 8 = 119, byte 246, v = FLT_MAX 2^-119 ~ 511.99 -> 448 (0x7E);
    // rceil: the smallest e with FLT_MAX <= 448 2^e is 120 (448 2^119 < 2^128 (1 - 2^-24)), byte 247,
    // v ~ 256 -> 256 = 0 1111 000 = 0x78.
    const std::vector<float> m(32, FLT_MAX);
    const Quantized fm = q_of("mxfp8-e4m3", m, 32);
    EXPECT_EQ(scale_byte(fm), 246);
    EXPECT_EQ(fm.codes[0], 0x7E);
    const Quantized rm = q_of("mxfp8-e4m3-rceil", m, 32);
    EXPECT_EQ(scale_byte(rm), 247);
    EXPECT_EQ(rm.codes[0], 0x78);
}

// mxfp8-e4m3's elements under torchao's EVEN and CEIL (FORMATS.md section 2), worked by hand:
// emax_elem = 8, M = 3.
//   even: E = floor(log2 a) (-127 for a subnormal), one more when a >= 2^(E+1) - 2^(E-4).
//   ceil: E = floor(log2 a) (-127 for a subnormal), one more when a is not 2^E (always for a subnormal).
FormatSpec mx_with(ScaleType t, const char* name) {
    Decl d = *fmt("mxfp8-e4m3").decl;
    d.scale = t;
    EXPECT_TRUE(finalize(d).ok());
    return make_declared(name, d);
}
uint8_t byte_of(const FormatSpec& f, float a) {
    std::vector<float> x(32, 0.0f);
    x[3] = a;
    auto q = quantize(f, x, 32);
    EXPECT_TRUE(q.ok());
    return scale_byte(q.value());
}

TEST(DeclGolden, E8m0EvenAndCeil) {
    const FormatSpec even = mx_with(ScaleType::kE8m0Even, "mx-even"), ceil = mx_with(ScaleType::kE8m0Ceil, "mx-ceil");
    // a = 1: both 2^(0 - 8), byte 119.
    EXPECT_EQ(byte_of(even, 1.0f), 119);
    EXPECT_EQ(byte_of(ceil, 1.0f), 119);
    // a = 1.9375 = 2 - 2^-4, even's threshold for E = 0 (2^(E+1) - 2^(E-M-1)): up to 2^(1 - 8), byte 120;
    // one ulp below stays 119.
    EXPECT_EQ(byte_of(even, 1.9375f), 120);
    EXPECT_EQ(byte_of(even, std::nextafter(1.9375f, 0.0f)), 119);
    // ceil: any a above 1 in [1, 2) goes up, byte 120.
    EXPECT_EQ(byte_of(ceil, std::nextafter(1.0f, 2.0f)), 120);
    // a = 496 = 2^9 - 2^4: even's threshold for E = 8, so e = 1, byte 128; v = 248 is a tie between
    // 240 and 256 and goes to 256 (0 1111 000 = 0x78, the even mantissa), decoding 512. 480 stays at
    // E = 8 (byte 127: floor's, and v saturates to 448). ceil: 2^9 over 2^8 for both, byte 128.
    const std::vector<float> x(32, 496.0f);
    auto q = quantize(even, x, 32);
    ASSERT_TRUE(q.ok());
    EXPECT_EQ(scale_byte(q.value()), 128);
    EXPECT_EQ(q->codes[0], 0x78);
    EXPECT_EQ(q->decoded[0], 512.0f);
    EXPECT_EQ(byte_of(even, 480.0f), 127);
    EXPECT_EQ(byte_of(ceil, 480.0f), 128);
    // a = 448 = 1.75 2^8: even stays at E = 8 (448 < 480), byte 127; ceil goes to 9, byte 128
    // (v = 224, and the block loses a bit of resolution it did not need).
    EXPECT_EQ(byte_of(even, 448.0f), 127);
    EXPECT_EQ(byte_of(ceil, 448.0f), 128);
    // A subnormal absmax: E = -127; even: 2^-149 stays, e = -135 clamps to -127, byte 0; ceil:
    // -126 - 8 clamps to -127 too. The zero block: byte 0 for both.
    EXPECT_EQ(byte_of(even, 0x1p-149f), 0);
    EXPECT_EQ(byte_of(ceil, 0x1p-149f), 0);
    EXPECT_EQ(byte_of(even, 0.0f), 0);
    // FLT_MAX = (2 - 2^-23) 2^127 >= 2^128 - 2^123: even carries to E = 128, e = 120, byte 247;
    // ceil: 128 - 8 = 120, byte 247.
    EXPECT_EQ(byte_of(even, FLT_MAX), 247);
    EXPECT_EQ(byte_of(ceil, FLT_MAX), 247);
    // even needs a float element.
    Decl d = *fmt("mxint8").decl;
    d.scale = ScaleType::kE8m0Even;
    const auto st = finalize(d);
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.error().message.find("'e8m0-even' rounds the absmax at the element's mantissa width"), std::string::npos);
}

// FBGEMM's MX4 (fbgemm-mx4; docs/SOURCES.md section 6.2, FORMATS.md section 2), by hand from the Triton
// kernel's rules: E2M1 (A = 6, emax_elem 2), the exponent field of bits(a) + 2^21 - 1, minus 2,
// clamped to [-127, 125]; elements rounded half away from zero (the guard bit added, no sticky bit)
// and saturated at 6. Codes 0..7: 0, 0.5, 1, 1.5, 2, 3, 4, 6; bit 3 the sign.
TEST(DeclGolden, FbgemmMx4) {
    const FormatSpec f = fmt("fbgemm-mx4");
    ASSERT_EQ(f.fixed_block(), 32);
    // a = 1.75 = 1.75 2^0 is not strictly above the threshold: E = 0, e = -2, byte 125 (torchao's EVEN
    // takes it up: mxfp4 with e8m0-even would store 126). v = 7 rounds away to 8, past 6: saturated,
    // code 7, decoded 6 / 4 = 1.5. One ulp above: E = 1, byte 126, v = 3.5000002 -> 4 (code 6), decoded 2.
    std::vector<float> x(32, 0.0f);
    x[0] = 1.75f;
    Quantized q = q_of("fbgemm-mx4", x, 32);
    EXPECT_EQ(scale_byte(q), 125);
    EXPECT_EQ(q.codes[0], 7);
    EXPECT_EQ(q.decoded[0], 1.5f);
    Decl torchao_even = *f.decl;
    torchao_even.scale = ScaleType::kE8m0Even;
    torchao_even.rounding = Rounding::kNearestAway;
    ASSERT_TRUE(finalize(torchao_even).ok());
    EXPECT_EQ(byte_of(make_declared("mx4-torchao-even", torchao_even), 1.75f), 126);
    x[0] = std::nextafter(1.75f, 2.0f);
    q = q_of("fbgemm-mx4", x, 32);
    EXPECT_EQ(scale_byte(q), 126);
    EXPECT_EQ(q.codes[0], 6);
    EXPECT_EQ(q.decoded[0], 2.0f);
    // SOURCES' checked exponents: 3.5 -> E 1 (byte 126), 7.5 -> E 3 (byte 128; floor would say 2).
    EXPECT_EQ(byte_of(f, 3.5f), 126);
    EXPECT_EQ(byte_of(f, 7.5f), 128);
    // Half away from zero where mxfp4 rounds to even: a = 4 (e = 0, scale 1); 2.5 -> 3 (code 5),
    // 0.25 -> 0.5 (code 1), -1.25 -> -1.5 (code 0xB); -0.1 -> -0 (code 8) and -0 keeps its sign.
    x.assign(32, 0.0f);
    x[0] = 4.0f;
    x[1] = 2.5f;
    x[2] = 0.25f;
    x[3] = -1.25f;
    x[4] = -0.1f;
    x[5] = -0.0f;
    q = q_of("fbgemm-mx4", x, 32);
    EXPECT_EQ(scale_byte(q), 127);
    EXPECT_EQ(q.codes[1], 5);
    EXPECT_EQ(q.codes[2], 1);
    EXPECT_EQ(q.codes[3], 0xB);
    EXPECT_EQ(q.codes[4], 8);
    EXPECT_EQ(q.codes[5], 8);
    EXPECT_EQ(q.decoded[1], 3.0f);
    EXPECT_EQ(q.decoded[3], -1.5f);
    EXPECT_TRUE(std::signbit(q.decoded[4]));
    const Quantized m = q_of("mxfp4", x, 32);
    EXPECT_EQ(m.codes[1], 4);  // RNE: 2.5 -> 2
    EXPECT_EQ(m.codes[2], 0);  // 0.25 -> 0
    EXPECT_EQ(m.codes[3], 0xA);  // -1.25 -> -1
    // The zero block reads a as 2^-126: e = -128, clamped to -127, byte 0. FLT_MAX carries to E = 128:
    // e = 126, clamped to 125 (byte 252; torchao's bound is 127), v = FLT_MAX 2^-125 ~ 8 saturates:
    // decoded 6 2^125.
    EXPECT_EQ(byte_of(f, 0.0f), 0);
    x.assign(32, 0.0f);
    x[0] = FLT_MAX;
    q = q_of("fbgemm-mx4", x, 32);
    EXPECT_EQ(scale_byte(q), 252);
    EXPECT_EQ(q.codes[0], 7);
    EXPECT_EQ(q.decoded[0], std::ldexp(6.0f, 125));
    // e8m0-fbgemm-even needs a float element.
    Decl d = *fmt("mxint8").decl;
    d.scale = ScaleType::kE8m0FbgemmEven;
    const auto st = finalize(d);
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.error().message.find("'e8m0-fbgemm-even' rounds the absmax"), std::string::npos);
}

// FBGEMM's fused 8-bit row-wise (fbgemm-int8-rowwise; docs/SOURCES.md section 6.1, FORMATS.md section 2),
// by hand from quantize_fused_8bit_rowwise.cu's rules: lo = min, range = fl32(max - min), s = fl32(range
// / 255), m = fl32(255 / fl32(range + 1e-20)), q = rne(fl32(fl32(x - lo) m)), decoded fl32(q s + lo) in
// one rounding.
TEST(DeclGolden, FbgemmInt8Rowwise) {
    const FormatSpec f = fmt("fbgemm-int8-rowwise");
    // A row of 32: -1, 2, -0.3, 1.3, 0.1, and zeros. range = 3: s = fl32(3 / 255) = 0x3C40C0C1,
    // m = fl32(255 / 3) = 85 exactly. -0.3: w = fl32(0.7) and fl32(w 85) = 59.5, to even 60, where
    // int8-asym's fl32(w / s) is just below 59.5: 59. 1.3: 196 against 195. A zero: w = 1, code 85.
    std::vector<float> x(32, 0.0f);
    x[0] = -1.0f;
    x[1] = 2.0f;
    x[2] = -0.3f;
    x[3] = 1.3f;
    x[4] = 0.1f;
    Quantized q = q_of("fbgemm-int8-rowwise", x, 32);
    EXPECT_EQ(std::bit_cast<uint32_t>(q.scales[0]), 0x3C40C0C1u);
    EXPECT_EQ(q.offsets[0], -1.0f);
    EXPECT_EQ(q.codes[0], 0);
    EXPECT_EQ(q.codes[1], 255);
    EXPECT_EQ(q.codes[2], 60);
    EXPECT_EQ(q.codes[3], 196);
    EXPECT_EQ(q.codes[4], 94);
    EXPECT_EQ(q.codes[5], 85);
    const Quantized qa = q_of("int8-asym", x, 32);
    EXPECT_EQ(qa.codes[2], 59);
    EXPECT_EQ(qa.codes[3], 195);
    // The fused decode: 94 s - 1 rounds once to 0x3DD8D8DC (two roundings give 0x3DD8D8E0), and a zero
    // (code 85) decodes to 85 s - 1 = 0x32A80000, about 1.96e-8, not 0 (fl32(85 s) is 1 exactly).
    EXPECT_EQ(std::bit_cast<uint32_t>(q.decoded[4]), 0x3DD8D8DCu);
    EXPECT_EQ(std::bit_cast<uint32_t>(q.decoded[5]), 0x32A80000u);
    EXPECT_EQ(std::bit_cast<uint32_t>(q.decoded[2]), 0xBE969696u);
    // The epsilon: a row of range 1e-19 (0, 1e-19, 5e-20): m = fl32(255 / fl32(1.1e-19)), its top code
    // rne(231.8...) = 232, not 255; 5e-20 gets 116.
    x.assign(32, 0.0f);
    x[1] = 1e-19f;
    x[2] = 5e-20f;
    q = q_of("fbgemm-int8-rowwise", x, 32);
    EXPECT_EQ(q.codes[1], 232);
    EXPECT_EQ(q.codes[2], 116);
    // Each element within its bound (the epsilon's shortfall, 1e-19 - 232 s, included).
    for (size_t i = 0; i < x.size(); ++i)
        EXPECT_TRUE((Exact(q.decoded[i]) - Exact(x[i])).abs() <= element_bound(q, x, static_cast<int64_t>(i))) << i;
    // A constant row decodes to its value exactly (s = 0); a row of range A 2^-150 or less has s = 0 too
    // (no floor) and decodes to its minimum, every code 0.
    x.assign(32, 0.25f);
    q = q_of("fbgemm-int8-rowwise", x, 32);
    EXPECT_EQ(q.scales[0], 0.0f);
    EXPECT_EQ(q.decoded[7], 0.25f);
    x.assign(32, 0.0f);
    x[3] = 0x1p-149f;
    q = q_of("fbgemm-int8-rowwise", x, 32);
    EXPECT_EQ(q.scales[0], 0.0f);
    EXPECT_EQ(q.codes[3], 0);
    EXPECT_EQ(q.decoded[3], 0.0f);
    EXPECT_TRUE((Exact(q.decoded[3]) - Exact(x[3])).abs() <= element_bound(q, x, 3));
    // The declaration's keys: amax_eps only on fp32-eps-mul, at least max(A / FLT_MAX, A^2 2^-149);
    // decode "fma" only with an offset.
    Decl d = *f.decl;
    d.amax_eps = 1e-45f;
    auto st = finalize(d);
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.error().message.find("amax_eps"), std::string::npos);
    d = declaration_of(fmt("int8")).value();
    d.amax_eps = 1e-8f;
    st = finalize(d);
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.error().message.find("is for the scale fp32-eps-mul"), std::string::npos);
    d = *fmt("fp8-e4m3").decl;
    d.scale = ScaleType::kFp32EpsMul;
    d.amax_eps = 1e-20f;
    st = finalize(d);
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.error().message.find("needs an int element"), std::string::npos);
    d = declaration_of(fmt("int8")).value();
    d.decode_fma = true;
    st = finalize(d);
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.error().message.find("'fma' is for offset 'min'"), std::string::npos);
}

// DeepEP's low-latency FP8 cast and FlashInfer's (docs/SOURCES.md sections 3 and 4; FORMATS.md
// section 2). c = fl32(1/448): 1/448 = 2^-9 8/7, 8/7 = 1.001001...b, cut after 23 fraction bits with
// the 24th bit 1 and more ones after it: rounded up, c = 0x3B124925, and 448 c = 1 + 0.75 2^-24.
float f32_of(uint32_t b) { return std::bit_cast<float>(b); }

// NVFP4 (Transformer Engine's recipe, docs/SOURCES.md section 5), derived by hand. The tensor
// [6, 3, -1.5, 0.2, 0 x12 | 1, 0.7, -0.26, 0 x13]: T = 6, S_enc = fl32(2688 / 6) = 448, S_dec =
// fl32(1/448) = 9586981 2^-32, the block factor fl32(448 fl32(1/6)) = 9786710 2^-17 (0x42955556).
// Block 0: 6 t = 14680065 2^-15 = 448.0000305, past 448: s_b saturates at 448 (byte 0x7E); s_b S_dec =
// 1 + 0.75 2^-24 rounds to 1, m = 1, and the decode factor fl32(fl32(448 6) fl32(1/2688)) = 1: 6, 3,
// -1.5 exact (codes 7, 5, 8|3), 0.2 to 0. Block 1: t = 74.67 rounds down to the E4M3 value 72 (byte
// 13 << 3 | 1 = 105): m = fl32(1 / fl32(72 S_dec)) = 0x40C71C71 (6.2222), and 1 m saturates at 6: the
// block's largest element decodes to 6 f = 0x3F76DB6E (0.964), f = fl32(432 fl32(1/2688)) = 0x3E249249;
// 0.7 m = 4.36 to 4 (code 6), -0.26 m = -1.62 to -1.5 (code 11).
TEST(DeclGolden, Nvfp4TwoLevelScales) {
    std::vector<float> x(32, 0.0f);
    x[0] = 6.0f;
    x[1] = 3.0f;
    x[2] = -1.5f;
    x[3] = 0.2f;
    x[16] = 1.0f;
    x[17] = 0.7f;
    x[18] = -0.26f;
    const FormatSpec f = fmt("nvfp4").for_tensor(x);
    EXPECT_EQ(f.decl->tensor_amax, 6.0f);
    EXPECT_EQ(f.decl->t_enc, 448.0f);
    EXPECT_EQ(std::bit_cast<uint32_t>(f.decl->t_blk), 0x42955556u);
    auto r = quantize(f, x, 16);
    ASSERT_TRUE(r.ok()) << r.error().message;
    const Quantized& q = *r;
    EXPECT_EQ(q.scales[0], 1.0f);
    EXPECT_EQ(scale_byte(q, 0), 0x7E);
    EXPECT_EQ(q.codes[0], 7);
    EXPECT_EQ(q.codes[1], 5);
    EXPECT_EQ(q.codes[2], 8 | 3);
    EXPECT_EQ(q.codes[3], 0);
    EXPECT_EQ(q.decoded[0], 6.0f);
    EXPECT_EQ(q.decoded[2], -1.5f);
    EXPECT_EQ(std::bit_cast<uint32_t>(q.scales[1]), 0x3E249249u);
    EXPECT_EQ(scale_byte(q, 1), 105);
    EXPECT_EQ(q.codes[16], 7);
    EXPECT_EQ(q.codes[17], 6);
    EXPECT_EQ(q.codes[18], 8 | 3);
    EXPECT_EQ(std::bit_cast<uint32_t>(q.decoded[16]), 0x3F76DB6Eu);
    for (size_t i = 0; i < x.size(); ++i)
        EXPECT_TRUE((Exact(q.decoded[i]) - Exact(x[i])).abs() <= element_bound(q, x, static_cast<int64_t>(i))) << i;
    // The wire's byte decodes to the same factor under the tensor's T.
    for (int k = 0; k < 2; ++k) {
        uint8_t b = scale_byte(q, k);
        float s = 0, off = 0;
        read_metadata(f, &b, &s, &off);
        EXPECT_EQ(s, q.scales[k]) << k;
    }
    // Under the declared T (2688, a tensor scale of 1) the same blocks quantize otherwise: block 0's
    // s_b = E4M3(fl32(6 fl32(1/6))) = 1, and 0.2 is coded 0.
    const Quantized d = q_of("nvfp4", x, 16);
    EXPECT_EQ(fmt("nvfp4").decl->tensor_amax, 2688.0f);
    EXPECT_EQ(d.codes[0], 7);
    EXPECT_NE(std::bit_cast<uint32_t>(d.scales[1]), std::bit_cast<uint32_t>(q.scales[1]));
}

// A block far below the tensor's amax takes the block scale 0: its multiplier is FLT_MAX, so its
// codes saturate at +-6 (7, 15), as Transformer Engine's kernel writes them, and decode to zeros of
// their signs (the error is |x|, within its bound). An all-zero tensor (T = 0, S_enc = 1) decodes to its
// signed zeros.
TEST(DeclGolden, Nvfp4ZeroBlockScaleAndZeroTensor) {
    std::vector<float> x(32, 0.0f);
    x[0] = 1e6f;
    x[16] = 1e-3f;
    x[17] = -2e-3f;
    const FormatSpec f = fmt("nvfp4").for_tensor(x);
    auto r = quantize(f, x, 16);
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->scales[1], 0.0f);
    EXPECT_EQ(scale_byte(*r, 1), 0);
    EXPECT_EQ(r->codes[16], 7);
    EXPECT_EQ(r->codes[17], 15);
    EXPECT_EQ(r->codes[18], 0);
    EXPECT_EQ(std::bit_cast<uint32_t>(r->decoded[16]), 0u);
    EXPECT_EQ(std::bit_cast<uint32_t>(r->decoded[17]), 0x80000000u);
    for (size_t i = 0; i < x.size(); ++i)
        EXPECT_TRUE((Exact(r->decoded[i]) - Exact(x[i])).abs() <= element_bound(*r, x, static_cast<int64_t>(i))) << i;
    // A tensor amax above FLT_MAX / 448: the block holding it has s_b = 448, and fl32(448 T) overflows (TE's
    // dequantize would give inf): a range overflow, refused naming the block, poisoned under propagate.
    std::vector<float> big(32, 1.0f);
    big[20] = 1e36f;
    const FormatSpec fb = fmt("nvfp4").for_tensor(big);
    auto rb = quantize(fb, big, 16);
    ASSERT_FALSE(rb.ok());
    EXPECT_NE(rb.error().message.find("elements 16..31 has absmax 1e+36 and E4M3 scale 448"), std::string::npos) << rb.error().message;
    EXPECT_NE(rb.error().message.find("overflows binary32"), std::string::npos) << rb.error().message;
    auto rp = quantize(fb, big, 16, Nonfinite::kPropagate);
    ASSERT_TRUE(rp.ok());
    EXPECT_TRUE(std::isnan(rp->scales[1]));
    EXPECT_FALSE(std::isnan(rp->scales[0]));
    std::vector<float> z(16, 0.0f);
    z[3] = -0.0f;
    const FormatSpec fz = fmt("nvfp4").for_tensor(z);
    EXPECT_EQ(fz.decl->tensor_amax, 0.0f);
    EXPECT_EQ(fz.decl->t_enc, 1.0f);
    auto rz = quantize(fz, z, 16);
    ASSERT_TRUE(rz.ok());
    EXPECT_EQ(rz->codes[3], 8);
    EXPECT_EQ(std::bit_cast<uint32_t>(rz->decoded[3]), 0x80000000u);
    EXPECT_EQ(rz->decoded[0], 0.0f);
}

TEST(DeclGolden, DeepEpScaleIsNotTheReciprocalOfItsMultiplier) {
    // A block whose absmax is 3 (the others fractions of it). fp8-e4m3-1x128: s = fl32(3 c) =
    // fl32(3/448 (1 + 0.75 2^-24)); fl32(3/448) is 0x3BDB6DB7, and the extra 0.75 2^-24 carries the
    // product past the midpoint to 0x3BDB6DB8. m = fl32(448 / 3) = 149.33333; v = fl32(3 m) = 448
    // (code 0 1111 110 = 0x7E), decoded fl32(448 s) = 3 + 2^-22: DeepEP's stored scale decodes its
    // own absmax one ulp high. flashinfer-fp8 stores fl32(3 / 448) = 0x3BDB6DB7 and decodes 3 exactly.
    std::vector<float> x(256);
    for (size_t i = 0; i < x.size(); ++i) x[i] = 3.0f * static_cast<float>(i % 7) / 8.0f;
    x[0] = 3.0f;
    const Quantized d = q_of("fp8-e4m3-1x128", std::vector<float>(x.begin(), x.begin() + 128), 128);
    EXPECT_EQ(std::bit_cast<uint32_t>(d.scales[0]), 0x3BDB6DB8u);
    EXPECT_EQ(d.codes[0], 0x7E);
    EXPECT_EQ(d.decoded[0], std::nextafter(3.0f, 4.0f));
    const Quantized fi = q_of("flashinfer-fp8", x, 256);
    EXPECT_EQ(std::bit_cast<uint32_t>(fi.scales[0]), 0x3BDB6DB7u);
    EXPECT_EQ(fi.codes[0], 0x7E);
    EXPECT_EQ(fi.decoded[0], 3.0f);
    // Both meet their bound (FORMATS.md section 6 with x m s in place of x: the |x| |1 - m s| term).
    EXPECT_TRUE(check_bounds(d, std::vector<float>(x.begin(), x.begin() + 128)).holds);
    EXPECT_TRUE(check_bounds(fi, x).holds);
}

TEST(DeclGolden, TorchaoStoresTheInverseOfItsMultiplier) {
    // torchao-fp8-e4m3 (docs/SOURCES.md section 8): m = fl32(448 / a), s = fl32(1 / m), the scale a GEMM
    // applies. For a = 0.6875: m = 0x4422E8BA (651.6364), s = 0x3AC92493, one ulp above fl32(a / 448) =
    // 0x3AC92492 (flashinfer-fp8's); v = fl32(a m) = 448, code 0x7E, decoded fl32(448 s) = 0.6875 + 2^-24
    // 4: the absmax one ulp high, where FlashInfer's scale decodes it exactly.
    std::vector<float> x(64, 0.25f);
    x[5] = 0.6875f;
    const Quantized t = q_of("torchao-fp8-e4m3", x, 64);
    EXPECT_EQ(std::bit_cast<uint32_t>(t.scales[0]), 0x3AC92493u);
    EXPECT_EQ(t.codes[5], 0x7E);
    EXPECT_EQ(t.decoded[5], std::nextafter(0.6875f, 1.0f));
    std::vector<float> y(256, 0.25f);
    y[5] = 0.6875f;
    const Quantized fi = q_of("flashinfer-fp8", y, 256);
    EXPECT_EQ(std::bit_cast<uint32_t>(fi.scales[0]), 0x3AC92492u);
    EXPECT_EQ(fi.decoded[5], 0.6875f);
    EXPECT_TRUE(check_bounds(t, x).holds);
    // The floor: an all-zero block takes 1e-12's scale, fl32(1 / fl32(448 / fl32(1e-12))), and -0 keeps its sign.
    std::vector<float> z(64, 0.0f);
    z[3] = -0.0f;
    const Quantized q0 = q_of("torchao-fp8-e4m3", z, 64);
    EXPECT_EQ(q0.scales[0], 1.0f / (448.0f / 1e-12f));
    EXPECT_EQ(q0.codes[3], 0x80);
    EXPECT_TRUE(std::signbit(q0.decoded[3]));
}

TEST(DeclGolden, FbgemmHfp8) {
    // FBGEMM's float_to_hfp8 with ebits 4, mbits 3, bias 15 (docs/SOURCES.md section 6.3, its checked
    // examples): no scale; |x| clamped at 0.9375 (0x77); below 2^-14 RNE onto multiples of 2^-17.
    const Quantized q = q_of("fbgemm-fp8", {0.9375f, 1.0f, -3.0f, 0.5f, std::ldexp(1.0f, -14), std::ldexp(1.0f, -18),
                                            1.5f * std::ldexp(1.0f, -17), 2.5f * std::ldexp(1.0f, -17), -0.0f, 0.0f,
                                            std::ldexp(1.0f, -17), 0.71875f});
    EXPECT_EQ(q.scales[0], 1.0f);
    const std::vector<int32_t> want{0x77, 0x77, 0xF7, 0x70, 0x08, 0x00, 0x02, 0x02, 0x80, 0x00, 0x01, 0x74};
    ASSERT_EQ(q.codes.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(q.codes[i], want[i]) << i;
    EXPECT_EQ(q.decoded[1], 0.9375f);                       // saturated
    EXPECT_EQ(q.decoded[2], -0.9375f);
    EXPECT_EQ(q.decoded[6], std::ldexp(1.0f, -16));         // 1.5 q -> 2 q (tie to even)
    EXPECT_EQ(q.decoded[7], std::ldexp(1.0f, -16));         // 2.5 q -> 2 q (tie to even)
    EXPECT_TRUE(std::signbit(q.decoded[8]));
    // 0.71875 = 1.4375 2^-1, halfway between 1.375 and 1.5 (mantissa 3 and 4, field 14): to even, 0.75.
    EXPECT_EQ(q.decoded[11], 0.75f);
}

TEST(DeclGolden, DeepEpAmaxFloor) {
    // Every element 1e-6 < F = fl32(1e-4): a' = F, s = fl32(F c) = 0x346FACAD (2.2321429e-7), m =
    // fl32(448 / F) = 4480000; v = fl32(1e-6 4480000) = 4.48, between 4 and 4.5 (step 0.5 in [4, 8)):
    // 4.5 = 1.125 2^2, code 0 1001 001 = 0x49.
    const Quantized q = q_of("fp8-e4m3-1x128", std::vector<float>(128, 1e-6f), 128);
    EXPECT_EQ(std::bit_cast<uint32_t>(q.scales[0]), 0x346FACADu);
    EXPECT_EQ(q.codes[0], 0x49);
    EXPECT_EQ(q.decoded[0], 4.5f * f32_of(0x346FACADu));
    // The zero block takes the floor's scale too (not 0), and -0 keeps its sign: -0 m = -0, code 0x80.
    std::vector<float> z(128, 0.0f);
    z[1] = -0.0f;
    const Quantized qz = q_of("fp8-e4m3-1x128", z, 128);
    EXPECT_EQ(std::bit_cast<uint32_t>(qz.scales[0]), 0x346FACADu);
    EXPECT_EQ(qz.codes[0], 0x00);
    EXPECT_EQ(qz.codes[1], 0x80);
    EXPECT_TRUE(std::signbit(qz.decoded[1]));
    // The floor must keep m = A / a' finite: a floor below A / FLT_MAX is refused, named.
    Decl d = *fmt("fp8-e4m3-1x128").decl;
    d.amax_floor = 1e-38f;
    const auto st = finalize(d);
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.error().message.find("amax_floor must be at least A / FLT_MAX"), std::string::npos) << st.error().message;
    // and a floor on a scale that has its own rule is refused
    Decl e = *fmt("fp8-e4m3").decl;
    e.amax_floor = 1e-4f;
    ASSERT_FALSE(finalize(e).ok());
}

TEST(DeclGolden, DeepEpRoundScale) {
    // pow2 and ue8m0: t = fl32(a' c) rounded up to a power of two. a = 56 = 448 2^-3: t = fl32(2^-3 (1
    // + 0.75 2^-24)) = 2^-3 (the excess is under half an ulp of 1, 2^-24), so e = -3: s = 0.125, byte
    // 124. One ulp above 56 (2^-18, 1.14 2^-24 relative) the excess passes the midpoint: t > 2^-3, e = -2.
    auto pow2_scale = [](const std::string& name, float a) {
        std::vector<float> x(128, 0.5f * a);
        x[7] = a;
        return q_of(name, x, 128).scales[0];
    };
    for (const std::string name : {"fp8-e4m3-1x128-pow2", "fp8-e4m3-1x128-ue8m0"}) {
        EXPECT_EQ(pow2_scale(name, 56.0f), 0.125f) << name;
        EXPECT_EQ(pow2_scale(name, std::nextafter(56.0f, 100.0f)), 0.25f) << name;
        // below the floor: t = fl32(F c) = 2.2321429e-7, 2^-22.1: e = -22
        EXPECT_EQ(pow2_scale(name, 1e-6f), 0x1p-22f) << name;
        EXPECT_EQ(pow2_scale(name, 0.0f), 0x1p-22f) << name;
        // FLT_MAX c = 7.6e35, 2^119.2: e = 120
        EXPECT_EQ(pow2_scale(name, FLT_MAX), 0x1p120f) << name;
    }
    std::vector<float> x(128, 1.0f);
    x[0] = 56.0f;
    const Quantized q = q_of("fp8-e4m3-1x128-ue8m0", x, 128);
    EXPECT_EQ(scale_byte(q), 124);
    EXPECT_EQ(q.codes[0], 0x7E);  // v = 56 / 0.125 = 448
    EXPECT_EQ(q.format.scale_bytes(), 1);
    EXPECT_EQ(fmt("fp8-e4m3-1x128-pow2").scale_bytes(), 4);
    // For A = 448 the rule crosses 2^k exactly where a crosses 448 2^k (448 c exceeds 1 by 0.75 2^-24,
    // under half an ulp, and an ulp of a is at least 1.14 2^-24 of it): the same scales as the exact
    // e8m0-rceil (mxfp8-e4m3-rceil) at every exponent change above the floor, two ulps either side.
    for (int k = -13; k <= 118; ++k) {
        float a = std::ldexp(448.0f, k);
        for (int u = 0; u < 2; ++u) a = std::nextafter(a, 0.0f);
        for (int u = 0; u < 5; ++u, a = std::nextafter(a, FLT_MAX)) {
            std::vector<float> b(32, 0.0f);
            b[3] = a;
            const float exact = quantize(fmt("mxfp8-e4m3-rceil"), b, 32).value().scales[0];
            EXPECT_EQ(pow2_scale("fp8-e4m3-1x128-pow2", a), exact) << "a = " << a;
        }
    }
}

TEST(DeclGolden, Mxfp8ZeroSignAndZeroBlock) {
    std::vector<float> x(32, 1.0f);
    x[5] = -0x1p-140f;  // v = -2^-140 2^7 rounds to -0
    const Quantized q = q_of("mxfp8-e4m3", x, 32);
    EXPECT_EQ(scale_byte(q), 127 - 8);  // e = 0 - 8
    EXPECT_EQ(q.codes[5], 0x80);
    EXPECT_TRUE(std::signbit(q.decoded[5]));
    EXPECT_EQ(q.decoded[5], 0.0f);
    const Quantized z = q_of("mxfp8-e4m3", std::vector<float>(32, 0.0f), 32);
    EXPECT_EQ(scale_byte(z), 0x00);
    EXPECT_EQ(z.scales[0], 0x1p-127f);
    for (int32_t c : z.codes) EXPECT_EQ(c, 0);
}

TEST(DeclGolden, Fp8E5m2) {
    // fp8-e5m2: E5 M2 bias 15 ieee, max 57344 (0 11110 11). The block {57344, x}: s = 1.
    auto code = [](float x) { return q_of("fp8-e5m2", {57344.0f, x}).codes[1]; };
    EXPECT_EQ(code(57344.0f), 0x7B);
    EXPECT_EQ(code(1.0f), 0x3C);         // 0 01111 00
    EXPECT_EQ(code(1.125f), 0x3C);       // tie between 1 and 1.25 -> 1 (even mantissa)
    EXPECT_EQ(code(1.375f), 0x3E);       // tie 1.25 / 1.5 -> 1.5 (mantissa 10)
    EXPECT_EQ(code(-0x1p-16f), 0x80 | 0x01);  // the smallest subnormal 2^-14 2^-2
}

TEST(DeclGolden, Nf4) {
    const FormatSpec f = fmt("nf4");
    const Decl& d = *f.decl;
    // A block with absmax 1: s = 1, v = x. Each table value maps to its index.
    std::vector<float> x;
    for (int i = 0; i < 16; ++i) x.push_back(d.table[i]);
    const Quantized q = q_of("nf4", x);
    for (int i = 0; i < 16; ++i) EXPECT_EQ(q.codes[i], i);
    // An exact midpoint goes to the lower code (nearest-down).
    for (int i = 0; i + 1 < 16; ++i) {
        const double mid = (static_cast<double>(d.table[i]) + d.table[i + 1]) / 2;
        const float m = static_cast<float>(mid);
        if (static_cast<double>(m) != mid) continue;  // only midpoints that are binary32 values
        EXPECT_EQ(q_of("nf4", {1.0f, m}).codes[1], i) << i;
    }
    // Packing: msb-first, the first element in the high nibble.
    const auto bytes = pack(f, std::vector<int32_t>{0x3, 0xA, 0x5}, 3);
    ASSERT_EQ(bytes.size(), 2u);
    EXPECT_EQ(bytes[0], 0x3A);
    EXPECT_EQ(bytes[1], 0x50);
}

TEST(DeclGolden, Mxint8) {
    // int 8 signed restricted f = 6: values q/64, q in [-127, 127], A = 127/64, emax_elem = 0.
    std::vector<float> x(32, 0.0f);
    x[0] = 1.5f;
    x[1] = 1.999f;   // v = 1.999 -> rne(127.94) = 128 -> saturates to 127
    x[2] = -1.999f;  // -127 (restricted)
    x[3] = 0.5f + 1.0f / 128;  // 32.5 -> 32 (even)
    const Quantized q = q_of("mxint8", x, 32);
    EXPECT_EQ(scale_byte(q), 127);
    EXPECT_EQ(q.codes[0], 96);
    EXPECT_EQ(q.codes[1], 127);
    EXPECT_EQ(q.codes[2], -127);
    EXPECT_EQ(q.codes[3], 32);
    EXPECT_EQ(q.decoded[1], 127.0f / 64);
}

// Stochastic rounding's word (FORMATS.md section 4): element g rounds up when U < fr, U = (w >> 8)
// 2^-24, w = word (g & 3) of Philox4x32-10 at counter (lo32(g >> 2), hi32(g >> 2), rank word,
// 4 | (hop << 8)), key (lo32(seed), hi32(seed)). int4-sr with the block {7, v...}: s = 1, so v is
// x, and every fraction j / 16 is exact. Indices from 2^34 - 6: g crosses multiples of 4 and
// counter 2^32.
TEST(DeclGolden, StochasticWordIsWordGMod4OfCounterGDiv4) {
    const FormatSpec f = fmt("int4-sr");
    std::vector<float> x{7.0f};
    for (int j = 1; j < 40; ++j) x.push_back(static_cast<float>(j % 13 - 6) + static_cast<float>(j % 16) / 16.0f);
    for (const int64_t base : {int64_t{0}, int64_t{3}, (int64_t{1} << 32) - 2, (int64_t{1} << 34) - 6}) {
        const uint64_t seed = 0x0123456789ABCDEFu;
        const auto q = quantize(f, x, static_cast<int64_t>(x.size()), Nonfinite::kError, Site{"input", 3, base},
                                StochasticKey{seed, 2}).value();
        ASSERT_EQ(q.scales[0], 1.0f);
        for (size_t i = 1; i < x.size(); ++i) {
            const uint64_t g = static_cast<uint64_t>(base) + i, c = g >> 2;
            const Philox4x32 w = philox4x32_10(Philox4x32{{static_cast<uint32_t>(c), static_cast<uint32_t>(c >> 32), 3u, 4u | (2u << 8)}},
                                               static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
            const double u = static_cast<double>(w.v[g & 3] >> 8) * 0x1p-24;
            const double t = std::fabs(static_cast<double>(x[i])), fl = std::floor(t);
            const int32_t mag = static_cast<int32_t>(fl) + (u < t - fl ? 1 : 0);
            EXPECT_EQ(q.codes[i], x[i] < 0 ? -mag : mag) << base << " " << i << " " << x[i];
        }
    }
}

TEST(DeclErrors, NonFiniteAndOverflowNameTheElement) {
    std::vector<float> x(64, 1.0f);
    x[40] = NAN;
    auto r = quantize(fmt("mxfp8-e4m3"), x, 32, Nonfinite::kError, Site{"input", 3, 100});
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("element 140"), std::string::npos) << r.error().message;
    auto p = quantize(fmt("mxfp8-e4m3"), x, 32, Nonfinite::kPropagate);
    ASSERT_TRUE(p.ok());
    EXPECT_TRUE(std::isnan(p.value().scales[1]));
    EXPECT_EQ(p.value().poisoned[1], 1);
    EXPECT_EQ(std::bit_cast<uint32_t>(p.value().decoded[33]), 0x7FC00000u);
    EXPECT_EQ(p.value().codes[33], 0);
    uint8_t b[4];
    write_metadata(p.value().format, p.value().scales[1], 0, b);
    EXPECT_EQ(b[0], 0xFF);
    // A block size the MX formats do not allow.
    auto bad = quantize(fmt("mxfp4"), x, 16);
    ASSERT_FALSE(bad.ok());
    EXPECT_NE(bad.error().message.find("32"), std::string::npos) << bad.error().message;
}

TEST(DeclErrors, ScaleNoneAndScaleOverflow) {
    Decl d = *fmt("fp8-e4m3").decl;
    d.scale = ScaleType::kNone;
    ASSERT_TRUE(finalize(d).ok());
    const FormatSpec f = make_declared("test-e4m3-noscale", d);
    auto p = quantize(f, std::vector<float>{1.0f, INFINITY, 2.0f}, 3, Nonfinite::kPropagate);
    ASSERT_TRUE(p.ok());
    for (int32_t c : p.value().codes) EXPECT_EQ(c, 0x7F);
    for (float v : p.value().decoded) EXPECT_EQ(std::bit_cast<uint32_t>(v), 0x7FC00000u);
    // fp4 elements with scale none: no NaN code, propagate is refused.
    Decl e = *fmt("mxfp4").decl;
    e.scale = ScaleType::kNone;
    e.fixed_block = 0;
    ASSERT_TRUE(finalize(e).ok());
    auto r = quantize(make_declared("test-fp4-noscale", e), std::vector<float>{NAN}, 1, Nonfinite::kPropagate);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("no NaN code"), std::string::npos) << r.error().message;
    // fp16 scale overflow: int8 elements, fp16-absmax, a = 1e10: s = 1e10 / 127 overflows binary16.
    Decl h = declaration_of(FormatSpec{FormatKind::kSym, 8}).value();
    h.scale = ScaleType::kFp16Absmax;
    ASSERT_TRUE(finalize(h).ok());
    auto o = quantize(make_declared("test-int8-fp16", h), std::vector<float>{1e10f, 1.0f}, 2);
    ASSERT_FALSE(o.ok());
    EXPECT_NE(o.error().message.find("binary16"), std::string::npos) << o.error().message;
}


// Declared conventions (FORMATS.md section 10): what a library with them writes for a block, worked
// out by hand from the section's steps.
FormatSpec with_conventions(const std::string& like, const Conventions& c) {
    Decl d = declaration_of(fmt(like)).value();
    d.conventions = c;
    EXPECT_TRUE(finalize(d).ok());
    return make_declared("conv-" + like, d);
}
using Want = ConventionBlock::Want;

TEST(Conventions, TorchaoFloorDividesByTheSmallestNormalBelowIt) {
    // mxfp8-e4m3, a block of 32 whose absmax is 2^-124: e = floor(log2 a) - 8 = -132, clamped to
    // -127: s = 2^-127. The format: v = 2^-124 / 2^-127 = 8, decoded 2^-124. divide_floor 2^-126:
    // v = 2^-124 / 2^-126 = 4 (exact in E4M3), decoded 4 * 2^-127 = 2^-125.
    Conventions c;
    c.divide_floor = 0x1p-126f;
    std::vector<float> x(32, 0.0f);
    x[0] = 0x1p-124f;
    x[1] = -0x1p-126f;  // v = -1: decoded -2^-127
    const auto cb = convention_block(with_conventions("mxfp8-e4m3", c), x);
    EXPECT_EQ(cb.applied, uint32_t{kConvDivideFloor});
    EXPECT_EQ(cb.scale, 0x1p-127f);
    EXPECT_EQ(cb.value[0], 0x1p-125f);
    EXPECT_EQ(cb.value[1], -0x1p-127f);
    EXPECT_EQ(std::bit_cast<uint32_t>(cb.value[2]), 0u);  // +0 stays +0
    // RCEIL's byte 0 multiplies by 1.0 (divide_floor_by): 2^-124 / 1 rounds to 0 in E4M3.
    c.divide_floor_by = 1.0f;
    const auto r = convention_block(with_conventions("mxfp8-e4m3-rceil", c), x);
    EXPECT_EQ(r.applied, uint32_t{kConvDivideFloor});
    EXPECT_EQ(r.scale, 0x1p-127f);
    EXPECT_EQ(r.value[0], 0.0f);
    // A block whose scale is 2^-126 or more is the format's: nothing applied.
    x[0] = 1.0f;
    EXPECT_EQ(convention_block(with_conventions("mxfp8-e4m3", c), x).applied, 0u);
}

TEST(Conventions, ZeroScaleAndOverflowAsIeeeDivisionAndANonSaturatingCast) {
    // fp8-e4m3 with s = amax / 448 and no floor (ml_dtypes, torch casts): an all-zero block is 0/0;
    // a block whose a / 448 underflows to 0 is x / 0 = inf, which a non-saturating cast makes NaN.
    Conventions c;
    c.scale_floor = ScaleFloorRule::kNone;
    c.zero_scale_ieee = true;
    c.overflow_nonfinite = true;
    const FormatSpec f = with_conventions("fp8-e4m3", c);
    const auto zero = convention_block(f, std::vector<float>{0.0f, -0.0f});
    EXPECT_EQ(zero.applied, uint32_t{kConvZeroScale});
    EXPECT_EQ(zero.scale, 0.0f);
    EXPECT_EQ(zero.want[0], Want::kNaN);
    EXPECT_EQ(zero.want[1], Want::kNaN);
    // a = 2^-149: fl32(2^-149 / 448) = 0 (below half the smallest subnormal); the format floors it at 2^-149.
    const auto tiny = convention_block(f, std::vector<float>{0x1p-149f, 0.0f});
    EXPECT_EQ(tiny.applied, uint32_t{kConvScaleFloor | kConvZeroScale | kConvOverflow});
    EXPECT_EQ(tiny.scale, 0.0f);
    EXPECT_EQ(tiny.want[0], Want::kNonfinite);
    EXPECT_EQ(tiny.want[1], Want::kNaN);
    // Saturating instead (torchao's clamp before the cast): x / 0 = inf saturates to 448, decoded 448 * 0 = +0.
    c.overflow_nonfinite = false;
    const auto sat = convention_block(with_conventions("fp8-e4m3", c), std::vector<float>{-0x1p-149f, 0.0f});
    EXPECT_EQ(sat.applied, uint32_t{kConvScaleFloor | kConvZeroScale});
    EXPECT_EQ(sat.want[0], Want::kValue);
    EXPECT_EQ(std::bit_cast<uint32_t>(sat.value[0]), 0x80000000u);  // -448 * 0 = -0
    // An ordinary block: the format's, nothing applied.
    EXPECT_EQ(convention_block(f, std::vector<float>{1.0f, -3.0f}).applied, 0u);
}

TEST(Conventions, OverflowPastTheLargestValueUnderTheFloorRule) {
    // mxfp8-e4m3 with the floor rule: a = 480 gives e = 8 - 8 = 0, s = 1, v = 480 > 448. RNE on
    // E4M3's grid at 2^8 (step 32): 480 is a grid point past 448; 464 is the tie between 448 (even
    // mantissa 110) and 480, so it rounds to 448 and does not overflow.
    Conventions c;
    c.overflow_nonfinite = true;
    std::vector<float> x(32, 1.0f);
    x[0] = 480.0f;
    x[1] = 464.0f;
    x[2] = -470.0f;  // above the tie: rounds to -480, overflows
    const auto cb = convention_block(with_conventions("mxfp8-e4m3", c), x);
    EXPECT_EQ(cb.applied, uint32_t{kConvOverflow});
    EXPECT_EQ(cb.want[0], Want::kNonfinite);
    EXPECT_EQ(cb.want[1], Want::kValue);
    EXPECT_EQ(cb.value[1], 448.0f);
    EXPECT_EQ(cb.want[2], Want::kNonfinite);
}

TEST(Conventions, SaturateWritesNonfiniteAsTheLargestOfItsSign) {
    // fbgemm-fp8 (HFP8, no scale, largest 0.9375): NaN, -NaN, inf, -inf saturate by their sign bit
    // as FBGEMM's fminf does; the finite elements are the format's (1.0 saturates too, 2^-9 is a code).
    Conventions c;
    c.nonfinite = NonfiniteRule::kSaturate;
    const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
    const auto b = convention_block(with_conventions("fbgemm-fp8", c), std::vector<float>{nan, -nan, inf, -inf, 1.0f, 0x1p-9f});
    EXPECT_EQ(b.applied, uint32_t{kConvNonfinite});
    const float want[] = {0.9375f, -0.9375f, 0.9375f, -0.9375f, 0.9375f, 0x1p-9f};
    for (size_t i = 0; i < 6; ++i) {
        EXPECT_EQ(b.want[i], Want::kValue) << i;
        EXPECT_EQ(std::bit_cast<uint32_t>(b.value[i]), std::bit_cast<uint32_t>(want[i])) << i;
    }
    // A finite block is the format's own: no convention applied.
    EXPECT_EQ(convention_block(with_conventions("fbgemm-fp8", c), std::vector<float>{1.0f, -0.5f}).applied, 0u);
}

TEST(Conventions, FlushesAndFloorsAndPoison) {
    // Element subnormals: fp8-e4m3, block {448, 2^-7, 2^-6}: s = 1; 2^-7 is an E4M3 subnormal
    // (emin = -6), 2^-6 the smallest normal.
    Conventions c;
    c.flush_element_subnormals = true;
    const auto e = convention_block(with_conventions("fp8-e4m3", c), std::vector<float>{448.0f, 0x1p-7f, 0x1p-6f});
    EXPECT_EQ(e.applied, uint32_t{kConvElementSubnormals});
    EXPECT_EQ(e.want[1], Want::kZero);
    EXPECT_EQ(e.want[2], Want::kValue);
    EXPECT_EQ(e.value[2], 0x1p-6f);
    // Scale floor 2^-20 on int8 (A = 127): a block of absmax 2^-40 gets s = 2^-20, v = 2^-20 rounds
    // to 0; the format's s = fl32(2^-40 / 127) keeps it (code 127).
    Conventions f;
    f.scale_floor = ScaleFloorRule::kValue;
    f.scale_floor_value = 0x1p-20f;
    const auto fl = convention_block(with_conventions("int8", f), std::vector<float>{0x1p-40f, 0.0f});
    EXPECT_EQ(fl.applied, uint32_t{kConvScaleFloor});
    EXPECT_EQ(fl.scale, 0x1p-20f);
    EXPECT_EQ(fl.value[0], 0.0f);
    // A zero block under a value floor: s = 2^-20 (the format's 0), decoded zeros.
    EXPECT_EQ(convention_block(with_conventions("int8", f), std::vector<float>{0.0f}).scale, 0x1p-20f);
    // Scale subnormals flushed: int8, a = 2^-130: s = fl32(2^-130 / 127), subnormal, becomes 0 and
    // the block decodes to zeros (int8's code 0 has no sign: +0; a float element keeps x's sign).
    Conventions sf;
    sf.flush_scale_subnormals = true;
    const auto sub = convention_block(with_conventions("int8", sf), std::vector<float>{-0x1p-130f});
    EXPECT_EQ(sub.applied, uint32_t{kConvScaleSubnormals});
    EXPECT_EQ(sub.scale, 0.0f);
    EXPECT_EQ(std::bit_cast<uint32_t>(sub.value[0]), 0u);
    const auto subf = convention_block(with_conventions("fp8-e4m3", sf), std::vector<float>{-0x1p-130f});
    EXPECT_EQ(subf.applied, uint32_t{kConvScaleSubnormals});
    EXPECT_EQ(std::bit_cast<uint32_t>(subf.value[0]), 0x80000000u);
    // Poison: a NaN anywhere makes every element NaN; without the convention, nothing applies.
    Conventions p;
    p.nonfinite = NonfiniteRule::kPoison;
    const auto nan = convention_block(with_conventions("mxfp8-e4m3", p), std::vector<float>(32, std::nanf("")));
    EXPECT_EQ(nan.applied, uint32_t{kConvNonfinite});
    EXPECT_TRUE(nan.any_scale);
    EXPECT_EQ(nan.want[31], Want::kNaN);
    EXPECT_EQ(convention_block(fmt("mxfp8-e4m3"), std::vector<float>(32, INFINITY)).applied, 0u);
}

}  // namespace
}  // namespace qtransit::reference
