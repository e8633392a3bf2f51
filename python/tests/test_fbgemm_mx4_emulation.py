"""FBGEMM's MX4, TorchRec's MX4 communication codec, emulated independently in numpy from FBGEMM's Triton
kernel (pytorch/FBGEMM at 71d6f8b, fbgemm_gpu/fbgemm_gpu/triton/quantize.py: `_floor_log2`,
`_compute_exp` with rounding mode 2 "even", `_kernel_quantize_mx4`; triton/common.py: the E2M1 table
and exponent bias 1; docs/SOURCES.md section 6.2) and compared bit for bit with qtransit's built-in
format `fbgemm-mx4`: every shared exponent, every code, every decoded value. Written from that kernel's
integer steps, not from qtransit's C++ sources (which compute the exponent from the absmax's bits and
the elements by its float grid, with nearest-away rounding).

Per group of 32 binary32 values:

  gmax    max |x|, 2^-126 when it is 0
  E       the exponent field, less 127, of the binary32 whose bits are bits(gmax) + 2^21 - 1
  e       clamp(E - 2, -127, 125); scale 2^e (2^-127 a subnormal)
  v       fl32(x / 2^e)
  code    from v's bits: sign; new_exp = field - 127 + 1; the 24-bit significand (no implicit bit for
          a binary32 subnormal) shifted right by sig_bits + max(1 - new_exp, 0) (at most 24) - 3, one
          added, shifted right once (half away from zero, no sticky bit); a carry past 3 shifts back
          and bumps new_exp; a subnormal that reached 2 becomes exponent 1; past exponent 3: 6
  decoded LUT[code] * 2^e, one binary32 multiply, with FBGEMM's table, whose "-0" is a Python integer:
          code 8 decodes to +0 (qtransit's E2M1 gives -0: the one difference, and test_zero_sign
          pins it to code 8)

The significand shift reaches 45 bits for tiny v; numpy does it in int64 (0 past 31 bits), which is
what PTX's clamped shr gives a non-negative int32 (not run on a GPU here).
"""

import numpy as np
import pytest

import qtransit

F32 = np.float32
NAME = "fbgemm-mx4"
LUT = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0, -0.5, -1, -1.5, -2, -3, -4, -6], dtype=F32)  # as FBGEMM's


def emulate(x):
    g = x.reshape(-1, 32).astype(F32)
    gmax = np.max(np.abs(g), axis=1).astype(F32)
    gmax = np.where(gmax == 0, F32(2.0**-126), gmax).astype(F32)
    bits = gmax.view(np.int32).astype(np.int64) + (1 << 21) - 1
    E = ((bits & 0x7F800000) >> 23) - 127
    e = np.clip(E - 2, -127, 125)
    scale = np.array([np.ldexp(1.0, int(k)) for k in e], dtype=np.float64).astype(F32)  # exact, 2^-127 too
    v = (g / scale[:, None]).astype(F32)
    s = v.view(np.int32).astype(np.int64) & 0xFFFFFFFF
    sign = (s >> 31) & 1
    field = (s & 0x7F800000) >> 23
    trailing = s & 0x7FFFFF
    new_exp = field - 127 + 1
    exp_diff = np.minimum(np.where(new_exp <= 0, 1 - new_exp, 0), 24)
    sub = field == 0
    mant = np.where(sub, trailing, trailing + (1 << 23))
    sig_bits = np.where(sub, 23, 24)
    shift = sig_bits + exp_diff - 3
    mant = np.where(shift >= 63, 0, mant >> np.minimum(shift, 62))
    mant = (mant + 1) >> 1
    overflow = mant > 3
    mant = np.where(overflow & ~sub, mant >> 1, mant)
    new_exp = np.where((new_exp <= 0) & (mant == 2), 1, new_exp)
    mant = mant & 1
    new_exp = np.where(overflow, new_exp + 1, new_exp)
    mant = np.where(new_exp > 3, 1, mant)
    new_exp = np.clip(new_exp, 0, 3)
    code = (sign << 3) | (new_exp << 1) | mant
    decoded = (LUT[code] * scale[:, None]).astype(F32)
    return scale, code.reshape(-1), decoded.reshape(-1)


def run(x):
    r = qtransit.quantize(NAME, x, block=32)
    assert r.passed, r.first_failure
    return (np.asarray(r.scales, dtype=F32).reshape(-1), np.asarray(r.codes).reshape(-1).astype(np.int64),
            np.asarray(r.decoded, dtype=F32).reshape(-1))


