// Golden vectors for the production CPU kernel, computed by hand from NUMERICS.md (the working is
// in the comments), plus the awkward sizes: empty, one element, odd INT4 lengths, blocks larger
// than the tensor, a tensor large enough to be split over threads.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <vector>

#include "qtransit/common/cpu.hpp"
#include "qtransit/kernels/block_math.hpp"
#include "qtransit/kernels/codec.hpp"
#include "qtransit/kernels/inputs.hpp"
#include "qtransit/reference/formats.hpp"

namespace qt = qtransit;
using qt::FormatKind;
using qt::FormatSpec;

namespace {
uint32_t bits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}
qt::kernels::EncodedTensor enc(FormatSpec f, const std::vector<float>& x, int64_t block) {
    auto r = qt::kernels::encode(f, x, block);
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
    return r.ok() ? *r : qt::kernels::EncodedTensor{};
}
}  // namespace

TEST(KernelGolden, Int8UnitScale) {
    // a = 127, s = fl32(127 / 127) = 1; codes rne(x): rne(-0.5) = -0 -> 0, rne(0.25) = 0.
    const auto t = enc({FormatKind::kSym, 8}, {1.0f, -0.5f, 0.25f, 127.0f, -2.5f}, 32);
    EXPECT_EQ(t.scales, std::vector<float>{1.0f});
    EXPECT_EQ(qt::kernels::unpack_codes(t), (std::vector<int32_t>{1, 0, 0, 127, -2}));  // -2.5 ties to -2
    EXPECT_EQ(t.codes, (std::vector<uint8_t>{0x01, 0x00, 0x00, 0x7f, 0xfe}));
}

TEST(KernelGolden, Int4CanonicalNibbles) {
    // a = 7, qmax = 7, s = 1; codes 1, -1, 4 (3.5 ties to even), 7, -7. Element 2j in the low
    // nibble: 0xF1 = (-1 << 4) | 1, 0x74 = (7 << 4) | 4, 0x09 = -7 & 0xF (high nibble pad 0).
    const auto t = enc({FormatKind::kSym, 4}, {0.7f, -1.4f, 3.5f, 7.0f, -7.0f}, 5);
    EXPECT_EQ(qt::kernels::unpack_codes(t), (std::vector<int32_t>{1, -1, 4, 7, -7}));
    EXPECT_EQ(t.codes, (std::vector<uint8_t>{0xF1, 0x74, 0x09}));
}

TEST(KernelGolden, DsInt4DeepSpeedNibbles) {
    // fp16 inputs 0.7 -> 0.7001953125, -1.4 -> -1.400390625; a = 7, scale = fl32(16/14);
    // 0.70019 * 1.142857 = 0.80022 -> 1; -1.40039 * 1.142857 = -1.60045 -> -2;
    // 3.5 * scale = 4.0000002 -> fl32 4 -> 4; 7 * scale = 8.0000004 -> fl32 8 -> clamped to 7.
    // Even element in the high nibble: 0x1E = (1 << 4) | (-2 & 0xF), 0x47 = (4 << 4) | 7.
    const auto t = enc({FormatKind::kDs, 4}, {0.7f, -1.4f, 3.5f, 7.0f}, 4);
    EXPECT_EQ(qt::kernels::unpack_codes(t), (std::vector<int32_t>{1, -2, 4, 7}));
    EXPECT_EQ(t.codes, (std::vector<uint8_t>{0x1E, 0x47}));
    EXPECT_EQ(t.scales[0], 1.0f / (16.0f / 14.0f));  // the stored step Δ = fl32(1 / scale)
}

TEST(KernelGolden, Int8FltMaxDecodesFinite) {
    // docs/DECISIONS.md D1: fl32(127 * fl32(FLT_MAX / 127)) overflows; decode saturates.
    const auto t = enc({FormatKind::kSym, 8}, {FLT_MAX, -FLT_MAX, 1.0f}, 32);
    const auto d = qt::kernels::decode(t);
    EXPECT_EQ(d[0], FLT_MAX);
    EXPECT_EQ(d[1], -FLT_MAX);
}

