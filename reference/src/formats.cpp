// The reference quantizer (NUMERICS.md section 1, docs/DECISIONS.md D1-D5), written from the spec
// alone. Scalar plain loops; clarity over speed.
//
// Binary32 arithmetic. Every binary32 operation fl32(a op b) of two binary32 operands is computed
// here as: the operation in double (IEEE binary64, round to nearest even), then our own rounding of
// that double to binary32 (round_to_format below, with our own rne()). Products of two binary32
// values, and of a small integer code (<= 8 bits) and a binary32 value, are exact in double. Sums,
// differences and quotients are rounded twice (to double, then to binary32), and that double rounding
// is innocuous: for +, -, *, / a precision p' >= 2p + 2 for the intermediate format guarantees that
// rounding first to p' bits and then to p bits equals rounding directly to p bits (Figueroa, "When is
// double rounding innocuous?", 1995), and 53 >= 2*24 + 2 = 50. Binary64's exponent range covers every
// intermediate here (no double overflow or underflow), and a binary32 subnormal result just has
// fewer than 24 bits, which only widens the margin. Binary16 rounding (round_to_fp16) always rounds
// an exact binary32 value once. Nothing here uses the hardware's float conversions for rounding
// (no float casts of inexact doubles, no std::nearbyint, no _Float16), so the result does not
// depend on how a compiler or a production kernel would do it.
#include "qtransit/reference/formats.hpp"

#include "binary32.hpp"
#include "decl_internal.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>

#include "qtransit/common/bits.hpp"
#include "qtransit/common/shortest.hpp"

