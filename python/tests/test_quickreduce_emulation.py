"""QuickReduce's quantization codecs (vLLM's and SGLang's ROCm quick all-reduce: CodecQ4, CodecQ6 and
CodecQ8, fp16 arithmetic, i.e. T = half, the default for bf16 payloads too since the bf16->fp16 cast is on)
emulated independently in numpy from their description in docs/SOURCES.md sections 2.1-2.9 (the recipe
is 2.9; vllm-project/vllm csrc/quickreduce/quick_reduce_impl.cuh at 0bf6342 and 56522fd, base.h at
1e8e860), and compared bit for bit with qtransit's built-in formats `quickreduce-q4`, `quickreduce-q6` and
`quickreduce-q8`: every scale, code and decoded value. Written from that description (cross-read against
the kernel's text), not from qtransit's C++ sources.

Per codec b in {4, 6, 8}, with s_b = -1/8, -1/32, -1/128 (0xB000, 0xA800, 0xA000), range [-2^(b-1),
2^(b-1) - 1], bias 2^(b-1), eps = 2^-24 (0x0001, the kernel's "1e-7"), and r16(.) = one round to
nearest even to binary16, subnormals kept, a finite result past the range saturating to +-65504
(FP16_OVFL, which set_fp16_ovfl(true) sets on gfx942; SOURCES 2.8):

  input   x16 = r16(x)                                 (the fp16 tensor; |x| < 65520 only)
  group   the 32 elements of one parity in an aligned 64-element span: element e is in group
          (e div 64, e mod 2) (SOURCES 2.1: 8 threads x 8 consecutive elements, low/high lanes)
  extreme wmax, wmin = the group's max and min; m = wmax if |wmax| > |wmin| strictly, else wmin
  scales  dec = r16(m * s_b)  (stored, sent, used to decode: negative when m > 0, -0 when m = +0)
          t   = r16(dec + eps)
          enc = rcp(t): v_rcp_f16, taken as the correctly rounded reciprocal; where it overflows
                (|1/t| >= 65520, or t = 0) it saturates to +-65504 with the sign of 1/t
  encode  w = r16(x16 * enc), clamped to the range; q = rint(w) (half to even, exact in fp32);
          u = q + bias in [0, 2^b - 1] (the biased code on the wire)
  decode  y = r16((u - bias) * dec): one rounding; a zero takes the product's sign (0 * -|dec| = -0)

qtransit's groups are `block` consecutive elements, so qtransit is run on the de-interleaved input: in
each 64-span the 32 even-position elements first, then the 32 odd ones (qtransit's group 2k is span k's
even group, 2k+1 its odd group); its codes and decoded values are mapped back to the natural positions.

numpy's float16 is the fp16 arithmetic: every operand is an fp16 value, every exact result is formed in
binary64 and cast once to float16 (numpy's casts round to nearest even, subnormals kept; checked below
against exact rationals). Products of two fp16 values (11 x 11 significant bits), and of a b-bit
integer by an fp16 value, are exact in binary64; so is dec + 2^-24 (|dec| < 2^13: 37 bits). 1/t is not
exact, but binary64 has 53 >= 2*11 + 2 bits, so rounding 1/t to binary64 and then to binary16 gives the
correctly rounded binary16 quotient (the double rounding is innocuous); overflow is tested on the
binary64 quotient explicitly rather than left to numpy's inf.

Not modeled (and not fed): NaN and inf inputs, |x| >= 65520, and all-zero groups that mix +0 and -0 (the
sign of m is then the packed max/min's signed-zero rule, SOURCES 2.10). Wrong variants (enc overflowing
to inf, consecutive groups, no input rounding, |x|max as the extreme) are checked to differ.
"""

from fractions import Fraction

import numpy as np
import pytest

F16, F32, F64 = np.float16, np.float32, np.float64
BITS = (4, 6, 8)
SPAN = 64  # two groups of 32 share an aligned span: the even positions and the odd ones
GROUP = 32
EPS = 2.0**-24  # 0x0001
FP16_MAX = 65504.0
OVERFLOW = 65520.0  # a finite value of this magnitude or more rounds (RNE) past 65504


def scale_factor(b):
    return -(2.0 ** -(b - 1))  # -1/8, -1/32, -1/128: exact in fp16


