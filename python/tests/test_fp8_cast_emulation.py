"""The FP8 casts of DeepEP's low-latency dispatch and of FlashInfer's quantized_all_reduce, emulated
independently in numpy from their definitions (docs/SOURCES.md sections 3 and 4) and compared bit for
bit with qtransit's kernels: every scale, every code and every decoded value.

The emulation is written from the definitions only, not from qtransit's C++ sources:

  a  = max |x_i| over a block (binary32),   a' = max(a, F) (binary32),   A = 448
  fp8-e4m3-1x128        B=128, F=fl32(1e-4):  s = fl32(a' * fl32(1/448)),  m = fl32(448 / a'),
                                              v = fl32(x * m), E4M3 RNE with saturation to +-448
  fp8-e4m3-1x128-pow2   B=128, F=fl32(1e-4):  t = fl32(a' * fl32(1/448)),  e = ceil(log2 t) from t's
                                              bits, s = 2^e, v = fl32(x * 2^-e), E4M3 RNE saturating
  fp8-e4m3-1x128-ue8m0  the same numbers as -pow2 (the wire stores s as the byte e + 127)
  flashinfer-fp8        B=256, F=fl32(1e-12): s = fl32(a' / 448),  m = fl32(448 / a'),
                                              v = clamp(fl32(x * m), -448, 448), E4M3 RNE
  decoded = fl32(val(code) * s) in every format.

Every float32 rounding is an explicit numpy binary32 operation (IEEE, round to nearest even, one
rounding per operation: no fused multiply-add). The E4M3 rounding is done here by hand from
frexp/ldexp on exact float64 copies of the binary32 values, not by ml_dtypes or torch.
"""

import numpy as np
import pytest

import qtransit
from e4m3_by_hand import E4M3_VALUE, e4m3_encode

F32 = np.float32
A = F32(448.0)
INV_A = F32(1.0) / F32(448.0)  # fl32(1/448): a correctly rounded binary32 division
FLT_MAX = np.finfo(np.float32).max

# name -> (block, amax floor F, scale rule)
FORMATS = {
    "fp8-e4m3-1x128": (128, F32(1e-4), "deepep"),
    "fp8-e4m3-1x128-pow2": (128, F32(1e-4), "pow2"),
    "fp8-e4m3-1x128-ue8m0": (128, F32(1e-4), "pow2"),
    "flashinfer-fp8": (256, F32(1e-12), "flashinfer"),
}

_KNOWN = None


def require_format(name):
    """These formats are expected to exist: an unknown name is a failure, not a skip."""
    global _KNOWN
    if _KNOWN is None:
        _KNOWN = {f.format for f in qtransit.formats()}
    if name not in _KNOWN:
        pytest.fail(f"format {name!r} is not known to the installed qtransit (qtransit.formats() lists "
                    f"{len(_KNOWN)} formats: {', '.join(sorted(_KNOWN))}); it is expected to exist", pytrace=False)


# ---- E4M3 (OCP e4m3fn) by hand: e4m3_by_hand.py ------------------------------------------------------



# ---- the four formats ---------------------------------------------------------------------------------

def ceil_log2_from_bits(t):
    """ceil(log2 t) of normal positive binary32 t, exactly from its bits: the unbiased exponent, plus
    1 when any mantissa bit is set."""
    b = np.asarray(t, dtype=np.float32).view(np.uint32).astype(np.int64)
    assert np.all(((b >> 23) & 0xFF) > 0), "t is subnormal or zero"
    return ((b >> 23) & 0xFF) - 127 + ((b & 0x7FFFFF) != 0)


