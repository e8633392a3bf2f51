// Unit tests of the reference: Exact arithmetic, binary16 rounding, hand-computed golden blocks for
// every format family, D1 saturation, wire packing, error messages and the `propagate` policy.
//
// The golden values were computed independently of this code, with numpy (IEEE binary32 and
// binary16 arithmetic, np.rint ties to even), following NUMERICS.md step by step; each block's
// comment shows the computation.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "qtransit/reference/exact.hpp"
#include "qtransit/reference/formats.hpp"

namespace qtransit::reference {
namespace {

constexpr float kFltMax = std::numeric_limits<float>::max();
uint32_t bits(float v) { return std::bit_cast<uint32_t>(v); }

FormatSpec sym(int b) { return {FormatKind::kSym, b}; }
FormatSpec asym(int b) { return {FormatKind::kAsym, b}; }
FormatSpec ds(int b) { return {FormatKind::kDs, b}; }

// Same bits, so that -0 and +0 (and NaN payloads) are told apart.
void expect_same_floats(const std::vector<float>& got, const std::vector<float>& want) {
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t i = 0; i < got.size(); ++i)
        EXPECT_EQ(bits(got[i]), bits(want[i])) << "element " << i << ": got " << got[i] << ", want " << want[i];
}

Quantized must_quantize(const FormatSpec& f, const std::vector<float>& x, int64_t block,
                        Nonfinite policy = Nonfinite::kError) {
    auto r = quantize(f, x, block, policy);
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
    return r.ok() ? std::move(r).value() : Quantized{};
}

// ---- Exact ----------------------------------------------------------------------------------

TEST(Exact, KnownValues) {
    EXPECT_EQ(Exact(0x1p-149f), Exact::pow2(-149));
    EXPECT_EQ(Exact(0x1p-149f).to_string(), "1*2^-149");
    // FLT_MAX = (2^24 - 1) * 2^104
    EXPECT_EQ(Exact(kFltMax), Exact::from_int((1 << 24) - 1) * Exact::pow2(104));
    EXPECT_EQ(Exact(kFltMax).to_string(), "16777215*2^104");
    EXPECT_EQ(Exact(-6.0).to_string(), "-3*2^1");
    EXPECT_EQ(Exact().to_string(), "0");
    EXPECT_EQ(Exact(0.0f), Exact(-0.0f));
    EXPECT_EQ(Exact(-0.0).sign(), 0);
    EXPECT_EQ(Exact(0.75), Exact::from_int(3) * Exact::pow2(-2));
    EXPECT_EQ(Exact(0.1f), Exact::from_int(13421773) * Exact::pow2(-27));  // 0.1f = 0x1.99999ap-4
    EXPECT_EQ(Exact(5e-324), Exact::pow2(-1074));                            // smallest double subnormal
    EXPECT_EQ(Exact::from_int(-40), Exact(-40.0));
    EXPECT_EQ(Exact::from_int(INT64_MIN), -Exact::pow2(63));
}

TEST(Exact, SumsThatCancelExactly) {
    const Exact tiny = Exact::pow2(-149), big(kFltMax);
    EXPECT_EQ(big + tiny - big, tiny);
    EXPECT_EQ((big + tiny) - tiny, big);
    EXPECT_EQ(big - big, Exact());
    EXPECT_EQ((big - big).to_string(), "0");
    EXPECT_EQ(Exact(0.1f) + Exact(0.2f) - Exact(0.1f) - Exact(0.2f), Exact());
    // 0.1f + 0.2f is not 0.3f in binary32, and the exact sum shows the difference.
    EXPECT_NE(Exact(0.1f) + Exact(0.2f), Exact(0.3f));
    EXPECT_EQ(Exact(1.5) + Exact(-1.5), Exact());
    Exact acc;
    for (int i = 0; i < 1000; ++i) acc += Exact(0.1f);
    for (int i = 0; i < 1000; ++i) acc -= Exact(0.1f);
    EXPECT_EQ(acc.sign(), 0);
    // The full span of binary32: 2^128 - 2^104 + 2^-149 has 277 significant bits.
    const Exact span = big + tiny;
    EXPECT_EQ(span - Exact::pow2(128) + Exact::pow2(104), tiny);
    EXPECT_GT(span, big);
}

TEST(Exact, Products) {
    EXPECT_EQ(Exact(3.0) * Exact(0.5), Exact(1.5));
    EXPECT_EQ(Exact(-3.0) * Exact(0.5), Exact(-1.5));
    EXPECT_EQ(Exact(kFltMax) * Exact(kFltMax),
              Exact::from_int(int64_t{16777215} * 16777215) * Exact::pow2(208));
    EXPECT_EQ(Exact(0x1p-149f) * Exact(0x1p-149f), Exact::pow2(-298));
    EXPECT_EQ(Exact(kFltMax) * Exact(), Exact());
    EXPECT_EQ((Exact(0.1f) * Exact(10.0f)).to_string(), "67108865*2^-26");  // 13421773 * 5 * 2^-26
}

TEST(Exact, CompareSignAbs) {
    EXPECT_LT(Exact(-1.0), Exact(0.0));
    EXPECT_LT(Exact(-2.0), Exact(-1.0));
    EXPECT_LT(Exact(1.0), Exact(1.0) + Exact::pow2(-200));
    EXPECT_GT(Exact(-1.0), Exact(-1.0) - Exact::pow2(-200));
    EXPECT_LT(Exact(0x1p-149f), Exact(0x1p-148f));
    EXPECT_LT(Exact(3.0), Exact(4.0));  // same top bit position? no: 3 < 4 across binades
    EXPECT_LT(Exact(5.0), Exact(6.0));  // same binade, different exponents in normal form
    EXPECT_LE(Exact(6.0), Exact(6.0));
    EXPECT_EQ(Exact(-7.0).abs(), Exact(7.0));
    EXPECT_EQ(Exact(-7.0).sign(), -1);
    EXPECT_EQ(Exact(7.0).sign(), 1);
    EXPECT_EQ(-Exact(7.0), Exact(-7.0));
    EXPECT_EQ(Exact(6.0).ilogb(), 2);
    EXPECT_EQ(Exact(0x1p-149f).ilogb(), -149);
    EXPECT_EQ(Exact(kFltMax).ilogb(), 127);
}

TEST(Exact, ToDoubleRoundsToNearestEven) {
    const Exact two53 = Exact::pow2(53);
    EXPECT_EQ((two53 + Exact::from_int(1)).to_double(), 0x1p53);            // tie: to even
    EXPECT_EQ((two53 + Exact::from_int(3)).to_double(), 0x1p53 + 4);        // tie: to even (up)
    EXPECT_EQ((two53 + Exact::from_int(1) + Exact::pow2(-100)).to_double(), 0x1p53 + 2);  // sticky
    EXPECT_EQ(Exact::pow2(-1074).to_double(), 0x1p-1074);
    EXPECT_EQ(Exact::pow2(-1075).to_double(), 0.0);                          // tie with 0: to even
    EXPECT_EQ((Exact::pow2(-1075) + Exact::pow2(-1200)).to_double(), 0x1p-1074);
    EXPECT_EQ((Exact::pow2(-1075) * Exact::from_int(3)).to_double(), 0x1p-1073);  // 1.5 ulp: tie to even 2
    EXPECT_EQ(Exact::pow2(1024).to_double(), std::numeric_limits<double>::infinity());
    EXPECT_EQ((-Exact::pow2(1024)).to_double(), -std::numeric_limits<double>::infinity());
    EXPECT_EQ(Exact(kFltMax).to_double(), static_cast<double>(kFltMax));
    EXPECT_EQ(Exact(-0.1).to_double(), -0.1);
    EXPECT_EQ(Exact().to_double(), 0.0);
}

TEST(Exact, Ratio) {
    EXPECT_EQ(Exact::ratio(Exact(1.0), Exact(3.0)), 1.0 / 3.0);
    EXPECT_EQ(Exact::ratio(Exact(-6.0), Exact(4.0)), -1.5);
    EXPECT_EQ(Exact::ratio(Exact(0x1p-149f), Exact(0x1p100)), 0x1p-249);
    EXPECT_EQ(Exact::ratio(Exact(), Exact(2.0)), 0.0);
    EXPECT_EQ(Exact::ratio(Exact(0.1), Exact(0.3)), 0.1 / 0.3);
    EXPECT_EQ(Exact::ratio(Exact(kFltMax) + Exact(0x1p-149f), Exact(kFltMax)), 1.0);
}

// ---- binary16 rounding ----------------------------------------------------------------------

TEST(Fp16, Golden) {
    EXPECT_EQ(round_to_fp16(65504.0f), 65504.0f);
    EXPECT_EQ(round_to_fp16(65519.996f), 65504.0f);          // just below the overflow threshold
    EXPECT_EQ(round_to_fp16(65520.0f), std::numeric_limits<float>::infinity());  // tie: rounds to 2^16
    EXPECT_EQ(round_to_fp16(-65520.0f), -std::numeric_limits<float>::infinity());
    EXPECT_EQ(round_to_fp16(kFltMax), std::numeric_limits<float>::infinity());
    EXPECT_EQ(round_to_fp16(0x1p-24f), 0x1p-24f);            // smallest subnormal
    EXPECT_EQ(bits(round_to_fp16(0x1p-25f)), bits(0.0f));    // tie between 0 and 2^-24: to even (0)
    EXPECT_EQ(bits(round_to_fp16(-0x1p-25f)), bits(-0.0f));  // the sign of zero is kept
    EXPECT_EQ(round_to_fp16(0x1.000002p-25f), 0x1p-24f);     // just above the tie
    EXPECT_EQ(round_to_fp16(3 * 0x1p-26f), 0x1p-24f);        // 0.75 of the subnormal spacing
    EXPECT_EQ(round_to_fp16(3 * 0x1p-25f), 0x1p-23f);        // 1.5 spacings: tie to even (2)
    EXPECT_EQ(round_to_fp16(1.0f + 0x1p-11f), 1.0f);         // tie: to even
    EXPECT_EQ(round_to_fp16(1.0f + 3 * 0x1p-11f), 1.0f + 0x1p-9f);  // tie: to even (up)
    EXPECT_EQ(round_to_fp16(0x1p-14f), 0x1p-14f);            // smallest normal
    EXPECT_EQ(round_to_fp16(0x1.ffcp-15f), 0x1p-14f);        // largest subnormal + half: tie, to even (2^-14)
    EXPECT_EQ(round_to_fp16(0x1.ff4p-15f), 0x1.ff0p-15f);    // 1021.5 * 2^-24: tie, to even (1022)
    EXPECT_EQ(round_to_fp16(0.1f), 0x1.998p-4f);
    EXPECT_EQ(round_to_fp16(-0.7f), -0x1.668p-1f);
    EXPECT_TRUE(std::isnan(round_to_fp16(std::numeric_limits<float>::quiet_NaN())));
    EXPECT_EQ(round_to_fp16(-std::numeric_limits<float>::infinity()), -std::numeric_limits<float>::infinity());
}

// ---- golden blocks --------------------------------------------------------------------------

TEST(Golden, Int8) {
    // a = 3, s = fl32(3/127) = 0x1.83060cp-6 (0.023622047);
    // x/s = 4.23, -10.58, 42.33, -127, 105.83, 0.296 -> q = 4, -11, 42, -127, 106, 0;
    // x̂ = fl32(q s).
    const std::vector<float> x{0.1f, -0.25f, 1.0f, -3.0f, 2.5f, 0.007f};
    const Quantized q = must_quantize(sym(8), x, 32);
    ASSERT_EQ(q.scales.size(), 1u);
    EXPECT_EQ(bits(q.scales[0]), bits(0x1.83060cp-6f));
    EXPECT_EQ(q.codes, (std::vector<int32_t>{4, -11, 42, -127, 106, 0}));
    expect_same_floats(q.decoded, {0x1.83060cp-4f, -0x1.0a1428p-2f, 0x1.fbf7fp-1f, -3.0f, 0x1.408102p+1f, 0.0f});
    EXPECT_TRUE(q.offsets.empty());
    EXPECT_EQ(q.poisoned, (std::vector<uint8_t>{0}));
    EXPECT_TRUE(check_bounds(q, x).holds);
}

TEST(Golden, Int4) {
    // a = 1.75, s = 1.75/7 = 0.25 (exact); x/s = 2, -7, 0.8, 4, -1.32 -> q = 2, -7, 1, 4, -1.
    const std::vector<float> x{0.5f, -1.75f, 0.2f, 1.0f, -0.33f};
    const Quantized q = must_quantize(sym(4), x, 32);
    EXPECT_EQ(q.scales[0], 0.25f);
    EXPECT_EQ(q.codes, (std::vector<int32_t>{2, -7, 1, 4, -1}));
    expect_same_floats(q.decoded, {0.5f, -1.75f, 0.25f, 1.0f, -0.25f});
    EXPECT_TRUE(check_bounds(q, x).holds);
}

TEST(Golden, Int3) {
    // qmax = 3, a = 1, s = fl32(1/3) = 0x1.555556p-2; x/s = 3 (fl32 of 2.99999991), -1.8, 0.75, 1.47
    // -> q = 3, -2, 1, 1; x̂: fl32(3 s) = 1 (3.0000000298 rounds to 1), -2s, s, s.
    const std::vector<float> x{1.0f, -0.6f, 0.25f, 0.49f};
    const Quantized q = must_quantize(sym(3), x, 32);
    EXPECT_EQ(bits(q.scales[0]), bits(0x1.555556p-2f));
    EXPECT_EQ(q.codes, (std::vector<int32_t>{3, -2, 1, 1}));
    expect_same_floats(q.decoded, {1.0f, -0x1.555556p-1f, 0x1.555556p-2f, 0x1.555556p-2f});
    EXPECT_TRUE(check_bounds(q, x).holds);
}

TEST(Golden, Int4AsymWithTies) {
    // lo = -1, hi = 2, s = fl32(3/15) = 0x1.99999ap-3 (0.20000000298).
    // (x - lo)/s: 0; fl32(1.5/s) = 7.5 exactly (7.49999989 rounds to it): a tie -> 8;
    // 3/s -> 15; fl32(0.1f + 1) = 0x1.19999ap0, / s -> 5.5 (tie) -> 6; fl32(1.3f + 1)/s -> 11.5 (tie) -> 12.
    // x̂ = fl32(fl32(q s) + lo): -1, fl32(1.6000000238) - 1 = 0x1.333334p-1, 2, 0x1.9999ap-3, 0x1.666668p0.
    const std::vector<float> x{-1.0f, 0.5f, 2.0f, 0.1f, 1.3f};
    const Quantized q = must_quantize(asym(4), x, 32);
    EXPECT_EQ(bits(q.scales[0]), bits(0x1.99999ap-3f));
    ASSERT_EQ(q.offsets.size(), 1u);
    EXPECT_EQ(q.offsets[0], -1.0f);
    EXPECT_EQ(q.codes, (std::vector<int32_t>{0, 8, 15, 6, 12}));
    expect_same_floats(q.decoded, {-1.0f, 0x1.333334p-1f, 2.0f, 0x1.9999ap-3f, 0x1.666668p+0f});
    EXPECT_TRUE(check_bounds(q, x).holds);
}

TEST(Golden, DsInt8ClampsThePositiveAbsmax) {
    // fl16: 0.1 -> 0x1.998p-4, 0.007 -> 0x1.cb8p-8, 3.0001 -> 3; a = 3;
    // scale = fl32(256 / 6) = 0x1.555556p+5 (42.666668), Δ = fl32(1/scale) = 0x1.8p-6 (0.0234375);
    // y*scale: 4.27, -10.67, 42.67, -128.0, 106.67, 0.31, 128.0 -> rne -> 4, -11, 43, -128, 107, 0, 128,
    // and 128 clamps to 127 (a full step below 3); -128 stays. x̂ = fl16(fl32(q Δ)).
    const std::vector<float> x{0.1f, -0.25f, 1.0f, -3.0f, 2.5f, 0.007f, 3.0001f};
    const Quantized q = must_quantize(ds(8), x, 32);
    EXPECT_EQ(bits(q.scales[0]), bits(0x1.8p-6f));
    EXPECT_EQ(q.codes, (std::vector<int32_t>{4, -11, 43, -128, 107, 0, 127}));
    expect_same_floats(q.decoded, {0x1.8p-4f, -0x1.08p-2f, 0x1.02p+0f, -3.0f, 0x1.41p+1f, 0.0f, 0x1.7dp+1f});
    const BoundCheck c = check_bounds(q, x);
    EXPECT_TRUE(c.holds);
    // The clamped element's error is a full step (3 - 2.9765625 = Δ, plus the fp16 input rounding of
    // 3.0001); its bound must allow it.
    EXPECT_GE(c.max_error, 0.0234375);
    EXPECT_LE(Exact(0.0234375f), element_bound(q, x, 6));
}

TEST(Golden, DsInt4) {
    // fl16: 0.3 -> 0x1.33p-2, -0.7 -> -0x1.668p-1, 1.1 -> 0x1.198p0 (1.099609375), 0.05 -> 0x1.998p-5;
    // a = 1.099609375, scale = fl32(16 / 2.19921875) = 0x1.d19eb2p+2 (7.275311), Δ = 0x1.198p-3 (a/8);
    // y*scale: 2.18, -5.09, 8.0 (clamped to 7), 0.36, -8.0 -> q = 2, -5, 7, 0, -8;
    // x̂ = fl16(fl32(q Δ)): 0x1.198p-2, fl16(-0.68725586) = -0.6875 (a binary16 tie, to even),
    // fl16(0.96215820) = 0x1.ec8p-1, 0, -0x1.198p0.
    const std::vector<float> x{0.3f, -0.7f, 1.1f, 0.05f, -1.1f};
    const Quantized q = must_quantize(ds(4), x, 32);
    EXPECT_EQ(bits(q.scales[0]), bits(0x1.198p-3f));
    EXPECT_EQ(q.codes, (std::vector<int32_t>{2, -5, 7, 0, -8}));
    expect_same_floats(q.decoded, {0x1.198p-2f, -0x1.6p-1f, 0x1.ec8p-1f, 0.0f, -0x1.198p+0f});
    EXPECT_TRUE(check_bounds(q, x).holds);
}

TEST(Golden, DsIsNotIdempotent) {
    // [3, -1]: a = 3, Δ = 0x1.8p-6; 3 -> 128 -> clamped 127, x̂ = 127 Δ = 0x1.7dp+1. Requantizing
    // the decoded block: a' = 127 Δ, so Δ' = Δ * 127/128 = 0x1.7dp-6: the step shrinks.
    const std::vector<float> x{3.0f, -1.0f};
    const Quantized q1 = must_quantize(ds(8), x, 32);
    EXPECT_EQ(q1.scales[0], 0x1.8p-6f);
    EXPECT_EQ(q1.codes, (std::vector<int32_t>{127, -43}));
    const Quantized q2 = must_quantize(ds(8), q1.decoded, 32);
    EXPECT_EQ(q2.scales[0], 0x1.7dp-6f);
    EXPECT_EQ(q2.scales[0], q1.scales[0] * 127 / 128);
    expect_same_floats(q2.decoded, {0x1.7ap+1f, -1.0f});
}

TEST(Golden, ZeroAndConstantBlocks) {
    {  // int<b>: a == 0 -> s = 0, codes 0, decoded +0 (also for -0 inputs)
        const std::vector<float> x{-0.0f, 0.0f, -0.0f};
        const Quantized q = must_quantize(sym(4), x, 32);
        EXPECT_EQ(bits(q.scales[0]), bits(0.0f));
        EXPECT_EQ(q.codes, (std::vector<int32_t>{0, 0, 0}));
        expect_same_floats(q.decoded, {0.0f, 0.0f, 0.0f});
        EXPECT_TRUE(check_bounds(q, x).holds);
    }
    {  // D2: mixed zeros: lo = -0, hi = +0, s = 0, every element decodes to lo = -0
        const std::vector<float> x{0.0f, -0.0f, 0.0f};
        const Quantized q = must_quantize(asym(8), x, 32);
        EXPECT_EQ(bits(q.scales[0]), bits(0.0f));
        EXPECT_EQ(bits(q.offsets[0]), bits(-0.0f));
        expect_same_floats(q.decoded, {-0.0f, -0.0f, -0.0f});
        EXPECT_TRUE(check_bounds(q, x).holds);
    }
    {  // asym constant block: decodes to lo exactly
        const std::vector<float> x{2.5f, 2.5f};
        const Quantized q = must_quantize(asym(3), x, 32);
        EXPECT_EQ(q.scales[0], 0.0f);
        expect_same_floats(q.decoded, {2.5f, 2.5f});
    }
    {  // ds: a == 0 (everything rounds to fp16 zero): step 1, codes 0, decoded +0
        const std::vector<float> x{0x1p-25f, -0x1p-26f, 0.0f};
        const Quantized q = must_quantize(ds(4), x, 32);
        EXPECT_EQ(q.scales[0], 1.0f);
        EXPECT_EQ(q.codes, (std::vector<int32_t>{0, 0, 0}));
        expect_same_floats(q.decoded, {0.0f, 0.0f, 0.0f});
        EXPECT_TRUE(check_bounds(q, x).holds);
    }
    {  // a single subnormal element: s = max(fl32(2^-149/127), 2^-149) = 2^-149, code 1
        const std::vector<float> x{0x1p-149f};
        const Quantized q = must_quantize(sym(8), x, 32);
        EXPECT_EQ(q.scales[0], 0x1p-149f);
        EXPECT_EQ(q.codes, (std::vector<int32_t>{1}));
        expect_same_floats(q.decoded, {0x1p-149f});
    }
}

TEST(Golden, ShortLastBlockAndBlockRestart) {
    // Blocks of 2: [4, -2] s = fl32(4/7) = 0x1.24924ap-1, [1] s = fl32(1/7): statistics never cross
    // a block boundary. fl32(-2 / s) = -0x1.bffffep+1 (-3.4999998, not the tie -3.5) -> -3;
    // fl32(7 * fl32(1/7)) = 1.
    const std::vector<float> x{4.0f, -2.0f, 1.0f};
    const Quantized q = must_quantize(sym(4), x, 2);
    ASSERT_EQ(q.scales.size(), 2u);
    EXPECT_EQ(bits(q.scales[0]), bits(0x1.24924ap-1f));
    EXPECT_EQ(q.codes, (std::vector<int32_t>{7, -3, 7}));
    EXPECT_EQ(q.decoded[2], 1.0f);
}

// ---- D1: saturation -------------------------------------------------------------------------

TEST(D1, Int8FltMaxDecodesToFltMax) {
    // s = fl32(FLT_MAX / 127) = 8454660 * 2^98 = 0x1.020408p+121; 127 s = 1073741820 * 2^98 exceeds
    // FLT_MAX by more than half an ulp, so fl32(127 s) = inf, saturated to FLT_MAX.
    const std::vector<float> x{kFltMax, -kFltMax, 1.0f};
    const Quantized q = must_quantize(sym(8), x, 32);
    EXPECT_EQ(bits(q.scales[0]), bits(0x1.020408p+121f));
    EXPECT_EQ(Exact(q.scales[0]), Exact::from_int(8454660) * Exact::pow2(98));
    EXPECT_EQ(q.codes, (std::vector<int32_t>{127, -127, 0}));
    expect_same_floats(q.decoded, {kFltMax, -kFltMax, 0.0f});
    EXPECT_TRUE(check_bounds(q, x).holds);
    // decode() of the wire data saturates the same way.
    expect_same_floats(decode(sym(8), q.codes, q.scales, q.offsets, 32), q.decoded);
}

TEST(D1, AsymFltMaxBlock) {
    // lo = 0, hi = FLT_MAX: s = fl32(FLT_MAX / 255), fl32(255 s) overflows and saturates.
    const std::vector<float> x{0.0f, kFltMax, 1e38f};
    const Quantized q = must_quantize(asym(8), x, 32);
    EXPECT_EQ(q.codes[1], 255);
    EXPECT_EQ(q.decoded[1], kFltMax);
    for (float v : q.decoded) EXPECT_TRUE(std::isfinite(v));
    EXPECT_TRUE(check_bounds(q, x).holds);
    // and the most negative one: lo = -FLT_MAX, hi = 0
    const std::vector<float> y{-kFltMax, 0.0f, -1e38f};
    const Quantized qy = must_quantize(asym(8), y, 32);
    EXPECT_EQ(qy.decoded[0], -kFltMax);
    EXPECT_TRUE(check_bounds(qy, y).holds);
}

// ---- packing --------------------------------------------------------------------------------

TEST(Pack, Golden) {
    // int4: element 2j in the low nibble, two's complement: [1, -1] -> 0xF1, [7, pad] -> 0x07.
    EXPECT_EQ(pack(sym(4), std::vector<int32_t>{1, -1, 7}, 32), (std::vector<uint8_t>{0xF1, 0x07}));
    // ds-int4: even element in the high nibble: (1 << 4) | (-1 & 0xF) = 0x1F; odd tail -8 -> 0x80.
    EXPECT_EQ(pack(ds(4), std::vector<int32_t>{1, -1}, 32), (std::vector<uint8_t>{0x1F}));
    EXPECT_EQ(pack(ds(4), std::vector<int32_t>{1, -1, -8}, 32), (std::vector<uint8_t>{0x1F, 0x80}));
    // int3, LSB-first stream: 1 = 001 (bits 0-2), -1 = 111 (bits 3-5), 3 = 011 (bits 6-8),
    // -3 = 101 (bits 9-11): byte0 = 1 + 8+16+32 + 64+128 = 0xF9, byte1 = bits 9, 11 -> 0x0A.
    EXPECT_EQ(pack(sym(3), std::vector<int32_t>{1, -1, 3, -3}, 32), (std::vector<uint8_t>{0xF9, 0x0A}));
    EXPECT_EQ(pack(FormatSpec{FormatKind::kSym, 3}, std::vector<int32_t>{1, -1, 3, 0}, 32),
              (std::vector<uint8_t>{0xF9, 0x00}));
    // int2-asym (unsigned): 0, 1, 2, 3 at bits 0,2,4,6 -> 0 | 4 | 32 | 192 = 0xE4; then 3 -> 0x03.
    EXPECT_EQ(pack(asym(2), std::vector<int32_t>{0, 1, 2, 3, 3}, 32), (std::vector<uint8_t>{0xE4, 0x03}));
    // 8-bit: one byte per code, two's complement (asym: unsigned).
    EXPECT_EQ(pack(sym(8), std::vector<int32_t>{-1, 127, -127}, 32), (std::vector<uint8_t>{0xFF, 0x7F, 0x81}));
    EXPECT_EQ(pack(ds(8), std::vector<int32_t>{-128, 5}, 32), (std::vector<uint8_t>{0x80, 0x05}));
    EXPECT_EQ(pack(asym(8), std::vector<int32_t>{255, 0}, 32), (std::vector<uint8_t>{0xFF, 0x00}));
    // Packing restarts at every block: int4, blocks of 3: [1, 2, 3 | 4] -> 0x21 0x03 | 0x04.
    EXPECT_EQ(pack(sym(4), std::vector<int32_t>{1, 2, 3, 4}, 3), (std::vector<uint8_t>{0x21, 0x03, 0x04}));
    // int3, blocks of 3 (9 bits -> 2 bytes each): [1, 1, 1 | 2] -> 0x49 0x00 | 0x02.
    EXPECT_EQ(pack(sym(3), std::vector<int32_t>{1, 1, 1, 2}, 3), (std::vector<uint8_t>{0x49, 0x00, 0x02}));
    EXPECT_TRUE(pack(sym(4), std::vector<int32_t>{}, 32).empty());
}

TEST(Pack, GoldenUnpack) {
    EXPECT_EQ(unpack(sym(4), std::vector<uint8_t>{0xF1, 0x07}, 3, 32), (std::vector<int32_t>{1, -1, 7}));
    EXPECT_EQ(unpack(ds(4), std::vector<uint8_t>{0x1F, 0x80}, 3, 32), (std::vector<int32_t>{1, -1, -8}));
    EXPECT_EQ(unpack(sym(3), std::vector<uint8_t>{0xF9, 0x0A}, 4, 32), (std::vector<int32_t>{1, -1, 3, -3}));
    EXPECT_EQ(unpack(asym(2), std::vector<uint8_t>{0xE4, 0x03}, 5, 32), (std::vector<int32_t>{0, 1, 2, 3, 3}));
    EXPECT_EQ(unpack(asym(8), std::vector<uint8_t>{0xFF, 0x00}, 2, 32), (std::vector<int32_t>{255, 0}));
    EXPECT_EQ(unpack(sym(8), std::vector<uint8_t>{0x81}, 1, 32), (std::vector<int32_t>{-127}));
    EXPECT_EQ(unpack(sym(4), std::vector<uint8_t>{0x21, 0x03, 0x04}, 4, 3), (std::vector<int32_t>{1, 2, 3, 4}));
}

TEST(Pack, SizesMatchWireBytes) {
    for (const FormatSpec& f : builtin_formats()) {
        for (int64_t n : {0, 1, 7, 32, 33, 100}) {
            for (int64_t block : {1, 3, 32}) {
                std::vector<int32_t> codes(static_cast<std::size_t>(n), f.code_max());
                const auto bytes = pack(f, codes, block);
                int64_t want = 0;
                for (int64_t s = 0; s < n; s += block) want += f.code_bytes(std::min(block, n - s));
                EXPECT_EQ(static_cast<int64_t>(bytes.size()), want) << f.name() << " n=" << n << " block=" << block;
                EXPECT_EQ(unpack(f, bytes, n, block), codes) << f.name();
            }
        }
    }
}

// ---- errors and the propagate policy ---------------------------------------------------------

TEST(Errors, NonFiniteNamesIndexAndValue) {
    std::vector<float> x(40, 1.0f);
    x[17] = std::numeric_limits<float>::quiet_NaN();
    const Site site{"input", 2, 0};
    for (const FormatSpec& f : builtin_formats()) {
        auto r = quantize(f, x, 32, Nonfinite::kError, site);
        ASSERT_FALSE(r.ok()) << f.name();
        EXPECT_EQ(r.error().code, ErrorCode::kNonFinite);
        EXPECT_EQ(r.error().message,
                  "tensor 'input' rank 2 element 17: value nan is not finite (policy 'error' refuses NaN and "
                  "inf; policy 'propagate' poisons the block instead: qtransit quantize --nonfinite propagate)")
            << f.name();
    }
    // index_base shifts the index; the lowest offending index is named; inf is printed as such.
    x[5] = -std::numeric_limits<float>::infinity();
    auto r = quantize(sym(8), x, 32, Nonfinite::kError, Site{"grad", -1, 100});
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("tensor 'grad' element 105: value -inf is not finite"), std::string::npos)
        << r.error().message;
    EXPECT_EQ(r.error().message.find("rank"), std::string::npos);
}

