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
        if not np.all(np.isfinite(x)):  # a codec refuses NaN and inf by raising (the gate probes it)
            raise ValueError("non-finite input")
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


def test_a_bfloat16_codec_is_checked_as_bfloat16():
    """dtype="bfloat16": encode gets bf16 arrays, decode returns bf16 values, compared in bf16 (issue 52:
    torchao and most training code quantize bf16)."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    seen = []

    def encode(x, block):
        seen.append(x.dtype)
        return sym_encode(8)(x, block)

    def decode(codes, scales, offsets, block):
        return sym_decode(codes, scales, offsets, block).astype(ml_dtypes.bfloat16)

    r = qtransit.check_codec("int8", encode, decode, name="py-int8-bf16", config=SMALL, quick=False, dtype="bfloat16")
    assert r.passed, r.first_failure
    assert seen and all(d == ml_dtypes.bfloat16 for d in seen)
    # float32 values a bf16 codec returns are not bf16 values: named, not rounded.
    bad = qtransit.check_codec("int8", encode, sym_decode, name="py-int8-bf16", config=SMALL, quick=True, dtype="bfloat16")
    assert not bad.passed
    assert "which is not a bfloat16 value (the codec's dtype)" in bad.verdict("kernel-vs-reference/py-int8-bf16").message
    with pytest.raises(ValueError, match="dtype='int8': float32, bfloat16 or float16"):
        qtransit.check_codec("int8", encode, decode, dtype="int8")


def test_a_truncating_codec_fails_with_the_first_difference():
    r = qtransit.check_codec("int8", sym_encode(8, np.trunc), sym_decode, name="py-trunc", config=SMALL, quick=False)
    assert not r.passed
    msg = r.verdict("kernel-vs-reference/py-trunc").message
    assert re.search(r"element \d+", msg)
    # It differs on random normal inputs as on the edge cases: the normal range leads (issue 52).
    assert msg.startswith("normal: "), msg


def test_bounded_conformance_accepts_a_reciprocal_multiply():
    def recip(bits):
        return sym_encode(bits, rounding=np.rint, recip=True)

    r = qtransit.check_codec("int8", recip(8), sym_decode, config=SMALL, quick=False, conformance="bounded")
    assert r.passed, r.first_failure
    exact = qtransit.check_codec("int8", recip(8), sym_decode, config=SMALL, quick=False)
    assert not exact.passed  # the bits differ somewhere in the edge cases



def asym_encode(bits):
    """int<b>-asym as NUMERICS 1.2 and D2 define it, block by block (a short last block has only its
    own elements): the offset is each block's lo."""
    top = 2**bits - 1

    def encode(x, block):
        if not np.all(np.isfinite(x)):  # refused, as NUMERICS section 4 requires
            raise ValueError("non-finite input")
        codes = np.zeros(x.size, np.int16)
        scales, los = [], []
        for b0 in range(0, x.size, block):
            b = x[b0:b0 + block]
            with np.errstate(over="ignore"):
                if not np.isfinite(np.float32(b.max()) - np.float32(b.min())):  # hi - lo overflows binary32
                    raise ValueError("range overflow")
            zero = b == 0
            lo = np.float32(-0.0) if b.min() == 0 and np.any(zero & np.signbit(b)) else b.min()
            hi = np.float32(0.0) if b.max() == 0 and np.any(zero & ~np.signbit(b)) else b.max()
            s = np.float32(0)
            if hi != lo:
                s = np.maximum(np.float32(hi - lo) / np.float32(top), np.float32(2.0**-149))
                codes[b0:b0 + b.size] = np.clip(np.rint((b - lo) / s), 0, top)
            scales.append(s)
            los.append(lo)
        return codes, np.array(scales, np.float32), np.array(los, np.float32)

    return encode


