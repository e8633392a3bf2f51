// Property tests of the reference (RapidCheck): Exact against IEEE binary64 arithmetic, wire
// packing round trips, the rigorous bounds on random blocks of every format (random bit patterns
// mixed with specials: +-0, subnormals, FLT_MAX, ties), the tightness of the asym bound, the
// properties NUMERICS 1.1 requires of int<b>, and the non-finite policies.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
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

// ---- generators -------------------------------------------------------------------------------

double draw_finite_double() {
    for (;;) {
        const double v = std::bit_cast<double>(*rc::gen::arbitrary<uint64_t>());
        if (std::isfinite(v)) return v;
    }
}

// A double whose binary exponent is within `spread` of `e`.
double draw_double_near(int e, int spread) {
    const uint64_t mant = *rc::gen::inRange<uint64_t>(0, uint64_t{1} << 52);
    const int de = *rc::gen::inRange(-spread, spread + 1);
    const double m = 1.0 + std::ldexp(static_cast<double>(mant), -52);
    const double v = std::ldexp(m, std::clamp(e + de, -1000, 1000));
    return *rc::gen::arbitrary<bool>() ? -v : v;
}

float from_parts(bool neg, int exp2, uint32_t mant23) {
    // (1 + mant/2^23) * 2^exp2, or a subnormal when exp2 < -126 (then rounded by ldexp: exact for
    // the bits that fit, which is all we need from a generator).
    const double m = 1.0 + std::ldexp(static_cast<double>(mant23 & 0x7FFFFFu), -23);
    float v = static_cast<float>(std::ldexp(m, exp2));
    if (!std::isfinite(v)) v = kFltMax;
    return neg ? -v : v;
}

const std::vector<float>& specials() {
    static const std::vector<float> v{0.0f, -0.0f, 0x1p-149f, -0x1p-149f, 0x1.fffffcp-127f, 0x1p-126f, -0x1p-126f,
                                      kFltMax, -kFltMax, 1.0f, -1.0f, 0.5f, 1.5f, -2.5f, 3.5f, 0x1p127f,
                                      0x1.000002p0f, 7.0f, 127.0f, -128.0f, 0x1p-140f, 3 * 0x1p-149f};
    return v;
}

// One binary32 value for a block whose magnitudes centre on 2^center: random bit patterns, specials,
// and values near the centre (so that blocks are neither all-specials nor dominated by one outlier).
float draw_float(int center) {
    const int kind = *rc::gen::inRange(0, 10);
    if (kind < 2) {  // any finite bit pattern
        for (;;) {
            const float v = std::bit_cast<float>(*rc::gen::arbitrary<uint32_t>());
            if (std::isfinite(v)) return v;
        }
    }
    if (kind < 4) return *rc::gen::elementOf(specials());
    const bool neg = *rc::gen::arbitrary<bool>();
    const int e = std::clamp(center - *rc::gen::inRange(0, 12), -160, 127);
    const uint32_t mant = *rc::gen::arbitrary<uint32_t>();
    // Sometimes only a few mantissa bits, which makes ties in x/s and (x - lo)/s likely.
    const uint32_t m = kind == 9 ? (mant & 0x700000u) : mant;
    return from_parts(neg, e, m);
}

std::vector<float> draw_block_data(int64_t n) {
    const int center = *rc::gen::inRange(-150, 128);
    std::vector<float> x(static_cast<std::size_t>(n));
    for (auto& v : x) v = draw_float(center);
    return x;
}

// Finite values that binary16 does not overflow (|x| < 65520), for the ds formats: binary16
// subnormals, ties, the top of the range, zeros.
const std::vector<float>& ds_specials() {
    static const std::vector<float> v{0.0f, -0.0f, 0x1p-24f, -0x1p-24f, 0x1p-25f, 3 * 0x1p-26f, 0x1p-14f,
                                      65504.0f, -65504.0f, 65519.996f, -65519.0f, 1.0f + 0x1p-11f,
                                      1.0f + 3 * 0x1p-11f, 1.0f, -1.0f, 0.5f, 0x1p-149f, 3.0001f};
    return v;
}