TEST(Errors, AsymRangeOverflowNamesTheBlock) {
    std::vector<float> x(64, 0.0f);
    x[40] = -kFltMax;
    x[50] = 3e38f;
    auto r = quantize(asym(8), x, 32, Nonfinite::kError, Site{"input", 0, 0});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, ErrorCode::kRangeOverflow);
    const std::string& m = r.error().message;
    EXPECT_EQ(m.rfind("tensor 'input' rank 0 element 32: ", 0), 0u) << m;
    EXPECT_NE(m.find("lo = -3.4028235e+38"), std::string::npos) << m;
    EXPECT_NE(m.find("hi = 3e+38"), std::string::npos) << m;
    EXPECT_NE(m.find("overflows binary32"), std::string::npos) << m;
    // int<b> takes the same block: only its range would overflow.
    EXPECT_TRUE(quantize(sym(8), x, 32).ok());
    // The same values in different blocks are fine.
    EXPECT_TRUE(quantize(asym(8), x, 8).ok());
}

TEST(Errors, DsFp16OverflowNamesTheElement) {
    std::vector<float> x{1.0f, 65504.0f, 65519.996f, 70000.0f, 2.0f};
    auto r = quantize(ds(8), x, 32, Nonfinite::kError, Site{"w", 3, 0});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, ErrorCode::kRangeOverflow);
    const std::string& m = r.error().message;
    EXPECT_EQ(m.rfind("tensor 'w' rank 3 element 3: value 70000 overflows binary16", 0), 0u) << m;
    EXPECT_NE(m.find("ds-int8 rounds its input to binary16 first"), std::string::npos) << m;
    EXPECT_NE(m.find("65504"), std::string::npos) << m;
    // FLT_MAX is out of range for ds (D3) but valid for the canonical formats.
    EXPECT_FALSE(quantize(ds(4), std::vector<float>{kFltMax}, 32).ok());
    EXPECT_TRUE(quantize(sym(4), std::vector<float>{kFltMax}, 32).ok());
    x[3] = 65519.0f;  // rounds to 65504: valid
    EXPECT_TRUE(quantize(ds(8), x, 32).ok());
    // quickreduce-q<b> rounds its input to binary16 too (docs/FORMATS.md section 11).
    const FormatSpec qr{FormatKind::kQr, 6};
    x[3] = -70000.0f;
    r = quantize(qr, x, 32, Nonfinite::kError, Site{"w", 3, 0});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().message.rfind("tensor 'w' rank 3 element 3: value -70000 overflows binary16 (quickreduce-q6 rounds", 0), 0u)
        << r.error().message;
    x[3] = 65519.0f;
    EXPECT_TRUE(quantize(qr, x, 32).ok());
}

