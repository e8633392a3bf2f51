// The path checker: exact errors, a-posteriori and a-priori bounds (NUMERICS.md section 5).
//
// ======================================================================================================
// 0. Notation and the rounding of the bounds themselves
// ======================================================================================================
// u = 2^-24 (binary32), u16 = 2^-11 (binary16), h(m) = half the binary16 spacing at m
// (2^(max(floor(log2 m), -14) - 11), 0 at 0). "The exact E" is reference::element_bound.
//
// Both bounds are computed in binary64 with round-to-nearest, from non-negative quantities, with +,
// *, / and max/min only (every subtraction below is either exact in binary64 -- shown where it is
// used -- or computed with a directed correction, add_up()). Each such operation returns at least
// (1 - 2^-53) times the exact result of its (computed) operands, and all are monotone, so a value
// computed through a chain of at most d operations is >= (1 - 2^-53)^d >= 1 - d 2^-53 times the
// exact one (no underflow: every quantity here is either 0 or >= 2^-340, far above 2^-1022; terms
// below 2^-1074 would not matter anyway).
//
// a_posteriori: per output element, a sum of m terms (events + add terms, each term <= 16
// operations deep), summed left to right: depth d <= m + 20. The result is multiplied by
// (1 + 2^-30) (one more rounding): the final double is >= exact (1 - (d+1) 2^-53)(1 + 2^-30) >=
// exact as long as (d+1) 2^-53 <= 2^-30 / (1 + 2^-30), i.e. d <= 2^22 (4 million terms: a ring of
// 2^21 ranks).
// a_priori: a recurrence over at most ~4N steps of <= 12 operations each, plus the constants
// (<= 20 operations): d <= 48 N + 20; multiplied by (1 + 2^-20) it is >= the exact a_priori as long
// as d <= 2^32 (N up to 2^26 ranks).
// Why two different inflations: the check a_post <= a_priori must not be decided by rounding. The
// computed a_post is at most exact_post (1 + 2^-30)(1 + 2^-52) (the computed sum is never more
// than (1 + 2^-53)^(d+1) above its exact value either), and the computed a_priori is at least
// exact_prio (1 + 2^-20)(1 - 2^-30); since exact_post <= exact_prio (proved below, term by term)
// the computed values keep the order with a margin of ~2^-20.
//
// The exact error |value - T| is a SuperAcc (exact), and it is compared with the double a_post
// exactly (SuperAcc::compare_abs).
//
// ======================================================================================================
// 1. a_posteriori (NUMERICS 5): per element i of an output row
// ======================================================================================================
//   sum over the row's events ev of E_ev(x_ev[i], q_ev[i])        (the bound of the event's format)
// + u/(1-u) * add_abs_sum[i]                                     (binary32 adds)
//   or, under binary16 accumulation (D11):
//   u16/(1-u16) * add_abs_sum[i] + u16 * term_round_abs_sum[i] + 2^-25 * term_round_count[i].
// Rigour of the add term: a round-to-nearest add errs by at most u |fl(v)| (<= u16 |fl(v)| in
// binary16; 0 when the sum lands in the subnormal range, where it is exact), so u/(1-u) |r| leaves a
// slack of a factor 1/(1-u): it covers an add_abs_sum that the producer summed in binary64 with a
// relative error up to 2^-24 (2^29 adds).
// E_ev is reference::element_bound's formula (D6, D9, D10), evaluated from the event's x (the whole
// block: asym's lo/hi/R and int<b>'s subnormal K need it), codes and scale; see EventBound below.
// Column element i was quantized as x[i + column_offset]; an event counts only for the elements its
// block covers (hpz's straddling forward blocks). Events are prepared once per column (rows share
// them), and a row whose event ids start with the previous row's prefix resumes from a snapshot.
//
// ======================================================================================================
// 2. a_priori: per-event bounds e(a) (e dominates E(x) for every element of every block of absmax <= a)
// ======================================================================================================
// Facts: fl32(v) <= v (1 + u) + 2^-150 for v >= 0 (relative error u in the normal range, half a
// subnormal spacing below it), and a binary32 difference or quotient of subnormal size that is a
// multiple of 2^-149 is exact.
//
// int<b> (qmax = 2^(b-1) - 1, c' = 1/2 + 2^-22 qmax): E = s c' + 2^-149 (+ K when s is subnormal).
//   s = max(fl32(a_blk / qmax), 2^-149) <= (a / qmax)(1 + u) + 2^-149.
//   K = max(0, a_blk - qmax s) is only added when s < 2^-126; then a_blk/qmax was in the subnormal
//   range, fl32 erred by <= 2^-150, s >= a_blk/qmax - 2^-150, and K <= qmax 2^-150.
//   e(a) = [(1 + u) c' / qmax] a + 2^-149 (c' + 1 + qmax / 2).             (a 0 block: E = 2^-149)
//
// int<b>-asym (n = 2^b - 1): R = hi - lo <= 2a; D = fl32(R) <= R (1 + u) (R < 2^-126 is exactly
//   representable); s <= (D / n)(1 + u) + 2^-149 <= (R / n)(1 + u)^2 + 2^-149;
//   n s >= D (1 - u) - n 2^-150 >= R (1 - u)^2 - n 2^-150, so K = max(0, R - n s) <= 2u R + n 2^-150.
//   A = s (1/2 + 2^-150 + u n) + K + (2u + u^2) R + 2^-150
//     <= alpha a + beta,  alpha = 2 [(1 + u)^2 (1/2 + 2^-150 + u n) / n + 4u + u^2],
//                         beta = 2^-149 (1/2 + 2^-150 + u n) + (n + 1) 2^-150.
//   E = A + min(A, u (|x| + A) + 2^-150) when |x| + A <= FLT_MAX, else 2A (D9). For a <= FLT_MAX / 2,
//   A <= 0.34 a + beta, so |x| + A <= FLT_MAX and E <= (1 + u) A + u a + 2^-150:
//   e(a) = [(1 + u) alpha + u] a + (1 + u) beta + 2^-150       for a <= FLT_MAX / 2 (1 - 2^-30),
//   e(a) = 2 alpha a + 2 beta                                  above (>= the first piece: monotone).
//   (a constant block has E = 0.)
//
// ds-int<b> (P = 2^(b-1)): y = fl16(x), a16 = fl16(a) <= a (1 + u16) + 2^-25, sigma = fl32(P / a16)
//   (normal), Delta = fl32(1 / sigma) <= a16 (1 + u) / ((1 - u) P), |q| <= P, c <= 1 + 3u P (the
//   clamped +absmax element costs a full step: a priori we cannot know which element it is):
//   h(|x|) <= u16 a + 2^-25; u |y| <= u a16; (1 + 2u)(c + u|q|) Delta <= (1 + 2u)(1 + 4uP) Delta;
//   u |q| Delta <= u a16 (1 + u)/(1 - u); h(|q| Delta (1 + u)) <= u16 a16 (1 + u)^2/(1 - u) + 2^-25.
//   K1 = u + (1 + 2u)(1 + 4uP)(1 + u)/((1 - u) P) + u (1 + u)/(1 - u) + u16 (1 + u)^2/(1 - u),
//   e(a) = [u16 + K1 (1 + u16)] a + 2^-24 + K1 2^-25.                (a16 == 0: E = h(|x|) <= 2^-25)
//
// Caps: every block that was quantized without poisoning is finite, so its absmax is <= FLT_MAX
// (int<b>, asym) or < 65520 (ds: D3 refuses larger inputs), and e is evaluated at min(a, cap). A
// block that was poisoned or overflowed yields a non-finite output, which is a violation anyway.
//
// ======================================================================================================
// 3. a_priori: the paths. A bound pair (mag, err) of a value (every element of a column block):
//    |exact| <= mag, |computed - exact| <= err. S_h = sum of the A_j it carries.
// ======================================================================================================
// Q (quantize + decode):     (mag, err) -> (mag, err + e(mag + err))
//   the block quantized has absmax <= mag + err (err bounds every element's error, as the same
//   recurrence holds for every element of the column), and e is monotone.
// binary32 add of (M1,E1), (M2,E2): (M, E) = (M1 + M2, E1 + E2) -> (M, E + g (M + E)),
//   g = u (1 + u)/(1 - u): the a_post term u/(1-u) |r| with |r| = |fl32(v)| <= (1 + u)|v|,
//   |v| <= M + E.
// binary16 accumulation (D11): every term t entering a sum is first rounded (a_post: u16 |t| + 2^-25,
//   |t| <= (M + E)(1 + u16) + 2^-25 whether the producer records t before or after rounding):
//   T: (M, E) -> (M, E + u16 ((M + E)(1 + u16) + 2^-25) + 2^-25), and an add is
//   (M, E) -> (M, E + g16 (M + E)), g16 = u16 (1 + u16)/(1 - u16). If M + E >= 65520 the term or the
//   sum can overflow to inf: the a_priori is then +inf (an honest "cannot bound"). T is applied to
//   every term that may be rounded (conservatively also where the producer may not round it: an
//   extra term only makes the a_priori larger). Under binary32 accumulation T is the identity.
// Paths (c = the column's chunk first / S, A_j = absmax of rank j's row; indices mod N):
//   ring-rs:      B = T(A_{c+1}); hop h = 1..N-1: B = add(T(Q(B)), T(A_{c+1+h})).
//                 i.e. E_h = E_{h-1} + e(S_h + E_{h-1}) + g (S_{h+1} + ...): with e(a) = c_f a + d_f
//                 this is E_h <= E_{h-1}(1 + c_f) + c_f S_h + d_f + add terms, NUMERICS 5's recurrence.
//   fp32-ring-rs: the same without Q: B = add(B, T(A_{c+1+h})): add terms only.
//   a2a-rs:       B = T(Q(A_0)); j = 1..N-1: B = add(B, T(Q(A_j)))  ~ sum_j e(A_j) + add terms.
//   a2a-hier-rs:  per node n: U_n = T(Q(A_{nG})) + ... + T(Q(A_{nG+G-1})) (adds),
//                 V_n = T(Q(U_n)) (= e(sum_j A_nj + err(U_n)) more), then V_0 + ... + V_{nodes-1}.
//   tree-rs:      B(r, -1) = A_r; B(r, t) = add(T(B(r, t-1)), T(Q(B(r XOR d_t, t-1)))),
//                 d_t = N / 2^(t+1); the output is B(c, log2 N - 1). (B(r, t) carries the 2^(t+1)
//                 ranks that differ from r only in the bits d_0..d_t; contributor j is quantized
//                 popcount(j XOR c) times.)
//   two-shot-ar:  B1 = a2a-rs's bound (every row), then Q(B1): E1 + e(S + E1).
//   ring-ag, hpz-ag-fp:  Q(A) = e(A), A = the absmax of the element's first block.
//   ring-ag-requant:     holder h = rank - c (mod N) steps from the owner c: E_1 = e(A),
//                        E_h = E_{h-1} + e(A + E_{h-1}); the owner (h = 0) holds one encoding, E_1.
//   hpz-ag-requant:      E_F = e(A_i) (forward), then the secondary block (absmax <= max A + max E_F
//                        <= Amax + e(Amax)) is re-encoded: E_F + e(Amax + e(Amax))  (Delta1 + Delta2).
//
// Proof that a_post <= a_priori (exactly, for every input, when the ledger has the path's events):
// a_post is a sum of terms of three kinds, each dominated by its a_priori counterpart, and the
// a_priori has at least one counterpart per a_post term (its terms for roundings a producer may skip
// are >= 0):
//   * an event's E_ev(x_ev[i]) <= e(absmax of x_ev's block) <= e(mag + err) of the value quantized:
//     every element x_ev[i'] = exact + error with |exact| <= mag and |error| <= its own a_post
//     <= err (induction over the schedule: the bound pair of each operand dominates it), and e is
//     monotone and dominates E (section 2);
//   * an add term u/(1-u) |r| <= g (M + E) since |r| <= (1 + u)|v| and |v| <= M + E (same
//     induction); binary16 adds and term roundings likewise;
//   * nothing else: a_post has no other term.
// And |error| <= a_post: the computed value is the exact sum plus the sum of the local errors (each
// quantization's x̂ - x and each rounding's fl(v) - v: sums propagate errors without amplification),
// each bounded by its a_post term.
#include "qtransit/common/bits.hpp"
#include "qtransit/reference/checker.hpp"

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>

#include "qtransit/reference/formats.hpp"
#include "qtransit/reference/hadamard.hpp"
#include "column_scan_avx512.hpp"
#include "decl_at.hpp"
#include "decl_internal.hpp"

