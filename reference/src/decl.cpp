// The reference quantizer for declared formats, written from the text of docs/FORMATS.md (sections
// 1-6) and NUMERICS.md section 4 alone. Scalar, one element at a time.
//
// What is exact and what is rounded:
// - every binary32 rounding the spec names (fl32(x - lo), fl32(x / s), fl32(a / A), fl32(hi - lo),
//   fl32(val * s), fl32(p + lo)) and fl16 is our own correctly rounded routine (binary32.hpp), never
//   the compiler's float arithmetic;
// - the element rounding of sections 3/4 is decided on exact values: t = |v| 2^d is split into an
//   integer floor (bit shifts of v's significand) and an exact fraction (Exact), compared exactly
//   with 1/2 and with the stochastic U;
// - the e8m0 exponents come from the exact value a: floor(log2 a) from its bits, and rceil's
//   "smallest e with a <= A 2^e" by exact comparisons;
// - table rounding compares v exactly with the values and with the exact midpoints (computed here
//   in Exact, not taken from Decl::mid).
#include <algorithm>
#include <bit>
#include <cassert>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "binary32.hpp"
#include "decl_internal.hpp"
#include "qtransit/common/philox.hpp"
#include "qtransit/common/shortest.hpp"

namespace qtransit::reference::detail {

namespace {

const Exact& ex_half() { static const Exact v = Exact::pow2(-1); return v; }
const Exact& ex_u() { static const Exact v = Exact::pow2(-24); return v; }
const Exact& ex_2m150() { static const Exact v = Exact::pow2(-150); return v; }
const Exact& ex_fltmax() { static const Exact v = Exact(kFltMax); return v; }

// |v| = m 2^e with m < 2^24 an integer (v finite binary32), from its bits.
void split(float v, uint32_t& m, int& e) {
    const uint32_t b = std::bit_cast<uint32_t>(v) & 0x7FFFFFFFu;
    const uint32_t ef = b >> 23;
    m = (b & 0x7FFFFFu) | (ef != 0 ? 0x800000u : 0u);
    e = ef != 0 ? static_cast<int>(ef) - 150 : -149;
}

constexpr int64_t kHuge = int64_t{1} << 40;  // any integer this large saturates every element type

bool nearest(Rounding r) {
    return r == Rounding::kNearestEven || r == Rounding::kNearestAway || r == Rounding::kNearestDown;
}

// FORMATS.md section 4 on t = |v| 2^d (exact), v finite. neg: v < 0 (nearest-down's tie rule).
// u24: the stochastic draw (w >> 8). Returns the rounded integer, capped at kHuge.
int64_t round_grid(float v, int d, Rounding mode, bool neg, uint32_t u24) {
    uint32_t m = 0;
    int e = 0;
    split(v, m, e);
    if (m == 0) return 0;
    const int sh = e + d;
    if (sh >= 0) return sh > 40 - 24 ? kHuge : static_cast<int64_t>(m) << sh;  // t is an integer: fr = 0
    const int k = -sh;
    const int64_t fl = k >= 32 ? 0 : static_cast<int64_t>(m >> k);
    const Exact fr = Exact::from_int(static_cast<int64_t>(m) - (fl << std::min(k, 62))) * Exact::pow2(-k);
    if (fr.sign() == 0) return fl;
    bool up = false;
    switch (mode) {
        case Rounding::kNearestEven: up = fr > ex_half() || (fr == ex_half() && (fl & 1) != 0); break;
        case Rounding::kNearestAway: up = fr >= ex_half(); break;
        case Rounding::kNearestDown: up = fr > ex_half() || (fr == ex_half() && neg); break;
        case Rounding::kTowardZero: up = false; break;
        case Rounding::kStochastic: up = Exact::from_int(u24) * Exact::pow2(-24) < fr; break;
    }
    return up ? fl + 1 : fl;
}

// Largest finite magnitude of a float element type, and its bit layout.
struct FloatLayout {
    int E, M, bias, emin;
    uint32_t all_ones_exp;
};
FloatLayout layout(const Decl& d) {
    return {d.exp_bits, d.man_bits, d.bias, 1 - d.bias, (1u << d.exp_bits) - 1u};
}

// The code of a non-negative float element value `mag` (on the grid, <= the largest finite value).
uint32_t float_code_of(const Decl& d, double mag, bool neg) {
    const FloatLayout L = layout(d);
    uint32_t field = 0, mant = 0;
    if (mag != 0) {
        int ex = 0;
        (void)std::frexp(mag, &ex);
        const int e = ex - 1;  // floor(log2 mag)
        if (e < L.emin) {
            mant = static_cast<uint32_t>(std::ldexp(mag, L.M - L.emin));  // exact: mag is on the subnormal grid
        } else {
            field = static_cast<uint32_t>(e + L.bias);
            mant = static_cast<uint32_t>(std::ldexp(mag, L.M - e)) - (1u << L.M);
        }
    }
    return (neg ? 1u << (d.bits - 1) : 0u) | (field << L.M) | mant;
}

// The value of a code (exact, as a double), or NaN for a float NaN/inf code (FORMATS.md section 5).
double value_of(const Decl& d, int32_t q) {
    switch (d.elem) {
        case ElemType::kInt: return std::ldexp(static_cast<double>(q), -d.fraction_bits);
        case ElemType::kTable: {
            if (q < 0 || q >= d.table_size) return std::numeric_limits<double>::quiet_NaN();
            return static_cast<double>(d.table[q]);
        }
        case ElemType::kFloat: {
            const FloatLayout L = layout(d);
            const uint32_t c = static_cast<uint32_t>(q) & ((1u << d.bits) - 1u);
            const bool neg = (c >> (d.bits - 1)) & 1u;
            const uint32_t field = (c >> L.M) & L.all_ones_exp;
            const uint32_t mant = c & ((1u << L.M) - 1u);
            if (d.special == FloatSpecial::kIeee && field == L.all_ones_exp)
                return std::numeric_limits<double>::quiet_NaN();
            if (d.special == FloatSpecial::kNanOnly && field == L.all_ones_exp && mant == (1u << L.M) - 1u)
                return std::numeric_limits<double>::quiet_NaN();
            double mag = field == 0 ? std::ldexp(static_cast<double>(mant), L.emin - L.M)
                                    : std::ldexp(static_cast<double>((1u << L.M) + mant),
                                                 static_cast<int>(field) - L.bias - L.M);
            return neg ? -mag : mag;
        }
    }
    return std::numeric_limits<double>::quiet_NaN();
}

// The NaN code a float element with scale `none` writes for a poisoned block: sign 0, rest ones.
bool has_nan_code(const Decl& d) { return d.elem == ElemType::kFloat && d.special != FloatSpecial::kNone; }
int32_t nan_code(const Decl& d) { return static_cast<int32_t>((1u << (d.bits - 1)) - 1u); }

// Encode one v (binary32, finite) to a code. u24: the stochastic draw.
int32_t encode_value(const Decl& d, float v, uint32_t u24) {
    const bool neg = std::signbit(v);
    const float av = std::fabs(v);
    if (std::isinf(v)) {
        // fl32(x / s) overflows when the element's largest value is near FLT_MAX (a table holding
        // FLT_MAX) or a subnormal scale lost bits: the element saturates, as any v past its largest
        // value does (FORMATS.md: round, then saturate).
        switch (d.elem) {
            case ElemType::kInt: return neg ? d.qmin : d.qmax;
            case ElemType::kFloat: return static_cast<int32_t>(float_code_of(d, d.max_finite, neg));
            case ElemType::kTable: return neg ? 0 : d.table_size - 1;
        }
    }
    switch (d.elem) {
        case ElemType::kInt: {
            const int64_t r = round_grid(av, d.fraction_bits, d.rounding, neg, u24);
            const int64_t q = neg ? -r : r;
            return static_cast<int32_t>(std::clamp<int64_t>(q, d.qmin, d.qmax));
        }
        case ElemType::kFloat: {
            const FloatLayout L = layout(d);
            if (av == 0) return static_cast<int32_t>(float_code_of(d, 0, neg));
            const int e = static_cast<int>(Exact(av).ilogb());
            const int k = std::max(e, L.emin) - L.M;
            const int64_t r = round_grid(av, -k, d.rounding, neg, u24);  // <= 2^(M+1): a carry at most
            double mag = std::ldexp(static_cast<double>(r), k);
            if (mag > static_cast<double>(d.max_finite)) mag = d.max_finite;  // saturation
            return static_cast<int32_t>(float_code_of(d, mag, neg));
        }
        case ElemType::kTable: {
            const int n = d.table_size;
            const Exact ev(v);
            if (ev <= Exact(d.table[0])) return 0;
            if (ev >= Exact(d.table[n - 1])) return n - 1;
            int i = 0;  // values[i] <= v < values[i+1]
            while (!(ev < Exact(d.table[i + 1]))) ++i;
            const Exact lo(d.table[i]), hi(d.table[i + 1]);
            if (ev == lo) return i;
            const Exact mid = (lo + hi) * ex_half();
            if (ev < mid) return i;
            if (ev > mid) return i + 1;
            switch (d.rounding) {  // an exact midpoint: the mode's tie rule
                case Rounding::kNearestEven: return (i % 2 == 0) ? i : i + 1;
                case Rounding::kNearestDown: return i;
                case Rounding::kNearestAway: {
                    const Exact al = lo.abs(), ah = hi.abs();
                    if (ah > al) return i + 1;
                    if (al > ah) return i;
                    return neg ? i : i + 1;  // equal magnitudes (v = ±0): away in the direction of v's sign
                }
                default: break;  // refused by finalize()
            }
            return i;
        }
    }
    return 0;
}

// fl32(p + lo) of a double p and a binary32 lo, rounded once (decode = "fma"): p + lo = t + err exactly
// (TwoSum; no overflow in double), |err| at most half an ulp of the double t. fl32(t + err) = fl32(t)
// unless t is itself the midpoint of two binary32 neighbours (a double one ulp from a midpoint is still
// on its side: |err| < one ulp), and then err's sign decides (err == 0: the tie, to even).
float add_once32(double p, float lo) {
    const double b = static_cast<double>(lo);
    const double t = p + b;
    const double bb = t - p;
    const double err = (p - (t - bb)) + (b - bb);
    if (err == 0) return fl32(t);
    const double inf = std::numeric_limits<double>::infinity();
    const float below = fl32(std::nextafter(t, -inf)), above = fl32(std::nextafter(t, inf));
    if (below == above) return fl32(t);  // not a midpoint
    return err > 0 ? above : below;
}

// Decode one code (FORMATS.md section 5).
float decode_one(const Decl& d, int32_t q, float s, float lo) {
    if (std::isnan(s) || (d.offset_min && std::isnan(lo))) return poison_nan();
    const double val = value_of(d, q);
    if (std::isnan(val)) return poison_nan();
    if (d.offset_min && s == 0) return lo;
    // val (<= 24 significant bits) * s (24 bits): exact in double, one rounding to binary32.
    if (d.decode_fma) return sat(add_once32(val * static_cast<double>(s), lo));
    const float p = sat(fl32(val * static_cast<double>(s)));
    if (!d.offset_min) return p;
    return sat(add32(p, lo));
}

// lo/hi with IEEE totalOrder for zeros (D2).
void lo_hi(std::span<const float> x, float& lo, float& hi) {
    lo = x[0];
    hi = x[0];
    for (float v : x) {
        if (v < lo || (v == lo && std::signbit(v) && !std::signbit(lo))) lo = v;
        if (v > hi || (v == hi && !std::signbit(v) && std::signbit(hi))) hi = v;
    }
}

enum class Problem { kNone, kNonFinite, kRangeOverflow, kScaleOverflow };
struct BlockScale {
    Problem problem = Problem::kNone;
    int64_t index = -1;  // the non-finite element (local)
    float a = 0, lo = 0, hi = 0, s = 0;
    float s_unrounded = 0;  // fp16: the binary32 scale before fl16 (for the message)
    float m = 0;            // the scales that multiply: the multiplier (multiplier_of); 0 otherwise
};

// The multiplier of a block of statistic a (absmax, or the range with an offset) under a scale that
// multiplies: fl32(A / max(a, F)), or fl32(A / fl32(a + eps)) for fp32-eps-mul.
// NVFP4's E4M3 block scale (e4m3-tensor-amax, FORMATS.md section 2): t >= 0 to the nearest of E4M3's
// finite non-negative values, ties to the even code, anything past 448 to 448 (satfinite). The grid is
// enumerated (codes 0..126, in increasing value), not computed from t's exponent as the kernels do.
float e4m3_satfinite(float t) {
    auto value = [](int c) { return c < 8 ? std::ldexp(static_cast<double>(c), -9) : std::ldexp(8.0 + (c & 7), (c >> 3) - 10); };
    if (!(static_cast<double>(t) < value(126))) return 448.0f;
    int c = 0;
    while (value(c + 1) <= t) ++c;  // value(c) <= t < value(c + 1)
    if (value(c) == t) return static_cast<float>(value(c));
    const double lo = value(c), hi = value(c + 1), mid = (lo + hi) / 2;  // exact in binary64
    const bool up = t > mid || (t == mid && (c & 1));
    return static_cast<float>(up ? hi : lo);
}
// s_b = E4M3(fl32(a fl32(S_enc fl32(1/A)))), with S_enc = min(fl32(448 A / T), FLT_MAX), 1 for T = 0 or
// a quotient of 0 (Transformer Engine's compute_global_encode_scaling_factor_FP4, SOURCES.md 5.1-5.2).
struct Nvfp4 {
    float enc = 1, dec = 1, sb = 0;
};
Nvfp4 nvfp4_of(const Decl& d, float a) {
    Nvfp4 n;
    const float k = mul32(448.0f, d.amp);
    if (d.tensor_amax != 0) n.enc = std::min(div32(k, d.tensor_amax), std::numeric_limits<float>::max());
    if (n.enc == 0) n.enc = 1;
    n.dec = div32(1.0f, n.enc);
    n.sb = e4m3_satfinite(mul32(a, mul32(n.enc, div32(1.0f, d.amp))));
    return n;
}

float multiplier_of(const Decl& d, float a) {
    if (d.scale == ScaleType::kE4m3TensorAmax) {
        // m = min(fl32(1 / fl32(s_b S_dec)), FLT_MAX): 1 / 0 is inf, capped (SOURCES.md 5.3).
        const Nvfp4 n = nvfp4_of(d, a);
        const float q = mul32(n.sb, n.dec);
        return q == 0 ? std::numeric_limits<float>::max() : std::min(div32(1.0f, q), std::numeric_limits<float>::max());
    }
    if (d.scale == ScaleType::kFp32EpsMul) return div32(d.amp, add32(a, d.amax_eps));
    return div32(d.amp, std::max(a, d.amax_floor));
}

// The scale of one block (FORMATS.md section 2), or what is wrong with it (D8: a non-finite value
// wins over a range overflow).
BlockScale block_scale(const Decl& d, std::span<const float> x) {
    BlockScale b;
    for (size_t i = 0; i < x.size(); ++i)
        if (!std::isfinite(x[i])) {
            b.problem = Problem::kNonFinite;
            b.index = static_cast<int64_t>(i);
            return b;
        }
    if (d.offset_min) {
        lo_hi(x, b.lo, b.hi);
        b.a = sub32(b.hi, b.lo);
        if (std::isinf(b.a)) {
            b.problem = Problem::kRangeOverflow;
            return b;
        }
    } else {
        for (float v : x) b.a = std::max(b.a, std::fabs(v));
    }
    const float a = b.a;
    const float amp = d.amp;  // exact binary32 (finalize)
    switch (d.scale) {
        case ScaleType::kFp32Absmax:
        case ScaleType::kFp16Absmax: {
            if (a == 0) {
                b.s = 0;
                break;
            }
            float s = std::max(div32(a, amp), kMinSub);
            b.s_unrounded = s;
            if (std::isinf(s)) {
                b.problem = Problem::kScaleOverflow;
                return b;
            }
            if (d.scale == ScaleType::kFp16Absmax) {
                s = round_to_fp16(s);
                if (s == 0) s = 0x1p-24f;
                if (std::isinf(s)) {
                    b.problem = Problem::kScaleOverflow;
                    return b;
                }
            }
            b.s = s;
            break;
        }
        case ScaleType::kE8m0Floor:
        case ScaleType::kE8m0Rceil:
        case ScaleType::kE8m0Even:
        case ScaleType::kE8m0FbgemmEven:
        case ScaleType::kE8m0Ceil: {
            int e = -127;
            if (d.scale == ScaleType::kE8m0FbgemmEven) {
                // FBGEMM's MX4 "even" (FORMATS.md section 2), from the exact value: a = 0 reads as
                // 2^-126. A normal a of exponent E goes to E + 1 when strictly above
                // 2^(E+1) - 2^(E-M-1) (its bits plus 2^(22-M) - 1 carry into the exponent field); a
                // subnormal one (field 0, read as 2^-127) goes to -126 when at least
                // 2^-126 - 2^(-127-M) + 2^-149 (the carry out of its 23 fraction bits). Then
                // e = clamp(E - emax_elem, -127, 125).
                const Exact ea(a == 0 ? 0x1p-126f : a);
                int64_t E;
                if (ea < Exact::pow2(-126)) {
                    E = ea < Exact::pow2(-126) - Exact::pow2(-127 - d.man_bits) + Exact::pow2(-149) ? -127 : -126;
                } else {
                    E = ea.ilogb();
                    if (ea > Exact::pow2(static_cast<int>(E + 1)) - Exact::pow2(static_cast<int>(E - d.man_bits - 1))) ++E;
                }
                e = static_cast<int>(std::clamp<int64_t>(E - d.emax_elem, -127, 125));
            } else if (a != 0) {
                const Exact ea(a);
                if (d.scale == ScaleType::kE8m0Floor) {
                    e = static_cast<int>(ea.ilogb()) - d.emax_elem;
                } else if (d.scale == ScaleType::kE8m0Even || d.scale == ScaleType::kE8m0Ceil) {
                    // torchao's EVEN and CEIL (FORMATS.md section 2), from the exact value: E is
                    // floor(log2 a), or -127 below the normal range (torchao reads binary32's exponent
                    // field, 0 for a subnormal). even: the next power of two when a is within half a unit
                    // of the element's last mantissa place of it, a >= 2^(E+1) - 2^(E-M-1); ceil: the next
                    // one whenever a is not 2^E (a subnormal a always: its field says 2^-127, its
                    // mantissa is not zero).
                    const int64_t E = std::max<int64_t>(ea.ilogb(), -127);
                    bool up;
                    if (d.scale == ScaleType::kE8m0Even)
                        up = !(ea < Exact::pow2(static_cast<int>(E + 1)) - Exact::pow2(static_cast<int>(E - d.man_bits - 1)));
                    else
                        up = E == -127 || ea > Exact::pow2(static_cast<int>(E));
                    e = static_cast<int>(E + (up ? 1 : 0)) - d.emax_elem;
                } else {
                    // The smallest integer e with a <= A 2^e. With e0 = ilogb(a) - ilogb(A) - 1,
                    // A 2^e0 < 2^(ilogb(A)+1) 2^e0 = 2^ilogb(a) <= a, so e0 fails and we count up.
                    const Exact eA(amp);
                    int64_t ee = ea.ilogb() - eA.ilogb() - 1;
                    while (ea > eA * Exact::pow2(static_cast<int>(ee))) ++ee;
                    e = static_cast<int>(std::clamp<int64_t>(ee, -1000, 1000));
                }
                e = std::clamp(e, -127, 127);
            }
            b.s = std::ldexp(1.0f, e);  // exact: 2^-127 is a binary32 subnormal
            break;
        }
        case ScaleType::kFp32AmaxMul:
        case ScaleType::kFp32AmaxMulRcp:
        case ScaleType::kFp32AmaxMulInv: {
            // FORMATS.md section 2: with a' = max(a, F), s = fl32(a' / A) (FlashInfer),
            // fl32(a' fl32(1/A)) (DeepEP) or fl32(1 / m) (torchao), and the multiplier m = fl32(A / a')
            // the elements take.
            const float af = std::max(a, d.amax_floor);
            b.m = multiplier_of(d, a);
            b.s = d.scale == ScaleType::kFp32AmaxMul      ? div32(af, amp)
                  : d.scale == ScaleType::kFp32AmaxMulRcp ? mul32(af, div32(1.0f, amp))
                                                          : div32(1.0f, b.m);
            if (std::isinf(b.s)) {
                b.s_unrounded = b.s;
                b.problem = Problem::kScaleOverflow;
                return b;
            }
            break;
        }
        case ScaleType::kE8m0RceilMul:
        case ScaleType::kPow2RceilMul: {
            // The smallest integer e with t <= 2^e, t = fl32(max(a, F) fl32(1/A)), clamped to [-127, 127].
            const float t = mul32(std::max(a, d.amax_floor), div32(1.0f, amp));
            int e = -127;
            if (std::isinf(t)) {
                e = 127;
            } else if (t != 0) {
                const Exact et(t);
                int64_t ee = et.ilogb();  // 2^ee <= t < 2^(ee+1)
                if (et > Exact::pow2(static_cast<int>(ee))) ++ee;
                e = static_cast<int>(std::clamp<int64_t>(ee, -127, 127));
            }
            b.s = std::ldexp(1.0f, e);
            break;
        }
        case ScaleType::kFp32EpsMul: {
            // FBGEMM's row-wise INT8 (FORMATS.md section 2): s = fl32(a / A), no floor (0 for a == 0),
            // and m = fl32(A / fl32(a + eps)).
            b.m = multiplier_of(d, a);
            b.s = a == 0 ? 0.0f : div32(a, amp);
            if (std::isinf(b.s)) {
                b.s_unrounded = b.s;
                b.problem = Problem::kScaleOverflow;
                return b;
            }
            break;
        }
        case ScaleType::kE4m3TensorAmax: {
            // NVFP4: s = fl32(fl32(s_b T) fl32(1 / (448 A))), what a code of the block decodes by
            // (Transformer Engine's dequantize, SOURCES.md 5.4), and the multiplier of multiplier_of.
            b.m = multiplier_of(d, a);
            b.s_unrounded = nvfp4_of(d, a).sb;  // for the message
            b.s = mul32(mul32(b.s_unrounded, d.tensor_amax), div32(1.0f, mul32(448.0f, amp)));
            if (std::isinf(b.s)) {  // fl32(s_b T) past FLT_MAX: TE's dequantize would give inf
                b.problem = Problem::kScaleOverflow;
                return b;
            }
            break;
        }
        case ScaleType::kNone: b.s = 1.0f; break;
    }
    return b;
}

Error block_error(const FormatSpec& f, const BlockScale& b, std::span<const float> xb, int64_t start,
                  const Site& site) {
    const std::string advice = "policy 'propagate' poisons the block instead: qtransit quantize --nonfinite propagate";
    const int64_t first = site.index_base + start;
    const int64_t last = first + static_cast<int64_t>(xb.size()) - 1;
    switch (b.problem) {
        case Problem::kNonFinite:
            return make_error(ErrorCode::kNonFinite,
                              describe(site, start + b.index) + ": value " + shortest(xb[b.index]) +
                                  " is not finite (policy 'error' refuses NaN and inf; " + advice + ")");
        case Problem::kRangeOverflow:
            return make_error(ErrorCode::kRangeOverflow,
                              describe(site, start) + ": the block of elements " + std::to_string(first) + ".." +
                                  std::to_string(last) + " has a range that overflows binary32: hi - lo = " +
                                  shortest(b.hi) + " - (" + shortest(b.lo) + ") rounds to inf (" + f.name() +
                                  "; policy 'error' refuses it; " + advice + ")");
        case Problem::kScaleOverflow: {
            if (f.decl->scale == ScaleType::kE4m3TensorAmax)
                return make_error(ErrorCode::kRangeOverflow,
                                  describe(site, start) + ": the block of elements " + std::to_string(first) + ".." + std::to_string(last) +
                                      " has absmax " + shortest(b.a) + " and E4M3 scale " + shortest(b.s_unrounded) +
                                      ", whose decode factor fl32(s_b T) with the tensor amax T = " + shortest(f.decl->tensor_amax) +
                                      " overflows binary32 (" + f.name() + ": a tensor amax above FLT_MAX / 448 can; policy 'error' "
                                      "refuses it; " + advice + ")");
            const bool fp16 = f.decl->scale == ScaleType::kFp16Absmax && std::isfinite(b.s_unrounded);
            return make_error(ErrorCode::kRangeOverflow,
                              describe(site, start) + ": the block of elements " + std::to_string(first) + ".." +
                                  std::to_string(last) + " has " + (f.decl->offset_min ? "range " : "absmax ") +
                                  shortest(b.a) + ", and its scale " +
                                  (fp16 ? shortest(b.s_unrounded) + " overflows binary16 (max 65504)"
                                        : "a / A = " + shortest(b.a) + " / " + shortest(f.decl->amp) + " overflows binary32") +
                                  " (" + f.name() + "; policy 'error' refuses it; " + advice + ")");
        }
        case Problem::kNone: break;
    }
    return make_error(ErrorCode::kInvalidArgument, "internal: no problem");
}

// The stochastic draw U's 24 bits for tensor index g (FORMATS.md section 4).
uint32_t draw24(const StochasticKey& key, const Site& site, int64_t g) {
    // One Philox call per four consecutive elements: counter g / 4, output word g mod 4.
    const uint64_t ug = static_cast<uint64_t>(g), n = ug / 4;
    const uint32_t rank_word = site.rank < 0 ? 0xFFFFFFFFu : static_cast<uint32_t>(site.rank);
    const Philox4x32 ctr{{static_cast<uint32_t>(n), static_cast<uint32_t>(n >> 32), rank_word, 4u | (key.hop << 8)}};
    const Philox4x32 w = philox4x32_10(ctr, static_cast<uint32_t>(key.seed), static_cast<uint32_t>(key.seed >> 32));
    return w.v[ug % 4] >> 8;
}

}  // namespace

Result<Quantized> quantize_decl(const FormatSpec& f, std::span<const float> x, int64_t block, Nonfinite policy,
                                const Site& site, const StochasticKey& key) {
    if (!f.decl) return make_error(ErrorCode::kInvalidArgument, "declared format " + f.name() + " has no declaration");
    const Decl& d = *f.decl;
    if (auto st = f.check_block(block); !st) return st.error();
    const int64_t n = static_cast<int64_t>(x.size());
    const int64_t nb = (n + block - 1) / block;
    std::vector<BlockScale> bs(static_cast<size_t>(nb));
    for (int64_t k = 0; k < nb; ++k) {
        const int64_t start = k * block, len = std::min(block, n - start);
        const auto xb = x.subspan(static_cast<size_t>(start), static_cast<size_t>(len));
        bs[k] = block_scale(d, xb);
        if (bs[k].problem == Problem::kNone) continue;
        if (policy == Nonfinite::kError) return block_error(f, bs[k], xb, start, site);
        if (d.scale == ScaleType::kNone && !has_nan_code(d))
            return make_error(ErrorCode::kNonFinite,  // as the kernels' refusal of the same block
                              describe(site, start + std::max<int64_t>(bs[k].index, 0)) + ": " + f.name() +
                                  " cannot poison a block under policy 'propagate': its scale is 'none' and its " +
                                  "element type has no NaN code (FORMATS.md section 3); use --nonfinite error");
    }
    Quantized out;
    out.format = f;
    out.block = block;
    out.scales.assign(static_cast<size_t>(nb), 0.0f);
    if (d.offset_min) out.offsets.assign(static_cast<size_t>(nb), 0.0f);
    out.codes.assign(static_cast<size_t>(n), 0);
    out.decoded.assign(static_cast<size_t>(n), 0.0f);
    out.poisoned.assign(static_cast<size_t>(nb), 0);
    for (int64_t k = 0; k < nb; ++k) {
        const int64_t start = k * block, len = std::min(block, n - start);
        const BlockScale& b = bs[k];
        if (b.problem != Problem::kNone) {  // propagate: D4, or the NaN code with scale `none`
            out.poisoned[k] = 1;
            out.scales[k] = d.scale == ScaleType::kNone ? 1.0f : poison_nan();
            if (d.offset_min) out.offsets[k] = poison_nan();
            const int32_t c = d.scale == ScaleType::kNone ? nan_code(d) : 0;
            for (int64_t i = start; i < start + len; ++i) {
                out.codes[i] = c;
                out.decoded[i] = poison_nan();
            }
            continue;
        }
        const float s = b.s;
        out.scales[k] = s;
        if (d.offset_min) out.offsets[k] = b.lo;
        for (int64_t i = start; i < start + len; ++i) {
            const float xi = x[static_cast<size_t>(i)];
            float v = 0;
            if (multiplies(d.scale)) {
                // The quotient is w m even where s is 0 (FORMATS.md section 3): NVFP4's zero block scale
                // gives saturated codes that decode to zeros; fp32-eps-mul's |w m| < 1/2 gives code 0.
                v = mul32(d.offset_min ? sub32(xi, b.lo) : xi, b.m);
            } else if (s == 0) {
                // All-zero block (or constant block with offset): a zero with x's sign; with an offset
                // it is fl32(x - lo) = +0.
                v = d.offset_min ? 0.0f : std::copysign(0.0f, xi);
            } else {
                v = div32(d.offset_min ? sub32(xi, b.lo) : xi, s);
            }
            const uint32_t u24 = d.rounding == Rounding::kStochastic ? draw24(key, site, site.index_base + i) : 0;
            out.codes[i] = encode_value(d, v, u24);
            out.decoded[i] = decode_one(d, out.codes[i], s, b.lo);
        }
    }
    return out;
}

std::vector<float> decode_decl(const FormatSpec& f, std::span<const int32_t> codes, std::span<const float> scales,
                               std::span<const float> offsets, int64_t block) {
    std::vector<float> out(codes.size());
    for (size_t i = 0; i < codes.size(); ++i) {
        const size_t k = i / static_cast<size_t>(block);
        const float s = k < scales.size() ? scales[k] : poison_nan();
        const float lo = f.decl->offset_min ? (k < offsets.size() ? offsets[k] : poison_nan()) : 0.0f;
        out[i] = decode_one(*f.decl, codes[i], s, lo);
    }
    return out;
}

// Packing (FORMATS.md section 7), per block: lsb-first is NUMERICS 1.4's bit stream (code j at bits
// [j b, (j+1) b), stream bit t = bit t % 8 of byte t / 8, the code's LSB first); msb-first is the
// mirror image (stream bit t = bit 7 - t % 8 of byte t / 8, the code's MSB first), which puts
// element 2j in the high nibble for b = 4.
std::vector<uint8_t> pack_decl(const FormatSpec& f, std::span<const int32_t> codes, int64_t block) {
    std::vector<uint8_t> out;
    const int64_t n = static_cast<int64_t>(codes.size());
    const int b = f.bits;
    const uint32_t mask = (1u << b) - 1u;
    const bool msb = f.decl->packing == Packing::kMsbFirst;
    for (int64_t start = 0; start < n; start += block) {
        const int64_t len = std::min(block, n - start);
        const size_t base = out.size();
        out.resize(base + static_cast<size_t>(f.code_bytes(len)), 0);
        for (int64_t j = 0; j < len; ++j) {
            const uint32_t v = static_cast<uint32_t>(codes[start + j]) & mask;
            for (int t = 0; t < b; ++t) {
                const int64_t bit = j * b + t;
                const bool one = msb ? ((v >> (b - 1 - t)) & 1u) : ((v >> t) & 1u);
                if (!one) continue;
                out[base + bit / 8] |= static_cast<uint8_t>(1u << (msb ? 7 - bit % 8 : bit % 8));
            }
        }
    }
    return out;
}

std::vector<int32_t> unpack_decl(const FormatSpec& f, std::span<const uint8_t> bytes, int64_t elements, int64_t block) {
    std::vector<int32_t> out(static_cast<size_t>(std::max<int64_t>(elements, 0)), 0);
    const int b = f.bits;
    const bool msb = f.decl->packing == Packing::kMsbFirst;
    const bool sgn = f.decl->signed_codes();
    auto byte_at = [&](int64_t i) -> uint32_t {
        return i >= 0 && i < static_cast<int64_t>(bytes.size()) ? bytes[static_cast<size_t>(i)] : 0u;
    };
    int64_t base = 0;
    for (int64_t start = 0; start < elements; start += block) {
        const int64_t len = std::min(block, elements - start);
        for (int64_t j = 0; j < len; ++j) {
            uint32_t v = 0;
            for (int t = 0; t < b; ++t) {
                const int64_t bit = j * b + t;
                const uint32_t one = (byte_at(base + bit / 8) >> (msb ? 7 - bit % 8 : bit % 8)) & 1u;
                v |= one << (msb ? b - 1 - t : t);
            }
            out[start + j] = sgn && ((v >> (b - 1)) & 1u) ? static_cast<int32_t>(v) - (1 << b) : static_cast<int32_t>(v);
        }
        base += f.code_bytes(len);
    }
    return out;
}

float decl_multiplier_of(const Decl& d, std::span<const float> x) {
    if (!multiplies(d.scale) || x.empty()) return 0;
    float a = 0;
    if (d.offset_min) {
        float lo = 0, hi = 0;
        lo_hi(x, lo, hi);
        a = sub32(hi, lo);
    } else {
        for (float v : x) a = std::max(a, std::fabs(v));
    }
    return multiplier_of(d, a);
}

// ======================================================================================================
// The per-element bound (FORMATS.md section 6), derived.
// ======================================================================================================
// Element x of a block with scale s (> 0; s == 0 only for an all-zero block, or a constant one with an
// offset, where every element decodes to exactly its value: E = 0) and, with an offset, lo.
//   w = x (offset none) or w = fl32(x - lo); rho = w / s (real); v = fl32(rho); r = the element
//   value of the code (rounded, saturated, sign restored); p = sat(fl32(r s)); x̂ = p, or
//   x̂ = sat(fl32(p + lo)) with an offset. u = 2^-24. Everything below is multiplied through by s
//   so that it is a dyadic rational (rho itself need not be), evaluated exactly.
//
// (1) s |rho - v| <= T := u |w| + s 2^-150 (RNE: relative u in the normal range, half a subnormal
//     spacing below it; no overflow: |rho| is at most about A (1 + 2u), or |w| / 2^-127 < 2^128 for the
//     clamped e8m0 scales). T = 0 when s is a power of two and s 2^-126 <= |w| <= s FLT_MAX (or w = 0):
//     then rho is w's 24-bit significand times a power of two inside the normal range, exactly v.
//     In all cases v lies in [rho - T/s, rho + T/s].
// (2) |v - r| for int and float: with G the finite grid (int: multiples of 2^-f in [qmin, qmax] 2^-f;
//     float: the finite values) and c = 1/2 (nearest modes) or 1 (toward-zero, stochastic: "fl" or
//     "fl + 1", never more than one step away):
//     - v in [vmin, vmax]: |v - r| <= c step(|v|) (a rounding up into the next binade, the carry,
//       is still one of v's neighbours on its binade's grid; a rounding up past vmax saturates to vmax,
//       which lies between v and the rounded value);
//     - v outside: r is the end value (the toward-zero or rounded value is at or beyond it and
//       saturates), |v - r| = the excess of v beyond [vmin, vmax] (for an unsigned int without offset
//       a negative v gets code 0: the excess 0 - v).
//     So s |v - r| <= max(c s step(m), X) for any m >= |v| (step is non-decreasing), with
//       X = max(0, w + T - s vmax, s vmin - (w - T))   (v s is in [w - T, w + T]).
//     step: int 2^-f; float 2^(max(j, emin) - M), j = floor(log2 m). We take
//       m = max(|rho| (1 + u), 2^-126): if |rho| >= 2^-126, |v| <= |rho| (1 + u); if not, |v| <= 2^-126,
//       and every m <= 2^emin (emin >= -126 for every allowed type) has the same step 2^(emin - M).
//       j is found exactly: the largest j with s 2^j <= max(|w| (1 + u), s 2^-126).
// (2') tables (nearest modes only): nearest rounding with saturation picks a nearest element of the
//     table, so |v - r| = dist(v, V) <= dist(rho, V) + |v - rho|, and
//       s |rho - r| <= s |rho - v| + s |v - r| <= dist(w, s V) + 2 T,   dist(w, sV) = min_i |w - s V_i|.
// So S := s |rho - r| <= T + max(c s step, X)  (int, float)  or  dist(w, s V) + 2 T  (table).
// (3) The decode: p is the nearest finite binary32 to r s (RNE, then saturation, which picks FLT_MAX for
//     anything beyond it), and w is a finite binary32, so |p - r s| <= |w - r s| <= S; also
//     |p - r s| <= u Y + 2^-150 when Y <= FLT_MAX and (Y - FLT_MAX) beyond, for any Y >= |r s|:
//       Tdec = min(S, max(u Y + 2^-150, Y - FLT_MAX)),  Y = min(|w| + S, s max(|vmin|, |vmax|)).
// Offset none: E = S + Tdec.
// Offset min: |x - lo - w| <= u |x - lo| + 2^-150 (Tsub), so |x - (p + lo)| <= Ep := Tsub + S + Tdec;
//   x̂ is the nearest finite binary32 to p + lo and x is one, so |x̂ - (p + lo)| <= Ep, and also
//   <= u (|x| + Ep) + 2^-150 when |x| + Ep <= FLT_MAX (|p + lo| <= |x| + Ep):
//   E = Ep + min(Ep, u (|x| + Ep) + 2^-150)  (the min only when |x| + Ep <= FLT_MAX; else 2 Ep).
// Every term is a function of x, s and lo alone (w is fl32(x - lo)); none uses the code or x̂.
//
// The scales that multiply (v = fl32(w m), m rounded apart from s: fl32(A / max(a, F)), or
// fl32(A / fl32(a + eps)) for fp32-eps-mul): w - r s = w (1 - m s) + (w' - r s) with w' = w m s, so the
// same terms with w' in place of w (rho = w' / s = w m; T = u |w'| + s 2^-150, no exact case), plus
// D = |w| |1 - m s| (at most a few u for the floored absmax; for fp32-eps-mul about |w| eps / (a + eps),
// which is the error FBGEMM's epsilon costs a block of small range). Without an offset w' need not be
// a binary32, so (3) keeps Tdec = max(u Y + 2^-150, Y - FLT_MAX) without its min; with an offset w is
// one (fl32(x - lo)) and p is nearest to r s, so |p - r s| <= |w - r s| <= D + S keeps a min.
// decode = "fma" (offset min): x̂ = sat(fl32(r s + lo)), one rounding of a value within
// Ep = Tsub + D + S of x: E = Ep + min(Ep, u (|x| + Ep) + 2^-150) as above, with no Tdec.
Exact decl_element_bound(const Decl& d, float x, float s, float lo, float m) {
    // s == 0: every element decodes to lo (offset) or 0. Only an all-zero or constant block has it (error
    // 0), but under fp32-eps-mul, whose fl32(a / A) has no floor, a block of range a <= A 2^-150 too:
    // the error |x - lo| or |x| is at most a.
    if (s == 0) {
        // NVFP4: a block scale of 0 (or a product s_b T that underflows) decodes every code to a zero:
        // the error is |x| itself.
        if (d.scale == ScaleType::kE4m3TensorAmax) return Exact(x).abs();
        if (d.scale != ScaleType::kFp32EpsMul) return Exact();
        const Exact e = (Exact(x) - Exact(d.offset_min ? lo : 0.0f)).abs(), cap = Exact(d.amp) * Exact::pow2(-150);
        return e < cap ? e : cap;
    }
    const Exact& u = ex_u();
    const Exact one = Exact::from_int(1);
    const bool mul = multiplies(d.scale);
    const float w = d.offset_min ? sub32(x, lo) : x;
    const Exact es(s), ew = mul ? Exact(w) * Exact(m) * es : Exact(w), aw = ew.abs();
    // (1)
    const uint32_t sb = std::bit_cast<uint32_t>(s);
    const bool pow2 = (sb & 0x7FFFFFu) == 0 || ((sb >> 23) == 0 && std::popcount(sb) == 1);
    const bool exact_div =
        !mul && pow2 && (w == 0 || (aw >= es * Exact::pow2(-126) && aw <= es * ex_fltmax()));
    const Exact T = exact_div ? Exact() : u * aw + es * ex_2m150();
    // (2), (2')
    Exact S;
    if (d.elem == ElemType::kTable) {
        Exact dist;
        for (int i = 0; i < d.table_size; ++i) {
            const Exact di = (ew - es * Exact(d.table[i])).abs();
            if (i == 0 || di < dist) dist = di;
        }
        S = dist + T + T;
    } else {
        const Exact c = nearest(d.rounding) ? ex_half() : one;
        Exact step_s;
        if (d.elem == ElemType::kInt) {
            step_s = es * Exact::pow2(-d.fraction_bits);
        } else {
            Exact m = aw * (one + u);
            const Exact floor_m = es * Exact::pow2(-126);
            if (m < floor_m) m = floor_m;
            int64_t j = m.ilogb() - es.ilogb();  // s 2^j is in [2^ilogb(m), 2^(ilogb(m)+1))
            if (es * Exact::pow2(static_cast<int>(j)) > m) --j;
            const int64_t k = std::max<int64_t>(j, 1 - d.bias) - d.man_bits;
            step_s = es * Exact::pow2(static_cast<int>(k));
        }
        Exact X;
        const Exact top = ew + T - es * Exact(d.vmax);
        const Exact bot = es * Exact(d.vmin) - (ew - T);
        if (top > X) X = top;
        if (bot > X) X = bot;
        const Exact cs = c * step_s;
        S = T + (cs > X ? cs : X);
    }
    // (3)
    const float vabs = std::max(std::fabs(d.vmin), std::fabs(d.vmax));
    Exact Y = aw + S;
    const Exact ycap = es * Exact(vabs);
    if (ycap < Y) Y = ycap;
    Exact tdec = u * Y + ex_2m150();
    const Exact over = Y - ex_fltmax();
    if (over > tdec) tdec = over;
    const Exact dev = mul ? (Exact(w) - ew).abs() : Exact();
    if (mul && !d.offset_min) return dev + S + tdec;
    if (dev + S < tdec) tdec = dev + S;
    if (!d.offset_min) return S + tdec;
    const Exact tsub = u * (Exact(x) - Exact(lo)).abs() + ex_2m150();
    const Exact ep = tsub + dev + S + (d.decode_fma ? Exact() : tdec);
    const Exact mag = Exact(std::fabs(x)) + ep;
    if (mag > ex_fltmax()) return ep + ep;
    const Exact last = u * mag + ex_2m150();
    return ep + (last < ep ? last : ep);
}

}  // namespace qtransit::reference::detail