def emulate(name, x):
    """(scales float32[blocks], codes int64[n], decoded float32[n]) of x (length a multiple of B)."""
    block, floor, rule = FORMATS[name]
    x = np.asarray(x, dtype=np.float32)
    assert x.ndim == 1 and x.size % block == 0
    xb = x.reshape(-1, block)
    amax = np.max(np.abs(xb), axis=1)  # binary32
    ap = np.maximum(amax, floor)  # a' = max(a, F)
    if rule == "deepep":
        s = ap * INV_A  # fl32(a' * fl32(1/448))
        m = A / ap  # fl32(448 / a'), a separate division
        v = xb * m[:, None]
    elif rule == "pow2":
        t = ap * INV_A
        e = ceil_log2_from_bits(t)
        s = np.ldexp(np.ones_like(t, dtype=np.float64), e).astype(np.float32)  # 2^e, exact
        inv = np.ldexp(np.ones_like(t, dtype=np.float64), -e).astype(np.float32)  # 2^-e, exact
        assert np.all(s.astype(np.float64) == np.ldexp(1.0, e)) and np.all(inv.astype(np.float64) == np.ldexp(1.0, -e))
        v = xb * inv[:, None]
    elif rule == "flashinfer":
        s = ap / A  # fl32(a' / 448)
        m = A / ap  # fl32(448 / a')
        v = np.clip(xb * m[:, None], -A, A)
    else:
        raise AssertionError(rule)
    for arr in (s, v):
        assert arr.dtype == np.float32
    codes = e4m3_encode(v).reshape(-1)
    # fl32(val * s), saturated to +-FLT_MAX (qtransit's decode, FORMATS.md section 5, D1): under round_scale
    # an input at FLT_MAX takes s = 2^120 and the code 256, whose plain product 2^128 is inf
    with np.errstate(over="ignore"):
        decoded = np.clip(E4M3_VALUE[codes].astype(np.float32).reshape(-1, block) * s[:, None], -FLT_MAX, FLT_MAX).reshape(-1)
    assert decoded.dtype == np.float32 and s.dtype == np.float32
    return s, codes, decoded


# ---- inputs -------------------------------------------------------------------------------------------

def _ulps(c):
    """c and one and two binary32 ulps either side of it."""
    c = F32(c)
    lo1 = np.nextafter(c, F32(0)); lo2 = np.nextafter(lo1, F32(0))
    hi1 = np.nextafter(c, F32(np.inf)); hi2 = np.nextafter(hi1, F32(np.inf))
    return [lo2, lo1, c, hi1, hi2]


def _blocks_with_absmax(rng, block, maxima):
    """One block per value: the value once (random sign, random place), the rest random fractions of it."""
    out = []
    for mx in maxima:
        mx = F32(mx)
        b = (rng.uniform(-0.99, 0.99, block).astype(np.float32) * mx).astype(np.float32)
        b[rng.integers(block)] = mx if rng.integers(2) else -mx
        assert np.max(np.abs(b)) == mx
        out.append(b)
    return np.concatenate(out)


def input_normal(block, floor, rng):
    return rng.standard_normal(8 * block).astype(np.float32)


def input_below_floor(block, floor, rng):
    # 1e-6 for DeepEP's floor 1e-4, 1e-14 for FlashInfer's 1e-12: every block's a' is F
    x = (rng.standard_normal(2 * block).astype(np.float32) * F32(float(floor) * 1e-2)).astype(np.float32)
    assert np.max(np.abs(x)) < floor
    return x


def input_zeros(block, floor, rng):
    return np.zeros(block, dtype=np.float32)


def input_pow2_boundaries(block, floor, rng):
    # absmax 448*2^k and 1, 2 ulps either side, k = -10..10: where the pow2 rule changes exponent
    maxima = [u for k in range(-10, 11) for u in _ulps(448.0 * 2.0 ** k)]
    return _blocks_with_absmax(rng, block, maxima)


def input_floor_boundaries(block, floor, rng):
    return _blocks_with_absmax(rng, block, _ulps(floor))