TEST(KernelGolden, AsymZeroBlockKeepsTheSignOfLo) {
    // docs/DECISIONS.md D2: lo = -0 by totalOrder, hi == lo, every element decodes to lo = -0.
    const auto t = enc({FormatKind::kAsym, 4}, {0.0f, -0.0f, 0.0f}, 3);
    EXPECT_EQ(bits(t.offsets[0]), 0x80000000u);
    for (float v : qt::kernels::decode(t)) EXPECT_EQ(bits(v), 0x80000000u);
}

TEST(KernelGolden, AwkwardSizesMatchTheReference) {
    std::vector<float> big(1 << 19);  // past the threading threshold: split over every thread
    qt::kernels::generate_span(qt::kernels::Distribution::kHeavy, 7, 3, 0, big);
    for (const auto& f : qt::builtin_formats()) {
        for (const auto& [n, block] : std::vector<std::pair<size_t, int64_t>>{
                 {0, 32}, {1, 1}, {1, 32}, {3, 2}, {33, 32}, {31, 64}, {100, 7}, {big.size(), 32}, {big.size(), 4099}}) {
            std::vector<float> x(big.begin(), big.begin() + static_cast<std::ptrdiff_t>(n));
            if (f.kind == FormatKind::kDs)
                for (float& v : x) v = std::fmod(v, 60000.0f);  // keep inside binary16 (D3)
            const auto k = qt::kernels::encode(f, x, block);
            const auto r = qt::reference::quantize(f, x, block);
            ASSERT_TRUE(k.ok() && r.ok()) << f.name() << " n=" << n;
            EXPECT_EQ(k->codes, qt::reference::pack(f, r->codes, block)) << f.name() << " n=" << n << " block=" << block;
            const auto d = qt::kernels::decode(*k);
            ASSERT_EQ(d.size(), r->decoded.size());
            EXPECT_TRUE(d.empty() || std::memcmp(d.data(), r->decoded.data(), d.size() * 4) == 0) << f.name() << " n=" << n;
            EXPECT_EQ(k->wire_bytes(), f.wire_bytes(static_cast<int64_t>(n), block));
        }
    }
}

// The declared built-ins across the exponent range, one pass over each block (the fused encode of
// blocks of 32) against the reference: blocks whose largest value sits anywhere from the subnormal
// range to FLT_MAX with the others up to 90 binades below it (scales from subnormal to past 2^120,
// quotients that underflow), signed zeros, and blocks that mix 1 with values far below it.
TEST(KernelGolden, DeclaredFormatsAcrossTheExponentRange) {
    std::vector<float> x;
    uint32_t r = 12345;
    auto next = [&r] { return r = r * 1664525u + 1013904223u; };
    for (int top : {-149, -140, -130, -126, -120, -100, -70, -62, -60, -58, -30, 0, 30, 58, 60, 62, 64, 66, 70, 100, 127}) {
        for (int spread : {0, 3, 12, 40, 90}) {
            for (int i = 0; i < 32; ++i) {
                const uint32_t w = next();
                const int e = std::max(top - static_cast<int>(w % static_cast<uint32_t>(spread + 1)), -149);
                float v = std::ldexp(1.0f + static_cast<float>(w >> 9) * 0x1p-23f, e);
                if (!std::isfinite(v)) v = FLT_MAX;
                if ((w & 0xFF) < 8) v = 0.0f;
                x.push_back((w >> 8) & 1 ? -v : v);
            }
        }
    }
    for (float& v : x) {
        if (bits(v) == 0 && (next() & 1)) v = -0.0f;  // both signed zeros
    }
    for (const int e : {-59, -60, -61, -62, -70, -100, -126, -140}) {  // 1 among values below it
        for (int i = 0; i < 32; ++i) x.push_back(i == 5 ? 1.0f : std::ldexp(static_cast<float>(i % 7) - 3.0f, e));
    }
    int formats = 0;
    for (const auto& f : qt::all_builtin_formats()) {
        if (f.kind != FormatKind::kDecl) continue;
        ++formats;
        const auto k = qt::kernels::encode(f, x, 32);
        const auto ref = qt::reference::quantize(f, x, 32);
        ASSERT_EQ(k.ok(), ref.ok()) << f.name();
        if (!k.ok()) continue;
        EXPECT_EQ(k->codes, qt::reference::pack(f, ref->codes, 32)) << f.name();
        const auto d = qt::kernels::decode(*k);
        ASSERT_EQ(d.size(), ref->decoded.size());
        EXPECT_EQ(std::memcmp(d.data(), ref->decoded.data(), d.size() * 4), 0) << f.name();
    }
    EXPECT_GE(formats, 20);
}

