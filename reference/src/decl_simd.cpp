// decl_at (checker.cpp) over a block, eight elements at a time with AVX-512F/DQ.
//
// Each lane takes decl_at's operations on its element in decl_at's order, each an IEEE binary64 (or,
// for fl32(x - lo), binary32) operation rounded to nearest, so every lane's result has decl_at's bits;
// PathChecker::add adds them to its a-posteriori sums as decl_at's loop did. decl_at's branches
// become selects: both sides are computed (neither can trap: no exceptions are enabled) and the one
// decl_at takes is kept. std::min and std::max are selects on `<`, which MINPD and MAXPD are with
// their operands in the right order (each use says which), NaNs and signed zeros included.
// CheckerDecl in properties/reference/checker_test.cpp compares the two for every declared built-in.
//
// Why by hand: GCC 12 does not vectorize decl_at's loop (its calls, the binade search's integer
// arithmetic on doubles' bits and add_up's branches), and in the default gate decl_at was 10% of the
// run, the largest function but PathChecker::add itself.
#include "decl_at.hpp"

#if defined(__x86_64__)

#include <immintrin.h>

#include <cfloat>
#include <cmath>
#include <cstdint>

#define QT_REF_AVX512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl")))

#if defined(__GNUC__) && !defined(__clang__)
// GCC 12 warns inside its own AVX-512 headers (_mm512_undefined_epi32's self-initialisation,
// GCC PR 105593); nothing here is uninitialised.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace qtransit::reference::detail {