float draw_ds_float(int center) {
    const int kind = *rc::gen::inRange(0, 10);
    if (kind < 3) return *rc::gen::elementOf(ds_specials());
    const bool neg = *rc::gen::arbitrary<bool>();
    const int e = std::clamp(center - *rc::gen::inRange(0, 12), -40, 15);
    float v = from_parts(neg, e, *rc::gen::arbitrary<uint32_t>());
    if (std::fabs(v) >= 65520.0f) v = neg ? -65504.0f : 65504.0f;
    return v;
}

std::vector<float> draw_ds_block_data(int64_t n) {
    const int center = *rc::gen::inRange(-30, 16);
    std::vector<float> x(static_cast<std::size_t>(n));
    for (auto& v : x) v = draw_ds_float(center);
    return x;
}

std::vector<FormatSpec> formats_of(bool ds) {
    std::vector<FormatSpec> out;
    for (const FormatSpec& f : builtin_formats())
        if ((f.kind == FormatKind::kDs) == ds) out.push_back(f);
    return out;
}

// ---- Exact ------------------------------------------------------------------------------------

RC_GTEST_PROP(ExactProperties, AddSubMatchLongDoubleWhereExact, ()) {
    // a, b within 10 binades of each other: a +- b needs at most 53 + 11 bits, exact in the 64-bit
    // significand of x87 long double (checked with TwoSum below anyway).
    const int e = *rc::gen::inRange(-900, 900);
    const double a = draw_double_near(e, 0), b = draw_double_near(e, 10);
    for (int op = 0; op < 2; ++op) {
        const long double la = a, lb = op == 0 ? static_cast<long double>(b) : -static_cast<long double>(b);
        const long double s = la + lb;
        // TwoSum: the rounding error of s, exactly.
        const long double bb = s - la, err = (la - (s - bb)) + (lb - bb);
        RC_PRE(err == 0.0L);
        // s as an unevaluated sum of two doubles (both exact: the 64-bit significand splits).
        const double hi = static_cast<double>(s), lo = static_cast<double>(s - static_cast<long double>(hi));
        RC_ASSERT(static_cast<long double>(hi) + static_cast<long double>(lo) == s);
        const Exact got = op == 0 ? Exact(a) + Exact(b) : Exact(a) - Exact(b);
        RC_ASSERT(got == Exact(hi) + Exact(lo));
        RC_ASSERT(got - Exact(a) == (op == 0 ? Exact(b) : -Exact(b)));
    }
}

RC_GTEST_PROP(ExactProperties, RoundingToDoubleMatchesIeee, ()) {
    // IEEE binary64 +, *, / are correctly rounded, so Exact's to_double / ratio must agree with them
    // exactly, for any finite operands (overflow to inf, gradual underflow and ties included).
    const double a = draw_finite_double();
    const double b = *rc::gen::arbitrary<bool>() ? draw_finite_double() : draw_double_near(std::ilogb(a == 0 ? 1 : a), 60);
    const Exact ea(a), eb(b);
    RC_ASSERT(ea.to_double() == a);
    RC_ASSERT((ea + eb).to_double() == a + b);
    RC_ASSERT((ea - eb).to_double() == a - b);
    RC_ASSERT((ea * eb).to_double() == a * b);
    if (b != 0) RC_ASSERT(Exact::ratio(ea, eb) == a / b);
    RC_ASSERT((ea < eb) == (a < b));
    RC_ASSERT((ea == eb) == (a == b));
    RC_ASSERT((ea >= eb) == (a >= b));
    RC_ASSERT(ea.abs().to_double() == std::fabs(a));
    RC_ASSERT(ea.sign() == (a > 0) - (a < 0));
}

// ---- packing ----------------------------------------------------------------------------------

