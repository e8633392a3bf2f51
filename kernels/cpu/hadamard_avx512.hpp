// The rotation of a rotated format (hadamard.hpp) for a CPU with AVX-512, included by codec.cpp for
// blocks of 16, 32, 64 or 128 elements: a block is R = n / 16 registers, and each butterfly stage is
// the same fl32 additions and subtractions of the same pairs as hadamard_stages, in the same stage
// order, so the two agree bit for bit (the decl_kernel and rotated tests compare the kernel with the
// reference on whichever path the machine takes):
//
// - stages h = 1, 2, 4, 8 inside a register: p = v with the lanes of each pair (j, j + h) swapped;
//   the lower lane of a pair takes fl32(v + p) = fl32(a + b), the upper fl32(p - v) = fl32(a - b);
// - stages h = 16, 32, 64 between registers: (a, b) -> (fl32(a + b), fl32(a - b)) lane by lane;
// - the random signs, hadamard_sign_words' Philox4x32-10 for eight blocks at once, in the low halves
//   of eight 64-bit lanes (vpmuludq multiplies low halves, as decl_fast.hpp's round_words_avx512).
#pragma once

#if defined(__x86_64__)
#include <immintrin.h>

#include <cstdint>

#include "qtransit/common/philox.hpp"
#include "qtransit/kernels/hadamard.hpp"

#define QT_AVX512_ROT __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl")))

// GCC 12's AVX-512 intrinsics start from _mm512_undefined_ps(), which -Wmaybe-uninitialized takes
// for a read of an uninitialized value (as in decl_fast.hpp).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace qtransit::kernels::fast {

// words[w][j] = hadamard_sign_words({seed, first + j step}, 0).v[w], j = 0..7: the signs of the
// first 128 elements of eight blocks whose first elements are step apart.
QT_AVX512_ROT inline void sign_words8_avx512(uint64_t seed, int64_t first, int64_t step, uint32_t words[4][8]) {
    using namespace qtransit::detail;
    const __m512i m0 = _mm512_set1_epi64(kPhiloxM0), m1 = _mm512_set1_epi64(kPhiloxM1);
    const __m512i g = _mm512_set_epi64(first + 7 * step, first + 6 * step, first + 5 * step, first + 4 * step,
                                       first + 3 * step, first + 2 * step, first + step, first);
    __m512i a = g;                          // c[0] = lo32(first)
    __m512i b = _mm512_srli_epi64(g, 32);   // c[1] = hi32(first)
    __m512i c = _mm512_setzero_si512();     // c[2] = 0: elements 0 .. 127
    __m512i d = _mm512_set1_epi64(kTagSigns);
    uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
    for (int r = 0; r < 10; ++r) {
        if (r > 0) {
            k0 += kPhiloxW0;
            k1 += kPhiloxW1;
        }
        const __m512i p0 = _mm512_mul_epu32(a, m0), p1 = _mm512_mul_epu32(c, m1);
        const __m512i na = _mm512_ternarylogic_epi64(_mm512_srli_epi64(p1, 32), b, _mm512_set1_epi64(k0), 0x96);
        const __m512i nc = _mm512_ternarylogic_epi64(_mm512_srli_epi64(p0, 32), d, _mm512_set1_epi64(k1), 0x96);
        a = na;
        b = p1;  // lo32 of the product in the low half
        c = nc;
        d = p0;
    }
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(words[0]), _mm512_cvtepi64_epi32(a));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(words[1]), _mm512_cvtepi64_epi32(b));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(words[2]), _mm512_cvtepi64_epi32(c));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(words[3]), _mm512_cvtepi64_epi32(d));
}

// One stage inside a register: the pairs (j, j + h) for the lanes whose bit h is clear.
template <int H>
QT_AVX512_ROT inline __m512 fwht_lane_stage(__m512 v) {
    __m512 p;
    __mmask16 upper;
    if constexpr (H == 1) {
        p = _mm512_permute_ps(v, 0xB1), upper = 0xAAAA;
    } else if constexpr (H == 2) {
        p = _mm512_permute_ps(v, 0x4E), upper = 0xCCCC;
    } else if constexpr (H == 4) {
        p = _mm512_shuffle_f32x4(v, v, 0xB1), upper = 0xF0F0;
    } else {
        p = _mm512_shuffle_f32x4(v, v, 0x4E), upper = 0xFF00;
    }
    return _mm512_mask_blend_ps(upper, _mm512_add_ps(v, p), _mm512_sub_ps(p, v));
}