namespace qtransit::reference {

namespace {

using namespace detail;

int32_t clamp_code(double r, int32_t lo, int32_t hi) {
    if (r < lo) return lo;
    if (r > hi) return hi;
    return static_cast<int32_t>(r);
}

bool valid_format(const FormatSpec& f) {
    switch (f.kind) {
        case FormatKind::kSym:
        case FormatKind::kAsym: return f.bits >= 2 && f.bits <= 8;
        case FormatKind::kDs: return f.bits == 4 || f.bits == 8;
        case FormatKind::kDecl: return f.decl != nullptr;
        case FormatKind::kQr: return f.bits == 4 || f.bits == 6 || f.bits == 8;
    }
    return false;
}

// ---- decode, one element (shared by quantize() and decode()) ----------------------------------

float decode_sym(int32_t q, float s) {
    if (std::isnan(s)) return poison_nan();
    return sat(mulq32(q, s));  // NUMERICS 1.1 with D1
}

float decode_asym(int32_t q, float s, float lo) {
    if (std::isnan(s) || std::isnan(lo)) return poison_nan();
    if (s == 0) return lo;  // hi == lo: "decode gives lo exactly" (D2: a -0 stays -0)
    return sat(add32(sat(mulq32(q, s)), lo));  // NUMERICS 1.2 with D1
}

float decode_ds(int32_t q, float step) {
    if (std::isnan(step)) return poison_nan();
    return round_to_fp16(mulq32(q, step));  // fl16(fl32(q * Δ))
}

// quickreduce-q<b>: every operation in binary16, each the exact result rounded once to binary16 (a
// product of two binary16 values, or of one and a power of two, is exact in double); 1 / t is
// rounded to double first, which is innocuous since 53 >= 2 * 11 + 2 (Figueroa, as above).
double fl16d(double v) { return round_to_format(v, 11, -14, 15); }
int32_t qr_top(int bits) { return 1 << (bits - 1); }

float decode_qr(int32_t u, float dec, int bits) {
    if (std::isnan(dec)) return poison_nan();
    // (u - 2^(b-1)) dec, one rounding; a zero code gives +0 dec, -0 when dec < 0.
    return static_cast<float>(fl16d(static_cast<double>(u - qr_top(bits)) * static_cast<double>(dec)));
}

// ---- block statistics -------------------------------------------------------------------------

// lo/hi of a finite block, with IEEE totalOrder for zeros (D2: -0 < +0).
void asym_lo_hi(std::span<const float> x, float& lo, float& hi) {
    lo = x[0];
    hi = x[0];
    for (float v : x) {
        if (v < lo || (v == lo && std::signbit(v) && !std::signbit(lo))) lo = v;
        if (v > hi || (v == hi && !std::signbit(v) && std::signbit(hi))) hi = v;
    }
}

float abs_max(std::span<const float> x) {
    float a = 0;
    for (float v : x) a = std::max(a, std::fabs(v));
    return a;
}

// What is wrong with a block, if anything: the lowest offending element (D5).
enum class Problem { kNone, kNonFinite, kRangeOverflow, kFp16Overflow };
struct BlockProblem {
    Problem kind = Problem::kNone;
    int64_t index = -1;  // local to the block
    float lo = 0, hi = 0;
};

BlockProblem find_problem(const FormatSpec& f, std::span<const float> x) {
    BlockProblem p;
    for (std::size_t i = 0; i < x.size(); ++i) {
        if (!std::isfinite(x[i])) return {Problem::kNonFinite, static_cast<int64_t>(i)};
        // D3: a finite input that overflows binary16 (|x| >= 65520) is a range overflow for ds.
        if ((f.kind == FormatKind::kDs || f.kind == FormatKind::kQr) && std::isinf(round_to_fp16(x[i])))
            return {Problem::kFp16Overflow, static_cast<int64_t>(i)};
    }
    if (f.kind == FormatKind::kAsym && !x.empty()) {
        float lo = 0, hi = 0;
        asym_lo_hi(x, lo, hi);
        if (std::isinf(sub32(hi, lo))) return {Problem::kRangeOverflow, 0, lo, hi};
    }
    return p;
}

Error problem_error(const FormatSpec& f, const BlockProblem& p, std::span<const float> block_x,
                    int64_t block_start, const Site& site) {
    const std::string advice = "policy 'propagate' poisons the block instead: qtransit quantize --nonfinite propagate";
    const int64_t i = block_start + p.index;
    switch (p.kind) {
        case Problem::kNonFinite:
            return make_error(ErrorCode::kNonFinite,
                              describe(site, i) + ": value " + shortest(block_x[p.index]) +
                                  " is not finite (policy 'error' refuses NaN and inf; " + advice + ")");
        case Problem::kFp16Overflow:
            return make_error(ErrorCode::kRangeOverflow,
                              describe(site, i) + ": value " + shortest(block_x[p.index]) + " overflows binary16 (" +
                                  f.name() +
                                  " rounds its input to binary16 first, max 65504; policy "
                                  "'error' refuses it; " + advice + ")");
        case Problem::kRangeOverflow: {
            const int64_t first = site.index_base + block_start;
            const int64_t last = first + static_cast<int64_t>(block_x.size()) - 1;
            return make_error(ErrorCode::kRangeOverflow,
                              describe(site, block_start) + ": the block of elements " + std::to_string(first) +
                                  ".." + std::to_string(last) + " has a range that overflows binary32: hi - lo = " +
                                  shortest(p.hi) + " - (" + shortest(p.lo) + ") rounds to inf (lo = " + shortest(p.lo) +
                                  ", hi = " + shortest(p.hi) + "; " + f.name() + "; policy 'error' refuses it; " +
                                  advice + ")");
        }
        case Problem::kNone: break;
    }
    return make_error(ErrorCode::kInvalidArgument, "internal: no problem");
}

// ---- encode, one block ------------------------------------------------------------------------

void poison_block(Quantized& out, int64_t k, int64_t start, int64_t len) {
    out.scales[k] = poison_nan();
    if (out.format.kind == FormatKind::kAsym) out.offsets[k] = poison_nan();
    out.poisoned[k] = 1;
    for (int64_t i = start; i < start + len; ++i) {
        out.codes[i] = 0;
        out.decoded[i] = poison_nan();
    }
}

// NUMERICS 1.1.
void encode_sym(Quantized& out, std::span<const float> x, int64_t k, int64_t start) {
    const int32_t qmax = out.format.code_max();
    const float a = abs_max(x);
    float s = 0;
    if (a != 0) s = std::max(div32(a, static_cast<float>(qmax)), kMinSub);
    out.scales[k] = s;
    for (std::size_t j = 0; j < x.size(); ++j) {
        int32_t q = 0;
        if (s != 0) q = clamp_code(rne(div32(x[j], s)), -qmax, qmax);
        out.codes[start + j] = q;
        out.decoded[start + j] = s == 0 ? 0.0f : decode_sym(q, s);  // a == 0: decoded +0
    }
}

// NUMERICS 1.2 with D1, D2 (the caller has ruled out a range overflow).
void encode_asym(Quantized& out, std::span<const float> x, int64_t k, int64_t start) {
    const int32_t n = out.format.code_max();  // 2^b - 1
    float lo = 0, hi = 0;
    asym_lo_hi(x, lo, hi);
    float s = 0;
    if (hi != lo) s = std::max(div32(sub32(hi, lo), static_cast<float>(n)), kMinSub);
    out.scales[k] = s;
    out.offsets[k] = lo;
    for (std::size_t j = 0; j < x.size(); ++j) {
        int32_t q = 0;
        if (s != 0) q = clamp_code(rne(div32(sub32(x[j], lo), s)), 0, n);
        out.codes[start + j] = q;
        out.decoded[start + j] = decode_asym(q, s, lo);
    }
}

// The ds scale: fl32(2^b / fl32(2a)) for the binary16 absmax a > 0.
float ds_scale(int bits, float a) { return div32(static_cast<float>(1 << bits), mul32(2.0f, a)); }

// NUMERICS 1.3 (the caller has ruled out an fp16 overflow, D3).
void encode_ds(Quantized& out, std::span<const float> x, int64_t k, int64_t start) {
    const int b = out.format.bits;
    const int32_t cmin = -(1 << (b - 1)), cmax = (1 << (b - 1)) - 1;
    float a = 0;
    for (float v : x) a = std::max(a, std::fabs(round_to_fp16(v)));
    float scale = 0, step = 1;  // a == 0: stored step 1, codes 0
    if (a != 0) {
        scale = ds_scale(b, a);
        step = div32(1.0f, scale);
    }
    out.scales[k] = step;
    for (std::size_t j = 0; j < x.size(); ++j) {
        int32_t q = 0;
        if (a != 0) q = clamp_code(rne(mul32(round_to_fp16(x[j]), scale)), cmin, cmax);
        out.codes[start + j] = q;
        out.decoded[start + j] = decode_ds(q, step);
    }
}

// docs/FORMATS.md section 11 (the caller has ruled out a binary16 overflow of the input). The
// group's extreme is its signed extreme over the binary16 values: the maximum when its magnitude is
// strictly larger than the minimum's, else the minimum (totalOrder for zeros: -0 < +0). fl16 is
// monotone in totalOrder (a tiny value rounds to the zero of its sign), so the binary16 extremes are
// the rounded binary32 ones.
void encode_qr(Quantized& out, std::span<const float> x, int64_t k, int64_t start) {
    const int b = out.format.bits;
    const int32_t top = qr_top(b);
    float lo = 0, hi = 0;
    asym_lo_hi(x, lo, hi);
    lo = round_to_fp16(lo);
    hi = round_to_fp16(hi);
    const float m = std::fabs(hi) > std::fabs(lo) ? hi : lo;
    const float dec = static_cast<float>(fl16d(-static_cast<double>(m) / top));  // m * -2^-(b-1), exact before rounding
    const double enc = quickreduce_enc(dec);
    out.scales[k] = dec;
    for (std::size_t j = 0; j < x.size(); ++j) {
        const double w = fl16d(static_cast<double>(round_to_fp16(x[j])) * enc);
        const int32_t q = clamp_code(rne(std::clamp(w, -static_cast<double>(top), top - 1.0)), -top, top - 1);
        out.codes[start + j] = q + top;
        out.decoded[start + j] = decode_qr(q + top, dec, b);
    }
}

// ---- error bounds -----------------------------------------------------------------------------

const Exact& ex_u() { static const Exact v = Exact::pow2(-24); return v; }
const Exact& ex_half() { static const Exact v = Exact::pow2(-1); return v; }
const Exact& ex_2m149() { static const Exact v = Exact::pow2(-149); return v; }
const Exact& ex_2m150() { static const Exact v = Exact::pow2(-150); return v; }
const Exact& ex_fltmax() { static const Exact v = Exact(kFltMax); return v; }

// Half the binary16 spacing at magnitude m >= 0: 2^(max(floor(log2 m), -14) - 11), and 0 at 0
// (0 is exact). Every real of magnitude <= m is within this of its binary16 rounding (spacing only
// grows with magnitude; overflow excluded by the caller).
Exact half_fp16_spacing(const Exact& m) {
    if (m.sign() == 0) return Exact();
    const int64_t e = std::max<int64_t>(m.ilogb(), -14);
    return Exact::pow2(static_cast<int>(e - 11));
}

// Everything the bound of one block needs, computed once per block.
struct BlockBound {
    bool poisoned = false;
    // int<b>: the whole bound is one number per block.
    Exact sym;
    // int<b>-asym: E(x) = A + second(|x|), see asym_element_bound.
    bool asym_constant = false;  // hi == lo: every element decodes to exactly its value
    Exact asym_a;
    // ds-int<b>
    bool ds_zero = false;  // a == 0
    float ds_scale = 0;
    Exact ds_step;
    // ds-int<b>-fm: the extremes over the admissible scales and steps (ds_fm_block)
    float fm_scale_max = 0;
    Exact fm_step_max, fm_tau;  // the largest step, and max |1 - sigma Δ| over admissible pairs
    // quickreduce-q<b>: the stored scale dec, the encode factor, and kappa = |1 - enc dec|
    float qr_dec = 0, qr_enc = 0;
    Exact qr_kappa;
};

BlockBound block_bound(const Quantized& q, std::span<const float> x, int64_t k) {
    BlockBound bb;
    if (!q.poisoned.empty() && q.poisoned[k]) {
        bb.poisoned = true;
        return bb;
    }
    const int64_t start = k * q.block;
    const int64_t len = std::min<int64_t>(q.block, static_cast<int64_t>(x.size()) - start);
    const std::span<const float> xb = x.subspan(start, len);
    const float s = q.scales[k];
    switch (q.format.kind) {
        case FormatKind::kSym: {
            // NUMERICS 1.1: s * (1/2 + 2^-22 * qmax) + 2^-149 (for s == 0 the error is 0), plus, only
            // when s is subnormal, K = max(0, a - qmax s).
            //
            // Why K: the bound of 1.1 is false for a subnormal step. fl32(a / qmax) in the subnormal
            // range is rounded to a multiple of 2^-149, which can be far below a / qmax relatively;
            // then the absmax element's quotient exceeds qmax by a lot and the clamp costs far more
            // than half a step. Example: int8, a = 190 * 2^-149: a / 127 = 1.496 * 2^-149 rounds to
            // s = 2^-149, the code clamps at 127 and the error is 63 * 2^-149 = 63 s, while 1.1 says
            // about 1.5 * 2^-149. (int4, a = 9 * 2^-149: error 2 * 2^-149 against 1.5 * 2^-149.)
            // With K the bound holds: unclamped elements err by <= s/2 + u|x| (x/s is a normal or
            // zero quotient) plus the decode rounding u q s; a clamped element's error is at most
            // a - qmax s = K plus the decode rounding; and u |x| <= u (qmax s + K) fits the 2^-22 qmax s
            // slack. When s is normal, s >= (a / qmax) / (1 + u), so a - qmax s <= u qmax s is
            // already inside 1.1's slack (4u qmax s covers the rounding of x / s, the clamp excess and
            // the decode rounding, each <= u qmax s (1 + O(u))), and E is exactly 1.1's formula.
            const int32_t qmax = q.format.code_max();
            bb.sym = Exact(s) * (ex_half() + Exact::pow2(-22) * Exact::from_int(qmax)) + ex_2m149();
            if (s != 0 && s < 0x1p-126f) {
                const Exact kk = Exact(abs_max(xb)) - Exact(s) * Exact::from_int(qmax);
                if (kk.sign() > 0) bb.sym += kk;
            }
            break;
        }
        case FormatKind::kAsym: {
            // The derivation of this bound.
            //
            // Block: lo, hi (D2), R = hi - lo (exact real), D = fl32(R) (finite: no range overflow),
            // n = 2^b - 1, s = max(fl32(D / n), 2^-149). Element x (binary32, lo <= x <= hi):
            //   y = x - lo in [0, R] (exact), t = fl32(y), r = fl32(t / s), q = clamp(rne(r), 0, n),
            //   p = sat(fl32(q s)), v = p + lo (exact real), x̂ = sat(fl32(v)).
            // Rounding facts used: |fl32(w) - w| <= u|w| for |w| in the normal range or overflowing
            // to a value that then saturates within u|w| (shown where used), and <= 2^-150 in the
            // subnormal range; a difference of two binary32 that lands in the subnormal range is
            // exact. u = 2^-24.
            //
            // (1) |y - t| <= u y  (t <= D < inf, since y <= R and rounding is monotone).
            // (2) |t/s - r| <= u t/s + 2^-150, and t <= (1 + u) y <= (1 + u) R.
            // (3) Not clamped (rne(r) <= n; r >= 0 so the clamp at 0 never acts): |r - q| <= 1/2, so
            //       |y - q s| <= |y - t| + s |t/s - r| + s |r - q|
            //                <= u R + u (1 + u) R + s 2^-150 + s/2 = s/2 + eps,
            //       eps = (2u + u^2) R + s 2^-150.
            //     Clamped (rne(r) > n, so r >= n + 1/2, q = n): if y >= n s the error y - n s is at
            //       most R - n s; if y < n s then n s - y <= s (n - r) + |s r - y| < -s/2 + eps.
            //     So in every case |y - q s| <= s/2 + K + eps, with K = max(0, R - n s). K is tiny
            //     (<= 2uR) when fl32(D / n) is normal, but a subnormal step can be far below D / n
            //     (e.g. D = 382 * 2^-149, n = 255: s = 2^-149 and the top code misses by 127 s), and
            //     K covers that exactly.
            // (4) |p - q s| <= u q s + 2^-150 <= u n s + 2^-150: q s <= n s <= (1 + u) D <=
            //     (1 + u) FLT_MAX, so if fl32 overflows, sat gives FLT_MAX within u q s.
            // So |x - v| = |y - p| <= A := s/2 + K + (2u + u^2) R + s 2^-150 + u n s + 2^-150.
            // (5) x̂ is a nearest element of the finite binary32 set to v (RNE, then D1's saturation
            //     picks FLT_MAX for anything beyond it), and x is in that set, so |x̂ - v| <= |x - v|
            //     <= A. When |v| <= FLT_MAX (guaranteed by |x| + A <= FLT_MAX, as |v| <= |x| + A),
            //     also |x̂ - v| <= u |v| + 2^-150 <= u (|x| + A) + 2^-150.
            // Bound: E(x) = A + min(A, u (|x| + A) + 2^-150)   [the min only when |x| + A <= FLT_MAX,
            // else A + A]; and E = 0 when hi == lo (every element decodes to lo, equal to it).
            //
            // Tightness: when s is a normal number (R >= n 2^-126) K <= 2uR, so A = s/2 (1 + O(u n)),
            // and the second term is about u |x| <= u M, M = max(|lo|, |hi|). E <= 1.01 * s/2 holds
            // when M <= 100 R (then u M / (s/2) ~ 200 u n <= 0.0031 for b = 8). The condition is
            // needed: the decode's last rounding fl32(fl32(q s) + lo) really errs by up to half an
            // ulp of x̂, which exceeds s/2 when the block's magnitude dwarfs its range; and with a
            // subnormal step (tiny R) the actual error itself can exceed s/2 (K above).
            if (s == 0) {
                bb.asym_constant = true;
                break;
            }
            float lo = 0, hi = 0;
            asym_lo_hi(xb, lo, hi);
            const Exact r = Exact(hi) - Exact(lo);
            const Exact es(s);
            const Exact ns = es * Exact::from_int(q.format.code_max());
            Exact kk = r - ns;
            if (kk.sign() < 0) kk = Exact();
            const Exact& u = ex_u();
            bb.asym_a = es * ex_half() + kk + (u * Exact::from_int(2) + u * u) * r + es * ex_2m150() + u * ns +
                        ex_2m150();
            break;
        }
        case FormatKind::kDs: {
            float a = 0;
            for (float v : xb) a = std::max(a, std::fabs(round_to_fp16(v)));
            bb.ds_zero = a == 0;
            if (!bb.ds_zero) bb.ds_scale = ds_scale(q.format.bits, a);
            bb.ds_step = Exact(s);
            if (q.format.fast_math && !bb.ds_zero) {
                // From the block's own absmax, never from a kernel's step: a wrong step cannot widen it.
                const DsAdmissible adm = ds_admissible(q.format.bits, a);
                bb.fm_scale_max = adm.scale_max;
                bb.fm_step_max = Exact(adm.step_max);
                bb.fm_tau = Exact(adm.tau);
            }
            break;
        }
        case FormatKind::kDecl: break;  // decl_element_bound
        case FormatKind::kQr: {
            bb.qr_dec = s;
            bb.qr_enc = quickreduce_enc(s);
            const Exact k = Exact::from_int(1) - Exact(bb.qr_enc) * Exact(s);
            bb.qr_kappa = k.sign() < 0 ? Exact() - k : k;
            break;
        }
    }
    return bb;
}


// ds-int<b>-fm (docs/DECISIONS.md D23): the bound of every result an admissible scale and step give.
//
// The derivation. y = fl16(x); a = max |y| over the block (the kernel computes the same a: a
// maximum involves no rounding, and fast math does not change fl16, which is cvt.rn). a == 0: as
// ds-int<b>, E = h(|x|). Otherwise the kernel uses some admissible scale sigma and step Δ
// (reference::ds_admissible; the pair need not be the IEEE one), and computes w = fl32(y sigma),
// q = clamp(rne(w), -2^(b-1), 2^(b-1) - 1), z = fl32(q Δ), x̂ = fl16(z): mul.rn and cvt.rn are exact
// roundings under --use_fast_math too (it changes division, reciprocal, square root, FMA
// contraction and subnormals, and there is no addition here to contract).
// Flush to zero (.ftz) changes nothing: sigma, Δ, w and z are 0 or normal binary32 numbers
// (a in [2^-24, 65504], so sigma in [2^(b-1) / 65504, 2^(b-1+24)] up to a few ulps, Δ >= 2^-31,
// |w| >= 2^-24 sigma >= 2^-37, |z| >= Δ), and an input whose binary32 value is subnormal has
// |x| < 2^-126, which fl16 rounds to a zero of the same sign whether or not it was flushed first.
// Let tau = max |1 - sigma Δ| and Δmax = max Δ over the admissible pairs, and sigma_max the largest
// admissible scale (all computed exactly from a, DsAdmissible). u = 2^-24, h(m) = half the binary16
// spacing at magnitude m.
//   |x - x̂| <= |x - y| + |y - q Δ| + |q Δ - z| + |z - x̂|.
// (1) |x - y| <= h(|x|).
// (2) y - q Δ = y (1 - sigma Δ) + Δ (y sigma - w) + Δ (w - q), with |y sigma - w| <= u |y| sigma
//     (y sigma is 0 or normal) and sigma Δ <= 1 + tau, so
//       |y - q Δ| <= tau |y| + u (1 + tau) |y| + c Δmax,   c >= |w - q|.
//     c = 1/2 unless the clamp acted. It can act at the top only: |w| <= fl32(a sigma_max) <=
//     2^(b-1) + 1/2 (checked below, it holds with a wide margin), so rne(w) >= -2^(b-1). At the top
//     it acts iff rne(w) >= 2^(b-1), which needs y > 0 and w >= 2^(b-1) - 1/2; w <= w_max =
//     fl32(y sigma_max) (rounding is monotone), so then c = max(1/2, w_max - (2^(b-1) - 1)).
// (3) |q Δ - z| <= u |q| Δ <= u M, with M = min(2^(b-1) Δmax, |y| + the bound of (2)), since
//     |q| <= 2^(b-1) and |q Δ| <= |y| + |y - q Δ|.
// (4) |z - x̂| <= h(|z|) <= h((1 + u) M); no binary16 overflow: |z| <= 2^(b-1) Δmax (1 + u) <=
//     a (1 + 8u) < 65520.
// E(x) = h(|x|) + tau |y| + u (1 + tau) |y| + c Δmax + u M + h((1 + u) M).
// With tau <= 3u + 3u^2 (a step within 1.5 ulp of 1/sigma) and Δmax <= (1 + 8u) a / 2^(b-1), this
// is ds-int<b>'s bound with O(u) terms a little larger: the same half-spacing input rounding, half
// a step (a full step when clamped) and half-spacing output rounding (the test ds_fm_bound_*
// measures how close an element comes).
Exact ds_fm_element_bound(const FormatSpec& f, const BlockBound& bb, float xi) {
    const Exact in_round = half_fp16_spacing(Exact(std::fabs(xi)));
    if (bb.ds_zero) return in_round;
    const int b = f.bits;
    const double top = static_cast<double>(1 << (b - 1));
    const float y = round_to_fp16(xi);
    const Exact ey(std::fabs(y));
    const Exact& u = ex_u();
    Exact c = ex_half();
    if (y > 0) {
        const float w_max = mul32(y, bb.fm_scale_max);
        if (static_cast<double>(w_max) >= top - 0.5) {
            const Exact over = Exact(w_max) - Exact::from_int((1 << (b - 1)) - 1);
            if (c < over) c = over;
        }
    }
    const Exact one = Exact::from_int(1);
    const Exact e2 = bb.fm_tau * ey + u * (one + bb.fm_tau) * ey + c * bb.fm_step_max;
    const Exact cap = Exact::from_int(1 << (b - 1)) * bb.fm_step_max;
    const Exact m0 = ey + e2;
    const Exact m = m0 < cap ? m0 : cap;
    return in_round + e2 + u * m + half_fp16_spacing(m * (one + u));
}

Exact element_bound_in(const FormatSpec& f, const BlockBound& bb, float xi, int32_t qi) {
    switch (f.kind) {
        case FormatKind::kSym: return bb.sym;
        case FormatKind::kAsym: {
            if (bb.asym_constant) return Exact();
            const Exact& a = bb.asym_a;
            const Exact mag = Exact(std::fabs(xi)) + a;
            if (mag > ex_fltmax()) return a + a;
            const Exact rounding = ex_u() * mag + ex_2m150();
            return a + (rounding < a ? rounding : a);
        }
        case FormatKind::kDs: {
            if (f.fast_math) return ds_fm_element_bound(f, bb, xi);
            // The derivation of this bound.
            //
            // y = fl16(x); a = max |y| over the block; if a == 0 every y is 0, x̂ = fl16(fl32(0 * 1))
            // = +0 and |x - x̂| = |x - y| <= h(|x|), where h(m) = half the binary16 spacing at
            // magnitude m (2^(max(floor(log2 m), -14) - 11)).
            // Otherwise a in [2^-24, 65504], sigma = scale = fl32(2^(b-1) / a) (2a is exact), Δ =
            // fl32(1 / sigma), w = fl32(y sigma), q = clamp(rne(w), -2^(b-1), 2^(b-1) - 1),
            // z = fl32(q Δ), x̂ = fl16(z). sigma, Δ, w and z are normal binary32 numbers or 0
            // (sigma <= 2^7 * 2^24, Δ >= 2^-31, |w| >= 2^-24 * sigma >= 2^-37), so each rounding is
            // within u = 2^-24 relative: Δ = (1 + d1) / sigma, w = y sigma (1 + d2), |d1|, |d2| <= u.
            //   |x - x̂| <= |x - y| + |y - q Δ| + |q Δ - z| + |z - x̂|.
            // (1) |x - y| <= h(|x|).
            // (2) y - q Δ = (y sigma - w)/sigma + (w - q)/sigma - q d1/sigma, with |y sigma - w| <=
            //     u |y| sigma and 1/sigma = Δ/(1 + d1) <= Δ/(1 - u) <= (1 + 2u) Δ, so
            //       |y - q Δ| <= u |y| + (1 + 2u) (c + u |q|) Δ,   c >= |w - q|.
            //     c = 1/2 unless the clamp acted. The clamp can only act at the top: |w| <= a sigma
            //     (1 + u) <= 2^(b-1) (1 + u)^2 < 2^(b-1) + 1/2, so rne(w) >= -2^(b-1) always. An element
            //     with rne(w) >= 2^(b-1) (the +absmax, and anything that rounds with it) gets
            //     q = 2^(b-1) - 1 and w - q <= 1 + 2^(b-1) (2u + u^2) <= 1 + 3u 2^(b-1): a full step.
            // (3) |q Δ - z| <= u |q| Δ (q Δ is 0 or normal).
            // (4) |z - x̂| <= h(|z|) <= h(|q| Δ (1 + u)) (h is monotone; no binary16 overflow since
            //     |z| <= 2^(b-1) Δ (1 + u) <= a (1 + u)^3 < 65520).
            // E(x) = h(|x|) + u |y| + (1 + 2u)(c + u |q|) Δ + u |q| Δ + h(|q| Δ (1 + u)).
            // Tightness: the worst case really does stack a half-spacing input rounding, half a step
            // (a full step when clamped) and a half-spacing output rounding; the other terms are
            // O(u) relative, so the bound is within a few parts per million of that worst case.
            const Exact ex(std::fabs(xi));
            const Exact in_round = half_fp16_spacing(ex);
            if (bb.ds_zero) return in_round;
            const int b = f.bits;
            const float y = round_to_fp16(xi);
            const bool clamped = y > 0 && rne(mul32(y, bb.ds_scale)) >= static_cast<double>(1 << (b - 1));
            const Exact& u = ex_u();
            const Exact c = clamped ? Exact::from_int(1) + u * Exact::from_int(3LL << (b - 1)) : ex_half();
            const Exact aq = Exact::from_int(qi < 0 ? -static_cast<int64_t>(qi) : qi);
            const Exact& step = bb.ds_step;
            const Exact one_2u = Exact::from_int(1) + u * Exact::from_int(2);
            const Exact qstep = aq * step;
            return in_round + u * Exact(std::fabs(y)) + one_2u * (c + u * aq) * step + u * qstep +
                   half_fp16_spacing(qstep * (Exact::from_int(1) + u));
        }
        case FormatKind::kDecl: break;  // decl_element_bound
        case FormatKind::kQr: {
            // The derivation (docs/FORMATS.md section 11). y = fl16(x); the block's dec and
            // enc = rcp16(fl16(dec + 2^-24)) (saturated); w = fl16(y enc); c = clamp(w, -P, P - 1),
            // P = 2^(b-1); q = rne(c) (the code minus P); x̂ = fl16(q dec). h(m): half the binary16
            // spacing at magnitude m.
            //   |x - x̂| <= |x - y| + |y - q dec| + |q dec - x̂|, and the identity
            //   y - q dec = y (1 - enc dec) + dec (y enc - w) + dec (w - q) gives
            // (1) |x - y| <= h(|x|);
            // (2) |y - q dec| <= kappa |y| + |dec| (h(|y enc|) + |w - q|), kappa = |1 - enc dec|, with
            //     |w - q| = |w - c| when the clamp acts (c is then an integer, q = c), else <= 1/2
            //     (from w, not from a code handed in: a wrong code cannot widen the bound).
            //     kappa carries everything the factor gets wrong: the rounding of dec and of 1 / t, the
            //     2^-24 added before it (large when |dec| is near 2^-24), and a saturated enc (the
            //     group decodes shrunk, kappa near 1); dec = 0 gives kappa = 1 (every element decodes
            //     to a zero: the error is |y|);
            // (3) |q dec - x̂| <= h(|q| |dec|) (|q dec| <= |m| (1 + 2^-11) < 65520: no overflow).
            // E(x) = h(|x|) + kappa |y| + |dec| (h(|y enc|) + r) + h(|q| |dec|), r = |w - c| if w != c, else 1/2.
            const int32_t top = qr_top(f.bits);
            const float y = round_to_fp16(xi);
            const double w = fl16d(static_cast<double>(y) * static_cast<double>(bb.qr_enc));
            const double c = std::clamp(w, -static_cast<double>(top), top - 1.0);
            const Exact ad(std::fabs(bb.qr_dec)), ay(std::fabs(y));
            // r: exact (w and c are binary16 values)
            const Exact r = w != c ? Exact(static_cast<float>(std::fabs(w - c))) : ex_half();
            const Exact code = Exact::from_int(std::min(std::abs(qi - top), top));
            return half_fp16_spacing(Exact(std::fabs(xi))) + bb.qr_kappa * ay +
                   ad * (half_fp16_spacing(ay * Exact(std::fabs(bb.qr_enc))) + r) + half_fp16_spacing(code * ad);
        }
    }
    return Exact();
}

int64_t num_blocks(int64_t n, int64_t block) { return block <= 0 ? 0 : (n + block - 1) / block; }

}  // namespace

float round_to_fp16(float v) {
    if (std::isnan(v)) return v;
    return static_cast<float>(round_to_format(static_cast<double>(v), 11, -14, 15));  // exact cast
}

float quickreduce_enc(float dec) {
    if (std::isnan(dec)) return dec;
    const double t = fl16d(static_cast<double>(dec) + 0x1p-24);
    if (t == 0) return 65504.0f;  // 1 / +0: +inf, saturated (FP16_OVFL)
    const double r = fl16d(1.0 / t);
    return static_cast<float>(std::isinf(r) ? std::copysign(65504.0, r) : r);
}

float round_to_bf16(float v) {
    if (std::isnan(v)) return v;
    return static_cast<float>(round_to_format(static_cast<double>(v), 8, -126, 127));  // exact cast
}

namespace {
// NCCL's FP8 add (D41), from its definition: the binary32 value rounded to binary16 (NCCL adds in
// __half), then to nearest even on the FP8 grid (e4m3: 4 significand bits, least normal exponent -6;
// e5m2: 3 bits, -14), with no upper limit on the exponent; a result whose magnitude passes the
// largest finite value (448, 57344), or an infinite binary16 sum, saturates to it (__NV_SATFINITE).
struct Fp8Rounded {
    float value;
    bool saturated;
};
// A finite value to nearest even on the FP8 grid, no upper limit on the exponent (what passes the
// largest value is the caller's to clamp).
double fp8_grid_round(double v, Accum type) {
    const bool e4 = type == Accum::kFp8E4m3;
    return round_to_format(v, e4 ? 4 : 3, e4 ? -6 : -14, 64);
}
Fp8Rounded round_to_fp8_sat(float v, Accum type) {
    const double max = saturation_max(type);
    const float h = round_to_fp16(v);
    if (std::isnan(h)) return {h, false};
    const double r = std::isinf(h) ? static_cast<double>(h) : fp8_grid_round(static_cast<double>(h), type);
    if (std::fabs(r) > max) return {static_cast<float>(std::copysign(max, static_cast<double>(v))), true};
    return {static_cast<float>(r), false};  // exact: at most 4 significand bits
}
}  // namespace

float round_to_accum(float v, Accum type) {
    switch (type) {
        case Accum::kFp16: return round_to_fp16(v);
        case Accum::kBf16: return round_to_bf16(v);
        case Accum::kFp8E4m3:
        case Accum::kFp8E5m2: return round_to_fp8_sat(v, type).value;
        case Accum::kFp32: break;
    }
    return v;
}

bool saturates_in(float v, Accum type) { return saturating(type) && round_to_fp8_sat(v, type).saturated; }

float cast_to_type(float v, Accum type) {
    if (!saturating(type) || std::isnan(v)) return round_to_accum(v, type);
    const double max = saturation_max(type);
    const double r = std::isinf(v) ? static_cast<double>(v) : fp8_grid_round(static_cast<double>(v), type);
    return static_cast<float>(std::fabs(r) > max ? std::copysign(max, static_cast<double>(v)) : r);
}

bool cast_saturates(float v, Accum type) {
    if (!saturating(type) || std::isnan(v)) return false;
    return std::isinf(v) || std::fabs(fp8_grid_round(static_cast<double>(v), type)) > saturation_max(type);
}

float avg_factor(int64_t n, Accum type) {
    const double q = static_cast<double>(div32(1.0f, static_cast<float>(n)));  // fl32(1/N), as NCCL's float(1.0 / nRanks)
    return static_cast<float>(std::min(fp8_grid_round(q, type), saturation_max(type)));  // straight to FP8, no binary16 between
}

float divide_to(float v, int64_t n, Accum type) {
    if (saturating(type)) return round_to_accum(mul32(v, avg_factor(n, type)), type);  // exact product, then fl8sat(fl16(.))
    return round_to_accum(v / static_cast<float>(n), type);
}

Result<Quantized> quantize(const FormatSpec& format, std::span<const float> x, int64_t block, Nonfinite policy,
                           const Site& site, const StochasticKey& key) {
    if (!valid_format(format))
        return make_error(ErrorCode::kInvalidArgument, "unsupported format " + format.name());
    if (format.rotated()) return quantize_rotated(format, x, block, policy, site, key);
    if (format.kind == FormatKind::kDecl) return quantize_decl(format, x, block, policy, site, key);
    if (block <= 0)
        return make_error(ErrorCode::kInvalidArgument, "block size must be positive, got " + std::to_string(block));
    const int64_t n = static_cast<int64_t>(x.size());
    const int64_t nb = num_blocks(n, block);

    // Under `error`, refuse before anything is produced: the first offending block decides (D5).
    std::vector<uint8_t> bad(static_cast<std::size_t>(nb), 0);
    for (int64_t k = 0; k < nb; ++k) {
        const int64_t start = k * block, len = std::min(block, n - start);
        const auto xb = x.subspan(start, len);
        const BlockProblem p = find_problem(format, xb);
        if (p.kind == Problem::kNone) continue;
        if (policy == Nonfinite::kError) return problem_error(format, p, xb, start, site);
        bad[k] = 1;
    }

    Quantized out;
    out.format = format;
    out.block = block;
    out.scales.assign(nb, 0.0f);
    if (format.kind == FormatKind::kAsym) out.offsets.assign(nb, 0.0f);
    out.codes.assign(n, 0);
    out.decoded.assign(n, 0.0f);
    out.poisoned.assign(nb, 0);
    for (int64_t k = 0; k < nb; ++k) {
        const int64_t start = k * block, len = std::min(block, n - start);
        const auto xb = x.subspan(start, len);
        if (bad[k]) {
            poison_block(out, k, start, len);
            continue;
        }
        switch (format.kind) {
            case FormatKind::kSym: encode_sym(out, xb, k, start); break;
            case FormatKind::kAsym: encode_asym(out, xb, k, start); break;
            case FormatKind::kDs: encode_ds(out, xb, k, start); break;
            case FormatKind::kQr: encode_qr(out, xb, k, start); break;
            case FormatKind::kDecl: break;  // quantize_decl
        }
    }
    return out;
}

std::vector<float> decode(const FormatSpec& format, std::span<const int32_t> codes, std::span<const float> scales,
                          std::span<const float> offsets, int64_t block, uint64_t sign_seed, int64_t sign_first) {
    assert(block > 0);
    std::vector<float> out(codes.size());
    if (block <= 0) return out;
    if (format.rotated()) return decode_rotated(format, codes, scales, offsets, block, sign_seed, sign_first);
    if (format.kind == FormatKind::kDecl) return decode_decl(format, codes, scales, offsets, block);
    for (std::size_t i = 0; i < codes.size(); ++i) {
        const std::size_t k = i / static_cast<std::size_t>(block);
        assert(k < scales.size());
        const float s = k < scales.size() ? scales[k] : poison_nan();
        switch (format.kind) {
            case FormatKind::kSym: out[i] = decode_sym(codes[i], s); break;
            case FormatKind::kAsym: {
                assert(k < offsets.size());
                const float lo = k < offsets.size() ? offsets[k] : poison_nan();
                out[i] = decode_asym(codes[i], s, lo);
                break;
            }
            case FormatKind::kDs: out[i] = decode_ds(codes[i], s); break;
            case FormatKind::kQr: out[i] = decode_qr(codes[i], s, format.bits); break;
            case FormatKind::kDecl: break;  // handled above
        }
    }
    return out;
}

// Wire packing, per block (restarting at every block). Canonical formats: a bit stream, LSB first:
// code j of the block occupies bits [j b, (j + 1) b) of the stream, bit t of the stream being bit
// t % 8 of byte t / 8; the last byte is zero-padded. For b = 4 this is exactly NUMERICS 1.4 (element
// 2j in the low nibble), for b = 8 one byte per code. Codes are b-bit two's complement (sym) or
// unsigned (asym). ds-int4 uses DeepSpeed's order instead: byte = (q[2j] << 4) | (q[2j+1] & 0xF).
std::vector<uint8_t> pack(const FormatSpec& format, std::span<const int32_t> codes, int64_t block) {
    std::vector<uint8_t> out;
    assert(block > 0);
    if (block <= 0) return out;
    if (format.kind == FormatKind::kDecl) return pack_decl(format, codes, block);
    const int64_t n = static_cast<int64_t>(codes.size());
    const int b = format.bits;
    const uint32_t mask = (1u << b) - 1u;
    for (int64_t start = 0; start < n; start += block) {
        const int64_t len = std::min(block, n - start);
        const std::size_t base = out.size();
        out.resize(base + static_cast<std::size_t>(format.code_bytes(len)), 0);
        if (format.kind == FormatKind::kDs && b == 4) {
            for (int64_t j = 0; j < len; ++j) {
                const uint8_t nib = static_cast<uint8_t>(static_cast<uint32_t>(codes[start + j]) & 0xFu);
                out[base + j / 2] |= (j % 2 == 0) ? static_cast<uint8_t>(nib << 4) : nib;
            }
            continue;
        }
        for (int64_t j = 0; j < len; ++j) {
            const uint32_t v = static_cast<uint32_t>(codes[start + j]) & mask;
            for (int t = 0; t < b; ++t) {
                if (!((v >> t) & 1u)) continue;
                const int64_t bit = j * b + t;
                out[base + bit / 8] |= static_cast<uint8_t>(1u << (bit % 8));
            }
        }
    }
    return out;
}

std::vector<int32_t> unpack(const FormatSpec& format, std::span<const uint8_t> bytes, int64_t elements,
                            int64_t block) {
    std::vector<int32_t> out(static_cast<std::size_t>(std::max<int64_t>(elements, 0)), 0);
    assert(block > 0);
    if (block <= 0) return out;
    if (format.kind == FormatKind::kDecl) return unpack_decl(format, bytes, elements, block);
    const int b = format.bits;
    const bool is_signed = format.code_min() < 0;
    // Missing bytes (a short buffer violates the precondition) read as 0.
    auto byte_at = [&](int64_t i) -> uint32_t {
        return i >= 0 && i < static_cast<int64_t>(bytes.size()) ? bytes[static_cast<std::size_t>(i)] : 0u;
    };
    auto extend = [&](uint32_t v) -> int32_t {
        if (is_signed && (v >> (b - 1)) & 1u) return static_cast<int32_t>(v) - (1 << b);
        return static_cast<int32_t>(v);
    };
    int64_t base = 0;
    for (int64_t start = 0; start < elements; start += block) {
        const int64_t len = std::min(block, elements - start);
        if (format.kind == FormatKind::kDs && b == 4) {
            for (int64_t j = 0; j < len; ++j) {
                const uint32_t byte = byte_at(base + j / 2);
                out[start + j] = extend(j % 2 == 0 ? (byte >> 4) & 0xFu : byte & 0xFu);
            }
        } else {
            for (int64_t j = 0; j < len; ++j) {
                uint32_t v = 0;
                for (int t = 0; t < b; ++t) {
                    const int64_t bit = j * b + t;
                    v |= ((byte_at(base + bit / 8) >> (bit % 8)) & 1u) << t;
                }
                out[start + j] = extend(v);
            }
        }
        base += format.code_bytes(len);
    }
    return out;
}

Exact element_bound(const Quantized& q, std::span<const float> x, int64_t i) {
    assert(q.block > 0 && i >= 0 && i < static_cast<int64_t>(x.size()));
    const int64_t k = i / q.block;
    if (q.format.kind == FormatKind::kDecl) {
        const bool poisoned = !q.poisoned.empty() && q.poisoned[k];
        assert(!poisoned && "element_bound: not defined for poisoned blocks");
        if (poisoned) return Exact();
        if (q.format.rotated()) return rotated_block_bounds(q, x, k)[static_cast<size_t>(i - k * q.block)];
        const int64_t start = k * q.block, len = std::min<int64_t>(q.block, static_cast<int64_t>(x.size()) - start);
        return decl_element_bound(*q.format.decl, x[i], q.scales[k], q.format.has_offset() ? q.offsets[k] : 0.0f,
                                  decl_multiplier_of(*q.format.decl, x.subspan(static_cast<size_t>(start), static_cast<size_t>(len))));
    }
    const BlockBound bb = block_bound(q, x, k);
    assert(!bb.poisoned && "element_bound: not defined for poisoned blocks");
    if (bb.poisoned) return Exact();
    return element_bound_in(q.format, bb, x[i], q.codes[i]);
}

BoundCheck check_bounds(const Quantized& q, std::span<const float> x) {
    BoundCheck res;
    if (q.block <= 0) return res;
    const int64_t n = std::min<int64_t>(static_cast<int64_t>(x.size()), static_cast<int64_t>(q.decoded.size()));
    const int64_t nb = num_blocks(n, q.block);
    const bool decl = q.format.kind == FormatKind::kDecl;
    for (int64_t k = 0; k < nb; ++k) {
        BlockBound bb;
        if (decl) bb.poisoned = !q.poisoned.empty() && q.poisoned[k];
        else bb = block_bound(q, x.first(n), k);
        if (bb.poisoned) continue;
        const int64_t start = k * q.block, end = std::min(n, start + q.block);
        const std::vector<Exact> rot = q.format.rotated() ? rotated_block_bounds(q, x.first(n), k) : std::vector<Exact>{};
        const float m = decl ? decl_multiplier_of(*q.format.decl, x.subspan(static_cast<size_t>(start), static_cast<size_t>(end - start))) : 0.0f;
        for (int64_t i = start; i < end; ++i) {
            if (!std::isfinite(q.decoded[i])) {  // a finite input never decodes to inf or NaN
                if (res.holds) {
                    res.holds = false;
                    res.first_violation = i;
                }
                res.max_error = std::numeric_limits<double>::infinity();
                res.max_error_to_bound = std::numeric_limits<double>::infinity();
                continue;
            }
            // An element decoded to its input has error 0, within any bound (every bound is >= 0), and
            // adds nothing to the maxima: no exact arithmetic for it (a block of 16,384 mostly zeros
            // in the codec check's boundary inputs was 44 M exact bounds).
            if (x[i] == q.decoded[i]) continue;
            const Exact err = (Exact(x[i]) - Exact(q.decoded[i])).abs();
            const Exact bound = !rot.empty() ? rot[static_cast<size_t>(i - start)]
                                : decl ? decl_element_bound(*q.format.decl, x[i], q.scales[k],
                                                          q.format.has_offset() ? q.offsets[k] : 0.0f, m)
                                     : element_bound_in(q.format, bb, x[i], q.codes[i]);
            const bool ok = err <= bound;
            if (!ok && res.holds) {
                res.holds = false;
                res.first_violation = i;
            }
            if (err.sign() != 0) {
                res.max_error = std::max(res.max_error, err.to_double());
                const double r = bound.sign() == 0 ? std::numeric_limits<double>::infinity() : Exact::ratio(err, bound);
                res.max_error_to_bound = std::max(res.max_error_to_bound, r);
            }
        }
    }
    return res;
}


// ---- ds-int<b>-fm: the admissible arithmetic (docs/DECISIONS.md D23) ---------------------------

namespace {

// The spacing of binary32 values at the binade of a positive finite real r (given as its floor(log2)):
// ulp = 2^(e - 23), never below the subnormal spacing.
double ulp_at(int e) { return std::ldexp(1.0, std::max(e, -126) - 23); }

// The binary32 values around `center` for which in() holds, ascending: in() is a union of intervals
// that all contain center (the IEEE value), so walking outwards until it fails finds them all.
template <class In>
std::vector<float> walk(float center, In in) {
    std::vector<float> v{center};
    for (float d = std::nextafter(center, 0.0f); d > 0 && in(d); d = std::nextafter(d, 0.0f)) v.insert(v.begin(), d);
    for (float d = std::nextafter(center, kFltMax); d <= kFltMax && in(d); d = std::nextafter(d, kFltMax)) v.push_back(d);
    return v;
}

}  // namespace

DsAdmissible ds_admissible(int bits, float a16) {
    assert((bits == 4 || bits == 8) && a16 > 0 && a16 <= 65504.0f);
    DsAdmissible r;
    const double p = static_cast<double>(1 << (bits - 1));
    const double a = a16;
    r.scale0 = ds_scale(bits, a16);
    r.step0 = div32(1.0f, r.scale0);
    // Scales. rho = p / a; |sigma - rho| <= 2 ulp(rho) iff |sigma a - p| <= 2 ulp(rho) a: sigma (24
    // bits) times a (11 bits) and ulp(rho) a are exact in double, so the tests are exact.
    // floor(log2 rho): a16 = m 2^e with m in [1/2, 1), so rho = 2^(b-1-e) / m.
    int e_a = 0;
    const bool a_pow2 = std::frexp(a16, &e_a) == 0.5f;
    const int e_rho = a_pow2 ? bits - e_a : bits - 1 - e_a;
    const double rho_budget = 2 * ulp_at(e_rho) * a;
    const double s0 = r.scale0, s0_budget = 2 * ulp_at(std::ilogb(r.scale0));
    r.scales = walk(r.scale0, [&](float v) {
        const double dv = v;
        return std::fabs(dv - s0) <= s0_budget || std::fabs(dv * a - p) <= rho_budget;
    });
    // Steps of each scale: within 1 ulp of fl32(1/sigma), or |Δ sigma - 1| <= ulp(1/sigma) sigma
    // (exact: Δ sigma has at most 48 bits). floor(log2(1/sigma)) is -ilogb(sigma), less one unless
    // sigma is a power of two.
    for (float sg : r.scales) {
        const float d0 = div32(1.0f, sg);
        int ex = 0;
        const bool pow2 = std::frexp(sg, &ex) == 0.5f;
        const int e_inv = pow2 ? -std::ilogb(sg) : -std::ilogb(sg) - 1;
        const double inv_budget = ulp_at(e_inv) * static_cast<double>(sg);
        const double dd0 = d0, d0_budget = ulp_at(std::ilogb(d0));
        r.steps.push_back(walk(d0, [&](float v) {
            const double dv = v;
            return std::fabs(dv - dd0) <= d0_budget || std::fabs(dv * static_cast<double>(sg) - 1.0) <= inv_budget;
        }));
    }
    r.scale_max = r.scales.back();
    r.step_min = r.steps.front().front();
    for (size_t j = 0; j < r.scales.size(); ++j) {
        r.step_max = std::max(r.step_max, r.steps[j].back());
        r.step_min = std::min(r.step_min, r.steps[j].front());
        for (float d : r.steps[j]) r.tau = std::max(r.tau, std::fabs(1.0 - static_cast<double>(r.scales[j]) * d));
    }
    // The bound's premise (formats.cpp, ds_fm_element_bound): no admissible scale takes the absmax
    // past the bottom code.
    assert(static_cast<double>(mul32(a16, r.scale_max)) <= p + 0.5);
    return r;
}

AdmissibleCheck check_admissible(const FormatSpec& format, std::span<const float> x, int64_t block,
                                 std::span<const int32_t> codes, std::span<const float> steps,
                                 std::span<const float> decoded, int64_t index_base) {
    AdmissibleCheck res;
    assert(format.kind == FormatKind::kDs && block > 0);
    const int b = format.bits;
    const int32_t cmin = -(1 << (b - 1)), cmax = (1 << (b - 1)) - 1;
    const int64_t n = static_cast<int64_t>(x.size());
    assert(codes.size() == x.size() && (decoded.empty() || decoded.size() == x.size()) &&
           static_cast<int64_t>(steps.size()) == (n + block - 1) / block);
    auto fail = [&](int64_t i, const std::string& why) {
        ++res.inadmissible_elements;
        if (res.holds) {
            res.holds = false;
            res.first = i;
            res.first_text = "element " + std::to_string(index_base + i) + " (input " +
                             shortest(x[static_cast<size_t>(i)]) + "): " + why;
        }
    };
    for (int64_t k = 0; k * block < n; ++k) {
        const int64_t start = k * block, end = std::min(n, start + block);
        const float step = steps[static_cast<size_t>(k)];
        float a = 0;
        bool finite = true;
        for (int64_t i = start; i < end; ++i) {
            const float y = round_to_fp16(x[static_cast<size_t>(i)]);
            if (!std::isfinite(y)) finite = false;
            else a = std::max(a, std::fabs(y));
        }
        // A poisoned block (propagate) and a zero block have one result, the IEEE one.
        std::vector<float> scales_for_step;
        if (finite && a != 0) {
            const DsAdmissible adm = ds_admissible(b, a);
            for (size_t j = 0; j < adm.scales.size(); ++j)
                if (std::binary_search(adm.steps[j].begin(), adm.steps[j].end(), step)) scales_for_step.push_back(adm.scales[j]);
            if (scales_for_step.empty()) {
                ++res.inadmissible_steps;
                for (int64_t i = start; i < end; ++i)
                    fail(i, "its block's step " + shortest(step) + " is not one an admissible scale gives (IEEE step " +
                                shortest(adm.step0) + ", admissible " + shortest(adm.step_min) + " to " +
                                shortest(adm.step_max) + ")");
                continue;
            }
        } else {
            const bool ok = finite ? same_bits(step, 1.0f) : std::isnan(step);
            if (!ok) {
                ++res.inadmissible_steps;
                for (int64_t i = start; i < end; ++i)
                    fail(i, std::string(finite ? "its block is all zeros in binary16, whose step is 1" : "its block is not finite, whose step is NaN") +
                                ", not " + shortest(step));
                continue;
            }
        }
        for (int64_t i = start; i < end; ++i) {
            const size_t e = static_cast<size_t>(i);
            const int32_t code = codes[e];
            const float y = round_to_fp16(x[e]);
            if (finite) {
                bool found = a == 0 ? code == 0 : false;
                int32_t lo = cmax, hi = cmin;
                for (float sg : scales_for_step) {
                    const int32_t q = clamp_code(rne(mul32(y, sg)), cmin, cmax);
                    lo = std::min(lo, q);
                    hi = std::max(hi, q);
                    found = found || q == code;
                }
                if (!found) {
                    fail(i, "code " + std::to_string(code) + " is not one an admissible scale gives with the block's step " +
                                shortest(step) + " (codes " + (a == 0 ? std::string("0") : std::to_string(lo) + " to " + std::to_string(hi)) + ")");
                    continue;
                }
            }
            if (!decoded.empty()) {
                const float want = decode_ds(code, step);
                if (!same_bits(decoded[e], want))
                    fail(i, "decoded " + shortest(decoded[e]) + ", but code " + std::to_string(code) + " with the block's step " +
                                shortest(step) + " decodes to " + shortest(want));
            }
        }
    }
    return res;
}

}  // namespace qtransit::reference
