"""FBGEMM's fused 8-bit row-wise quantization, TorchRec's INT8 communication codec on a GPU, emulated
independently in numpy from FBGEMM's CUDA kernel (pytorch/FBGEMM at 71d6f8b,
fbgemm_gpu/src/quantize_ops/quantize_fused_8bit_rowwise.cu; docs/SOURCES.md section 6.1) and compared
bit for bit with qtransit's built-in format `fbgemm-int8-rowwise`: every scale, bias, code and decoded
value. Written from that kernel's description, not from qtransit's C++ sources.

Per row (qtransit's block) of binary32 values, every rounding an explicit binary32 operation:

  bias    mn = min x, mx = max x (exact)
  range   fl32(mx - mn)
  scale   s = fl32(range / 255)                       (stored)
  inverse inv = fl32(255 / fl32(range + 1e-20))       (the GPU's epsilon; the CPU's is 1e-8)
  code    q = lrintf(fl32(fl32(x - mn) * inv))        (round half to even; never past 255)
  decode  fl32(q * s + mn), one rounding: nvcc contracts it to an FMA by default (--fmad=true; not
          confirmed from SASS). numpy has no FMA, so the emulation rounds the exact rational once.

A two-roundings decode and the CPU's epsilon are checked to differ (the comparison can fail).
"""

from fractions import Fraction

import numpy as np
import pytest

import qtransit

F32 = np.float32
NAME = "fbgemm-int8-rowwise"


def round_once(v):
    """The binary32 nearest to the rational v, ties to even (v inside binary32's finite range)."""
    guess = F32(float(v))  # within an ulp of the answer
    best = None
    for c in (np.nextafter(guess, F32(-np.inf)), guess, np.nextafter(guess, F32(np.inf))):
        key = (abs(Fraction(float(c)) - v), int(np.array(c).view(np.uint32)) & 1)
        if best is None or key < best[0]:
            best = (key, c)
    return best[1]


def emulate(x, row, *, eps=F32(1e-20), fused=True):
    rows = x.reshape(-1, row).astype(F32)
    mn = rows.min(axis=1)
    mx = rows.max(axis=1)
    rng = (mx - mn).astype(F32)
    s = (rng / F32(255)).astype(F32)
    inv = (F32(255) / (rng + eps).astype(F32)).astype(F32)
    w = (rows - mn[:, None]).astype(F32)
    q = np.rint((w * inv[:, None]).astype(F32)).astype(np.int64)  # numpy's rint: half to even
    assert q.min() >= 0 and q.max() <= 255
    y = np.empty(rows.shape, dtype=F32)
    for r in range(rows.shape[0]):
        for j in range(row):
            if fused:
                y[r, j] = round_once(Fraction(int(q[r, j])) * Fraction(float(s[r])) + Fraction(float(mn[r])))
            else:
                y[r, j] = F32(F32(F32(q[r, j]) * s[r]) + mn[r])
    return s, mn, q.reshape(-1), y.reshape(-1)


def run(x, row):
    r = qtransit.quantize(NAME, x, block=row)
    assert r.passed, r.first_failure
    return (np.asarray(r.scales, dtype=F32).reshape(-1), np.asarray(r.offsets, dtype=F32).reshape(-1),
            np.asarray(r.codes).reshape(-1).astype(np.int64), np.asarray(r.decoded, dtype=F32).reshape(-1))


def differences(x, row, **kw):
    ours = emulate(x, row, **kw)
    theirs = run(x, row)
    out = []
    for what, a, b in zip(("scales", "offsets", "codes", "decoded"), ours, theirs):
        bad = np.flatnonzero(a.view(np.uint32) != b.view(np.uint32)) if a.dtype == F32 else np.flatnonzero(a != b)
        if bad.size:
            out.append(f"{what} at {bad[:6].tolist()}: emulation {a[bad[:6]].tolist()}, qtransit {b[bad[:6]].tolist()}")
    return out


def small_ranges(rng, n, row):
    """Rows whose range sits around the epsilon (1e-21 .. 1e-17) and around the scale's zero (A 2^-150)."""
    rows = []
    for i in range(n // row):
        r = 10.0 ** rng.uniform(-21, -17) if i % 4 else 255 * 2.0**-150 * rng.uniform(0.5, 2.0)
        base = rng.normal() * (1 if i % 3 else 0)
        rows.append((base + rng.uniform(0, r, row)).astype(F32))
    return np.concatenate(rows)


INPUTS = {
    "normal": lambda rng, n, row: rng.standard_normal(n).astype(F32),
    "offset": lambda rng, n, row: (rng.standard_normal(n) * 0.01 + 3).astype(F32),
    "heavy": lambda rng, n, row: rng.standard_cauchy(n).astype(F32),
    "small-ranges": small_ranges,
}


@pytest.mark.parametrize("row", [32, 7, 128])
@pytest.mark.parametrize("kind", list(INPUTS))
def test_matches_fbgemm_cuda_kernel(kind, row):
    n = row * 48
    x = INPUTS[kind](np.random.default_rng(8100 + 7 * list(INPUTS).index(kind) + row), n, row)
    x = np.where(np.isfinite(x), x, F32(1)).astype(F32)
    assert not differences(x, row)


def test_a_wrong_emulation_is_caught():
    rng = np.random.default_rng(5)
    x = rng.standard_normal(32 * 64).astype(F32)
    assert any(d.startswith("decoded") for d in differences(x, 32, fused=False))  # two roundings
    assert any(d.startswith("codes") for d in differences(small_ranges(rng, 32 * 64, 32), 32, eps=F32(1e-8)))  # the CPU's eps


def test_zero_decodes_off_zero():
    # -1, 2 and a zero: range 3, s = fl32(3/255), the zero's code 85 decodes to fl32(85 s - 1) = 1.3125 2^-26 (not 0).
    x = np.zeros(32, dtype=F32)
    x[0], x[1] = -1, 2
    _, _, q, y = run(x, 32)
    assert q[5] == 85 and y[5] != 0 and int(np.array(y[5]).view(np.uint32)) == 0x32A80000
    assert not differences(x, 32)
