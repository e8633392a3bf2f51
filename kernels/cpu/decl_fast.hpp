// CPU-only fast loops of the declared formats (docs/FORMATS.md), included by codec.cpp. They compute
// the same bits as the shared element arithmetic of decl_math.hpp (which they call where they can:
// float_code, int_code, decl_scale_t, decl_value) and differ only in how the work is laid out:
//
// - the quotient v = x / s is a multiplication by 1/s when s is a power of two of an e8m0 scale
//   (or the 1 of scale `none`): 1/s = 2^-e is exact for e >= -127, and x * 2^-e and x / 2^e are
//   the correctly rounded values of the same real number, so they are the same binary32;
// - codes are computed 32 at a time into int32 lanes (compile-time trip counts the compiler
//   vectorizes at full width), then packed straight to the wire;
// - a table element (<= 16 values) compares with binary32 thresholds: for a binary32 v and a
//   binary64 midpoint m, v > m exactly when v > RD32(m), the largest binary32 <= m; a tie v == m
//   needs m to be a binary32, and its rounding (even, away) is a per-midpoint 0/1 decided once per
//   call;
// - decoding computes a float or int element's value from its code's bits; 6-bit codes are unpacked
//   eight at a time in a 64-bit word;
// - stochastic rounding draws the words of many elements per call, each Philox call's four words to
//   four consecutive elements, and with AVX-512 the rounds on 32 counters (128 elements) at a time
//   (round_words below);
// - with AVX-512 (the AVX-512 helpers, called from codec.cpp's functions compiled for it): table
//   codes by a binary search in registers; packing and decoding without staging buffers for 8 and
//   4 bits and every lsb-first width (codes unpacked in registers, then looked up in a 64-entry
//   table up to 6 bits, or computed as raw_value does).
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "qtransit/common/cpu.hpp"
#include "qtransit/kernels/decl_math.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace qtransit::kernels::fast {

// Elements per inner step: one MX block; every packing width puts 32 codes in whole bytes.
inline constexpr int64_t kStep = 32;

// ---- the plan of one call ---------------------------------------------------------------------------
struct TablePlan {
    float thr[16];  // thr[j] = RD32(mid[j]), +inf past the last midpoint: the code is #{j : v > thr[j]}
    float tie[16];  // mid[j] where it is a binary32 and a tie there goes to j + 1; NaN otherwise
    bool ties = false;
};

struct EncodePlan {
    bool fast = false;  // the loops below apply (else the generic element loop)
    bool mul = false;   // the quotient by the exact reciprocal (power-of-two and `none` scales), or a product
    bool amax_mul = false;  // ... by the block's multiplier decl_multiplier(a) (the scales that multiply)
    FloatGrid fg{};
    IntGrid ig{};
    TablePlan tp{};
};

inline EncodePlan encode_plan(const Decl& d) {
    EncodePlan p;
    if (d.offset_min) return p;
    if (d.elem == ElemType::kTable && d.table_size > 16) return p;
    p.fast = true;
    p.amax_mul = multiplies(d.scale);
    p.mul = is_pow2_scale(d.scale) || d.scale == ScaleType::kNone || p.amax_mul;
    if (d.elem == ElemType::kFloat) p.fg = float_grid(d);
    if (d.elem == ElemType::kInt) p.ig = int_grid(d);
    if (d.elem == ElemType::kTable) {
        const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
        for (int j = 0; j < 16; ++j) {
            p.tp.thr[j] = inf;
            p.tp.tie[j] = nan;
            if (j >= d.table_size - 1) continue;
            const double m = d.mid[j];
            float f = static_cast<float>(m);
            if (static_cast<double>(f) > m) f = std::nextafter(f, -inf);
            p.tp.thr[j] = f;
            if (static_cast<double>(f) != m) continue;  // never a tie: no binary32 equals m
            bool up = false;  // decl_code_t's tie rules
            if (d.rounding == Rounding::kNearestEven) up = (j & 1) != 0;
            if (d.rounding == Rounding::kNearestAway) up = !(std::fabs(d.table[j]) > std::fabs(d.table[j + 1]));
            if (up) {
                p.tp.tie[j] = f;
                p.tp.ties = true;
            }
        }
    }
    return p;
}

// ---- AVX-512 helpers ----------------------------------------------------------------------------
// Called only from the functions compiled for AVX-512 (codec.cpp, kAvx = true): plain `inline`
// functions with a target attribute, which GCC inlines into those callers (an always_inline one
// would have to be inlined into the templates in between, compiled for no particular target).
#if defined(__x86_64__)
#if defined(__GNUC__) && !defined(__clang__)
// GCC 12 warns inside its own AVX-512 headers (_mm512_undefined_epi32's self-initialisation,
// GCC PR 105593); nothing here is uninitialised.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#define QT_AVX512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl")))

// Table codes of x[0..32) (<= 16 values): #{j : v > thr[j]} by a binary search over the 15 sorted
// thresholds, four lane-wise lookups (vpermps), then + 1 where v equals the tie midpoint of its
// code (at most one midpoint can equal v, and then the count is its index).
QT_AVX512 inline void table_codes_avx512(const TablePlan& tp, bool ties, bool mul, const float* x, float f, int32_t* q) {
    const __m512 thr = _mm512_loadu_ps(tp.thr), tie = _mm512_loadu_ps(tp.tie), fv = _mm512_set1_ps(f);
    for (int h = 0; h < 2; ++h) {
        const __m512 xv = _mm512_loadu_ps(x + 16 * h);
        const __m512 v = mul ? _mm512_mul_ps(xv, fv) : _mm512_div_ps(xv, fv);
        __m512i i = _mm512_setzero_si512();
        for (int step = 8; step >= 1; step /= 2) {
            const __m512 t = _mm512_permutexvar_ps(_mm512_add_epi32(i, _mm512_set1_epi32(step - 1)), thr);
            i = _mm512_mask_add_epi32(i, _mm512_cmp_ps_mask(v, t, _CMP_GT_OQ), i, _mm512_set1_epi32(step));
        }
        if (ties) {
            const __m512 t = _mm512_permutexvar_ps(i, tie);
            i = _mm512_mask_add_epi32(i, _mm512_cmp_ps_mask(v, t, _CMP_EQ_OQ), i, _mm512_set1_epi32(1));
        }
        _mm512_storeu_si512(q + 16 * h, i);
    }
}

// The byte shuffle of pack_lsb_avx512 and unpack_lsb_avx512 for B-bit codes: in each 128-bit
// lane, a group of eight codes (B bytes) per 64-bit half (`spread`), or the two groups' 2B bytes
// side by side at the lane's start (`gather`); -1 (bit 7 set): a zero byte.
template <int B>
struct LsbGroups {
    static constexpr auto make(bool spread) {
        std::array<int8_t, 16> c{};
        for (int j = 0; j < 16; ++j) {
            if (spread) c[j] = static_cast<int8_t>((j & 7) < B ? (j >> 3) * B + (j & 7) : -1);
            else c[j] = static_cast<int8_t>(j < B ? j : j < 2 * B ? 8 + j - B : -1);
        }
        return c;
    }
    alignas(16) static constexpr std::array<int8_t, 16> spread = make(true), gather = make(false);
};

