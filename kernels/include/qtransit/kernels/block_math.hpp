// The block arithmetic of every format (NUMERICS.md section 1 with docs/DECISIONS.md), defined once
// for the CPU and CUDA backends. Every binary32 operation is spelled out (div_rn, mul_rn, ...) so
// that neither compiler can fuse or reassociate it: on the device the _rn intrinsics are never
// contracted into an FMA, on the host the build uses -ffp-contract=off.
//
// The functions are element-wise on purpose: the CPU backend calls them in straight loops over a
// block, which the compiler vectorizes, and a CUDA thread calls them on its elements.
#pragma once

#include <cstdint>

#include "qtransit/kernels/fp16.hpp"
#include "qtransit/common/hd.hpp"
#include "qtransit/common/transit.hpp"

namespace qtransit::kernels {

inline constexpr float kFltMax = 3.40282346638528859812e+38f;
inline constexpr float kMinSubnormal = 1.40129846432481707092e-45f;  // 2^-149
inline constexpr uint32_t kInfBits = 0x7f800000u;
inline constexpr uint32_t kQuietNanBits = 0x7fc00000u;  // the one NaN a poisoned block decodes to (D4)

// Kinds as small integers, so device code needs no std::string-bearing type.
enum class Kind : uint8_t { kSym = 0, kAsym = 1, kDs = 2, kDecl = 3, kQr = 4 };

QT_HD float div_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
    return __fdiv_rn(a, b);
#else
    return a / b;
#endif
}
QT_HD float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
    return __fmul_rn(a, b);
#else
    return a * b;
#endif
}
QT_HD float add_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
    return __fadd_rn(a, b);
#else
    return a + b;
#endif
}
// a b + c with one rounding (a declared decode = "fma"): the device's fma.rn, the host's fmaf (an FMA
// instruction or libm's correctly rounded one).
QT_HD float fma_rn(float a, float b, float c) {
#if defined(__CUDA_ARCH__)
    return __fmaf_rn(a, b, c);
#else
    return __builtin_fmaf(a, b, c);
#endif
}
QT_HD float sub_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
    return __fsub_rn(a, b);
#else
    return a - b;
#endif
}
// Round to the nearest integer, ties to even (the default rounding mode on both sides).
QT_HD float rne(float v) {
#if defined(__CUDA_ARCH__)
    return rintf(v);
#else
    return __builtin_rintf(v);
#endif
}
QT_HD float fmin_(float a, float b) { return b < a ? b : a; }
QT_HD float fmax_(float a, float b) { return a < b ? b : a; }
QT_HD float clampf(float v, float lo, float hi) { return fmin_(fmax_(v, lo), hi); }
QT_HD int32_t clampi(int32_t v, int32_t lo, int32_t hi) { return v < lo ? lo : (v > hi ? hi : v); }
// rne(v) as an integer. Every caller passes |v| well inside int32 (a quotient bounded by the code
// range plus rounding), so the conversion is exact, and clamping the integer equals clamping the
// float it came from; integer min/max also vectorize without the mask juggling of float compares.
QT_HD int32_t rne_i(float v) { return static_cast<int32_t>(rne(v)); }
// D1: a decoded value approximates a finite input, so it is kept finite.
QT_HD float sat(float v) { return clampf(v, -kFltMax, kFltMax); }
QT_HD float abs_bits_f(uint32_t abs_bits) { return bits_f32(abs_bits); }