def input_midpoints(block, floor, rng):
    # a block whose absmax is 448 * 2^k has m = 2^-k (and s = 2^k) in every format, so x * m is exact and
    # the elements land exactly on the E4M3 rounding midpoints, and one binary32 ulp either side of them
    grid = np.array(sorted({abs(v) for v in E4M3_VALUE if np.isfinite(v)}))
    mids = (grid[:-1] + grid[1:]) / 2  # exact in binary32
    vals = []
    for mid in mids.astype(np.float32):
        vals += [np.nextafter(mid, F32(0)), mid, np.nextafter(mid, F32(np.inf))]
    vals = np.array(vals, dtype=np.float32)
    vals = np.concatenate([vals, -vals])
    rng.shuffle(vals)
    out = []
    for k in (0, 5, -7):
        scaled = (vals * F32(2.0 ** k)).astype(np.float32)
        per = block - 1
        for i in range(0, scaled.size, per):
            chunk = scaled[i:i + per]
            b = np.zeros(block, dtype=np.float32)
            b[0] = F32(448.0 * 2.0 ** k)
            b[1:1 + chunk.size] = chunk
            out.append(b)
    return np.concatenate(out)


def input_large(block, floor, rng):
    return (rng.standard_normal(2 * block) * 1e30).astype(np.float32)


def input_tiny(block, floor, rng):
    # 1e-30 mixed with 1 (a' = 1), then a block of tiny values only (a' = F)
    tiny = (rng.choice([-1.0, 1.0], 2 * block) * rng.uniform(0.5, 2.0, 2 * block) * 1e-30).astype(np.float32)
    ones = rng.random(block) < 0.1
    ones[0] = True
    mixed = np.where(ones, rng.choice([-1.0, 1.0], block), tiny[:block]).astype(np.float32)
    return np.concatenate([mixed, tiny[block:]])


INPUTS = {
    "normal": input_normal,
    "below_floor": input_below_floor,
    "zeros": input_zeros,
    "pow2_boundaries": input_pow2_boundaries,
    "floor_boundaries": input_floor_boundaries,
    "e4m3_midpoints": input_midpoints,
    "large": input_large,
    "tiny": input_tiny,
}


# ---- comparison ---------------------------------------------------------------------------------------

def _describe(what, idx, x, ours, theirs, block, fmt_value):
    lines = [f"{what}: {idx.size} differ(s); first ones:"]
    for i in idx[:5]:
        at = f"block {i}" if what == "scales" else f"element {i} (block {i // block}, x={x[i]!r} = {float(x[i]).hex()})"
        lines.append(f"  {at}: emulation {fmt_value(ours[i])}, qtransit {fmt_value(theirs[i])}")
    return "\n".join(lines)


def _f32(v):
    v = F32(v)
    return f"{float(v)!r} ({float(v).hex()}, bits 0x{int(np.array(v).view(np.uint32)):08x})"


def assert_matches_emulation(name, x):
    require_format(name)
    block = FORMATS[name][0]
    r = qtransit.quantize(name, x, block=block)
    s, codes, decoded = emulate(name, x)
    problems = []
    rs = np.asarray(r.scales, dtype=np.float32).reshape(-1)
    rc = np.asarray(r.codes).reshape(-1).astype(np.int64)
    rd = np.asarray(r.decoded, dtype=np.float32).reshape(-1)
    code_text = lambda c: f"0x{int(c):02x} ({E4M3_VALUE[int(c) & 0xFF]!r})"
    for what, ours, theirs, bits, show in (("scales", s, rs, True, _f32), ("codes", codes, rc, False, code_text),
                                           ("decoded", decoded, rd, True, _f32)):
        if theirs.shape != ours.shape:
            problems.append(f"{what}: {theirs.shape} from qtransit, {ours.shape} expected")
            continue
        d = np.flatnonzero(theirs.view(np.uint32) != ours.view(np.uint32)) if bits else np.flatnonzero(theirs != ours)
        if d.size:
            problems.append(_describe(what, d, x, ours, theirs, block, show))
    if not r.passed:
        problems.append(f"qtransit's own check failed: {r.first_failure}")
    assert not problems, f"{name}:\n" + "\n".join(problems)
    return r


