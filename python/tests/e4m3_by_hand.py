"""OCP E4M3 (e4m3fn) by hand, for the tests' independent emulations (test_fp8_cast_emulation.py,
test_flashinfer_2shot_emulation.py): the value of every byte from the format's definition, and
round-to-nearest-even onto its grid with saturation at 448, from frexp/ldexp on exact float64 copies
of binary32 values (not ml_dtypes, not torch, not qtransit)."""

import numpy as np

F32 = np.float32


def _e4m3_table():
    """val(code) for every byte, straight from the definition (bias 7, 3 mantissa bits, 0x7F/0xFF NaN)."""
    t = np.empty(256, dtype=np.float64)
    for c in range(256):
        e, m = (c >> 3) & 0xF, c & 7
        if e == 0xF and m == 7:
            v = np.nan
        elif e == 0:
            v = m * 2.0 ** -9  # subnormal: grid spacing 2^-9 below 2^-6
        else:
            v = (1.0 + m / 8.0) * 2.0 ** (e - 7)
        t[c] = -v if c & 0x80 else v
    return t


E4M3_VALUE = _e4m3_table()
assert E4M3_VALUE[0x7E] == 448.0 and E4M3_VALUE[0x01] == 2.0 ** -9 and E4M3_VALUE[0x08] == 2.0 ** -6


def e4m3_encode(v):
    """Round binary32 values v to nearest-even on the E4M3 grid, magnitudes above 448 saturating to
    448; returns the raw codes (sign bit 0x80 taken from v's sign, so a negative value that rounds to
    zero gives 0x80)."""
    v = np.asarray(v, dtype=np.float32)
    sign = np.signbit(v)
    a = np.abs(v.astype(np.float64))  # exact
    _, ex = np.frexp(a)  # a = f * 2^ex, f in [0.5, 1): floor(log2 a) = ex - 1 (a > 0)
    binade = np.maximum(ex - 1, -6)  # below 2^-6 the subnormal grid continues at spacing 2^-9
    q = binade - 3  # 3 mantissa bits: spacing 2^(binade-3)
    n = np.rint(np.ldexp(a, -q))  # exact scaling, then round half to even
    r = np.ldexp(n, q)
    r = np.where(a > 448.0, 448.0, np.minimum(r, 448.0))  # saturate (r <= 448 already when a <= 448)
    # the code of the (non-negative) grid value r
    _, ex2 = np.frexp(r)
    normal = r >= 2.0 ** -6
    e2 = np.where(normal, ex2 - 1, -6)
    field = np.where(normal, e2 + 7, 0)
    mant = np.where(normal, np.ldexp(r, -e2) * 8 - 8, np.ldexp(r, 9)).astype(np.int64)
    assert np.all((mant >= 0) & (mant <= 7)) and np.all((field >= 0) & (field <= 15))
    code = (field << 3) | mant | np.where(sign, 0x80, 0)
    assert np.array_equal(np.abs(E4M3_VALUE[code]), r)  # the code decodes back to the rounded value
    return code.astype(np.int64)


def e4m3_round_self_check():
    # ties to even: 1 + 1/16 lies halfway between 1 and 1.125 -> 1 (even mantissa 0)
    assert E4M3_VALUE[e4m3_encode(F32(1.0625))[()]] == 1.0
    assert E4M3_VALUE[e4m3_encode(F32(1.1875))[()]] == 1.25  # between 1.125 (odd) and 1.25 (even)
    assert E4M3_VALUE[e4m3_encode(F32(3 * 2.0 ** -10))[()]] == 2 * 2.0 ** -9  # subnormal tie: 1.5 q -> 2 q
    assert E4M3_VALUE[e4m3_encode(F32(2.0 ** -10))[()]] == 0.0  # half the smallest subnormal -> 0 (even)
    assert e4m3_encode(F32(-2.0 ** -11))[()] == 0x80 and e4m3_encode(F32(-0.0))[()] == 0x80  # negative, rounds to -0
    assert e4m3_encode(F32(464.0))[()] == 0x7E and e4m3_encode(F32(-1e30))[()] == 0xFE  # saturation
    assert e4m3_encode(F32(240.0))[()] == 0x77 and e4m3_encode(F32(232.0))[()] == 0x76  # 232: tie 224|240 -> 224


e4m3_round_self_check()