// Sortable key of a binary32 value: unsigned order of keys is IEEE totalOrder on non-NaN values,
// so -0 < +0 (D2) and block min/max become integer reductions, which vectorize.
QT_HD uint32_t order_key(float v) {
    const uint32_t u = f32_bits(v);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
QT_HD float from_order_key(uint32_t k) { return bits_f32((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k); }

// round_f16(v) without branches, so that element loops vectorize (round_f16's integer emulation does
// not): adding c = 2^(e + 13), e the binade of |v| raised to binary16's least normal exponent -14, puts
// |v| in c's binade, where the binary32 spacing is 2^(e - 10), binary16's there (2^-24 below 2^-14);
// the add rounds to nearest even at that spacing and subtracting c again is exact. |v| >= 65520 gives
// inf and a NaN the quiet NaN, as round_f16 does, by selects; the sign is put back (zeros keep theirs).
// Equal to round_f16 on every binary32 value (kernel_golden_test: every non-negative one and the
// signs of a sample; a sample under the sanitizers). The element loops of ds-int<b>, quickreduce-q<b>
// and the binary16 sums use it; the per-block steps keep round_f16.
QT_HD float round_f16_fast(float v) {
    const uint32_t a = f32_bits(v) & 0x7fffffffu, e = a & 0x7f800000u;
    const float c = bits_f32((e > 0x38800000u ? e : 0x38800000u) + (13u << 23));
    const uint32_t r = f32_bits(sub_rn(add_rn(bits_f32(a), c), c));
    const uint32_t big = a > 0x7f800000u ? 0x7fc00000u : 0x7f800000u;
    return bits_f32((a >= 0x477ff000u ? big : r) | (f32_bits(v) & 0x80000000u));
}
// ---- int<b>: symmetric absmax, restricted range (NUMERICS 1.1) ---------------------------------
QT_HD int32_t sym_qmax(int bits) { return (1 << (bits - 1)) - 1; }

// s = max(fl32(a / qmax), 2^-149), or 0 for an all-zero block.
QT_HD float sym_scale(float absmax, int bits) {
    if (absmax == 0.0f) return 0.0f;
    return fmax_(div_rn(absmax, static_cast<float>(sym_qmax(bits))), kMinSubnormal);
}
// q = clamp(rne(fl32(x / s)), -qmax, qmax). The caller passes s != 0 (a zero block has all codes 0).
QT_HD int32_t sym_code(float x, float s, int32_t qmax) { return clampi(rne_i(div_rn(x, s)), -qmax, qmax); }
QT_HD float sym_decode(int32_t q, float s) { return sat(mul_rn(static_cast<float>(q), s)); }

// ---- int<b>-asym: min/max affine (NUMERICS 1.2) ------------------------------------------------
QT_HD int32_t asym_levels(int bits) { return (1 << bits) - 1; }

// s = max(fl32(fl32(hi - lo) / (2^b - 1)), 2^-149); 0 when hi == lo; +inf when the range
// overflows binary32 (the caller turns that into a range overflow, section 4).
QT_HD float asym_scale(float lo, float hi, int bits) {
    if (hi == lo) return 0.0f;
    const float range = sub_rn(hi, lo);
    if (f32_bits(range) == kInfBits) return bits_f32(kInfBits);
    return fmax_(div_rn(range, static_cast<float>(asym_levels(bits))), kMinSubnormal);
}
QT_HD int32_t asym_code(float x, float lo, float s, int32_t levels) {
    return clampi(rne_i(div_rn(sub_rn(x, lo), s)), 0, levels);
}
// x̂ = sat(fl32(sat(fl32(q s)) + lo)); a constant block (s == 0) decodes to lo exactly, its sign
// of zero included.
QT_HD float asym_decode(int32_t q, float s, float lo) {
    if (s == 0.0f) return lo;
    return sat(add_rn(sat(mul_rn(static_cast<float>(q), s)), lo));
}

// ---- ds-int<b>: DeepSpeed-compatible (NUMERICS 1.3) --------------------------------------------
// The block's absmax after the fp16 rounding: fl16 is monotone and odd, so absmax(fl16(x_i)) =
// fl16(absmax(x_i)). Returns +inf when it overflows binary16 (D3).
QT_HD float ds_absmax(float absmax_f32) { return round_f16(absmax_f32); }
// scale = fl32(2^b / fl32(2a)); the stored step is Δ = fl32(1 / scale); for a == 0, Δ = 1.
QT_HD float ds_scale(float a16, int bits) {
    return div_rn(static_cast<float>(1 << bits), add_rn(a16, a16));
}
QT_HD float ds_step(float a16, int bits) { return a16 == 0.0f ? 1.0f : div_rn(1.0f, ds_scale(a16, bits)); }
// q = clamp(rne(fl32(fl16(x) * scale)), -2^(b-1), 2^(b-1) - 1). Not called for a block whose
// fp16 absmax is 0 (its scale would be infinite; every code is 0).
QT_HD int32_t ds_code(float x, float scale, int32_t cmin, int32_t cmax) {
    return clampi(rne_i(mul_rn(round_f16_fast(x), scale)), cmin, cmax);
}
QT_HD float ds_decode(int32_t q, float step) { return round_f16_fast(mul_rn(static_cast<float>(q), step)); }

// ---- quickreduce-q<b>: QuickReduce's codecs (docs/FORMATS.md section 11, docs/SOURCES.md 2.3-2.9) --
// Every step is one binary16 operation, RNE with subnormals kept, written as the exact binary32 result
// rounded once to binary16 (round_f16): a product of two binary16 values (11 bits each) and the
// product of one with a power of two are exact in binary32; a sum or quotient of two binary16
// values rounded to binary32 first and then to binary16 is still correctly rounded (24 >= 2 * 11 + 2).
// The group's extreme m is its signed extreme: the binary16 maximum if its magnitude is strictly
// larger than the minimum's, else the minimum (a tie takes the negative one). The stored scale is
// dec = fl16(m * -2^-(b-1)) (negative for m > 0, so that m takes the lowest code), the encode
// factor enc = rcp16(fl16(dec + 2^-24)), saturated at ±65504 where the reciprocal overflows binary16
// (QuickReduce sets FP16_OVFL: SOURCES 2.8), and codes are u = rne(clamp(fl16(fl16(x) enc), -2^(b-1),
// 2^(b-1) - 1)) + 2^(b-1), decoded as fl16((u - 2^(b-1)) dec).
QT_HD int32_t qr_bias(int bits) { return 1 << (bits - 1); }
QT_HD float qr_extreme(float lo16, float hi16) {
    const float ahi = hi16 < 0 ? -hi16 : hi16, alo = lo16 < 0 ? -lo16 : lo16;
    return ahi > alo ? hi16 : lo16;
}
QT_HD float qr_dec(float m16, int bits) { return round_f16(mul_rn(m16, -bits_f32(static_cast<uint32_t>(128 - bits) << 23))); }
QT_HD float qr_enc(float dec) {
    const float t = round_f16(add_rn(dec, 0x1p-24f));
    if (t == 0.0f) return 65504.0f;  // 1 / +0 (dec = -2^-24): +inf, saturated
    return clampf(round_f16(div_rn(1.0f, t)), -65504.0f, 65504.0f);
}
QT_HD int32_t qr_code(float x, float enc, int bits) {
    const float top = static_cast<float>(qr_bias(bits));
    return rne_i(clampf(round_f16_fast(mul_rn(round_f16_fast(x), enc)), -top, top - 1.0f)) + qr_bias(bits);
}
QT_HD float qr_decode(int32_t u, float dec, int bits) {
    return round_f16_fast(mul_rn(static_cast<float>(u - qr_bias(bits)), dec));
}

// ---- one decode for every kind ------------------------------------------------------------------
// scale: s (sym, asym), Δ (ds) or dec (qr); a NaN scale marks a poisoned block (D4). bits: qr's width.
QT_HD float decode_one(Kind kind, int32_t q, float scale, float lo, int bits = 8) {
    if (scale != scale) return bits_f32(kQuietNanBits);
    switch (kind) {
        case Kind::kSym: return sym_decode(q, scale);
        case Kind::kAsym: return asym_decode(q, scale, lo);
        case Kind::kQr: return qr_decode(q, scale, bits);
        default: return ds_decode(q, scale);
    }
}

// ---- sums (NUMERICS 3 with docs/DECISIONS.md D11, D24) -------------------------------------------
// A sum starts from its first term; every later term is added with the running sum as the left
// operand. fp32: fl32(acc + t). fp16 (bf16): every term is rounded to binary16 (bfloat16) first,
// and each add is fl16(fl32(a + b)) (flbf16(fl32(a + b))), the correctly rounded sum of two values
// of the type: 24 >= 2p + 2 for p = 11 and p = 8, so the double rounding is innocuous.
// NCCL's FP8 add (D41): fl8(fl16(a + b)), NCCL's __hadd of the two values widened to binary16 and
// the conversion back with __NV_SATFINITE. fp8_round_unsat rounds a binary16 value (or an infinite
// one) to nearest even on the FP8 grid without the clamp (e4m3: 3 mantissa bits, smallest normal
// 2^-6; e5m2: 2 bits, 2^-14): a magnitude past the largest finite value (448, 57344) is a
// saturation, which fp8_round_sat clamps to it. The quotient m / 2^(e - mantissa) is exact (a
// power-of-two scaling of a binary16 value), so one rne rounds.
// (On the device a call, not inlined: the fused kernels take the accumulation as an argument, and
// FP8's branch inlined into each of their instantiations took the GPU bundle to 70 MiB, past the
// 64 MiB a device call can carry; as a call it is 60.6 MiB.)
#if defined(__CUDACC__)
#define QT_HD_CALL inline __host__ __device__ __noinline__
#else
#define QT_HD_CALL inline
#endif
QT_HD float fp8_round_unsat(float h, Accum a) {
    const float m = h < 0 ? -h : h;
    if (!(m < kFltMax) || m == 0.0f) return h;  // inf, NaN, zeros
    const int man = a == Accum::kFp8E4m3 ? 3 : 2, emin = a == Accum::kFp8E4m3 ? -6 : -14;
    int e = static_cast<int>((f32_bits(m) >> 23) & 0xffu) - 127;  // m is a binary32 normal (binary16's least is 2^-24)
    if (e < emin) e = emin;
    const float q = bits_f32(static_cast<uint32_t>(e - man + 127) << 23);
    const float r = mul_rn(rne(div_rn(m, q)), q);
    return h < 0 ? -r : r;
}
// v rounded to the FP8 grid and clamped to its largest finite value (__NV_SATFINITE).
QT_HD float fp8_sat(float v, Accum a) {
    const float mx = static_cast<float>(saturation_max(a));
    return clampf(fp8_round_unsat(v, a), -mx, mx);
}
QT_HD bool fp8_saturates(float v, Accum a) {
    const float r = fp8_round_unsat(round_f16(v), a), mx = static_cast<float>(saturation_max(a));
    return r > mx || r < -mx;
}
QT_HD_CALL float fp8_round_sat(float v, Accum a) { return fp8_sat(round_f16(v), a); }
// A binary32 value cast to the type in one rounding (D49): FP8 straight from binary32 (fp8_sat:
// __nv_cvt_float_to_fp8 with __NV_SATFINITE, torch's .to(float8)), not through binary16 as NCCL's
// add is; bf16 and fp16 as accum_round. An FP8 tensor's values (an input type), an FP8 output.
QT_HD float cast_to(float v, Accum a);
QT_HD bool cast_saturates(float v, Accum a) {
    if (!saturating(a)) return false;
    const float r = fp8_round_unsat(v, a), mx = static_cast<float>(saturation_max(a));
    return r > mx || r < -mx;
}

QT_HD float accum_round(float v, Accum a) {
    return a == Accum::kFp16   ? round_f16_fast(v)
           : a == Accum::kBf16 ? round_bf16(v)
           : saturating(a)     ? fp8_round_sat(v, a)
                               : v;
}
// Whether accum_round(v, a) clamped v: an FP8 accumulation's saturation (D41); never for the others.
QT_HD bool accum_saturates(float v, Accum a) { return saturating(a) && fp8_saturates(v, a); }
QT_HD float cast_to(float v, Accum a) { return saturating(a) ? fp8_sat(v, a) : accum_round(v, a); }
QT_HD float accum_first(float t, Accum a) { return accum_round(t, a); }
// x / N for a mean (docs/DECISIONS.md D27): the binary32 quotient, rounded to the type t (as torch
// divides a bf16 or fp16 tensor: in binary32, then back).
// NCCL's FP8 paths (D41) divide as ncclAvg does: every input times f = fl8sat(fl32(1/N)) (computed on
// the host, float to FP8 directly), the product rounded to binary16 (__hmul) and then to FP8 with
// saturation; x f is exact in binary32 (two values of at most 4 significant bits).
QT_HD float nccl_avg_factor(float n, Accum t) { return fp8_sat(div_rn(1.0f, n), t); }
QT_HD float divide_round(float x, float n, Accum t) {
    return saturating(t) ? accum_round(mul_rn(x, nccl_avg_factor(n, t)), t) : accum_round(x / n, t);
}
QT_HD float accum_add(float acc, float t, Accum a) { return accum_round(add_rn(acc, accum_round(t, a)), a); }

// ---- packing (NUMERICS 1.3, 1.4) -----------------------------------------------------------------
// Codes of one block occupy ceil(len * bits / 8) bytes; packing restarts at every block.
// 8 bits: one byte per code. 4 bits: canonical puts element 2j in the low nibble; ds-int4 in the
// high nibble (DeepSpeed's PackedInt4). Other widths: an LSB-first bit stream. Signed codes are
// two's complement in their width, asym codes unsigned.
QT_HD int32_t sign_extend(uint32_t v, int bits) {
    const uint32_t m = 1u << (bits - 1);
    return static_cast<int32_t>((v ^ m) - m);
}
QT_HD int32_t unpack_one(Kind kind, int bits, const uint8_t* block_bytes, int64_t i) {
    uint32_t raw;
    if (bits == 8) {
        raw = block_bytes[i];
    } else if (bits == 4) {
        const uint8_t byte = block_bytes[i >> 1];
        const bool high = (kind == Kind::kDs) ? !(i & 1) : (i & 1);
        raw = high ? (byte >> 4) : (byte & 0xFu);
    } else {
        const int64_t bit = i * bits;
        const uint32_t two = block_bytes[bit >> 3] |
                             ((((bit & 7) + bits) > 8) ? (static_cast<uint32_t>(block_bytes[(bit >> 3) + 1]) << 8) : 0u);
        raw = (two >> (bit & 7)) & ((1u << bits) - 1u);
    }
    return kind == Kind::kAsym || kind == Kind::kQr ? static_cast<int32_t>(raw) : sign_extend(raw, bits);
}

}  // namespace qtransit::kernels