@pytest.mark.parametrize("kind", list(INPUTS))
@pytest.mark.parametrize("name", list(FORMATS))
def test_matches_independent_emulation(name, kind):
    block, floor, _ = FORMATS[name]
    seed = 1000 + 17 * list(FORMATS).index(name) + list(INPUTS).index(kind)
    x = INPUTS[kind](block, floor, np.random.default_rng(seed))
    assert x.dtype == np.float32 and x.size % block == 0
    assert_matches_emulation(name, x)


# ---- hand-computed golden cases -----------------------------------------------------------------------
#
# fl32(1/448) = fl32(1/7) * 2^-6. 1/7 = 1.001001001...b * 2^-3; its 24-bit significand keeps 23 fraction
# bits 001 001 ... 001 00 and the rest, 1001001...b (4/7 of a unit in the last place, above one half),
# rounds up: fl32(1/7) = 1/7 + (3/7) * 2^-26, a relative error of +3 * 2^-26. So for a' = 448 * 2^k the
# exact product a' * fl32(1/448) = 2^k * (1 + 3 * 2^-26), and 3 * 2^-26 = 0.75 * 2^-24 is less than half an
# ulp above 2^k (2^-24 relative): t = fl32(a' * fl32(1/448)) = 2^k exactly.

P56 = np.nextafter(F32(56.0), F32(0))  # 56 - 2^-18 (the binade [32, 64) has ulp 2^-18)
N56 = np.nextafter(F32(56.0), F32(100))  # 56 + 2^-18
assert float(P56) == 56.0 - 2.0 ** -18 and float(N56) == 56.0 + 2.0 ** -18


def _golden_block(block, mx, rest):
    b = np.zeros(block, dtype=np.float32)
    b[0] = mx
    b[1:1 + len(rest)] = rest
    return b


def _check_golden(name, x, want_scales, want_codes):
    """The hand-derived numbers, asserted of the emulation (a self-check) and of qtransit."""
    require_format(name)
    s, codes, _ = emulate(name, x)
    assert s.tolist() == want_scales, ("emulation", s.tolist(), want_scales)
    for i, c in want_codes.items():
        assert codes[i] == c, ("emulation", i, hex(codes[i]), hex(c))
    r = assert_matches_emulation(name, x)
    assert np.asarray(r.scales, dtype=np.float32).tolist() == want_scales
    rc = np.asarray(r.codes).reshape(-1)
    for i, c in want_codes.items():
        assert rc[i] == c, ("qtransit", i, hex(int(rc[i])), hex(c))


def test_golden_deepep_scale():
    # Block 0, max 448: s = fl32(448 * fl32(1/448)) = 1.0 (t = 2^0 above); m = 448/448 = 1; 448 -> 0x7E.
    # Block 1, max 56 - 2^-18: exact product = 2^-3 (1 - (4/7) 2^-23)(1 + 3 * 2^-26)
    #   = 2^-3 (1 - 0.196 * 2^-23). Below 2^-3 the spacing is 0.5 * 2^-23 (relative), and -0.196 is nearer
    #   0 than -0.5, so s = 0.125 exactly. m = fl32(448 / (56 - 2^-18)) = fl32(8 (1 + (4/7) 2^-23 + ...)):
    #   above 8 the spacing is 2^-23 relative and 4/7 > 1/2, so m = 8 + 2^-20 (not 8).
    #   max * m = 448 + 56 * 2^-20 - 8 * 2^-18 - tiny = 448 + 24 * 2^-20; ulp(448) = 2^-15 = 32 * 2^-20, so
    #   v = 448 + 2^-15 > 448: saturates to 448, code 0x7E.
    #   1.0 * m = 8 + 2^-20 -> E4M3 8 (spacing 1 in [8, 16)): field 3 + 7 = 10, mantissa 0: 0x50.
    #   -3.5 * m = -(28 + 3.5 * 2^-20) -> binary32 -(28 + 2^-18) -> E4M3 -28 (spacing 2 in [16, 32)):
    #   28 = 1.75 * 2^4: field 11, mantissa 6: 0x80 | 0x58 | 6 = 0xDE.
    b = FORMATS["fp8-e4m3-1x128"][0]
    x = np.concatenate([_golden_block(b, F32(448.0), [F32(1.0)]), _golden_block(b, P56, [F32(1.0), F32(-3.5)])])
    _check_golden("fp8-e4m3-1x128", x, [1.0, 0.125], {0: 0x7E, 1: 0x38, b: 0x7E, b + 1: 0x50, b + 2: 0xDE})


