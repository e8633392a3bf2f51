// IEEE binary16 conversions by integer arithmetic, identical on host and device, independent of
// the compiler's _Float16/__half support: round-to-nearest-even, subnormals kept, overflow to ±inf.
#pragma once

#include <cstdint>
#include <cstring>

#include "qtransit/common/hd.hpp"

namespace qtransit::kernels {

QT_HD uint32_t f32_bits(float f) {
#if QT_DEVICE_CODE && defined(__CUDA_ARCH__)
    return __float_as_uint(f);
#else
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
#endif
}

QT_HD float bits_f32(uint32_t u) {
#if QT_DEVICE_CODE && defined(__CUDA_ARCH__)
    return __uint_as_float(u);
#else
    float f;
    std::memcpy(&f, &u, 4);
    return f;
#endif
}

// binary32 -> binary16 bits, RNE. NaN stays a quiet NaN with the sign kept.
QT_HD uint16_t f32_to_f16_bits(float f) {
    const uint32_t x = f32_bits(f);
    const uint32_t sign = (x >> 16) & 0x8000u;
    const uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);
    // 65520 = 0x477ff000 is the midpoint between 65504 (max half) and 65536 (2^16, not
    // representable): it and everything above round to infinity under RNE.
    if (ax >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);
    if (ax >= 0x38800000u) {                      // >= 2^-14: a normal half
        uint32_t r = ax - 0x38000000u;            // rebias the exponent from 127 to 15
        r += 0xfffu + ((r >> 13) & 1u);           // RNE on the 13 dropped bits
        return static_cast<uint16_t>(sign | (r >> 13));
    }
    // Subnormal half (or zero): the result counts units of 2^-24.
    const uint32_t e = ax >> 23;
    const uint32_t m = (ax & 0x7fffffu) | (e ? 0x800000u : 0u);
    const uint32_t shift = 126u - e;              // value = m * 2^(e-150) = (m >> shift) units
    if (e == 0 || shift > 24u) return static_cast<uint16_t>(sign);
    uint32_t q = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (q & 1u))) ++q;   // may carry into the smallest normal: right
    return static_cast<uint16_t>(sign | q);
}

// binary16 bits -> binary32 (exact).
QT_HD float f16_bits_to_f32(uint16_t h) {
    const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    const uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0x1fu) return bits_f32(sign | 0x7f800000u | (m << 13));
    if (e != 0) return bits_f32(sign | ((e + 112u) << 23) | (m << 13));
    if (m == 0) return bits_f32(sign);
    // Subnormal half: m * 2^-24, exact in binary32 (normalise the mantissa).
    uint32_t shift = 0, mm = m;
    while (!(mm & 0x400u)) { mm <<= 1; ++shift; }
    return bits_f32(sign | ((113u - shift) << 23) | ((mm & 0x3ffu) << 13));
}

// fl16(v): v rounded to binary16 and widened back.
QT_HD float round_f16(float v) { return f16_bits_to_f32(f32_to_f16_bits(v)); }

// binary32 -> bfloat16 bits (the upper half of a binary32), RNE on the 16 dropped bits: subnormals
// kept (bfloat16 has binary32's exponent range, so its subnormals are binary32's with 7 fraction
// bits), overflow past the largest bfloat16 to ±inf by the same carry, NaN a quiet NaN, sign kept.
QT_HD uint16_t f32_to_bf16_bits(float f) {
    const uint32_t x = f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x0040u);
    return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}
QT_HD float bf16_bits_to_f32(uint16_t h) { return bits_f32(static_cast<uint32_t>(h) << 16); }
QT_HD float round_bf16(float v) { return bf16_bits_to_f32(f32_to_bf16_bits(v)); }

}  // namespace qtransit::kernels
