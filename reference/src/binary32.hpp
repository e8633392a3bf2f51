// Internal to reference/: the reference's own binary32 / binary16 rounding (see formats.cpp for why
// it is correct: an IEEE binary64 operation, then our own rounding of that double), shared by
// formats.cpp (the integer formats) and decl.cpp (the declared formats of docs/FORMATS.md).
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

namespace qtransit::reference::detail {

inline constexpr uint32_t kPoisonBits = 0x7FC00000u;  // D4: the one quiet NaN every poisoned value has
inline constexpr float kFltMax = std::numeric_limits<float>::max();
inline constexpr float kMinSub = 0x1p-149f;  // smallest positive binary32 subnormal

inline float poison_nan() { return std::bit_cast<float>(kPoisonBits); }

// rne(v): the nearest integer to a finite double, ties to even.
// Works on the magnitude, where av - floor(av) is exact (floor(av) is 0, or within a factor 2 of
// av: Sterbenz), so the comparison with 1/2 is exact too.
inline double rne(double v) {
    const double av = std::fabs(v);
    const double f = std::floor(av);
    const double frac = av - f;
    double r = f;
    if (frac > 0.5 || (frac == 0.5 && std::fmod(f, 2.0) != 0)) r = f + 1;  // a tie goes to the even one
    return std::copysign(r, v);
}

// Round a finite double to the binary floating-point format with p significand bits (including
// the implicit one), minimum normal exponent emin and maximum exponent emax, round to nearest
// even, with gradual underflow and overflow to +-inf. Returns the rounded value as a double (exact:
// the result has at most p <= 24 significant bits). Non-finite input and zeros pass through.
inline double round_to_format(double v, int p, int emin, int emax) {
    if (v == 0 || !std::isfinite(v)) return v;
    int exp = 0;
    (void)std::frexp(v, &exp);              // |v| in [2^(exp-1), 2^exp)
    const int e = std::max(exp - 1, emin);  // binade exponent, clamped to the subnormal range
    const int quantum = e - (p - 1);        // the spacing of representable values there is 2^quantum
    const double scaled = std::ldexp(v, -quantum);  // exact: a power-of-two scaling within double range
    const double r = rne(scaled);           // |r| <= 2^p
    const double out = std::ldexp(r, quantum);
    // The largest finite value is (2^p - 1) * 2^(emax - p + 1); anything that rounded above it
    // (necessarily to 2^(emax+1)) overflows.
    if (std::fabs(out) >= std::ldexp(1.0, emax + 1)) return std::copysign(std::numeric_limits<double>::infinity(), v);
    return out;
}

inline float fl32(double v) { return static_cast<float>(round_to_format(v, 24, -126, 127)); }  // cast is exact

inline float add32(float a, float b) { return fl32(static_cast<double>(a) + static_cast<double>(b)); }
inline float sub32(float a, float b) { return fl32(static_cast<double>(a) - static_cast<double>(b)); }
inline float mul32(float a, float b) { return fl32(static_cast<double>(a) * static_cast<double>(b)); }
inline float div32(float a, float b) { return fl32(static_cast<double>(a) / static_cast<double>(b)); }
// A code times a binary32 value (the code has at most 9 bits: exact in double).
inline float mulq32(int32_t q, float s) { return fl32(static_cast<double>(q) * static_cast<double>(s)); }

// D1: clamp a binary32 result to [-FLT_MAX, FLT_MAX].
inline float sat(float v) {
    if (v > kFltMax) return kFltMax;
    if (v < -kFltMax) return -kFltMax;
    return v;
}

}  // namespace qtransit::reference::detail