def test_golden_pow2_scale():
    # Block 0, max 56 = 448 * 2^-3: t = fl32(56 * fl32(1/448)) = 0.125 exactly (the derivation above with
    #   k = -3), no mantissa bit set: e = -3, s = 0.125; 56 * 8 = 448 -> 0x7E.
    # Block 1, max 56 + 2^-18: exact product = 2^-3 (1 + (4/7) 2^-23)(1 + 3 * 2^-26)
    #   = 2^-3 (1 + 0.946 * 2^-23): above 2^-3 the spacing is 2^-23 relative, so t = 2^-3 (1 + 2^-23),
    #   one ulp above 0.125: a mantissa bit is set, e = -3 + 1 = -2, s = 0.25. (56 + 2^-18) * 4 = 224 + 2^-16
    #   -> E4M3 224 (spacing 16 in [128, 256); 224 = 1.75 * 2^7): field 14, mantissa 6: 0x76.
    # Block 2, max 56 - 2^-18: t = 0.125 exactly (see test_golden_deepep_scale), e = -3, s = 0.125:
    #   (56 - 2^-18) * 8 = 448 - 2^-15 -> E4M3 448 (spacing 32 in [256, 512)): 0x7E.
    b = FORMATS["fp8-e4m3-1x128-pow2"][0]
    x = np.concatenate([_golden_block(b, F32(56.0), []), _golden_block(b, N56, []), _golden_block(b, P56, [])])
    _check_golden("fp8-e4m3-1x128-pow2", x, [0.125, 0.25, 0.125], {0: 0x7E, b: 0x76, 2 * b: 0x7E})


def test_golden_ue8m0_scale():
    # An all-zero block: a' = F = fl32(1e-4); t = fl32(1e-4 * fl32(1/448)) ~ 2.2321e-7, and
    #   2^-23 ~ 1.1921e-7 < t < 2^-22 ~ 2.3842e-7 (far from either end): e = -22, s = 2^-22 (the wire's
    #   byte: -22 + 127 = 105). Every code 0, decoded 0.
    # Block 1, max 448 * 2^10 = 458752: t = 2^10 exactly (above), e = 10, s = 1024; 458752 / 1024 = 448 -> 0x7E.
    b = FORMATS["fp8-e4m3-1x128-ue8m0"][0]
    x = np.concatenate([np.zeros(b, dtype=np.float32), _golden_block(b, F32(458752.0), [F32(-1024.0)])])
    _check_golden("fp8-e4m3-1x128-ue8m0", x, [2.0 ** -22, 1024.0], {0: 0x00, b: 0x7E, b + 1: 0xB8})