// bf16 accumulation rounds with kernels::round_bf16 (a carry trick on the binary32 bits, on host
// and device); the reference rounds with its own round_to_format (D24). They must agree on every
// class of binary32 input: every upper half of the bits (so every sign, exponent including
// subnormals and the two above the largest finite bfloat16, and every 7-bit fraction) with the
// lower halves that decide the rounding: 0 (exact), 1, just below the tie, the tie, just above it,
// and 0xFFFF (the carry into the exponent, and from the largest finite value to infinity). NaNs
// must stay NaN with their sign.
TEST(KernelGolden, Bf16RoundingEqualsTheReferenceOnEveryInputClass) {
    int64_t checked = 0, ties = 0, ties_even = 0, to_inf = 0;
    for (uint32_t hi = 0; hi <= 0xFFFFu; ++hi)
        for (uint32_t lo : {0x0000u, 0x0001u, 0x7FFFu, 0x8000u, 0x8001u, 0xFFFFu}) {
            uint32_t u = (hi << 16) | lo;
            float x;
            std::memcpy(&x, &u, 4);
            const float k = qt::kernels::round_bf16(x), r = qt::reference::round_to_bf16(x);
            if (std::isnan(x)) {
                ASSERT_TRUE(std::isnan(k)) << std::hex << u;
                ASSERT_EQ(std::signbit(k), std::signbit(x)) << std::hex << u;
                continue;
            }
            uint32_t kb, rb;
            std::memcpy(&kb, &k, 4);
            std::memcpy(&rb, &r, 4);
            ASSERT_EQ(kb, rb) << "input bits 0x" << std::hex << u;
            ASSERT_EQ(kb & 0xFFFFu, 0u) << std::hex << u;  // a bfloat16 value
            ties += lo == 0x8000u;
            ties_even += lo == 0x8000u && (kb >> 16) % 2 == 0;
            to_inf += std::isfinite(x) && std::isinf(k);
            ++checked;
        }
    // The classes really occurred: every finite tie went to an even neighbour, and inputs at and
    // above (2 - 2^-8) 2^127 overflowed.
    EXPECT_EQ(ties, 2 * 255 * 128);  // every finite upper half, both signs
    EXPECT_EQ(ties_even, ties);
    EXPECT_GT(to_inf, 0);
    EXPECT_GT(checked, 390000);
}

// NCCL's FP8 add (D41): kernels::accum_round (binary16, then the FP8 grid with saturation, on host
// and device) against the reference's round_to_accum (its own round_to_format), and the kernel's
// saturation test against the reference's, on every class of binary32 input of the bf16 test above
// (every upper half of the bits with the lower halves that decide a binary16 rounding too) and on
// the exact sum of every pair of finite FP8 values (all that NCCL's add ever sees). NaN stays NaN.
TEST(KernelGolden, Fp8AccumulationEqualsTheReference) {
    for (qt::Accum t : {qt::Accum::kFp8E4m3, qt::Accum::kFp8E5m2}) {
        int64_t checked = 0, clamps = 0;
        auto one = [&](float x) {
            const float k = qt::kernels::accum_round(x, t), r = qt::reference::round_to_accum(x, t);
            if (std::isnan(x)) {
                ASSERT_TRUE(std::isnan(k));
                return;
            }
            uint32_t kb, rb, xb;
            std::memcpy(&kb, &k, 4);
            std::memcpy(&rb, &r, 4);
            std::memcpy(&xb, &x, 4);
            ASSERT_EQ(kb, rb) << qt::to_string(t) << " input bits 0x" << std::hex << xb;
            const bool ks = qt::kernels::accum_saturates(x, t);
            ASSERT_EQ(ks, qt::reference::saturates_in(x, t)) << qt::to_string(t) << " input bits 0x" << std::hex << xb;
            clamps += ks;
            ++checked;
        };
        for (uint32_t hi = 0; hi <= 0xFFFFu; ++hi)
            for (uint32_t lo : {0x0000u, 0x0001u, 0x0FFFu, 0x1000u, 0x1001u, 0x7FFFu, 0x8000u, 0x8001u, 0xFFFFu}) {
                const uint32_t u = (hi << 16) | lo;
                float x;
                std::memcpy(&x, &u, 4);
                one(x);
            }
        std::vector<float> vals;  // every finite FP8 value: the reference's rounding of itself
        for (int e = -17; e <= 16; ++e)
            for (int m = 0; m < 16; ++m) {
                const float v = qt::reference::round_to_accum(std::ldexp(1.0f + static_cast<float>(m) / 16.0f, e), t);
                if (!qt::reference::saturates_in(v, t)) vals.push_back(v), vals.push_back(-v);
            }
        vals.push_back(0.0f);
        std::sort(vals.begin(), vals.end());
        vals.erase(std::unique(vals.begin(), vals.end()), vals.end());
        for (float a : vals)
            for (float b : vals) one(a + b);
        EXPECT_GT(vals.size(), t == qt::Accum::kFp8E4m3 ? 200u : 180u);
        EXPECT_GT(clamps, 0);
        EXPECT_GT(checked, 600000);
    }
}

