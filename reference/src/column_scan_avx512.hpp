// The AVX-512 loop of the column scan with the exact int64 sums (column_scan.cpp), as a template
// whose loop takes a caller's per-row work (internal to qt_reference: column_scan.cpp and
// checker.cpp include it). The loop is x86-64 only, and the caller checks column_simd() before
// calling it; the bit constants below are every build's.
#pragma once

#include <cstdint>

namespace qtransit::reference::detail::scan_impl {
// |x| as bits, and the bits of +inf (every loop of column_scan.cpp, portable or not).
constexpr uint32_t kAbs = 0x7FFFFFFFu, kInfBits = 0x7F800000u;
}  // namespace qtransit::reference::detail::scan_impl

#if defined(__x86_64__)

#include <immintrin.h>

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "qtransit/reference/checker.hpp"

#define QT_REF_AVX512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl")))

namespace qtransit::reference::detail::scan_impl {

#if defined(__GNUC__) && !defined(__clang__)
// GCC 12 warns inside its own AVX-512 headers (_mm512_undefined_epi32's self-initialisation,
// GCC PR 105593); nothing here is uninitialised.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

// 32 columns at a time, their sums in four registers over every row. x * up is exact (a power of
// two, and PathChecker::add's grid keeps it an integer below 2^62); the truncating conversion is
// static_cast<int64_t>'s.
QT_REF_AVX512 inline __attribute__((always_inline)) __m512i scaled(__m256 h, __m512d up) {
    return _mm512_cvttpd_epi64(_mm512_mul_pd(_mm512_cvtps_pd(h), up));
}

// The lane maxima of 16 rows (m[16 r + i]: row r's lane i, as float bits) reduced to each row's
// maximum, in row order: a transposing tree (quarters, then halves of quarters, then pairs of
// lanes) of 48 shuffles and maxima for the 16 rows, instead of a horizontal reduction of about ten
// dependent operations per row.
QT_REF_AVX512 inline __attribute__((always_inline)) __m512i row_maxima16(const uint32_t* m) {
    __m512i v[16];
    for (int r = 0; r < 16; ++r) v[r] = _mm512_load_si512(m + 16 * r);
    __m512i p[8], q[4], h[2];
    for (int i = 0; i < 8; ++i)  // quarters 0-1: row 2i's maxima of quarters 0|2 and 1|3; quarters 2-3: row 2i+1's
        p[i] = _mm512_max_epu32(_mm512_shuffle_i32x4(v[2 * i], v[2 * i + 1], 0x44),
                                _mm512_shuffle_i32x4(v[2 * i], v[2 * i + 1], 0xEE));
    for (int i = 0; i < 4; ++i)  // quarter j: row 4i + j's four lane maxima
        q[i] = _mm512_max_epu32(_mm512_shuffle_i32x4(p[2 * i], p[2 * i + 1], 0x88),
                                _mm512_shuffle_i32x4(p[2 * i], p[2 * i + 1], 0xDD));
    for (int i = 0; i < 2; ++i) {  // quarter j: rows 8i + j (lanes 0, 1) and 8i + 4 + j (lanes 2, 3), two maxima each
        const __m512i m2 = _mm512_max_epu32(_mm512_unpacklo_epi64(q[2 * i], q[2 * i + 1]),
                                            _mm512_unpackhi_epi64(q[2 * i], q[2 * i + 1]));
        h[i] = _mm512_max_epu32(m2, _mm512_shuffle_epi32(m2, _MM_PERM_CDAB));  // each pair's maximum, twice
    }
    // quarter j: rows j, 8 + j, 4 + j, 12 + j; then into row order.
    const __m512i s = _mm512_mask_blend_epi32(0xAAAA, h[0], h[1]);
    const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 2, 6, 10, 14, 1, 5, 9, 13, 3, 7, 11, 15);
    return _mm512_permutexvar_epi32(order, s);
}

