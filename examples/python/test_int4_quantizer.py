"""The numpy int4 quantizer under test, as a user's pytest suite would hold it: the gate with it as
the codec (check_codec), and a Hypothesis property against qtransit's reference."""

import numpy as np
from hypothesis import given, settings

import qtransit
import qtransit.strategies as qs

import int4_quantizer as q


def test_the_gate_with_our_quantizer_as_the_codec():
    r = qtransit.check_codec("int4", q.encode, q.decode, name="numpy-int4")
    assert r.passed, r.first_failure
    v = r.verdict("kernel-vs-reference/numpy-int4")  # the gate names the codec
    assert v is not None and v.status == "pass", v
    assert v.checked > 0  # it compared something


@settings(max_examples=300, deadline=None)
@given(qs.blocks(fmt="int4", block=32))
def test_every_block_matches_the_reference(x):
    codes, scales = q.encode(x, 32)
    decoded = q.decode(codes, scales, None, 32)
    r = qtransit.verify_quantize("int4", x, decoded, codes=codes, scales=scales, block=32)
    assert r.passed, r.first_failure