def assert_matches(x):
    s, c, d = emulate(x)
    rs, rc, rd = run(x)
    bad = np.flatnonzero(rs.view(np.uint32) != s.view(np.uint32))
    assert bad.size == 0, f"scales differ at groups {bad[:8]}: emulation {s[bad[:8]]}, qtransit {rs[bad[:8]]}"
    bad = np.flatnonzero(rc != c)
    assert bad.size == 0, (f"codes differ at {bad[:8]}: x {x[bad[:8]]!r}, emulation {c[bad[:8]]}, "
                           f"qtransit {rc[bad[:8]]}")
    neg_zero_code = c == 8
    bad = np.flatnonzero((rd.view(np.uint32) != d.view(np.uint32)) & ~neg_zero_code)
    assert bad.size == 0, f"decoded differ at {bad[:8]}: emulation {d[bad[:8]]}, qtransit {rd[bad[:8]]}"
    assert np.all(rd[neg_zero_code] == 0)
    return c


def thresholds(rng, n_groups):
    """Groups whose absmax sits at or an ulp or two either side of 1.75 2^k (FBGEMM's even threshold,
    where torchao's EVEN differs), of 2^k, of 6 2^k, and of the element's own rounding midpoints."""
    x = np.empty((n_groups, 32), dtype=F32)
    for i in range(n_groups):
        k = int(rng.integers(-130, 126))
        anchor = F32(np.ldexp(rng.choice([1.75, 1.0, 1.5, 1.875]), k))
        a = anchor
        for _ in range(int(rng.integers(0, 3))):
            a = np.nextafter(a, F32(np.inf) if rng.random() < 0.5 else F32(0))
        if not np.isfinite(a) or a == 0:
            a = F32(1.75)
        row = (rng.uniform(-1, 1, 32) * float(a)).astype(F32)
        # elements at the E2M1 midpoints of this group's scale (ties: away from zero), and either side
        mids = np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 7.0], dtype=np.float64)
        j = rng.integers(0, 32, 8)
        row[j] = (mids[rng.integers(0, 8, 8)] * rng.choice([-1, 1], 8) * float(a) / 6.0).astype(F32)
        row[int(rng.integers(0, 32))] = a * F32(rng.choice([-1, 1]))
        x[i] = row
    return x.reshape(-1)


INPUTS = {
    "normal": lambda rng: rng.standard_normal(32 * 256).astype(F32),
    "wide": lambda rng: (rng.standard_normal(32 * 256) * np.exp2(rng.integers(-140, 120, 32 * 256))).astype(F32),
    "heavy": lambda rng: rng.standard_cauchy(32 * 256).astype(F32),
    "thresholds": lambda rng: thresholds(rng, 512),
}


@pytest.mark.parametrize("kind", list(INPUTS))
def test_matches_fbgemm_triton_kernel(kind):
    x = INPUTS[kind](np.random.default_rng(7000 + list(INPUTS).index(kind)))
    x = np.where(np.isfinite(x), x, F32(1)).astype(F32)
    assert_matches(x)


def test_even_threshold_is_strict():
    # 1.75 stays (E = 0, e = -2), one ulp above moves (e = -1); torchao's EVEN would move at 1.75 itself.
    x = np.zeros(64, dtype=F32)
    x[0] = 1.75
    x[32] = np.nextafter(F32(1.75), F32(2))
    s, c, _ = emulate(x)
    assert list(s) == [0.25, 0.5] and c[0] == 7 and c[32] == 6
    assert_matches(x)


def test_zero_sign():
    # -0, a tiny negative and an all-zero group: code 8 where the sign is kept; FBGEMM decodes it +0.
    x = np.zeros(64, dtype=F32)
    x[0], x[1], x[2] = 4.0, -0.1, -0.0
    x[33] = -0.0
    c = assert_matches(x)
    assert c[1] == 8 and c[2] == 8 and c[33] == 8
    _, _, d = emulate(x)
    assert not np.signbit(d[1])
    _, _, rd = run(x)
    assert np.signbit(rd[1])


def test_extremes():
    # FLT_MAX carries to E = 128: e = 126 clamped to 125, the element saturates at 6; tiny and subnormal groups.
    x = np.zeros(96, dtype=F32)
    x[0] = np.finfo(F32).max
    x[1] = -np.finfo(F32).max / 3
    x[32] = F32(2.0**-149)
    x[33] = F32(-3 * 2.0**-149)
    x[64:96] = np.linspace(-1e-38, 1e-38, 32).astype(F32)
    s, c, _ = emulate(x)
    assert s[0] == F32(2.0**125) and c[0] == 7
    assert_matches(x)