TEST(Errors, TheLowestOffendingIndexIsNamed) {
    // D5 with both kinds present: a range overflow in block 0 (named by its first element, 0) comes
    // before a NaN in block 1 (element 6), so the overflow is reported; within one block a
    // non-finite value is reported (a block with a NaN has no range).
    std::vector<float> x{-kFltMax, kFltMax, 0.0f, 0.0f, 1.0f, 2.0f, std::numeric_limits<float>::quiet_NaN(), 3.0f};
    auto r = quantize(asym(8), x, 4);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, ErrorCode::kRangeOverflow);
    EXPECT_EQ(r.error().message.rfind("tensor 'input' element 0: ", 0), 0u) << r.error().message;
    x[3] = std::numeric_limits<float>::infinity();
    r = quantize(asym(8), x, 4);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, ErrorCode::kNonFinite);
    EXPECT_EQ(r.error().message.rfind("tensor 'input' element 3: value inf is not finite", 0), 0u) << r.error().message;
    // ds: the lowest element that is non-finite or overflows binary16.
    const std::vector<float> y{1.0f, 7e4f, std::numeric_limits<float>::quiet_NaN()};
    auto rd = quantize(ds(4), y, 4);
    ASSERT_FALSE(rd.ok());
    EXPECT_EQ(rd.error().code, ErrorCode::kRangeOverflow);
    EXPECT_EQ(rd.error().message.rfind("tensor 'input' element 1: value 70000 overflows binary16", 0), 0u);
}