def bias(b):
    return 2 ** (b - 1)


# ---------------------------------------------------------------------------------------------
# fp16 arithmetic


def r16(v, ovfl="saturate"):
    """binary64 values (each the exact result of one fp16 operation) rounded once, to nearest even, to
    binary16, subnormals kept. A finite value past the range becomes +-65504 (ovfl="saturate") or +-inf."""
    v = np.asarray(v, F64)
    big = np.isfinite(v) & (np.abs(v) >= OVERFLOW)
    out = np.where(big, 0.0, v).astype(F16)
    fill = FP16_MAX if ovfl == "saturate" else np.inf
    return np.where(big, np.copysign(fill, v), out.astype(F64)).astype(F16)


def rcp16(t, ovfl="saturate"):
    """v_rcp_f16 as the correctly rounded reciprocal of the fp16 values t; 1/(+-0) and |1/t| >= 65520
    overflow, to +-65504 (ovfl="saturate", the sign of 1/t) or +-inf."""
    t = np.asarray(t, F64)
    zero = t == 0
    r = np.where(zero, np.copysign(np.inf, t), 1.0 / np.where(zero, 1.0, t))  # 1/(+0) = +inf
    over = zero | (np.abs(r) >= OVERFLOW)
    out = np.where(over, 0.0, r).astype(F16)  # 53 >= 2*11 + 2: correctly rounded
    fill = FP16_MAX if ovfl == "saturate" else np.inf
    return np.where(over, np.copysign(fill, r), out.astype(F64)).astype(F16)


# ---------------------------------------------------------------------------------------------
# layout


def to_groups(x, layout="interleaved"):
    """natural order (n,) -> (spans, 2, 32): [k, 0] the even positions of span k, [k, 1] the odd ones."""
    x = np.asarray(x)
    if layout == "interleaved":
        return x.reshape(-1, GROUP, 2).transpose(0, 2, 1)
    return x.reshape(-1, 2, GROUP)  # a wrong variant: 32 consecutive elements


def from_groups(g, layout="interleaved"):
    g = np.asarray(g)
    if layout == "interleaved":
        return np.ascontiguousarray(g.transpose(0, 2, 1)).reshape(-1)
    return np.ascontiguousarray(g).reshape(-1)


def deinterleave(x):
    """P(x): each 64-span's even-position elements, then its odd ones: qtransit's consecutive groups."""
    return np.ascontiguousarray(to_groups(x)).reshape(-1)


def reinterleave(z):
    """The inverse of deinterleave: values in qtransit's order back at their natural positions."""
    return from_groups(np.asarray(z).reshape(-1, 2, GROUP))


# ---------------------------------------------------------------------------------------------
# the codec


def emulate(x, b, *, ovfl="saturate", layout="interleaved", round_input=True, extreme="signed"):
    """QuickReduce's CodecQ<b> (fp16) on the binary32 values x (natural order, a whole number of
    64-spans). Returns (scales, codes, decoded): the decoding scales dec as binary32, one per group in
    qtransit's order (span 0 even, span 0 odd, span 1 even, ...); the biased codes u and the decoded
    values y (binary32) at the natural positions. The keywords select the wrong variants."""
    x = np.asarray(x, F32)
    assert x.ndim == 1 and x.size % SPAN == 0
    assert np.all(np.isfinite(x)) and np.all(np.abs(x) < OVERFLOW), "outside what qtransit accepts"
    x16 = x.astype(F64).astype(F16).astype(F64) if round_input else x.astype(F64)
    g = to_groups(x16, layout)
    wmax, wmin = g.max(axis=-1), g.min(axis=-1)
    allzero = (wmax == 0) & (wmin == 0)
    mixed = allzero & (np.signbit(g).any(axis=-1) != np.signbit(g).all(axis=-1))
    assert not mixed.any(), "an all-zero group mixing +0 and -0: the sign of m is not modeled"
    if extreme == "signed":
        m = np.where(np.abs(wmax) > np.abs(wmin), wmax, wmin)  # a tie goes to wmin
    else:  # wrong variant: the magnitude
        m = np.abs(g).max(axis=-1)
    dec = r16(m * scale_factor(b), ovfl).astype(F64)  # exact product: s_b is a power of two
    t = r16(dec + EPS, ovfl).astype(F64)  # exact sum
    enc = rcp16(t, ovfl).astype(F64)
    with np.errstate(invalid="ignore"):  # 0 * inf in the inf variant: NaN, which the clamp's max drops
        w = r16(g * enc[..., None], ovfl).astype(F64)  # exact product
    w = np.fmin(np.fmax(w, -bias(b)), bias(b) - 1)  # max/min return the non-NaN operand
    q = np.rint(w)  # half to even; w is already an fp16 value, so no other rounding
    u = (q + bias(b)).astype(np.int64)
    assert u.min() >= 0 and u.max() <= 2**b - 1
    y = r16((u - bias(b)).astype(F64) * dec[..., None], ovfl).astype(F32)  # exact product, one rounding
    return dec.astype(F32).reshape(-1), from_groups(u, layout), from_groups(y, layout)