// Packs 32 int32 codes q (their low B bits) lsb-first into 4B bytes, for B < 8: eight codes make
// a group of B bytes (code i at bit B i of a little-endian word), built by doubling: pairs in
// 64-bit lanes (2B bits), narrowed to 32-bit lanes, pairs of pairs (4B bits), narrowed again,
// groups of eight (8B bits = B bytes per 64-bit lane); then each lane's two groups side by side
// (vpshufb) and two masked stores of 2B bytes.
template <int B>
QT_AVX512 inline void pack_lsb_avx512(__m512i a, __m512i b, uint8_t* out) {
    const __m512i m1 = _mm512_set1_epi64((1ll << B) - 1), m1h = _mm512_set1_epi64(((1ll << B) - 1) << B);
    const __m512i pa = _mm512_or_si512(_mm512_and_si512(a, m1), _mm512_and_si512(_mm512_srli_epi64(a, 32 - B), m1h));
    const __m512i pb = _mm512_or_si512(_mm512_and_si512(b, m1), _mm512_and_si512(_mm512_srli_epi64(b, 32 - B), m1h));
    const __m512i pairs = _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtepi64_epi32(pa)), _mm512_cvtepi64_epi32(pb), 1);
    const __m512i m2 = _mm512_set1_epi64((1ll << 2 * B) - 1), m2h = _mm512_set1_epi64(((1ll << 2 * B) - 1) << 2 * B);
    const __m512i quads =
        _mm512_or_si512(_mm512_and_si512(pairs, m2), _mm512_and_si512(_mm512_srli_epi64(pairs, 32 - 2 * B), m2h));
    const __m256i qd = _mm512_cvtepi64_epi32(quads);  // 4B <= 28 bits
    const __m256i m4 = _mm256_set1_epi64x((1ll << 4 * B) - 1), m4h = _mm256_set1_epi64x(((1ll << 4 * B) - 1) << 4 * B);
    const __m256i groups =
        _mm256_or_si256(_mm256_and_si256(qd, m4), _mm256_and_si256(_mm256_srli_epi64(qd, 32 - 4 * B), m4h));
    const __m128i g = _mm_load_si128(reinterpret_cast<const __m128i*>(LsbGroups<B>::gather.data()));
    const __m256i bytes = _mm256_shuffle_epi8(groups, _mm256_broadcastsi128_si256(g));
    constexpr __mmask16 k = static_cast<__mmask16>((1u << 2 * B) - 1);
    _mm_mask_storeu_epi8(out, k, _mm256_castsi256_si128(bytes));
    _mm_mask_storeu_epi8(out + 2 * B, k, _mm256_extracti128_si256(bytes, 1));
}

// Packs 32 int32 codes, a (codes 0..15) and b (16..31), the low `bits` bits of each, into out, for
// 8, 4 and any lsb-first width; false for 2, 3, 5, 6 and 7 bits msb-first (the caller narrows to
// bytes and uses pack_step). For 4 bits each 64-bit lane holds a pair (element 2k low, 2k + 1 high)
// and becomes one byte (vpmovqb).
QT_AVX512 inline __attribute__((always_inline)) bool pack_regs_avx512(int bits, bool lsb, __m512i a, __m512i b, uint8_t* out) {
    if (bits == 8) {
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm512_cvtepi32_epi8(a));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 16), _mm512_cvtepi32_epi8(b));
        return true;
    }
    if (bits == 4) {
        const __m512i lo = _mm512_set1_epi64(0xF), hi = _mm512_set1_epi64(0xF0);
        __m512i pa64, pb64;  // (no lambda: it would not inherit the target)
        if (lsb) {
            pa64 = _mm512_or_si512(_mm512_and_si512(a, lo), _mm512_and_si512(_mm512_srli_epi64(a, 28), hi));
            pb64 = _mm512_or_si512(_mm512_and_si512(b, lo), _mm512_and_si512(_mm512_srli_epi64(b, 28), hi));
        } else {
            pa64 = _mm512_or_si512(_mm512_and_si512(_mm512_slli_epi64(a, 4), hi), _mm512_and_si512(_mm512_srli_epi64(a, 32), lo));
            pb64 = _mm512_or_si512(_mm512_and_si512(_mm512_slli_epi64(b, 4), hi), _mm512_and_si512(_mm512_srli_epi64(b, 32), lo));
        }
        const __m128i pa = _mm512_cvtepi64_epi8(pa64), pb = _mm512_cvtepi64_epi8(pb64);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm_unpacklo_epi64(pa, pb));
        return true;
    }
    // 6 bits: pairs -> 12 bits (64-bit lanes), pairs of pairs -> 24 bits (32-bit lanes), three bytes
    // each: one narrowing step fewer than pack_lsb_avx512<6>, which measured no faster.
    if (bits == 6 && lsb) {
        const __m512i m6 = _mm512_set1_epi64(0x3f), m6h = _mm512_set1_epi64(0xfc0);
        const __m512i pa = _mm512_or_si512(_mm512_and_si512(a, m6), _mm512_and_si512(_mm512_srli_epi64(a, 26), m6h));
        const __m512i pb = _mm512_or_si512(_mm512_and_si512(b, m6), _mm512_and_si512(_mm512_srli_epi64(b, 26), m6h));
        const __m256i w = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm512_cvtepi64_epi16(pa)), _mm512_cvtepi64_epi16(pb), 1);
        const __m256i g = _mm256_or_si256(_mm256_and_si256(w, _mm256_set1_epi32(0xfff)),
                                          _mm256_and_si256(_mm256_srli_epi32(w, 4), _mm256_set1_epi32(0xfff000)));
        // the low three bytes of each 32-bit lane, packed: 12 bytes per 128-bit half
        const __m256i shuf = _mm256_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1, 0, 1, 2, 4, 5, 6, 8,
                                              9, 10, 12, 13, 14, -1, -1, -1, -1);
        const __m256i bytes = _mm256_shuffle_epi8(g, shuf);
        _mm_mask_storeu_epi8(out, 0x0fff, _mm256_castsi256_si128(bytes));
        _mm_mask_storeu_epi8(out + 12, 0x0fff, _mm256_extracti128_si256(bytes, 1));
        return true;
    }
    if (!lsb) return false;
    switch (bits) {
        case 2: pack_lsb_avx512<2>(a, b, out); return true;
        case 3: pack_lsb_avx512<3>(a, b, out); return true;
        case 5: pack_lsb_avx512<5>(a, b, out); return true;
        case 7: pack_lsb_avx512<7>(a, b, out); return true;
        default: return false;
    }
}
// The same from 32 codes in memory.
QT_AVX512 inline bool pack_q_avx512(int bits, bool lsb, const int32_t* q, uint8_t* out) {
    return pack_regs_avx512(bits, lsb, _mm512_loadu_si512(q), _mm512_loadu_si512(q + 16), out);
}