namespace qtransit::reference {

namespace {

constexpr double kU = 0x1p-24;
constexpr double kU16 = 0x1p-11;
constexpr double kFltMax = static_cast<double>(FLT_MAX);
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kFp16Overflow = 65520.0;  // |v| >= this rounds to inf in binary16
constexpr double kPostInflation = 1.0 + 0x1p-30;
constexpr double kPrioInflation = 1.0 + 0x1p-20;

// A double >= a + b (exact directed rounding: TwoSum gives the exact residual of the rounded sum).
double add_up(double a, double b) {
    const double s = a + b;
    if (!std::isfinite(s)) return s;
    const double bp = s - a;
    const double ap = s - bp;
    const double err = (a - ap) + (b - bp);  // a + b = s + err exactly
    if (!(err > 0)) return s;
    // nextafter(s, +inf) from the bits: the next double up (0 -> the least subnormal; -tiny -> -0).
    if (s == 0) return std::numeric_limits<double>::denorm_min();
    const uint64_t bits = std::bit_cast<uint64_t>(s);
    return std::bit_cast<double>(s > 0 ? bits + 1 : bits - 1);
}

// floor(log2 |m|) of a normal double: its exponent field (ilogb without the call).
int exponent_of(double m) { return static_cast<int>((std::bit_cast<uint64_t>(m) >> 52) & 0x7FF) - 1023; }

// h(m) = half the binary16 spacing at m >= 0, as used by D10 (no overflow handling: callers cap).
// m is 0 or a normal double (>= 2^-1022), so floor(log2 m) is its exponent field minus the bias, and
// the result 2^k (k >= -25) is built from its bits: both exact.
double half16(double m) {
    if (m == 0) return 0;
    const int64_t e = static_cast<int64_t>((std::bit_cast<uint64_t>(m) >> 52) & 0x7FF) - 1023;
    const int64_t k = std::max<int64_t>(e, -14) - 11;
    return std::bit_cast<double>(static_cast<uint64_t>(k + 1023) << 52);
}

float abs_max(std::span<const float> x) {
    float a = 0;
    for (float v : x) a = std::max(a, std::fabs(v));
    return a;
}

}  // namespace

// DeclScale, decl_scale_of and decl_at are declared in decl_at.hpp, which the AVX-512 form of
// decl_at over a block (decl_simd.cpp) shares.
namespace detail {

// ---- declared formats (docs/FORMATS.md section 6; reference/src/decl.cpp derives E) ----------------
//
// decl_at mirrors reference::element_bound (decl.cpp's decl_element_bound) term by term in binary64:
// every product below is exact (24-bit binary32 values times powers of two, or two 24-bit
// significands), the binade j of the float step is found by exact comparisons (so the step is the
// exact one), sums are rounded to nearest and differences upwards (add_up), so the result is within
// the documented factor of the exact E (section 0).
DeclScale decl_scale_of(const Decl& d, float s, float m) {
    DeclScale c;
    if (multiplies(d.scale)) c.m = m;  // before the zero case: fp32-eps-mul's scale can be 0 with a range
    c.zero = s == 0;
    if (c.zero) return c;
    c.ds = s;
    const uint32_t sb = std::bit_cast<uint32_t>(s);
    c.pow2 = (sb & 0x7FFFFFu) == 0 || ((sb >> 23) == 0 && std::popcount(sb) == 1);
    c.lo126 = c.ds * 0x1p-126;
    c.hi = c.ds * kFltMax;
    c.tiny = c.ds * 0x1p-150;
    c.nearest = d.rounding != Rounding::kTowardZero && d.rounding != Rounding::kStochastic;
    // ds >= 2^-149 and m >= ds 2^-126 are normal doubles, and so is every ds 2^j below (j within
    // [-300, 300]): exponent_of is ilogb, and the products by pow2_double are ldexp, exactly.
    if (d.elem == ElemType::kInt) c.step_int = c.ds * pow2_double(-d.fraction_bits);
    c.e_ds = exponent_of(c.ds);
    c.vmax = c.ds * d.vmax;
    c.vmin = c.ds * d.vmin;
    const double vabs = std::max(std::fabs(static_cast<double>(d.vmin)), std::fabs(static_cast<double>(d.vmax)));
    c.vabs = c.ds * vabs;
    return c;
}

double decl_at(const Decl& d, const DeclScale& c, float x, float lo) {
    // s == 0: every element decodes to lo or 0 (decl.cpp): the error is 0 for an all-zero or constant
    // block, and for fp32-eps-mul (no floor on fl32(a / A)) |x - lo| or |x|, at most A 2^-150 (rounded up).
    if (c.zero) {
        if (d.scale == ScaleType::kE4m3TensorAmax) return std::fabs(static_cast<double>(x));  // NVFP4: decodes to a zero
        if (d.scale != ScaleType::kFp32EpsMul) return 0;
        const double a = x, b = d.offset_min ? lo : 0.0f;
        return std::min(a >= b ? add_up(a, -b) : add_up(b, -a), static_cast<double>(d.amp) * 0x1p-150);
    }
    // A scale that multiplies (c.m != 0): w' = w m s in place of w (w m is exact in binary64, the
    // product by s rounded: 2^-51 |w'| more in t covers it), plus |w| |1 - m s| (m s is exact; 1 - m s
    // too when m s is in [1/2, 2] (Sterbenz), else |1 - m s| >= 1/2 and its rounding is relative), and
    // Tdec without its min (with an offset, w is a binary32: its min with that and S).
    const bool mul = c.m != 0;
    const float w = d.offset_min ? x - lo : x;  // fl32(x - lo): binary32 RNE (no contraction)
    const double dw = mul ? static_cast<double>(w) * c.m * c.ds : static_cast<double>(w), aw = std::fabs(dw), ds = c.ds;
    const bool exact_div = !mul && c.pow2 && (w == 0 || (aw >= c.lo126 && aw <= c.hi));
    const double t = exact_div ? 0 : kU * aw + c.tiny + (mul ? aw * 0x1p-51 : 0.0);
    double sel = 0;
    if (d.elem == ElemType::kTable) {
        double dist = kInf;
        for (int i = 0; i < d.table_size; ++i) dist = std::min(dist, std::fabs(dw - ds * d.table[i]));
        sel = dist + 2 * t;
    } else {
        double step_s = 0;
        if (d.elem == ElemType::kInt) {
            step_s = c.step_int;
        } else {
            const double m = std::max(aw * (1 + kU), c.lo126);  // both exact
            int j = exponent_of(m) - c.e_ds;
            if (ds * pow2_double(j) > m) --j;
            step_s = ds * pow2_double(std::max(j, 1 - d.bias) - d.man_bits);
        }
        // The excesses over the range, each rounded upwards; only a positive one counts in x_ex, so
        // one that is surely negative is not computed (-1 stands for it: max(0, -1, .) = max(0, .)).
        //   top: add_up(A, -vmax) <= 0 when A = add_up(dw, t) < vmax (an exactly negative sum rounds
        //   up to at most -0), and A <= nextup(RN(dw + t)) < vmax when RN(dw + t) < vmax / 2 and vmax
        //   > 2^-1000 (far above the spacing of doubles near 0).
        //   bot: within 4 ulps of max(|vmin|, |w|, t) of the exact vmin - w + t, and RN((vmin - w) + t)
        //   within 2 more: surely negative below -(|vmin| + |w| + t) 2^-48 - 2^-1000.
        const double top = c.vmax > 0x1p-1000 && dw + t < 0.5 * c.vmax ? -1.0 : add_up(add_up(dw, t), -c.vmax);
        const double bot = (c.vmin - dw) + t < -(std::fabs(c.vmin) + aw + t) * 0x1p-48 - 0x1p-1000
                               ? -1.0
                               : add_up(add_up(c.vmin, -dw), t);
        const double x_ex = std::max({0.0, top, bot});
        sel = t + std::max((c.nearest ? 0.5 : 1.0) * step_s, x_ex);
    }
    const double y = std::min(aw + sel, c.vabs);
    // Tdec (without its min), and a multiplying scale's |w| |1 - m s| added to S where it is taken.
    const double tdec = std::max(kU * y + 0x1p-150, add_up(y, -kFltMax));
    const double dev = mul ? std::fabs(static_cast<double>(w)) * std::fabs(1.0 - c.m * c.ds) * (1 + 0x1p-50) : 0.0;
    if (!d.offset_min) return mul ? add_up(add_up(dev, sel), tdec) : sel + std::min(sel, tdec);
    const double tsub = kU * std::fabs(static_cast<double>(x) - static_cast<double>(lo)) + 0x1p-150;
    double ep;
    if (mul) {
        const double dev_sel = add_up(dev, sel);
        ep = add_up(add_up(tsub, dev_sel), d.decode_fma ? 0.0 : std::min(dev_sel, tdec));
    } else {
        ep = d.decode_fma ? add_up(tsub, sel) : tsub + sel + std::min(sel, tdec);
    }
    const double mag = std::fabs(static_cast<double>(x)) + ep;
    if (mag >= kFltMax * (1 - 0x1p-40)) return ep + ep;  // decided conservatively, as for D9
    return ep + std::min(ep, kU * mag + 0x1p-150);
}

void add_decl_bounds(const Decl& d, float s, float lo, float m, const float* x, size_t n, double* acc, bool simd) {
    // A scale that multiplies (m: the block's multiplier, prepare_event), a zero scale and a fused
    // decode take decl_at's scalar branches only.
    const DeclScale c = decl_scale_of(d, s, m);
#if defined(__x86_64__)
    if (simd && column_simd() && c.m == 0 && !c.zero && !d.decode_fma) {
        add_decl_at_avx512(d, c, x, n, lo, acc);
        return;
    }
#else
    (void)simd;
#endif
    for (size_t i = 0; i < n; ++i) acc[i] += decl_at(d, c, x[i], lo);
}

}  // namespace detail

namespace {

using detail::decl_at;
using detail::decl_scale_of;
using detail::DeclScale;

// e(a) of a declared format: a bound of decl_element_bound over every block of absmax <= a (with an
// offset: every |x| <= a, so R <= 2a). Term by term (names as in decl.cpp's derivation):
//   W >= |w| and >= the scale's statistic: a, or fl32(R) <= 2a (1 + u) with an offset.
//   s <= S and s >= s_lo(W) for the block's statistic (<= W):
//     fp32: S = (W/A)(1 + u) + 2^-149,  s_lo = (W/A)(1 - u) - 2^-150  (RNE relative u, or half a
//           subnormal spacing; the max with 2^-149 only raises s);
//     fp16: S = S32 (1 + 2^-11) + 2^-24 (a rounding to 0 becomes 2^-24), s_lo = s_lo32 (1 - 2^-11) - 2^-25;
//     e8m0-floor: 2^(floor(log2 W) - emax_elem): S = max(W 2^-emax_elem, 2^-127),
//           s_lo = min(W 2^-(emax_elem+1), 2^127);
//     e8m0-rceil: A 2^(e-1) < W <= A 2^e: S = max(2W/A, 2^-127), s_lo = min(W/A, 2^127);  none: 1.
//     e8m0-even: S = max(2W 2^-emax_elem, 2^(-126-emax_elem), 2^-127), s_lo as floor's;
//     e8m0-fbgemm-even: S as even's (the exponent of W or the next one), s_lo = min(W 2^-(emax_elem+1), 2^125);
//     e8m0-ceil: S as even's, s_lo = min(W 2^-emax_elem, 2^127) (then the excess below is taken
//           at its larger end, 0 or W: s_lo vmax may grow faster than W).
//   T <= u W + S 2^-150.
//   X: the top excess w + T - s vmax <= W(1 + u) + S 2^-150 - s_lo(W) vmax, non-decreasing in the
//     statistic (its slope 1 + u - vmax s_lo' >= 0 since vmax <= A), so the block's value is at most
//     the one at W; the bottom one likewise with |vmin| (vmin < 0), W(1 + u) + S (2^-150 + vmin)
//     (vmin >= 0, no offset), or S max(vmin, 0) + T (offset: w >= 0).
//   s step: int S 2^-f; float s 2^(max(j, emin) - M) <= 2^-M max(s m, s 2^emin) with
//     s m = max(|w| (1 + u), s 2^-126): <= 2^-M max(W (1 + u), S 2^emin)   (emin >= -126).
//   table: dist(w, sV) <= max(s maxgap / 2, X).
//   Y <= min(W + S_el, S max|V|); Tdec, Tsub = 2uA + 2^-150, the offset's last rounding: as E, each
//   monotone in its arguments. Every piece is non-decreasing in a, so e is.
double decl_e(const Decl& d, double a) {
    a = std::min(a, kFltMax);
    const double u = kU;
    const double amp = d.amp, vmax = d.vmax, vmin = d.vmin;
    const double vabs = std::max(std::fabs(vmin), std::fabs(vmax));
    const double w = d.offset_min ? 2 * a * (1 + u) : a;
    double s_up = 1, s_lo = 1;
    switch (d.scale) {
        case ScaleType::kFp32Absmax:
        case ScaleType::kFp16Absmax:
            s_up = w / amp * (1 + u) + 0x1p-149;
            s_lo = std::max(w / amp * (1 - u) - 0x1p-150, 0.0);
            if (d.scale == ScaleType::kFp16Absmax) {
                s_up = s_up * (1 + kU16) + 0x1p-24;
                s_lo = std::max(s_lo * (1 - kU16) - 0x1p-25, 0.0);
            }
            break;
        case ScaleType::kE8m0Floor:
            s_up = std::max(std::ldexp(w, -d.emax_elem), 0x1p-127);
            s_lo = std::min(std::ldexp(w, -(d.emax_elem + 1)), 0x1p127);
            break;
        case ScaleType::kE8m0Rceil:
            s_up = std::max(2 * w / amp, 0x1p-127);
            s_lo = std::min(w / amp, 0x1p127);
            break;
        case ScaleType::kE8m0Even:
        case ScaleType::kE8m0FbgemmEven:
        case ScaleType::kE8m0Ceil:
            // even: 2^(E - emax_elem) or twice that, E = max(floor(log2 W), -127); ceil: the power of
            // two at or above W (a subnormal W: 2^-126), over 2^emax_elem.
            s_up = std::max({std::ldexp(2 * w, -d.emax_elem), std::ldexp(1.0, -126 - d.emax_elem), 0x1p-127});
            s_lo = std::min(std::ldexp(w, -(d.emax_elem + (d.scale == ScaleType::kE8m0Ceil ? 0 : 1))),
                            d.scale == ScaleType::kE8m0FbgemmEven ? 0x1p125 : 0x1p127);
            break;
        case ScaleType::kFp32AmaxMul:
        case ScaleType::kFp32AmaxMulRcp:
        case ScaleType::kFp32AmaxMulInv:
        case ScaleType::kE8m0RceilMul:
        case ScaleType::kPow2RceilMul: {
            // W = max(w, F); s (or t, which the rceil scales round up to a power of two) is W / A
            // rounded once (amax-mul) or twice (fl32(1/A), then the product; -inv: m = fl32(A / W),
            // then fl32(1 / m)), +- 2^-150 below normal.
            const double wf = std::max(w, static_cast<double>(d.amax_floor));
            const double up = wf / amp * (1 + u) * (1 + u) + 0x1p-149, dn = std::max(wf / amp * (1 - u) * (1 - u) - 0x1p-150, 0.0);
            if (multiplies(d.scale)) {
                s_up = up;
                s_lo = dn;
            } else {
                s_up = std::max(2 * up, 0x1p-127);
                s_lo = std::min(dn, 0x1p127);
            }
            break;
        }
        case ScaleType::kFp32EpsMul:
            // s = fl32(W / A), no floor (0 below A 2^-150).
            s_up = w / amp * (1 + u) + 0x1p-149;
            s_lo = std::max(w / amp * (1 - u) - 0x1p-150, 0.0);
            break;
        case ScaleType::kE4m3TensorAmax: {
            // NVFP4: s_b = E4M3(fl32(W t_blk)), within 2^-4 of it (relative; 2^-10 absolute below E4M3's
            // normals) and at most 448; s = fl32(fl32(s_b T) fl32(1/K)), two roundings. Outside
            // T in [2^-60, 2^60] a product can leave binary32's normal range: there the bound is only
            // |x| + |x̂| <= W + vmax S.
            const double tb = d.t_blk, tk = static_cast<double>(d.tensor_amax) * d.t_rcp_k;
            const double sbu = std::min(w * tb * (1 + u) * (1 + 0x1p-4) + 0x1p-10, 448.0);
            const double sbl = std::max(std::min(w * tb * (1 - u) * (1 - 0x1p-4) - 0x1p-10, 448.0), 0.0);
            s_up = sbu * tk * (1 + u) * (1 + u) * (1 + u) + 0x1p-149;
            s_lo = std::max(sbl * tk * (1 - u) * (1 - u) * (1 - u) - 0x1p-149, 0.0);
            if (!(d.tensor_amax >= 0x1p-60f && d.tensor_amax <= 0x1p60f))
                return (w + vabs * s_up * (1 + u) + 0x1p-149) * (1 + 0x1p-40);
            break;
        }
        case ScaleType::kNone: break;
    }
    // The scales that multiply: w m s in place of w, with m = A / a' (1 +- u) (+- 2^-150) and s as above:
    // |w m s| <= W (1 + 4u) + A 2^-149, and the term |w| |1 - m s| <= 4u W + A 2^-149 added at the end
    // with Tdec without its min (w m s need not be a binary32). fp32-eps-mul: m = A / (a + eps) (1 +- u)^2,
    // so m s = a / (a + eps) (1 +- 4u), +- m 2^-150 <= (A / eps) 2^-150 where s is subnormal: both terms
    // take W (A / eps) 2^-150 more, and |w| |1 - m s| takes W eps / (W + eps) more (increasing in W).
    // NVFP4 (T in [2^-60, 2^60], s_b > 0): m = 1 / (s_b S_dec) and s = s_b T / K, each within two
    // roundings, S_dec = 1 / S_enc and S_enc = K / T within one each, every product normal: m s is within
    // (1 +- u)^6 of 1, so 8u in place of 4u covers w m s and |1 - m s| (s_b = 0: s = 0, covered by s_lo = 0).
    const bool mul = multiplies(d.scale);
    const bool eps_mul = d.scale == ScaleType::kFp32EpsMul;
    const double mul_dev = d.scale == ScaleType::kE4m3TensorAmax ? 8 * u : 4 * u;
    const double sub_eps = eps_mul ? w * (amp / static_cast<double>(d.amax_eps)) * 0x1p-150 : 0.0;
    const double wv = mul ? w * (1 + mul_dev) + amp * 0x1p-149 + sub_eps : w;
    const double t = u * wv + s_up * 0x1p-150;
    // ceil's s_lo = W 2^-emax_elem can fall faster than W rises (vmax up to 2 2^emax_elem): the
    // excess w (1 + u) - s_lo vmax, linear in the statistic, is then largest at 0, not at W.
    const bool falls = d.scale == ScaleType::kE8m0Ceil;
    auto excess = [&](double v) { return falls ? std::max(wv * (1 + u) - s_lo * v, 0.0) : wv * (1 + u) - s_lo * v; };
    const double top = excess(vmax) + s_up * 0x1p-150;
    double bot = 0;
    if (d.offset_min) bot = s_up * std::max(vmin, 0.0) + t;
    else if (vmin < 0) bot = excess(-vmin) + s_up * 0x1p-150;
    else bot = wv * (1 + u) + s_up * (0x1p-150 + vmin);
    const double x_ex = std::max({0.0, top, bot});
    double sel = 0;
    if (d.elem == ElemType::kTable) {
        double gap = 0;
        for (int i = 0; i + 1 < d.table_size; ++i)
            gap = std::max(gap, static_cast<double>(d.table[i + 1]) - static_cast<double>(d.table[i]));
        sel = std::max(s_up * gap * 0.5, x_ex) + 2 * t;
    } else {
        const bool nearest = d.rounding != Rounding::kTowardZero && d.rounding != Rounding::kStochastic;
        const double step_s = d.elem == ElemType::kInt
                                  ? std::ldexp(s_up, -d.fraction_bits)
                                  : std::ldexp(std::max(wv * (1 + u), std::ldexp(s_up, 1 - d.bias)), -d.man_bits);
        sel = t + std::max((nearest ? 0.5 : 1.0) * step_s, x_ex);
    }
    const double y = std::min(wv + sel, s_up * vabs);
    const double eps = d.amax_eps;
    const double dev = mul ? mul_dev * w + amp * 0x1p-149 + sub_eps + (eps_mul ? w * eps / (w + eps) : 0.0) : 0.0;
    if (mul && !d.offset_min) return (dev + sel + std::max(u * y + 0x1p-150, y - kFltMax)) * (1 + 0x1p-40);
    const double tdec = mul ? std::max(u * y + 0x1p-150, y - kFltMax) : std::min(sel, std::max(u * y + 0x1p-150, y - kFltMax));
    if (!d.offset_min) return sel + tdec;
    // offset min: Tsub, the quotient's and the selection's terms, the decode's first rounding (none when
    // fused), then the last rounding of the sum with lo.
    const double ep = (u * 2 * a + 0x1p-150 + dev + sel + (d.decode_fma ? 0.0 : tdec)) * (mul ? 1 + 0x1p-40 : 1.0);
    if (a + ep >= kFltMax * (1 - 0x1p-40)) return ep + ep;
    return ep + std::min(ep, u * (a + ep) + 0x1p-150);
}

// ---- rotated formats (FORMATS.md section 9; rotated.cpp derives the bound) -----------------------
// gamma_L = L u / (1 - L u), rounded up: the relative error of L roundings.
double gamma_of(int l) { return static_cast<double>(l) * kU / (1 - static_cast<double>(l) * kU) * (1 + 0x1p-50); }

// The a-posteriori bound of one rotated block, the same for each element:
//   2^-L [ sum_j E(y_j) (1 + gamma) + gamma sum_j |y_j| ] + gamma sum_j |x_j| + 2^-150,
// with y the rotated values (recomputed here from x and the signs, as encode computed them) and
// E the element type's bound at the block's scale (decl_at). The sums of n doubles are rounded
// n times at most: the factor 1 + (n + 8) 2^-52 covers that and decl_at's own (1 - 2^-50).
double rotated_at(const Decl& d, std::span<const float> x, float s, uint64_t seed, int64_t first) {
    const int64_t n = static_cast<int64_t>(x.size());
    const int l = block_log2(n);
    const double g = gamma_of(l);
    thread_local std::vector<float> y;
    y.assign(x.begin(), x.end());
    rotate_forward(y, d.random_signs, seed, first);
    double se = 0, sy = 0, sx = 0;
    const DeclScale c = decl_scale_of(d, s);
    for (int64_t j = 0; j < n; ++j) {
        se += decl_at(d, c, y[static_cast<size_t>(j)], 0.0f);
        sy += std::fabs(static_cast<double>(y[static_cast<size_t>(j)]));
        sx += std::fabs(static_cast<double>(x[static_cast<size_t>(j)]));
    }
    const double r = std::ldexp(se * (1 + g) + g * sy, -l) + g * sx + 0x1p-150;
    return r * (1 + static_cast<double>(n + 8) * 0x1p-52);
}

// e(a) of a rotated format over blocks of at most `block` elements of absmax <= a: |y_j| <= (1 +
// gamma) sum |x| <= (1 + gamma) B a =: Ay, so E(y_j) <= decl_e(Ay), 2^-L sum_j |y_j| <= Ay and
// sum_j |x_j| <= B a; each term grows with B, so the longest block bounds the shorter ones.
double rotated_e(const Decl& d, double a, int64_t block) {
    const int l = block_log2(std::max<int64_t>(block, 1));
    const double b = std::ldexp(1.0, l), g = gamma_of(l);
    const double ay = std::min((1 + g) * b * a, static_cast<double>(kFltMax));
    return ((1 + g) * decl_e(d, ay) + g * (ay + b * a) + 0x1p-150) * (1 + 0x1p-48);
}

// The way back of an end-to-end sum (D28). The outputs are x'_i = d_i fl(2^-L w_i), w = fl(H Y), Y
// the rotated domain's sums; the target is T = sum_r x_r = 2^-L D H sum_r y*_r (y*_r = H D x_r
// exactly, y_r = fl(H D x_r) what the schedule summed). So
//   |x'_i - T_i| <= 2^-150 + 2^-L gamma sum_j |Y_j| + 2^-L sum_j |Y_j - sum_r y_rj| + gamma S1,
// the last term the inputs' forward roundings (sum_r |y_rj - y*_rj| <= gamma S1 for every j). With
// r >= 2^-L sum_j |Y_j - sum_r y_rj| (the rotated domain's ledger bounds, element by element) and
// sum_j |Y_j| <= 2^L r + (1 + gamma) 2^L S1:
//   |x'_i - T_i| <= (1 + gamma) r + gamma (2 + gamma) S1 + 2^-150,
// the same for every element; the factor covers the doubles' roundings (len + 8 of them at most).
double rotated_back(double r, double g, double s1, int64_t len) {
    return ((1 + g) * r + g * (2 + g) * s1 + 0x1p-150) * (1 + static_cast<double>(len + 8) * 0x1p-52);
}

// A config whose formats are the stage formats without their rotation: what quantized the rotated
// domain's values of an end-to-end sum.
PathConfig rotation_twins(const PathConfig& c) {
    PathConfig t = c;
    t.format = c.format.rotation_twin();
    for (auto& f : t.stage_formats) f = f.rotation_twin();
    t.rotation = Rotation::kEachHop;
    return t;
}

}  // namespace

// ---- a_posteriori: one event ------------------------------------------------------------------

using detail::EventBound;

double EventBound::at(float x, int32_t q) const {
    if (rotated) return rot;
    switch (kind) {
        case FormatKind::kDecl: return decl_at(*decl, decl_scale_of(*decl, decl_scale, decl_m), x, decl_lo);
        case FormatKind::kSym: return sym;
        case FormatKind::kAsym: {
            if (asym_const) return 0;
            const double a = asym_a;
            const double mag = std::fabs(static_cast<double>(x)) + a;
            // D9: 2A when |x| + A > FLT_MAX. Decided conservatively: the computed mag is within
            // 2^-52 of the exact one, and 2A >= A + min(A, .) always.
            if (mag >= kFltMax * (1 - 0x1p-40)) return a + a;
            return a + std::min(a, kU * mag + 0x1p-150);
        }
        case FormatKind::kDs: {
            const double ax = std::fabs(static_cast<double>(x));
            const double hx = half16(ax);
            if (ds_zero) return hx;
            if (ds_fm) {
                // formats.cpp's ds_fm_element_bound, term by term. y (11 bits) times a scale (24
                // bits) is exact in double, and the cast rounds it once. Every other term is a sum
                // of a few positive doubles; the factor 1 + 2^-48 covers their roundings.
                const float y = round_to_fp16(x);
                const double ey = std::fabs(static_cast<double>(y));
                double c = 0.5;
                if (y > 0) {
                    const double w_max = static_cast<float>(static_cast<double>(y) * static_cast<double>(fm_scale_max));
                    if (w_max >= ds_top - 0.5) c = std::max(c, w_max - (ds_top - 1));
                }
                const double e2 = fm_tau * ey + kU * (1 + fm_tau) * ey + c * fm_step_max;
                const double m = std::min(ds_top * fm_step_max, ey + e2);
                return (hx + e2 + kU * m + half16(m * (1 + kU))) * (1 + 0x1p-48);
            }
            // |y| = |fl16(x)| <= |x| + h(|x|): a bound of D10's u |y| within u h(|x|) <= 2^-35 |x|.
            const double y_up = ax + hx;
            bool clamped = false;
            if (q == ds_top - 1 && x > 0) {
                // D10's test, exactly: rne(fl32(y * scale)) >= 2^(b-1). y (11 bits) * scale
                // (24 bits) is exact in double; the cast rounds it to binary32 once, to nearest
                // even. rne(w) >= P iff w >= P - 1/2 (a tie goes to P, which is even).
                const float y = round_to_fp16(x);
                const float w = static_cast<float>(static_cast<double>(y) * static_cast<double>(ds_scale));
                clamped = y > 0 && static_cast<double>(w) >= ds_top - 0.5;
            }
            const double c = clamped ? 1.0 + 3.0 * kU * ds_top : 0.5;
            const double aq = std::fabs(static_cast<double>(q));
            const double qstep = aq * ds_step;
            return hx + kU * y_up + (1 + 2 * kU) * (c + kU * aq) * ds_step + kU * qstep +
                   half16(qstep * (1 + kU));
        }
        case FormatKind::kQr: {
            // formats.cpp's quickreduce bound, term by term: y enc (11 by 11 bits), q dec (8 by 11)
            // and w - c are exact in double; the factor 1 + 2^-48 covers the few roundings of the sum.
            const int32_t top = 1 << (bits - 1);
            const float y = round_to_fp16(x);
            const double ay = std::fabs(static_cast<double>(y)), ad = std::fabs(static_cast<double>(qr_dec));
            const double w = round_to_fp16(static_cast<float>(static_cast<double>(y) * static_cast<double>(qr_enc)));
            const double c = std::clamp(w, -static_cast<double>(top), top - 1.0);
            const double qd = std::min(std::fabs(static_cast<double>(q - top)), static_cast<double>(top)) * ad;
            const double r = w != c ? std::fabs(w - c) : 0.5;
            return (half16(std::fabs(static_cast<double>(x))) + qr_kappa * ay +
                    ad * (half16(ay * std::fabs(static_cast<double>(qr_enc))) + r) + half16(qd)) *
                   (1 + 0x1p-48);
        }
    }
    return 0;
}

namespace {

// int<b>'s E for a block of scale s (not NaN), the same for each of its elements x.
// D6: s (1/2 + 2^-22 qmax) + 2^-149, plus K = max(0, a - qmax s) when s is subnormal.
// (1/2 + 2^-22 qmax has 22 significant bits and s 24: the product is exact.)
// Its first part (all of it when s is not subnormal), inlined where it runs in the column scan's
// AVX-512 loop (EventPrep).
[[gnu::always_inline]] inline double sym_bound_normal(int32_t qmax, float s) {
    return static_cast<double>(s) * (0.5 + 0x1p-22 * qmax) + 0x1p-149;
}
inline bool subnormal_scale(float s) { return s != 0 && s < 0x1p-126f; }

inline double sym_bound(int32_t qmax, float s, std::span<const float> x) {
    const double ds = static_cast<double>(s);
    double e = sym_bound_normal(qmax, s);
    if (subnormal_scale(s)) {
        // a and qmax s are multiples of 2^-149 below 2^-118: their difference is exact.
        const double k = static_cast<double>(abs_max(x)) - qmax * ds;
        if (k > 0) e += k;
    }
    return e;
}

EventBound prepare_event(const FormatSpec& f, const QuantEvent& ev, uint64_t seed, int64_t first) {
    EventBound b;
    b.kind = f.kind;
    const float s = ev.scale;
    if (std::isnan(s) || (f.has_offset() && std::isnan(ev.offset))) {
        b.poisoned = true;
        return b;
    }
    const std::span<const float> x(ev.x);
    switch (f.kind) {
        case FormatKind::kDecl: {
            const Decl& d = *f.decl;
            b.decl = f.decl.get();
            b.decl_scale = s;
            // A scale that multiplies: the block's multiplier, from its inputs (FORMATS.md section 2).
            b.decl_lo = d.offset_min ? ev.offset : 0.0f;
            b.decl_m = multiplies(d.scale) ? detail::decl_multiplier_of(d, x) : 0.0f;
            if (d.rotated()) {
                b.rotated = true;
                b.rot = rotated_at(d, x, s, seed, first);
            }
            // Scale `none` poisons with the elements' NaN code (FORMATS.md section 3).
            if (d.elem == ElemType::kFloat) {
                const uint32_t ones = (1u << d.exp_bits) - 1u, mmask = (1u << d.man_bits) - 1u;
                for (int32_t c : ev.codes) {
                    const uint32_t field = (static_cast<uint32_t>(c) >> d.man_bits) & ones, mant = c & mmask;
                    if (field == ones && (d.special == FloatSpecial::kIeee ||
                                          (d.special == FloatSpecial::kNanOnly && mant == mmask)))
                        b.poisoned = true;
                }
            }
            break;
        }
        case FormatKind::kSym: b.sym = sym_bound(f.code_max(), s, x); break;
        case FormatKind::kAsym: {
            if (s == 0 || x.empty()) {
                b.asym_const = true;  // hi == lo: every element decodes to itself
                break;
            }
            float lo = x[0], hi = x[0];
            for (float v : x) {
                lo = std::min(lo, v);
                hi = std::max(hi, v);
            }
            // R = hi - lo exactly as r + rres (TwoSum); R_up >= R.
            const double dh = hi, dl = -static_cast<double>(lo);
            const double r = dh + dl;
            const double bp = r - dh, ap = r - bp;
            const double rres = (dh - ap) + (dl - bp);
            const double r_up = add_up(r, rres);
            const int32_t n = f.code_max();
            const double ds = static_cast<double>(s);
            const double ns = n * ds;  // exact (<= 32 bits)
            // K = max(0, R - n s) <= max(0, (r - ns) + rres), each step rounded upwards.
            const double k = std::max(0.0, add_up(add_up(r, -ns), rres));
            b.asym_a = ds * 0.5 + k + (2 * kU + kU * kU) * r_up + ds * 0x1p-150 + kU * ns + 0x1p-150;
            break;
        }
        case FormatKind::kQr: {
            b.bits = f.bits;
            b.qr_dec = s;
            b.qr_enc = quickreduce_enc(s);
            b.qr_kappa = std::fabs(1.0 - static_cast<double>(b.qr_enc) * static_cast<double>(s));  // exact: 22 bits near 1
            break;
        }
        case FormatKind::kDs: {
            const float a16 = round_to_fp16(abs_max(x));  // fl16 is monotone: max |fl16(x)| = fl16(max |x|)
            b.ds_top = 1 << (f.bits - 1);
            b.ds_zero = a16 == 0;
            if (!b.ds_zero) b.ds_scale = static_cast<float>(1 << f.bits) / (2.0f * a16);  // fl32(2^b / fl32(2a))
            b.ds_step = static_cast<double>(s);
            if (f.fast_math && !b.ds_zero && a16 <= 65504.0f) {
                // From the block's absmax, not the event's step (a kernel's step cannot widen it).
                const DsAdmissible adm = ds_admissible(f.bits, a16);
                b.ds_fm = true;
                b.fm_scale_max = adm.scale_max;
                b.fm_step_max = adm.step_max;
                b.fm_tau = adm.tau;
            }
            break;
        }
    }
    return b;
}

// ---- --divide (D27) -----------------------------------------------------------------------------------
// The rounding of a division by N for a mean, y = fl_t(w), w = fl32(z), z = x / N exactly:
//   |y - w| <= u_t |y| + h_t (relative to the result in the normal range; at most half the type's
//   subnormal spacing h_t below it), |w - z| <= u |w| + 2^-150, |w| <= (1 + u_t)|y| + h_t, so
//   |y - z| <= (u_t + u (1 + u_t)) |y| + h_t (1 + u) + 2^-150;
// binary32 (t = fp32, y = w): |y - z| <= u |y| + 2^-150. at(|y|) is that bound, monotone in |y|.
// Under pre the path reduces the y_j, so the error against the mean adds sum_j at(|y_j|) to the
// ledger's bound of |out - sum y_j|; under post it is the ledger's bound of |out - T| divided by
// N plus at(|out'|). The a-priori bounds take the same terms at the extremes: |y_j| <= div(A_j),
// and |out'| <= ((sum A_j + prior)/N (1 + u) + 2^-150)(1 + u_t) + h_t.
// NCCL's FP8 ncclAvg (D41) is y = fl8(h), h = fl16(p), p = x f exactly, f = avg_factor(N): with
// |h - p| <= u16 |h| + 2^-25, |y - h| <= u8 |y| + h8 and so |h| <= (1 + u8)|y| + h8,
//   |y - p| <= (u8 + u16 (1 + u8)) |y| + h8 (1 + u16) + 2^-25,
// and |p - x/N| = |x| |f - 1/N| (the factor's own error, 3.1% for e4m3 at N = 3), which x_term adds
// from |x| (the contribution, or its absmax for the a-priori bound); 0 for every other type.
struct DivBound {
    double a = 0, b = 0, bias = 0;
    explicit DivBound(Accum t, int64_t n) {
        const AccumType at = accum_type(t);
        if (saturating(t)) {
            const AccumType h = accum_type(Accum::kFp16);  // the product's binary16 rounding: u16, 2^-25
            a = at.u + h.u * (1 + at.u);
            b = at.half_subnormal * (1 + h.u) + h.half_subnormal;
            const double f = static_cast<double>(avg_factor(n, t)), nn = static_cast<double>(n);
            bias = std::fabs(f * nn - 1) / nn * (1 + 0x1p-50);  // f N - 1 exact; one rounding in the quotient
        } else if (t == Accum::kFp32) {
            a = kU;
            b = 0x1p-150;
        } else {
            a = at.u + kU * (1 + at.u);
            b = at.half_subnormal * (1 + kU) + 0x1p-150;
        }
    }
    double at(double y) const { return a * y + b; }
    double x_term(double x) const { return bias * x; }
};

// ---- a_priori --------------------------------------------------------------------------------------
struct Bnd {
    double mag = 0, err = 0;
};

class Prior {
public:
    explicit Prior(const PathConfig& c) : low_(low_precision(c.accum)), at_(accum_type(c.accum)), kind_(c.format.kind) {
        const double u = kU;
        switch (kind_) {
            case FormatKind::kDecl:  // e(a) = decl_e (not linear in a); rotated: rotated_e
                decl_ = c.format.decl.get();
                block_ = c.block;
                cap_ = kFltMax;
                break;
            case FormatKind::kSym: {
                const double qmax = c.format.code_max();
                const double cp = 0.5 + 0x1p-22 * qmax;
                c1_ = (1 + u) * cp / qmax;
                d1_ = 0x1p-149 * (cp + 1 + qmax / 2);
                cap_ = kFltMax;
                break;
            }
            case FormatKind::kAsym: {
                const double n = c.format.code_max();
                const double k = 0.5 + 0x1p-150 + u * n;
                const double alpha = 2 * ((1 + u) * (1 + u) * k / n + 4 * u + u * u);
                const double beta = 0x1p-149 * k + (n + 1) * 0x1p-150;
                c1_ = (1 + u) * alpha + u;
                d1_ = (1 + u) * beta + 0x1p-150;
                c2_ = 2 * alpha;
                d2_ = 2 * beta;
                cap_ = kFltMax;
                break;
            }
            case FormatKind::kDs: {
                const double p = static_cast<double>(1 << (c.format.bits - 1));
                double k1 = u + (1 + 2 * u) * (1 + 4 * u * p) * (1 + u) / ((1 - u) * p) +
                            u * (1 + u) / (1 - u) + kU16 * (1 + u) * (1 + u) / (1 - u);
                if (c.format.fast_math) {
                    // ds_fm_element_bound (formats.cpp) over a block of binary16 absmax a16:
                    // tau <= 3u + 3u^2 (a step within 1.5 ulp(fl32(1/sigma)) of 1/sigma); every
                    // admissible scale is >= rho (1 - u)(1 - 4u) and <= rho (1 + u)(1 + 4u), rho =
                    // p / a16, so Δmax <= D a16 / p with D = (1 + tau) / ((1 - u)(1 - 4u)), and
                    // c <= 1 + p ((1 + u)^2 (1 + 4u) - 1) <= 1 + 7up; M <= p Δmax <= D a16. So
                    // E - h(|x|) <= [(4u + 7u^2) + (1 + 7up) D / p + u D + u16 (1 + u) D] a16.
                    const double d = (1 + 3 * u + 3 * u * u) / ((1 - u) * (1 - 4 * u));
                    k1 = (4 * u + 7 * u * u) + (1 + 7 * u * p) * d / p + u * d + kU16 * (1 + u) * d;
                }
                c1_ = kU16 + k1 * (1 + kU16);
                d1_ = 0x1p-24 + k1 * 0x1p-25;
                cap_ = kFp16Overflow;
                break;
            }
            case FormatKind::kQr: {
                // formats.cpp's quickreduce bound over a block of absmax A (binary32) and binary16
                // absmax A16 = |m| <= a (1 + v) (v = 2^-11 = kU16, a >= 2^-14), P = 2^(b-1), and
                // h(t) <= v t + 2^-25 for every t >= 0.
                // Large blocks, A >= T = P 2^-13: |dec| >= 2^-13 (normal), so |t| >= 2^-13 (1 - v), the
                // reciprocal does not saturate, and with eta = 2^-24 / |dec| <= 2^-11,
                //   kappa <= (2v + eta) / ((1 - v)(1 - eta)) <= (1 + 2^-9)(2v + eta) <= 3.01 v,
                //   kappa A16 <= (1 + 2^-9) 2v A16 + 2^-24 P (1 + 2^-8)   (eta A16 <= 2^-24 P / (1 - v)),
                //   |dec| <= A16 (1 + v) / P, |y enc| <= P (1 + kappa) / (1 - v) <= P (1 + 4.1 v), so
                //   |w| <= P (1 + 5.1 v) and |w - q| <= 1 + 5.1 v P = cw (a full step at the clamp);
                //   |dec| h(|y enc|) <= v A16 (1 + 3.1 v) + |dec| 2^-25; h(|q dec|) <= v A16 (1 + v) + 2^-25.
                //   E <= v a + 2^-25 + (1 + 2^-9) 2v A16 + 2^-24 P (1 + 2^-8) + v A16 (1 + 3.1 v)
                //        + A16 (1 + v)(cw + 2^-25) / P + v A16 (1 + v) + 2^-25.
                // Small blocks, A < T, term by term with generous factors: kappa <= 1 + 2^-8 (enc dec is in
                // [0, 1] when the reciprocal saturates, 1 + 2^-8 at most otherwise, and -65504 2^-24 when
                // t = +0), |enc| <= 65504 so |y enc| <= 2P and r <= 1 + P, |dec| <= A16 (1 + v) / P + 2^-25,
                // A16 <= A (1 + v) + 2^-25:
                //   E <= v a + 2^-25 + (1 + 2^-8) A16 + A16 (1 + v)(1/P + 1 + 3v) + 2^-25 (2 + P (1 + 3v))
                //        + v A16 (1 + v) + 2^-25,
                // about (2 + 1/P) a (the saturation can shrink a group to nothing: the bound says so).
                // e(a) = the small blocks' bound below T, and above it the larger of the two (a block
                // of absmax under a may be a small one): monotone, as Prior::q needs.
                const double v = kU16, p = static_cast<double>(1 << (c.format.bits - 1));
                const double cw = 1 + 5.1 * v * p;
                const double k16 = (1 + 0x1p-9) * 2 * v + v * (1 + 3.1 * v) + (1 + v) * (cw + 0x1p-25) / p + v * (1 + v);
                c1_ = (v + (1 + v) * k16) * (1 + 0x1p-40);
                d1_ = (2 * 0x1p-25 + 0x1p-24 * p * (1 + 0x1p-8)) * (1 + 0x1p-40);
                c2_ = (v + (1 + v) * ((1 + 0x1p-8) + (1 + v) * (1 / p + 1 + 3 * v) + v * (1 + v))) * (1 + 0x1p-40);
                d2_ = 0x1p-25 * (p + 12) * (1 + 0x1p-40);
                qr_t_ = p * 0x1p-13;
                qr_floor_ = c2_ * qr_t_ + d2_;
                cap_ = kFp16Overflow;
                break;
            }
        }
        g32_ = u * (1 + u) / (1 - u);
        glow_ = at_.u * (1 + at_.u) / (1 - at_.u);
    }