def run(x, b):
    """qtransit's quickreduce-q<b> on the de-interleaved x; codes and decoded back at natural positions."""
    import qtransit  # here, so that the emulation's own checks run without the built module

    r = qtransit.quantize(f"quickreduce-q{b}", deinterleave(np.asarray(x, F32)), block=GROUP)
    assert r.passed, r.first_failure
    return (np.asarray(r.scales, dtype=F32).reshape(-1),
            reinterleave(np.asarray(r.codes).reshape(-1).astype(np.int64)),
            reinterleave(np.asarray(r.decoded, dtype=F32).reshape(-1)))


def compare(ours, theirs):
    out = []
    for what, a, c in zip(("scales", "codes", "decoded"), ours, theirs):
        if a.shape != c.shape:
            out.append(f"{what}: shape {a.shape} (emulation) vs {c.shape} (qtransit)")
            continue
        bad = np.flatnonzero(a.view(np.uint32) != c.view(np.uint32)) if a.dtype == F32 else np.flatnonzero(a != c)
        if bad.size:
            at = "groups" if what == "scales" else "positions"
            out.append(f"{what} at {at} {bad[:6].tolist()} ({bad.size} in all): "
                       f"emulation {a[bad[:6]].tolist()}, qtransit {c[bad[:6]].tolist()}")
    return out


def differences(x, b, **kw):
    return compare(emulate(x, b, **kw), run(x, b))


# ---------------------------------------------------------------------------------------------
# inputs (each returns binary32 values in natural order, `spans` 64-spans)


def fp16_bits_to_f64(bits):
    return np.asarray(bits, np.uint16).view(F16).astype(F64)


def saturation_edges(b):
    """The largest fp16 |m| whose group's enc saturates, for m > 0 and for m < 0 (SOURCES 2.8's table)."""
    v = fp16_bits_to_f64(np.arange(1, 0x7C00))  # every positive finite fp16
    edges = []
    for m in (v, -v):
        t = r16(r16(m * scale_factor(b)).astype(F64) + EPS).astype(F64)
        sat = np.abs(rcp16(t).astype(F64)) == FP16_MAX
        edge = v[sat].max()
        assert np.all(sat == (v <= edge))  # saturation is exactly the magnitudes up to the edge
        edges.append(edge)
    return tuple(edges)


def normal(rng, spans, b):
    return rng.standard_normal(spans * SPAN).astype(F32)


def heavy(rng, spans, b):
    return np.clip(rng.standard_cauchy(spans * SPAN), -60000, 60000).astype(F32)


def signs(rng, spans, b):
    """Groups whose extreme is positive, negative, a tie (+a and -a: m = -a), or every element equal."""
    g = np.empty((spans, 2, GROUP))
    for k in range(spans):
        for p in range(2):
            a = float(F16(10.0 ** rng.uniform(-3, 4)))
            row = rng.uniform(-a, a, GROUP) * 0.999
            i, j = rng.choice(GROUP, 2, replace=False)
            case = (2 * k + p) % 6
            if case == 0:
                row[i] = a
            elif case == 1:
                row[i] = -a
            elif case == 2:
                row[i], row[j] = a, -a
            elif case == 3:
                row[:4], row[4:8] = a, -a
            else:
                row[:] = a if case == 4 else -a
            g[k, p] = row
    return from_groups(g).astype(F32)