// round_mag_t<R> (decl_math.hpp) of 16 magnitudes t >= 0, lane for lane: the bits capped at 2^30's,
// then nearest-even by the conversion's own rounding (named, not MXCSR's), the other modes from the
// truncation and t - fl (exact). neg: the lanes whose value is negative (nearest-down's ties); rb:
// stochastic rounding's 16 words (else unused).
template <Rounding R>
QT_AVX512 inline __attribute__((always_inline)) __m512i round_mag16_avx512(__m512 t, __mmask16 neg, const uint32_t* rb) {
    t = _mm512_castsi512_ps(_mm512_min_epu32(_mm512_castps_si512(t), _mm512_set1_epi32(0x4e800000)));
    if constexpr (R == Rounding::kNearestEven) {
        (void)neg;
        (void)rb;
        return _mm512_cvt_roundps_epi32(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    } else {
        const __m512i i = _mm512_cvttps_epi32(t);
        const __m512 fr = _mm512_sub_ps(t, _mm512_cvtepi32_ps(i));
        __mmask16 up = 0;
        if constexpr (R == Rounding::kNearestAway) up = _mm512_cmp_ps_mask(fr, _mm512_set1_ps(0.5f), _CMP_GE_OQ);
        if constexpr (R == Rounding::kNearestDown)
            up = _mm512_cmp_ps_mask(fr, _mm512_set1_ps(0.5f), _CMP_GT_OQ) |
                 (_mm512_cmp_ps_mask(fr, _mm512_set1_ps(0.5f), _CMP_EQ_OQ) & neg);
        if constexpr (R == Rounding::kStochastic) {
            const __m512i w = _mm512_srli_epi32(_mm512_loadu_si512(rb), 8);
            up = _mm512_cmp_ps_mask(_mm512_mul_ps(_mm512_cvtepi32_ps(w), _mm512_set1_ps(pow2f(-24))), fr, _CMP_LT_OQ);
        } else {
            (void)rb;
        }
        if constexpr (R != Rounding::kNearestDown) (void)neg;
        return _mm512_mask_add_epi32(i, up, i, _mm512_set1_epi32(1));
    }
}

// An int element's grid (IntGrid) broadcast, once per call.
struct IntRegs {
    __m512 scale;  // 2^fraction_bits
    __m512i qmin, qmax;
};
QT_AVX512 inline IntRegs int_regs(const IntGrid& g) {
    return {_mm512_set1_ps(pow2f(g.fraction_bits)), _mm512_set1_epi32(g.qmin), _mm512_set1_epi32(g.qmax)};
}
// int_code<R> of 16 quotients v, lane for lane: the magnitude scaled by 2^fraction_bits and rounded,
// the sign restored (a -0's too, as int_code's test), clamped to [qmin, qmax].
template <Rounding R>
QT_AVX512 inline __attribute__((always_inline)) __m512i int_codes16_avx512(const IntRegs& g, __m512 v, const uint32_t* rb) {
    const __m512i vb = _mm512_castps_si512(v);
    const __mmask16 neg = _mm512_movepi32_mask(vb);
    const __m512 a = _mm512_castsi512_ps(_mm512_and_si512(vb, _mm512_set1_epi32(0x7fffffff)));
    __m512i r = round_mag16_avx512<R>(_mm512_mul_ps(a, g.scale), neg, rb);
    r = _mm512_mask_sub_epi32(r, neg, _mm512_setzero_si512(), r);
    return _mm512_min_epi32(_mm512_max_epi32(r, g.qmin), g.qmax);
}

// A float element's grid (FloatGrid) broadcast, once per call.
struct FloatRegs {
    __m512i emin, man, sign_bit, top;
};
QT_AVX512 inline FloatRegs float_regs(const FloatGrid& g) {
    return {_mm512_set1_epi32(g.emin), _mm512_set1_epi32(g.man), _mm512_set1_epi32(g.sign_bit), _mm512_set1_epi32(g.top)};
}
// NVFP4 (e4m3-tensor-amax) for the blocks of 16 amax bits at a time (finite): each block's decode factor
// s = fl32(fl32(s_b T) fl32(1/K)) and multiplier m = min(fl32(1 / fl32(s_b S_dec)), FLT_MAX), s_b the
// E4M3 rounding of fl32(a t) as e4m3_sat (decl_math.hpp) computes it: every step a binary32 operation
// rounded to nearest, the scalings by 2^(3-e) and 2^(e-3) exact (e in [-6, 9]).
QT_AVX512 inline __attribute__((always_inline)) void nvfp4_scales_avx512(const Decl& d, __m512i amax, __m512& s, __m512& m) {
    __m512 v = _mm512_min_ps(_mm512_mul_ps(_mm512_castsi512_ps(amax), _mm512_set1_ps(d.t_blk)), _mm512_set1_ps(512.0f));
    __m512i e = _mm512_sub_epi32(_mm512_and_si512(_mm512_srli_epi32(_mm512_castps_si512(v), 23), _mm512_set1_epi32(0xff)),
                                 _mm512_set1_epi32(127));
    e = _mm512_max_epi32(e, _mm512_set1_epi32(-6));
    const __m512 up = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_sub_epi32(_mm512_set1_epi32(130), e), 23));  // 2^(3-e)
    const __m512 dn = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(e, _mm512_set1_epi32(124)), 23));   // 2^(e-3)
    const __m512 r = _mm512_roundscale_ps(_mm512_mul_ps(v, up), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m512 sb = _mm512_min_ps(_mm512_mul_ps(r, dn), _mm512_set1_ps(448.0f));
    s = _mm512_mul_ps(_mm512_mul_ps(sb, _mm512_set1_ps(d.tensor_amax)), _mm512_set1_ps(d.t_rcp_k));
    m = _mm512_min_ps(_mm512_div_ps(_mm512_set1_ps(1.0f), _mm512_mul_ps(sb, _mm512_set1_ps(d.t_dec))), _mm512_set1_ps(kFltMax));
}
// float_code<R> of 16 quotients v, lane for lane: the binade eb = max(exponent field - 127, emin),
// |v| 2^-(eb - man) (scalef: the correctly rounded product, as mul_rn by the exact power of two;
// emin - man >= -126 (decl.cpp), so the power is a binary32), rounded, the binade's codes added,
// saturated at top, the sign bit set for a negative v.
template <Rounding R>
QT_AVX512 inline __attribute__((always_inline)) __m512i float_codes16_avx512(const FloatRegs& g, __m512 v, const uint32_t* rb) {
    const __m512i vb = _mm512_castps_si512(v);
    const __mmask16 neg = _mm512_movepi32_mask(vb);
    const __m512 a = _mm512_castsi512_ps(_mm512_and_si512(vb, _mm512_set1_epi32(0x7fffffff)));
    const __m512i e = _mm512_sub_epi32(_mm512_srli_epi32(_mm512_castps_si512(a), 23), _mm512_set1_epi32(127));
    const __m512i eb = _mm512_max_epi32(e, g.emin);
    const __m512i k = _mm512_sub_epi32(eb, g.man);
    const __m512 t = _mm512_scalef_ps(a, _mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_setzero_si512(), k)));
    const __m512i r = round_mag16_avx512<R>(t, neg, rb);
    __m512i mag = _mm512_add_epi32(_mm512_sllv_epi32(_mm512_sub_epi32(eb, g.emin), g.man), r);
    mag = _mm512_min_epi32(mag, g.top);
    return _mm512_mask_or_epi32(mag, neg, mag, g.sign_bit);
}