// The scan (each row's absmax, the column's largest |x| bits and smallest non-zero |x|) and the
// int64 sums of x * up in one pass, for rows of at most 32 values (the row is two vectors, its sums
// four registers). kFull: rows of exactly 32, unmasked loads. kFloatUp: up is a binary32 (2^-126 <=
// up <= 2^127), and x * up is taken in binary32 over 16 lanes and converted to int64 from there
// (exact when the grid fits: an integer below 2^62; garbage, and discarded, when it does not),
// instead of widening to binary64 first. A row's lane maxima are kept as floats (max_ps passes a NaN
// over) and reduced 16 rows at a time (row_maxima16).
// each(r, ready) is called once per row r, after the row's work, with ready = how many rows' absmax
// are written (a multiple of 16 until the loop ends). It is the caller's independent work, inlined
// into the loop so that the core runs it on the ports this loop leaves idle (PathChecker::add
// prepares its events there); column_scan.cpp passes none.
template <bool kFull, bool kFloatUp, class Each>
QT_REF_AVX512 ColumnScan scan_add_scaled_avx512(const float* x, size_t rows, size_t n, double* absmax, double up,
                                                int64_t* t, Each& each) {
    const __m512i abs = _mm512_set1_epi32(static_cast<int>(kAbs)), one = _mm512_set1_epi32(1);
    const __m512d vup = _mm512_set1_pd(up);
    const __m512 vupf = _mm512_set1_ps(static_cast<float>(up));
    __m512i vtop = _mm512_setzero_si512(), vlo1 = _mm512_set1_epi32(-1), vall = _mm512_setzero_si512();
    const __mmask16 m0 = static_cast<__mmask16>(n >= 16 ? 0xFFFFu : (1u << n) - 1u);
    const __mmask16 m1 = static_cast<__mmask16>(n >= 32 ? 0xFFFFu : n > 16 ? (1u << (n - 16)) - 1u : 0u);
    const __mmask8 k0 = static_cast<__mmask8>(m0), k1 = static_cast<__mmask8>(m0 >> 8);
    const __mmask8 k2 = static_cast<__mmask8>(m1), k3 = static_cast<__mmask8>(m1 >> 8);
    __m512i a0 = _mm512_maskz_loadu_epi64(k0, t), a1 = _mm512_maskz_loadu_epi64(k1, t + 8);
    __m512i a2 = _mm512_maskz_loadu_epi64(k2, t + 16), a3 = _mm512_maskz_loadu_epi64(k3, t + 24);
    alignas(64) uint32_t lanes[16 * 16];  // the last 16 rows' lane maxima
    Each work = each;  // a local copy, its state in registers (see above); written back at the end
    for (size_t r = 0; r < rows; ++r) {
        const float* xr = x + r * n;
        __m512 v, w;
        if constexpr (kFull) {
            v = _mm512_loadu_ps(xr);
            w = _mm512_loadu_ps(xr + 16);
        } else {
            v = _mm512_maskz_loadu_ps(m0, xr);
            w = _mm512_maskz_loadu_ps(m1, xr + 16);
        }
        const __m512i bv = _mm512_and_si512(_mm512_castps_si512(v), abs), bw = _mm512_and_si512(_mm512_castps_si512(w), abs);
        // Lanes past the row load 0: neutral for every accumulator (0 - 1 wraps to the top).
        vtop = _mm512_max_epu32(vtop, _mm512_max_epu32(bv, bw));
        vlo1 = _mm512_min_epu32(vlo1, _mm512_min_epu32(_mm512_sub_epi32(bv, one), _mm512_sub_epi32(bw, one)));
        // max_ps(a, b) returns b when either is a NaN: a NaN is passed over; for |x| (no -0, no
        // NaN left) the larger float is the larger bits.
        const __m512 vnum = _mm512_max_ps(_mm512_castsi512_ps(bw), _mm512_max_ps(_mm512_castsi512_ps(bv), _mm512_setzero_ps()));
        _mm512_store_si512(lanes + 16 * (r & 15), _mm512_castps_si512(vnum));
        if constexpr (kFloatUp) {
            const __m512 pv = _mm512_mul_ps(v, vupf), pw = _mm512_mul_ps(w, vupf);
            a0 = _mm512_add_epi64(a0, _mm512_cvttps_epi64(_mm512_castps512_ps256(pv)));
            a1 = _mm512_add_epi64(a1, _mm512_cvttps_epi64(_mm512_extractf32x8_ps(pv, 1)));
            a2 = _mm512_add_epi64(a2, _mm512_cvttps_epi64(_mm512_castps512_ps256(pw)));
            a3 = _mm512_add_epi64(a3, _mm512_cvttps_epi64(_mm512_extractf32x8_ps(pw, 1)));
        } else if constexpr (kFull) {
            a0 = _mm512_add_epi64(a0, scaled(_mm256_loadu_ps(xr), vup));
            a1 = _mm512_add_epi64(a1, scaled(_mm256_loadu_ps(xr + 8), vup));
            a2 = _mm512_add_epi64(a2, scaled(_mm256_loadu_ps(xr + 16), vup));
            a3 = _mm512_add_epi64(a3, scaled(_mm256_loadu_ps(xr + 24), vup));
        } else {
            a0 = _mm512_add_epi64(a0, scaled(_mm512_castps512_ps256(v), vup));
            a1 = _mm512_add_epi64(a1, scaled(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)), vup));
            a2 = _mm512_add_epi64(a2, scaled(_mm512_castps512_ps256(w), vup));
            a3 = _mm512_add_epi64(a3, scaled(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(w), 1)), vup));
        }
        if ((r & 15) == 15) {
            const __m512i m = row_maxima16(lanes);
            vall = _mm512_max_epu32(vall, m);
            double* out = absmax + (r - 15);
            _mm512_storeu_pd(out, _mm512_cvtps_pd(_mm512_castps512_ps256(_mm512_castsi512_ps(m))));
            _mm512_storeu_pd(out + 8, _mm512_cvtps_pd(_mm512_extractf32x8_ps(_mm512_castsi512_ps(m), 1)));
        }
        work(r, (r + 1) & ~size_t{15});
    }
    for (size_t r = rows & ~size_t{15}; r < rows; ++r) {  // the last rows, fewer than 16, one at a time
        const __m512i vnum = _mm512_load_si512(lanes + 16 * (r & 15));
        const uint32_t num = static_cast<uint32_t>(_mm512_reduce_max_epu32(vnum));
        absmax[r] = static_cast<double>(std::bit_cast<float>(num));
        vall = _mm512_max_epu32(vall, vnum);
    }
    each = work;
    _mm512_mask_storeu_epi64(t, k0, a0);
    _mm512_mask_storeu_epi64(t + 8, k1, a1);
    _mm512_mask_storeu_epi64(t + 16, k2, a2);
    _mm512_mask_storeu_epi64(t + 24, k3, a3);
    const uint32_t top = static_cast<uint32_t>(_mm512_reduce_max_epu32(vtop));
    const uint32_t lo1 = static_cast<uint32_t>(_mm512_reduce_min_epu32(vlo1));
    const uint32_t all_num = static_cast<uint32_t>(_mm512_reduce_max_epu32(vall));
    return {top, all_num, lo1 < kInfBits ? lo1 + 1u : kInfBits};
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

// scan_add_scaled (checker.hpp) with each(r, ready) in its loop, where the AVX-512 loop applies:
// column_simd() and n <= 32 (the caller checks).
template <class Each>
ColumnScan scan_add_scaled_each(const float* x, size_t rows, size_t n, double* absmax, int grid, int64_t* t,
                                bool& summed, Each& each) {
    const double up = std::ldexp(1.0, -grid);
    const bool fup = grid >= -127 && grid <= 126;  // up = 2^-grid is a normal binary32
    const ColumnScan cs = n == 32 ? (fup ? scan_add_scaled_avx512<true, true>(x, rows, n, absmax, up, t, each)
                                         : scan_add_scaled_avx512<true, false>(x, rows, n, absmax, up, t, each))
                                  : (fup ? scan_add_scaled_avx512<false, true>(x, rows, n, absmax, up, t, each)
                                         : scan_add_scaled_avx512<false, false>(x, rows, n, absmax, up, t, each));
    summed = grid_fits(cs, rows, grid);
    return cs;
}

}  // namespace qtransit::reference::detail::scan_impl

#endif  // __x86_64__
