"""qtransit's 2-D tiled block formats emulated independently in numpy from their definitions, and
compared bit for bit with qtransit: every code, every scale (as binary32 bits), every decoded value
(as binary32 bits), and for nvfp4-2d also the tensor amax and every tile's E4M3 scale byte. Written from
the formats' definitions (DeepGEMM's per_block_cast_to_fp8 and docs/SOURCES.md section 5, Transformer
Engine's NVFP4 with 16x16 weight tiles, 5.1-5.5), not from qtransit's C++ sources.

A tiled format quantizes a 2-D binary32 tensor x of shape [R, C] (a tensor of more dims is taken as
[prod(leading dims), last dim]) in tiles of r x c elements: tile (i, j) covers rows i r .. i r + r - 1
and columns j c .. j c + c - 1, R a multiple of r and C of c (else ValueError). Each tile gets one
scale from its absmax, and every element of the tile is coded with it. Scales are listed in tile
order t = i (C / c) + j; codes and decoded values have x's shape.

fl32(.) is one binary32 rounding to nearest even: every step below is one numpy binary32 operation.
E4M3 is OCP e4m3fn (bias 7, 3 mantissa bits, subnormals m 2^-9, max 448, NaN only at 0x7F/0xFF),
rounded to nearest even by comparing with the exact midpoints of its grid, saturating at +-448; its
code is the raw byte, sign bit 0x80 (taken from the rounded value's sign bit, so -0.0 and negatives
that round to 0 give 0x80).

  fp8-e4m3-128x128         (DeepGEMM per_block_cast_to_fp8, use_ue8m0=False) per 128x128 tile:
                           a = max |x|, a' = max(a, fl32(1e-4)), m = fl32(448 / a'), s = fl32(a' / 448),
                           code = E4M3(fl32(x m)), decoded = fl32(value(code) s); scale = s
  fp8-e4m3-128x128-ue8m0   (use_ue8m0=True) sf = fl32(a' / 448) rounded up to a power of two from its
                           bits (the exponent field, plus one if any mantissa bit is set), m = 1 / sf
                           (exact), code = E4M3(fl32(x m)), decoded = fl32(value(code) sf); scale = sf
  nvfp4-2d                 TE's NVFP4 (RN) with 16x16 tiles: T = max |x| over the whole tensor,
                           S_enc = 1 if T == 0 else min(fl32(2688 / T), FLT_MAX) (1 if that is 0),
                           S_dec = fl32(1 / S_enc), a_b = the tile's absmax,
                           s_b = E4M3(fl32(a_b fl32(S_enc c6))), c6 = fl32(1/6),
                           r_b = min(fl32(1 / fl32(s_b S_dec)), FLT_MAX),
                           code = E2M1(fl32(x r_b)) (nearest even onto {0,.5,1,1.5,2,3,4,6}, saturating;
                           sign bit 8), f_b = fl32(fl32(s_b T) c2688), c2688 = fl32(1/2688),
                           decoded = fl32(value(code) f_b); scale = f_b, e4m3_scale_bytes = s_b's byte

Wrong variants are compared with qtransit too, so the comparison can fail: (a) row-wise 1 x c blocks
instead of r x c tiles, (b) tiles listed column-major, (c) for fp8-e4m3-128x128 the multiplier
fl32(1 / s) in place of fl32(448 / a').
"""

import numpy as np
import pytest
from grids_by_hand import E2M1_GRID, E4M3_GRID, nearest_even

F32 = np.float32
FLT_MAX = np.finfo(F32).max
FLOOR = F32(1e-4)  # DeepGEMM's clamp(1e-4) on a binary32 amax
A448 = F32(448)
C6 = F32(1) / F32(6)  # fl32(1/6) = 11184811 2^-26
C2688 = F32(1) / F32(2688)  # fl32(1/2688) = 12782641 2^-35

# name -> (tile rows, tile cols, rule)
FORMATS = {
    "fp8-e4m3-128x128": (128, 128, "deepgemm"),
    "fp8-e4m3-128x128-ue8m0": (128, 128, "ue8m0"),
    "nvfp4-2d": (16, 16, "nvfp4"),
}
FP8 = ("fp8-e4m3-128x128", "fp8-e4m3-128x128-ue8m0")


def fields(name):
    base = ("scales", "codes", "decoded")
    return ("tensor_amax", "e4m3_bytes") + base if FORMATS[name][2] == "nvfp4" else base


# ---------------------------------------------------------------------------------------------
# the two grids


# e4m3_value, E4M3_GRID, E2M1_GRID and nearest_even: grids_by_hand.py (shared with the other emulation).


def e4m3_signed(v):
    """E4M3 RNE, saturating at +-448, of binary32 values v: (raw byte with sign bit 0x80, value as binary32)."""
    v = np.asarray(v, F32)
    neg = np.signbit(v)
    mag = nearest_even(np.abs(v).astype(np.float64), E4M3_GRID)
    code = np.where(neg, 0x80, 0) | mag
    value = np.where(neg, -E4M3_GRID[mag], E4M3_GRID[mag]).astype(F32)  # -0.0 for 0x80
    return code.astype(np.int64), value


def e4m3_unsigned(v):
    """E4M3 RNE with saturation of binary32 values v >= 0: (byte, value as binary32)."""
    byte = nearest_even(np.asarray(v, F32).astype(np.float64), E4M3_GRID)
    return byte, E4M3_GRID[byte].astype(F32)


# ---------------------------------------------------------------------------------------------
# tiles