namespace {

// checker.cpp's constants.
constexpr double kU = 0x1p-24;
constexpr double kFltMax = static_cast<double>(FLT_MAX);

// max(a, b) as std::max(a, b) = (a < b) ? b : a, which is MAXPD(b, a) = (b > a) ? b : a.
QT_REF_AVX512 inline __attribute__((always_inline)) __m512d max_of(__m512d a, __m512d b) { return _mm512_max_pd(b, a); }
// min(a, b) as std::min(a, b) = (b < a) ? b : a, which is MINPD(b, a).
QT_REF_AVX512 inline __attribute__((always_inline)) __m512d min_of(__m512d a, __m512d b) { return _mm512_min_pd(b, a); }

// checker.cpp's add_up on each lane: s = a + b, and the next double up when s is finite and
// TwoSum's residual is positive (0 -> the least subnormal, whatever its sign).
QT_REF_AVX512 inline __attribute__((always_inline)) __m512d add_up8(__m512d a, __m512d b) {
    const __m512d s = _mm512_add_pd(a, b);
    const __m512d bp = _mm512_sub_pd(s, a);
    const __m512d ap = _mm512_sub_pd(s, bp);
    const __m512d err = _mm512_add_pd(_mm512_sub_pd(a, ap), _mm512_sub_pd(b, bp));
    const __m512d zero = _mm512_setzero_pd();
    const __mmask8 finite = _mm512_cmp_pd_mask(_mm512_abs_pd(s), _mm512_set1_pd(HUGE_VAL), _CMP_LT_OQ);
    const __mmask8 up = _mm512_mask_cmp_pd_mask(finite, err, zero, _CMP_GT_OQ);
    const __mmask8 pos = _mm512_cmp_pd_mask(s, zero, _CMP_GT_OQ);
    const __mmask8 is0 = _mm512_cmp_pd_mask(s, zero, _CMP_EQ_OQ);
    const __m512i bits = _mm512_castpd_si512(s), one = _mm512_set1_epi64(1);
    __m512i next = _mm512_mask_add_epi64(_mm512_sub_epi64(bits, one), pos, bits, one);
    next = _mm512_mask_mov_epi64(next, is0, one);  // the least subnormal's bits
    return _mm512_mask_mov_pd(s, up, _mm512_castsi512_pd(next));
}

// -a, exactly (the sign bit flipped, as unary minus).
QT_REF_AVX512 inline __attribute__((always_inline)) __m512d neg8(__m512d a) { return _mm512_xor_pd(a, _mm512_set1_pd(-0.0)); }

// 2^j from its bits (pow2_double), j a normal double's exponent in each 64-bit lane.
QT_REF_AVX512 inline __attribute__((always_inline)) __m512d pow2_8(__m512i j) {
    return _mm512_castsi512_pd(_mm512_slli_epi64(_mm512_add_epi64(j, _mm512_set1_epi64(1023)), 52));
}

enum class Elem { kInt, kFloat, kTable };

template <Elem E, bool Offset>
QT_REF_AVX512 void add_block(const Decl& d, const DeclScale& c, const float* x, size_t n, float lo, double* acc) {
    const __m512d zero = _mm512_setzero_pd(), ku = _mm512_set1_pd(kU);
    const __m512d lo126 = _mm512_set1_pd(c.lo126), hi = _mm512_set1_pd(c.hi), tiny = _mm512_set1_pd(c.tiny);
    const __m512d ds = _mm512_set1_pd(c.ds), vmin = _mm512_set1_pd(c.vmin);
    const __m512d neg_vmax = _mm512_set1_pd(-c.vmax);
    const __m512d vabs = _mm512_set1_pd(c.vabs);
    const double half = c.nearest ? 0.5 : 1.0;
    // int: the step is the scale's; its (half) product is the same for every element.
    const __m512d half_step_int = _mm512_set1_pd(half * c.step_int), vhalf = _mm512_set1_pd(half);
    const __m512i e_ds = _mm512_set1_epi64(c.e_ds), jmin = _mm512_set1_epi64(1 - d.bias);
    const __m512i man = _mm512_set1_epi64(d.man_bits), exp_mask = _mm512_set1_epi64(0x7FF);
    const __m512i bias1023 = _mm512_set1_epi64(1023), one = _mm512_set1_epi64(1);
    const __m256 lo8 = _mm256_set1_ps(lo);
    const __m512d dlo = _mm512_set1_pd(static_cast<double>(lo));
    double table_s[kMaxTable];  // ds * table[i], as decl_at computes it
    if constexpr (E == Elem::kTable)
        for (int i = 0; i < d.table_size; ++i) table_s[i] = c.ds * d.table[i];
    const __m512d top_mag = _mm512_set1_pd(kFltMax * (1 - 0x1p-40)), tiny150 = _mm512_set1_pd(0x1p-150);
    const __m512d neg_fltmax = _mm512_set1_pd(-kFltMax);
    const __m512d one_ku = _mm512_set1_pd(1 + kU);

    for (size_t i = 0; i < n; i += 8) {
        const __mmask8 lanes = n - i >= 8 ? static_cast<__mmask8>(0xFF) : static_cast<__mmask8>((1u << (n - i)) - 1u);
        const __m256 xf = _mm256_maskz_loadu_ps(lanes, x + i);
        // w = fl32(x - lo) (binary32 RNE), dw = w, aw = |w|.
        const __m256 wf = Offset ? _mm256_sub_ps(xf, lo8) : xf;
        const __m512d dw = _mm512_cvtps_pd(wf), aw = _mm512_abs_pd(dw);
        // t = 0 when the division by the scale is exact, else u |w| + ds 2^-150.
        __m512d t = _mm512_add_pd(_mm512_mul_pd(ku, aw), tiny);
        if (c.pow2) {
            const __mmask8 exact = _mm512_cmp_pd_mask(dw, zero, _CMP_EQ_OQ) |
                                   (_mm512_cmp_pd_mask(aw, lo126, _CMP_GE_OQ) & _mm512_cmp_pd_mask(aw, hi, _CMP_LE_OQ));
            t = _mm512_mask_mov_pd(t, exact, zero);
        }
        __m512d sel;
        if constexpr (E == Elem::kTable) {
            // dist = min over i of |w - ds table[i]| (std::min(dist, v) = MINPD(v, dist)).
            __m512d dist = _mm512_set1_pd(HUGE_VAL);
            for (int k = 0; k < d.table_size; ++k)
                dist = min_of(dist, _mm512_abs_pd(_mm512_sub_pd(dw, _mm512_set1_pd(table_s[k]))));
            sel = _mm512_add_pd(dist, _mm512_add_pd(t, t));  // 2 t, exactly
        } else {
            __m512d half_step;
            if constexpr (E == Elem::kInt) {
                half_step = half_step_int;
            } else {
                // The binade j of the float step: m = max(|w| (1 + u), ds 2^-126), j = floor(log2 m)
                // - e_ds, one less when ds 2^j > m; the step ds 2^(max(j, 1 - bias) - M).
                const __m512d m = max_of(_mm512_mul_pd(aw, one_ku), lo126);
                __m512i j = _mm512_sub_epi64(
                    _mm512_sub_epi64(_mm512_and_si512(_mm512_srli_epi64(_mm512_castpd_si512(m), 52), exp_mask), bias1023),
                    e_ds);
                const __mmask8 over = _mm512_cmp_pd_mask(_mm512_mul_pd(ds, pow2_8(j)), m, _CMP_GT_OQ);
                j = _mm512_mask_sub_epi64(j, over, j, one);
                const __m512d step = _mm512_mul_pd(ds, pow2_8(_mm512_sub_epi64(_mm512_max_epi64(j, jmin), man)));
                half_step = _mm512_mul_pd(vhalf, step);
            }
            // The excesses over the range, rounded upwards. decl_at skips one it knows to be
            // negative (-1 in its place); here both are computed in every lane, and one so skipped is
            // at most 0 (decl_at's comment shows it), so the max with 0 below drops it either way.
            const __m512d top = add_up8(add_up8(dw, t), neg_vmax);
            const __m512d bot = add_up8(add_up8(vmin, neg8(dw)), t);
            // std::max({0, top, bot}): the first largest.
            const __m512d x_ex = max_of(max_of(zero, top), bot);
            sel = _mm512_add_pd(t, max_of(half_step, x_ex));
        }
        const __m512d y = min_of(_mm512_add_pd(aw, sel), vabs);
        const __m512d tdec =
            min_of(sel, max_of(_mm512_add_pd(_mm512_mul_pd(ku, y), tiny150), add_up8(y, neg_fltmax)));
        __m512d e;
        if constexpr (!Offset) {
            e = _mm512_add_pd(sel, tdec);
        } else {
            const __m512d dx = _mm512_cvtps_pd(xf);
            const __m512d tsub = _mm512_add_pd(_mm512_mul_pd(ku, _mm512_abs_pd(_mm512_sub_pd(dx, dlo))), tiny150);
            const __m512d ep = _mm512_add_pd(_mm512_add_pd(tsub, sel), tdec);
            const __m512d mag = _mm512_add_pd(_mm512_abs_pd(dx), ep);
            const __m512d small = _mm512_add_pd(ep, min_of(ep, _mm512_add_pd(_mm512_mul_pd(ku, mag), tiny150)));
            e = _mm512_mask_mov_pd(small, _mm512_cmp_pd_mask(mag, top_mag, _CMP_GE_OQ), _mm512_add_pd(ep, ep));
        }
        const __m512d a = _mm512_maskz_loadu_pd(lanes, acc + i);
        _mm512_mask_storeu_pd(acc + i, lanes, _mm512_add_pd(a, e));
    }
}

template <Elem E>
QT_REF_AVX512 void add_block_kind(const Decl& d, const DeclScale& c, const float* x, size_t n, float lo, double* acc) {
    if (d.offset_min) add_block<E, true>(d, c, x, n, lo, acc);
    else add_block<E, false>(d, c, x, n, lo, acc);
}

}  // namespace

void add_decl_at_avx512(const Decl& d, const DeclScale& c, const float* x, size_t n, float lo, double* acc) {
    if (c.zero) {  // decl_at is 0 for every element
        for (size_t i = 0; i < n; ++i) acc[i] += 0.0;
        return;
    }
    switch (d.elem) {
        case ElemType::kInt: add_block_kind<Elem::kInt>(d, c, x, n, lo, acc); break;
        case ElemType::kFloat: add_block_kind<Elem::kFloat>(d, c, x, n, lo, acc); break;
        case ElemType::kTable: add_block_kind<Elem::kTable>(d, c, x, n, lo, acc); break;
    }
}

}  // namespace qtransit::reference::detail

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

#endif  // __x86_64__