// Every stage of a block of 16 R elements held in v[0..R), in hadamard_stages' order.
template <int R>
QT_AVX512_ROT inline void fwht_regs(__m512 (&v)[R]) {
    for (int q = 0; q < R; ++q) v[q] = fwht_lane_stage<1>(v[q]);
    for (int q = 0; q < R; ++q) v[q] = fwht_lane_stage<2>(v[q]);
    for (int q = 0; q < R; ++q) v[q] = fwht_lane_stage<4>(v[q]);
    for (int q = 0; q < R; ++q) v[q] = fwht_lane_stage<8>(v[q]);
    for (int h = 1; h < R; h *= 2)
        for (int r0 = 0; r0 < R; r0 += 2 * h)
            for (int r = r0; r < r0 + h; ++r) {
                const __m512 a = v[r], b = v[r + h];
                v[r] = _mm512_add_ps(a, b);
                v[r + h] = _mm512_sub_ps(a, b);
            }
}

// v[q] negated where the block's sign bits (words[.][j] of sign_words8_avx512) are set.
template <int R>
QT_AVX512_ROT inline void apply_signs_regs(__m512 (&v)[R], const uint32_t words[4][8], int j) {
    const __m512i sign = _mm512_set1_epi32(static_cast<int>(0x80000000u));
    for (int q = 0; q < R; ++q) {
        const __mmask16 m = static_cast<__mmask16>(words[q >> 1][j] >> ((q & 1) * 16));
        const __m512i bits = _mm512_castps_si512(v[q]);
        v[q] = _mm512_castsi512_ps(_mm512_mask_xor_epi32(bits, m, bits, sign));
    }
}

// Whether every lane of v[0..R) has |v| <= lim (false for a NaN).
template <int R>
QT_AVX512_ROT inline bool all_within(const __m512 (&v)[R], float lim) {
    const __m512 l = _mm512_set1_ps(lim);
    const __m512i magnitude = _mm512_set1_epi32(0x7fffffff);
    __mmask16 ok = 0xFFFF;
    for (int q = 0; q < R; ++q) {
        const __m512 a = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(v[q]), magnitude));
        ok &= _mm512_cmp_ps_mask(a, l, _CMP_LE_OQ);
    }
    return ok == 0xFFFF;
}

// Encode's rotation (hadamard_forward and rotate_range's tests) of the full blocks j = 0 .. count-1
// (count <= 8) of 16 R elements starting at x, into out. Per block, as rotate_range: a non-finite
// value leaves the block as it is (`propagate`: NaN); a rotation past hadamard_limit sets the
// block's bit in the returned mask (`propagate`: NaN).
template <int R>
QT_AVX512_ROT inline unsigned rotate8_avx512(const float* x, float* out, int count, bool signs, bool propagate,
                                             uint64_t seed, int64_t first) {
    constexpr int64_t n = 16 * R;
    uint32_t words[4][8];
    if (signs) sign_words8_avx512(seed, first, n, words);
    const float limit = hadamard_limit(n);
    const __m512 nan = _mm512_set1_ps(__builtin_nanf(""));
    unsigned over = 0;
    for (int j = 0; j < count; ++j) {
        __m512 v[R];
        for (int q = 0; q < R; ++q) v[q] = _mm512_loadu_ps(x + j * n + 16 * q);
        float* o = out + j * n;
        if (!all_within<R>(v, kFltMax)) {
            for (int q = 0; q < R; ++q) _mm512_storeu_ps(o + 16 * q, propagate ? nan : v[q]);
            continue;
        }
        if (signs) apply_signs_regs<R>(v, words, j);
        fwht_regs<R>(v);
        if (!all_within<R>(v, limit)) {
            over |= 1u << j;
            if (propagate)
                for (int q = 0; q < R; ++q) v[q] = nan;
        }
        for (int q = 0; q < R; ++q) _mm512_storeu_ps(o + 16 * q, v[q]);
    }
    return over;
}

// Decode's rotation back (hadamard_inverse) of the full blocks j = 0 .. count-1 (count <= 8) of
// 16 R elements at v, in place, but for the blocks whose scale is NaN (poisoned).
template <int R>
QT_AVX512_ROT inline void unrotate8_avx512(float* v0, const float* scales, int count, bool signs, uint64_t seed,
                                           int64_t first) {
    constexpr int64_t n = 16 * R;
    uint32_t words[4][8];
    if (signs) sign_words8_avx512(seed, first, n, words);
    const __m512 inv = _mm512_set1_ps(bits_f32(static_cast<uint32_t>(127 - hadamard_log2(n)) << 23));
    for (int j = 0; j < count; ++j) {
        if (scales[j] != scales[j]) continue;
        float* o = v0 + j * n;
        __m512 v[R];
        for (int q = 0; q < R; ++q) v[q] = _mm512_loadu_ps(o + 16 * q);
        fwht_regs<R>(v);
        for (int q = 0; q < R; ++q) v[q] = _mm512_mul_ps(v[q], inv);
        if (signs) apply_signs_regs<R>(v, words, j);
        for (int q = 0; q < R; ++q) _mm512_storeu_ps(o + 16 * q, v[q]);
    }
}

}  // namespace qtransit::kernels::fast

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#endif