    // Whether e() needs no call (PriorFold in the column scan's loop: see EventPrep).
    bool inlines() const { return kind_ != FormatKind::kDecl; }
    [[gnu::always_inline]] double e(double a) const {
        a = std::min(a, cap_);
        if (kind_ == FormatKind::kDecl) return decl_->rotated() ? rotated_e(*decl_, a, block_) : decl_e(*decl_, a);
        if (kind_ == FormatKind::kAsym && a > kFltMax * 0.5 * (1 - 0x1p-30)) return c2_ * a + d2_;
        if (kind_ == FormatKind::kQr) return a < qr_t_ ? c2_ * a + d2_ : std::max(c1_ * a + d1_, qr_floor_);
        return c1_ * a + d1_;
    }
    [[gnu::always_inline]] Bnd q(Bnd b) const { return {b.mag, b.err + e(b.mag + b.err)}; }
    // A term rounded to the accumulation type (fp16 or bf16; D11, D24): |fl(v) - v| <= u |v| +
    // half its subnormal spacing, and an overflow is unbounded.
    [[gnu::always_inline]] Bnd t(Bnd b) const {
        if (!low_) return b;
        const double me = b.mag + b.err;
        if (!(me < at_.overflow)) return {b.mag, kInf};
        return {b.mag, b.err + at_.u * (me * (1 + at_.u) + at_.half_subnormal) + at_.half_subnormal};
    }
    // An add in the type (a sum of two values of the type that lands in the subnormal range is exact).
    [[gnu::always_inline]] Bnd add(Bnd x, Bnd y) const {
        const double m = x.mag + y.mag, e = x.err + y.err;
        if (!low_) return {m, e + g32_ * (m + e)};
        if (!(m + e < at_.overflow)) return {m, kInf};
        return {m, e + glow_ * (m + e)};
    }

private:
    bool low_;
    AccumType at_;
    FormatKind kind_;
    const Decl* decl_ = nullptr;
    int64_t block_ = kDefaultBlock;
    double c1_ = 0, d1_ = 0, c2_ = 0, d2_ = 0, cap_ = kFltMax, g32_ = 0, glow_ = 0;
    double qr_t_ = 0, qr_floor_ = 0;  // quickreduce-q<b>: where the large blocks' bound starts, and e(T)
};

int64_t chunk_of(const PathConfig& c, int64_t first) {
    const int64_t s = c.shard();
    if (s <= 0 || c.ranks <= 0) return 0;
    return std::clamp<int64_t>(first / s, 0, c.ranks - 1);
}

Bnd a2a_bound(const Prior& p, std::span<const double> a, int64_t from, int64_t count) {
    Bnd b = p.t(p.q({a[from], 0}));
    for (int64_t j = 1; j < count; ++j) b = p.add(b, p.t(p.q({a[from + j], 0})));
    return b;
}

Bnd tree_bound(const Prior& p, std::span<const double> a, int64_t n, int64_t r, int t) {
    if (t < 0) return {a[r], 0};
    const int64_t d = n >> (t + 1);
    const Bnd own = tree_bound(p, a, n, r, t - 1);
    const Bnd other = tree_bound(p, a, n, r ^ d, t - 1);
    return p.add(p.t(own), p.t(p.q(other)));
}

// The 16-bit paths (D26), as a function of k: with u the type's unit roundoff, A_j the absmax of
// contributor j's (already cast) inputs and k_j the number of rounded adds its value goes through
// (expected_ks, the schedule's table),
//   a_priori = (1 + u)/(1 - u) * sum_j ((1 + u)^k_j - 1) A_j,
// and +inf when the sums can overflow: when (1 + u)^kmax sum_j A_j reaches the type's overflow
// midpoint.
// Derivation. The a-posteriori bound is u/(1 - u) sum over the adds of |r|, r the rounded result
// (no term is rounded: the inputs are of the type; an add of two values of the type that lands in
// the subnormal range is exact, so no subnormal term either). By induction over the schedule, a
// partial r holding the contributors J(r) has |r| <= sum_{j in J(r)} A_j (1 + u)^m_j(r), where
// m_j(r) counts the adds on j's way up to r, r's own included: an input has |x_j| <= A_j and m =
// 0, an add's exact sum v of two partials is bounded by the sum of theirs, and |fl(v)| <= (1 + u)|v|.
// Along j's way the adds it takes part in have m_j = 1, 2, ..., k_j, so
//   sum over adds of |r| <= sum_j A_j sum_{m=1..k_j} (1 + u)^m = sum_j A_j (1 + u)((1 + u)^k_j - 1)/u,
// and u/(1 - u) times that is the bound above: a_post <= a_priori, term by term. No partial can
// overflow when every |v| <= (1 + u)^(m - 1) sum A_j stays below the overflow midpoint, which
// the +inf test ensures. To first order the bound is u sum_j k_j A_j: a ring's compounds with N.
double typed_prior(const PathConfig& c, int64_t first, std::span<const double> a) {
    const AccumType at = accum_type(c.accum);
    const std::vector<int32_t> k = expected_ks(c, first);
    int32_t kmax = 0;
    for (int32_t v : k) kmax = std::max(kmax, v);
    std::vector<double> pw(static_cast<size_t>(kmax) + 1, 1.0);
    for (size_t m = 1; m < pw.size(); ++m) pw[m] = pw[m - 1] * (1 + at.u);  // (1 + u)^m, rel. error m 2^-53
    double sum = 0, mag = 0;
    for (size_t j = 0; j < k.size() && j < a.size(); ++j) {
        sum += (pw[static_cast<size_t>(std::max(k[j], 0))] - 1) * a[j];  // relative error below 2^-40
        mag += a[j];
    }
    if (!(mag * pw.back() * (1 + 0x1p-40) < at.overflow)) return kInf;
    return (1 + at.u) / (1 - at.u) * sum;
}

// The a-priori bound of the paths where it is one fold over the ranks' absmax, a step at a time:
// a2a-rs and two-shot-ar (a2a_bound over every rank, then two-shot-ar's second stage) and ring-rs and
// fp32-ring-rs (the ring's hops from the owner's successor on). reduce_prior runs it to the end;
// PathChecker::add steps it beside its events' preparation (EventPrep: in the column scan's loop,
// then in prepare_events'), so that the fold's latency (each step is several dependent roundings,
// about ten cycles) runs under that work instead of after it. The same steps in the same order
// either way: the same bits.
class PriorFold {
public:
    // Whether this path's bound is such a fold (ranks >= 1).
    static bool applies(const PathConfig& c) {
        if (c.ranks < 1) return false;
        switch (c.path) {
            case PathKind::kA2aRs:
            case PathKind::kTwoShotAr:
            case PathKind::kTwoShotArKeep:
            case PathKind::kRingRs:
            case PathKind::kFp32RingRs: return true;
            default: return false;
        }
    }
    PriorFold() = default;  // no steps
    // a: the N ranks' absmax, read as the steps go (step_if says which are ready).
    PriorFold(const PathConfig& c, const Prior& p, const Prior& p1, int64_t first, const double* a)
        : p_(&p), p1_(&p1), a_(a), n_(c.ranks) {
        // (two-shot-ar-keep's owner holds the first stage's sum, whose error the second stage's bound
        // bounds too: one bound for every row, loose for the owner's by that stage, D46)
        two_shot_ = c.path == PathKind::kTwoShotAr || c.path == PathKind::kTwoShotArKeep;
        ring_ = c.path == PathKind::kRingRs || c.path == PathKind::kFp32RingRs;
        quant_ = c.path == PathKind::kRingRs;
        if (ring_) {
            const int64_t ch = chunk_of(c, first);  // (ch + 1 + h) mod n without a division per hop: ch < n
            at_ = ch + 1 < n_ ? ch + 1 : ch + 1 - n_;
        }
    }
    // Step h reads a[at_]: a2a's rank h, the ring's (ch + 1 + h) mod N.
    [[gnu::always_inline]] void step() {
        if (h_ >= n_) return;
        const Bnd own = {a_[at_], 0};
        if (!ring_) {
            b_ = h_ == 0 ? p_->t(p_->q(own)) : p_->add(b_, p_->t(p_->q(own)));
        } else {
            b_ = h_ == 0 ? p_->t(own) : p_->add(quant_ ? p_->t(p_->q(b_)) : b_, p_->t(own));
        }
        if (++at_ == n_) at_ = 0;
        ++h_;
    }
    // A step when the absmax it reads is one of the first `ready`.
    [[gnu::always_inline]] void step_if(size_t ready) {
        if (h_ < n_ && static_cast<size_t>(at_) < ready) step();
    }
    // The bound: the steps left, then two-shot-ar's second stage.
    double finish() {
        while (h_ < n_) step();
        return two_shot_ ? p1_->q(b_).err : b_.err;
    }

private:
    const Prior* p_ = nullptr;
    const Prior* p1_ = nullptr;
    const double* a_ = nullptr;
    int64_t n_ = 0, h_ = 0, at_ = 0;
    bool ring_ = false, quant_ = false, two_shot_ = false;
    Bnd b_;
};

// Reduce paths: the same bound for every element and every row of the column.
// p: the first stage's format (every stage's, but for per-stage formats); p1: the second stage's.
double reduce_prior(const PathConfig& c, const Prior& p, const Prior& p1, int64_t first, std::span<const double> a) {
    const int64_t n = c.ranks;
    const int64_t ch = chunk_of(c, first);
    switch (c.path) {
        case PathKind::kRingRs:
        case PathKind::kFp32RingRs:
        case PathKind::kA2aRs:
        case PathKind::kTwoShotAr:
        case PathKind::kTwoShotArKeep: return PriorFold(c, p, p1, first, a.data()).finish();
        case PathKind::kA2aHierRs: {
            const int64_t g = std::max<int64_t>(c.ranks_per_node, 1), nodes = n / g;
            Bnd total;
            for (int64_t nd = 0; nd < nodes; ++nd) {
                const Bnd v = p.t(p1.q(a2a_bound(p, a, nd * g, g)));
                total = nd == 0 ? v : p.add(total, v);
            }
            return total.err;
        }
        case PathKind::kTreeRs: {
            const int levels = std::bit_width(static_cast<uint64_t>(n)) - 1;  // n is a power of two
            return tree_bound(p, a, n, ch, levels - 1).err;
        }
        default: break;
    }
    if (typed_schedule(c.path) != TypedSchedule::kNone) return typed_prior(c, first, a);
    return kInf;
}

// Gather paths: per element, from the absmax ai of the element's first block (and amax, the largest
// over the column, for hpz-ag-requant's secondary block).
double gather_prior(const PathConfig& c, const Prior& p, const Prior& p1, int64_t first, int64_t row_rank, double ai,
                    double amax) {
    switch (c.path) {
        case PathKind::kRingAg:
        case PathKind::kHpzAgFp: return p.q({ai, 0}).err;
        case PathKind::kRingAgRequant: {
            const int64_t n = std::max<int64_t>(c.ranks, 1);
            const int64_t h = ((row_rank - chunk_of(c, first)) % n + n) % n;
            Bnd b{ai, 0};
            for (int64_t k = 0; k < std::max<int64_t>(h, 1); ++k) b = p.q(b);
            return b.err;
        }
        case PathKind::kHpzAgRequant: {
            const Bnd f = p.q({std::max(ai, amax), 0});
            return p.e(ai) + p1.e(f.mag + f.err);
        }
        default: break;
    }
    return kInf;
}

bool is_gather(PathKind k) { return path_info(k).shape == PathShape::kAllGather; }

constexpr int kLsbExp32 = -149;  // the smallest binary32 ulp


std::string fmt_double(double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.9g", v);
    return buf;
}

}  // namespace

// ---- exposed pieces ----------------------------------------------------------------------------------

double event_element_bound(const FormatSpec& format, const QuantEvent& ev, int64_t i, uint64_t seed, int64_t first) {
    const EventBound b = prepare_event(format, ev, seed, first);
    if (b.poisoned) return kInf;
    return b.at(ev.x[static_cast<size_t>(i)], ev.codes[static_cast<size_t>(i)]);
}

double event_bound_of_absmax(const FormatSpec& format, double a, int64_t block) {
    PathConfig c;
    c.format = format;
    c.block = block;
    return Prior(c).e(a);
}

namespace {
// The config of a path's second stage, for its Prior (per-stage formats; else the same as its first).
PathConfig second_stage(const PathConfig& c) {
    PathConfig s = c;
    s.format = c.format_of_stage(1);
    s.stage_formats.clear();
    return s;
}
}  // namespace

double a_priori_bound(const PathConfig& config, int64_t first, int64_t row_rank, std::span<const double> absmax) {
    const Prior p(config), p1(second_stage(config));
    double r = kInf;
    if (!is_gather(config.path)) {
        if (static_cast<int64_t>(absmax.size()) < config.ranks || config.ranks < 1) return kInf;
        r = reduce_prior(config, p, p1, first, absmax);
    } else {
        if (absmax.empty()) return kInf;
        const double amax = absmax.size() > 1 ? absmax[1] : absmax[0];
        r = gather_prior(config, p, p1, first, row_rank, absmax[0], amax);
    }
    return r * kPrioInflation;
}

// ---- PathStats ----------------------------------------------------------------------------------------

double PathStats::rel_rms_error() const {
    if (!(sum_sq_target > 0)) return 0;
    return std::sqrt(sum_sq_error / sum_sq_target);
}

// ---- PathChecker --------------------------------------------------------------------------------------

PathChecker::PathChecker(const PathConfig& config) : cfg_(config) {}

void PathChecker::record_violation(int64_t first, int64_t rank, int64_t element, const std::string& what) {
    ++st_.violations;
    st_.bound_holds = false;
    const int64_t pos = first + std::max<int64_t>(element, 0);
    if (first_pos_ < 0 || pos < first_pos_ || (pos == first_pos_ && rank < first_rank_)) {
        first_pos_ = pos;
        first_rank_ = rank;
        st_.first_violation = path_info(cfg_.path).name + std::string(" ") + cfg_.format_name() + ", column at " +
                              std::to_string(first) + " (chunk " + std::to_string(chunk_of(cfg_, first)) +
                              "), row rank " + std::to_string(rank) + ", element " + std::to_string(element) +
                              " (tensor index " + std::to_string(pos) + "): " + what;
    }
}

namespace {

// add()'s first pass over a column's events: per event, flags (kEvOk: its codes and x have one
// length, and its contributors are ranks of the path (listed_in_range); kEvCompact: an int<b> block, not poisoned, whose bound is sym[e] for every element, and
// whose EventBound is not written; kEvWhole: such a block over every element of the column) and
// sym[e], or, for every other well-formed event, evb[e]. An int<b> event so takes 9 bytes, not a
// 104-byte EventBound's cache line.
// Two more flags, set whether kEvOk is or not: kEvRange, its contributors are a ring range (no
// list), and kEvCovers, its block is the column's (column_offset 0, x of len values); range[e] =
// {first, count}: what contribution_k reads of an event, so that add() counts k from these without
// reading the events again (count_k).
// EventPrep below does it, in the column scan's loop (the events it can take there) and then in
// prepare_events, a function of its own (not inlined into add()): its loop's state stays in registers.
constexpr uint8_t kEvOk = 1, kEvWhole = 2, kEvCompact = 4, kEvRange = 8, kEvCovers = 16;

using detail::EvRange;

inline uint8_t ledger_flags(const QuantEvent& ev, int64_t len, EvRange& range) {
    range = {ev.contributors.first, ev.contributors.count};
    return static_cast<uint8_t>((ev.contributors.list.empty() ? kEvRange : 0) |
                                (ev.column_offset == 0 && static_cast<int64_t>(ev.x.size()) == len ? kEvCovers : 0));
}

// Whether the contributors are ranks of the path: every listed one, or a ring range of a count of
// zero or more (its ranks are taken mod N; a negative count names none).
inline bool listed_in_range(const Contributors& c, int64_t ranks) {
    if (c.list.empty()) return c.count >= 0;
    for (int32_t r : c.list)
        if (r < 0 || r >= ranks) return false;
    return true;
}

// The fewest contribution rows for which PathChecker::add prepares events in the scan's loop (measured
// with check_bench: 6-8% slower at 8 and 64 rows, 8-13% faster at 384).
constexpr int64_t kEventsInScanRows = 128;

// prepare_events' state: the event to prepare next, and the PriorFold stepped beside it (a default
// one, which takes no step, when the bound is not a fold). Held by value in the loop that runs it,
// so that its state stays in registers: through a pointer, every store to flags or sym could alias
// it and each step would reload it.
// In the column scan's AVX-512 loop (operator(), one event per contribution row; ready: how many
// rows' absmax are written) it takes only what it can without a call: a function not inlined there
// is legacy-SSE code run with the scan's 512-bit registers live, and each such call cost more than
// the whole event (measured: the check 10x slower). So there it prepares int<b> events of a normal
// scale and ring-range contributors, of the format it was given (qmax), while they last, and steps
// the fold when its Prior needs no call (not a declared format); prepare_events takes the rest.
struct EventPrep {
    const ColumnRecord* col = nullptr;
    const PathConfig* cfg = nullptr;
    EventBound* evb = nullptr;
    uint8_t* flags = nullptr;
    double* sym = nullptr;
    EvRange* range = nullptr;
    size_t e = 0, nev = 0;
    const FormatSpec* qmax_of = nullptr;  // the format qmax is the code_max of
    int32_t qmax = 0;
    bool in_scan = true;  // operator() still prepares events (until one needs the general path)
    bool fold_in_scan = false;
    PriorFold fold;

