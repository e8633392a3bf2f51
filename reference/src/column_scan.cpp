// The two passes of PathChecker::add over a column's contribution rows (checker.cpp): the scan
// (each row's absmax, the column's largest |x| bits and smallest non-zero |x|) and the exact int64
// sum on the grid 2^e_min. Both are integer arithmetic (bits compared, exact products by powers of
// two, exact conversions), so the AVX-512 loops and the portable ones give the same results: unit
// tests compare both with plain loops (CheckerColumn in properties/reference/checker_test.cpp).
//
// scan_add_scaled does both in one pass (rows of at most 32 values) on a grid guessed before the
// scan, and says afterwards whether the guess held (grid_fits); PathChecker::add guesses from the
// previous column and takes the second pass only when it did not.
//
// Why AVX-512 by hand: a column's rows are short (32 values at the default block), and GCC's
// vectorized loop reduces its three accumulators horizontally at the end of every row, where only
// one (the row's absmax) is needed per row; the int64 sums keep 32 columns' accumulators in four
// registers across all rows instead of a load and a store per row.
#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>

#include "qtransit/reference/checker.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
#define QT_REF_AVX512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl")))
#endif

namespace qtransit::reference::detail {

namespace {

// The portable loops in AVX2 and baseline builds, picked at load time.
#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__)
#define QT_REF_MULTIVERSION __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define QT_REF_MULTIVERSION
#endif

constexpr uint32_t kAbs = 0x7FFFFFFFu, kInfBits = 0x7F800000u;

// The largest |x| bits of a number (NaNs passed over) in one row, and the column's running top (inf
// and NaN above every finite) and smallest b - 1 (0 wraps to the top: the smallest non-zero b).
// Written branch-free (a select in the max defeats GCC 12's vectorizer).
QT_REF_MULTIVERSION ColumnScan scan_portable(const float* x, size_t rows, size_t n, double* absmax) {
    uint32_t top = 0, lo1 = 0xFFFFFFFFu, all_num = 0;
    for (size_t r = 0; r < rows; ++r) {
        const float* xr = x + r * n;
        uint32_t num = 0;
        for (size_t i = 0; i < n; ++i) {
            const uint32_t b = std::bit_cast<uint32_t>(xr[i]) & kAbs;
            top = std::max(top, b);
            num = std::max(num, b & (0u - static_cast<uint32_t>(b <= kInfBits)));
            lo1 = std::min(lo1, b - 1u);
        }
        absmax[r] = static_cast<double>(std::bit_cast<float>(num));
        all_num = std::max(all_num, num);
    }
    return {top, all_num, lo1 < kInfBits ? lo1 + 1u : kInfBits};
}

QT_REF_MULTIVERSION void add_scaled_portable(const float* x, size_t rows, size_t n, double up, int64_t* t) {
    for (size_t r = 0; r < rows; ++r)
        for (size_t i = 0; i < n; ++i) t[i] += static_cast<int64_t>(static_cast<double>(x[r * n + i]) * up);
}

#if defined(__x86_64__)
#if defined(__GNUC__) && !defined(__clang__)
// GCC 12 warns inside its own AVX-512 headers (_mm512_undefined_epi32's self-initialisation,
// GCC PR 105593); nothing here is uninitialised.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

QT_REF_AVX512 inline __attribute__((always_inline)) void scan_step(__m512i b, __m512i inf, __m512i one, __m512i& vtop,
                                                                    __m512i& vlo1, __m512i& vnum) {
    vtop = _mm512_max_epu32(vtop, b);
    vlo1 = _mm512_min_epu32(vlo1, _mm512_sub_epi32(b, one));
    vnum = _mm512_mask_max_epu32(vnum, _mm512_cmple_epu32_mask(b, inf), vnum, b);
}

QT_REF_AVX512 ColumnScan scan_avx512(const float* x, size_t rows, size_t n, double* absmax) {
    const __m512i abs = _mm512_set1_epi32(static_cast<int>(kAbs)), inf = _mm512_set1_epi32(static_cast<int>(kInfBits));
    const __m512i one = _mm512_set1_epi32(1);
    __m512i vtop = _mm512_setzero_si512(), vlo1 = _mm512_set1_epi32(-1), vall = _mm512_setzero_si512();
    const size_t full = n / 16 * 16;
    const __mmask16 tail = static_cast<__mmask16>((1u << (n - full)) - 1u);
    for (size_t r = 0; r < rows; ++r) {
        const float* xr = x + r * n;
        __m512i vnum = _mm512_setzero_si512();
        for (size_t i = 0; i < full; i += 16)
            scan_step(_mm512_and_si512(_mm512_loadu_si512(xr + i), abs), inf, one, vtop, vlo1, vnum);
        // Lanes past the row load 0: neutral for every accumulator (0 - 1 wraps to the top).
        if (tail != 0) scan_step(_mm512_and_si512(_mm512_maskz_loadu_epi32(tail, xr + full), abs), inf, one, vtop, vlo1, vnum);
        const uint32_t num = static_cast<uint32_t>(_mm512_reduce_max_epu32(vnum));
        absmax[r] = static_cast<double>(std::bit_cast<float>(num));
        vall = _mm512_max_epu32(vall, vnum);
    }
    const uint32_t top = static_cast<uint32_t>(_mm512_reduce_max_epu32(vtop));
    const uint32_t lo1 = static_cast<uint32_t>(_mm512_reduce_min_epu32(vlo1));
    const uint32_t all_num = static_cast<uint32_t>(_mm512_reduce_max_epu32(vall));
    return {top, all_num, lo1 < kInfBits ? lo1 + 1u : kInfBits};
}

// 32 columns at a time, their sums in four registers over every row. x * up is exact (a power of
// two, and PathChecker::add's grid keeps it an integer below 2^62); the truncating conversion is
// static_cast<int64_t>'s.
QT_REF_AVX512 inline __attribute__((always_inline)) __m512i scaled(__m256 h, __m512d up) {
    return _mm512_cvttpd_epi64(_mm512_mul_pd(_mm512_cvtps_pd(h), up));
}

QT_REF_AVX512 void add_scaled_avx512(const float* x, size_t rows, size_t n, double up, int64_t* t) {
    const __m512d vup = _mm512_set1_pd(up);
    for (size_t i0 = 0; i0 < n; i0 += 32) {
        const size_t m = std::min<size_t>(32, n - i0);
        const __mmask16 m0 = static_cast<__mmask16>(m >= 16 ? 0xFFFFu : (1u << m) - 1u);
        const __mmask16 m1 = static_cast<__mmask16>(m >= 32 ? 0xFFFFu : m > 16 ? (1u << (m - 16)) - 1u : 0u);
        const __mmask8 k0 = static_cast<__mmask8>(m0), k1 = static_cast<__mmask8>(m0 >> 8);
        const __mmask8 k2 = static_cast<__mmask8>(m1), k3 = static_cast<__mmask8>(m1 >> 8);
        __m512i a0 = _mm512_maskz_loadu_epi64(k0, t + i0), a1 = _mm512_maskz_loadu_epi64(k1, t + i0 + 8);
        __m512i a2 = _mm512_maskz_loadu_epi64(k2, t + i0 + 16), a3 = _mm512_maskz_loadu_epi64(k3, t + i0 + 24);
        for (size_t r = 0; r < rows; ++r) {
            const float* xr = x + r * n + i0;
            const __m512 v = _mm512_maskz_loadu_ps(m0, xr), w = _mm512_maskz_loadu_ps(m1, xr + 16);
            a0 = _mm512_add_epi64(a0, scaled(_mm512_castps512_ps256(v), vup));
            a1 = _mm512_add_epi64(a1, scaled(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)), vup));
            a2 = _mm512_add_epi64(a2, scaled(_mm512_castps512_ps256(w), vup));
            a3 = _mm512_add_epi64(a3, scaled(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(w), 1)), vup));
        }
        _mm512_mask_storeu_epi64(t + i0, k0, a0);
        _mm512_mask_storeu_epi64(t + i0 + 8, k1, a1);
        _mm512_mask_storeu_epi64(t + i0 + 16, k2, a2);
        _mm512_mask_storeu_epi64(t + i0 + 24, k3, a3);
    }
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

