// The distributions of docs/INPUTS.md: exact structural facts (bit equality, regenerability, golden
// values from an independent Python implementation of the document) and statistical sanity checks.
//
// Statistical tolerances: every check uses a fixed seed (so it is deterministic: it either always
// passes or always fails), and its tolerance is about 5 standard errors of the estimate, stated
// beside it. A correct generator passes with a wide margin; a wrong constant, a wrong sign, a lost
// word or a biased transform moves the estimate by far more than 5 standard errors.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <set>
#include <vector>

#include <gtest/gtest.h>

#include "qtransit/kernels/inputs.hpp"
#include "qtransit/kernels/npy.hpp"

namespace qk = qtransit::kernels;
namespace qd = qtransit::kernels::detail;
using qk::Distribution;

namespace {

constexpr uint64_t kSeed = 0x5EED0123456789ABull;
constexpr size_t kN = 1000000;

std::vector<float> draw_span(Distribution d, uint64_t seed, uint32_t rank, uint64_t first, size_t n) {
    std::vector<float> v(n);
    qk::generate_span(d, seed, rank, first, v);
    return v;
}

struct Moments {
    double mean = 0, var = 0;
};

Moments moments(const std::vector<float>& v) {
    double s = 0;
    for (float x : v) s += x;
    const double mean = s / static_cast<double>(v.size());
    double q = 0;
    for (float x : v) q += (x - mean) * (x - mean);
    return {mean, q / static_cast<double>(v.size() - 1)};
}

double correlation(const std::vector<float>& a, const std::vector<float>& b) {
    const Moments ma = moments(a), mb = moments(b);
    double c = 0;
    for (size_t i = 0; i < a.size(); ++i) c += (a[i] - ma.mean) * (b[i] - mb.mean);
    return c / static_cast<double>(a.size() - 1) / std::sqrt(ma.var * mb.var);
}

TEST(Distributions, NamesParseAndList) {
    EXPECT_EQ(qk::all_distributions().size(), 6u);
    for (Distribution d : qk::all_distributions()) {
        auto r = qk::parse_distribution(qk::to_string(d));
        ASSERT_TRUE(r.ok()) << qk::to_string(d);
        EXPECT_EQ(*r, d);
    }
    EXPECT_EQ(qk::known_distribution_names(), "normal, uniform, heavy, outliers, mixed-scale, correlated");
    auto bad = qk::parse_distribution("gaussian");
    ASSERT_FALSE(bad.ok());
    EXPECT_EQ(bad.error().code, qtransit::ErrorCode::kInvalidArgument);
    EXPECT_NE(bad.error().message.find("'gaussian'"), std::string::npos);
    EXPECT_NE(bad.error().message.find("mixed-scale"), std::string::npos) << "should list the known names";
}

TEST(Distributions, NormalMomentsAndShape) {
    const auto v = draw_span(Distribution::kNormal, kSeed, 0, 0, kN);
    const Moments m = moments(v);
    // Standard errors for n = 1e6: mean 1/sqrt(n) = 1e-3; variance sqrt(2/n) = 1.4e-3.
    EXPECT_NEAR(m.mean, 0.0, 5e-3);
    EXPECT_NEAR(m.var, 1.0, 7e-3);
    // Shape, not just moments: P(|z| < 1) = 0.682689, P(|z| < 2) = 0.954500, P(|z| < 3) = 0.997300;
    // standard errors sqrt(p(1-p)/n) = 4.7e-4, 2.1e-4, 5.2e-5.
    size_t in1 = 0, in2 = 0, in3 = 0;
    for (float x : v) {
        in1 += std::fabs(x) < 1;
        in2 += std::fabs(x) < 2;
        in3 += std::fabs(x) < 3;
    }
    EXPECT_NEAR(in1 / double(kN), 0.682689, 2.5e-3);
    EXPECT_NEAR(in2 / double(kN), 0.954500, 1.1e-3);
    EXPECT_NEAR(in3 / double(kN), 0.997300, 2.6e-4);
}

TEST(Distributions, UniformMomentsAndRange) {
    const auto v = draw_span(Distribution::kUniform, kSeed, 1, 0, kN);
    const Moments m = moments(v);
    // U[-1, 1): variance 1/3; standard errors sqrt(1/(3n)) = 5.8e-4 (mean) and
    // sqrt((1/5 - 1/9)/n) = 3.0e-4 (variance).
    EXPECT_NEAR(m.mean, 0.0, 3e-3);
    EXPECT_NEAR(m.var, 1.0 / 3.0, 1.5e-3);
    float lo = 1, hi = -1;
    for (float x : v) {
        ASSERT_GE(x, -1.0f);
        ASSERT_LT(x, 1.0f);
        // A multiple of 2^-23: exact in binary32 by construction.
        ASSERT_EQ(std::ldexp(static_cast<double>(x), 23), std::round(std::ldexp(static_cast<double>(x), 23)));
        lo = std::min(lo, x);
        hi = std::max(hi, x);
    }
    // With 1e6 draws the extremes lie within ~1e-5 of the ends (P(miss 1e-4) = (1 - 5e-5)^1e6 ~ e^-50).
    EXPECT_LT(lo, -0.9999f);
    EXPECT_GT(hi, 0.9999f);
    // Each decile of [-1, 1) holds 1e5 +- 300 (sd of a binomial(1e6, 0.1)); 5 sd.
    std::vector<size_t> bins(10);
    for (float x : v) ++bins[static_cast<size_t>((x + 1.0f) * 5.0f)];
    for (size_t b = 0; b < 10; ++b) EXPECT_NEAR(static_cast<double>(bins[b]), 1e5, 1500) << "decile " << b;
}

TEST(Distributions, OutlierFraction) {
    const auto o = draw_span(Distribution::kOutliers, kSeed, 2, 0, kN);
    const auto z = draw_span(Distribution::kNormal, kSeed, 2, 0, kN);
    size_t outliers = 0;
    for (size_t i = 0; i < kN; ++i) {
        if (o[i] == z[i]) continue;
        ++outliers;
        // fl32(1000 z) against 1000 fl32(z): two roundings of the same product, within 2^-23 relative.
        ASSERT_NEAR(o[i], 1000.0 * z[i], std::fabs(1000.0 * z[i]) * 1.2e-7) << i;
    }
    // Binomial(1e6, 0.001): mean 1000, sd 31.6; 5 sd = 158.
    EXPECT_NEAR(static_cast<double>(outliers), 1000.0, 160.0);
}

TEST(Distributions, MixedScaleRunsShareOneMagnitudeOnEveryRank) {
    constexpr uint64_t kRuns = 20000;
    constexpr uint32_t kRun = qd::kMixedScaleRun;
    double lo = 1e9, hi = -1e9;
    for (uint64_t run = 0; run < kRuns; ++run) {
        const double mag = qd::run_magnitude(kSeed, run);
        lo = std::min(lo, std::log10(mag));
        hi = std::max(hi, std::log10(mag));
        if (run >= 200) continue;  // the element-level checks below need fewer runs
        for (uint32_t rank : {0u, 1u, 7u, 1000u}) {
            for (uint64_t i = run * kRun; i < (run + 1) * kRun; ++i) {
                const float x = qk::generate(Distribution::kMixedScale, kSeed, rank, i);
                const double z = qd::normal_d(kSeed, rank, i);
                // Definitional: x = fl32(z * mag(run)), the same run magnitude on every rank.
                ASSERT_EQ(x, static_cast<float>(z * mag)) << "rank " << rank << " element " << i;
            }
        }
    }
    // 10^(-4u), u uniform in [0, 1): log10 magnitudes fill (-4, 0]. With 2e4 runs the extremes are
    // within 0.01 of the ends except with probability (1 - 0.0025)^20000 ~ e^-50.
    EXPECT_GT(lo, -4.0);
    EXPECT_LT(lo, -3.99);
    EXPECT_LE(hi, 0.0);
    EXPECT_GT(hi, -0.01);
    // Runs of 24 straddle 32-element blocks: elements 31 and 32 (blocks 0 and 1) share run 1, and
    // a block of 32 holds parts of two or three runs. Element 23 and 24 are in different runs.
    EXPECT_EQ(31 / kRun, 32 / kRun);
    EXPECT_NE(qd::run_magnitude(kSeed, 0), qd::run_magnitude(kSeed, 1));
    // Different seeds give different magnitudes.
    EXPECT_NE(qd::run_magnitude(kSeed, 5), qd::run_magnitude(kSeed + 1, 5));
}

TEST(Distributions, MixedScaleSpansFourDecadesInData) {
    const auto v = draw_span(Distribution::kMixedScale, kSeed, 3, 0, 24 * 20000);
    // Per run, the largest |x| is ~2 * magnitude; over 2e4 runs the per-run maxima span the 4
    // decades of the magnitudes (a 24-sample max of |z| lies in [0.3, 4.5] except with negligible
    // probability, so the spread of log10 maxima is 4 +- 1.2).
    double lo = 1e9, hi = -1e9;
    for (size_t r = 0; r < 20000; ++r) {
        float m = 0;
        for (size_t i = 0; i < 24; ++i) m = std::max(m, std::fabs(v[r * 24 + i]));
        lo = std::min(lo, std::log10(static_cast<double>(m)));
        hi = std::max(hi, std::log10(static_cast<double>(m)));
    }
    EXPECT_GT(hi - lo, 3.5);
    EXPECT_LT(hi - lo, 5.5);
}

TEST(Distributions, CorrelatedRanks) {
    const auto a = draw_span(Distribution::kCorrelated, kSeed, 0, 0, kN);
    const auto b = draw_span(Distribution::kCorrelated, kSeed, 1, 0, kN);
    const auto za = draw_span(Distribution::kNormal, kSeed, 0, 0, kN);
    // corr(0.8 s + 0.6 e0, 0.8 s + 0.6 e1) = 0.64; the standard error of a sample correlation is
    // (1 - rho^2)/sqrt(n) = 5.9e-4.
    EXPECT_NEAR(correlation(a, b), 0.64, 3e-3);
    // Rank 0's own component is its normal stream: corr = 0.6 (standard error 6.4e-4).
    EXPECT_NEAR(correlation(a, za), 0.6, 3.5e-3);
    // Unit variance: 0.8^2 + 0.6^2 = 1 (standard error 1.4e-3).
    EXPECT_NEAR(moments(a).var, 1.0, 7e-3);
    // The sum over N ranks grows like N (shared part) not sqrt N: Var(sum of 16) = 16*0.36 + 256*0.64.
    const size_t n = 100000;
    std::vector<float> sum(n, 0.0f);
    for (uint32_t r = 0; r < 16; ++r) {
        const auto x = draw_span(Distribution::kCorrelated, kSeed, r, 0, n);
        for (size_t i = 0; i < n; ++i) sum[i] += x[i];
    }
    // Variance 169.6; the standard error of a sample variance is var*sqrt(2/n) = 0.76; 5 sd.
    EXPECT_NEAR(moments(sum).var, 16 * 0.36 + 256 * 0.64, 3.8);
}

TEST(Distributions, HeavyIsLogNormalWithRandomSign) {
    const auto h = draw_span(Distribution::kHeavy, kSeed, 4, 0, kN);
    size_t pos = 0, pos_big = 0, big = 0;
    std::vector<float> logs(kN);
    for (size_t i = 0; i < kN; ++i) {
        pos += h[i] > 0;
        if (std::fabs(h[i]) > 1) {
            ++big;
            pos_big += h[i] > 0;
        }
        logs[i] = static_cast<float>(std::log(std::fabs(static_cast<double>(h[i]))));
        ASSERT_NE(h[i], 0.0f);
    }
    // P(sign = +) = 1/2: standard error 5e-4. Among |x| > 1 (~5e5 elements) 7e-4: the sign is
    // independent of the magnitude.
    EXPECT_NEAR(pos / double(kN), 0.5, 2.5e-3);
    EXPECT_NEAR(pos_big / double(big), 0.5, 3.5e-3);
    // log|x| = 2 z: mean 0 (standard error 2e-3), variance 4 (standard error 4 sqrt(2/n) = 5.7e-3).
    const Moments m = moments(logs);
    EXPECT_NEAR(m.mean, 0.0, 1e-2);
    EXPECT_NEAR(m.var, 4.0, 3e-2);
}

TEST(Distributions, AllFiniteIncludingExtremes) {
    const uint64_t seeds[] = {0, 1, kSeed, ~0ull, 0xFFFFFFFF00000000ull};
    const uint32_t ranks[] = {0, 1, 0xFFFFFFFEu, 0xFFFFFFFFu};
    const uint64_t firsts[] = {0, 0xFFFFFFF0ull, ~0ull - 5000};
    for (Distribution d : qk::all_distributions())
        for (uint64_t s : seeds)
            for (uint32_t r : ranks)
                for (uint64_t f : firsts)
                    for (uint64_t i = 0; i < 2000; ++i) {
                        const float x = qk::generate(d, s, r, f + i);
                        ASSERT_TRUE(std::isfinite(x)) << qk::to_string(d) << " seed " << s << " rank " << r << " index " << f + i;
                    }
    // The extreme Philox words: u1 = 2^-53 (all-zero words) gives the largest |z| = sqrt(106 ln 2);
    // all-one words give u1 = 1 and z = 0. Everything derived from them stays finite.
    const double zmax = qd::normal_from(qtransit::Philox4x32{{0, 0, 0, 0}});
    EXPECT_NEAR(zmax, std::sqrt(106 * std::log(2.0)), 1e-12);
    EXPECT_EQ(qd::normal_from(qtransit::Philox4x32{{~0u, ~0u, ~0u, ~0u}}), 0.0);
    EXPECT_TRUE(std::isfinite(static_cast<float>(qd::exp_d(qd::kHeavySigma * zmax))));
    EXPECT_TRUE(std::isfinite(static_cast<float>(zmax * qd::kOutlierFactor)));
    EXPECT_GT(static_cast<float>(qd::exp_d(-qd::kHeavySigma * zmax)), 0.0f);
}

TEST(Distributions, StreamsDifferByRankSeedAndIndexWord) {
    const size_t n = 4096;
    for (Distribution d : qk::all_distributions()) {
        const auto base = draw_span(d, kSeed, 0, 0, n);
        const std::vector<std::vector<float>> others = {
            draw_span(d, kSeed, 1, 0, n),                   // rank
            draw_span(d, kSeed + 1, 0, 0, n),               // seed, low word
            draw_span(d, kSeed + (1ull << 32), 0, 0, n),    // seed, high word
            draw_span(d, kSeed, 0, 1ull << 32, n),          // index, high word
        };
        for (size_t k = 0; k < others.size(); ++k) {
            size_t same = 0;
            for (size_t i = 0; i < n; ++i) same += base[i] == others[k][i];
            // Uniform values take 2^24 values: expected coincidences 4096 * 2^-24 ~ 2e-4.
            EXPECT_LE(same, 2u) << qk::to_string(d) << " variant " << k;
        }
    }
    // Different ranks are uncorrelated for every distribution except `correlated`
    // (|r| < 5/sqrt(n) = 5e-3 at n = 1e6).
    const auto a = draw_span(Distribution::kNormal, kSeed, 5, 0, kN);
    const auto b = draw_span(Distribution::kNormal, kSeed, 6, 0, kN);
    EXPECT_NEAR(correlation(a, b), 0.0, 5e-3);
    // Neighbouring elements of one rank are uncorrelated too (lag-1 correlation).
    std::vector<float> a0(a.begin(), a.end() - 1), a1(a.begin() + 1, a.end());
    EXPECT_NEAR(correlation(a0, a1), 0.0, 5e-3);
}

TEST(Distributions, GenerateSpanEqualsGenerateElementwise) {
    // Small (single thread) and large (threaded: >= 2^20 elements), starting just below 2^32 so that
    // the span crosses into the counter's high index word.
    for (size_t n : {size_t{0}, size_t{1}, size_t{1000}, (size_t{1} << 20) + 12345}) {
        for (Distribution d : {Distribution::kNormal, Distribution::kMixedScale, Distribution::kCorrelated}) {
            const uint64_t first = 0xFFFFFFFFull - n / 2;
            const auto v = draw_span(d, kSeed, 9, first, n);
            for (size_t i = 0; i < n; ++i) {
                const float want = qk::generate(d, kSeed, 9, first + i);
                ASSERT_EQ(std::memcmp(&v[i], &want, 4), 0) << qk::to_string(d) << " n " << n << " i " << i;
            }
        }
    }
}

// properties/data/inputs_golden.npy was written by the plain-Python implementation of docs/INPUTS.md
// (section "Reference implementation"), which uses Python's math.log/exp/cos instead of ours. Its
// shape is [6 distributions in all_distributions() order, 2 rows, 32]: row 0 is rank 3 from index
// 2^32 - 16 (crossing the index high word), row 1 rank 0 from index 0; seed 0x0123456789ABCDEF.
// Agreement is bit-exact: both compute in binary64 to within a few ulp and round once to binary32,
// which differs only when a value lies within ~1e-15 relative of a rounding boundary (probability
// ~1e-8 per value; none of these 384 does, and the values are fixed).
TEST(Distributions, MatchesIndependentPythonGolden) {
    auto g = qk::read_npy(std::string(QT_TEST_DATA_DIR) + "/inputs_golden.npy");
    ASSERT_TRUE(g.ok()) << g.error().message;
    ASSERT_EQ(g->shape, (std::vector<int64_t>{6, 2, 32}));
    const uint64_t seed = 0x0123456789ABCDEFull;
    const struct {
        uint32_t rank;
        uint64_t first;
    } rows[2] = {{3, (1ull << 32) - 16}, {0, 0}};
    size_t k = 0;
    for (Distribution d : qk::all_distributions())
        for (const auto& row : rows)
            for (uint64_t i = 0; i < 32; ++i, ++k) {
                const float got = qk::generate(d, seed, row.rank, row.first + i);
                EXPECT_EQ(qd::f64_bits(got), qd::f64_bits(g->data[k]))
                    << qk::to_string(d) << " rank " << row.rank << " index " << row.first + i << ": " << got
                    << " vs " << g->data[k];
            }
}

}  // namespace