TEST(Errors, InvalidArguments) {
    EXPECT_EQ(quantize(sym(8), std::vector<float>{1.0f}, 0).error().code, ErrorCode::kInvalidArgument);
    EXPECT_EQ(quantize(FormatSpec{FormatKind::kSym, 9}, std::vector<float>{1.0f}, 4).error().code,
              ErrorCode::kInvalidArgument);
    EXPECT_EQ(quantize(ds(6), std::vector<float>{1.0f}, 4).error().code, ErrorCode::kInvalidArgument);
    auto empty = quantize(sym(8), std::vector<float>{}, 4);
    ASSERT_TRUE(empty.ok());
    EXPECT_TRUE(empty->codes.empty());
    EXPECT_TRUE(empty->scales.empty());
}

TEST(Propagate, PoisonsExactlyTheAffectedBlock) {
    const uint32_t kNaN = 0x7FC00000u;
    for (const FormatSpec& f : builtin_formats()) {
        std::vector<float> x{0.5f, -1.0f, 0.25f, 3.0f, 1.0f, 2.0f, -7.0f, 0.125f, 9.0f, -0.5f, 0.0f};
        x[5] = f.kind == FormatKind::kDs ? 1e5f : std::numeric_limits<float>::infinity();
        const Quantized q = must_quantize(f, x, 4, Nonfinite::kPropagate);
        EXPECT_EQ(q.poisoned, (std::vector<uint8_t>{0, 1, 0})) << f.name();
        EXPECT_EQ(bits(q.scales[1]), kNaN) << f.name();
        if (f.kind == FormatKind::kAsym) {
            EXPECT_EQ(bits(q.offsets[1]), kNaN) << f.name();
        }
        for (int i = 4; i < 8; ++i) {
            EXPECT_EQ(q.codes[i], 0) << f.name();
            EXPECT_EQ(bits(q.decoded[i]), kNaN) << f.name();
        }
        // The other blocks are exactly what they are alone.
        const std::vector<float> b0(x.begin(), x.begin() + 4), b2(x.begin() + 8, x.end());
        const Quantized q0 = must_quantize(f, b0, 4), q2 = must_quantize(f, b2, 4);
        for (int i = 0; i < 4; ++i) {
            EXPECT_EQ(q.codes[i], q0.codes[i]);
            EXPECT_EQ(bits(q.decoded[i]), bits(q0.decoded[i]));
        }
        for (int i = 0; i < 3; ++i) {
            EXPECT_EQ(q.codes[8 + i], q2.codes[i]);
            EXPECT_EQ(bits(q.decoded[8 + i]), bits(q2.decoded[i]));
        }
        EXPECT_EQ(bits(q.scales[0]), bits(q0.scales[0]));
        EXPECT_EQ(bits(q.scales[2]), bits(q2.scales[0]));
        // decode() of the wire data gives the same bits, poisoned NaNs included.
        expect_same_floats(decode(f, q.codes, q.scales, q.offsets, 4), q.decoded);
        // check_bounds skips the poisoned block.
        EXPECT_TRUE(check_bounds(q, x).holds) << f.name();
    }
}

