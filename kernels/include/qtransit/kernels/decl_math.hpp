// The arithmetic of a declared format (docs/FORMATS.md), defined once for the CPU and CUDA backends,
// element-wise like block_math.hpp: the scale of a block from its statistics, the code of one
// element, the value of one code, packing. Every binary32 operation that can round is spelled
// out (div_rn, mul_rn, ...); the others (scaling by a power of two inside binary32's normal range,
// floor, the integer work) are exact.
#pragma once

#include <cstdint>

#include "qtransit/common/decl.hpp"
#include "qtransit/common/philox.hpp"
#include "qtransit/kernels/block_math.hpp"
#include "qtransit/kernels/inputs.hpp"  // detail::pow2i

// Per-block functions the CPU backend calls once a block from its multiversioned loops: inlined
// there (a call would go to the baseline build of the function); on the device QT_HD inlines.
#if defined(__CUDACC__)
#define QT_HD_BLOCK QT_HD
#else
#define QT_HD_BLOCK inline __attribute__((always_inline))
#endif

namespace qtransit::kernels {

// 2^k as a binary32, k in [-149, 127].
QT_HD float pow2f(int k) {
    return k >= -126 ? bits_f32(static_cast<uint32_t>(k + 127) << 23) : bits_f32(1u << (k + 149));
}
QT_HD int clz32(uint32_t u) {
#if defined(__CUDA_ARCH__)
    return __clz(static_cast<int>(u));
#else
    return u ? __builtin_clz(u) : 32;
#endif
}
// floor(log2 |v|) of a finite non-zero binary32 (subnormals included).
QT_HD int ilog2f(float v) {
    const uint32_t u = f32_bits(v) & 0x7fffffffu;
    const int e = static_cast<int>(u >> 23);
    return e ? e - 127 : (31 - clz32(u)) - 149;
}

// What the stochastic rounding of one block needs (FORMATS.md section 4): the run's seed, the
// quantizing rank's word (0xFFFFFFFF outside a collective), the hop, and the index of the block's
// first element in the tensor being quantized.
struct RoundKey {
    uint64_t seed = 0;
    uint32_t rank_word = 0xFFFFFFFFu;
    uint32_t hop = 0;
    int64_t index_base = 0;
};
inline constexpr uint32_t kTagRound = 4;
// The Philox4x32-10 call at stochastic rounding's counter c: (lo32(c), hi32(c), rank word,
// 4 | (hop << 8)), keyed by the seed. Its four words round elements 4c..4c+3.
QT_HD Philox4x32 round_call(const RoundKey& k, uint64_t c) {
    return philox4x32_10(
        Philox4x32{{static_cast<uint32_t>(c), static_cast<uint32_t>(c >> 32), k.rank_word, kTagRound | (k.hop << 8)}},
        static_cast<uint32_t>(k.seed), static_cast<uint32_t>(k.seed >> 32));
}
// The random word of element i (g = index_base + i): word g & 3 of round_call(k, g >> 2).
QT_HD uint32_t round_bits(const RoundKey& k, int64_t i) {
    const uint64_t g = static_cast<uint64_t>(k.index_base + i);
    const Philox4x32 w = round_call(k, g >> 2);
    const uint32_t j = static_cast<uint32_t>(g & 3u);  // selects, not an index: w stays in registers on the device
    return j == 0 ? w.v[0] : (j == 1 ? w.v[1] : (j == 2 ? w.v[2] : w.v[3]));
}

// ---- the scale of a block -------------------------------------------------------------------------
// NVFP4's block scale (e4m3-tensor-amax, FORMATS.md section 2): v >= 0 rounded to nearest even on
// the E4M3 grid (3 mantissa bits, smallest normal 2^-6, subnormal step 2^-9), saturated at 448 as
// cvt.rn.satfinite does (inf too). Straight-line: the binade from the exponent field (a subnormal
// binary32 reads as below 2^-6), the step's scaling by powers of two exact.
QT_HD float e4m3_sat(float v) {
    v = fmin_(v, 512.0f);
    int e = static_cast<int>((f32_bits(v) >> 23) & 0xffu) - 127;
    e = e < -6 ? -6 : e;
    return fmin_(mul_rn(rne(mul_rn(v, pow2f(3 - e))), pow2f(e - 3)), 448.0f);
}
// The E4M3 block scale s_b of a block of absmax a: E4M3(fl32(a fl32(S_enc fl32(1/A)))).
QT_HD float nvfp4_block_scale(const Decl& d, float a) { return e4m3_sat(mul_rn(a, d.t_blk)); }
// What the block's codes decode by: fl32(fl32(s_b T) fl32(1/K)) (Transformer Engine's dequantize).
QT_HD float nvfp4_decode_factor(const Decl& d, float sb) { return mul_rn(mul_rn(sb, d.tensor_amax), d.t_rcp_k); }

// `a`: the block's absmax, or fl32(hi - lo) with an offset; finite and >= 0. Returns s; +inf means
// a range overflow (the caller refuses or poisons the block). decl_scale_t: for scale type S
// (which must be d's); written without branches where it can be, so that the CPU backend can
// compute the scales of many blocks in one vectorized loop.
template <ScaleType S>
QT_HD_BLOCK float decl_scale_t(const Decl& d, float a) {
    if constexpr (S == ScaleType::kFp32Absmax) {
        const float s = fmax_(div_rn(a, d.amp), kMinSubnormal);
        return a == 0.0f ? 0.0f : s;
    } else if constexpr (S == ScaleType::kFp16Absmax) {
        if (a == 0.0f) return 0.0f;
        const float s = round_f16(div_rn(a, d.amp));
        return s == 0.0f ? pow2f(-24) : s;
    } else if constexpr (S == ScaleType::kE8m0Floor || S == ScaleType::kE8m0Rceil) {
        // a == 0 needs no case of its own: ilog2f(0) is -150, so e clamps to -127 (rceil: 0 <= A 2^e).
        int e = ilog2f(a) - d.emax_elem;
        // rceil: the smallest e with a <= A 2^e; A 2^e is exact in binary64.
        if constexpr (S == ScaleType::kE8m0Rceil)
            e += (static_cast<double>(a) <= static_cast<double>(d.amp) * detail::pow2i(e)) ? 0 : 1;
        e = e < -127 ? -127 : (e > 127 ? 127 : e);
        return pow2f(e);
    } else if constexpr (S == ScaleType::kE8m0Even || S == ScaleType::kE8m0Ceil) {
        // torchao's EVEN and CEIL, from a's bits: even adds half a unit of the element's last
        // mantissa place below a's leading bit and reads the exponent field (a carry is the next
        // power of two); ceil reads the exponent field and adds one for any mantissa bit. A
        // subnormal a has exponent field 0, read as 2^-127.
        const uint32_t b = f32_bits(a);
        int e;
        if constexpr (S == ScaleType::kE8m0Even)
            e = static_cast<int>(((b + (1u << (22 - d.man_bits))) >> 23) & 0xffu) - 127;
        else
            e = static_cast<int>((b >> 23) & 0xffu) - 127 + ((b & 0x7fffffu) != 0u ? 1 : 0);
        e -= d.emax_elem;
        e = e < -127 ? -127 : (e > 127 ? 127 : e);
        return pow2f(e);
    } else if constexpr (S == ScaleType::kE8m0FbgemmEven) {
        // FBGEMM's MX4 "even" (fp32_to_mx4, rounding mode 2): a's bits plus 2^(22-M) - 1, then the
        // exponent field of the sum (a carry is the next power of two: strictly above (2 - 2^-(M+1)) 2^E,
        // one ulp later than torchao's EVEN); an all-zero block's a reads as 2^-126. Clamped to
        // [-127, 125] (FBGEMM's bounds; a field of 255 after the carry clamps to 125 too).
        const uint32_t b = f32_bits(a == 0.0f ? pow2f(-126) : a) + ((1u << (22 - d.man_bits)) - 1u);
        int e = static_cast<int>((b >> 23) & 0xffu) - 127 - d.emax_elem;
        e = e < -127 ? -127 : (e > 125 ? 125 : e);
        return pow2f(e);
    } else if constexpr (S == ScaleType::kFp32AmaxMul) {
        // FlashInfer: s = fl32(max(a, F) / A); the elements are multiplied by decl_multiplier's m.
        return div_rn(fmax_(a, d.amax_floor), d.amp);
    } else if constexpr (S == ScaleType::kFp32AmaxMulRcp) {
        // DeepEP: s = fl32(max(a, F) fl32(1/A)), not the reciprocal of the m the elements are multiplied by.
        return mul_rn(fmax_(a, d.amax_floor), d.amp_rcp);
    } else if constexpr (S == ScaleType::kFp32AmaxMulInv) {
        // torchao: s = fl32(1 / m), the inverse of the multiplier m = fl32(A / max(a, F)) (what a GEMM
        // applies to the codes: addmm_float8_unwrapped's scale.reciprocal()).
        return div_rn(1.0f, div_rn(d.amp, fmax_(a, d.amax_floor)));
    } else if constexpr (S == ScaleType::kFp32EpsMul) {
        // FBGEMM's row-wise INT8: s = fl32(a / A), 0 for a == 0 (no floor); the elements are multiplied
        // by decl_multiplier's m = fl32(A / fl32(a + eps)).
        return a == 0.0f ? 0.0f : div_rn(a, d.amp);
    } else if constexpr (S == ScaleType::kE4m3TensorAmax) {
        // NVFP4: the stored scale is the decode factor of the block's E4M3 scale (one byte on the
        // wire, with the tensor's T); the elements are multiplied by decl_multiplier's m.
        return nvfp4_decode_factor(d, nvfp4_block_scale(d, a));
    } else if constexpr (S == ScaleType::kE8m0RceilMul || S == ScaleType::kPow2RceilMul) {
        // DeepEP's round_scale: t = fl32(max(a, F) fl32(1/A)) rounded up to a power of two, read from
        // t's bits: the exponent field, plus one for any mantissa bit; a subnormal t (field 0) is
        // 2^-126 above 2^-127 and 2^-127 at or below it (0 included). Clamped to [-127, 127] (an
        // infinite t: field 255, 128, clamps to 127).
        const uint32_t b = f32_bits(mul_rn(fmax_(a, d.amax_floor), d.amp_rcp));
        const int ef = static_cast<int>((b >> 23) & 0xffu);
        const uint32_t man = b & 0x7fffffu;
        int e = ef == 0 ? (man > 0x400000u ? -126 : -127) : ef - 127 + (man != 0u ? 1 : 0);
        e = e > 127 ? 127 : e;
        return pow2f(e);
    } else {
        (void)d;
        (void)a;
        return 1.0f;
    }
}
// The multiplier of fp32-amax-mul, -mul-rcp and -mul-inv: m = fl32(A / max(a, F)), finite (finalize:
// F >= A / FLT_MAX) and rounded apart from the scale; of fp32-eps-mul, m = fl32(A / fl32(a + eps)) (eps
// >= A / FLT_MAX); of e4m3-tensor-amax, m = min(fl32(1 / fl32(s_b S_dec)), FLT_MAX) (a zero s_b: FLT_MAX,
// and its codes decode to zeros). Each element's quotient is fl32(x m) (fl32(fl32(x - lo) m) with an offset).
QT_HD_BLOCK float decl_multiplier(const Decl& d, float a) {
    if (d.scale == ScaleType::kE4m3TensorAmax)
        return fmin_(div_rn(1.0f, mul_rn(nvfp4_block_scale(d, a), d.t_dec)), kFltMax);
    return d.scale == ScaleType::kFp32EpsMul ? div_rn(d.amp, add_rn(a, d.amax_eps)) : div_rn(d.amp, fmax_(a, d.amax_floor));
}
QT_HD_BLOCK float decl_scale(const Decl& d, float a) {
    switch (d.scale) {
        case ScaleType::kFp32Absmax: return decl_scale_t<ScaleType::kFp32Absmax>(d, a);
        case ScaleType::kFp16Absmax: return decl_scale_t<ScaleType::kFp16Absmax>(d, a);
        case ScaleType::kE8m0Floor: return decl_scale_t<ScaleType::kE8m0Floor>(d, a);
        case ScaleType::kE8m0Rceil: return decl_scale_t<ScaleType::kE8m0Rceil>(d, a);
        case ScaleType::kE8m0Even: return decl_scale_t<ScaleType::kE8m0Even>(d, a);
        case ScaleType::kE8m0Ceil: return decl_scale_t<ScaleType::kE8m0Ceil>(d, a);
        case ScaleType::kE8m0FbgemmEven: return decl_scale_t<ScaleType::kE8m0FbgemmEven>(d, a);
        case ScaleType::kFp32AmaxMul: return decl_scale_t<ScaleType::kFp32AmaxMul>(d, a);
        case ScaleType::kFp32AmaxMulRcp: return decl_scale_t<ScaleType::kFp32AmaxMulRcp>(d, a);
        case ScaleType::kFp32AmaxMulInv: return decl_scale_t<ScaleType::kFp32AmaxMulInv>(d, a);
        case ScaleType::kE8m0RceilMul: return decl_scale_t<ScaleType::kE8m0RceilMul>(d, a);
        case ScaleType::kPow2RceilMul: return decl_scale_t<ScaleType::kPow2RceilMul>(d, a);
        case ScaleType::kFp32EpsMul: return decl_scale_t<ScaleType::kFp32EpsMul>(d, a);
        case ScaleType::kE4m3TensorAmax: return decl_scale_t<ScaleType::kE4m3TensorAmax>(d, a);
        case ScaleType::kNone: return 1.0f;
    }
    return 1.0f;
}

// ---- rounding t >= 0 to an integer ----------------------------------------------------------------
// The mode is a template parameter so that a block's loop carries no per-element dispatch (the
// CPU backend instantiates one loop per element type and mode); round_mag() dispatches at run time.
template <Rounding R>
QT_HD int32_t round_mag_t(float t, bool neg, uint32_t rbits) {
    // 2^30: far beyond every code range; keeps the conversion exact. t >= 0, so the minimum of the
    // bit patterns is the minimum of the values (and leaves the compiler no float compare to turn
    // into a branch around the conversions below, which would stop the CPU loop vectorizing).
    {
        const uint32_t tb = f32_bits(t);
        t = bits_f32(tb < 0x4e800000u ? tb : 0x4e800000u);
    }
    if constexpr (R == Rounding::kNearestEven) {
        (void)neg;
        (void)rbits;
        return static_cast<int32_t>(rne(t));
    } else {
#if defined(__CUDA_ARCH__)
        const float fl = floorf(t);
#else
        // floor(t) for 0 <= t <= 2^30 as a truncating conversion: the same value (t >= 2^23 is an
        // integer already), and unlike floorf one that GCC vectorizes under -ftrapping-math.
        const float fl = static_cast<float>(static_cast<int32_t>(t));
#endif
        const float fr = sub_rn(t, fl);  // exact
        const int32_t i = static_cast<int32_t>(fl);
        bool up = false;
        if constexpr (R == Rounding::kNearestAway) up = fr >= 0.5f;
        if constexpr (R == Rounding::kNearestDown) up = fr > 0.5f || (fr == 0.5f && neg);
        if constexpr (R == Rounding::kStochastic) up = mul_rn(static_cast<float>(rbits >> 8), pow2f(-24)) < fr;
        (void)neg;
        (void)rbits;
        return i + (up ? 1 : 0);
    }
}
QT_HD int32_t round_mag(float t, Rounding mode, bool neg, uint32_t rbits) {
    switch (mode) {
        case Rounding::kNearestEven: return round_mag_t<Rounding::kNearestEven>(t, neg, rbits);
        case Rounding::kNearestAway: return round_mag_t<Rounding::kNearestAway>(t, neg, rbits);
        case Rounding::kNearestDown: return round_mag_t<Rounding::kNearestDown>(t, neg, rbits);
        case Rounding::kTowardZero: return round_mag_t<Rounding::kTowardZero>(t, neg, rbits);
        default: return round_mag_t<Rounding::kStochastic>(t, neg, rbits);
    }
}

// ---- one element ----------------------------------------------------------------------------------
// The largest finite magnitude's code (without the sign bit) of a float element.
QT_HD int32_t float_max_code(const Decl& d) {
    const int32_t E = d.exp_bits, M = d.man_bits;
    switch (d.special) {
        case FloatSpecial::kIeee: return (((1 << E) - 2) << M) | ((1 << M) - 1);
        case FloatSpecial::kNanOnly: return (((1 << E) - 1) << M) | ((1 << M) - 2);
        default: return (1 << (E + M)) - 1;
    }
}

// A float element's grid as plain integers (what the element loop needs, held in registers).
struct FloatGrid {
    int32_t emin, man, sign_bit, top;
};
QT_HD FloatGrid float_grid(const Decl& d) { return {d.emin, d.man_bits, 1 << (d.bits - 1), float_max_code(d)}; }

// The float element code of v = x / s. Straight-line, so that the CPU loop vectorizes: the binade
// from the exponent field alone (a subnormal or zero |v| gives -127, below every emin >= -126, so
// eb = emin as it must), and a zero needs no branch (t = 0, r = 0, magnitude code 0, sign kept).
template <Rounding R>
QT_HD int32_t float_code(const FloatGrid& g, float v, uint32_t rbits) {
    const uint32_t u = f32_bits(v);
    const bool neg = (u & 0x80000000u) != 0;
    const float a = bits_f32(u & 0x7fffffffu);
    const int e = static_cast<int>((u >> 23) & 0xffu) - 127;
    const int eb = e > g.emin ? e : g.emin;
    const int k = eb - g.man;
    const int32_t r = round_mag_t<R>(mul_rn(a, pow2f(-k)), neg, rbits);
    int32_t mag = ((eb - g.emin) << g.man) + r;
    mag = mag > g.top ? g.top : mag;  // saturation
    return (neg ? g.sign_bit : 0) | mag;
}

// An int element's grid as plain integers, like FloatGrid.
struct IntGrid {
    int32_t fraction_bits, qmin, qmax;
};
QT_HD IntGrid int_grid(const Decl& d) { return {d.fraction_bits, d.qmin, d.qmax}; }

// The int element code of v = x / s (section 3): the magnitude t = |v| 2^f rounded, the sign
// restored, clamped to the code range. Straight-line, like float_code().
template <Rounding R>
QT_HD int32_t int_code(const IntGrid& g, float v, uint32_t rbits) {
    const bool neg = (f32_bits(v) & 0x80000000u) != 0;
    const float a = bits_f32(f32_bits(v) & 0x7fffffffu);
    const int32_t r = round_mag_t<R>(mul_rn(a, pow2f(g.fraction_bits)), neg, rbits);
    return clampi(neg ? -r : r, g.qmin, g.qmax);
}

// The code of x in a block with scale s (!= NaN) and offset lo (offset `min` only), for element
// type E and rounding R (which must be d's). For the scales that multiply, m is the block's multiplier
// (decl_plan) and the quotient is fl32(x m), or fl32(fl32(x - lo) m) with an offset; m is not read
// otherwise. Codes are int32: two's complement values for signed int elements, the raw unsigned code
// otherwise.
template <ElemType E, Rounding R>
QT_HD int32_t decl_code_t(const Decl& d, float x, float s, float lo, float m, uint32_t rbits) {
    float v;
    const float w = d.offset_min ? sub_rn(x, lo) : x;
    // A scale that multiplies takes fl32(w m) even where s is 0: NVFP4's zero block scale has m = FLT_MAX
    // and saturated codes that decode to zeros, as Transformer Engine's kernel writes them; under
    // fp32-eps-mul |w m| < 1/2 there (finalize), code 0 either way.
    if (multiplies(d.scale)) v = mul_rn(w, m);
    else if (s == 0.0f) v = d.offset_min ? 0.0f : (f32_bits(x) & 0x80000000u ? -0.0f : 0.0f);
    else v = div_rn(w, s);
    if constexpr (E == ElemType::kInt) {
        return int_code<R>(int_grid(d), v, rbits);
    } else if constexpr (E == ElemType::kFloat) {
        return float_code<R>(float_grid(d), v, rbits);
    } else {  // table: nearest by the exact midpoints
        (void)rbits;
        const double w = static_cast<double>(v);
        // i: the smallest index with w <= mid[i] (or the last), i.e. how many midpoints lie below w.
        int i = 0;
        if (d.table_size <= 16) {  // a branch-free count (nf4): the midpoints increase strictly
            for (int j = 0; j < 15; ++j) i += (j < d.table_size - 1 && w > d.mid[j]) ? 1 : 0;
        } else {
            int hi_i = d.table_size - 1;  // the answer is in [i, hi_i]
            while (i < hi_i) {
                const int m = (i + hi_i) / 2;
                if (w > d.mid[m]) i = m + 1;
                else hi_i = m;
            }
        }
        if (i < d.table_size - 1 && w == d.mid[i]) {  // a tie between i and i + 1
            if constexpr (R == Rounding::kNearestEven) return (i & 1) ? i + 1 : i;
            if constexpr (R == Rounding::kNearestAway) {
                const float ai = fabsf(d.table[i]), aj = fabsf(d.table[i + 1]);
                return ai > aj ? i : i + 1;
            }
            return i;  // nearest-down
        }
        return i;
    }
}

// Calls fn.template operator()<E, R>() for d's element type and rounding: one dispatch per block.
template <class Fn>
QT_HD auto with_decl_kind(const Decl& d, Fn&& fn) {
#define QT_DECL_ROUNDINGS(E)                                                                   \
    switch (d.rounding) {                                                                      \
        case Rounding::kNearestEven: return fn.template operator()<E, Rounding::kNearestEven>(); \
        case Rounding::kNearestAway: return fn.template operator()<E, Rounding::kNearestAway>(); \
        case Rounding::kNearestDown: return fn.template operator()<E, Rounding::kNearestDown>(); \
        case Rounding::kTowardZero: return fn.template operator()<E, Rounding::kTowardZero>();   \
        default: return fn.template operator()<E, Rounding::kStochastic>();                     \
    }
    switch (d.elem) {
        case ElemType::kInt: QT_DECL_ROUNDINGS(ElemType::kInt)
        case ElemType::kFloat: QT_DECL_ROUNDINGS(ElemType::kFloat)
        default: QT_DECL_ROUNDINGS(ElemType::kTable)
    }
#undef QT_DECL_ROUNDINGS
}

QT_HD int32_t decl_code(const Decl& d, float x, float s, float lo, float m, uint32_t rbits) {
    return with_decl_kind(d, [&]<ElemType E, Rounding R>() { return decl_code_t<E, R>(d, x, s, lo, m, rbits); });
}

// The element value of a code; NaN for a float code that is inf or NaN.
QT_HD float decl_value(const Decl& d, int32_t code) {
    switch (d.elem) {
        case ElemType::kInt: return mul_rn(static_cast<float>(code), pow2f(-d.fraction_bits));
        case ElemType::kFloat: {
            const int32_t M = d.man_bits, E = d.exp_bits;
            const bool neg = (code >> (d.bits - 1)) & 1;
            const int32_t mag = code & ((1 << (d.bits - 1)) - 1);
            const int32_t ef = mag >> M, m = mag & ((1 << M) - 1);
            if ((d.special == FloatSpecial::kIeee && ef == (1 << E) - 1) ||
                (d.special == FloatSpecial::kNanOnly && ef == (1 << E) - 1 && m == (1 << M) - 1))
                return bits_f32(kQuietNanBits);
            const float val = ef == 0 ? mul_rn(static_cast<float>(m), pow2f(d.emin - M))
                                      : mul_rn(static_cast<float>((1 << M) + m), pow2f(ef - d.bias - M));
            return neg ? -val : val;
        }
        default: return d.table[code & (d.table_size - 1)];
    }
}

// An offset format's value of val once s and lo are known to be numbers and s != 0: sat(fl32(val s + lo))
// rounded once (decode = "fma") or twice. decl_decode_value's last step; a caller that has ruled out
// the NaNs and the zero scale for a whole block calls it directly.
QT_HD float decl_offset_value(const Decl& d, float val, float s, float lo) {
    return d.decode_fma ? sat(fma_rn(val, s, lo)) : sat(add_rn(sat(mul_rn(val, s)), lo));
}

// Decode from the element value val = decl_value(d, code) (so a caller may tabulate decl_value).
QT_HD float decl_decode_value(const Decl& d, float val, float s, float lo) {
    if (s != s) return bits_f32(kQuietNanBits);
    if (val != val) return bits_f32(kQuietNanBits);
    if (d.offset_min) {
        if (lo != lo) return bits_f32(kQuietNanBits);
        if (s == 0.0f) return lo;
        return decl_offset_value(d, val, s, lo);
    }
    return sat(mul_rn(val, s));
}
QT_HD float decl_decode(const Decl& d, int32_t code, float s, float lo) {
    return decl_decode_value(d, decl_value(d, code), s, lo);
}

// The code every element of a poisoned block carries: 0, or with scale `none` (nothing else can
// mark the block) a float element's NaN code; -1: the format cannot mark a poisoned block.
QT_HD int32_t decl_poison_code(const Decl& d) {
    if (d.scale != ScaleType::kNone) return 0;
    if (d.elem == ElemType::kFloat && d.special != FloatSpecial::kNone) return (1 << (d.bits - 1)) - 1;
    return -1;
}

// ---- packing --------------------------------------------------------------------------------------
// lsb-first: NUMERICS 1.4 (element 2j in the low nibble; other widths an LSB-first bit stream);
// msb-first: element 2j in the high nibble; other widths an MSB-first bit stream.
QT_HD int32_t decl_unpack(const Decl& d, const uint8_t* block_bytes, int64_t i) {
    const int bits = d.bits;
    uint32_t raw;
    if (bits == 8) {
        raw = block_bytes[i];
    } else if (d.packing == Packing::kLsbFirst) {
        const int64_t bit = i * bits;
        const uint32_t two = block_bytes[bit >> 3] |
                             ((((bit & 7) + bits) > 8) ? (static_cast<uint32_t>(block_bytes[(bit >> 3) + 1]) << 8) : 0u);
        raw = (two >> (bit & 7)) & ((1u << bits) - 1u);
    } else {
        const int64_t bit = i * bits;  // from the MSB of byte 0
        const uint32_t two = (static_cast<uint32_t>(block_bytes[bit >> 3]) << 8) |
                             ((((bit & 7) + bits) > 8) ? block_bytes[(bit >> 3) + 1] : 0u);
        raw = (two >> (16 - (bit & 7) - bits)) & ((1u << bits) - 1u);
    }
    return (d.elem == ElemType::kInt && d.is_signed) ? sign_extend(raw, bits) : static_cast<int32_t>(raw);
}
// Writes code q of element i into a block's bytes, which the caller zeroed.
QT_HD void decl_pack_one(const Decl& d, uint8_t* block_bytes, int64_t i, int32_t q) {
    const int bits = d.bits;
    const uint32_t v = static_cast<uint32_t>(q) & ((1u << bits) - 1u);
    if (bits == 8) {
        block_bytes[i] = static_cast<uint8_t>(v);
        return;
    }
    const int64_t bit = i * bits;
    if (d.packing == Packing::kLsbFirst) {
        const uint32_t two = v << (bit & 7);
        block_bytes[bit >> 3] = static_cast<uint8_t>(block_bytes[bit >> 3] | (two & 0xFFu));
        if ((bit & 7) + bits > 8) block_bytes[(bit >> 3) + 1] = static_cast<uint8_t>(block_bytes[(bit >> 3) + 1] | (two >> 8));
    } else {
        const uint32_t w = v << (16 - (bit & 7) - bits);  // bits of a 16-bit big-endian window
        block_bytes[bit >> 3] = static_cast<uint8_t>(block_bytes[bit >> 3] | (w >> 8));
        if ((bit & 7) + bits > 8) block_bytes[(bit >> 3) + 1] = static_cast<uint8_t>(block_bytes[(bit >> 3) + 1] | (w & 0xFFu));
    }
}

// ---- the block --------------------------------------------------------------------------------------
enum class BlockState : uint8_t { kQuantize = 0, kPoisoned = 1, kRangeOverflow = 2 };

// Scale (and offset) of a block from its absmax (or NaN/inf marker) and, for offset `min`, its lo
// and hi in totalOrder. absmax_bits >= kInfBits means a non-finite element. *mult: the block's
// multiplier m for the scales that multiply (decl_code_t's m), 0 otherwise.
QT_HD_BLOCK BlockState decl_plan(const Decl& d, uint32_t absmax_bits, float lo, float hi, float* scale, float* offset,
                                 float* mult) {
    *offset = d.offset_min ? lo : 0.0f;
    *mult = 0.0f;
    if (absmax_bits >= kInfBits) return BlockState::kPoisoned;
    float a = bits_f32(absmax_bits);
    if (d.offset_min) {
        a = (hi == lo) ? 0.0f : sub_rn(hi, lo);
        if (f32_bits(a) == kInfBits) return BlockState::kRangeOverflow;
    }
    const float s = decl_scale(d, a);
    if (f32_bits(s) == kInfBits) return BlockState::kRangeOverflow;
    *scale = s;
    if (multiplies(d.scale)) *mult = decl_multiplier(d, a);
    return BlockState::kQuantize;
}

}  // namespace qtransit::kernels