// Unpacks one full step (32 codes) straight from the wire bytes into int32 lanes idx[0] (codes
// 0..15) and idx[1] (16..31), for 4 bits (either packing) and every lsb-first width below 8;
// false for 2, 3, 5, 6 and 7 bits msb-first. decode_step_avx512 takes the codes from here: no
// staging buffer between the unpacker and the values (a wide load of what narrow stores just
// wrote waits for them to reach the cache).
template <int B>
QT_AVX512 inline void unpack_lsb_avx512(const uint8_t* in, __m512i* idx) {
    // groups 0, 1 and 2, 3 (B bytes each) into the 64-bit lanes of g, then each 64-bit lane of
    // idx[h] takes a pair of codes of group 2h + (lane >= 4) by its shift, 2B (lane % 4)
    constexpr __mmask16 k = static_cast<__mmask16>((1u << 2 * B) - 1);
    const __m128i sp = _mm_load_si128(reinterpret_cast<const __m128i*>(LsbGroups<B>::spread.data()));
    const __m128i lo = _mm_shuffle_epi8(_mm_maskz_loadu_epi8(k, in), sp);
    const __m128i hi = _mm_shuffle_epi8(_mm_maskz_loadu_epi8(k, in + 2 * B), sp);
    const __m512i g = _mm512_castsi256_si512(_mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1));
    const __m512i sh = _mm512_set_epi64(6 * B, 4 * B, 2 * B, 0, 6 * B, 4 * B, 2 * B, 0);
    const __m512i m = _mm512_set1_epi64((1ll << B) - 1), mh = _mm512_set1_epi64(((1ll << B) - 1) << 32);
    for (int h = 0; h < 2; ++h) {
        const __m512i sel = _mm512_set_epi64(2 * h + 1, 2 * h + 1, 2 * h + 1, 2 * h + 1, 2 * h, 2 * h, 2 * h, 2 * h);
        const __m512i x = _mm512_srlv_epi64(_mm512_permutexvar_epi64(sel, g), sh);
        idx[h] = _mm512_or_si512(_mm512_and_si512(x, m), _mm512_and_si512(_mm512_slli_epi64(x, 32 - B), mh));
    }
}
QT_AVX512 inline bool unpack_avx512(int bits, bool lsb, const uint8_t* in, __m512i* idx) {
    if (bits == 4) {
        const __m512i b = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in)));
        // element 2k and 2k + 1 from byte k: low nibble first (lsb) or high nibble first (msb)
        const __m512i sh = lsb ? _mm512_set_epi32(4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0)
                               : _mm512_set_epi32(0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4);
        const __m512i first = _mm512_set_epi32(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0);
        const __m512i m4 = _mm512_set1_epi32(0xF);
        idx[0] = _mm512_and_si512(_mm512_srlv_epi32(_mm512_permutexvar_epi32(first, b), sh), m4);
        idx[1] = _mm512_and_si512(
            _mm512_srlv_epi32(_mm512_permutexvar_epi32(_mm512_add_epi32(first, _mm512_set1_epi32(8)), b), sh), m4);
        return true;
    }
    if (!lsb) return false;
    if (bits == 6) {
        // bytes 3g..3g+2 hold codes 4g..4g+3 (24 bits, little-endian): one group per 32-bit lane
        // (kept beside unpack_lsb_avx512<6>, as the packer is: the generic one measured no faster)
        const __m128i lo = _mm_maskz_loadu_epi8(0x0fff, in), hi = _mm_maskz_loadu_epi8(0x0fff, in + 12);
        const __m128i spread = _mm_setr_epi8(0, 1, 2, -1, 3, 4, 5, -1, 6, 7, 8, -1, 9, 10, 11, -1);
        const __m512i g = _mm512_castsi256_si512(_mm256_inserti128_si256(
            _mm256_castsi128_si256(_mm_shuffle_epi8(lo, spread)), _mm_shuffle_epi8(hi, spread), 1));
        const __m512i sh = _mm512_set_epi32(18, 12, 6, 0, 18, 12, 6, 0, 18, 12, 6, 0, 18, 12, 6, 0);
        const __m512i first = _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0);
        const __m512i m6 = _mm512_set1_epi32(0x3F);
        idx[0] = _mm512_and_si512(_mm512_srlv_epi32(_mm512_permutexvar_epi32(first, g), sh), m6);
        idx[1] = _mm512_and_si512(
            _mm512_srlv_epi32(_mm512_permutexvar_epi32(_mm512_add_epi32(first, _mm512_set1_epi32(4)), g), sh), m6);
        return true;
    }
    switch (bits) {
        case 2: unpack_lsb_avx512<2>(in, idx); return true;
        case 3: unpack_lsb_avx512<3>(in, idx); return true;
        case 5: unpack_lsb_avx512<5>(in, idx); return true;
        case 7: unpack_lsb_avx512<7>(in, idx); return true;
        default: return false;
    }
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#endif

// ---- element codes ----------------------------------------------------------------------------------
// Codes of x[0..m) with scale s (or its reciprocal when kMul) as int32 (int32 lanes: the widest
// vectors; narrow_step() makes bytes of them). L: a compile-time m, or 0 for the run-time m.
template <ElemType E, Rounding R, bool kMul, bool kTies, int64_t L, bool kAvx>
inline __attribute__((always_inline)) void codes_step(const EncodePlan& p, const float* __restrict x, int64_t m,
                                                      float s, const uint32_t* __restrict rb, int32_t* __restrict c) {
    const int64_t n = L ? L : m;
#if defined(__x86_64__)
    if constexpr (E == ElemType::kTable && kAvx && L == kStep) {
        table_codes_avx512(p.tp, kTies, kMul, x, s, c);
        return;
    }
#endif
    if constexpr (E == ElemType::kTable) {
        float thr[15], tie[15];
        for (int j = 0; j < 15; ++j) thr[j] = p.tp.thr[j], tie[j] = p.tp.tie[j];
        for (int64_t i = 0; i < n; ++i) {
            const float v = kMul ? mul_rn(x[i], s) : div_rn(x[i], s);
            int32_t q = 0;
            for (int j = 0; j < 15; ++j) q += v > thr[j] ? 1 : 0;
            if constexpr (kTies)
                for (int j = 0; j < 15; ++j) q += v == tie[j] ? 1 : 0;
            c[i] = q;
        }
    } else {
        const FloatGrid fg = p.fg;
        const IntGrid ig = p.ig;
        for (int64_t i = 0; i < n; ++i) {
            const float v = kMul ? mul_rn(x[i], s) : div_rn(x[i], s);
            const uint32_t r = R == Rounding::kStochastic ? rb[i] : 0u;
            int32_t q;
            if constexpr (E == ElemType::kFloat) q = float_code<R>(fg, v, r);
            else q = int_code<R>(ig, v, r);
            c[i] = q;
        }
    }
}

// The low 8 bits of codes q[0..32) (two's complement for signed ints): what the packers take.
inline __attribute__((always_inline)) void narrow_step(const int32_t* __restrict q, uint8_t* __restrict c) {
    for (int64_t i = 0; i < kStep; ++i) c[i] = static_cast<uint8_t>(q[i]);
}