def tiny(rng, spans, b):
    """Groups whose enc saturates and groups just past that: m within a few fp16 steps of the edges
    (both signs), and m spread over [edge/16, 16 edge]."""
    pos, neg = saturation_edges(b)
    g = np.empty((spans, 2, GROUP))
    for k in range(spans):
        for p in range(2):
            i = 2 * k + p
            sign = 1.0 if i % 2 == 0 else -1.0
            edge = pos if sign > 0 else neg
            if i % 4 < 2:
                step = (i // 4) % 9 - 4  # -4 .. +4 fp16 steps from the edge
                a = float(fp16_bits_to_f64(int(np.array(edge, F16).view(np.uint16)) + step))
            else:
                a = float(F16(edge * 2.0 ** rng.uniform(-4, 4)))
            row = a * rng.uniform(-1, 1, GROUP)
            row[rng.integers(GROUP)] = sign * a
            g[k, p] = row
    return from_groups(g).astype(F32)


def subnormal(rng, spans, b):
    """fp16 subnormals k 2^-24; in every other span the odd group has a normal extreme too."""
    g = rng.integers(-1023, 1024, (spans, 2, GROUP)).astype(F64) * EPS
    g[::2, 1, 0] = np.where(rng.random(g[::2].shape[0]) < 0.5, 1, -1) * 10.0 ** rng.uniform(-4, 0, g[::2].shape[0])
    g[:, :, 1] = np.where(g[:, :, 1] == 0, EPS, g[:, :, 1])  # no all-zero group
    return from_groups(g).astype(F32)


def zeros(rng, spans, b):
    """All-zero groups, +0 or -0 (never mixed), beside ordinary ones."""
    g = rng.standard_normal((spans, 2, GROUP))
    for k in range(spans):
        case = k % 5
        if case == 0:
            g[k] = 0.0
        elif case == 1:
            g[k] = -0.0
        elif case == 2:
            g[k, 0] = 0.0
        elif case == 3:
            g[k, 1] = -0.0
    return from_groups(g).astype(F32)


def not_fp16(rng, spans, b):
    """binary32 values that are not fp16 values: spread over magnitudes, and exact midpoints between
    neighbouring fp16 values (normal and subnormal), which round to the even one."""
    n = spans * SPAN
    x = rng.standard_normal(n) * 10.0 ** rng.uniform(-6, 4, n)
    bits = rng.integers(1, 0x7BFF, n).astype(np.uint16)  # a positive finite fp16 below the largest
    lo, hi = fp16_bits_to_f64(bits), fp16_bits_to_f64(bits + np.uint16(1))
    mid = (lo + hi) / 2 * np.where(rng.random(n) < 0.5, 1, -1)  # 12 significant bits: exact in binary32
    x = np.where(np.arange(n) % 3 == 0, mid, x)
    x = np.clip(x, -60000, 60000)
    x[1::SPAN] = x[0::SPAN] = 1.0  # a normal extreme in every group
    return x.astype(F32)


INPUTS = {
    "normal": normal,
    "heavy": heavy,
    "signs": signs,
    "tiny": tiny,
    "subnormal": subnormal,
    "zeros": zeros,
    "not-fp16": not_fp16,
}


def make(kind, b, spans=48):
    x = INPUTS[kind](np.random.default_rng(4600 + 10 * list(INPUTS).index(kind) + b), spans, b)
    assert x.dtype == F32 and x.size == spans * SPAN
    return x


# ---------------------------------------------------------------------------------------------
# hand-derived goldens: (b, even-group values, odd-group values, per element (code, decoded), scales).
# A group's unlisted elements repeat its last listed one.

GOLDEN = [
    # Q4, even group: m = 1.0. dec = r16(1 * -1/8) = -0.125; t = r16(-0.125 + 2^-24) = -0.125 (half an
    # ulp there is 2^-15); enc = 1/-0.125 = -8.
    #   1.0     -> w = -8, u = 0,  y = -8 * -0.125 = 1.0
    #   0.3     -> x16 = r16(0.3) = 1229/4096 (0.3 * 4096 = 1228.8); w = -9832/4096 = -2.400390625
    #              (exact); q = -2, u = 6, y = -2 * -0.125 = 0.25
    #   -0.5    -> w = 4, u = 12, y = -0.5
    #   0.0625  -> w = -0.5, q = rint(-0.5) = -0 (half to even), u = 8, y = 0 * -0.125 = -0.0
    #   0.1875  -> w = -1.5, q = -2 (even), u = 6, y = 0.25
    #   -0.3125 -> w = 2.5, q = 2 (even), u = 10, y = -0.25
    #   +0      -> w = -0, u = 8, y = -0.0 (the product's sign)
    # Q4, odd group: a tie, +2 and -2: m = min = -2; dec = 0.25 (positive); t = 0.25; enc = 4.
    #   2.0     -> w = 8, clamped to 7, u = 15, y = 7 * 0.25 = 1.75
    #   -2.0    -> w = -8, u = 0, y = -2.0
    #   1.0     -> w = 4, u = 12, y = 1.0
    #   0.625   -> w = 2.5, q = 2, u = 10, y = 0.5
    #   -0.375  -> w = -1.5, q = -2, u = 6, y = -0.5
    #   +0      -> w = +0, u = 8, y = 0 * 0.25 = +0.0
    (4,
     [1.0, 0.3, -0.5, 0.0625, 0.1875, -0.3125, 0.0],
     [2.0, -2.0, 1.0, 0.625, -0.375, 0.0],
     [[(0, 1.0), (6, 0.25), (12, -0.5), (8, -0.0), (6, 0.25), (10, -0.25), (8, -0.0)],
      [(15, 1.75), (0, -2.0), (12, 1.0), (10, 0.5), (6, -0.5), (8, 0.0)]],
     [-0.125, 0.25]),
    # Q6: an all-(+0) group and an all-(-0) group.
    #   +0: m = +0, dec = r16(+0 * -1/32) = -0.0; t = r16(-0 + 2^-24) = 2^-24; 1/t = 2^24 overflows:
    #       enc = +65504; w = +0, u = 32, y = 0 * -0.0 = -0.0.
    #   -0: m = -0, dec = +0.0; t = 2^-24, enc = +65504; w = -0, q = 0, u = 32, y = 0 * +0 = +0.0.
    (6,
     [0.0],
     [-0.0],
     [[(32, -0.0)], [(32, 0.0)]],
     [-0.0, 0.0]),
    # Q8, even group: m = 0.001 (the saturation example of SOURCES 2.8).
    #   x16 = r16(0.001) = 1049 2^-20 (0.001 * 2^20 = 1048.576). dec = r16(-1049 2^-27): subnormal, in
    #   steps of 2^-24: 1049/8 = 131.125 -> dec = -131 2^-24. t = -130 2^-24; 1/t = -129055.5... overflows:
    #   enc = -65504.
    #   0.001   -> w = r16(-1049 * 65504 2^-20) = r16(-65.5305): steps of 2^-4, 1048.488 -> -65.5;
    #              q = rint(-65.5) = -66 (even), u = 62; y = r16(66 * 131 2^-24) = r16(8646 2^-24):
    #              steps of 2^-21 there, 8646/8 = 1080.75 -> 1081 2^-21 = 5.15460968e-4 (not 0.001)
    #   -0.0005 -> x16 = -1049 2^-21 (0.0005 * 2^21 = 1048.576); w = r16(32.7652): steps of 2^-5,
    #              1048.488 -> 32.75; q = 33, u = 161; y = r16(-33 * 131 2^-24) = r16(-4323 2^-24):
    #              steps of 2^-22, 4323/4 = 1080.75 -> -1081 2^-22
    # Q8, odd group: binary32 inputs that are fp16 ties (input rounding to even).
    #   1 + 3 2^-11 (between 1 + 2^-10, odd, and 1 + 2^-9, even) -> x16 = 1 + 2^-9 = m.
    #   dec = -(1 + 2^-9)/128 (exact); t = dec (2^-24 is below half an ulp, 2^-18); enc = r16(-128/(1 + 2^-9))
    #   = r16(-127.7505): steps of 2^-4, 2044.008 -> -127.75.
    #   1 + 3 2^-11 -> w = r16(-(1 + 2^-9) 127.75) = r16(-127.9995) = -128, u = 0, y = 1 + 2^-9
    #   1 + 2^-11   -> x16 = 1.0 (tie to even); w = -127.75, q = -128, u = 0, y = 1 + 2^-9
    #   0.5         -> w = -63.875, q = -64, u = 64, y = 0.5 (1 + 2^-9) = 0.5009765625 (exact)
    #   -2^-25      -> x16 = -0 (a tie between 0 and 2^-24: to even); w = +0, u = 128, y = -0.0
    #   3 2^-25     -> x16 = 2^-23 (a tie between 2^-24 and 2^-23: to even); w = r16(-255.5 2^-24)
    #                  = -256 2^-24 (a tie, to even) = -2^-16; q = -0, u = 128, y = -0.0
    (8,
     [0.001, -0.0005],
     [1 + 3 * 2.0**-11, 1 + 2.0**-11, 0.5, -(2.0**-25), 3 * 2.0**-25],
     [[(62, 1081 * 2.0**-21), (161, -1081 * 2.0**-22)],
      [(0, 1 + 2.0**-9), (0, 1 + 2.0**-9), (64, 0.5009765625), (128, -0.0), (128, -0.0)]],
     [-131 * 2.0**-24, -(1 + 2.0**-9) / 128]),
]


def golden_case(case):
    """The golden's 64-element input and its expected (scales, codes, decoded) at natural positions.
    A group's unlisted elements repeat its last listed one (value, code and decoded value)."""
    b, even, odd, expect, scales = case
    g = np.zeros((1, 2, GROUP))
    codes = np.zeros((1, 2, GROUP), np.int64)
    dec = np.zeros((1, 2, GROUP))
    for p, values in enumerate((even, odd)):
        assert len(values) == len(expect[p])
        for j in range(GROUP):
            k = min(j, len(values) - 1)
            g[0, p, j], (codes[0, p, j], dec[0, p, j]) = values[k], expect[p][k]
    x = from_groups(g).astype(F32)  # 0.3, 0.001, 0.0005: their binary32 neighbours round to the same fp16
    return b, x, (np.array(scales, F32), from_groups(codes), from_groups(dec).astype(F32))


# ---------------------------------------------------------------------------------------------
# the emulation's own checks (no qtransit needed)


def exact_fp16(v):
    """The binary16 nearest to the rational v (ties to even), subnormals kept; |v| < 65520."""
    v = Fraction(v)
    if v == 0:
        return 0.0
    a = abs(v)
    e = max(a.numerator.bit_length() - a.denominator.bit_length() + 1, -13)  # within a binade or two
    while a >= Fraction(2) ** e:
        e += 1
    while e > -13 and a < Fraction(2) ** (e - 1):
        e -= 1
    quantum = Fraction(2) ** (e - 11)  # a in [2^(e-1), 2^e) (or subnormal, e = -13): 11 bits, or 2^-24
    n = a / quantum
    r = int(n)
    frac = n - r
    if frac > Fraction(1, 2) or (frac == Fraction(1, 2) and r % 2 == 1):
        r += 1
    out = float(r * quantum)
    return out if v > 0 else -out


def test_numpy_float16_casts_round_to_nearest_even():
    rng = np.random.default_rng(1)
    bits = rng.integers(0, 0x7BFF, 3000).astype(np.uint16)
    lo, hi = fp16_bits_to_f64(bits), fp16_bits_to_f64(bits + np.uint16(1))
    samples = np.concatenate([(lo + hi) / 2, lo + (hi - lo) * rng.uniform(0, 1, bits.size),
                              np.arange(-2048, 2048) * 2.0**-26])  # midpoints, between, subnormal ties
    samples = np.concatenate([samples, -samples]).astype(F32)
    for via in (samples, samples.astype(F64)):
        got = via.astype(F16).astype(F64)
        want = np.array([exact_fp16(float(s)) for s in samples])
        assert np.array_equal(got, want) and np.array_equal(np.signbit(got), np.signbit(samples))
    assert np.array_equal(r16(np.array([65519.99, -65520.0, 65536.0, -1e9])).astype(F64), [65504.0, -65504, 65504, -65504])


def test_reciprocal_is_correctly_rounded():
    t = fp16_bits_to_f64(np.arange(1, 0x7C00))
    t = np.concatenate([t, -t])
    enc = rcp16(t).astype(F64)
    ok = np.abs(1.0 / t) < OVERFLOW
    sample = np.flatnonzero(ok)[::97]
    assert np.array_equal(enc[sample], [exact_fp16(1 / Fraction(float(v))) for v in t[sample]])
    assert np.array_equal(enc[~ok], np.copysign(FP16_MAX, t[~ok]))
    assert rcp16(np.array([0.0])).astype(F64)[0] == FP16_MAX  # 1/(+0) = +inf -> +65504
    assert np.isinf(rcp16(np.array([0.0]), "inf").astype(F64)[0])


def test_saturation_edges_are_sources_table():
    # SOURCES 2.8: Q4 1.2267e-4 (m > 0) / 1.2177e-4 (m < 0); Q6 4.9067e-4 / 4.8709e-4; Q8 1.9627e-3 / 1.9484e-3
    table = {4: (1.2267e-4, 1.2177e-4), 6: (4.9067e-4, 4.8709e-4), 8: (1.9627e-3, 1.9484e-3)}
    for b, (pos, neg) in table.items():
        got = saturation_edges(b)
        assert abs(got[0] / pos - 1) < 1e-4 and abs(got[1] / neg - 1) < 1e-4, (b, got)


@pytest.mark.parametrize("case", range(len(GOLDEN)))
def test_emulation_gives_the_hand_goldens(case):
    b, x, want = golden_case(GOLDEN[case])
    assert not compare(emulate(x, b), want)


@pytest.mark.parametrize("b", BITS)
@pytest.mark.parametrize("kind", list(INPUTS))
def test_inputs_reach_their_cases(kind, b):
    """Each input kind exercises what it is named for, so that the comparisons below cover it."""
    x = make(kind, b)
    dec, u, y = emulate(x, b)
    g = to_groups(x.astype(F64).astype(F16).astype(F64))
    m_neg = ~np.signbit(dec)  # dec >= +0 iff m <= -0
    t = r16(dec.astype(F64) + EPS).astype(F64)
    sat = np.abs(rcp16(t).astype(F64)) == FP16_MAX
    if kind == "signs":
        ties = (g.max(-1) == -g.min(-1)) & (g.max(-1) > 0)
        assert ties.any() and m_neg.any() and (~m_neg).any() and (u == 2**b - 1).any()
    if kind == "tiny":
        assert sat.any() and (~sat).any()
    if kind == "subnormal":
        assert sat.any() and (np.abs(y[y != 0]) < 2.0**-14).any()
    if kind == "zeros":
        z = (g == 0).all(-1).reshape(-1)
        assert (z & np.signbit(dec)).any() and (z & ~np.signbit(dec)).any()
    if kind == "not-fp16":
        x16 = x.astype(F16).astype(F32)
        assert (x16 != x).mean() > 0.5 and (np.abs(x16) < 2.0**-14).any()


# ---------------------------------------------------------------------------------------------
# the comparisons with qtransit


@pytest.mark.parametrize("b", BITS)
@pytest.mark.parametrize("kind", list(INPUTS))
def test_matches_quickreduce_codec(kind, b):
    assert not differences(make(kind, b), b)


@pytest.mark.parametrize("case", range(len(GOLDEN)))
def test_hand_goldens(case):
    b, x, want = golden_case(GOLDEN[case])
    assert not compare(emulate(x, b), want)
    assert not compare(run(x, b), want)


@pytest.mark.parametrize("b", BITS)
def test_largest_inputs(b):
    # 65519.996 (the largest binary32 below 65520) rounds to 65504; its group's scale and decode stay finite.
    x = np.zeros(SPAN, F32)
    x[0], x[2], x[1], x[3] = np.nextafter(F32(65520), F32(0)), -60000.0, -65504.0, 65504.0
    dec, u, y = emulate(x, b)
    assert y[0] == 65504 and y[1] == -65504 and np.all(np.isfinite(dec))
    assert not differences(x, b)


def test_a_wrong_emulation_is_caught():
    for b in BITS:
        assert any(d.startswith("codes") for d in differences(make("tiny", b), b, ovfl="inf"))
        assert differences(make("normal", b), b, layout="consecutive")
        assert differences(make("not-fp16", b), b, round_input=False)
        assert any(d.startswith("scales") for d in differences(make("signs", b), b, extreme="absmax"))