// scan_avx512 and add_scaled_avx512 in one pass, for rows of at most 32 values (the row is two
// vectors, its sums four registers). kFull: rows of exactly 32, unmasked loads. kFloatUp: up is a
// binary32 (2^-126 <= up <= 2^127), and x * up is taken in binary32 over 16 lanes and converted to
// int64 from there (exact when the grid fits: an integer below 2^62; garbage, and discarded, when
// it does not), instead of widening to binary64 first. A row's lane maxima are kept as floats
// (max_ps passes a NaN over) and reduced 16 rows at a time (row_maxima16).
template <bool kFull, bool kFloatUp>
QT_REF_AVX512 ColumnScan scan_add_scaled_avx512(const float* x, size_t rows, size_t n, double* absmax, double up,
                                                int64_t* t) {
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
    }
    for (size_t r = rows & ~size_t{15}; r < rows; ++r) {  // the last rows, fewer than 16, one at a time
        const __m512i vnum = _mm512_load_si512(lanes + 16 * (r & 15));
        const uint32_t num = static_cast<uint32_t>(_mm512_reduce_max_epu32(vnum));
        absmax[r] = static_cast<double>(std::bit_cast<float>(num));
        vall = _mm512_max_epu32(vall, vnum);
    }
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
#endif

}  // namespace

