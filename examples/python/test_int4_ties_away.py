"""The quantizer with a seeded mistake (ties away from zero) must fail, and say where."""

import re

from hypothesis import find, settings

import qtransit
import qtransit.strategies as qs

import int4_ties_away as bad


def test_the_gate_names_the_first_differing_element():
    r = qtransit.check_codec("int4", bad.encode, bad.decode, name="numpy-int4-ties-away")
    assert not r.passed
    v = r.verdict("kernel-vs-reference/numpy-int4-ties-away")
    assert v.status == "fail"
    assert re.search(r"element \d+", v.message), v.message
    assert r.first_failure.startswith("kernel-vs-reference/numpy-int4-ties-away: "), r.first_failure


def test_hypothesis_finds_a_tie():
    def differs(x):
        codes, scales = bad.encode(x, 32)
        return not qtransit.verify_quantize("int4", x, bad.decode(codes, scales, None, 32), codes=codes, scales=scales).passed

    x = find(qs.blocks(fmt="int4", block=32), differs, settings=settings(max_examples=2000, deadline=None, database=None))
    codes, scales = bad.encode(x, 32)
    r = qtransit.verify_quantize("int4", x, bad.decode(codes, scales, None, 32), codes=codes, scales=scales)
    assert re.search(r"element \d+", r.first_failure), r.first_failure
    ratio = x / scales[0]
    assert any(abs(v - round(v)) == 0.5 for v in ratio.tolist()), (x, scales)  # the minimal failure is a tie
