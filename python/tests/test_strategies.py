"""qtransit.strategies.blocks: what it draws."""

import numpy as np
from hypothesis import given, settings

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