RC_GTEST_PROP(PackProperties, RoundTripEveryFormat, ()) {
    const int64_t n = *rc::gen::inRange<int64_t>(0, 300);
    const int64_t block = *rc::gen::inRange<int64_t>(1, 70);
    for (const FormatSpec& f : builtin_formats()) {
        std::vector<int32_t> codes(static_cast<std::size_t>(n));
        for (auto& c : codes) c = *rc::gen::inRange(f.code_min(), f.code_max() + 1);
        const auto bytes = pack(f, codes, block);
        RC_ASSERT(static_cast<int64_t>(bytes.size()) ==
                  f.wire_bytes(n, block) - (n == 0 ? 0 : ((n + block - 1) / block) * f.metadata_bytes()));
        RC_ASSERT(unpack(f, bytes, n, block) == codes);
    }
}

// ---- bounds -----------------------------------------------------------------------------------

void check_all(const FormatSpec& f, const std::vector<float>& x, int64_t block) {
    auto r = quantize(f, x, block, Nonfinite::kPropagate);
    RC_ASSERT(r.ok());
    const Quantized& q = *r;
    // Poisoned exactly where a block is out of range (the data here are all finite).
    for (std::size_t k = 0; k < q.poisoned.size(); ++k) {
        const int64_t start = static_cast<int64_t>(k) * block;
        const auto xb = std::span<const float>(x).subspan(start, std::min<int64_t>(block, x.size() - start));
        const bool alone_ok = quantize(f, xb, block, Nonfinite::kError).ok();
        RC_ASSERT(q.poisoned[k] == (alone_ok ? 0 : 1));
    }
    for (std::size_t i = 0; i < x.size(); ++i) {
        RC_ASSERT(q.codes[i] >= f.code_min());
        RC_ASSERT(q.codes[i] <= f.code_max());
        const bool poisoned = q.poisoned[i / block] != 0;
        const bool ok = poisoned ? bits(q.decoded[i]) == 0x7FC00000u : std::isfinite(q.decoded[i]);
        RC_ASSERT(ok);  // D1 (finite decode), D4 (the one NaN)
    }
    const BoundCheck c = check_bounds(q, x);
    if (!c.holds) {
        const int64_t i = c.first_violation;
        RC_FAIL(f.name() + " block " + std::to_string(block) + ": bound violated at element " + std::to_string(i) +
                ": x = " + Exact(x[i]).to_string() + ", decoded " + Exact(q.decoded[i]).to_string() + ", code " +
                std::to_string(q.codes[i]) + ", scale " + Exact(q.scales[i / block]).to_string() + ", bound " +
                element_bound(q, x, i).to_string());
    }
    RC_ASSERT(c.max_error_to_bound <= 1.0);
    // decode() of the wire data is the decoded tensor, bit for bit.
    const auto wire = unpack(f, pack(f, q.codes, block), static_cast<int64_t>(x.size()), block);
    RC_ASSERT(wire == q.codes);
    const auto d = decode(f, wire, q.scales, q.offsets, block);
    for (std::size_t i = 0; i < x.size(); ++i) RC_ASSERT(bits(d[i]) == bits(q.decoded[i]));
}

RC_GTEST_PROP(BoundProperties, HoldsForIntAndAsymOnRandomBlocks, ()) {
    const int64_t block = *rc::gen::elementOf(std::vector<int64_t>{1, 2, 3, 7, 8, 32, 33, 64});
    const int64_t n = *rc::gen::inRange<int64_t>(1, 130);
    const std::vector<float> x = draw_block_data(n);
    for (const FormatSpec& f : formats_of(false)) check_all(f, x, block);
}