def asym_decode(codes, scales, offsets, block):
    out = np.empty(codes.size, np.float32)
    for j, b0 in enumerate(range(0, codes.size, block)):
        q = codes[b0:b0 + block].astype(np.float32)
        if scales[j] == 0:
            out[b0:b0 + q.size] = offsets[j]  # a constant block decodes to lo exactly
        else:
            with np.errstate(over="ignore"):  # D1: both roundings saturate
                v = np.clip(q * scales[j], -FLT_MAX, FLT_MAX)
                out[b0:b0 + q.size] = np.clip(v + offsets[j], -FLT_MAX, FLT_MAX)
    return out


def test_an_asym_codec_hands_back_its_offsets():
    r = qtransit.check_codec("int4-asym", asym_encode(4), asym_decode, name="py-asym", config=SMALL, quick=False)
    assert r.passed, r.first_failure
    v = r.verdict("kernel-vs-reference/py-asym")
    assert v.status == "pass" and v.checked > 0

    def lo_off_by_one_ulp(x, block):  # a wrong offset must be a difference, not ignored
        c, s, lo = asym_encode(4)(x, block)
        return c, s, np.nextafter(lo, np.float32(np.inf))

    bad = qtransit.check_codec("int4-asym", lo_off_by_one_ulp, asym_decode, name="py-asym", config=SMALL, quick=False)
    assert not bad.passed and "offset" in bad.verdict("kernel-vs-reference/py-asym").message


def test_a_codec_that_never_refuses_fails():
    def no_refusal(x, block):  # the same quantizer without its check for NaN and inf
        with np.errstate(invalid="ignore"):
            return sym_encode(8)(np.where(np.isfinite(x), x, np.float32(0)), block)

    r = qtransit.check_codec("int8", no_refusal, sym_decode, name="py-accepts-nan", config=SMALL, quick=False)
    assert not r.passed
    assert "NaN probe" in r.verdict("kernel-vs-reference/py-accepts-nan").message

    def no_offsets(x, block):
        return asym_encode(4)(x, block)[:2]

    missing = qtransit.check_codec("int4-asym", no_offsets, asym_decode, config=SMALL, quick=False)
    assert not missing.passed and "offset" in missing.verdict("kernel-vs-reference/python-codec").message

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


def test_simulate_runs_a_python_codec_on_the_paths():
    """simulate(codec=(encode, decode)): the Python quantizer runs every Q and D of the paths, as
    `simulate --codec` does (issue 52: simulate could not take a Python codec)."""
    calls = []

    def encode(x, block):
        calls.append(x.size)
        return sym_encode(8)(x, block)

    r = qtransit.simulate(["a2a-rs", "ring-rs"], ranks=[4, 8], elements=512, format="int8", codec=(encode, sym_decode))
    assert r.passed, r.first_failure
    assert calls, "the codec never ran"
    plain = qtransit.simulate(["a2a-rs", "ring-rs"], ranks=[4, 8], elements=512, format="int8")
    # The correct codec is the reference's arithmetic: the same errors as qtransit's own kernel.
    assert [x.rel_rms_error for x in r.runs] == [x.rel_rms_error for x in plain.runs]
    bad = qtransit.simulate("a2a-rs", ranks=4, elements=512, format="int8", codec=(sym_encode(8, np.trunc), sym_decode))
    assert not bad.passed
    with pytest.raises(ValueError, match="codec: name its format"):
        qtransit.simulate("a2a-rs", ranks=4, elements=512, codec=(encode, sym_decode))