// quickreduce-q<b> (docs/FORMATS.md section 11), worked by hand; the kernels and the reference both.
namespace {
struct QrGolden {
    int bits;
    std::vector<float> x;
    uint32_t scale_bits;             // dec, as binary32 bits
    std::vector<int32_t> codes;      // u = q + 2^(b-1)
    std::vector<uint32_t> decoded;   // bits
};
void expect_qr(const QrGolden& g) {
    const FormatSpec f{FormatKind::kQr, g.bits};
    const int64_t block = static_cast<int64_t>(g.x.size());
    const auto t = enc(f, g.x, block);
    ASSERT_EQ(t.scales.size(), 1u);
    EXPECT_EQ(bits(t.scales[0]), g.scale_bits) << f.name();
    EXPECT_EQ(qt::kernels::unpack_codes(t), g.codes) << f.name();
    const auto d = qt::kernels::decode(t);
    qt::Site site;
    const auto r = qt::reference::quantize(f, g.x, block, qt::Nonfinite::kError, site);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(bits(r->scales[0]), g.scale_bits) << f.name();
    EXPECT_EQ(r->codes, g.codes) << f.name();
    for (size_t i = 0; i < g.x.size(); ++i) {
        EXPECT_EQ(bits(d[i]), g.decoded[i]) << f.name() << " element " << i;
        EXPECT_EQ(bits(r->decoded[i]), g.decoded[i]) << f.name() << " element " << i << " (reference)";
    }
}
}  // namespace

TEST(KernelGolden, QuickReduceQ4) {
    // m = 1 (|max| 1 > |min| 0.5): dec = fl16(1 * -1/8) = -0.125, t = fl16(-0.125 + 2^-24) = -0.125,
    // enc = -8. 0.3 -> y = 1229/4096, w = fl16(-8 y) = -2.400390625 -> q = -2 -> u = 6, decoded
    // (-2)(-0.125) = 0.25; 0.0625 -> w = -0.5 -> q = -0 -> u = 8, decoded (+0)(-0.125) = -0;
    // 0.1875 -> -1.5 -> -2 (ties to even); -0.3125 -> 2.5 -> 2 -> u = 10, -0.25; +0 -> u = 8, -0.
    expect_qr({4, {1.0f, 0.3f, -0.5f, 0.0625f, 0.1875f, -0.3125f, 0.0f}, bits(-0.125f), {0, 6, 12, 8, 6, 10, 8},
               {bits(1.0f), bits(0.25f), bits(-0.5f), 0x80000000u, bits(0.25f), bits(-0.25f), 0x80000000u}});
    // Packed lsb-first, element 2j in the low nibble: 0x60, 0x8C, 0xA6, 0x08; the scale is 2 bytes.
    const auto t = enc({FormatKind::kQr, 4}, {1.0f, 0.3f, -0.5f, 0.0625f, 0.1875f, -0.3125f, 0.0f}, 7);
    EXPECT_EQ(t.codes, (std::vector<uint8_t>{0x60, 0x8C, 0xA6, 0x08}));
    EXPECT_EQ(FormatSpec(FormatKind::kQr, 4).metadata_bytes(), 2);
}