TEST(Propagate, AsymRangeOverflowIsPoisoned) {
    const std::vector<float> x{1.0f, 2.0f, -kFltMax, kFltMax};
    const Quantized q = must_quantize(asym(4), x, 2, Nonfinite::kPropagate);
    EXPECT_EQ(q.poisoned, (std::vector<uint8_t>{0, 1}));
    EXPECT_TRUE(std::isnan(q.decoded[2]) && std::isnan(q.decoded[3]));
    EXPECT_FALSE(std::isnan(q.decoded[0]));
}

// ---- bounds ---------------------------------------------------------------------------------

TEST(Bounds, SymBoundIsTheFormula) {
    const std::vector<float> x{0.1f, -0.25f, 1.0f, -3.0f, 2.5f, 0.007f};
    const Quantized q = must_quantize(sym(8), x, 32);
    const Exact s(q.scales[0]);
    const Exact want = s * (Exact::pow2(-1) + Exact::pow2(-22) * Exact::from_int(127)) + Exact::pow2(-149);
    for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(element_bound(q, x, i), want);
}

TEST(Bounds, SymSubnormalStepClampIsBounded) {
    // NUMERICS 1.1's bound alone is false here: a = 190 * 2^-149, s = fl32(a / 127) = 2^-149 (1.496
    // rounds down), the code clamps at 127 and the error is 63 * 2^-149, against 1.1's ~1.5 * 2^-149.
    // The reference adds K = a - qmax s for subnormal steps (formats.cpp).
    const std::vector<float> x{190 * 0x1p-149f, -3 * 0x1p-149f};
    const Quantized q = must_quantize(sym(8), x, 32);
    EXPECT_EQ(q.scales[0], 0x1p-149f);
    EXPECT_EQ(q.codes, (std::vector<int32_t>{127, -3}));
    const BoundCheck c = check_bounds(q, x);
    EXPECT_TRUE(c.holds);
    EXPECT_EQ(c.max_error, 63 * 0x1p-149);
    const Exact spec = Exact(q.scales[0]) * (Exact::pow2(-1) + Exact::pow2(-22) * Exact::from_int(127)) + Exact::pow2(-149);
    EXPECT_GT(Exact(63 * 0x1p-149f), spec);
    EXPECT_EQ(element_bound(q, x, 0), spec + Exact(63 * 0x1p-149f));
}

