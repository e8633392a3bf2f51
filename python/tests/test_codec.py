"""check_codec: a quantizer written in Python as the gate's codec; its failures named."""

import re

import numpy as np
import pytest

import qtransit

FLT_MAX = np.finfo(np.float32).max
SMALL = {"gate": {"paths": ["a2a-rs", "ring-rs"], "distributions": ["normal"], "ranks": [8], "elements": 512}}


def sym_encode(bits, rounding=np.rint, recip=False):
    qmax = 2 ** (bits - 1) - 1

    def encode(x, block):
        n = x.size
        nb = -(-n // block)
        b = np.zeros(nb * block, np.float32)
        b[:n] = x
        b = b.reshape(nb, block)
        a = np.max(np.abs(b), axis=1)
        s = np.where(a == 0, np.float32(0), np.maximum(a / np.float32(qmax), np.float32(2.0**-149))).astype(np.float32)
        q = np.zeros_like(b)
        nz = s > 0
        if recip:  # the scale as a * fl32(1/qmax): not the reference's division, 1 ulp off at times
            s = np.where(a == 0, np.float32(0), np.maximum(a * (np.float32(1) / np.float32(qmax)), np.float32(2.0**-149)))
            s = s.astype(np.float32)
            nz = s > 0
        q[nz] = np.clip(rounding(b[nz] / s[nz, None]), -qmax, qmax)
        return q.reshape(-1)[:n].astype(np.int16), s

    return encode


def sym_decode(codes, scales, offsets, block):
    n = codes.size
    nb = scales.size
    b = np.zeros(nb * block, np.float32)
    b[:n] = codes
    with np.errstate(over="ignore"):  # q * s past FLT_MAX saturates (D1)
        return np.clip(b.reshape(nb, block) * scales[:, None], -FLT_MAX, FLT_MAX).reshape(-1)[:n].astype(np.float32)


def test_a_correct_int8_codec_passes():
    r = qtransit.check_codec("int8", sym_encode(8), sym_decode, name="py-int8", config=SMALL, quick=False)
    assert r.passed, r.first_failure
    v = r.verdict("kernel-vs-reference/py-int8")  # named by the codec, as a plugin's
    assert v.status == "pass" and "bit for bit" in v.message and v.checked > 0
    assert r.verdict("bounds/int8/ring-rs").status == "pass"


def test_a_truncating_codec_fails_with_the_first_difference():
    r = qtransit.check_codec("int8", sym_encode(8, np.trunc), sym_decode, name="py-trunc", config=SMALL, quick=False)
    assert not r.passed
    assert re.search(r"element \d+", r.verdict("kernel-vs-reference/py-trunc").message)


def test_bounded_conformance_accepts_a_reciprocal_multiply():
    def recip(bits):
        return sym_encode(bits, rounding=np.rint, recip=True)

    r = qtransit.check_codec("int8", recip(8), sym_decode, config=SMALL, quick=False, conformance="bounded")
    assert r.passed, r.first_failure
    exact = qtransit.check_codec("int8", recip(8), sym_decode, config=SMALL, quick=False)
    assert not exact.passed  # the bits differ somewhere in the edge cases


def failure(encode, decode=sym_decode):
    r = qtransit.check_codec("int8", encode, decode, config=SMALL, quick=False)
    assert not r.passed
    v = r.verdict("kernel-vs-reference/python-codec")
    assert v.status == "fail" and "\n" not in v.message
    return v.message


def test_a_callable_that_raises_is_a_failed_verdict_naming_it():
    def broken(x, block):
        raise RuntimeError("my kernel broke")

    assert "encode raised RuntimeError: my kernel broke" in failure(broken)

    def broken_decode(codes, scales, offsets, block):
        raise ValueError("bad decode")

    assert "decode raised ValueError: bad decode" in failure(sym_encode(8), broken_decode)


def test_wrong_counts_and_dtypes_are_named():
    def short(x, block):
        c, s = sym_encode(8)(x, block)
        return c[:-1], s

    assert "codes" in failure(short)

    def f64(x, block):
        c, s = sym_encode(8)(x, block)
        return c, s.astype(np.float64)

    assert "float64" in failure(f64)

    def out_of_range(x, block):
        c, s = sym_encode(8)(x, block)
        c = c.astype(np.int32)
        c[0] = 300
        return c, s

    assert "code 300" in failure(out_of_range)

    def not_a_tuple(x, block):
        return None

    assert "encode must return" in failure(not_a_tuple)


def test_bad_arguments():
    with pytest.raises(ValueError, match="callable"):
        qtransit.check_codec("int8", None, sym_decode)
    with pytest.raises(ValueError, match="int8"):
        qtransit.check_codec("int9", sym_encode(8), sym_decode)
    with pytest.raises(ValueError, match="device"):
        qtransit.check_codec("int8", sym_encode(8), sym_decode, device="tpu")