def test_golden_flashinfer_scale():
    # Block 0, max 56: s = fl32(56 / 448) = 0.125 (the quotient is exact); m = fl32(448 / 56) = 8;
    #   56 * 8 = 448 -> 0x7E; 1 * 8 = 8 -> 0x50; -0.001 * 8 = -0.008 -> E4M3 subnormal: 0.008 / 2^-9 = 4.096
    #   -> 4 * 2^-9: field 0, mantissa 4: 0x84.
    # Block 1, max 1e-13 (below the floor 1e-12): a' = fl32(1e-12), s = fl32(fl32(1e-12) / 448), and the
    #   element 1e-13 lands at fl32(1e-13 * fl32(448 / 1e-12)) ~ 44.8 -> E4M3 44 (spacing 4 in [32, 64)):
    #   44 = 1.375 * 2^5: field 12, mantissa 3: 0x63.
    b = FORMATS["flashinfer-fp8"][0]
    x = np.concatenate([_golden_block(b, F32(56.0), [F32(1.0), F32(-0.001)]), _golden_block(b, F32(1e-13), [])])
    _check_golden("flashinfer-fp8", x, [0.125, float(F32(1e-12) / F32(448.0))],
                  {0: 0x7E, 1: 0x50, 2: 0x84, b: 0x63})


# ---- the emulation as a user's codec under check_codec --------------------------------------------------

def as_codec(name, rule=None):
    """encode/decode for check_codec from the emulation above; `rule` swaps in another scale rule (a
    codec that has the wrong one: it must fail)."""
    block_of, floor, own = FORMATS[name]

    def encode(x, block):
        if not np.all(np.isfinite(x)):  # a codec refuses NaN and inf by raising (the gate probes it)
            raise ValueError("non-finite input")
        assert block == block_of
        n = x.size
        xp = np.concatenate([np.asarray(x, np.float32).reshape(-1), np.zeros((-n) % block, np.float32)])  # zeros leave the absmax
        saved = FORMATS[name]
        FORMATS[name] = (block_of, floor, rule or own)
        try:
            s, codes, _ = emulate(name, xp)
        finally:
            FORMATS[name] = saved
        return codes[:n].astype(np.int16), s

    def decode(codes, scales, offsets, block):
        n = codes.size
        c = np.concatenate([np.asarray(codes, np.int64), np.zeros((-n) % block, np.int64)])
        with np.errstate(over="ignore"):  # saturated, as emulate() (FORMATS.md section 5)
            v = np.clip(E4M3_VALUE[c].astype(np.float32).reshape(-1, block) * scales[:, None], -FLT_MAX, FLT_MAX)
        return v.reshape(-1)[:n].astype(np.float32)

    return encode, decode


def _codec_config(block):
    return {"gate": {"paths": ["a2a-rs", "ring-rs"], "distributions": ["normal"], "ranks": [8], "elements": 3 * block,
                     "block": block}}


@pytest.mark.parametrize("name", ["fp8-e4m3-1x128", "fp8-e4m3-1x128-ue8m0", "flashinfer-fp8"])
def test_the_emulation_passes_check_codec(name):
    """The independent emulation, as a codec, passes qtransit's codec check (its generated inputs: the scale
    boundaries, the floor, near-ties of x m) and the paths' bounds."""
    require_format(name)
    block = FORMATS[name][0]
    enc, dec = as_codec(name)
    r = qtransit.check_codec(name, enc, dec, name="numpy-" + name, config=_codec_config(block), quick=True)
    assert r.passed, r.first_failure
    v = r.verdict("kernel-vs-reference/numpy-" + name)
    assert v.status == "pass" and v.checked > 0, v.message


def test_a_codec_with_flashinfers_scale_fails_as_deepeps():
    """DeepEP's stored scale is a' fl32(1/448), FlashInfer's a' / 448: one ulp apart on many blocks (absmax
    3, 100, ...). A codec that stores the quotient fails the fp8-e4m3-1x128 check, naming a scale."""
    require_format("fp8-e4m3-1x128")
    enc, dec = as_codec("fp8-e4m3-1x128", rule="flashinfer")
    r = qtransit.check_codec("fp8-e4m3-1x128", enc, dec, name="numpy-wrong-scale", config=_codec_config(128), quick=True)
    assert not r.passed
    assert "scale" in r.first_failure, r.first_failure