def fp8_as_written(reciprocal=False):
    """A per-block float8 quantizer as people write it with ml_dtypes: s = amax / 448 (no floor),
    then the cast, which does not saturate (inf -> NaN); NaN and inf go through."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    f8 = ml_dtypes.float8_e4m3fn

    def encode(x, block):
        n = x.size
        nb = -(-n // block)
        b = np.zeros(nb * block, np.float32)
        b[:n] = x
        b = b.reshape(nb, block)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            s = (np.max(np.abs(b), axis=1) / np.float32(448)).astype(np.float32)
            v = b * (np.float32(1) / s)[:, None] if reciprocal else b / s[:, None]
            codes = v.astype(np.float32).astype(f8).view(np.uint8)
        return codes.reshape(-1)[:n].astype(np.int32), s

    def decode(codes, scales, offsets, block):
        n = codes.size
        v = np.zeros(scales.size * block, np.float32)
        v[:n] = codes.astype(np.uint8).view(f8).astype(np.float32)
        with np.errstate(over="ignore", invalid="ignore"):
            return (v.reshape(scales.size, block) * scales[:, None]).reshape(-1)[:n].astype(np.float32)

    return encode, decode


CONVENTIONS = """name = "py-fp8-as-written"
like = "fp8-e4m3"
[conventions]
nonfinite = "propagate"
scale_floor = "none"
zero_scale = "ieee"
overflow = "nonfinite"
"""


def test_declared_conventions_set_a_librarys_extremes_apart(tmp_path):
    enc, dec = fp8_as_written()
    plain = qtransit.check_codec("fp8-e4m3", enc, dec, name="py-fp8", config=SMALL)
    assert not plain.passed  # a zero block is 0/0 = NaN, a tiny one's scale underflows
    decl = tmp_path / "lib.toml"
    decl.write_text(CONVENTIONS)
    r = qtransit.check_codec(str(decl), enc, dec, name="py-fp8", config=SMALL)
    v = r.verdict("kernel-vs-reference/py-fp8")
    assert r.passed, v.message
    assert "convention mismatches, as declared: " in v.message
    checks = [c for c in __import__("json").loads(r.to_json())["format_checks"] if c.get("convention_mismatches")]
    found = {m["convention"]: m for c in checks for m in c["convention_mismatches"]}
    assert {"zero_scale", "scale_floor", "nonfinite"} <= set(found), found
    assert found["zero_scale"]["rule"] == "ieee" and found["zero_scale"]["blocks"] > 0
    assert "decodes NaN" in found["zero_scale"]["first"]
    # The same library with a real difference besides: the conventions do not hide it.
    enc_r, dec_r = fp8_as_written(reciprocal=True)
    bad = qtransit.check_codec(str(decl), enc_r, dec_r, name="py-fp8-recip", config=SMALL)
    assert not bad.passed
    assert "near-ties" in bad.verdict("kernel-vs-reference/py-fp8-recip").message


def test_zero_sign_any_sets_a_librarys_positive_zeros_apart(tmp_path):
    # A library whose decode writes every zero as +0 (FBGEMM's MX4 table: its "-0" is a Python
    # integer). Under the format it fails on the sign of a zero; with zero_sign = "any" declared the
    # blocks whose only differences are zero signs are convention mismatches, tallied apart.
    enc, dec = fp8_as_written()

    def dec_pos(codes, scales, offsets, block):
        d = dec(codes, scales, offsets, block)
        return np.where(d == 0, np.float32(0), d).astype(np.float32)

    decl = tmp_path / "lib.toml"
    decl.write_text(CONVENTIONS)
    plain = qtransit.check_codec(str(decl), enc, dec_pos, name="py-fp8-pos", config=SMALL)
    assert not plain.passed
    assert "reference -0" in plain.verdict("kernel-vs-reference/py-fp8-pos").message
    decl.write_text(CONVENTIONS.replace("py-fp8-as-written", "py-fp8-positive-zeros") + 'zero_sign = "any"\n')
    r = qtransit.check_codec(str(decl), enc, dec_pos, name="py-fp8-pos", config=SMALL)
    assert r.passed, r.verdict("kernel-vs-reference/py-fp8-pos").message
    checks = __import__("json").loads(r.to_json())["format_checks"]
    found = {m["convention"]: m for c in checks for m in c.get("convention_mismatches", [])}
    assert found["zero_sign"]["rule"] == "any" and found["zero_sign"]["blocks"] > 0, found
    assert "decodes 0, the format's reference -0" in found["zero_sign"]["first"]

    # A zero where the format has a value is not a sign: flushing the subnormal grid still fails.
    def dec_flush(codes, scales, offsets, block):
        d = dec_pos(codes, scales, offsets, block)
        sub = (np.asarray(codes).astype(np.uint8) & 0x78) == 0
        return np.where(sub, np.float32(0), d).astype(np.float32)

    bad = qtransit.check_codec(str(decl), enc, dec_flush, name="py-fp8-flush", config=SMALL)
    assert not bad.passed


def hfp8_like(saturate_nonfinite):
    """FBGEMM's HFP8 (1-4-3, bias 15, largest 0.9375: fbgemm-fp8) as a saturating cast: ml_dtypes'
    IEEE-style float8_e4m3 (bias 7, largest 240) on x * 2^8, the same grid scaled. With
    saturate_nonfinite, NaN and +-inf are written as the largest value of their sign bit, as FBGEMM's
    fminf does; without, they are refused."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    f8 = ml_dtypes.float8_e4m3

    def encode(x, block):
        x = np.asarray(x, np.float32)
        if not saturate_nonfinite and not np.all(np.isfinite(x)):
            raise ValueError("NaN or inf")
        with np.errstate(over="ignore", invalid="ignore"):
            big = np.where(np.isnan(x), np.copysign(np.float32(np.inf), x), x * np.float32(256))
        v = np.clip(big, -240, 240).astype(np.float32).astype(f8)
        return v.view(np.uint8).astype(np.int32), np.ones(-(-x.size // block), np.float32)

    def decode(codes, scales, offsets, block):
        return (np.asarray(codes).astype(np.uint8).view(f8).astype(np.float32) * np.float32(1 / 256)).astype(np.float32)

    return encode, decode


def test_nonfinite_saturate_is_a_saturating_casts_convention(tmp_path):
    plain = qtransit.check_codec("fbgemm-fp8", *hfp8_like(False), name="hfp8-refusing", config=SMALL)
    assert plain.passed, plain.first_failure  # the same grid: the cast is the format
    enc, dec = hfp8_like(True)
    sat = qtransit.check_codec("fbgemm-fp8", enc, dec, name="hfp8-saturating", config=SMALL)
    assert not sat.passed  # it encodes NaN and inf, which the format refuses
    assert "encoded a block the reference refuses" in sat.first_failure or "lengths" in sat.first_failure, sat.first_failure
    decl = tmp_path / "hfp8.toml"
    decl.write_text('name = "hfp8-saturating"\nlike = "fbgemm-fp8"\n[conventions]\nnonfinite = "saturate"\n')
    r = qtransit.check_codec(str(decl), enc, dec, name="hfp8-saturating", config=SMALL)
    assert r.passed, r.first_failure
    checks = __import__("json").loads(r.to_json())["format_checks"]
    found = {m["convention"]: m for c in checks for m in c.get("convention_mismatches", [])}
    for c in checks:
        for b in c.get("boundary_classes", []):
            for m in b.get("conventions", []):
                found.setdefault(m["convention"], m)
    assert found["nonfinite"]["rule"] == "saturate" and found["nonfinite"]["blocks"] > 0, found
    # A cast that writes NaN as +largest whatever its sign is not the declared rule: it fails.
    def enc_pos_nan(x, block):
        codes, scales = enc(x, block)
        x = np.asarray(x, np.float32)
        return np.where(np.isnan(x), 0x77, codes), scales

    bad = qtransit.check_codec(str(decl), enc_pos_nan, dec, name="hfp8-nan-positive", config=SMALL)
    assert not bad.passed
    with pytest.raises(ValueError, match="conventions.nonfinite: 'saturate' is for formats without a scale"):
        bad_decl = tmp_path / "bad.toml"
        bad_decl.write_text('name = "fp8-saturating"\nlike = "fp8-e4m3"\n[conventions]\nnonfinite = "saturate"\n')
        qtransit.check_codec(str(bad_decl), enc, dec, name="x", config=SMALL)
