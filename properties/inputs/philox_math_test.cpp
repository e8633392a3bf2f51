// Philox4x32-10 known answers, and our binary64 log/exp/cos(2 pi t) against the C library.
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <random>

#include <gtest/gtest.h>

#include "qtransit/common/philox.hpp"
#include "qtransit/kernels/inputs.hpp"

namespace qk = qtransit::kernels;
namespace qd = qtransit::kernels::detail;

namespace {

// Known-answer vectors of Random123 (kat_vectors, philox4x32_10).
TEST(Philox, KnownAnswers) {
    struct Kat {
        uint32_t ctr[4], key[2], out[4];
    };
    const Kat kats[] = {
        {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
        {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
         {0xffffffff, 0xffffffff},
         {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
        {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
         {0xa4093822, 0x299f31d0},
         {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
    };
    for (const Kat& k : kats) {
        const qtransit::Philox4x32 r =
            qtransit::philox4x32_10(qtransit::Philox4x32{{k.ctr[0], k.ctr[1], k.ctr[2], k.ctr[3]}}, k.key[0], k.key[1]);
        for (int i = 0; i < 4; ++i) EXPECT_EQ(r.v[i], k.out[i]) << "word " << i << " of ctr " << std::hex << k.ctr[0];
    }
}

// Every word of the counter and of the key matters (a one-bit change elsewhere is the property test).
TEST(Philox, EveryCounterAndKeyWordMatters) {
    const qtransit::Philox4x32 base = qtransit::philox4x32_10(qtransit::Philox4x32{{1, 2, 3, 4}}, 5, 6);
    for (int w = 0; w < 6; ++w) {
        uint32_t c[4] = {1, 2, 3, 4}, k[2] = {5, 6};
        if (w < 4) c[w] ^= 0x80000000u;
        else k[w - 4] ^= 1u;
        const qtransit::Philox4x32 r = qtransit::philox4x32_10(qtransit::Philox4x32{{c[0], c[1], c[2], c[3]}}, k[0], k[1]);
        int same = 0;
        for (int i = 0; i < 4; ++i) same += r.v[i] == base.v[i];
        EXPECT_EQ(same, 0) << "changing word " << w;
    }
}

double rel_err(double got, double want) {
    if (got == want) return 0.0;
    return std::fabs(got - want) / std::fabs(want);
}

// A positive finite double from random bits (all binades, subnormals included).
double random_positive(std::mt19937_64& g) {
    for (;;) {
        const double d = qd::bits_f64(g() & 0x7fffffffffffffffull);
        if (d > 0.0 && std::isfinite(d)) return d;
    }
}

// The requirement is 1e-13 relative against libm (glibc's log is correctly rounded or within 1 ulp),
// so any failure is a real defect in the series or the reduction, not libm noise; the measured
// maximum is printed to show the margin (it is a few 1e-16).
constexpr double kTol = 1e-13;

TEST(Math, LogMatchesStdOverAllBinades) {
    std::mt19937_64 g(20240601);
    double worst = 0.0;
    auto check = [&](double x) {
        const double e = rel_err(qd::log_d(x), std::log(x));
        worst = std::max(worst, e);
        ASSERT_LE(e, kTol) << "x = " << std::hexfloat << x;
    };
    for (int i = 0; i < 200000; ++i) check(random_positive(g));
    // Around 1, where log x ~ x - 1 is small and a sloppy reduction loses relative accuracy.
    for (int k = 1; k < 5000; ++k) {
        check(1.0 + k * DBL_EPSILON);
        check(1.0 - k * DBL_EPSILON / 2);
        check(1.0 + k * 1e-7);
        check(1.0 - k * 1e-7);
    }
    // The Box-Muller grid: u1 = (K + 1) 2^-53.
    for (uint64_t k = 0; k < 100000; ++k) check(static_cast<double>((g() >> 11) + 1) * 0x1p-53);
    for (uint64_t k = 0; k < 64; ++k) check(static_cast<double>(k + 1) * 0x1p-53);
    check(DBL_MIN);
    check(DBL_TRUE_MIN);
    check(DBL_MAX);
    check(std::sqrt(2.0));
    check(std::nextafter(std::sqrt(2.0), 0.0));
    EXPECT_EQ(qd::log_d(1.0), 0.0);
    EXPECT_EQ(qd::log_d(0.0), -INFINITY);
    EXPECT_TRUE(std::isnan(qd::log_d(-1.0)));
    EXPECT_EQ(qd::log_d(INFINITY), INFINITY);
    std::printf("max relative error of log_d: %.3g\n", worst);
}

TEST(Math, ExpMatchesStdOverItsRange) {
    std::mt19937_64 g(20240602);
    std::uniform_real_distribution<double> wide(-708.0, 709.7), narrow(-20.0, 20.0), tiny(-1e-6, 1e-6);
    double worst = 0.0;
    auto check = [&](double x) {
        const double e = rel_err(qd::exp_d(x), std::exp(x));
        worst = std::max(worst, e);
        ASSERT_LE(e, kTol) << "x = " << std::hexfloat << x;
    };
    for (int i = 0; i < 200000; ++i) {
        check(wide(g));
        check(narrow(g));
        check(tiny(g));
    }
    // Where the reduction switches k, and the ends of the normal range.
    for (int k = -1020; k <= 1023; ++k) {
        const double x = k * M_LN2;
        check(x);
        check(std::nextafter(x, -INFINITY));
        check(x + 0.5 * M_LN2);
        check(x - 0.5 * M_LN2);
    }
    check(709.78);
    check(-708.39);
    check(0.0);
    EXPECT_EQ(qd::exp_d(0.0), 1.0);
    EXPECT_EQ(qd::exp_d(710.0), INFINITY);
    EXPECT_EQ(qd::exp_d(-800.0), 0.0);
    // Subnormal results lose relative precision by construction (IEEE); compare in absolute terms:
    // within one unit of 2^-1074 beyond libm's own rounding.
    for (double x = -745.0; x < -708.4; x += 0.37) {
        EXPECT_LE(std::fabs(qd::exp_d(x) - std::exp(x)), 2 * DBL_TRUE_MIN) << x;
    }
    std::printf("max relative error of exp_d: %.3g\n", worst);
}

TEST(Math, Cos2PiMatchesLongDoubleCos) {
    // The reference is cosl(2 pi t) in x87 long double (64-bit significand). Its own argument error,
    // |2 pi t| * 2^-64 < 3.5e-19 absolute, is what the absolute term of the tolerance allows for: near
    // the zeros at t = 1/4, 3/4 the true value can be as small as ~2^-52, and there the long double
    // reference, not our function, is the less accurate one.
    const long double two_pi = 6.283185307179586476925286766559005768L;
    std::mt19937_64 g(20240603);
    double worst = 0.0;
    auto check = [&](double t) {
        const double got = qd::cos_2pi(t);
        const long double want = std::cos(two_pi * static_cast<long double>(t));
        const double err = static_cast<double>(std::fabs(static_cast<long double>(got) - want));
        const double tol = kTol * static_cast<double>(std::fabs(want)) + 4e-19;
        if (std::fabs(want) > 1e-3) worst = std::max(worst, err / static_cast<double>(std::fabs(want)));
        ASSERT_LE(err, tol) << "t = " << std::hexfloat << t;
    };
    for (int i = 0; i < 300000; ++i) check(static_cast<double>(g() >> 11) * 0x1p-53);
    for (int j = 0; j <= 16; ++j) {  // octant boundaries and their neighbours, where the folding switches
        const double t = j / 16.0;
        if (t < 1.0) check(t);
        for (int k = 1; k < 200; ++k) {
            if (t + k * 0x1p-53 < 1.0) check(t + k * 0x1p-53);
            if (t - k * 0x1p-53 >= 0.0) check(t - k * 0x1p-53);
        }
    }
    EXPECT_EQ(qd::cos_2pi(0.0), 1.0);
    EXPECT_EQ(qd::cos_2pi(0.5), -1.0);
    EXPECT_EQ(qd::cos_2pi(0.25), 0.0);
    // Periodic: an integer shift is reduced exactly.
    for (double t : {0.1337890625, 0.3125, 0.6875, 0.90625}) {  // dyadic: t + 3 is exact
        EXPECT_EQ(qd::cos_2pi(t + 3.0), qd::cos_2pi(t)) << t;
        EXPECT_EQ(qd::cos_2pi(t - 4.0), qd::cos_2pi(t)) << t;
    }
    EXPECT_TRUE(std::isnan(qd::cos_2pi(INFINITY)));
    std::printf("max relative error of cos_2pi (|cos| > 1e-3): %.3g\n", worst);
}

// Against the double-precision libm as well, in the absolute terms in which std::cos(2*M_PI*t) is
// accurate (2*M_PI*t carries an argument error up to ~1e-15).
TEST(Math, Cos2PiMatchesStdCos) {
    std::mt19937_64 g(20240604);
    for (int i = 0; i < 100000; ++i) {
        const double t = static_cast<double>(g() >> 11) * 0x1p-53;
        EXPECT_NEAR(qd::cos_2pi(t), std::cos(2 * M_PI * t), 4e-15) << t;
    }
}

}  // namespace