// ---- scales ---------------------------------------------------------------------------------------
// The scales of n blocks from their absmax bits, one loop for scale type S (vectorized over the
// blocks where decl_scale_t is branch-free). true when every block quantizes: none holds a NaN or
// inf (absmax bits >= kInfBits) and no scale overflowed; otherwise the caller plans the blocks
// one by one (decl_plan) to find out which.
template <ScaleType S>
inline __attribute__((always_inline)) void scales_t(const Decl& d, const uint32_t* __restrict amax, int64_t n,
                                                    float* __restrict s) {
    for (int64_t j = 0; j < n; ++j) s[j] = decl_scale_t<S>(d, bits_f32(amax[j]));
}
// The "-mul" scales (DeepEP's, FlashInfer's and torchao's casts) and FBGEMM's MX4 exponent: one loop out of
// line, compiled once. chunk_scales
// is inlined into every instantiation of the element loops (element type x rounding x ... x target):
// four more vectorized scale loops there took codec.cpp from 136 s to 183 s of compile time, for a
// statistic computed once per block of 128 or 256 elements.
__attribute__((noinline)) inline void scales_mul(const Decl& d, const uint32_t* __restrict amax, int64_t n, float* __restrict s) {
    for (int64_t j = 0; j < n; ++j) s[j] = decl_scale(d, bits_f32(amax[j]));
}
inline __attribute__((always_inline)) bool chunk_scales(const Decl& d, const uint32_t* __restrict amax, int64_t n,
                                                        float* __restrict s) {
    switch (d.scale) {
        case ScaleType::kFp32Absmax: scales_t<ScaleType::kFp32Absmax>(d, amax, n, s); break;
        case ScaleType::kFp16Absmax: scales_t<ScaleType::kFp16Absmax>(d, amax, n, s); break;
        case ScaleType::kE8m0Floor: scales_t<ScaleType::kE8m0Floor>(d, amax, n, s); break;
        case ScaleType::kE8m0Rceil: scales_t<ScaleType::kE8m0Rceil>(d, amax, n, s); break;
        case ScaleType::kE8m0Even: scales_t<ScaleType::kE8m0Even>(d, amax, n, s); break;
        case ScaleType::kE8m0Ceil: scales_t<ScaleType::kE8m0Ceil>(d, amax, n, s); break;
        case ScaleType::kE8m0RceilMul:
        case ScaleType::kPow2RceilMul:
        case ScaleType::kFp32AmaxMul:
        case ScaleType::kFp32AmaxMulRcp:
        case ScaleType::kFp32AmaxMulInv:
        case ScaleType::kFp32EpsMul:
        case ScaleType::kE4m3TensorAmax:
        case ScaleType::kE8m0FbgemmEven: scales_mul(d, amax, n, s); break;
        case ScaleType::kNone:
            for (int64_t j = 0; j < n; ++j) s[j] = 1.0f;
            break;
    }
    uint32_t bad = 0;
    for (int64_t j = 0; j < n; ++j) bad |= (amax[j] >= kInfBits ? 1u : 0u) | (f32_bits(s[j]) == kInfBits ? 1u : 0u);
    return bad == 0;
}

// ---- packing ----------------------------------------------------------------------------------------
// Packs codes c[0..m) (m <= 32; c readable and zero past m up to 32) into the ceil(m bits / 8)
// bytes at out, as decl_pack_one() would into zeroed bytes. L: a compile-time m (32), or 0.
template <int64_t L>
inline __attribute__((always_inline)) void pack_step(const Decl& d, const uint8_t* __restrict c, int64_t m,
                                                     uint8_t* __restrict out) {
    const int64_t n = L ? L : m;
    const int bits = d.bits;
    if (bits == 8) {
        std::memcpy(out, c, static_cast<size_t>(n));
    } else if (bits == 4) {
        // A pair of codes read as one little-endian 16-bit word (a loop of 16-bit lanes; indexing
        // c[2k] and c[2k + 1] compiles to byte extracts).
        uint16_t w[kStep / 2];
        std::memcpy(w, c, kStep);
        uint8_t b[kStep / 2];
        if (d.packing == Packing::kLsbFirst) {
            for (int k = 0; k < kStep / 2; ++k) b[k] = static_cast<uint8_t>((w[k] & 0x0F) | ((w[k] >> 4) & 0xF0));
        } else {
            for (int k = 0; k < kStep / 2; ++k) b[k] = static_cast<uint8_t>(((w[k] << 4) & 0xF0) | ((w[k] >> 8) & 0x0F));
        }
        std::memcpy(out, b, static_cast<size_t>((n + 1) / 2));
    } else if (bits == 6 && d.packing == Packing::kLsbFirst) {
        // Eight codes (one per byte of u) become 48 bits: fields pairwise merged in 16-, 32- and
        // 64-bit lanes.
        const int64_t nbytes = (n * 6 + 7) / 8;
        for (int64_t g = 0; g * 6 < nbytes; ++g) {
            uint64_t u;
            std::memcpy(&u, c + 8 * g, 8);
            u &= 0x3f3f3f3f3f3f3f3full;
            u = (u & 0x003f003f003f003full) | ((u >> 2) & 0x0fc00fc00fc00fc0ull);
            u = (u & 0x00000fff00000fffull) | ((u >> 4) & 0x00fff00000fff000ull);
            u = (u & 0x0000000000ffffffull) | ((u >> 8) & 0x0000ffffff000000ull);
            uint8_t w[8];
            std::memcpy(w, &u, 8);  // little-endian: the stream's first byte is u's lowest
            if (L || nbytes - 6 * g >= 6) {
                std::memcpy(out + 6 * g, w, 6);
            } else {
                for (int64_t k = 0; k < nbytes - 6 * g; ++k) out[6 * g + k] = w[k];
            }
        }
    } else if (d.packing == Packing::kLsbFirst) {
        // Any other width (2, 3, 5, 7 bits): eight codes become `bits` bytes, the low bits of one
        // 64-bit word (code i at bit bits * i: little-endian, the stream's first byte lowest).
        const uint64_t mask = (uint64_t{1} << bits) - 1;
        const int64_t nbytes = (n * bits + 7) / 8;
        uint8_t t[kStep + 8];
        for (int g = 0; g < kStep / 8; ++g) {
            uint64_t u = 0;
            for (int i = 0; i < 8; ++i) u |= (c[8 * g + i] & mask) << (bits * i);
            std::memcpy(t + bits * g, &u, 8);  // the next group overwrites the bytes past `bits`
        }
        std::memcpy(out, t, static_cast<size_t>(nbytes));
    } else {
        std::memset(out, 0, static_cast<size_t>((n * bits + 7) / 8));
        for (int64_t i = 0; i < n; ++i) decl_pack_one(d, out, i, c[i]);
    }
}

// ---- decoding ---------------------------------------------------------------------------------------
struct DecodePlan {
    enum Mode : uint8_t { kFloat, kInt, kLookup } mode = kLookup;
    // float: the value of magnitude code (ef, m) is sig * 2^(max(ef, 1) - bias - M) with
    // sig = m + (ef != 0) 2^M: an exact product of an integer and a power of two built from its
    // bits, both binary32 normals (or 0), as is the product (every value of the format is a binary32
    // normal or 0, section 1), so no operand is subnormal (a microcode assist on x86) and nothing
    // is conditional (a conditional multiply is one GCC may not vectorize under -ftrapping-math).
    // The sign is the top code bit; mag >= nan_lo is a NaN or inf code.
    uint32_t magmask = 0, nan_lo = 0, sign_pos = 0, man_bits = 0, ebase = 0;
    // int: value = code * step, code sign-extended from `bits` when signed
    bool is_signed = false;
    float step = 1.0f;
    int bits = 8;
    bool small = false;  // with AVX-512, codes of <= 6 bits are looked up in `value` (vpermps)
    float value[256];    // lookup: every code's value (decl_value); small: 64 entries, zero past 2^bits
};

