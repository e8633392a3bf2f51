// ds-int<b>-fm (docs/DECISIONS.md D23): DeepSpeed's recipe as a --use_fast_math build computes it.
// Properties of the reference's admissible arithmetic and of the -fm bound, in exact arithmetic:
// - the admissible scales and steps hold the IEEE pair and stay inside their ulp budgets;
// - an emulation that perturbs the scale and the step within their budgets (each admissible
//   choice drawn by RapidCheck, per block) gives results within the -fm bound, exactly, and
//   check_admissible accepts them; the IEEE ds-int<b> result is one of the admissible results;
// - a step or a code outside the budget is refused (so the admissible check can fail);
// - 7,680 binary16 absmaxes under every admissible pair, exhaustively: within the -fm bound;
// - the fast-math behaviour really does differ from the IEEE model (so ds-int<b> under exact
//   conformance would flag DeepSpeed's kernel);
// - how close the -fm bound comes to the errors it bounds.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

#include "qtransit/common/cpu.hpp"  // QT_UNDER_ASAN
#include "qtransit/reference/exact.hpp"
#include "qtransit/reference/formats.hpp"

namespace qtransit::reference {
namespace {

FormatSpec fm(int bits) { return *parse_format(bits == 4 ? "ds-int4-fm" : "ds-int8-fm"); }
FormatSpec ieee(int bits) { return FormatSpec(FormatKind::kDs, bits); }
uint32_t bits_of(float v) { return std::bit_cast<uint32_t>(v); }

// The test's own binary16 rounding and binary32 product (hardware RNE: independent of the
// reference's emulated roundings).
float f16(float v) { return round_to_fp16(v); }
float fmul(float a, float b) { return static_cast<float>(static_cast<double>(a) * static_cast<double>(b)); }
// DeepSpeed's recipe with a given scale and step, in the test's own arithmetic: the code of x, and
// what a code decodes to.
int32_t code_of(int b, float x, float scale) {
    return static_cast<int32_t>(std::clamp<double>(std::nearbyint(fmul(f16(x), scale)), -(1 << (b - 1)), (1 << (b - 1)) - 1));
}
float decoded_of(int32_t q, float step) { return f16(fmul(static_cast<float>(q), step)); }

// A value for a ds block around 2^center: specials, values with few mantissa bits (ties of y * scale),
// and anything binary16 does not overflow.
float draw_value(int center) {
    const int kind = *rc::gen::inRange(0, 10);
    if (kind == 0) return *rc::gen::element(0.0f, -0.0f, 0x1p-24f, -0x1p-25f, 65504.0f, -65504.0f, 0x1p-149f);
    const bool neg = *rc::gen::arbitrary<bool>();
    const int e = std::clamp(center - *rc::gen::inRange(0, 8), -26, 15);
    uint32_t mant = *rc::gen::arbitrary<uint32_t>() & 0x7FFFFFu;
    if (kind <= 3) mant &= 0x7E0000u;  // few bits: exact ties are likely
    float v = std::ldexp(1.0f + static_cast<float>(mant) * 0x1p-23f, e);
    if (v >= 65520.0f) v = 65504.0f;
    return neg ? -v : v;
}

std::vector<float> draw_tensor(int64_t n) {
    const int center = *rc::gen::inRange(-20, 16);
    std::vector<float> x(static_cast<size_t>(n));
    for (float& v : x) v = draw_value(center);
    return x;
}

float block_absmax16(std::span<const float> xb) {
    float a = 0;
    for (float v : xb) a = std::max(a, std::fabs(f16(v)));
    return a;
}

// Distance in ulps of v from c (ulp at c's binade), as a double.
double ulps_from(float v, float c) { return std::fabs(static_cast<double>(v) - c) / std::ldexp(1.0, std::ilogb(c) - 23); }

TEST(DsFastMath, AdmissibleSetsHoldTheIeeePairWithinBudget) {
    for (int b : {4, 8})
        for (float a : {0x1p-24f, 0x1p-14f, 0.5f, 1.0f, 1.0f + 0x1p-10f, 3.0f, 1000.0f, 65504.0f, 0.1f}) {
            const float a16 = f16(a);
            const DsAdmissible d = ds_admissible(b, a16);
            const float s0 = static_cast<float>(static_cast<double>(1 << b) / (2.0 * a16));
            ASSERT_EQ(bits_of(d.scale0), bits_of(s0)) << b << " " << a16;
            ASSERT_TRUE(std::is_sorted(d.scales.begin(), d.scales.end()));
            ASSERT_NE(std::find(d.scales.begin(), d.scales.end(), d.scale0), d.scales.end());
            // At least two neighbours on each side (2 ulp), at most what 2.5 ulp allows.
            ASSERT_GE(d.scales.size(), 5u);
            ASSERT_LE(d.scales.size(), 11u);
            for (size_t j = 0; j < d.scales.size(); ++j) {
                ASSERT_LE(ulps_from(d.scales[j], d.scale0), 2.5) << d.scales[j];
                const float st0 = static_cast<float>(1.0 / static_cast<double>(d.scales[j]));
                ASSERT_NE(std::find(d.steps[j].begin(), d.steps[j].end(), st0), d.steps[j].end());
                ASSERT_GE(d.steps[j].size(), 3u);
                for (float st : d.steps[j]) ASSERT_LE(ulps_from(st, st0), 1.5);
                if (d.scales[j] == d.scale0) {
                    ASSERT_NE(std::find(d.steps[j].begin(), d.steps[j].end(), d.step0), d.steps[j].end());
                }
            }
            ASSERT_EQ(d.scale_max, d.scales.back());
        }
}

// One admissible (scale, step) choice per block, drawn; the emulated kernel's output.
struct Emulated {
    std::vector<int32_t> codes;
    std::vector<float> steps, decoded;
    int64_t differs_from_ieee = 0;
};
Emulated emulate(int b, const std::vector<float>& x, int64_t block, bool draw) {
    Emulated e;
    for (int64_t s = 0; s < static_cast<int64_t>(x.size()); s += block) {
        const auto xb = std::span<const float>(x).subspan(static_cast<size_t>(s), std::min<size_t>(block, x.size() - s));
        const float a = block_absmax16(xb);
        float scale = 0, step = 1;
        if (a != 0) {
            const DsAdmissible d = ds_admissible(b, a);
            const size_t j = draw ? *rc::gen::inRange<size_t>(0, d.scales.size()) : 0;
            scale = d.scales[j];
            step = d.steps[j][draw ? *rc::gen::inRange<size_t>(0, d.steps[j].size()) : 0];
        }
        e.steps.push_back(step);
        for (float v : xb) {
            int32_t q = 0;
            if (a != 0) q = code_of(b, v, scale);
            e.codes.push_back(q);
            e.decoded.push_back(decoded_of(q, step));
        }
    }
    return e;
}

RC_GTEST_PROP(DsFastMath, EveryAdmissibleChoiceIsWithinTheFmBoundAndAdmissible, ()) {
    const int b = *rc::gen::element(4, 8);
    const int64_t block = *rc::gen::inRange<int64_t>(1, 80);
    const auto x = draw_tensor(*rc::gen::inRange<int64_t>(1, 200));
    auto r = quantize(fm(b), x, block);
    RC_ASSERT(r.ok());
    const Emulated e = emulate(b, x, block, true);
    // Exactly within the -fm bound (the reference's statistics: its IEEE step never enters).
    Quantized q = *r;
    q.decoded = e.decoded;
    const BoundCheck bc = check_bounds(q, x);
    if (!bc.holds) RC_FAIL("element " + std::to_string(bc.first_violation) + " past the -fm bound");
    // One of the admissible results.
    const AdmissibleCheck ac = check_admissible(fm(b), x, block, e.codes, e.steps, e.decoded);
    if (!ac.holds) RC_FAIL(ac.first_text);
    // The IEEE ds-int<b> result is one of them too, and the IEEE bound is the narrower one there.
    auto ri = quantize(ieee(b), x, block);
    RC_ASSERT(ri.ok());
    const AdmissibleCheck ai = check_admissible(fm(b), x, block, ri->codes, ri->scales, ri->decoded);
    if (!ai.holds) RC_FAIL("IEEE result not admissible: " + ai.first_text);
    RC_ASSERT(ri->codes == r->codes);  // qtransit's own -fm result is the IEEE one
    for (size_t i = 0; i < x.size(); ++i) RC_ASSERT(bits_of(ri->decoded[i]) == bits_of(r->decoded[i]));
}

RC_GTEST_PROP(DsFastMath, AStepOrCodeOutsideTheBudgetIsRefused, ()) {
    const int b = *rc::gen::element(4, 8);
    const int64_t block = *rc::gen::inRange<int64_t>(1, 40);
    auto x = draw_tensor(*rc::gen::inRange<int64_t>(1, 120));
    x[0] = 1.5f;  // block 0 is not all zeros
    const Emulated e = emulate(b, x, block, true);
    const DsAdmissible d = ds_admissible(b, block_absmax16(std::span<const float>(x).first(std::min<size_t>(block, x.size()))));
    // A step two ulps past the largest admissible one.
    Emulated bad = e;
    bad.steps[0] = std::nextafter(std::nextafter(d.step_max, 1e30f), 1e30f);
    const AdmissibleCheck as = check_admissible(fm(b), x, block, bad.codes, bad.steps, {});
    RC_ASSERT(!as.holds);
    RC_ASSERT(as.inadmissible_steps == 1);
    RC_ASSERT(as.first == 0);
    // A code no admissible scale gives: element 0's code moved past the codes of every scale.
    bad = e;
    const int32_t cmax = (1 << (b - 1)) - 1;
    bad.codes[0] = e.codes[0] + (e.codes[0] + 2 <= cmax ? 2 : -2);
    const AdmissibleCheck ac = check_admissible(fm(b), x, block, bad.codes, bad.steps, {});
    RC_ASSERT(!ac.holds);
    RC_ASSERT(ac.first == 0);
    // A decoded value that is not the code times the block's step.
    bad = e;
    bad.decoded[0] = std::nextafter(e.decoded[0], 1e30f);
    RC_ASSERT(!check_admissible(fm(b), x, block, bad.codes, bad.steps, bad.decoded).holds);
}

// Fast math really changes results, so an exact ds-int<b> check would flag DeepSpeed's kernel for
// its normal behaviour; -fm accepts them. Deterministic inputs: every block's top choice of scale
// and step. (The IEEE bound, computed with the IEEE step, is printed: it is not derived for these.)
TEST(DsFastMath, FastMathDiffersFromIeee) {
    std::mt19937 rng(7);
    std::normal_distribution<float> g;
    for (int b : {4, 8}) {
        const int64_t block = 64;
        std::vector<float> x(64 * 512);
        for (float& v : x) v = g(rng);
        auto ri = quantize(ieee(b), x, block);
        auto rf = quantize(fm(b), x, block);
        ASSERT_TRUE(ri.ok() && rf.ok());
        // The largest scale with its largest step, in every block.
        Emulated top;
        for (size_t s = 0; s < x.size(); s += block) {
            const auto xb = std::span<const float>(x).subspan(s, block);
            const DsAdmissible d = ds_admissible(b, block_absmax16(xb));
            const float scale = d.scale_max, step = d.steps.back().back();
            top.steps.push_back(step);
            for (float v : xb) {
                const int32_t q = code_of(b, v, scale);
                top.codes.push_back(q);
                top.decoded.push_back(decoded_of(q, step));
            }
        }
        int64_t differ = 0;
        for (size_t i = 0; i < x.size(); ++i) differ += bits_of(top.decoded[i]) != bits_of(ri->decoded[i]);
        EXPECT_GT(differ, 0) << "ds-int" << b << ": the top admissible choice never changed a decoded value";
        EXPECT_TRUE(check_admissible(fm(b), x, block, top.codes, top.steps, top.decoded).holds);
        // Against the IEEE bound (ds-int<b>, its own step): does some element exceed it?
        Quantized qi = *ri;
        qi.decoded = top.decoded;
        const BoundCheck over_ieee = check_bounds(qi, x);
        Quantized qf = *rf;
        qf.decoded = top.decoded;
        const BoundCheck within_fm = check_bounds(qf, x);
        EXPECT_TRUE(within_fm.holds);
        std::printf("ds-int%d: the top admissible choice changes %lld of %zu decoded values; error/IEEE bound %.6f (%s), "
                    "error/-fm bound %.6f\n",
                    b, static_cast<long long>(differ), x.size(), over_ieee.max_error_to_bound,
                    over_ieee.holds ? "within" : "past it", within_fm.max_error_to_bound);
    }
}

// Every exponent of the positive normal binary16 values, a quarter of their significands (every
// fourth: 7,680 values), as the absmax a in the blocks {a, a/2} and {a, -a} (the +absmax is
// clamped; -a takes the bottom code), under every admissible scale and step: within the -fm bound,
// and admissible. The IEEE bound (ds-int<b>, with the IEEE step) is counted alongside: it is not
// derived for these results, and the count says whether it happens to cover them. The sanitizer
// build takes every 32nd significand (960 values): the Release build's sweep covers the rest, and
// the sanitizers look for memory and UB faults, which the same code paths show at any stride.
TEST(DsFastMath, Binary16AbsmaxesUnderEveryAdmissiblePair) {
    int64_t past_ieee = 0, total = 0;
#if defined(QT_UNDER_ASAN)
    constexpr uint32_t kStride = 32;
#else
    constexpr uint32_t kStride = 4;
#endif
    for (int b : {4, 8})
        for (uint32_t h = 0x0400; h < 0x7C00; h += kStride) {
            const float a = std::ldexp(1.0f + static_cast<float>(h & 0x3FF) * 0x1p-10f, static_cast<int>(h >> 10) - 15);
            for (const float second : {a * 0.5f, -a}) {
                const std::vector<float> x{a, second};
                auto ri = quantize(ieee(b), x, 2);
                auto rf = quantize(fm(b), x, 2);
                ASSERT_TRUE(ri.ok() && rf.ok());
                const DsAdmissible d = ds_admissible(b, a);
                for (size_t j = 0; j < d.scales.size(); ++j)
                    for (float st : d.steps[j]) {
                        std::vector<int32_t> codes(2);
                        std::vector<float> dec(2);
                        for (size_t i = 0; i < 2; ++i) {
                            codes[i] = code_of(b, x[i], d.scales[j]);
                            dec[i] = decoded_of(codes[i], st);
                        }
                        Quantized qf = *rf, qi = *ri;
                        qf.decoded = dec;
                        qi.decoded = dec;
                        ASSERT_TRUE(check_bounds(qf, x).holds) << "ds-int" << b << " a=" << a << " scale " << d.scales[j] << " step " << st;
                        const float step1[] = {st};
                        ASSERT_TRUE(check_admissible(fm(b), x, 2, codes, step1, dec).holds);
                        past_ieee += !check_bounds(qi, x).holds;
                        ++total;
                    }
            }
        }
    std::printf("%lld (scale, step) results checked; %lld of them past the IEEE ds-int<b> bound\n", static_cast<long long>(total),
                static_cast<long long>(past_ieee));
}

// How loose the -fm bound is: the largest error/bound over admissible choices on normal blocks
// comes within a fraction of a percent of 1 (the +absmax element, clamped, sits a full step away).
TEST(DsFastMath, FmBoundIsTightOnNormalInputs) {
    std::mt19937 rng(11);
    std::normal_distribution<float> g;
    for (int b : {4, 8}) {
        std::vector<float> x(64 * 256);
        for (float& v : x) v = g(rng);
        auto rf = quantize(fm(b), x, 64);
        ASSERT_TRUE(rf.ok());
        const BoundCheck c = check_bounds(*rf, x);
        ASSERT_TRUE(c.holds);
        std::printf("ds-int%d-fm on normal blocks of 64 (the IEEE result): largest error/bound %.6f\n", b, c.max_error_to_bound);
        EXPECT_GT(c.max_error_to_bound, 0.99);
    }
}

}  // namespace
}  // namespace qtransit::reference