RC_GTEST_PROP(BoundProperties, HoldsForDsOnRandomBlocks, ()) {
    const int64_t block = *rc::gen::elementOf(std::vector<int64_t>{1, 2, 3, 7, 8, 32, 33, 64});
    const int64_t n = *rc::gen::inRange<int64_t>(1, 130);
    std::vector<float> x = draw_ds_block_data(n);
    // Now and then an element that overflows binary16 (D3): its block is poisoned, the rest bounded.
    if (*rc::gen::inRange(0, 8) == 0) x[*rc::gen::inRange<int64_t>(0, n)] = *rc::gen::elementOf(std::vector<float>{65520.0f, -1e6f, kFltMax});
    for (const FormatSpec& f : formats_of(true)) check_all(f, x, block);
}

RC_GTEST_PROP(BoundProperties, AsymBoundWithinOnePercentOfHalfStep, ()) {
    // Blocks of normal numbers whose step s is normal and whose largest magnitude M is at most
    // 100 (hi - lo): there E(x) <= 1.01 * s/2 for every element (see formats.cpp).
    const int e = *rc::gen::inRange(-100, 110);
    const double width = std::ldexp(1.0, e);
    const double centre = width * *rc::gen::inRange(-99, 100) / 2.0;
    const int64_t n = *rc::gen::inRange<int64_t>(2, 65);
    std::vector<float> x(static_cast<std::size_t>(n));
    for (auto& v : x) {
        const double t = static_cast<double>(*rc::gen::inRange<int64_t>(0, int64_t{1} << 30)) / (int64_t{1} << 30);
        v = static_cast<float>(centre + (t - 0.5) * width);
    }
    // Pin the ends, so that hi - lo is about the width and M <= 50.5 * width.
    x[0] = static_cast<float>(centre - 0.5 * width);
    x[1] = static_cast<float>(centre + 0.5 * width);
    float lo = x[0], hi = x[0], m = 0;
    for (float v : x) {
        lo = std::min(lo, v);
        hi = std::max(hi, v);
        m = std::max(m, std::fabs(v));
        RC_PRE(std::fabs(v) >= 0x1p-126f);
    }
    RC_PRE(hi > lo);
    RC_PRE(Exact(m) <= Exact::from_int(100) * (Exact(hi) - Exact(lo)));
    for (const FormatSpec& f : formats_of(false)) {
        if (f.kind != FormatKind::kAsym) continue;
        RC_PRE((Exact(hi) - Exact(lo)) >= Exact::from_int(f.code_max()) * Exact::pow2(-126));  // s normal
        const Quantized q = *quantize(f, x, n);
        const Exact limit = Exact(q.scales[0]) * Exact::pow2(-1) * (Exact::from_int(1) + Exact(0.01));
        for (int64_t i = 0; i < n; ++i) {
            const Exact b = element_bound(q, x, i);
            RC_ASSERT(b <= limit);
        }
        RC_ASSERT(check_bounds(q, x).holds);
    }
}

// ---- NUMERICS 1.1: properties of int<b> -------------------------------------------------------