// small_tables: build the 64-entry table of a code of <= 6 bits (the AVX-512 lookups).
inline DecodePlan decode_plan(const Decl& d, bool small_tables) {
    DecodePlan p;
    p.bits = d.bits;
    if (small_tables && d.bits <= 6) {
        p.small = true;
        for (int32_t c = 0; c < 64; ++c)
            p.value[c] = c < (1 << d.bits)
                             ? decl_value(d, d.signed_codes() ? sign_extend(static_cast<uint32_t>(c), d.bits) : c)
                             : 0.0f;
    }
    if (d.elem == ElemType::kFloat) {
        p.mode = DecodePlan::kFloat;
        p.man_bits = static_cast<uint32_t>(d.man_bits);
        p.ebase = static_cast<uint32_t>(127 - d.bias - d.man_bits);  // >= 0: 2^(emin - M) >= 2^-126
        p.magmask = (1u << (d.bits - 1)) - 1u;
        p.sign_pos = static_cast<uint32_t>(d.bits - 1);
        const uint32_t emask = (1u << d.exp_bits) - 1u;
        p.nan_lo = d.special == FloatSpecial::kIeee      ? emask << d.man_bits
                   : d.special == FloatSpecial::kNanOnly ? p.magmask
                                                         : p.magmask + 1u;
        return p;
    }
    if (d.elem == ElemType::kInt) {
        p.mode = DecodePlan::kInt;
        p.is_signed = d.is_signed;
        p.step = pow2f(-d.fraction_bits);
        return p;
    }
    p.mode = DecodePlan::kLookup;
    if (p.small) return p;
    const int32_t mask = (1 << d.bits) - 1;
    for (int32_t c = 0; c <= mask; ++c)
        p.value[c] = decl_value(d, d.signed_codes() ? sign_extend(static_cast<uint32_t>(c), d.bits) : c);
    return p;
}

// Unpacks codes [i0, i0 + m) of a block (i0 a multiple of 32, m <= 32) into bytes c[0..m). L: a
// compile-time m (32), or 0.
template <int64_t L>
inline __attribute__((always_inline)) void unpack_step(const Decl& d, const uint8_t* __restrict block_bytes, int64_t i0,
                                                       int64_t m, uint8_t* __restrict c) {
    const int64_t n = L ? L : m;
    const int bits = d.bits;
    const uint8_t* in = block_bytes + i0 * bits / 8;
    if (bits == 8) {
        std::memcpy(c, in, static_cast<size_t>(n));
    } else if (bits == 4) {
        uint8_t b[kStep / 2] = {};
        if (L) std::memcpy(b, in, kStep / 2);
        else for (int64_t k = 0; k < (n + 1) / 2; ++k) b[k] = in[k];
        // Four bytes (eight codes) at a time, spread to one byte per code by doubling shifts.
        const bool lsb = d.packing == Packing::kLsbFirst;
        for (int g = 0; g < kStep / 8; ++g) {
            uint32_t w;
            std::memcpy(&w, b + 4 * g, 4);
            uint64_t t = w;
            t = (t | (t << 16)) & 0x0000ffff0000ffffull;
            t = (t | (t << 8)) & 0x00ff00ff00ff00ffull;  // byte 2k: packed byte k
            const uint64_t u = lsb ? ((t & 0x000f000f000f000full) | ((t << 4) & 0x0f000f000f000f00ull))
                                   : (((t >> 4) & 0x000f000f000f000full) | ((t << 8) & 0x0f000f000f000f00ull));
            std::memcpy(c + 8 * g, &u, 8);
        }
    } else if (bits == 6 && d.packing == Packing::kLsbFirst) {
        const int64_t nbytes = (n * 6 + 7) / 8;
        for (int64_t g = 0; g * 6 < nbytes; ++g) {
            uint64_t u;
            if (L) {  // 24 bytes: groups 0..2 load 8 bytes at 6 g, group 3 the last 8 (shifted)
                if (g < 3) {
                    std::memcpy(&u, in + 6 * g, 8);
                } else {
                    std::memcpy(&u, in + 16, 8);
                    u >>= 16;
                }
                u &= 0x0000ffffffffffffull;
            } else {
                uint8_t w[8] = {};
                for (int64_t k = 0; k < nbytes - 6 * g && k < 6; ++k) w[k] = in[6 * g + k];
                std::memcpy(&u, w, 8);
            }
            u = (u & 0x0000000000ffffffull) | ((u << 8) & 0x00ffffff00000000ull);
            u = (u & 0x00000fff00000fffull) | ((u << 4) & 0x0fff00000fff0000ull);
            u = (u & 0x003f003f003f003full) | ((u << 2) & 0x3f003f003f003f00ull);
            std::memcpy(c + 8 * g, &u, 8);
        }
    } else if (d.packing == Packing::kLsbFirst) {
        // Any other width: `bits` bytes hold eight codes (pack_step's groups), read as one 64-bit
        // word from a copy of the step's bytes (never past the block's).
        const uint64_t mask = (uint64_t{1} << bits) - 1;
        const int64_t nbytes = (n * bits + 7) / 8;
        uint8_t t[kStep + 8] = {};
        std::memcpy(t, in, static_cast<size_t>(nbytes));
        for (int g = 0; g < kStep / 8; ++g) {
            uint64_t u;
            std::memcpy(&u, t + bits * g, 8);
            for (int i = 0; i < 8; ++i) c[8 * g + i] = static_cast<uint8_t>((u >> (bits * i)) & mask);
        }
    } else {
        for (int64_t i = 0; i < n; ++i)
            c[i] = static_cast<uint8_t>(decl_unpack(d, block_bytes, i0 + i) & ((1 << bits) - 1));
    }
}

// The element value of one code q (the body of raw_values' loop).
template <DecodePlan::Mode M>
inline __attribute__((always_inline)) float raw_value(const DecodePlan& p, uint32_t q) {
    if constexpr (M == DecodePlan::kFloat) {
        // A NaN or inf code gets 0 * inf, a NaN (scale_step makes it the quiet NaN): masks of
        // integers only, so that no float operation is conditional (GCC would not vectorize one
        // under -ftrapping-math, and a plain select here it turns into a branch).
        const uint32_t mmask = (1u << p.man_bits) - 1u;
        const uint32_t mag = q & p.magmask, ef = mag >> p.man_bits;
        const uint32_t keep = ((mag - p.nan_lo) >> 31) * 0xffffffffu;  // all ones when mag < nan_lo
        const uint32_t sig = ((mag & mmask) | (ef != 0 ? mmask + 1u : 0u)) & keep;
        const uint32_t p2 = ((((ef > 1u ? ef : 1u) + p.ebase) << 23) & keep) | (kInfBits & ~keep);
        const float a = mul_rn(static_cast<float>(static_cast<int32_t>(sig)), bits_f32(p2));
        return bits_f32(f32_bits(a) | ((q >> p.sign_pos) << 31));
    } else if constexpr (M == DecodePlan::kInt) {
        const int up = 32 - p.bits;
        const int32_t c = p.is_signed ? static_cast<int32_t>(q << up) >> up : static_cast<int32_t>(q);
        return mul_rn(static_cast<float>(c), p.step);
    } else {
        return p.value[q];
    }
}