    // In the scan's loop.
    [[gnu::always_inline]] inline void operator()(size_t /*row*/, size_t ready) {
        if (in_scan && e < nev) {
            if (simple(e)) ++e;
            else in_scan = false;
        }
        if (fold_in_scan) fold.step_if(ready);
    }
    // What simple() reads of col and cfg for every event, read once (in_scan_setup): its stores to
    // flags, as uint8_t, may alias anything, and every read through col or cfg would be done again
    // after each.
    const QuantEvent* events = nullptr;
    int64_t len = 0;
    bool one_format = true;               // cfg->stage_formats is empty: every stage's is cfg->format
    const FormatSpec* sym_fs = nullptr;  // qmax_of, when it is int<b>
    void in_scan_setup() {
        events = col->events.data();
        len = col->len;
        one_format = cfg->stage_formats.empty();
        sym_fs = qmax_of != nullptr && qmax_of->kind == FormatKind::kSym ? qmax_of : nullptr;
    }
    // An int<b> event of format qmax_of with a normal (or zero) scale, codes and x of one length
    // and a ring range of contributors: one()'s result without a call. False, and nothing written,
    // for any other event.
    [[gnu::always_inline]] inline bool simple(size_t e) {
        const QuantEvent& ev = events[e];
        if (ev.codes.size() != ev.x.size() || !ev.contributors.list.empty() || ev.contributors.count < 0 ||
            sym_fs == nullptr)
            return false;
        if (!one_format && &cfg->format_of_stage(ev.stage) != sym_fs) return false;
        if (std::isnan(ev.scale) || subnormal_scale(ev.scale)) return false;
        const uint8_t lf = ledger_flags(ev, len, range[e]);
        const bool whole = ev.column_offset == 0 && static_cast<int64_t>(ev.x.size()) >= len;
        flags[e] = static_cast<uint8_t>(kEvOk | kEvCompact | (whole ? kEvWhole : 0) | lf);
        sym[e] = sym_bound_normal(qmax, ev.scale);
        return true;
    }
    void one(size_t e) {
        const QuantEvent& ev = col->events[e];
        const uint8_t lf = ledger_flags(ev, col->len, range[e]);
        if (ev.codes.size() != ev.x.size() || !listed_in_range(ev.contributors, cfg->ranks)) {
            flags[e] = lf;  // not kEvOk
            sym[e] = 0;
            return;
        }
        const FormatSpec& fs = cfg->format_of_stage(ev.stage);
        if (fs.kind == FormatKind::kSym && !std::isnan(ev.scale)) {
            // prepare_event's int<b> case without building an EventBound (a rep stos and a copy of
            // 120 bytes per event were most of a column's cost): its bound, the same for every element.
            if (qmax_of != &fs) {
                qmax_of = &fs;
                qmax = fs.code_max();
            }
            const bool whole = ev.column_offset == 0 && static_cast<int64_t>(ev.x.size()) >= col->len;
            flags[e] = static_cast<uint8_t>(kEvOk | kEvCompact | (whole ? kEvWhole : 0) | lf);
            sym[e] = sym_bound(qmax, ev.scale, ev.x);
        } else {
            evb[e] = prepare_event(col->rotated_sum ? fs.rotation_twin() : fs, ev, cfg->seed, col->first - ev.column_offset);
            flags[e] = static_cast<uint8_t>(kEvOk | lf);
            sym[e] = 0;
        }
    }
};

// The events left (all of them, when the scan did not take them), with the fold's steps beside them.
[[gnu::noinline]] void prepare_events(EventPrep& state) {
    EventPrep p = state;
    for (; p.e < p.nev; ++p.e) {
        p.fold.step();
        p.one(p.e);
    }
    state = p;
}

// u += the bound of each event ids[pos], ids[pos + 1], ... before `stop`, in that order, while they
// are int<b> blocks over the whole column (kEvWhole); returns the position of the first that is not
// (or stop). The ids are checked already. Not inlined into add(), for the same reason.
[[gnu::noinline]] size_t add_whole_sym(const int32_t* ids, size_t pos, size_t stop, const uint8_t* flags,
                                       const double* sym, double& u) {
    double s = u;
    for (; pos < stop; ++pos) {
        const size_t id = static_cast<size_t>(ids[pos]);
        if (!(flags[id] & kEvWhole)) break;
        s += sym[id];
    }
    u = s;
    return pos;
}

// What add() asks of a row's event ids, in one pass over them (it was three): whether every id
// names an event (in_range: what event_ids_in_range says), every one's event is well-formed (ok:
// kEvOk, and in range), and every one's has kEvRange and kEvCovers (ranges, count_k's condition;
// meaningful when in_range).
struct IdsSummary {
    bool in_range = true, ok = true, ranges = true;
};
// Whether ids are 0, 1, ..., nev - 1: every event of the column, in order (the output rows of
// a2a-rs, ring-rs and two-shot-ar). Branch-free: it vectorizes, where a walk through flags[id] does not.
inline bool ids_are_every_event(const std::vector<int32_t>& ids, size_t nev) {
    if (ids.size() != nev || nev > static_cast<size_t>(std::numeric_limits<int32_t>::max())) return false;
    const int32_t* p = ids.data();
    int32_t bad = 0;
    for (size_t i = 0; i < nev; ++i) bad |= p[i] ^ static_cast<int32_t>(i);
    return bad == 0;
}
[[gnu::noinline]] IdsSummary summarize_ids(const std::vector<int32_t>& ids, const uint8_t* flags, size_t nev) {
    if (nev == 0) return {ids.empty(), ids.empty(), true};
    constexpr uint8_t kRangeCovers = kEvRange | kEvCovers;
    if (ids_are_every_event(ids, nev)) {  // in range; the flags every event has, without the ids
        uint8_t every = 0xFF;
        for (size_t e = 0; e < nev; ++e) every &= flags[e];
        return {true, (every & kEvOk) != 0, (every & kRangeCovers) == kRangeCovers};
    }
    bool in = true;
    uint8_t all = 0xFF;  // the flags every event has (an id out of range reads event 0's: in is false then)
    for (int32_t id : ids) {
        const bool i = static_cast<uint64_t>(static_cast<int64_t>(id)) < nev;
        in &= i;
        all &= flags[i ? static_cast<size_t>(id) : 0];
    }
    return {in, in && (all & kEvOk) != 0, (all & kRangeCovers) == kRangeCovers};
}

// contribution_k of a row from prepare_events' copy of its events' ranges, when every event of the
// row has kEvRange and kEvCovers (`ranges`, from summarize_ids) and the row has no roundings: then
// contribution_k would count exactly these ranges, in this order. Returns false otherwise (the
// caller calls contribution_k). The row's ids are in range.
[[gnu::noinline]] bool count_k(const OutputRow& row, bool ranges, const EvRange* range, int64_t ranks,
                               std::vector<int32_t>& k, std::vector<int32_t>& diff) {
    if (!row.rounding_ids.empty() || ranks < 1 || !ranges) return false;
    k.assign(static_cast<size_t>(ranks), 0);
    diff.assign(static_cast<size_t>(ranks) + 1, 0);
    RingRangeCounter ring(ranks, k.data(), diff.data());
    for (int32_t id : row.event_ids) ring.add(range[id].first, range[id].count);
    ring.finish();
    return true;
}

}  // namespace

// What add()'s phases share for one column: its shape, the a-priori machinery, the events'
// statistics, and the state carried from one output row to the next.
struct PathChecker::ColumnState {
    explicit ColumnState(const PathConfig& cfg)
        : prior(cfg), prior1(second_stage(cfg)), db(division_type(cfg), cfg.ranks), at(accum_type(cfg.accum)) {}
    int64_t len = 0, n = 0;
    size_t ulen = 0;
    bool gather = false;
    // End to end (D28): gamma_L of the column's length, and S1 = the sum of |x| over every contribution.
    double rot_gamma = 0, rot_s1 = 0;
    const Prior prior, prior1;
    Divide dv = Divide::kNone;
    bool fold_prior = false;
    size_t nev = 0;
    EventPrep prep;
    bool finite_inputs = true;
    // A priori: the scale of the comparison (N under --divide), the division's bound, the column's
    // bound (reduce paths), the column's largest first-block absmax (gathers), and the caches of
    // ring-ag-requant's table and of the other gathers' last bound.
    double sc = 1;
    const DivBound db;
    double col_prior = kInf, gather_amax = 0;
    double table_a = -1;
    std::vector<double> table;
    double prio_ai = -1, prio_cached = 0;
    // Rows: the previous row's event ids (and the snapshot of its prefix), the k bookkeeping, and
    // whether the previous row was clean (its values, bounds and sums then stand for equal rows).
    const std::vector<int32_t>* prev_ids = nullptr;
    size_t snap_len = 0;
    const AccumType at;
    double gamma = 0;
    const OutputRow* prev_row = nullptr;  // the row ks was computed for (or one of the same shape)
    const OutputRow* kof_row = nullptr;   // the row ks holds contribution_k_of's answer for, and its others
    bool kof_others = false;
    bool clean_prev = false;
    double prev_sse = 0, prev_sst = 0;  // that row's sums of squared errors and targets
    int64_t repeats = 0;                 // rows since, equal to it, whose sums are not added yet
    int64_t owners_lo = 0, owners_hi = 0;
    // The current row's ids summarized once, when first asked.
    IdsSummary ids_sum;
    bool have_ids_sum = false;
    const IdsSummary& ids_summary(const OutputRow& row, const uint8_t* ev_ok) {
        if (!have_ids_sum) {
            ids_sum = summarize_ids(row.event_ids, ev_ok, nev);
            have_ids_sum = true;
        }
        return ids_sum;
    }
};

bool PathChecker::well_formed(const ColumnRecord& col) {
    const bool gather = is_gather(cfg_.path);
    const int64_t want_rows = gather ? 1 : cfg_.ranks;
    if (col.len < 0 || col.contribution_rows != want_rows ||
        static_cast<int64_t>(col.contributions.size()) != col.contribution_rows * col.len ||
        (gather && !col.first_block_absmax.empty() && static_cast<int64_t>(col.first_block_absmax.size()) != col.len)) {
        record_violation(col.first, -1, 0,
                         "malformed column: " + std::to_string(col.contribution_rows) + " contribution rows (want " +
                             std::to_string(want_rows) + "), " + std::to_string(col.contributions.size()) +
                             " contribution values for len " + std::to_string(col.len));
        return false;
    }
    return true;
}

void PathChecker::add(const ColumnRecord& col) {
    if (!well_formed(col)) return;
    ColumnState c(cfg_);
    c.len = col.len;
    c.n = cfg_.ranks;
    c.ulen = static_cast<size_t>(col.len);
    c.gather = is_gather(cfg_.path);
    if (col.rotated_sum) {
        // (rounded sums of up to n values, each within n 2^-53 of exact: inflated by that)
        c.rot_gamma = gamma_of(block_log2(c.len));
        for (float v : col.contributions) c.rot_s1 += std::fabs(static_cast<double>(v));
        c.rot_s1 *= 1 + static_cast<double>(col.contributions.size() + 1) * 0x1p-52;
    }
    column_targets(col, c);
    column_prior(col, c);
    // The contributors whose k a row's check reads: a gather's owners of the column (its first
    // and last element's chunks), else every rank. Once per column (two divisions, per row a tenth
    // of a gather's check).
    const int64_t shard = cfg_.shard(), n = c.n;
    c.owners_hi = n - 1;
    if (c.gather && shard > 0 && c.len > 0 && n >= 1) {
        c.owners_lo = std::clamp<int64_t>(col.first / shard, 0, n - 1);
        c.owners_hi = std::clamp<int64_t>((col.first + c.len - 1) / shard, 0, n - 1);
    }
    c.gamma = c.at.u / (1 - c.at.u);
    // Per element: the previous row's value and its error, reused when this row holds the same bits
    // (every rank of a gather or an all-reduce holds the same value against the same target).
    last_value_.assign(c.ulen, 0.0f);
    last_err_.assign(c.ulen, 0.0);
    have_last_.assign(c.ulen, 0);
    for (const OutputRow& row : col.outputs) {
        c.have_ids_sum = false;
        row_k(col, row, c);
        if (static_cast<int64_t>(row.values.size()) != c.len) {
            record_violation(col.first, row.rank, 0,
                             "malformed row: " + std::to_string(row.values.size()) + " values for len " + std::to_string(c.len));
            continue;
        }
        if (!row_a_posteriori(col, row, c)) continue;
        check_row(col, row, c);
    }
    add_repeats(c);
}

void PathChecker::add_repeats(ColumnState& c) {
    sum_sq_error_.add_times(c.prev_sse, c.repeats);
    sum_sq_target_.add_times(c.prev_sst, c.repeats);
    c.repeats = 0;
}

// Exact targets and the absmax of every contribution row, and every event's block statistics.
void PathChecker::column_targets(const ColumnRecord& col, ColumnState& c) {
    const size_t ulen = c.ulen;
    // Every binary32 value is an integer
    // multiple of its ulp; over a column, all are multiples of 2^e_min (the smallest ulp of a non-zero
    // contribution). When rows * absmax < 2^(62 + e_min), every value scaled by 2^-e_min is an integer
    // below 2^62 / rows, so the sums are exact in int64 in any order: most columns qualify (a span of
    // up to about 62 - 24 - log2(rows) binades between the largest value and the smallest non-zero
    // one). Their targets are integers T * 2^e_min; the double of a target, and the error of an
    // output on the same grid, are one correctly rounded int64 -> binary64 conversion each (the
    // SuperAcc's to_double, bit for bit). Other columns, and outputs off the grid, take the SuperAcc.
    // The int64 sums are taken in the scan's pass, on the previous column's grid, when it has one: the
    // scan then tells whether every value is a multiple of that grid and small enough (grid_fits), and
    // else they are taken again on this column's own. The grid is only a scale: an exact integer sum
    // on a finer grid converts to the same double, and the errors on it are as exact (on_grid in check_row).
    absmax_.resize(static_cast<size_t>(col.contribution_rows));

    // Every event's block statistics, once per column (rows share events), taken by EventPrep in the
    // scan's loop where it can (one event per contribution row), else after it (column_prior); and
    // the a-priori fold (PriorFold) beside them, where the path's bound is one.
    // --divide (D27): the target is the exact mean T / N. Errors are then compared as N v - T,
    // exactly, against N times the bound; the division's own rounding joins the bounds (DivBound).
    c.dv = c.gather ? Divide::kNone : cfg_.divide;
    c.fold_prior = !c.gather && c.dv == Divide::kNone && !col.rotated_sum && PriorFold::applies(cfg_);
    c.nev = col.events.size();
    evb_.resize(c.nev);
    s_.ev_ok.resize(c.nev);  // kEvOk, kEvWhole, kEvCompact
    s_.ev_sym.resize(c.nev);
    s_.ev_range.resize(c.nev);
    EventPrep& prep = c.prep;
    prep.col = &col;
    prep.cfg = &cfg_;
    prep.evb = evb_.data();
    prep.flags = s_.ev_ok.data();
    prep.sym = s_.ev_sym.data();
    prep.range = s_.ev_range.data();
    prep.nev = c.nev;
    prep.qmax_of = &cfg_.format;
    prep.qmax = cfg_.format.kind == FormatKind::kSym ? cfg_.format.code_max() : 0;
    prep.in_scan_setup();
    if (c.fold_prior) {
        prep.fold = PriorFold(cfg_, c.prior, c.prior1, col.first, absmax_.data());
        prep.fold_in_scan = c.prior.inlines();  // (its steps use the first stage's Prior only)
    }

    bool summed = false;
    detail::ColumnScan cs;
    const int used_grid = guess_grid_;
    if (used_grid != kNoGrid) {
        tint_.assign(ulen, 0);
#if defined(__x86_64__)
        // Below kEventsInScanRows rows the fold, which trails the scan by 16 rows (its absmax are
        // written 16 rows at a time), would do too many of its steps after the loop, one after the
        // other: the events and the fold go after the scan, where they hide the fold's latency among
        // themselves.
        if (detail::column_simd() && ulen <= 32 && col.contribution_rows >= kEventsInScanRows)
            cs = detail::scan_impl::scan_add_scaled_each(col.contributions.data(), absmax_.size(), ulen, absmax_.data(),
                                                         used_grid, tint_.data(), summed, prep);
        else
#endif
            cs = detail::scan_add_scaled(col.contributions.data(), absmax_.size(), ulen, absmax_.data(), used_grid,
                                         tint_.data(), summed);
    } else {
        cs = detail::scan_column(col.contributions.data(), absmax_.size(), ulen, absmax_.data());
    }
    c.finite_inputs = cs.top < 0x7F800000u;
    const float col_max = std::bit_cast<float>(cs.top_number);  // a NaN is passed over, as it always was
    int e_min = std::numeric_limits<int>::max();
    if (cs.lo < 0x7F800000u) {
        // The smallest ulp in the column is that of its smallest exponent: ulp(x) = 2^(max(ef, 1) - 150).
        const int ef = static_cast<int>(cs.lo >> 23);
        e_min = (ef == 0 ? 1 : ef) - 150;
    }
    int_sum_ = c.finite_inputs;
    int64_t lr = std::bit_width(static_cast<uint64_t>(std::max<int64_t>(col.contribution_rows, 1)));  // rows < 2^lr
    if (int_sum_ && col_max > 0) {
        int ex = 0;
        (void)std::frexp(col_max, &ex);  // col_max < 2^ex
        int_sum_ = ex + lr <= 62 + e_min;
        // The next column's guess: the middle of this one's range of grids [ex + lr - 62, e_min].
        if (int_sum_) guess_grid_ = (static_cast<int>(ex + lr) - 62 + e_min) >> 1;
    }
    if (e_min == std::numeric_limits<int>::max()) e_min = kLsbExp32;  // an all-zero column
    grid_ = e_min;
    std::vector<double>& target = s_.target;
    target.assign(ulen, 0.0);
    if (summed) {
        grid_ = used_grid;  // summed implies int_sum_: the guess is <= e_min, and ex + lr <= 62 + the guess
    } else if (int_sum_) {
        tint_.assign(ulen, 0);
        detail::add_scaled_rows(col.contributions.data(), static_cast<size_t>(col.contribution_rows), ulen,
                                pow2_double(-grid_), tint_.data());
    }
    if (int_sum_) {
        const double down = pow2_double(grid_);
        for (size_t i = 0; i < ulen; ++i) target[i] = static_cast<double>(tint_[i]) * down;  // RN, then exact scaling
    } else {
        acc_.assign(ulen, SuperAcc());
        for (int64_t r = 0; r < col.contribution_rows; ++r) {
            const float* x = col.contributions.data() + r * c.len;
            for (size_t i = 0; i < ulen; ++i) acc_[i].add(x[i]);
        }
        for (size_t i = 0; i < ulen; ++i) target[i] = acc_[i].to_double();
    }
}

// A priori, per column (reduce paths) or per element (gather paths; see a_priori_bound); and the
// events the scan did not prepare, with the fold's steps left.
void PathChecker::column_prior(const ColumnRecord& col, ColumnState& c) {
    const size_t ulen = c.ulen;
    const int64_t n = c.n, len = c.len;
    const Divide dv = c.dv;
    c.sc = dv == Divide::kNone ? 1.0 : static_cast<double>(n);
    const double sc = c.sc;
    const DivBound& db = c.db;
    const Prior &prior = c.prior, &prior1 = c.prior1;
    double col_prior = kInf;
    pre_extra_.assign(dv == Divide::kPre ? ulen : 0, 0.0);
    if (c.fold_prior) {
        // the fold's, below
    } else if (!c.gather && dv == Divide::kNone) {
        col_prior = reduce_prior(cfg_, prior, prior1, col.first, absmax_) * kPrioInflation;
        if (col.rotated_sum) {
            // End to end (D28): the rotated domain's a-priori bound, from each contribution's
            // rotated absmax (|y_j| <= (1 + gamma) sum |x|), with the stage formats alone; then the
            // way back as for the a posteriori (2^-L sum_j <= the largest).
            std::vector<double> ay(static_cast<size_t>(col.contribution_rows));
            for (int64_t r = 0; r < col.contribution_rows; ++r) {
                double s1 = 0;
                for (size_t i = 0; i < ulen; ++i) s1 += std::fabs(static_cast<double>(col.contributions[static_cast<size_t>(r) * ulen + i]));
                ay[static_cast<size_t>(r)] = std::min((1 + c.rot_gamma) * s1 * (1 + 0x1p-40), static_cast<double>(kFltMax));
            }
            const PathConfig tw = rotation_twins(cfg_);
            const Prior tp(tw), tp1(second_stage(tw));
            col_prior = rotated_back(reduce_prior(tw, tp, tp1, col.first, ay), c.rot_gamma, c.rot_s1, len) * kPrioInflation;
        }
    } else if (!c.gather && dv == Divide::kPre) {
        // The path reduced y_j = div(x_j): |y_j| <= div(A_j) (the division is monotone in |x|).
        std::vector<double> ay(absmax_.size());
        double extra = 0;
        for (size_t j = 0; j < ay.size(); ++j) {
            ay[j] = std::fabs(static_cast<double>(divide_to(static_cast<float>(absmax_[j]), n, division_type(cfg_))));
            extra += db.at(ay[j]) + db.x_term(absmax_[j]);
        }
        col_prior = (reduce_prior(cfg_, prior, prior1, col.first, ay) + extra) * kPrioInflation;
        for (int64_t r = 0; r < col.contribution_rows; ++r) {
            const float* x = col.contributions.data() + r * len;
            for (size_t i = 0; i < ulen; ++i)
                pre_extra_[i] += db.at(std::fabs(static_cast<double>(divide_to(x[i], n, division_type(cfg_))))) +
                                 db.x_term(std::fabs(static_cast<double>(x[i])));
        }
    } else if (!c.gather) {  // post: |out| <= sum A_j + prior, |out'| <= mo
        const double ps = reduce_prior(cfg_, prior, prior1, col.first, absmax_);
        double sa = 0;
        for (double a : absmax_) sa += a;
        const AccumType dt = accum_type(division_type(cfg_));
        const double mo = ((sa + ps) / sc * (1 + kU) + 0x1p-150) * (1 + dt.u) + dt.half_subnormal;
        col_prior = (ps / sc + db.at(mo)) * kPrioInflation;
    }
    if (c.gather) {
        if (col.first_block_absmax.empty()) {
            c.gather_amax = absmax_.empty() ? 0 : absmax_[0];
        } else {
            for (float v : col.first_block_absmax) c.gather_amax = std::max(c.gather_amax, static_cast<double>(std::fabs(v)));
        }
    }
    // The events left, if the scan did not take them all, and the fold's steps left.
    prepare_events(c.prep);
    if (c.fold_prior) col_prior = c.prep.fold.finish() * kPrioInflation;
    c.col_prior = col_prior;
}

// k from the ledger. Rows whose events carry the same contributors the same way have the same k
// (the rows of an all-gather or all-reduce mostly do: one event per decoding rank, from the same
// block), so k is computed again only when a row's ledger differs in shape from the previous row's.
void PathChecker::row_k(const ColumnRecord& col, const OutputRow& row, ColumnState& c) {
    const int64_t n = c.n;
    if (n < 1) return;
    std::vector<int32_t>& ks = s_.ks;
    const int64_t lo = c.owners_lo, hi = c.owners_hi;
    // A gather's k matters for its owners only: counted for them alone when the ledger
    // allows (O(events), not O(N) per row); else every contributor's.
    bool others = false;
    int64_t base = 0;
    bool fresh = false;  // ks computed for this row (else the previous row's: the same k)
    bool bad_ids = false;
    // The same ids as the row ks was computed for: the same k (a memcmp, before the event-by-event test).
    const bool same = c.prev_row != nullptr && c.prev_row->event_ids == row.event_ids && c.prev_row->rounding_ids == row.rounding_ids;
    if (!same && (c.prev_row == nullptr || !same_ledger_shape(col, *c.prev_row, row))) {
        fresh = true;
        // A row whose events extend those ks was counted for (a chain) adds only its new ones.
        const size_t from = c.gather && c.kof_row != nullptr && extends_ledger(*c.kof_row, row) ? c.kof_row->event_ids.size() : 0;
        others = c.kof_others;
        if (c.gather && contribution_k_of(col, row, n, lo, hi, ks, others, from)) {
            base = lo;
            ks_base_ = lo;
            c.kof_row = &row;
            c.kof_others = others;
        } else if (c.ids_summary(row, s_.ev_ok.data()).in_range) {
            if (!count_k(row, c.ids_summary(row, s_.ev_ok.data()).ranges, s_.ev_range.data(), n, ks, s_.diff))
                ks = contribution_k(col, row, n);
            ks_base_ = 0;
            c.kof_row = nullptr;
        } else {
            // An id past the events (contribution_k would read past them): no k from this
            // row, which the ledger check in row_a_posteriori reports as malformed.
            bad_ids = true;
            c.kof_row = nullptr;  // contribution_k_of may have written ks
        }
    }
    base = ks_base_;
    c.prev_row = bad_ids ? nullptr : &row;
    if (fresh && !bad_ids && lo <= hi) {  // (the extremes in locals: st_'s members would be stored every step)
        const int32_t* kp = ks.data() + (lo - base);
        int32_t kmin = kp[0], kmax = kp[0];
        for (int64_t j = 1; j <= hi - lo; ++j) {
            kmin = std::min(kmin, kp[j]);
            kmax = std::max(kmax, kp[j]);
        }
        st_.k_min = have_k_ ? std::min(st_.k_min, kmin) : kmin;
        st_.k_max = have_k_ ? std::max(st_.k_max, kmax) : kmax;
        have_k_ = true;
    }
}

// A posteriori, into apost_: the events' part, resumed from the snapshot of the previous row's prefix
// when this row's event ids start with it (rows of an all-reduce share the reduction events, rows of
// ring-ag-requant extend a chain), so that N rows do not cost N^2 events; then the row's adds,
// roundings, clamps and rotation back. False (and a violation recorded) for a malformed ledger.
bool PathChecker::row_a_posteriori(const ColumnRecord& col, const OutputRow& row, ColumnState& c) {
    const size_t ulen = c.ulen;
    const int64_t len = c.len;
    const size_t nev = c.nev;
    std::vector<double>&snap = s_.snap, &whole = s_.whole;  // whole: after every event of prev_ids
    const std::vector<int32_t>& ids = row.event_ids;
    const bool same_ids = c.prev_ids != nullptr && ids == *c.prev_ids;  // checked already, with that row
    const uint8_t* okp = s_.ev_ok.data();
    const double* ev_sym = s_.ev_sym.data();
    if (!same_ids && !c.ids_summary(row, okp).ok) {
        record_violation(col.first, row.rank, 0,
                         "malformed ledger: an event id is out of range, an event's codes and x differ in "
                         "length, or an event's contributors are not ranks of the path (a listed rank past N or "
                         "negative, or a negative count)");
        c.prev_ids = nullptr;
        return false;
    }
    (void)nev;
    size_t pos = 0;
    // While every event so far adds one number to every element (int<b>'s E over a whole-column
    // block), every element holds the same sum: it is kept once, in `uni`, and spread over
    // apost_ when an event differs, or at the end. Each element would have taken the same adds
    // in the same order, so the bits are the same.
    bool uniform = false;
    double uni = 0;
    auto spread = [&] {
        if (uniform) apost_.assign(ulen, uni);
        uniform = false;
    };
    // The same events as the previous row (every rank of a gather decodes the same block):
    // the same sum, taken as it is (below, with the row's add terms when it has them).
    bool from_whole = false;
    if (same_ids) {
        from_whole = true;
        pos = ids.size() + 1;
    } else if (c.prev_ids != nullptr && c.snap_len <= ids.size() &&
               std::equal(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(c.snap_len), c.prev_ids->begin())) {
        apost_ = snap;
        pos = c.snap_len;
    } else {
        uniform = true;
    }
    for (; pos <= ids.size(); ++pos) {
        if (uniform && pos + 1 < ids.size()) pos = add_whole_sym(ids.data(), pos, ids.size() - 1, okp, ev_sym, uni);
        if (pos + 1 == ids.size() || ids.empty()) {
            spread();
            snap = apost_;  // the state before this row's last event: the next row's likely prefix
            c.snap_len = ids.empty() ? 0 : pos;
        }
        if (pos == ids.size()) break;
        const size_t id = static_cast<size_t>(ids[pos]);
        if (uniform && (okp[id] & kEvWhole)) {
            uni += ev_sym[id];
            continue;
        }
        spread();
        const QuantEvent& ev = col.events[id];
        // Element i was quantized as x[i + off]; only the elements the block covers carry it.
        const int64_t off = ev.column_offset;
        const int64_t lo = std::max<int64_t>(0, -off);
        const int64_t hi = std::min<int64_t>(len, static_cast<int64_t>(ev.x.size()) - off);
        if (okp[id] & kEvCompact) {  // int<b>, not poisoned: E for each element it covers
            const double sv = ev_sym[id];
            for (int64_t i = lo; i < hi; ++i) apost_[static_cast<size_t>(i)] += sv;
            continue;
        }
        const EventBound& b = evb_[id];
        if (b.poisoned) {
            for (int64_t i = lo; i < hi; ++i) apost_[static_cast<size_t>(i)] = kInf;
        } else if (b.kind == FormatKind::kSym) {
            for (int64_t i = lo; i < hi; ++i) apost_[static_cast<size_t>(i)] += b.sym;
        } else if (b.kind == FormatKind::kAsym && !b.rotated) {  // EventBound::at's asym case, its tests once
            if (!b.asym_const) {  // (a constant block's bound is 0: nothing to add)
                const double a = b.asym_a;
                for (int64_t i = lo; i < hi; ++i) {
                    const double mag = std::fabs(static_cast<double>(ev.x[static_cast<size_t>(i + off)])) + a;
                    apost_[static_cast<size_t>(i)] += mag >= kFltMax * (1 - 0x1p-40) ? a + a : a + std::min(a, kU * mag + 0x1p-150);
                }
            }
        } else if (b.kind == FormatKind::kDecl && !b.rotated) {  // EventBound::at, the scale's part once
            if (hi > lo)
                detail::add_decl_bounds(*b.decl, b.decl_scale, b.decl_lo, b.decl_m, ev.x.data() + (lo + off),
                                        static_cast<size_t>(hi - lo), apost_.data() + lo);
        } else {
            for (int64_t i = lo; i < hi; ++i)
                apost_[static_cast<size_t>(i)] +=
                    b.at(ev.x[static_cast<size_t>(i + off)], ev.codes[static_cast<size_t>(i + off)]);
        }
    }
    spread();
    if (pos <= ids.size()) whole = apost_;
    c.prev_ids = &ids;
    const double gamma = c.gamma;
    if (from_whole && row.add_abs_sum.size() == ulen && whole.size() == ulen) {
        // whole's sums and the add terms in one pass (a copy, then loads of what it just stored,
        // waited on the copy's stores)
        apost_.resize(ulen);
        for (size_t i = 0; i < ulen; ++i) apost_[i] = whole[i] + gamma * row.add_abs_sum[i];
    } else {
        if (from_whole) apost_ = whole;
        if (row.add_abs_sum.size() == ulen)
            for (size_t i = 0; i < ulen; ++i) apost_[i] += gamma * row.add_abs_sum[i];
    }
    if (row.term_round_abs_sum.size() == ulen)
        for (size_t i = 0; i < ulen; ++i) apost_[i] += c.at.u * row.term_round_abs_sum[i];
    if (row.term_round_count.size() == ulen)
        for (size_t i = 0; i < ulen; ++i) apost_[i] += c.at.half_subnormal * row.term_round_count[i];
    // NCCL's FP8 paths (D41): a saturated add's error is exactly what its clamp removed, |v| - max,
    // summed in binary64 by the producer (the slack covers that sum's roundings); the outputs a
    // clamp reached are counted apart, so that a saturating run is never silently within bounds.
    // (A column summed in the rotated domain, D28, saturates only at an FP8 output, D49: in the
    // values' own domain, after the rotation back, so its excess is added after the bound is taken back.)
    if (row.saturation_excess.size() == ulen && !col.rotated_sum)
        for (size_t i = 0; i < ulen; ++i) apost_[i] += row.saturation_excess[i] * (1 + 0x1p-40);
    if (row.saturation_count.size() == ulen)
        for (size_t i = 0; i < ulen; ++i)
            if (row.saturation_count[i] > 0) {
                ++st_.saturated_outputs;
                st_.max_saturations = std::max(st_.max_saturations, row.saturation_count[i]);
            }
    if (col.rotated_sum) {  // D28: the rotated domain's bounds, taken back through the inverse rotation
        double sum = 0;
        for (double v : apost_) sum += v;
        apost_.assign(ulen, rotated_back(std::ldexp(sum, -block_log2(len)), c.rot_gamma, c.rot_s1, len));
        if (row.saturation_excess.size() == ulen)
            for (size_t i = 0; i < ulen; ++i) apost_[i] += row.saturation_excess[i] * (1 + 0x1p-40);
    }
    return true;
}

// ring-ag-requant's a-priori table for first-block absmax ai: table[h] for h encodings (h >= 1); the
// owner (h = 0) holds one.
void PathChecker::requant_table(ColumnState& c, double ai) {
    const int64_t n = c.n;
    c.table_a = ai;
    c.table.assign(static_cast<size_t>(std::max<int64_t>(n, 1)), 0.0);
    Bnd b = c.prior.q({ai, 0});
    c.table[0] = b.err;
    if (n > 1) c.table[1] = b.err;
    for (int64_t h = 2; h < n; ++h) {
        b = c.prior.q(b);
        c.table[static_cast<size_t>(h)] = b.err;
    }
}

// v sc - T of element i, exactly (a comparison too close to call in binary64, or an output off the grid).
SuperAcc PathChecker::exact_error(const ColumnRecord& col, double sc, size_t i, float v) const {
    SuperAcc e;
    if (int_sum_) {  // rare: the column summed again
        const size_t ulen = static_cast<size_t>(col.len);
        for (int64_t r = 0; r < col.contribution_rows; ++r) e.add(col.contributions[static_cast<size_t>(r) * ulen + i]);
    } else {
        e = acc_[i];
    }
    e.negate();
    if (sc == 1) e.add(v);
    else e.add(static_cast<double>(v) * sc);  // exact: 24 bits times N < 2^17
    return e;
}

// (v sc - T) / sc of element i rounded to a double, for v a multiple of 2^grid_ below 2^62 of it and
// the column's targets int64 sums on that grid: v = vi 2^grid exactly, |vi| < 2^62, |T| < 2^62, so
// vi - T is exact in int64 (no overflow) and its conversion is the correctly rounded error.
double PathChecker::grid_error(size_t i, float v, int64_t n, double sc) const {
    const int64_t vi = static_cast<int64_t>(static_cast<double>(v) * pow2_double(-grid_));
    if (sc == 1) return static_cast<double>(vi - tint_[i]) * pow2_double(grid_);
    // N vi - T: exact in 128 bits; rounded once to double, then once by / N
    const __int128 d = static_cast<__int128>(vi) * static_cast<__int128>(n) - static_cast<__int128>(tint_[i]);
    return static_cast<double>(d) * pow2_double(grid_) / sc;
}

// Every value of a row against its exact target, its a-posteriori bound (apost_) and its a-priori one.
void PathChecker::check_row(const ColumnRecord& col, const OutputRow& row, ColumnState& c) {
    const size_t ulen = c.ulen;
    const int64_t n = c.n;
    const Divide dv = c.dv;
    const double sc = c.sc, col_prior = c.col_prior;
    const DivBound& db = c.db;
    const std::vector<double>& target = s_.target;
    std::vector<float>& prev_values = s_.prev_values;
    std::vector<double>& prev_apost = s_.prev_apost;
    // Whether an output is a multiple of 2^grid_ below 2^62 of it (then its error is exact in int64).
    auto on_grid = [&](float v) {
        const double d = static_cast<double>(v) * pow2_double(-grid_);
        return std::fabs(d) < 0x1p62 && d == std::trunc(d);
    };
    // ring-ag-requant: how many hops the row's holder is from the column's owner (its table row).
    const int64_t row_h = cfg_.path == PathKind::kRingAgRequant ? ((row.rank - chunk_of(cfg_, col.first)) % n + n) % n : 0;
    // A row equal to the previous one in its values and its a-posteriori bounds (every rank of a
    // gather or an all-reduce), after a row that found nothing wrong: every error, bound and
    // verdict is the previous row's, so only the counts and the in-order sums take it again
    // (not ring-ag-requant, whose a-priori bound depends on the holder).
    // The same bits (same_bits), not ==: a float == is a compare and two branches per element,
    // and these two tests were about half of a gather's check. The previous row's values are
    // finite (clean_prev), so the same bits are ==, but for a -0 against a +0 (that row is then
    // checked element by element, as any other).
    if (c.clean_prev && cfg_.path != PathKind::kRingAgRequant && same_bits(row.values, prev_values) &&
        same_bits(apost_, prev_apost)) {
        st_.outputs_checked += c.len;
        // The row's sums are the previous row's: the same errors and targets, summed from zero
        // in the same order (D34). Counted, and added as one term when the run of such rows
        // ends: the accumulators are exact, so n adds of a value and one of n times it are the same.
        ++c.repeats;
        return;
    }
    const int64_t violations_before = st_.violations, nonfinite_before = st_.nonfinite_outputs;
    // The row's running statistics in locals (same operations, same order), st_'s again after
    // the loop: through st_ every element stored and reloaded them (have_last_'s byte stores
    // may alias anything), a chain through memory per sum.
    int64_t checked = st_.outputs_checked;
    double max_err = st_.max_abs_error, sse = 0, sst = 0;  // the row's own sums (D34)
    double max_post = st_.max_a_posteriori, max_prio = st_.max_a_priori, max_ratio = st_.max_error_to_a_posteriori;
    const bool out_round = cfg_.output != Accum::kFp32;
    const AccumType out_t = accum_type(cfg_.output);
    const bool out_sat = saturating(cfg_.output);
    double prio_ai = c.prio_ai, prio_cached = c.prio_cached;  // (in locals: the loop's; stored back after it)
    for (size_t i = 0; i < ulen; ++i) {
        double post = apost_[i] * kPostInflation;
        if (dv == Divide::kPre) post = (apost_[i] + pre_extra_[i]) * kPostInflation;
        else if (dv == Divide::kPost)
            post = (apost_[i] / sc + db.at(std::fabs(static_cast<double>(row.values[i])))) * kPostInflation;
        double prio = col_prior;
        if (c.gather) {
            const double ai = col.first_block_absmax.empty() ? absmax_[0]
                                                             : std::fabs(static_cast<double>(col.first_block_absmax[i]));
            if (cfg_.path == PathKind::kRingAgRequant) {
                if (ai != c.table_a) requant_table(c, ai);
                prio = c.table[static_cast<size_t>(row_h)] * kPrioInflation;
            } else if (ai == prio_ai) {
                prio = prio_cached;  // the same block's absmax (every element of a block, every row)
            } else {
                // ring-ag and hpz-ag's bounds depend on ai (and the column's amax) only, not the row
                prio = gather_prior(cfg_, c.prior, c.prior1, col.first, row.rank, ai, c.gather_amax) * kPrioInflation;
                prio_ai = ai;
                prio_cached = prio;
            }
        }
        if (out_round) {
            // D46: the output rounded to its type, |o - v| <= u |o| + half its subnormal spacing
            // (o the value held). A priori, from |o| <= |T| + |o - T|: the bound b before the
            // rounding becomes (b + u |T| + h) / (1 - u), at least the a-posteriori bound
            // whenever the error is within it.
            post += (out_t.u * std::fabs(static_cast<double>(row.values[i])) + out_t.half_subnormal) * kPostInflation;
            // D49: an FP8 output clamps past its threshold (464 for e4m3): no a-priori bound where
            // the value before the rounding may reach it (the clamp's excess is a posteriori, above).
            if (out_sat && std::fabs(target[i] / sc) + prio >= out_t.overflow) prio = std::numeric_limits<double>::infinity();
            else
                prio = (prio + (out_t.u * std::fabs(target[i] / sc) + out_t.half_subnormal) * kPostInflation) / (1 - out_t.u) *
                       kPostInflation;
        }
        ++checked;
        const float v = row.values[i];
        if (!std::isfinite(v)) {
            ++st_.nonfinite_outputs;
            record_violation(col.first, row.rank, static_cast<int64_t>(i),
                             "non-finite output " + fmt_double(v) + " (target " + fmt_double(target[i] / sc) + ")");
            continue;
        }
        if (!c.finite_inputs) {
            record_violation(col.first, row.rank, static_cast<int64_t>(i), "non-finite contribution in the column");
            continue;
        }
        // value - T, exactly, and rounded to a double (once per distinct value of the element).
        auto exact_err = [&] { return exact_error(col, sc, i, v); };
        const double tsc = target[i] / sc;  // the target in the output's units (the mean under --divide)
        const bool same_as_last = have_last_[i] && std::bit_cast<uint32_t>(last_value_[i]) == std::bit_cast<uint32_t>(v);
        double errd;
        if (same_as_last) {
            errd = last_err_[i];
        } else {
            errd = int_sum_ && on_grid(v) ? grid_error(i, v, n, sc) : exact_err().to_double() / sc;
            last_value_[i] = v;
            last_err_[i] = errd;
            have_last_[i] = 1;
        }
        const double aerr = std::fabs(errd);
        max_err = std::max(max_err, aerr);
        sse += errd * errd;
        sst += tsc * tsc;
        max_post = std::max(max_post, post);
        max_prio = std::max(max_prio, prio);
        if (aerr > 0) max_ratio = std::max(max_ratio, post > 0 ? aerr / post : kInf);
        // errd is err rounded to nearest, so |err| <= |errd| (1 + 2^-53): when that is at most
        // post with room to spare the exact comparison cannot disagree, and is skipped.
        // Under --divide the exact comparison is |N v - T| <= N post, with N post rounded down.
        double post_n = post;
        if (sc != 1) {
            post_n = post * sc;
            if (std::fma(post, sc, -post_n) < 0) post_n = std::nextafter(post_n, 0.0);
        }
        const bool post_ok = aerr * (1 + 0x1p-50) <= post || exact_err().compare_abs(post_n) <= 0;
        const bool prio_ok = post <= prio;
        if (!post_ok || !prio_ok) {
            record_violation(col.first, row.rank, static_cast<int64_t>(i),
                             std::string(!post_ok ? "|error| > a_posteriori" : "a_posteriori > a_priori") +
                                 ": value " + fmt_double(v) + ", target " + fmt_double(tsc) + ", error " +
                                 fmt_double(errd) + ", a_posteriori " + fmt_double(post) + ", a_priori " +
                                 fmt_double(prio) + ", " + std::to_string(row.event_ids.size()) + " events");
        }
    }
    c.prio_ai = prio_ai;
    c.prio_cached = prio_cached;
    st_.outputs_checked = checked;
    st_.max_abs_error = max_err;
    add_repeats(c);  // (before prev_sse and prev_sst are this row's)
    sum_sq_error_.add(sse);
    sum_sq_target_.add(sst);
    st_.max_a_posteriori = max_post;
    st_.max_a_priori = max_prio;
    st_.max_error_to_a_posteriori = max_ratio;
    c.clean_prev = c.finite_inputs && st_.violations == violations_before && st_.nonfinite_outputs == nonfinite_before;
    if (c.clean_prev) {
        prev_values.assign(row.values.begin(), row.values.end());
        prev_apost.assign(apost_.begin(), apost_.end());
        c.prev_sse = sse;
        c.prev_sst = sst;
    }
}

void PathChecker::merge(const PathChecker& o) {
    const PathStats& b = o.st_;
    st_.outputs_checked += b.outputs_checked;
    st_.max_abs_error = std::max(st_.max_abs_error, b.max_abs_error);
    sum_sq_error_.add(o.sum_sq_error_);
    sum_sq_target_.add(o.sum_sq_target_);
    st_.max_a_posteriori = std::max(st_.max_a_posteriori, b.max_a_posteriori);
    st_.max_a_priori = std::max(st_.max_a_priori, b.max_a_priori);
    st_.max_error_to_a_posteriori = std::max(st_.max_error_to_a_posteriori, b.max_error_to_a_posteriori);
    st_.bound_holds = st_.bound_holds && b.bound_holds;
    st_.violations += b.violations;
    st_.nonfinite_outputs += b.nonfinite_outputs;
    st_.saturated_outputs += b.saturated_outputs;
    st_.max_saturations = std::max(st_.max_saturations, b.max_saturations);
    if (o.first_pos_ >= 0 &&
        (first_pos_ < 0 || o.first_pos_ < first_pos_ || (o.first_pos_ == first_pos_ && o.first_rank_ < first_rank_))) {
        first_pos_ = o.first_pos_;
        first_rank_ = o.first_rank_;
        st_.first_violation = b.first_violation;
    }
    if (o.have_k_) {
        if (!have_k_) {
            st_.k_min = b.k_min;
            st_.k_max = b.k_max;
            have_k_ = true;
        } else {
            st_.k_min = std::min(st_.k_min, b.k_min);
            st_.k_max = std::max(st_.k_max, b.k_max);
        }
    }
}

PathStats PathChecker::stats() const {
    PathStats s = st_;
    s.sum_sq_error = sum_sq_error_.to_double();
    s.sum_sq_target = sum_sq_target_.to_double();
    return s;
}

double fit_exponent(std::span<const double> n, std::span<const double> rel_rms) {
    const size_t m = std::min(n.size(), rel_rms.size());
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    int64_t cnt = 0;
    for (size_t i = 0; i < m; ++i) {
        if (!(n[i] > 0) || !(rel_rms[i] > 0) || !std::isfinite(n[i]) || !std::isfinite(rel_rms[i])) continue;
        const double x = std::log(n[i]), y = std::log(rel_rms[i]);
        sx += x;
        sy += y;
        sxx += x * x;
        sxy += x * y;
        ++cnt;
    }
    if (cnt < 2) return std::numeric_limits<double>::quiet_NaN();
    const double den = cnt * sxx - sx * sx;
    if (!(std::fabs(den) > 0)) return std::numeric_limits<double>::quiet_NaN();
    return (cnt * sxy - sx * sy) / den;
}

}  // namespace qtransit::reference