def tiled(x, r, c):
    """[R, C] -> [R / r, C / c, r, c]: tile (i, j) at [i, j]."""
    R, C = x.shape
    assert R % r == 0 and C % c == 0
    return x.reshape(R // r, r, C // c, c).transpose(0, 2, 1, 3)


def tile_amax(x, r, c):
    return np.abs(tiled(x, r, c)).max(axis=(2, 3))  # binary32, [R / r, C / c]


def spread(per_tile, r, c):
    """[R / r, C / c] -> [R, C]: each tile's value on each of its elements."""
    return np.repeat(np.repeat(per_tile, r, axis=0), c, axis=1)


def in_order(per_tile, order):
    """One value per tile, flat: row-major tile order (t = i (C / c) + j), or column-major (a wrong variant)."""
    return (per_tile if order == "row" else per_tile.T).reshape(-1)


# ---------------------------------------------------------------------------------------------
# the quantization


def emulate(name, x, *, tile=None, order="row", multiplier="exact"):
    """The format `name` on the 2-D binary32 x. Returns a dict with fields(name) (scales and
    e4m3_bytes flat in tile order, codes and decoded with x's shape) and intermediates: m (the
    per-tile multiplier, [R / r, C / c]), y (the scaled values) and for nvfp4-2d v (a_b fl32(S_enc c6))
    and s_enc. Wrong variants: tile=(1, c) row-wise blocks; order="col" column-major tile order;
    multiplier="inv-s" (fp8-e4m3-128x128: m = fl32(1 / s))."""
    x = np.asarray(x, F32)
    assert x.ndim == 2 and np.all(np.isfinite(x))
    r, c, rule = FORMATS[name]
    if tile is not None:
        r, c = tile
    out = {}
    with np.errstate(over="ignore", divide="ignore", under="ignore"):
        a = tile_amax(x, r, c)
        if rule in ("deepgemm", "ue8m0"):
            ap = np.maximum(a, FLOOR)  # a' (binary32)
            t = ap / A448  # fl32(a' / 448)
            if rule == "deepgemm":
                s = t
                m = A448 / ap if multiplier == "exact" else F32(1) / s
            else:
                bits = t.view(np.uint32).astype(np.int64)
                field = (bits >> 23) & 0xFF
                assert np.all(field > 0), "a' / 448 is normal: a' >= 1e-4"
                e = field + ((bits & 0x7FFFFF) != 0)  # the biased exponent of the power of two at or above t
                assert np.all(e <= 253)
                s = (e << 23).astype(np.uint32).view(F32)  # 2^(e - 127)
                m = ((254 - e) << 23).astype(np.uint32).view(F32)  # 2^(127 - e) = 1 / s, exact
                assert np.all(s.astype(np.float64) * m.astype(np.float64) == 1.0)
                assert np.all(s >= t) and np.all(s.astype(np.float64) < 2 * t.astype(np.float64))
            y = x * spread(m, r, c)
            codes, value = e4m3_signed(y)
            decoded = value * spread(s, r, c)
            out.update(scales=in_order(s, order).astype(F32))
        else:
            tamax = np.abs(x).max()
            if tamax == 0:
                s_enc = F32(1)
            else:
                s_enc = np.minimum(F32(2688) / tamax, FLT_MAX)
                if s_enc == 0:
                    s_enc = F32(1)
            s_dec = F32(1) / s_enc
            v = a * (s_enc * C6)  # fl32(S_enc c6) first, then times a_b
            byte, s_b = e4m3_unsigned(v)
            m = np.minimum(F32(1) / (s_b * s_dec), FLT_MAX)  # s_b = 0: 1/0 = inf -> FLT_MAX
            y = x * spread(m, r, c)  # x * FLT_MAX may overflow to +-inf: saturates to +-6
            neg = np.signbit(y)
            mag = nearest_even(np.abs(y).astype(np.float64), E2M1_GRID)
            codes = (np.where(neg, 8, 0) | mag).astype(np.int64)
            f = (s_b * tamax) * C2688
            value = np.where(neg, -E2M1_GRID[mag], E2M1_GRID[mag]).astype(F32)
            decoded = value * spread(f, r, c)
            out.update(tensor_amax=tamax, e4m3_bytes=in_order(byte, order), scales=in_order(f, order).astype(F32),
                       v=v, s_enc=s_enc)
    out.update(codes=codes.astype(np.int64), decoded=decoded.astype(F32), m=m, y=y)
    assert out["decoded"].shape == x.shape and out["codes"].shape == x.shape
    return out


# ---------------------------------------------------------------------------------------------
# qtransit and the comparison

_KNOWN = None


def known_formats():
    import qtransit  # here, so that the emulation's own checks run without the built module

    global _KNOWN
    if _KNOWN is None:
        _KNOWN = set()
        listed = list(qtransit.formats())
        for block in (16, 256, 16384):  # formats(block): the formats usable at that block
            try:
                listed += qtransit.formats(block)
            except ValueError:
                pass
        for f in listed:
            for attr in ("format", "name"):
                if isinstance(getattr(f, attr, None), str):
                    _KNOWN.add(getattr(f, attr))
    return _KNOWN


def run(name, x, **kw):
    """qtransit's `name` on x, as fields(name) (codes and decoded with x's shape). The format is
    expected to exist: a missing one fails."""
    import qtransit

    if name not in known_formats():
        pytest.fail(f"format {name!r} is not known to the installed qtransit ({', '.join(sorted(known_formats()))})",
                    pytrace=False)
    x = np.asarray(x, F32)
    r = qtransit.quantize(name, x, **kw)
    assert r.passed, r.first_failure
    out = {"scales": np.asarray(r.scales).astype(F32).reshape(-1),
           "codes": np.asarray(r.codes).astype(np.int64),
           "decoded": np.asarray(r.decoded, dtype=F32)}
    if FORMATS[name][2] == "nvfp4":
        out["tensor_amax"] = F32(float(r.tensor_amax))
        out["e4m3_bytes"] = np.asarray(r["e4m3_scale_bytes"], dtype=np.int64).reshape(-1)
    return out


def compare(name, ours, theirs):
    """Every difference (bit for bit) between two results, as readable lines; [] when equal."""
    out = []
    for what in fields(name):
        a, b = np.atleast_1d(ours[what]), np.atleast_1d(theirs[what])
        if a.shape != b.shape:
            out.append(f"{what}: shape {a.shape} (emulation) vs {b.shape} (qtransit)")
            continue
        if a.dtype == F32:
            bad = np.argwhere(a.view(np.uint32) != b.view(np.uint32))
        else:
            bad = np.argwhere(a != b)
        if bad.size:
            at = [tuple(int(i) for i in ix) for ix in bad[:6]]
            where = "tiles" if what in ("e4m3_bytes", "scales", "tensor_amax") else "elements (row, col)"
            out.append(f"{what} at {where} {at} ({len(bad)} in all): emulation "
                       f"{[a[ix].item() for ix in at]}, qtransit {[b[ix].item() for ix in at]}")
    return out


def differences(name, x, **kw):
    return compare(name, emulate(name, x, **kw), run(name, x))


# ---------------------------------------------------------------------------------------------
# inputs: each returns an [R, C] binary32 array, for the tile (r, c)


def normal(rng, shape, tile):
    return rng.standard_normal(shape).astype(F32)


def heavy(rng, shape, tile):
    x = rng.standard_cauchy(shape).astype(F32)
    return np.where(np.isfinite(x), x, F32(1)).astype(F32)


def per_tile(x, tile, factors):
    """x with tile t (row-major order) multiplied by factors[t]."""
    r, c = tile
    R, C = x.shape
    f = np.asarray(factors, np.float64).reshape(R // r, C // c)
    return (x * spread(f, r, c)).astype(F32)


def magnitudes(rng, shape, tile):
    """Tile t multiplied by 10^k, k running through a shuffled -6 .. 6 (repeated): tiles far apart
    (for the FP8 formats the 1e-6 tiles sit below the amax floor; for nvfp4-2d the small tiles get
    s_b = 0 or an E4M3 subnormal)."""
    r, c = tile
    n = (shape[0] // r) * (shape[1] // c)
    ks = np.resize(rng.permutation(np.arange(-6, 7)), n)
    return per_tile(rng.standard_normal(shape), tile, 10.0 ** ks)


def zero_tile(rng, shape, tile):
    """Normal values, but tile n // 2 all zero, +0 and -0 mixed (the whole tensor when there is one tile)."""
    r, c = tile
    x = rng.standard_normal(shape)
    n = (shape[0] // r) * (shape[1] // c)
    i, j = divmod(n // 2, shape[1] // c)
    x[i * r:(i + 1) * r, j * c:(j + 1) * c] = np.where(rng.random((r, c)) < 0.5, -0.0, 0.0)
    return x.astype(F32)


def tiny(rng, shape, tile):
    """Every other tile (tile 0 among them) of values below 1e-4 (|x| < 0.9e-4, mostly ~1e-6): for
    the FP8 formats a' is the floor fl32(1e-4) there."""
    r, c = tile
    n = (shape[0] // r) * (shape[1] // c)
    x = rng.standard_normal(shape)
    small = np.clip(rng.standard_normal(shape) * 1e-6 * 10.0 ** rng.uniform(-3, 1.5, shape), -0.9e-4, 0.9e-4)
    mask = spread((np.arange(n) % 2 == 0).reshape(shape[0] // r, shape[1] // c), r, c)
    return np.where(mask, small, x).astype(F32)


def saturating(rng, shape, tile):
    """T = 6 (one element -6, in tile n // 2) over values in (-6, 6) spread over tiles by factors 10^-4
    .. 1: the tile holding T has v = fl32(6 fl32(448 c6)) = 14680065 2^-15 = 448.0000305 > 448, so its
    s_b saturates to 448 (byte 0x7E)."""
    r, c = tile
    n = (shape[0] // r) * (shape[1] // c)
    x = per_tile(rng.uniform(-5.9, 5.9, shape), tile, 10.0 ** np.resize(rng.permutation(np.arange(-4, 1)), n))
    i, j = divmod(n // 2, shape[1] // c)
    x[i * r + rng.integers(r), j * c + rng.integers(c)] = -6.0
    return x.astype(F32)


def row_magnitudes(rng, shape, tile):
    """Row k multiplied by 10^((k mod 7) - 3): every tile holds rows of very different magnitudes,
    where row-wise 1 x c blocks would scale each row on its own."""
    f = 10.0 ** ((np.arange(shape[0]) % 7) - 3)
    return (rng.standard_normal(shape) * f[:, None]).astype(F32)


INPUTS = {
    "normal": normal,
    "heavy": heavy,
    "magnitudes": magnitudes,
    "zero-tile": zero_tile,
    "tiny": tiny,
    "saturating": saturating,
    "row-magnitudes": row_magnitudes,
}
INPUTS_FOR = {
    "deepgemm": ("normal", "heavy", "magnitudes", "zero-tile", "tiny", "row-magnitudes"),
    "ue8m0": ("normal", "heavy", "magnitudes", "zero-tile", "tiny", "row-magnitudes"),
    "nvfp4": ("normal", "heavy", "magnitudes", "zero-tile", "saturating", "row-magnitudes"),
}
SHAPES = {
    "deepgemm": ((128, 128), (256, 384), (384, 128)),
    "ue8m0": ((128, 128), (256, 384), (384, 128)),
    "nvfp4": ((16, 16), (32, 48), (64, 256)),
}
CASES = [(name, kind, shape) for name, (_, _, rule) in FORMATS.items()
         for kind in INPUTS_FOR[rule] for shape in SHAPES[rule]]


def make(name, kind, shape):
    r, c, rule = FORMATS[name]
    seed = 9100 + 31 * list(INPUTS).index(kind) + shape[0] + 7 * shape[1] + (r == 16)
    x = INPUTS[kind](np.random.default_rng(seed), shape, (r, c))
    assert x.dtype == F32 and x.shape == shape and np.all(np.isfinite(x))
    return x


# ---------------------------------------------------------------------------------------------
# hand-derived goldens
#
# nvfp4-2d on a 16 x 32 tensor: two 16x16 tiles (tile 0: columns 0..15, tile 1: columns 16..31).
# T = 6 (x[5, 3]): S_enc = fl32(2688/6) = 448 (exact); S_dec = fl32(1/448) = 9586981 2^-32
# (2^26/7 = 9586980.57); c6 = 11184811 2^-26, S_enc c6 = 448 * 11184811 2^-26 = 78293677 2^-20 (27 bits):
# fl32 = 9786710 2^-17 (78293677/8 = 9786709.625) = 74.66667175. c2688 = 12782641 2^-35.
#
# tile 0, a_b = 6 (its row 0 alone has absmax 3: 1x16 row blocks would scale row 0 differently):
#   v = fl32(6 * 9786710 2^-17) = 14680065 2^-15 = 448.0000305 > 448: s_b = 448 (byte 0x7E = 126).
#   s_b S_dec = 7 * 9586981 2^-26 = 67108867 2^-26 = 1 + 3 2^-26 -> fl32 = 1, r_b = 1, y = x:
#   x[5,3] = 6 -> 6: code 7; x[0,0] = 3 -> code 5; x[0,1] = -1.5 -> 8|3 = 11; x[1,0] = 0.25 (tie 0/0.5)
#   -> 0: code 0; x[2,7] = 5 (tie 4/6) -> 4: 6; x[3,15] = -3.5 (tie 3/4) -> -4: 14; x[15,15] = 0.3 -> 0.5: 1;
#   x[10,2] = -0.0 -> 8; x[12,9] = 2.5 (tie 2/3) -> 2: 4; x[6,6] = 0.75 (tie 0.5/1) -> 1: 2;
#   x[7,8] = 1.75 (tie 1.5/2) -> 2: 4; x[8,1] = -0.7 -> -0.5: 9; every other element 0 -> 0.
#   f_0 = fl32(fl32(448 * 6) * c2688) = fl32(2688 * 12782641 2^-35) = fl32(1 + 5 2^-28) = 1:
#   decoded = the E2M1 values (6, 3, -1.5, 0, 4, -4, 0.5, -0.0, 2, 1, 2, -0.5).
# tile 1, a_b = 1 (x[9, 20]): v = 9786710 2^-17 = 74.67, E4M3 neighbours 72 and 80: s_b = 72 (byte 105).
#   s_b S_dec = 9 * 9586981 2^-29 = 86282829 2^-29 -> 10785354 2^-26 (86282829/8 = 10785353.625);
#   r_b = fl32(2^26 / 10785354) = 13048945 2^-21 (2^47/10785354 = 13048944.74) = 6.2222223.
#   x[9,20] = 1 -> y 6.22 -> 6: code 7; x[0,16] = -0.5 -> -3.11 -> -3: 13;
#   x[4,31] = 3370423 2^-22 -> 3370423 * 13048945 2^-43 = 5 - 757305 2^-43 -> fl32 = 5 (half an ulp of 5
#     is 2097152 2^-43): a tie 4/6, to 4: code 6;
#   x[15,16] = -16178031 2^-27 -> -(0.75 + 4194303 2^-48) -> fl32 = -0.75 (half an ulp is 8388608 2^-48):
#     a tie, to -1: code 10;
#   x[7,25] = 0.2 -> 1.244 -> 1: 2; x[8,18] = 0.04 -> 0.249 -> 0: 0; x[14,30] = 0.75 -> 4.667 -> 4: 6;
#   x[2,17] = -0.0 -> 8; the rest 0 -> 0.
#   f_1 = fl32(fl32(72 * 6) * c2688) = fl32(432 * 12782641 2^-35) = fl32(345131307 2^-31) = 10785353 2^-26
#   (345131307/32 = 10785353.34), one ulp below fl32(s_b S_dec).
#   decoded: 6 f_1 = fl32(64712118 2^-26) = 16178029.5 2^-24 -> tie, to even 16178030 2^-24;
#   -3 f_1 = -16178029.5 2^-25 -> -16178030 2^-25 = -8089015 2^-24; 4 f_1 = 10785353 2^-24;
#   -1 f_1 = -10785353 2^-26; 1 f_1 = 10785353 2^-26; code 0 -> +0; code 8 -> -0.0.

NV_X = np.zeros((16, 32), F32)
NV_CODES = np.zeros((16, 32), np.int64)
NV_DEC = np.zeros((16, 32), F32)
F1 = 10785353 * 2.0**-26
for (i, j), xv, code, dv in [
    ((5, 3), 6.0, 7, 6.0), ((0, 0), 3.0, 5, 3.0), ((0, 1), -1.5, 11, -1.5), ((1, 0), 0.25, 0, 0.0),
    ((2, 7), 5.0, 6, 4.0), ((3, 15), -3.5, 14, -4.0), ((15, 15), 0.3, 1, 0.5), ((10, 2), -0.0, 8, -0.0),
    ((12, 9), 2.5, 4, 2.0), ((6, 6), 0.75, 2, 1.0), ((7, 8), 1.75, 4, 2.0), ((8, 1), -0.7, 9, -0.5),
    ((9, 20), 1.0, 7, 16178030 * 2.0**-24), ((0, 16), -0.5, 13, -8089015 * 2.0**-24),
    ((4, 31), 3370423 * 2.0**-22, 6, 10785353 * 2.0**-24), ((15, 16), -16178031 * 2.0**-27, 10, -F1),
    ((7, 25), 0.2, 2, F1), ((8, 18), 0.04, 0, 0.0), ((14, 30), 0.75, 6, 10785353 * 2.0**-24),
    ((2, 17), -0.0, 8, -0.0),
]:
    NV_X[i, j], NV_CODES[i, j], NV_DEC[i, j] = xv, code, dv
NV_GOLDEN = {"tensor_amax": F32(6), "e4m3_bytes": np.array([126, 105]), "scales": np.array([1.0, F1], F32),
             "codes": NV_CODES, "decoded": NV_DEC}
NV_GOLDEN_R = np.array([[1.0, 13048945 * 2.0**-21]], F32)

# fp8 on a 128 x 256 tensor: two 128x128 tiles.
# tile 0 (columns 0..127), a = 56 (x[0,0] = -56): a' = 56, m = fl32(448/56) = 8, s = fl32(56/448) = 0.125;
#   ue8m0: 0.125 is a power of two, so sf = 0.125, m = 8 as well. The same codes in both formats:
#   x[0,0] = -56 -> y = -448: byte 0x7E | 0x80 = 0xFE (254), decoded -56;
#   x[1,0] = fl32(0.1) = 13421773 2^-27 -> y = 13421773 2^-24 = 0.80000001 (x 8 is exact); E4M3 spacing in
#     [0.5, 1) is 2^-4: 0.75 / 0.8125, 0.8 - 0.75 > 2^-5 -> 0.8125 = 1.625 2^-1 (e 6, m 5): byte 0x35 (53),
#     decoded 0.8125 * 0.125 = 0.1015625;
#   x[2,5] = 0.1328125 -> y = 1.0625, a tie 1 / 1.125 -> 1 (even mantissa): byte 0x38 (56), decoded 0.125;
#   x[127,127] = -3 2^-13 -> y = -3 2^-10, a subnormal tie 2^-9 / 2 2^-9 -> 2 2^-9 (even): byte 0x82 (130),
#     decoded -2^-11;
#   x[64,64] = -1e-9 -> y = -8e-9, rounds to -0: byte 0x80 (128), decoded -0.0; every other 0 -> 0, +0.
# tile 1 (columns 128..255), a = 100 (x[10,200]):
#   fp8-e4m3-128x128: m = fl32(448/100) = 9395241 2^-21 (4.48 2^21 = 9395240.96) = 4.48000002;
#     s = fl32(100/448) = fl32(25/112) = 14979657 2^-26 (25 2^26/112 = 14979657.14) = 0.22321428.
#     x = 100 -> 939524100 2^-21 = 14680064.06 2^-15 -> fl32 = 448: byte 0x7E (126);
#       decoded fl32(448 * 14979657 2^-26) = fl32(104857599 2^-20) = 13107200 2^-17 = 100 (104857599/8 = 13107199.875);
#     x[11,130] = 1 -> y = 4.48000002: E4M3 spacing 0.5 in [4, 8) -> 4.5 (e 9, m 1): byte 0x49 (73);
#       decoded fl32(4.5 * 14979657 2^-26) = fl32(8426057.0625 2^-23) = 8426057 2^-23 = 1.0044642687;
#     x[12,131] = fl32(-0.3) = -10066330 2^-25 -> y = fl32(-10066330 * 9395241 2^-46) = -5637145 2^-22 =
#       -1.3440001: spacing 0.125 in [1, 2): 1.25 / 1.375, above the midpoint 1.3125 -> -1.375 (e 7, m 3):
#       byte 0xBB (187); decoded -fl32(11 * 14979657 2^-29) = -fl32(164776227 2^-29) = -10298514 2^-25
#       (164776227/16 = 10298514.19) = -0.30691856.
#   fp8-e4m3-128x128-ue8m0: fl32(100/448) = 0.2232 (mantissa bits set) -> sf = 0.25, m = 4:
#     x = 100 -> y = 400, a tie 384 / 416 -> 384 = 1.5 2^8 (e 15, m 4, even): byte 0x7C (124), decoded 96;
#     x = 1 -> y = 4: byte 0x48 (72), decoded 1;
#     x = -0.3 -> y = -10066330 2^-23 = -1.2000000477 -> -1.25 (e 7, m 2): byte 0xBA (186), decoded -0.3125.

FP8_X = np.zeros((128, 256), F32)
for (i, j), xv in [((0, 0), -56.0), ((1, 0), 0.1), ((2, 5), 0.1328125), ((127, 127), -3 * 2.0**-13),
                   ((64, 64), -1e-9), ((10, 200), 100.0), ((11, 130), 1.0), ((12, 131), -0.3)]:
    FP8_X[i, j] = xv
FP8_GOLDEN = {}
for name, tile1, s1 in [
    ("fp8-e4m3-128x128", [(126, 100.0), (73, 8426057 * 2.0**-23), (187, -10298514 * 2.0**-25)], 14979657 * 2.0**-26),
    ("fp8-e4m3-128x128-ue8m0", [(124, 96.0), (72, 1.0), (186, -0.3125)], 0.25),
]:
    codes, dec = np.zeros((128, 256), np.int64), np.zeros((128, 256), F32)
    for (i, j), code, dv in zip([(0, 0), (1, 0), (2, 5), (127, 127), (64, 64), (10, 200), (11, 130), (12, 131)],
                                [254, 53, 56, 130, 128] + [t[0] for t in tile1],
                                [-56.0, 0.1015625, 0.125, -2.0**-11, -0.0] + [t[1] for t in tile1]):
        codes[i, j], dec[i, j] = code, dv
    FP8_GOLDEN[name] = {"scales": np.array([0.125, s1], F32), "codes": codes, "decoded": dec}


# ---------------------------------------------------------------------------------------------
# the emulation's own checks (no qtransit needed)


def test_grids():
    assert E4M3_GRID.size == 127 and np.all(np.diff(E4M3_GRID) > 0)
    assert E4M3_GRID[0x7E] == 448 and E4M3_GRID[1] == 2.0**-9 and E4M3_GRID[8] == 2.0**-6
    assert int(np.array(C6).view(np.uint32)) == 0x3E2AAAAB and float(C2688) == 12782641 * 2.0**-35
    v = np.array([1.0625, 1.1875, 3 * 2.0**-10, 2.0**-10, -2.0**-11, -0.0, 400.0, 432.0, 448.00003, -1e30, 240.0, 232.0], F32)
    codes, vals = e4m3_signed(v)
    assert codes.tolist() == [0x38, 0x3A, 0x02, 0x00, 0x80, 0x80, 0x7C, 0x7E, 0x7E, 0xFE, 0x77, 0x76]
    assert np.array_equal(vals.astype(np.float64), [1.0, 1.25, 2 * 2.0**-9, 0, -0.0, -0.0, 384, 448, 448, -448, 240, 224])
    assert np.signbit(vals[4]) and np.signbit(vals[5])
    y = np.array([0.25, 0.2500001, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 5.0000005, 6.5, 1e38, np.inf])
    assert np.array_equal(E2M1_GRID[nearest_even(y, E2M1_GRID)], [0, 0.5, 1, 1, 2, 2, 4, 4, 6, 6, 6, 6])


def test_e4m3_rounding_matches_ml_dtypes():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    rng = np.random.default_rng(3)
    mids = ((E4M3_GRID[:-1] + E4M3_GRID[1:]) / 2).astype(F32)
    v = np.concatenate([E4M3_GRID.astype(F32), mids, np.nextafter(mids, F32(0)), np.nextafter(mids, F32(np.inf)),
                        (2.0 ** rng.uniform(-14, np.log2(448), 20000)).astype(F32), np.array([0, 2.0**-12], F32)])
    v = v[v <= 448]
    v = np.concatenate([v, -v]).astype(F32)
    codes, vals = e4m3_signed(v)
    theirs = v.astype(ml_dtypes.float8_e4m3fn)
    assert np.array_equal(codes, theirs.view(np.uint8).astype(np.int64))
    assert np.array_equal(vals.view(np.uint32), theirs.astype(F32).view(np.uint32))


def test_tiles_and_order():
    x = np.arange(32 * 48, dtype=F32).reshape(32, 48)
    a = tile_amax(x, 16, 16)
    assert a.shape == (2, 3) and a.tolist() == [[15 * 48 + 15, 15 * 48 + 31, 15 * 48 + 47],
                                                [31 * 48 + 15, 31 * 48 + 31, 31 * 48 + 47]]
    assert in_order(a, "row").tolist() == [a[0, 0], a[0, 1], a[0, 2], a[1, 0], a[1, 1], a[1, 2]]
    assert in_order(a, "col").tolist() == [a[0, 0], a[1, 0], a[0, 1], a[1, 1], a[0, 2], a[1, 2]]
    assert np.array_equal(spread(a, 16, 16)[17, 20], a[1, 1])


def test_emulation_gives_the_hand_goldens():
    ours = emulate("nvfp4-2d", NV_X)
    assert not compare("nvfp4-2d", ours, NV_GOLDEN)
    assert np.array_equal(ours["m"], NV_GOLDEN_R)
    assert float(ours["v"][0, 0]) == 14680065 * 2.0**-15 > 448
    assert ours["y"][4, 31] == 5 and ours["y"][15, 16] == -0.75  # the two exact ties of tile 1
    # 1x16 row blocks give row 0 of tile 0 its own scale (absmax 3): other codes there
    row = emulate("nvfp4-2d", NV_X, tile=(1, 16))
    assert row["codes"][0, 0] != NV_CODES[0, 0] and row["scales"].size == 32
    for name, golden in FP8_GOLDEN.items():
        ours = emulate(name, FP8_X)
        assert not compare(name, ours, golden), name
    assert float(emulate("fp8-e4m3-128x128", FP8_X)["m"][0, 1]) == 9395241 * 2.0**-21
    assert emulate("fp8-e4m3-128x128", FP8_X)["y"][11, 130] == F32(9395241 * 2.0**-21)


@pytest.mark.parametrize("name,kind,shape", CASES)
def test_inputs_reach_their_cases(name, kind, shape):
    """Each input kind exercises what it is named for, so that the comparisons below cover it."""
    x = make(name, kind, shape)
    r, c, rule = FORMATS[name]
    e = emulate(name, x)
    a = tile_amax(x, r, c)
    n = a.size
    if kind == "zero-tile":
        assert (a == 0).sum() == 1 and np.signbit(x).any() and (x == 0).sum() >= r * c
        if rule != "nvfp4":
            s = e["scales"].reshape(a.shape)[a == 0]
            assert np.all(s == (FLOOR / A448 if rule == "deepgemm" else 2.0**-22))  # fl32(1e-4/448) -> 2^-22
        else:
            assert np.all(e["e4m3_bytes"].reshape(a.shape)[a == 0] == 0)
    if kind == "tiny":
        assert ((a < FLOOR).sum() == (n + 1) // 2) and (a < FLOOR)[0, 0]
    if kind == "magnitudes" and n > 1:
        assert a.max() / a.min() > 1e5
        if rule == "nvfp4" and n > 10:
            byte = e["e4m3_bytes"]
            assert (byte == 0).any() and ((byte > 0) & (byte < 8)).any() and (byte >= 8).any()
    if kind == "saturating":
        assert e["tensor_amax"] == 6 and (e["v"] > 448).sum() == 1 and e["e4m3_bytes"].max() == 126
    if kind == "row-magnitudes":
        row = emulate(name, x, tile=(1, c))
        assert (row["codes"] != e["codes"]).sum() > x.size // 10


# ---------------------------------------------------------------------------------------------
# the comparisons with qtransit


@pytest.mark.parametrize("name,kind,shape", CASES)
def test_matches_the_definition(name, kind, shape):
    assert not differences(name, make(name, kind, shape))


@pytest.mark.parametrize("name", list(FORMATS))
def test_hand_golden(name):
    x, golden = (NV_X, NV_GOLDEN) if name == "nvfp4-2d" else (FP8_X, FP8_GOLDEN[name])
    assert not compare(name, emulate(name, x), golden)
    assert not compare(name, run(name, x), golden)


@pytest.mark.parametrize("name", list(FORMATS))
def test_block_is_the_tile_area(name):
    """block left out and block = r c give the same result."""
    r, c, _ = FORMATS[name]
    x = make(name, "normal", SHAPES[FORMATS[name][2]][1])
    assert not compare(name, run(name, x), run(name, x, block=r * c))


@pytest.mark.parametrize("name,shape", [("fp8-e4m3-128x128", (2, 64, 128)), ("fp8-e4m3-128x128-ue8m0", (3, 128, 128)),
                                        ("nvfp4-2d", (3, 16, 32)), ("nvfp4-2d", (2, 2, 4, 16))])
def test_more_dims_are_rows(name, shape):
    """A tensor of more dims is quantized as [prod(leading dims), last dim]: tiles run across the
    leading dims' boundaries; codes and decoded keep the input's shape."""
    x = np.random.default_rng(len(shape) + shape[0]).standard_normal(shape).astype(F32)
    flat = x.reshape(-1, shape[-1])
    x = per_tile(flat, FORMATS[name][:2], 10.0 ** np.arange(flat.size // (FORMATS[name][0] * FORMATS[name][1]))).reshape(shape)
    theirs = run(name, x)
    assert theirs["codes"].shape == shape and theirs["decoded"].shape == shape
    theirs["codes"] = theirs["codes"].reshape(flat.shape)
    theirs["decoded"] = theirs["decoded"].reshape(flat.shape)
    assert not compare(name, emulate(name, x.reshape(flat.shape)), theirs)


@pytest.mark.parametrize("name,shape", [("fp8-e4m3-128x128", (16384,)), ("fp8-e4m3-128x128-ue8m0", (16384,)),
                                        ("nvfp4-2d", (256,)), ("nvfp4-2d", (512,))])
def test_flat_shapes_are_rejected(name, shape):
    """A tiled format needs the tensor's 2-D shape: a flat array is refused, not read as one row."""
    import qtransit

    known_formats()
    if name not in _KNOWN:
        pytest.fail(f"format {name!r} is not known to the installed qtransit", pytrace=False)
    with pytest.raises(ValueError):
        qtransit.quantize(name, np.ones(shape, dtype=F32))


@pytest.mark.parametrize("name,shape", [("fp8-e4m3-128x128", (100, 128)), ("fp8-e4m3-128x128", (128, 100)),
                                        ("fp8-e4m3-128x128-ue8m0", (128, 200)), ("fp8-e4m3-128x128-ue8m0", (64, 256)),
                                        ("nvfp4-2d", (16, 20)), ("nvfp4-2d", (20, 16)), ("nvfp4-2d", (8, 32))])
def test_shapes_not_made_of_tiles_pad_in_quantize_and_are_refused_by_verify(name, shape):
    """quantize pads them with zeros (test_padding_to_whole_tiles_is_zeros); verify_quantize takes the
    user's tensor and dumps as given, and refuses them."""
    import qtransit

    known_formats()
    if name not in _KNOWN:
        pytest.fail(f"format {name!r} is not known to the installed qtransit", pytrace=False)
    x = np.ones(shape, dtype=F32)
    r = qtransit.quantize(name, x)
    assert r.passed and np.asarray(r.decoded).shape == shape
    with pytest.raises(ValueError, match="not a multiple"):
        qtransit.verify_quantize(name, x, np.asarray(r.decoded, dtype=F32))


# ---------------------------------------------------------------------------------------------
# wrong variants: the comparison can fail


def multiplier_edges(rng, shape):
    """For fp8-e4m3-128x128: tiles whose a' makes fl32(1 / fl32(a'/448)) differ from fl32(448 / a'),
    filled with elements (within 6 ulps of an E4M3 midpoint / m) where the two multipliers give
    different codes; the tile's absmax a' placed once."""
    mids = ((E4M3_GRID[:-1] + E4M3_GRID[1:]) / 2).astype(F32)
    x = np.empty(shape, F32)
    R, C = shape
    for i in range(0, R, 128):
        for j in range(0, C, 128):
            while True:
                ap = F32(10.0 ** rng.uniform(-3, 3))
                m1, m2 = A448 / ap, F32(1) / (ap / A448)
                if m1 == m2:
                    continue
                g = (mids / m1).astype(F32)
                bits = g.view(np.int32)[:, None] + np.arange(-6, 7, dtype=np.int32)[None, :]
                cand = bits.view(F32).reshape(-1)
                cand = cand[(cand < ap) & (nearest_even(cand * m1, E4M3_GRID) != nearest_even(cand * m2, E4M3_GRID))]
                if cand.size:
                    break
            t = rng.choice(cand, (128, 128)) * np.where(rng.random((128, 128)) < 0.5, -1, 1)
            t[rng.integers(128), rng.integers(128)] = ap
            x[i:i + 128, j:j + 128] = t
    return x


def test_wrong_variant_row_blocks():
    """(a) 1 x c row blocks in place of r x c tiles: other codes on tiles whose rows differ in magnitude."""
    for name in FORMATS:
        r, c, rule = FORMATS[name]
        x = make(name, "row-magnitudes", SHAPES[rule][1])
        d = differences(name, x, tile=(1, c))
        assert any(s.startswith("codes") for s in d), name
        assert any(s.startswith("decoded") for s in d), name
    assert any(s.startswith("codes") for s in compare("nvfp4-2d", emulate("nvfp4-2d", NV_X, tile=(1, 16)), run("nvfp4-2d", NV_X)))


def test_wrong_variant_column_major_tiles():
    """(b) tiles listed column-major: on a 2 x 3 tile grid of tiles 10^k apart the scales come out in
    another order (on normal input the ue8m0 scales would all be equal powers of two)."""
    for name in FORMATS:
        rule = FORMATS[name][2]
        shape = (256, 384) if rule != "nvfp4" else (32, 48)
        x = make(name, "magnitudes", shape)
        d = differences(name, x, order="col")
        assert any(s.startswith("scales") for s in d), name
        assert not any(s.startswith(("codes", "decoded")) for s in d), name  # only the order is wrong
        if rule == "nvfp4":
            assert any(s.startswith("e4m3_bytes") for s in d)


def test_wrong_variant_multiplier_from_scale():
    """(c) fp8-e4m3-128x128 with m = fl32(1 / s), s = fl32(a'/448), in place of fl32(448 / a').

    On the regular inputs above (normal, heavy, magnitudes, zero-tile, tiny, row-magnitudes, on 128x128,
    256x384 and 384x128) the two multipliers are equal in most tiles, and where they differ (by one ulp)
    no element lands between the two roundings: the variant gives the same codes, scales and decoded
    values there (checked below against the emulation, which equals qtransit on those inputs). Only
    the constructed multiplier-edges input tells them apart, in thousands of elements."""
    name = "fp8-e4m3-128x128"
    same, tiles_differ = 0, 0
    for kind in INPUTS_FOR["deepgemm"]:
        for shape in SHAPES["deepgemm"]:
            x = make(name, kind, shape)
            ok, bad = emulate(name, x), emulate(name, x, multiplier="inv-s")
            tiles_differ += int((ok["m"] != bad["m"]).sum())
            same += not compare(name, ok, bad)
    assert same == len(INPUTS_FOR["deepgemm"]) * len(SHAPES["deepgemm"]), "the variant differs on a regular input"
    assert tiles_differ > 0
    x = multiplier_edges(np.random.default_rng(77), (128, 256))
    assert not differences(name, x)
    d = differences(name, x, multiplier="inv-s")
    assert any(s.startswith("codes") for s in d)
    assert not any(s.startswith("scales") for s in d)


# ---------------------------------------------------------------------------------------------
# a shape that is not a multiple of the tile: qtransit pads with zeros to whole tiles, as DeepGEMM's
# per_block_cast_to_fp8 and TE do, so its numbers are the emulation's on the zero-padded tensor,
# cropped back (the scales: every tile's, the padded ones included).


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_padding_to_whole_tiles_is_zeros(name):
    r, c, _ = FORMATS[name]
    rows, cols = r + r // 2 + 3, 2 * c - 5  # neither a multiple of the tile
    x = normal(np.random.default_rng(41), (rows, cols), (r, c))
    padded = np.zeros((-(-rows // r) * r, -(-cols // c) * c), F32)
    padded[:rows, :cols] = x
    theirs = emulate(name, padded)
    for what in ("codes", "decoded"):
        theirs[what] = theirs[what][:rows, :cols]
    diff = compare(name, theirs, run(name, x))
    assert not diff, "\n".join(diff)
