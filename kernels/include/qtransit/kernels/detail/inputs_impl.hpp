// Header-only implementation of the counter-based inputs declared in inputs.hpp (Philox4x32-10
// itself is common's, qtransit/common/philox.hpp). Included at the end of inputs.hpp; do not include
// it on its own. docs/INPUTS.md is the normative definition of every
// value produced here (counter/key layout, the distributions, the math); keep the two in step.
//
// Bit-identity CPU <-> GPU. Every value is computed in binary64 from +, -, *, / and sqrt only (all
// correctly rounded in IEEE 754 on both sides: the CPU build uses -ffp-contract=off and SSE2, the
// CUDA build --fmad=false), plus exact integer and bit operations, and is rounded to binary32 once
// at the end. No libm or CUDA transcendental is called: glibc and CUDA's log/exp/cos differ in the
// last bit, and one differing bit would make a GPU run disagree with the CPU reference. The
// polynomials below use only Taylor/atanh coefficients (no minimax tables to transcribe), each
// truncated where the next term is below 1e-17 relative, so the functions are accurate to a few
// units in the last place of binary64 (tested against std:: to 1e-13 relative).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace qtransit::kernels {

// ---- binary64 math from +, -, *, /, sqrt ---------------------------------------------------------

namespace detail {

QT_HD uint64_t f64_bits(double d) {
#if defined(__CUDA_ARCH__)
    return static_cast<uint64_t>(__double_as_longlong(d));
#else
    uint64_t u;
    std::memcpy(&u, &d, 8);
    return u;
#endif
}

QT_HD double bits_f64(uint64_t u) {
#if defined(__CUDA_ARCH__)
    return __longlong_as_double(static_cast<long long>(u));
#else
    double d;
    std::memcpy(&d, &u, 8);
    return d;
#endif
}

// Correctly rounded on both sides (IEEE 754 requires it; CUDA's double sqrt is IEEE-compliant).
QT_HD double sqrt_d(double x) {
#if defined(__CUDA_ARCH__)
    return ::sqrt(x);
#else
    return std::sqrt(x);
#endif
}

// 2^k as a double, for -1022 <= k <= 1023 (built from its bits: exact).
QT_HD double pow2i(int k) { return bits_f64(static_cast<uint64_t>(k + 1023) << 52); }

// ln 2 split as in fdlibm: kLn2Hi has 21 trailing zero bits, so k * kLn2Hi is exact for |k| < 2^21.
inline constexpr double kLn2Hi = 0x1.62e42fee00000p-1;
inline constexpr double kLn2Lo = 0x1.a39ef35793c76p-33;
inline constexpr double kLog2e = 0x1.71547652b82fep+0;   // 1/ln 2 (only picks k; need not be exact)
inline constexpr double kLn10 = 0x1.26bb1bbb55516p+1;    // ln 10, rounded to nearest
inline constexpr double kTwoPi = 0x1.921fb54442d18p+2;   // 2 pi, rounded to nearest
inline constexpr double kInf = __builtin_huge_val();
inline constexpr double kNaN = __builtin_nan("");

// Natural logarithm. x = m * 2^e exactly (bits), m in [sqrt(1/2), sqrt(2)); then
// log m = 2 atanh(s), s = (m - 1)/(m + 1), |s| <= 0.1716, so s^2 <= 0.02944 and the series
// 2 (s + s^3/3 + ... + s^27/27) is truncated below 0.02944^14/29 < 1e-22 relative.
// log x = e * kLn2Hi + (e * kLn2Lo + log m): |log m| <= ln2/2 < |e ln 2| when e != 0, so there is
// no catastrophic cancellation. Subnormals are scaled by 2^54 first. log(0) = -inf, log(x<0) = NaN.
QT_HD double log_d(double x) {
    if (!(x > 0.0)) return x == 0.0 ? -kInf : kNaN;
    if (x == kInf) return x;
    uint64_t b = f64_bits(x);
    int e = 0;
    if ((b >> 52) == 0) {  // subnormal: scale exactly into the normal range
        b = f64_bits(x * 0x1p54);
        e = -54;
    }
    e += static_cast<int>(b >> 52) - 1023;
    uint64_t mant = b & 0x000FFFFFFFFFFFFFull;
    // m = 1.mant in [1, 2); if m >= sqrt(2) (mantissa bits of sqrt(2) = 0x6A09E667F3BCD), use m/2.
    if (mant >= 0x6A09E667F3BCDull) {
        e += 1;
        mant |= 0x3FE0000000000000ull;  // exponent of [0.5, 1)
    } else {
        mant |= 0x3FF0000000000000ull;  // exponent of [1, 2)
    }
    const double m = bits_f64(mant);
    const double f = m - 1.0;   // exact (Sterbenz)
    const double s = f / (m + 1.0);
    const double s2 = s * s;
    // 1/(2k+1) for k = 1..13, correctly rounded.
    double p = 0x1.2f684bda12f68p-5;
    p = 0x1.47ae147ae147bp-5 + s2 * p;
    p = 0x1.642c8590b2164p-5 + s2 * p;
    p = 0x1.8618618618618p-5 + s2 * p;
    p = 0x1.af286bca1af28p-5 + s2 * p;
    p = 0x1.e1e1e1e1e1e1ep-5 + s2 * p;
    p = 0x1.1111111111111p-4 + s2 * p;
    p = 0x1.3b13b13b13b14p-4 + s2 * p;
    p = 0x1.745d1745d1746p-4 + s2 * p;
    p = 0x1.c71c71c71c71cp-4 + s2 * p;
    p = 0x1.2492492492492p-3 + s2 * p;
    p = 0x1.999999999999ap-3 + s2 * p;
    p = 0x1.5555555555555p-2 + s2 * p;
    const double two_s = s + s;
    const double logm = two_s + two_s * (s2 * p);
    const double de = static_cast<double>(e);
    return de * kLn2Hi + (de * kLn2Lo + logm);
}

// Exponential. k = nearest integer to x / ln 2, r = (x - k kLn2Hi) - k kLn2Lo, |r| <= 0.3466 + tiny
// (x - k kLn2Hi is exact for the k that occur here, as in fdlibm), exp(r) by its Taylor series to
// r^16/16! (next term 0.3466^17/17! < 1e-22), times 2^k built from bits. Overflow gives +inf,
// underflow 0; results in the subnormal range are scaled in two steps (one extra rounding there).
QT_HD double exp_d(double x) {
    if (x != x) return x;
    if (x > 709.782712893384) return kInf;  // above ln(DBL_MAX)
    if (x < -745.2) return 0.0;             // below ln(2^-1075): rounds to 0
    const double t = x * kLog2e;
    const int k = static_cast<int>(t < 0.0 ? t - 0.5 : t + 0.5);  // round half away; any near int is fine
    const double dk = static_cast<double>(k);
    const double r = (x - dk * kLn2Hi) - dk * kLn2Lo;
    // 1/n! for n = 16..2, correctly rounded.
    double p = 0x1.ae7f3e733b81fp-45;
    p = 0x1.ae7f3e733b81fp-41 + r * p;
    p = 0x1.93974a8c07c9dp-37 + r * p;
    p = 0x1.6124613a86d09p-33 + r * p;
    p = 0x1.1eed8eff8d898p-29 + r * p;
    p = 0x1.ae64567f544e4p-26 + r * p;
    p = 0x1.27e4fb7789f5cp-22 + r * p;
    p = 0x1.71de3a556c734p-19 + r * p;
    p = 0x1.a01a01a01a01ap-16 + r * p;
    p = 0x1.a01a01a01a01ap-13 + r * p;
    p = 0x1.6c16c16c16c17p-10 + r * p;
    p = 0x1.1111111111111p-7 + r * p;
    p = 0x1.5555555555555p-5 + r * p;
    p = 0x1.5555555555555p-3 + r * p;
    p = 0x1.0p-1 + r * p;
    // exp(r) = 1 + r + r^2 p: adding the small part r + r^2 p to 1 last keeps its rounding error small.
    const double er = 1.0 + (r + (r * r) * p);
    if (k > 1023) return er * 2.0 * pow2i(k - 1);  // x just below ln(DBL_MAX): er < 1 there
    if (k >= -1022) return er * pow2i(k);
    return (er * pow2i(k + 54)) * 0x1p-54;  // subnormal result
}

// sin x and cos x for 0 <= x <= pi/4 (Taylor series to x^19 and x^20: next terms < 1e-19).
QT_HD double sin_poly(double x) {
    const double x2 = x * x;
    double p = 0x1.71b8ef6dcf572p-66;   // 1/21!
    p = -0x1.2f49b46814157p-57 + x2 * p;
    p = 0x1.952c77030ad4ap-49 + x2 * p;
    p = -0x1.ae7f3e733b81fp-41 + x2 * p;
    p = 0x1.6124613a86d09p-33 + x2 * p;
    p = -0x1.ae64567f544e4p-26 + x2 * p;
    p = 0x1.71de3a556c734p-19 + x2 * p;
    p = -0x1.a01a01a01a01ap-13 + x2 * p;
    p = 0x1.1111111111111p-7 + x2 * p;
    p = -0x1.5555555555555p-3 + x2 * p;  // -1/3!
    return x + x * (x2 * p);
}

QT_HD double cos_poly(double x) {
    const double x2 = x * x;
    double p = 0x1.e542ba4020225p-62;    // 1/20!
    p = -0x1.6827863b97d97p-53 + x2 * p;
    p = 0x1.ae7f3e733b81fp-45 + x2 * p;
    p = -0x1.93974a8c07c9dp-37 + x2 * p;
    p = 0x1.1eed8eff8d898p-29 + x2 * p;
    p = -0x1.27e4fb7789f5cp-22 + x2 * p;
    p = 0x1.a01a01a01a01ap-16 + x2 * p;
    p = -0x1.6c16c16c16c17p-10 + x2 * p;
    p = 0x1.5555555555555p-5 + x2 * p;   // 1/4!
    // cos x = 1 - x^2/2 + x^4 p; x^2/2 is exact-scaled, the small tail is added to 1 last.
    return 1.0 + (x2 * (x2 * p) - 0.5 * x2);
}

// cos(2 pi t), reduced exactly in t (not in 2 pi t): t -> frac(t) in [0, 1); t > 1/2 -> 1 - t;
// t > 1/4 -> 1/2 - t with a sign flip; t > 1/8 -> sin(2 pi (1/4 - t)). Each subtraction is exact
// (Sterbenz), so only the final x = 2 pi t (one rounding) and the series carry error, and the result
// has small relative error even next to the zeros at t = 1/4, 3/4. Exact for t in [0,1); for other t
// frac(t) may round (t < 0) and frac of |t| >= 2^52 is 0.
QT_HD double cos_2pi(double t) {
    if (!(t - t == 0.0)) return kNaN;  // inf or NaN
    if (t < 0.0 || t >= 1.0) {
        if (t >= 0x1p52 || t <= -0x1p52) {
            t = 0.0;  // every double this large is an integer
        } else {
            const double ti = static_cast<double>(static_cast<int64_t>(t));  // trunc, exact
            t = t - ti;               // exact: frac with the sign of t
            if (t < 0.0) t = t + 1.0;  // may round for tiny negative fractions
            if (t >= 1.0) t = 0.0;
        }
    }
    if (t > 0.5) t = 1.0 - t;
    double sign = 1.0;
    if (t > 0.25) {
        t = 0.5 - t;
        sign = -1.0;
    }
    const double c = t > 0.125 ? sin_poly((0.25 - t) * kTwoPi) : cos_poly(t * kTwoPi);
    return sign * c;
}

// ---- the counter layout (docs/INPUTS.md section 2) -----------------------------------------------

// Counter word 3: what a Philox call is for, so that streams used for different purposes never share
// a counter. Word 2 is the rank, or kSharedRank for streams that every rank must see alike.
inline constexpr uint32_t kTagElement = 0;  // per (rank, index): the element's normal / uniform
inline constexpr uint32_t kTagAux = 1;      // per (rank, index): outlier decision, heavy's sign
inline constexpr uint32_t kTagRun = 2;      // per run of mixed-scale (rank word kSharedRank)
inline constexpr uint32_t kTagShared = 3;   // per index: correlated's shared normal (kSharedRank)
inline constexpr uint32_t kSharedRank = 0xFFFFFFFFu;

inline constexpr uint32_t kMixedScaleRun = 24;        // elements per mixed-scale run
inline constexpr double kMixedScaleDecades = 4.0;     // magnitude 10^(-4 u), u in [0, 1)
inline constexpr uint32_t kOutlierThreshold = 4294967u;  // round(0.001 * 2^32): P = 0.000999999931
inline constexpr double kOutlierFactor = 1000.0;
inline constexpr double kCorrShared = 0.8, kCorrOwn = 0.6;  // 0.8^2 + 0.6^2 = 1: unit variance
inline constexpr double kHeavySigma = 2.0;                    // |x| = exp(2 z)

QT_HD Philox4x32 draw(uint64_t seed, uint64_t counter, uint32_t rank_word, uint32_t tag) {
    return philox4x32_10(Philox4x32{{static_cast<uint32_t>(counter), static_cast<uint32_t>(counter >> 32),
                                     rank_word, tag}},
                         static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
}

// 53-bit integer from two words: hi's 32 bits, then the top 21 bits of lo.
QT_HD uint64_t u53(uint32_t hi, uint32_t lo) { return (static_cast<uint64_t>(hi) << 21) | (lo >> 11); }

// Box-Muller on one Philox block: u1 = (K1 + 1) 2^-53 in (0, 1] (log never sees 0),
// t = K2 2^-53 in [0, 1), z = sqrt(-2 log u1) cos(2 pi t); |z| <= sqrt(106 ln 2) = 8.57.
QT_HD double normal_from(Philox4x32 w) {
    const double u1 = static_cast<double>(u53(w.v[0], w.v[1]) + 1) * 0x1p-53;
    const double t = static_cast<double>(u53(w.v[2], w.v[3])) * 0x1p-53;
    return sqrt_d(-2.0 * log_d(u1)) * cos_2pi(t);
}

QT_HD double normal_d(uint64_t seed, uint32_t rank, uint64_t index) {
    return normal_from(draw(seed, index, rank, kTagElement));
}

// The mixed-scale magnitude of run `run`: 10^(-4 u), u = K 2^-53 in [0, 1), K from (w0, w1) of the
// run's block; computed as exp(-(4 u) ln 10), in (1e-4, 1].
QT_HD double run_magnitude(uint64_t seed, uint64_t run) {
    const Philox4x32 w = draw(seed, run, kSharedRank, kTagRun);
    const double u = static_cast<double>(u53(w.v[0], w.v[1])) * 0x1p-53;
    return exp_d(-(kMixedScaleDecades * u) * kLn10);
}

}  // namespace detail

QT_HD float generate(Distribution d, uint64_t seed, uint32_t rank, uint64_t index) {
    using namespace detail;
    switch (d) {
        case Distribution::kUniform: {
            // K = w0 >> 8 in [0, 2^24); K 2^-23 - 1 is exact in binary32: a multiple of 2^-23 in [-1, 1).
            const Philox4x32 w = draw(seed, index, rank, kTagElement);
            return static_cast<float>(static_cast<double>(w.v[0] >> 8) * 0x1p-23 - 1.0);
        }
        case Distribution::kHeavy: {
            const double z = normal_d(seed, rank, index);
            const double mag = exp_d(kHeavySigma * z);  // in [3.6e-8, 2.8e7]: finite in binary32
            const Philox4x32 a = draw(seed, index, rank, kTagAux);
            return static_cast<float>((a.v[1] >> 31) ? -mag : mag);
        }
        case Distribution::kOutliers: {
            const double z = normal_d(seed, rank, index);
            const Philox4x32 a = draw(seed, index, rank, kTagAux);
            return static_cast<float>(a.v[0] < kOutlierThreshold ? z * kOutlierFactor : z);
        }
        case Distribution::kMixedScale: {
            const double z = normal_d(seed, rank, index);
            return static_cast<float>(z * run_magnitude(seed, index / kMixedScaleRun));
        }
        case Distribution::kCorrelated: {
            const double zs = normal_from(draw(seed, index, kSharedRank, kTagShared));
            const double zr = normal_d(seed, rank, index);
            return static_cast<float>(kCorrShared * zs + kCorrOwn * zr);
        }
        case Distribution::kNormal:
        default:
            return static_cast<float>(normal_d(seed, rank, index));
    }
}

}  // namespace qtransit::kernels