namespace qtransit::reference {

const char* convention_key(uint32_t bit) {
    switch (bit) {
        case kConvNonfinite: return "nonfinite";
        case kConvScaleFloor: return "scale_floor";
        case kConvScaleSubnormals: return "scale_subnormals";
        case kConvDivideFloor: return "divide_floor";
        case kConvZeroScale: return "zero_scale";
        case kConvOverflow: return "overflow";
        case kConvElementSubnormals: return "element_subnormals";
        case kConvDecodeOverflow: return "decode_overflow";
        case kConvZeroSign: return "zero_sign";
        default: return "?";
    }
}

std::string convention_rule(const Decl& d, uint32_t bit) {
    const Conventions& c = d.conventions;
    switch (bit) {
        case kConvNonfinite: return to_string(c.nonfinite);
        case kConvDecodeOverflow: return c.decode_overflow_inf ? "inf" : "saturate";
        case kConvScaleFloor:
            return c.scale_floor == ScaleFloorRule::kNone ? "none" : c.scale_floor == ScaleFloorRule::kValue ? shortest(c.scale_floor_value) : "format";
        case kConvScaleSubnormals: return c.flush_scale_subnormals ? "flush" : "keep";
        case kConvDivideFloor:
            return shortest(c.divide_floor) + (c.divide_floor_by > 0 ? " (dividing by " + shortest(c.divide_floor_by) + " below it)" : "");
        case kConvZeroScale: return c.zero_scale_ieee ? "ieee" : "zeros";
        case kConvOverflow: return c.overflow_nonfinite ? "nonfinite" : "saturate";
        case kConvElementSubnormals: return c.flush_element_subnormals ? "flush" : "keep";
        case kConvZeroSign: return c.zero_sign_any ? "any" : "format";
        default: return "?";
    }
}

namespace {

// Whether v (binary32, not NaN) rounds, before saturation, past the float element's largest finite
// value (FORMATS.md section 3 without its last step).
bool rounds_past_largest(const Decl& d, float v) {
    const float av = std::fabs(v);
    if (std::isinf(av)) return true;
    if (av == 0) return false;
    const int e = static_cast<int>(Exact(av).ilogb());
    const int k = std::max(e, 1 - d.bias) - d.man_bits;
    const int64_t r = detail::round_grid(av, -k, d.rounding, std::signbit(v), 0);
    return std::ldexp(static_cast<double>(r), k) > static_cast<double>(d.max_finite);
}

bool subnormal_code(const Decl& d, int32_t q) {
    if (d.elem != ElemType::kFloat) return false;
    const uint32_t c = static_cast<uint32_t>(q);
    const uint32_t field = (c >> d.man_bits) & ((1u << d.exp_bits) - 1u);
    return field == 0 && (c & ((1u << d.man_bits) - 1u)) != 0;
}

}  // namespace

// FORMATS.md section 10, step by step as written there.
ConventionBlock convention_block(const FormatSpec& f, std::span<const float> x) {
    using Want = ConventionBlock::Want;
    ConventionBlock out;
    const size_t n = x.size();
    out.want.assign(n, Want::kValue);
    out.value.assign(n, 0.0f);
    if (f.kind != FormatKind::kDecl || !f.decl || !f.decl->conventions.any() || n == 0) return out;
    const Decl& d = *f.decl;
    const Conventions& cv = d.conventions;
    // 1. A block holding NaN or inf: refused (the format); poisoned: every element decodes to NaN;
    //    propagated: each non-finite input decodes to inf or NaN, the rest are the library's;
    //    saturated (no scale): each non-finite input is written as +-FLT_MAX would be, the largest
    //    element value of its sign bit, and the block goes on through the steps below.
    std::vector<float> saturated;
    if (cv.nonfinite == NonfiniteRule::kSaturate && !std::all_of(x.begin(), x.end(), [](float v) { return std::isfinite(v); })) {
        saturated.assign(x.begin(), x.end());
        for (float& v : saturated)
            if (!std::isfinite(v)) v = std::copysign(detail::kFltMax, v);
        x = saturated;
        out.applied = kConvNonfinite;
    }
    for (float v : x)
        if (!std::isfinite(v)) {
            if (cv.nonfinite == NonfiniteRule::kPoison) {
                out.applied = kConvNonfinite;
                out.any_scale = true;
                out.want.assign(n, Want::kNaN);
            } else if (cv.nonfinite == NonfiniteRule::kPropagate) {
                out.applied = kConvNonfinite;
                out.any_scale = true;
                for (size_t i = 0; i < n; ++i) out.want[i] = std::isfinite(x[i]) ? Want::kAny : Want::kNonfinite;
            }
            return out;
        }
    // 2. The scale: the format's, but for fp32/fp16-absmax the declared floor and subnormal flush.
    const detail::BlockScale b = detail::block_scale(d, x);
    if (b.problem != detail::Problem::kNone) return out;  // a range overflow: the format's refusal, no convention
    float s = b.s;
    if (d.scale == ScaleType::kFp32Absmax || d.scale == ScaleType::kFp16Absmax) {
        const float s0 = b.a == 0 ? 0.0f : detail::div32(b.a, d.amp);  // may be subnormal or 0
        float s1 = s;
        switch (cv.scale_floor) {
            case ScaleFloorRule::kFormat: break;
            case ScaleFloorRule::kNone: s1 = s0; break;
            case ScaleFloorRule::kValue: s1 = std::max(s0, cv.scale_floor_value); break;
        }
        if (cv.scale_floor != ScaleFloorRule::kFormat && d.scale == ScaleType::kFp16Absmax && s1 != 0) {
            s1 = round_to_fp16(s1);
            if (s1 == 0 && cv.scale_floor == ScaleFloorRule::kValue) s1 = 0x1p-24f;
        }
        if (!std::isfinite(s1)) return out;  // a floor past binary16's range: the format's refusal stands
        if (std::bit_cast<uint32_t>(s1) != std::bit_cast<uint32_t>(s)) out.applied |= kConvScaleFloor;
        float s2 = s1;
        if (cv.flush_scale_subnormals && s2 > 0 && s2 < 0x1p-126f) s2 = 0;
        if (s2 != s1) out.applied |= kConvScaleSubnormals;
        s = s2;
    }
    out.scale = s;
    // 3. The divisor.
    float div = s;
    if (cv.divide_floor > 0 && s < cv.divide_floor) {
        div = cv.divide_floor_by > 0 ? cv.divide_floor_by : cv.divide_floor;
        out.applied |= kConvDivideFloor;
    }
    // 4. Every element.
    for (size_t i = 0; i < n; ++i) {
        const float xi = x[i];
        float v;
        if (div == 0) {
            if (!cv.zero_scale_ieee) {
                v = std::copysign(0.0f, xi);  // the format's rule (section 3)
            } else if (xi == 0) {
                out.applied |= kConvZeroScale;  // 0 / 0
                out.want[i] = Want::kNaN;
                continue;
            } else {
                out.applied |= kConvZeroScale;  // x / 0: an infinity, then the element's overflow rule
                v = std::copysign(std::numeric_limits<float>::infinity(), xi);
            }
        } else {
            v = detail::div32(xi, div);
        }
        if (cv.overflow_nonfinite && rounds_past_largest(d, v)) {
            out.applied |= kConvOverflow;
            out.want[i] = Want::kNonfinite;
            continue;
        }
        const int32_t q = detail::encode_value(d, v, 0);
        if (cv.flush_element_subnormals && subnormal_code(d, q)) {
            out.applied |= kConvElementSubnormals;
            out.want[i] = Want::kZero;
            continue;
        }
        out.value[i] = detail::decode_one(d, q, s, 0.0f);
        if (cv.decode_overflow_inf && std::fabs(out.value[i]) == detail::kFltMax) {
            // fl32(val * s) without the saturation: inf when the product rounds past FLT_MAX.
            const double p = detail::value_of(d, q) * static_cast<double>(s);
            const float r = detail::fl32(p);  // exact product, one rounding, overflowing to inf
            if (std::isinf(r)) {
                out.applied |= kConvDecodeOverflow;
                out.value[i] = r;
            }
        }
    }
    return out;
}

}  // namespace qtransit::reference