#if defined(__x86_64__)
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
// The element values of 16 codes (int32 lanes) of a float or int element, raw_value's arithmetic
// operation for operation; or of a code of <= 6 bits, looked up in the small table (one vpermps
// for <= 4 bits, vpermi2ps for 5, two and a blend on bit 5 for 6). The caller has refused a
// table of more than 6 bits (kLookup without `small`).
QT_AVX512 inline __m512 values_avx512(const DecodePlan& p, __m512i q) {
    if (p.small) {
        const __m512 t0 = _mm512_loadu_ps(p.value), t1 = _mm512_loadu_ps(p.value + 16);
        if (p.bits <= 4) return _mm512_permutexvar_ps(q, t0);
        const __m512 a = _mm512_permutex2var_ps(t0, q, t1);
        if (p.bits == 5) return a;
        const __m512 b = _mm512_permutex2var_ps(_mm512_loadu_ps(p.value + 32), q, _mm512_loadu_ps(p.value + 48));
        return _mm512_mask_blend_ps(_mm512_test_epi32_mask(q, _mm512_set1_epi32(32)), a, b);
    }
    if (p.mode == DecodePlan::kFloat) {
        const __m512i mmask = _mm512_set1_epi32(static_cast<int>((1u << p.man_bits) - 1u));
        const __m512i mag = _mm512_and_si512(q, _mm512_set1_epi32(static_cast<int>(p.magmask)));
        const __m512i ef = _mm512_srl_epi32(mag, _mm_cvtsi32_si128(static_cast<int>(p.man_bits)));
        const __m512i keep = _mm512_srai_epi32(_mm512_sub_epi32(mag, _mm512_set1_epi32(static_cast<int>(p.nan_lo))), 31);
        __m512i sig = _mm512_and_si512(mag, mmask);
        sig = _mm512_mask_or_epi32(sig, _mm512_test_epi32_mask(ef, ef), sig, _mm512_add_epi32(mmask, _mm512_set1_epi32(1)));
        sig = _mm512_and_si512(sig, keep);
        const __m512i eb = _mm512_max_epu32(ef, _mm512_set1_epi32(1));
        __m512i p2 = _mm512_slli_epi32(_mm512_add_epi32(eb, _mm512_set1_epi32(static_cast<int>(p.ebase))), 23);
        p2 = _mm512_ternarylogic_epi32(p2, keep, _mm512_set1_epi32(static_cast<int>(kInfBits)), 0xE2);  // keep ? p2 : inf
        const __m512 a = _mm512_mul_ps(_mm512_cvtepi32_ps(sig), _mm512_castsi512_ps(p2));
        const __m512i sign = _mm512_slli_epi32(_mm512_srl_epi32(q, _mm_cvtsi32_si128(static_cast<int>(p.sign_pos))), 31);
        return _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(a), sign));
    }
    const __m128i up = _mm_cvtsi32_si128(32 - p.bits);
    const __m512i c = p.is_signed ? _mm512_sra_epi32(_mm512_sll_epi32(q, up), up) : q;
    return _mm512_mul_ps(_mm512_cvtepi32_ps(c), _mm512_set1_ps(p.step));
}

// v[i] = the value of code c[i] for n codes (n a multiple of 16) of <= 6 bits, from the small
// table (values_avx512): the staged steps' lookups.
QT_AVX512 inline void lookup_avx512(const DecodePlan& p, const uint8_t* c, int64_t n, float* v) {
    for (int64_t i = 0; i < n; i += 16)
        _mm512_storeu_ps(v + i, values_avx512(p, _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(c + i)))));
}

// scale_step of 16 values: o = sat(fl32(v s)), the quiet NaN for a NaN value.
QT_AVX512 inline void scale16_avx512(__m512 v, float s, float* o) {
    // sat(x) = fmin_(fmax_(x, -max), max): vmaxps(-max, x) is x < -max ? -max : x (x for a NaN),
    // vminps(max, y) is max < y ? max : y, operand for operand
    const __m512 r = _mm512_min_ps(_mm512_set1_ps(kFltMax), _mm512_max_ps(_mm512_set1_ps(-kFltMax), _mm512_mul_ps(v, _mm512_set1_ps(s))));
    const __m512 qnan = _mm512_castsi512_ps(_mm512_set1_epi32(static_cast<int>(kQuietNanBits)));
    _mm512_storeu_ps(o, _mm512_mask_blend_ps(_mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), r, qnan));
}

// decode8_step for float and int elements with AVX-512, sixteen codes per register. false: a table.
QT_AVX512 inline bool decode8_avx512(const DecodePlan& p, const uint8_t* in, float s, float* o) {
    if (p.mode == DecodePlan::kLookup) return false;
    for (int h = 0; h < 2; ++h) {
        const __m512i q = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + 16 * h)));
        scale16_avx512(values_avx512(p, q), s, o + 16 * h);
    }
    return true;
}