bool column_simd() {
#if defined(__x86_64__)
    static const bool v = [] {
        __builtin_cpu_init();
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
    }();
    return v;
#else
    return false;
#endif
}

ColumnScan scan_column(const float* x, size_t rows, size_t n, double* absmax, bool simd) {
#if defined(__x86_64__)
    if (simd && column_simd()) return scan_avx512(x, rows, n, absmax);
#endif
    (void)simd;
    return scan_portable(x, rows, n, absmax);
}

void add_scaled_rows(const float* x, size_t rows, size_t n, double up, int64_t* t, bool simd) {
#if defined(__x86_64__)
    if (simd && column_simd()) return add_scaled_avx512(x, rows, n, up, t);
#endif
    (void)simd;
    add_scaled_portable(x, rows, n, up, t);
}

}  // namespace qtransit::reference::detail

namespace qtransit::reference::detail {

bool grid_fits(const ColumnScan& cs, size_t rows, int grid) {
    if (cs.top >= kInfBits) return false;  // an inf or a NaN
    if (cs.lo < kInfBits) {
        // The smallest ulp in the column is that of its smallest exponent: 2^(max(ef, 1) - 150).
        const int ef = static_cast<int>(cs.lo >> 23);
        if ((ef == 0 ? 1 : ef) - 150 < grid) return false;
    }
    if (cs.top_number == 0) return true;
    // max |x| < 2^ex, the least such ex (frexp's): a normal's exponent + 1, or from a subnormal's bits.
    const uint32_t et = cs.top_number >> 23;
    const int ex = et != 0 ? static_cast<int>(et) - 126 : static_cast<int>(std::bit_width(cs.top_number)) - 149;
    const int lr = static_cast<int>(std::bit_width(std::max<size_t>(rows, 1)));  // rows < 2^lr
    return ex + lr <= 62 + grid;
}

ColumnScan scan_add_scaled(const float* x, size_t rows, size_t n, double* absmax, int grid, int64_t* t, bool& summed,
                           bool simd) {
    const double up = std::ldexp(1.0, -grid);
#if defined(__x86_64__)
    if (simd && column_simd() && n <= 32) {
        const bool fup = grid >= -127 && grid <= 126;  // up = 2^-grid is a normal binary32
        const ColumnScan cs = n == 32 ? (fup ? scan_add_scaled_avx512<true, true>(x, rows, n, absmax, up, t)
                                             : scan_add_scaled_avx512<true, false>(x, rows, n, absmax, up, t))
                                      : (fup ? scan_add_scaled_avx512<false, true>(x, rows, n, absmax, up, t)
                                             : scan_add_scaled_avx512<false, false>(x, rows, n, absmax, up, t));
        summed = grid_fits(cs, rows, grid);
        return cs;
    }
#endif
    // The sums only where they are exact (a conversion out of int64's range is undefined in C++).
    const ColumnScan cs = scan_column(x, rows, n, absmax, simd);
    summed = grid_fits(cs, rows, grid);
    if (summed) add_scaled_rows(x, rows, n, up, t, simd);
    return cs;
}

}  // namespace qtransit::reference::detail
