"""qtransit.strategies.blocks: what it draws."""

import numpy as np
from hypothesis import given, settings

import qtransit
import qtransit.strategies as qs


@settings(max_examples=400, deadline=None)
@given(qs.blocks(fmt="int4", block=16))
def test_blocks_are_finite_float32_of_the_right_length(x):
    assert x.dtype == np.float32 and 1 <= x.size <= 16
    assert np.all(np.isfinite(x))


def test_blocks_reach_every_case():
    seen = set()

    @settings(max_examples=1500, deadline=None, database=None)
    @given(qs.blocks(fmt="int4", block=32))
    def look(x):
        a = np.abs(x)
        if x.size == 1:
            seen.add("single")
        if x.size > 1 and np.all(x == x[0]):
            seen.add("constant")
        if np.any((a > 0) & (a < np.finfo(np.float32).tiny)):
            seen.add("subnormal")
        if np.any(np.signbit(x) & (x == 0)):
            seen.add("-0")
        if np.any(a == np.finfo(np.float32).max):
            seen.add("FLT_MAX")
        m = a.max()
        if m > 0 and x.size > 1:
            s = np.float32(m / np.float32(7))
            r = x / s
            if np.any(np.abs(r - np.floor(r)) == 0.5):
                seen.add("tie")

    look()
    assert seen >= {"single", "constant", "subnormal", "-0", "FLT_MAX", "tie"}, seen


def test_non_finite_only_when_asked():
    found = []

    @settings(max_examples=600, deadline=None, database=None)
    @given(qs.blocks(fmt="int8", finite=False))
    def look(x):
        if not np.all(np.isfinite(x)):
            found.append(x)

    look()
    assert found


def test_boundary_cases_come_labelled_from_the_format():
    cases = qs.boundary_cases("int8", 32)
    classes = {c[0] for c in cases}
    assert classes == {"near-ties", "scale-boundaries", "block-sizes", "lengths"}
    for cls, what, x, block, shard in cases:
        assert x.dtype == np.float32 and x.size % shard == 0 and block >= 1 and what
    # MX: the scale-boundary blocks sit at 448 2^k and within 2 ulps of it, for every k.
    mx = [c for c in qs.boundary_cases("mxfp8-e4m3-rceil", 32) if c[0] == "scale-boundaries" and "exponent change of a normal scale" in c[1]]
    assert len(mx) == 1, [c[1] for c in qs.boundary_cases("mxfp8-e4m3-rceil", 32) if c[0] == "scale-boundaries"]
    amax = np.abs(mx[0][2].reshape(-1, 32)).max(axis=1)
    assert np.any(amax == np.float32(448.0)) and np.any(amax == np.nextafter(np.float32(448.0), np.float32(1e9)))


def test_boundary_cases_refuse_a_bad_block():
    import pytest

    with pytest.raises(Exception, match="block=0"):
        qs.boundary_cases("int8", 0)
    with pytest.raises(ValueError, match="fixed block"):
        qs.boundary_blocks("mxfp8-e4m3", 64)


def _f64_quotient_int8(x):
    """int8 codes as a codec computing x / s in binary64 and rounding once would give."""
    a = np.max(np.abs(x))
    if a == 0:
        return np.zeros(x.size, np.int32)
    s = max(np.float32(a / np.float32(127)), np.float32(2.0**-149))
    return np.clip(np.rint(x.astype(np.float64) / np.float64(s)), -127, 127).astype(np.int32)


def _reference_int8(x):
    r = qtransit.quantize("int8", x, block=x.size)
    return np.asarray(r.codes, dtype=np.int32)



def test_boundary_blocks_find_a_binary64_quotient():
    """Hypothesis with boundary_blocks finds the near-tie a binary64 quotient rounds apart; with
    blocks() alone, random draws almost never do (about 1e-6 of elements)."""
    found = []

    @settings(max_examples=300, deadline=None, database=None)
    @given(qs.boundary_blocks("int8", 32))
    def look(x):
        if not np.array_equal(_f64_quotient_int8(x), _reference_int8(x)):
            found.append(x)

    look()
    assert found, "no boundary block told the binary64 quotient from the reference"


def test_blocks_take_a_declaration_file(tmp_path):
    """strategies.blocks(fmt=FILE.toml) (issue 52: it took built-in names only)."""
    import pytest

    toml = tmp_path / "my5.toml"
    toml.write_text('name = "my-int5"\n[element]\ntype = "int"\nbits = 5\n')
    ties = []

    @settings(max_examples=300, deadline=None, database=None)
    @given(qs.blocks(fmt=str(toml), block=16))
    def look(x):
        assert x.dtype == np.float32 and 1 <= x.size <= 16
        m = np.abs(x).max()
        if m > 0 and x.size > 1:
            r = x / np.float32(m / np.float32(15))
            if np.any(np.abs(r - np.floor(r)) == 0.5):
                ties.append(x)

    look()
    assert ties, "no exact tie of the declared int5's grid (qmax 15) was drawn"
    with pytest.raises(ValueError, match="fmt='nope'"):
        qs.blocks(fmt="nope")