TEST(Bounds, AsymSubnormalStepClampIsBounded) {
    // D = 382 * 2^-149, n = 255: fl32(D / n) = 2^-149 (1.498 rounds down), so the top code 255
    // decodes to 255 * 2^-149 and misses the top element by 127 steps. The bound must cover it.
    const std::vector<float> x{0.0f, 382 * 0x1p-149f, 100 * 0x1p-149f};
    const Quantized q = must_quantize(asym(8), x, 32);
    EXPECT_EQ(q.scales[0], 0x1p-149f);
    EXPECT_EQ(q.codes[1], 255);
    EXPECT_EQ(q.decoded[1], 255 * 0x1p-149f);
    const BoundCheck c = check_bounds(q, x);
    EXPECT_TRUE(c.holds);
    EXPECT_EQ(c.max_error, 127 * 0x1p-149);
}

TEST(Bounds, ExtremeBlocksAreBounded) {
    const float big = kFltMax, sub = 0x1p-149f;
    const std::vector<std::vector<float>> blocks{
        {big, -big, 1.0f},                    // int<b>: D1 saturation at both ends
        {0.0f, big, 1e38f, -1.0f},            // asym: fl32(255 s) overflows, saturates
        {-1e38f, 2.4e38f, 1.0f, -sub},        // asym: hi - lo just below FLT_MAX, |x| + A > FLT_MAX
        {2.4e38f, 2.39e38f, 2.4e38f - 1e31f}, // asym: magnitude far above the range
        {sub, -sub, 0.0f, 2 * sub},           // subnormals only
        {0x1.fffffcp-127f, 0x1p-126f, -sub},  // across the subnormal/normal boundary
        {3 * sub},                            // one element
        {5 * sub, 0.0f, sub},                 // subnormal step rounding (int3: not idempotent)
        {65504.0f, -65504.0f, 1e-8f, 0x1p-25f},  // ds: the top of binary16 with tiny values
        {65519.0f, 0x1p-24f, -3 * 0x1p-26f},  // ds: rounds to 65504; binary16 subnormals
        {1.0f + 0x1p-11f, -(1.0f + 3 * 0x1p-11f), 0.5f},  // binary16 ties
    };
    for (const FormatSpec& f : builtin_formats()) {
        for (std::size_t k = 0; k < blocks.size(); ++k) {
            const auto& x = blocks[k];
            auto r = quantize(f, x, 4, Nonfinite::kPropagate);
            ASSERT_TRUE(r.ok());
            const BoundCheck c = check_bounds(*r, x);
            EXPECT_TRUE(c.holds) << f.name() << " block " << k << " element " << c.first_violation;
            EXPECT_LE(c.max_error_to_bound, 1.0);
            if (r->poisoned[0]) continue;  // ds: FLT_MAX overflows binary16 (D3)
            for (std::size_t i = 0; i < x.size(); ++i) {
                EXPECT_TRUE(std::isfinite(r->decoded[i])) << f.name() << " block " << k;
            }
        }
    }
}

TEST(Bounds, CheckBoundsReportsAViolation) {
    const std::vector<float> x{0.1f, -0.25f, 1.0f, -3.0f, 2.5f, 0.007f};
    Quantized q = must_quantize(sym(8), x, 32);
    q.decoded[4] = 2.6f;  // off by far more than half a step
    const BoundCheck c = check_bounds(q, x);
    EXPECT_FALSE(c.holds);
    EXPECT_EQ(c.first_violation, 4);
    EXPECT_GT(c.max_error_to_bound, 1.0);
    EXPECT_NEAR(c.max_error, 0.1, 1e-6);
}

TEST(Bounds, ZeroErrorsGiveZeroRatio) {
    const std::vector<float> x{2.5f, 2.5f};
    const Quantized q = must_quantize(asym(3), x, 32);
    const BoundCheck c = check_bounds(q, x);
    EXPECT_TRUE(c.holds);
    EXPECT_EQ(c.max_error, 0.0);
    EXPECT_EQ(c.max_error_to_bound, 0.0);
}

}  // namespace
}  // namespace qtransit::reference
