// The two passes of PathChecker::add over a column's contribution rows (checker.cpp): the scan
// (each row's absmax, the column's largest |x| bits and smallest non-zero |x|) and the exact int64
// sum on the grid 2^e_min. Both are integer arithmetic (bits compared, exact products by powers of
// two, exact conversions), so the AVX-512 loops and the portable ones give the same results: unit
// tests compare both with plain loops (CheckerColumn in properties/reference/checker_test.cpp).
//
// scan_add_scaled does both in one pass (rows of at most 32 values) on a grid guessed before the
// scan, and says afterwards whether the guess held (grid_fits); PathChecker::add guesses from the
// previous column and takes the second pass only when it did not. That one-pass AVX-512 loop is a
// template in column_scan_avx512.hpp, so that PathChecker::add can run its own per-row work in it.
//
// Why AVX-512 by hand: a column's rows are short (32 values at the default block), and GCC's
// vectorized loop reduces its three accumulators horizontally at the end of every row, where only
// one (the row's absmax) is needed per row; the int64 sums keep 32 columns' accumulators in four
// registers across all rows instead of a load and a store per row.
#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>

#include "qtransit/common/cpu.hpp"
#include "qtransit/reference/checker.hpp"

#include "column_scan_avx512.hpp"

namespace qtransit::reference::detail {

namespace {

// The portable loops in AVX2 and baseline builds, picked at load time.
#if defined(__x86_64__) && !defined(QT_UNDER_ASAN)
#define QT_REF_MULTIVERSION __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define QT_REF_MULTIVERSION
#endif

using scan_impl::kAbs;
using scan_impl::kInfBits;
#if defined(__x86_64__)
using scan_impl::scaled;
#endif

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

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#endif

}  // namespace

bool column_simd() { return cpu_avx512(); }

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
#if defined(__x86_64__)
    if (simd && column_simd() && n <= 32) {
        auto none = [](size_t, size_t) {};
        return scan_impl::scan_add_scaled_each(x, rows, n, absmax, grid, t, summed, none);
    }
#endif
    // The sums only where they are exact (a conversion out of int64's range is undefined in C++).
    const ColumnScan cs = scan_column(x, rows, n, absmax, simd);
    summed = grid_fits(cs, rows, grid);
    if (summed) add_scaled_rows(x, rows, n, std::ldexp(1.0, -grid), t, simd);
    return cs;
}

}  // namespace qtransit::reference::detail