TEST(KernelGolden, QuickReduceQ4TieTakesTheNegativeExtreme) {
    // +2 and -2: m = -2, dec = +0.25, enc = 4. +2 -> w = 8, clamped to 7 -> u = 15, decoded 1.75;
    // -2 -> u = 0, -2; 1 -> 4 -> u = 12; 0.625 -> 2.5 -> 2 -> u = 10, 0.5; -0.375 -> -1.5 -> -2 -> u = 6,
    // -0.5; +0 -> u = 8, (+0)(0.25) = +0.
    expect_qr({4, {2.0f, -2.0f, 1.0f, 0.625f, -0.375f, 0.0f}, bits(0.25f), {15, 0, 12, 10, 6, 8},
               {bits(1.75f), bits(-2.0f), bits(1.0f), bits(0.5f), bits(-0.5f), 0u}});
}

TEST(KernelGolden, QuickReduceQ8SaturatedReciprocalShrinksTheGroup) {
    // m = fl16(0.001) = 1049 2^-20; dec = fl16(-1049 2^-27) = -131 2^-24 (a subnormal: 131.125 rounds
    // to 131); t = -130 2^-24; 1/t = -129055.5 overflows binary16: enc = -65504 (saturated). x = m:
    // w = fl16(-65.5305) = -65.5 -> q = -66 (ties to even) -> u = 62, decoded fl16(8646 2^-24) =
    // 1081 2^-21 (5.15e-4, about half of 0.001). -0.0005 -> y = -1049 2^-21, w = fl16(32.765) = 32.75
    // -> q = 33 -> u = 161, decoded fl16(-4323 2^-24) = -1081 2^-22.
    expect_qr({8, {0.001f, -0.0005f}, bits(-131 * 0x1p-24f), {62, 161},
               {bits(1081 * 0x1p-21f), bits(-1081 * 0x1p-22f)}});
}

TEST(KernelGolden, QuickReduceZeroGroupsDecodeToSignedZeros) {
    // All +0: m = +0, dec = fl16(+0 * -1/32) = -0, t = 2^-24, 1/t = 2^24 saturates to +65504, codes
    // the bias 32, decoded (+0)(-0) = -0. All -0: m = -0, dec = +0, decoded +0.
    expect_qr({6, {0.0f, 0.0f, 0.0f}, 0x80000000u, {32, 32, 32}, {0x80000000u, 0x80000000u, 0x80000000u}});
    expect_qr({6, {-0.0f, -0.0f}, 0u, {32, 32}, {0u, 0u}});
}

TEST(KernelGolden, QuickReduceRefusesWhatOverflowsBinary16) {
    // 65519.99 rounds to 65504 and is taken; 65520 rounds to inf: a range overflow, named.
    const FormatSpec f{FormatKind::kQr, 8};
    EXPECT_TRUE(qt::kernels::encode(f, std::vector<float>{65519.99f, 1.0f}, 32).ok());
    const auto r = qt::kernels::encode(f, std::vector<float>{1.0f, -65520.0f}, 32);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, qt::ErrorCode::kRangeOverflow);
    EXPECT_NE(r.error().message.find("element 1"), std::string::npos) << r.error().message;
    EXPECT_NE(r.error().message.find("binary16"), std::string::npos) << r.error().message;
}

// round_f16_fast (the QuickReduce element loops' binary16 rounding, branch-free so that they
// vectorize) equals round_f16 (the integer emulation) on every non-negative binary32 value, NaNs and
// infinities included, and on both signs of a sample; every 997th under the sanitizers (a full sweep
// is 2^31 calls of each).
TEST(KernelGolden, RoundF16FastIsRoundF16OnEveryBinary32) {
#if defined(QT_UNDER_ASAN)
    const uint64_t step = 997;
#else
    const uint64_t step = 1;
#endif
    uint64_t differ = 0, first = 0;
    for (uint64_t u = 0; u <= 0x7fffffffu; u += step) {
        const float v = qt::kernels::bits_f32(static_cast<uint32_t>(u));
        if (bits(qt::kernels::round_f16_fast(v)) != bits(qt::kernels::round_f16(v)) && differ++ == 0) first = u;
    }
    EXPECT_EQ(differ, 0u) << "first at 0x" << std::hex << first;
    for (uint64_t u = 0x80000000u; u <= 0xffffffffu; u += 65521) {
        const float v = qt::kernels::bits_f32(static_cast<uint32_t>(u));
        ASSERT_EQ(bits(qt::kernels::round_f16_fast(v)), bits(qt::kernels::round_f16(v))) << std::hex << u;
    }
}