// One full step of decoding in registers, straight from the wire bytes in (unpack_avx512's widths)
// to the output: unpacked, valued (values_avx512) and scaled. false: another width (8 bits:
// decode8_avx512), or a table of 7 bits.
QT_AVX512 inline bool decode_step_avx512(const DecodePlan& p, bool lsb, const uint8_t* in, float s, float* o) {
    if (p.mode == DecodePlan::kLookup && !p.small) return false;
    __m512i idx[2];
    if (!unpack_avx512(p.bits, lsb, in, idx)) return false;
    for (int h = 0; h < 2; ++h) scale16_avx512(values_avx512(p, idx[h]), s, o + 16 * h);
    return true;
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#endif

// The element values of codes c[0..n) (decl_value; a NaN for a float NaN or inf code).
// Run over a whole chunk of steps at once: with n >= 64 the compiler vectorizes at full width
// (a 32-iteration loop of bytes would get 32-byte vectors).
template <DecodePlan::Mode M, bool kAvx>
inline __attribute__((always_inline)) void raw_values(const DecodePlan& p, const uint8_t* __restrict c, int64_t n,
                                                      float* __restrict v) {
#if defined(__x86_64__)
    if constexpr (kAvx) {
        if (p.small) {
            lookup_avx512(p, c, n, v);
            return;
        }
    }
#endif
    const DecodePlan& pl = p;
    for (int64_t i = 0; i < n; ++i) v[i] = raw_value<M>(pl, c[i]);
}

// raw_values then scale_step in one loop, for one full step of 8-bit codes read where they are:
// no staging buffer, whose stores would queue behind the output's (which miss the cache) and fill
// the store buffer.
template <DecodePlan::Mode M>
inline __attribute__((always_inline)) void decode8_step(const DecodePlan& p, const uint8_t* __restrict c, float s,
                                                        float* __restrict o) {
    for (int64_t i = 0; i < kStep; ++i) {
        const float v = raw_value<M>(p, c[i]);
        const float r = sat(mul_rn(v, s));
        o[i] = bits_f32((f32_bits(v) & 0x7fffffffu) > kInfBits ? kQuietNanBits : f32_bits(r));
    }
}

// Decoded values of element values v[0..m) in a block with scale s (not NaN):
// decl_decode_value(d, v, s, 0). L: a compile-time m (32), or 0.
template <int64_t L>
inline __attribute__((always_inline)) void scale_step(const float* __restrict v, int64_t m, float s, float* __restrict o) {
    const int64_t n = L ? L : m;
    for (int64_t i = 0; i < n; ++i) {
        const float r = sat(mul_rn(v[i], s));
        o[i] = bits_f32((f32_bits(v[i]) & 0x7fffffffu) > kInfBits ? kQuietNanBits : f32_bits(r));
    }
}

// ---- stochastic rounding's words --------------------------------------------------------------------
// out[i] = round_bits(k, i) for i in [0, n) (FORMATS.md section 4): element g = k.index_base + i has
// word g & 3 of round_call(k, g >> 2) (decl_math.hpp): Philox4x32-10 at counter (lo32(g >> 2),
// hi32(g >> 2), rank word, 4 | hop << 8). One call per counter, its four words to four consecutive
// elements; index_base need not be a multiple of 4 (the first and last counters may serve fewer).
inline void round_words_scalar(const RoundKey& k, int64_t n, uint32_t* out) {
    const uint64_t g0 = static_cast<uint64_t>(k.index_base);
    uint64_t c = g0 >> 2;
    uint32_t j = static_cast<uint32_t>(g0 & 3u);
    for (int64_t i = 0; i < n; ++c, j = 0) {
        const Philox4x32 w = round_call(k, c);
        for (; j < 4 && i < n; ++j, ++i) out[i] = w.v[j];
    }
}

#if defined(__x86_64__)
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
// The same words with AVX-512. The rounds run on V registers of eight 64-bit lanes, each lane one
// counter, each counter word in a lane's low half (vpmuludq multiplies low halves, so the high halves
// may carry anything: they never reach a low half); the rounds are philox_round's, word for word.
// round_counters_avx512<V> writes the 32 V words of the counters c, c + 1, ..., c + 8 V - 1 to w in
// element order: counter c's words 0..3, then counter c + 1's, ...
struct RoundKeys512 {
    __m512i k0[10], k1[10];  // the round keys, broadcast
    __m512i p1_first;        // round 1's M1 * c[2]: the rank word is the same for every counter
    __m512i c3;              // the tag word 4 | hop << 8
};
template <int V>
QT_AVX512 inline void round_counters_avx512(const RoundKeys512& rk, uint64_t c0, uint32_t* w) {
    const __m512i m0 = _mm512_set1_epi64(qtransit::detail::kPhiloxM0), m1 = _mm512_set1_epi64(qtransit::detail::kPhiloxM1);
    const __m512i iota = _mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0);
    __m512i a[V], b[V], c[V], d[V];
    for (int v = 0; v < V; ++v) {
        const __m512i g = _mm512_add_epi64(_mm512_set1_epi64(static_cast<int64_t>(c0 + 8u * v)), iota);
        const __m512i p0 = _mm512_mul_epu32(g, m0);  // c[0] = lo32(counter)
        a[v] = _mm512_ternarylogic_epi64(_mm512_srli_epi64(rk.p1_first, 32), _mm512_srli_epi64(g, 32), rk.k0[0], 0x96);
        b[v] = rk.p1_first;
        c[v] = _mm512_ternarylogic_epi64(_mm512_srli_epi64(p0, 32), rk.c3, rk.k1[0], 0x96);
        d[v] = p0;
    }
    for (int r = 1; r < 10; ++r) {
        for (int v = 0; v < V; ++v) {
            const __m512i p0 = _mm512_mul_epu32(a[v], m0), p1 = _mm512_mul_epu32(c[v], m1);
            a[v] = _mm512_ternarylogic_epi64(_mm512_srli_epi64(p1, 32), b[v], rk.k0[r], 0x96);
            b[v] = p1;
            c[v] = _mm512_ternarylogic_epi64(_mm512_srli_epi64(p0, 32), d[v], rk.k1[r], 0x96);
            d[v] = p0;
        }
    }
    // Words 0..3 are the low halves of a, b, c, d. Pair them in 64-bit lanes (a | b << 32, c | d << 32),
    // then interleave the pairs: lane order (ab 0, cd 0, ab 1, cd 1, ...) is element order.
    const __m512i lo = _mm512_set_epi64(11, 3, 10, 2, 9, 1, 8, 0), hi = _mm512_set_epi64(15, 7, 14, 6, 13, 5, 12, 4);
    for (int v = 0; v < V; ++v) {
        const __m512i ab = _mm512_mask_blend_epi32(0xAAAA, a[v], _mm512_slli_epi64(b[v], 32));
        const __m512i cd = _mm512_mask_blend_epi32(0xAAAA, c[v], _mm512_slli_epi64(d[v], 32));
        _mm512_storeu_si512(w + 32 * v, _mm512_permutex2var_epi64(ab, lo, cd));
        _mm512_storeu_si512(w + 32 * v + 16, _mm512_permutex2var_epi64(ab, hi, cd));
    }
}
// The round keys and the counters' constant words of k, broadcast: what every batch of k's words
// shares (a caller drawing words for many batches of elements makes them once).
QT_AVX512 inline RoundKeys512 round_keys512(const RoundKey& k) {
    RoundKeys512 rk;
    uint32_t key0 = static_cast<uint32_t>(k.seed), key1 = static_cast<uint32_t>(k.seed >> 32);
    for (int r = 0; r < 10; ++r) {
        if (r > 0) {
            key0 += qtransit::detail::kPhiloxW0;
            key1 += qtransit::detail::kPhiloxW1;
        }
        rk.k0[r] = _mm512_set1_epi64(key0);
        rk.k1[r] = _mm512_set1_epi64(key1);
    }
    rk.p1_first = _mm512_mul_epu32(_mm512_set1_epi64(k.rank_word), _mm512_set1_epi64(qtransit::detail::kPhiloxM1));
    rk.c3 = _mm512_set1_epi64(kTagRound | (k.hop << 8));
    return rk;
}
// The words of elements index_base + [0, n) under the keys rk: round_words' words for a key with
// that index_base. Up to 32 counters (128 words) per batch, in four registers for the
// multiplier's latency; a short call (the 32 words of one step) takes only the registers it needs.
QT_AVX512 inline void round_words_keyed(const RoundKeys512& rk, int64_t index_base, int64_t n, uint32_t* out) {
    const uint64_t g0 = static_cast<uint64_t>(index_base);
    uint64_t c = g0 >> 2;
    int64_t skip = static_cast<int64_t>(g0 & 3u);  // the first counter's words before element 0
    alignas(64) uint32_t w[128];
    for (int64_t i = 0; i < n;) {
        const int64_t need = skip + (n - i);  // words wanted from counter c on
        const int regs = need >= 128 ? 4 : static_cast<int>((need + 31) / 32);
        uint32_t* dst = skip == 0 && need >= 32 * regs ? out + i : w;  // whole registers straight to out
        switch (regs) {
            case 4: round_counters_avx512<4>(rk, c, dst); break;
            case 3: round_counters_avx512<3>(rk, c, dst); break;
            case 2: round_counters_avx512<2>(rk, c, dst); break;
            default: round_counters_avx512<1>(rk, c, dst); break;
        }
        const int64_t m = 32 * regs - skip < n - i ? 32 * regs - skip : n - i;
        if (dst == w) std::memcpy(out + i, w + skip, static_cast<size_t>(m) * 4);
        i += m;
        c += 8u * static_cast<uint64_t>(regs);
        skip = 0;
    }
}
QT_AVX512 inline void round_words_avx512(const RoundKey& k, int64_t n, uint32_t* out) {
    round_words_keyed(round_keys512(k), k.index_base, n, out);
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

inline bool have_avx512() { return cpu_avx512(); }
#endif

inline void round_words(const RoundKey& k, int64_t n, uint32_t* out) {
#if defined(__x86_64__)
    if (have_avx512()) {
        round_words_avx512(k, n, out);
        return;
    }
#endif
    round_words_scalar(k, n, out);
}

}  // namespace qtransit::kernels::fast