RC_GTEST_PROP(SymProperties, SymmetricMonotoneScaleInvariantIdempotent, ()) {
    const int64_t n = *rc::gen::inRange<int64_t>(1, 40);
    const std::vector<float> x = draw_block_data(n);
    std::vector<float> neg(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) neg[i] = -x[i];
    for (const FormatSpec& f : formats_of(false)) {
        if (f.kind != FormatKind::kSym) continue;
        const Quantized q = *quantize(f, x, n);
        const Quantized qn = *quantize(f, neg, n);
        for (int64_t i = 0; i < n; ++i) {
            RC_ASSERT(qn.codes[i] == -q.codes[i]);                       // q(-x) = -q(x)
            for (int64_t j = 0; j < n; ++j)
                if (x[i] <= x[j]) RC_ASSERT(q.codes[i] <= q.codes[j]);    // monotone
        }
        // Idempotence: requantizing the decoded block reproduces the codes (and the scale).
        // Only for a normal scale: with a subnormal step the scale can round far from a/qmax and the
        // requantized block picks a different one (int3, x = 5*2^-149: s = 2*2^-149, q = rne(2.5) = 2,
        // x̂ = 4*2^-149, then s' = 2^-149 and q' = 3).
        if (!(q.scales[0] >= 0x1p-126f)) continue;
        const Quantized q2 = *quantize(f, q.decoded, n);
        if (q2.codes != q.codes) {
            std::string msg = f.name() + " not idempotent: s = " + Exact(q.scales[0]).to_string() + ", s' = " +
                              Exact(q2.scales[0]).to_string();
            for (int64_t i = 0; i < n; ++i)
                msg += "; x = " + Exact(x[i]).to_string() + " q = " + std::to_string(q.codes[i]) + " x̂ = " +
                       Exact(q.decoded[i]).to_string() + " q' = " + std::to_string(q2.codes[i]);
            RC_FAIL(msg);
        }
        RC_ASSERT(bits(q2.scales[0]) == bits(q.scales[0]));
        // Scaling by 2^k scales s by 2^k and keeps the codes, when nothing over- or underflows:
        // every non-zero |x| and the quotient a/qmax stay normal before and after.
        const int k = *rc::gen::inRange(-20, 21);
        float a = 0, mn = kFltMax;
        for (float v : x) {
            a = std::max(a, std::fabs(v));
            if (v != 0) mn = std::min(mn, std::fabs(v));
        }
        const double qmax = f.code_max();
        const double lo_mag = std::min<double>(mn, a / qmax), hi_mag = a;
        if (a == 0 || lo_mag * std::ldexp(1.0, std::min(k, 0)) < 0x1p-126 || hi_mag * std::ldexp(1.0, std::max(k, 0)) > kFltMax)
            continue;
        std::vector<float> xs(x.size());
        for (std::size_t i = 0; i < x.size(); ++i) xs[i] = std::ldexp(x[i], k);
        const Quantized qs = *quantize(f, xs, n);
        RC_ASSERT(qs.codes == q.codes);
        RC_ASSERT(qs.scales[0] == std::ldexp(q.scales[0], k));
    }
}

// ---- non-finite policies ----------------------------------------------------------------------

RC_GTEST_PROP(PolicyProperties, PropagatePoisonsExactlyTheNonFiniteBlocks, ()) {
    const int64_t block = *rc::gen::inRange<int64_t>(1, 17);
    const int64_t n = *rc::gen::inRange<int64_t>(1, 80);
    std::vector<float> x(static_cast<std::size_t>(n));
    for (auto& v : x) v = draw_ds_float(*rc::gen::inRange(-10, 10));  // finite everywhere, even as fp16
    const int bad = *rc::gen::inRange(1, 4);
    std::vector<int64_t> where;
    for (int j = 0; j < bad; ++j) {
        const int64_t i = *rc::gen::inRange<int64_t>(0, n);
        x[i] = *rc::gen::elementOf(std::vector<float>{std::numeric_limits<float>::quiet_NaN(),
                                                      std::numeric_limits<float>::infinity(),
                                                      -std::numeric_limits<float>::infinity()});
        where.push_back(i);
    }
    const int64_t lowest = *std::min_element(where.begin(), where.end());
    for (const FormatSpec& f : builtin_formats()) {
        const Quantized q = *quantize(f, x, block, Nonfinite::kPropagate);
        for (std::size_t k = 0; k < q.poisoned.size(); ++k) {
            bool has_bad = false;
            for (int64_t i : where) has_bad |= i / block == static_cast<int64_t>(k);
            RC_ASSERT(q.poisoned[k] == (has_bad ? 1 : 0));
            if (has_bad) RC_ASSERT(bits(q.scales[k]) == 0x7FC00000u);
        }
        const auto err = quantize(f, x, block, Nonfinite::kError);
        RC_ASSERT(!err.ok());
        RC_ASSERT(err.error().code == ErrorCode::kNonFinite);
        const std::string want = "tensor 'input' element " + std::to_string(lowest) + ": value ";
        RC_ASSERT(err.error().message.rfind(want, 0) == 0u);
    }
}

}  // namespace
}  // namespace qtransit::reference
