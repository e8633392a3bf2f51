// Philox4x32-10 (Salmon et al., SC'11; Random123), exactly as docs/INPUTS.md section 1 defines it.
// Shared input infrastructure: the kernels' counter-based inputs (kernels/inputs.hpp) and stochastic
// rounding's random words (kernels/decl_math.hpp), and the reference's own stochastic rounding
// (reference/src/decl.cpp), which must not include anything of kernels (ARCHITECTURE.md: the
// reference's independence is what makes a bit-exact agreement mean something). Header-only and
// __host__ __device__, so the CPU, the GPU and the reference draw the same words.
#pragma once

#include <cstdint>

#include "qtransit/common/hd.hpp"

namespace qtransit {

struct Philox4x32 {
    uint32_t v[4];
};

namespace detail {

// Random123's constants (philox.h): round multipliers and the Weyl key increments (golden ratio and
// sqrt(3) - 1 in 0.32 fixed point).
inline constexpr uint32_t kPhiloxM0 = 0xD2511F53u;
inline constexpr uint32_t kPhiloxM1 = 0xCD9E8D57u;
inline constexpr uint32_t kPhiloxW0 = 0x9E3779B9u;
inline constexpr uint32_t kPhiloxW1 = 0xBB67AE85u;

QT_HD uint32_t mulhilo32(uint32_t a, uint32_t b, uint32_t* hi) {
#if defined(__CUDA_ARCH__)
    *hi = __umulhi(a, b);
    return a * b;
#else
    const uint64_t p = static_cast<uint64_t>(a) * b;
    *hi = static_cast<uint32_t>(p >> 32);
    return static_cast<uint32_t>(p);
#endif
}

QT_HD void philox_round(uint32_t c[4], uint32_t k0, uint32_t k1) {
    uint32_t hi0, hi1;
    const uint32_t lo0 = mulhilo32(kPhiloxM0, c[0], &hi0);
    const uint32_t lo1 = mulhilo32(kPhiloxM1, c[2], &hi1);
    const uint32_t n0 = hi1 ^ c[1] ^ k0, n2 = hi0 ^ c[3] ^ k1;
    c[0] = n0;
    c[1] = lo1;
    c[2] = n2;
    c[3] = lo0;
}

}  // namespace detail

// Philox4x32-10 of counter `ctr` under the key (key0, key1).
QT_HD Philox4x32 philox4x32_10(Philox4x32 ctr, uint32_t key0, uint32_t key1) {
    uint32_t c[4] = {ctr.v[0], ctr.v[1], ctr.v[2], ctr.v[3]};
    for (int round = 0; round < 10; ++round) {
        if (round > 0) {  // the key is bumped between rounds (9 bumps for 10 rounds)
            key0 += detail::kPhiloxW0;
            key1 += detail::kPhiloxW1;
        }
        detail::philox_round(c, key0, key1);
    }
    return Philox4x32{{c[0], c[1], c[2], c[3]}};
}

}  // namespace qtransit
