"""qtransit's Python API: every function, fp16 and bf16 inputs, non-contiguous arrays, NaN under both
policies, wrong shapes, and agreement with the CLI's JSON for the same runs, number for number."""

import json
import os
import subprocess

import ml_dtypes
import numpy as np
import pytest

import qtransit
import qtransit.layouts
import qtransit.strategies

RNG = np.random.default_rng(7)


def run_cli(cli, *args, expect=(0,)):
    p = subprocess.run([cli, *map(str, args)], capture_output=True, text=True, timeout=600)
    assert p.returncode in expect, (args, p.returncode, p.stderr)
    return p


def cli_json(cli, *args, expect=(0,)):
    return json.loads(run_cli(cli, *args, expect=expect).stdout)


def normal(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


# ---- formats ---------------------------------------------------------------------------------------

def test_formats_match_the_cli(cli):
    fs = qtransit.formats()
    names = [f.format for f in fs]
    assert "int4" in names and "int8" in names and "mxfp4" in names
    assert [f.to_dict() for f in fs] == cli_json(cli, "formats", "--json")["formats"]
    int4 = fs[names.index("int4")]
    assert int4.bits_per_element == 4 and int4.code_min == -7 and int4.code_max == 7
    assert repr(int4) == "int4"


def test_formats_bad_block():
    with pytest.raises(ValueError, match="block"):
        qtransit.formats(block=0)


# ---- quantize ----------------------------------------------------------------------------------------

def test_quantize_matches_the_cli(cli, tmp_path):
    x = normal(4, 96)
    np.save(tmp_path / "x.npy", x)
    r = qtransit.quantize("int4", x, block=32)
    assert r.passed and r.first_failure == ""
    assert r.bound_holds and r.matches_reference
    assert r.codes.shape == (4, 96) and r.decoded.shape == (4, 96) and r.scales.shape == (12,)
    assert r.worst_error == r.max_abs_error == float(np.max(np.abs(x - r.decoded)))
    want = cli_json(cli, "quantize", "--format", "int4", "--in", tmp_path / "x.npy", "--json")
    assert r.to_dict() == want
    assert np.array_equal(r.decoded.reshape(-1), np.array(want["decoded"], dtype=np.float32))  # binary32's shortest decimals
    assert r.codes.reshape(-1).tolist() == want["codes"]
    assert len(r.wire) == want["wire_bytes"] - 4 * 12  # codes only; the scales are r.scales


def test_quantize_asym_offsets_and_stochastic(cli, tmp_path):
    x = normal(256)
    r = qtransit.quantize("int4-asym", x)
    assert r.passed and r.offsets.shape == (8,)
    s = qtransit.quantize("int4", x, rounding="stochastic", seed=11)
    np.save(tmp_path / "x.npy", x)
    assert s.to_dict() == cli_json(cli, "quantize", "--format", "int4", "--rounding", "stochastic", "--seed", 11,
                                   "--in", tmp_path / "x.npy", "--json")


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
def test_quantize_16_bit_inputs(cli, tmp_path, dtype):
    x = normal(128).astype(dtype)
    r = qtransit.quantize("int8", x)
    wide = qtransit.quantize("int8", x.astype(np.float32))
    assert r.to_dict() == wide.to_dict()  # widened exactly, then quantized
    if dtype == np.float16:
        np.save(tmp_path / "x.npy", x)
        assert r.to_dict() == cli_json(cli, "quantize", "--format", "int8", "--in", tmp_path / "x.npy", "--json")


def test_quantize_non_contiguous_is_copied():
    x = normal(64, 64)
    view = x[:, ::2]  # strided
    assert not view.flags.c_contiguous
    assert qtransit.quantize("int4", view).to_dict() == qtransit.quantize("int4", np.ascontiguousarray(view)).to_dict()
    t = x.T
    r = qtransit.quantize("int4", t)
    assert r.decoded.shape == (64, 64)
    assert r.to_dict() == qtransit.quantize("int4", np.ascontiguousarray(t)).to_dict()


def test_quantize_nan_under_both_policies(cli, tmp_path):
    x = normal(96)
    x[37] = np.nan
    with pytest.raises(ValueError, match=r"37") as e:
        qtransit.quantize("int4", x)
    assert "\n" not in str(e.value)
    np.save(tmp_path / "x.npy", x)
    p = run_cli(cli, "quantize", "--format", "int4", "--in", tmp_path / "x.npy", expect=(2,))
    assert "37" in p.stderr
    r = qtransit.quantize("int4", x, nonfinite="propagate")
    assert r.poisoned_blocks == 1
    assert np.isnan(r.scales[1]) and np.all(np.isnan(r.decoded[32:64]))
    assert r.to_dict() == cli_json(cli, "quantize", "--format", "int4", "--nonfinite", "propagate",
                                   "--in", tmp_path / "x.npy", "--json")
    # .summary() is the command's text (it was "" before)
    p = run_cli(cli, "quantize", "--format", "int4", "--nonfinite", "propagate", "--in", tmp_path / "x.npy")
    assert r.summary() == p.stdout and "1 poisoned" in r.summary()


# Every integer keyword is checked before anything runs, as the command line checks its flags, and
# named as the caller wrote it. Before: block=0 ran at the format's own block, block=1.5 ran at 1,
# threads, ranks_per_node and shard of -1 ran, and seed=-1 was nanobind's signature dump.
X64 = normal(64)
BAD_INTEGERS = [
    (lambda: qtransit.quantize("int8", X64, block=0), ValueError, "block=0: a positive integer, or None for the format's own"),
    (lambda: qtransit.quantize("int8", X64, block=1.5), TypeError, "block=1.5: .*not float"),
    (lambda: qtransit.quantize("int8", X64, block=True), TypeError, "block=True"),
    (lambda: qtransit.quantize("int8", X64, block="32"), TypeError, "block='32'"),
    (lambda: qtransit.quantize("int8", X64, seed=-1), ValueError, r"seed=-1: an integer from 0 to 2\^64 - 1"),
    (lambda: qtransit.verify_quantize("int8", X64, X64, block=0), ValueError, "block=0"),
    (lambda: qtransit.verify_quantize("int8", X64, X64, shard=-1), ValueError, "shard=-1: a non-negative integer"),
    (lambda: qtransit.simulate("ring-rs", ranks=4, elements=256, format="int8", block=0), ValueError, "block=0"),
    (lambda: qtransit.simulate("ring-rs", ranks=4, elements=256, format="int8", threads=-1), ValueError, "threads=-1"),
    (lambda: qtransit.simulate("ring-rs", ranks=4, elements=256, format="int8", ranks_per_node=-1), ValueError,
     "ranks_per_node=-1"),
    (lambda: qtransit.simulate("ring-rs", ranks=[8, 0], elements=256, format="int8"), ValueError, r"ranks\[1\]=0"),
    (lambda: qtransit.simulate("ring-rs", ranks=4.0, elements=256, format="int8"), TypeError, "ranks=4.0"),
    (lambda: qtransit.simulate("ring-rs", ranks=4, format="int8"), ValueError, "ranks and elements"),
    (lambda: qtransit.simulate("ring-rs", ranks=4, elements=256, format="int8", seed=-3), ValueError, "seed=-3"),
    (lambda: qtransit.verify_collective("ring-rs", np.zeros((4, 8), np.float32), np.zeros((4, 2), np.float32), format="int8",
                                        block=0), ValueError, "block=0"),
    (lambda: qtransit.verify_collective("ring-rs", np.zeros((4, 8), np.float32), np.zeros((4, 2), np.float32), format="int8",
                                        ring_order=[0, 1, 2.5, 3]), TypeError, r"ring_order\[2\]=2.5"),
    (lambda: qtransit.survey(["int8"], ["normal"], elements=0), ValueError, "elements=0: a positive integer"),
    (lambda: qtransit.survey(["int8"], ["normal"], elements=256, block=0), ValueError, "block=0"),
    (lambda: qtransit.formats(block=0), ValueError, "block=0: a positive integer"),
    (lambda: qtransit.check_codec("int8", None, None, block_multiple=0), ValueError, "block_multiple=0"),
    (lambda: qtransit.validate_format("x.toml", seed=-1), ValueError, "seed=-1"),
    (lambda: qtransit.layouts.quickreduce(8.5, 16384), TypeError, "ranks=8.5"),  # was run at 8
    (lambda: qtransit.strategies.boundary_cases("int8", 32, other_blocks=[1, 0]), ValueError, r"other_blocks\[1\]=0"),
    (lambda: qtransit.strategies.blocks("int8", 16.5), TypeError, "block=16.5"),
]


@pytest.mark.parametrize("call,error,message", BAD_INTEGERS, ids=[m for _, _, m in BAD_INTEGERS])
def test_integer_arguments_are_checked_and_named(call, error, message):
    with pytest.raises(error, match=message) as e:
        call()
    assert "--" not in str(e.value)  # the keyword, never the command line's flag


def test_numpy_integers_are_integers():
    a = qtransit.quantize("int8", X64, block=np.int64(16), seed=np.uint64(5))
    b = qtransit.quantize("int8", X64, block=16, seed=5)
    assert a.to_json() == b.to_json()
    s = qtransit.simulate("ring-rs", ranks=np.array([4, 8])[0], elements=np.int32(256), format="int8", threads=np.int8(1))
    assert s.passed and [r.ranks for r in s.runs] == [4]


def test_quantize_bad_inputs():
    with pytest.raises(ValueError, match="int4") as e:  # the known formats are listed
        qtransit.quantize("int9", normal(8))
    assert "int8" in str(e.value)
    with pytest.raises(ValueError, match="float64"):
        qtransit.quantize("int4", np.zeros(8))
    with pytest.raises(ValueError, match="list"):
        qtransit.quantize("int4", [1.0, 2.0])
    with pytest.raises(ValueError, match="non-finite policy 'ignore'; known policies: error, propagate"):
        qtransit.quantize("int4", normal(8), nonfinite="ignore")
    with pytest.raises(ValueError, match="block"):
        qtransit.quantize("int4", normal(8), block=-1)
    with pytest.raises(ValueError, match="no elements"):  # a check of nothing never passes
        qtransit.quantize("int4", np.zeros(0, dtype=np.float32))


def test_quantize_raise_on_failure_only_when_asked():
    r = qtransit.quantize("int4", normal(32), raise_on_failure=True)  # passes: nothing raised
    assert r.passed


# ---- DLPack ----------------------------------------------------------------------------------------------

class DLPackOnly:
    """A tensor that is not a numpy array and offers only the DLPack protocol (torch's CPU tensors do the same)."""

    def __init__(self, a):
        self._a = a

    def __dlpack__(self, **kw):
        return self._a.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()


class OnTheGpu:
    """What a CUDA tensor shows qtransit: a CUDA DLPack device and .cpu() (a stand-in for torch's:
    this machine has no GPU; it checks the dispatch, not CUDA)."""

    def __init__(self, a):
        self._a = a

    def __dlpack_device__(self):
        return (2, 0)

    def __dlpack__(self, **kw):
        raise BufferError("not on the host")

    def cpu(self):
        return DLPackOnly(self._a)


def test_dlpack_tensors():
    x = normal(128)
    want = qtransit.quantize("int4", x).to_dict()
    assert qtransit.quantize("int4", DLPackOnly(x)).to_dict() == want
    assert qtransit.quantize("int4", OnTheGpu(x)).to_dict() == want


def test_torch_when_present():
    torch = pytest.importorskip("torch")
    x = torch.randn(256)
    want = qtransit.quantize("int4", x.numpy()).to_dict()
    assert qtransit.quantize("int4", x).to_dict() == want
    b = x.to(torch.bfloat16)
    assert qtransit.quantize("int4", b).to_dict() == qtransit.quantize("int4", b.float().numpy()).to_dict()
    if torch.cuda.is_available():
        assert qtransit.quantize("int4", x.cuda()).to_dict() == want


def test_zero_copy_for_contiguous_float32():
    from qtransit import _arrays

    x = normal(64)
    a, _ = _arrays.as_f32(x, "x")
    assert a is x or np.shares_memory(a, x)
    b, _ = _arrays.as_f32(DLPackOnly(x), "x")
    assert np.shares_memory(b, x)


# ---- verify_quantize -------------------------------------------------------------------------------------

def test_verify_quantize_matches_the_cli(cli, tmp_path):
    x = normal(2, 128)
    q = qtransit.quantize("int4", x)
    r = qtransit.verify_quantize("int4", x, q.decoded, codes=q.codes, scales=q.scales)
    assert r.passed and r.exact and r.conforms and r.differing_elements == 0
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "d.npy", q.decoded)
    np.save(tmp_path / "c.npy", q.codes.astype(np.int8))
    np.save(tmp_path / "s.npy", q.scales)
    want = cli_json(cli, "verify", "quantize", "--format", "int4", "--in", tmp_path / "x.npy", "--decoded", tmp_path / "d.npy",
                    "--codes", tmp_path / "c.npy", "--scales", tmp_path / "s.npy", "--json", "--report-dir", "")
    assert r.to_dict() == want
    (tmp_path / "w.bin").write_bytes(q.wire)
    rw = qtransit.verify_quantize("int4", x, q.decoded, wire=q.wire, scales=q.scales)
    assert rw.to_dict() == cli_json(cli, "verify", "quantize", "--format", "int4", "--in", tmp_path / "x.npy", "--decoded",
                                    tmp_path / "d.npy", "--codes", tmp_path / "w.bin", "--scales", tmp_path / "s.npy", "--json",
                                    "--report-dir", "")
    r.write_reports(tmp_path / "rep")
    rep = json.loads((tmp_path / "rep" / "report.json").read_text())
    assert {v["name"]: v["status"] for v in rep["verdicts"]} == {"verify/quantize/int4/exact": "pass",
                                                                 "verify/quantize/int4/bounded": "skip"}


def test_verify_quantize_names_the_first_difference(cli, tmp_path):
    x = normal(96)
    q = qtransit.quantize("int4", x)
    d = q.decoded.copy()
    d[50] = np.nextafter(d[50], np.float32(np.inf))
    r = qtransit.verify_quantize("int4", x, d)
    assert not r.passed and r.differing_elements == 1
    assert "element 50" in r.first_failure
    b = qtransit.verify_quantize("int4", x, d, conformance="bounded")
    assert b.passed  # one ulp is within the bound
    with pytest.raises(qtransit.CheckFailed, match="element 50") as e:
        qtransit.verify_quantize("int4", x, d, raise_on_failure=True)
    assert e.value.result.differing_elements == 1
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "d.npy", d)
    want = cli_json(cli, "verify", "quantize", "--format", "int4", "--in", tmp_path / "x.npy", "--decoded", tmp_path / "d.npy",
                    "--json", "--report-dir", "", expect=(1,))
    assert r.to_dict() == want


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
def test_verify_quantize_16_bit(dtype):
    x = normal(64).astype(dtype)
    q = qtransit.quantize("int8", x)
    r = qtransit.verify_quantize("int8", x, q.decoded, codes=q.codes, scales=q.scales)
    assert r.passed and r.elements == 64  # x widened exactly: the reference's result on the same values
    d16 = q.decoded.astype(dtype)  # a kernel that stores its decoded values in 16 bits
    r16 = qtransit.verify_quantize("int8", x, d16, conformance="bounded")
    wide = qtransit.verify_quantize("int8", x.astype(np.float32), d16.astype(np.float32), conformance="bounded")
    assert r16.to_dict() == wide.to_dict()
    assert r16.differing_elements > 0  # the 16-bit rounding shows


def test_verify_quantize_wrong_shapes():
    x = normal(64)
    with pytest.raises(ValueError, match="shape"):
        qtransit.verify_quantize("int4", x, normal(63))
    with pytest.raises(ValueError, match="codes"):
        qtransit.verify_quantize("int4", x, x, codes=np.zeros(10, dtype=np.int8))
    with pytest.raises(ValueError, match="codes"):
        qtransit.verify_quantize("int4", x, x, codes=np.zeros(64, dtype=np.float32))
    with pytest.raises(ValueError, match="offsets"):
        qtransit.verify_quantize("int4", x, x, offsets=np.zeros(2, dtype=np.float32))
    nan = x.copy()
    nan[3] = np.nan
    with pytest.raises(ValueError, match="3"):
        qtransit.verify_quantize("int4", nan, x)


# ---- simulate ----------------------------------------------------------------------------------------------

def test_simulate_matches_the_cli(cli):
    r = qtransit.simulate(["a2a-rs", "ring-rs"], ranks=[8, 16], elements=1024, format="int4")
    assert r.passed and len(r.runs) == 4 and len(r.fits) == 2
    a2a = [run for run in r.runs if run.path == "a2a-rs"]
    assert all(run.k_max == 1 for run in a2a)
    want = cli_json(cli, "simulate", "--path", "a2a-rs", "--path", "ring-rs", "--ranks", 8, "--ranks", 16, "--elements", 1024,
                    "--format", "int4", "--json")
    assert r.to_dict() == want
    # every output's k is checked against NUMERICS.md section 3, as the gate does (k_checked was 0)
    assert all(run.k_checked >= 8 and run.k_mismatches == 0 for run in r.runs)
    # .summary() is the command's table (it was "" before)
    p = run_cli(cli, "simulate", "--path", "a2a-rs", "--path", "ring-rs", "--ranks", 8, "--ranks", 16, "--elements", 1024,
                "--format", "int4")
    assert r.summary() == p.stdout and r.summary().startswith("path ")


def test_simulate_on_given_inputs(cli, tmp_path):
    x = normal(8, 512)
    r = qtransit.simulate("ring-rs", inputs=x, format="int8", keep_outputs=True)
    assert r.passed and r.outputs.shape == (8, 64)
    np.save(tmp_path / "in.npy", x)
    want = cli_json(cli, "simulate", "--path", "ring-rs", "--in", tmp_path / "in.npy", "--format", "int8", "--json")
    for run in want["runs"]:
        run["dist"] = "file:inputs"
    assert r.to_dict() == want
    h = qtransit.simulate("ring-rs", inputs=x.astype(np.float16), format="int8")
    assert h.runs[0].elements == 512


def test_simulate_nccl_fp8_counts_its_saturations(cli, tmp_path):
    # NCCL's FP8 ring all-reduce (D41): e4m3 inputs near 448 clamp; the count is in the result, as in
    # the command's JSON; the outputs are FP8 values (ml_dtypes' e4m3fn holds them exactly).
    rng = np.random.default_rng(3)
    x = (rng.integers(-14, 15, size=(4, 64)) * 16.0).astype(np.float32)  # multiples of 16 up to 224: e4m3 values
    r = qtransit.simulate("nccl-fp8-e4m3-ring-ar", inputs=x, keep_outputs=True)
    assert r.passed and r.outputs.shape == (4, 64)
    run = r.to_dict()["runs"][0]
    assert run["saturated_outputs"] > 0 and run["max_saturations"] >= 1
    assert np.array_equal(r.outputs.astype(ml_dtypes.float8_e4m3fn).astype(np.float32), r.outputs)
    assert np.abs(r.outputs).max() <= 448
    np.save(tmp_path / "in.npy", x)
    want = cli_json(cli, "simulate", "--path", "nccl-fp8-e4m3-ring-ar", "--in", tmp_path / "in.npy", "--json")
    want["runs"][0]["dist"] = "file:inputs"
    assert r.to_dict() == want


def test_simulate_runs_a_declared_path(tmp_path):
    # docs/PATHS.md: ncclAvg by name is the FP8 ring with --divide pre, the row named by the declaration;
    # a user's file of declarations runs the same way, and a contradicting option is refused.
    x = np.full((3, 3), 104.0, dtype=np.float32)
    r = qtransit.simulate("nccl-fp8-e4m3-ring-ar-avg", inputs=x, block=1)
    run = r.to_dict()["runs"][0]
    assert run["path"] == "nccl-fp8-e4m3-ring-ar-avg" and run["schedule"] == "nccl-fp8-e4m3-ring-ar"
    assert run["divide"] == "pre" and run["max_abs_error"] == 8.0  # 3 x fl8(1/3) x 104 = 112
    f = tmp_path / "qr.toml"
    f.write_text('[[path]]\nname = "qr-int4"\ncollective = "all-reduce"\nexchange = "two-shot"\nwire = "int4"\nadd = "fp16"\n')
    q = qtransit.simulate(str(f), ranks=8, elements=2048).to_dict()["runs"][0]
    assert (q["path"], q["schedule"], q["format"], q["accum"], q["k_max"]) == ("qr-int4", "two-shot-ar", "int4", "fp16", 2)
    with pytest.raises(ValueError, match="contradicts the declared path qr-int4"):
        qtransit.simulate(str(f), ranks=8, elements=2048, format="int8")
    listed = {p["name"]: p for p in qtransit.paths()}
    assert listed["nccl-fp8-e5m2-tree-ar-avg"]["divide"] == "pre" and listed["ring-rs"]["wire"] == ["any"]
    assert 'divide = "pre"' in qtransit.show_path("nccl-fp8-e4m3-ring-rs-avg")


def test_simulate_errors():
    with pytest.raises(ValueError, match="dimensions"):
        qtransit.simulate("ring-rs", inputs=normal(512), format="int8")
    with pytest.raises(ValueError, match="ranks"):
        qtransit.simulate("ring-rs", elements=512, format="int8")
    with pytest.raises(ValueError, match="a2a-rs"):  # the known paths are listed
        qtransit.simulate("ring-xx", ranks=8, elements=512, format="int8")
    with pytest.raises(ValueError, match="no path given"):  # (an empty list crashed the interpreter)
        qtransit.simulate([], ranks=8, elements=512, format="int8")
    x = normal(8, 512)
    x[3, 100] = np.nan
    with pytest.raises(ValueError, match=r"rank 3.*100|100.*rank 3"):
        qtransit.simulate("ring-rs", inputs=x, format="int8")


# ---- verify_collective ---------------------------------------------------------------------------------------

def test_verify_collective_matches_the_cli(cli, tmp_path):
    x = normal(8, 1024)
    sim = qtransit.simulate("a2a-rs", inputs=x, format="int4", keep_outputs=True)
    r = qtransit.verify_collective("a2a-rs", x, sim.outputs, format="int4")
    assert r.passed and r.asked == "same-events"
    np.save(tmp_path / "in.npy", x)
    np.save(tmp_path / "out.npy", sim.outputs)
    want = cli_json(cli, "verify", "collective", "--path", "a2a-rs", "--format", "int4", "--ranks", 8, "--inputs",
                    tmp_path / "in.npy", "--outputs", tmp_path / "out.npy", "--json", "--report-dir", "")
    assert r.to_dict() == want
    exact = qtransit.verify_collective("a2a-rs", x, sim.outputs, format="int4", conformance="exact")
    assert exact.passed
    r.write_reports(tmp_path / "rep")
    assert (tmp_path / "rep" / "report.html").exists() and (tmp_path / "rep" / "junit.xml").exists()


def test_verify_collective_finds_a_wrong_output(cli, tmp_path):
    x = normal(8, 1024)
    sim = qtransit.simulate("a2a-rs", inputs=x, format="int4", keep_outputs=True)
    y = sim.outputs.copy()
    y[5, 17] += np.float32(0.5)
    r = qtransit.verify_collective("a2a-rs", x, y, format="int4")
    assert not r.passed and "same-events violated" in r.first_failure
    np.save(tmp_path / "in.npy", x)
    np.save(tmp_path / "out.npy", y)
    want = cli_json(cli, "verify", "collective", "--path", "a2a-rs", "--format", "int4", "--ranks", 8, "--inputs",
                    tmp_path / "in.npy", "--outputs", tmp_path / "out.npy", "--json", "--report-dir", "", expect=(1,))
    assert r.to_dict() == want
    with pytest.raises(qtransit.CheckFailed):
        qtransit.verify_collective("a2a-rs", x, y, format="int4", raise_on_failure=True)


def test_verify_collective_16_bit_outputs():
    x = normal(8, 256).astype(np.float16)
    sim = qtransit.simulate("fp32-ring-rs", inputs=x.astype(np.float32), keep_outputs=True, format="int8")
    r = qtransit.verify_collective("fp32-ring-rs", x, sim.outputs.astype(np.float16), format="int8", conformance="bounded")
    assert r.passed, r.first_failure


def test_verify_collective_wrong_shapes():
    x = normal(8, 1024)
    with pytest.raises(ValueError, match=r"\[8, 128\]"):
        qtransit.verify_collective("a2a-rs", x, normal(8, 1024), format="int4")
    with pytest.raises(ValueError, match="dimensions"):
        qtransit.verify_collective("a2a-rs", normal(1024), normal(8, 128), format="int4")
    with pytest.raises(ValueError, match="ring"):
        qtransit.verify_collective("a2a-rs", x, normal(8, 128), format="int4", ring_order=[0, 1])


# ---- check ---------------------------------------------------------------------------------------------------

SMALL = {"gate": {"formats": ["int4", "int8"], "paths": ["ring-rs", "a2a-rs"], "distributions": ["normal"],
                  "ranks": [8, 16, 32], "elements": 1024},
         "scaling": [{"path": "a2a-rs", "min": -0.05, "max": 0.05, "why": "one hop: quantized once"}],
         "budget": [{"name": "our-int4-rs", "path": "a2a-rs", "format": "int4", "metric": "rel_rms_error", "max": 0.12}]}


def strip(report):
    """A report.json without what differs between two runs of the same gate: timestamps, seconds, the
    config's name, and the GPU verdict's reason for skipping (the package is built without CUDA)."""
    report = json.loads(json.dumps(report))
    for k in ("started_at", "wall_seconds", "config"):
        report.pop(k, None)
    for v in report.get("verdicts", []):
        if v["name"] == "kernel-vs-reference-gpu":
            assert v["status"] == "skip", v
            v.pop("message")
    for run in report.get("runs", []):
        for k in list(run):
            if "seconds" in k:
                run.pop(k)
    return report


def test_check_matches_the_cli(cli, tmp_path):
    r = qtransit.check(SMALL)
    assert r.passed, r.first_failure
    assert r.verdict("budget/our-int4-rs").status == "pass"
    assert r.verdict("no-such-verdict") is None
    from qtransit import _toml

    (tmp_path / "gate.toml").write_text(_toml.dumps(SMALL))
    run_cli(cli, "check", "--config", tmp_path / "gate.toml", "--report-dir", tmp_path / "cli")
    want = json.loads((tmp_path / "cli" / "report.json").read_text())
    assert strip(r.to_dict()) == strip(want)
    from_file = qtransit.check(tmp_path / "gate.toml")
    assert strip(from_file.to_dict()) == strip(want)
    r.write_reports(tmp_path / "py")
    assert sorted(os.listdir(tmp_path / "py")) == sorted(os.listdir(tmp_path / "cli"))


def test_check_failure_is_a_result_unless_asked():
    tight = json.loads(json.dumps(SMALL))
    tight["budget"][0]["max"] = 0.01
    r = qtransit.check(tight)
    assert not r.passed and r.first_failure.startswith("budget/our-int4-rs: ")
    with pytest.raises(qtransit.CheckFailed, match="budget/our-int4-rs"):
        qtransit.check(tight, raise_on_failure=True)


def test_check_config_errors(tmp_path):
    with pytest.raises(ValueError, match="gate.elements"):
        qtransit.check({"gate": {"ranks": [16], "elements": 1000}})
    with pytest.raises(ValueError, match="no such file"):
        qtransit.check(tmp_path / "missing.toml")
    with pytest.raises(ValueError, match="dict"):
        qtransit.check(42)
    with pytest.raises(ValueError, match="TOML"):
        qtransit.check({"gate": {"formats": [object()]}})


def test_check_quick_default_gate():
    r = qtransit.check(quick=True)
    assert r.passed, r.first_failure
    assert r.gate.ranks == [8, 64] and r.gate.elements == 2048
    assert r.verdict("kernel-vs-reference/int4").status == "pass"


# ---- formats validate, formats show, survey, info (gate/commands.hpp: the command's own requests) ----

def test_show_format_is_the_clis_and_parses_back(cli, tmp_path):
    text = qtransit.show_format("int4")
    assert text == run_cli(cli, "formats", "show", "int4").stdout
    path = tmp_path / "my4.toml"
    path.write_text(text.replace('name = "int4"', 'name = "my4"'))
    assert qtransit.show_format(path) == run_cli(cli, "formats", "show", path).stdout
    assert 'name = "my4"' in qtransit.show_format(path)
    with pytest.raises(ValueError, match="unknown format 'nope'"):
        qtransit.show_format("nope")


def test_validate_format_matches_the_cli(cli, tmp_path):
    path = tmp_path / "my4.toml"
    path.write_text(qtransit.show_format("int4").replace('name = "int4"', 'name = "my4"'))
    r = qtransit.validate_format(path, quick=True)
    assert r.passed, r.first_failure
    assert r.verdict("kernel-vs-reference/my4").status == "pass"
    p = run_cli(cli, "formats", "validate", path, "--quick", "--report-dir", tmp_path / "cli")
    # The command's text is the summary and one line naming its files (times apart).
    import re

    def untimed(t):
        return re.sub(r"\d+(\.\d+)? s\b", "T s", t)

    assert untimed(p.stdout).startswith(untimed(r.summary()))
    assert untimed(p.stdout)[len(untimed(r.summary())):].startswith("report: ")
    want = json.loads((tmp_path / "cli" / "report.json").read_text())
    got = r.to_dict()
    assert [(v["name"], v["status"]) for v in strip(got)["verdicts"]] == [(v["name"], v["status"]) for v in strip(want)["verdicts"]]
    assert got["format_comparison"] == want["format_comparison"]
    r.write_reports(tmp_path / "py")
    assert sorted(os.listdir(tmp_path / "py")) == sorted(os.listdir(tmp_path / "cli"))
    assert "declaration.toml" in os.listdir(tmp_path / "py")


def test_validate_format_errors(tmp_path):
    with pytest.raises(ValueError, match="declaration file"):
        qtransit.validate_format()
    with pytest.raises(ValueError, match="formats validate takes a declaration file"):
        qtransit.validate_format(tmp_path / "not-a-declaration.txt")
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "bad"\nscale = "fp33"\n')
    with pytest.raises(ValueError, match="bad.toml"):
        qtransit.validate_format(bad)


def test_survey_matches_the_cli(cli, tmp_path):
    r = qtransit.survey(["int4", "fp8-e4m3"], ["normal", "heavy"], elements=4096)
    assert r.passed, r.first_failure
    assert [(c.format, c.dist) for c in r.cases] == [("int4", "normal"), ("int4", "heavy"), ("fp8-e4m3", "normal"),
                                                     ("fp8-e4m3", "heavy")]
    want = cli_json(cli, "survey", "--format", "int4,fp8-e4m3", "--dist", "normal,heavy", "--elements", 4096, "--json",
                    "--report-dir", tmp_path / "cli")
    assert r.to_dict() == want
    # .summary() is the survey.md the command writes (it raised AttributeError before)
    assert r.summary() == (tmp_path / "cli" / "survey.md").read_text()
    with pytest.raises(ValueError, match="--format int4 is named twice"):
        qtransit.survey(["int4", "int4"])
    with pytest.raises(ValueError, match="elements"):
        qtransit.survey("int4", elements=0)
    # block left out: a fixed-block format at its own (nvfp4's 16, a 2-D tile's area), as the CLI.
    own = qtransit.survey(["int4", "nvfp4", "fp8-e4m3-128x128"], ["normal"], elements=1024)
    assert own.passed, own.first_failure
    assert [c.block for c in own.cases] == [32, 16, 128 * 128]
    assert own.to_dict() == cli_json(cli, "survey", "--format", "int4,nvfp4,fp8-e4m3-128x128", "--dist", "normal", "--elements",
                                     1024, "--json", "--report-dir", tmp_path / "cli2")


def test_info_is_the_clis_but_the_allocator(cli):
    got = qtransit.info().to_dict()
    want = cli_json(cli, "info", "--json")
    assert got.pop("allocator").startswith("the Python interpreter's")
    want.pop("allocator")
    # The package is built without CUDA or NCCL (docs/PYTHON.md), and this process may have declared
    # formats of its own (validate_format registers them after the built-ins); the rest is the machine's.
    for k in ("cuda", "nccl", "gpu_note"):
        got.pop(k, None), want.pop(k, None)
    assert got.pop("formats")[:len(want["formats"])] == want.pop("formats")
    assert got == want
    assert qtransit.info().version == qtransit.__version__


def test_verify_quantize_takes_tiles_and_the_tensor_amax():
    # A tiled format (FORMATS.md section 8): x and decoded in x's shape, scales in tile order; what
    # quantize wrote passes exactly, one changed element does not, and a flat x is refused with its shape.
    x = np.random.default_rng(1).standard_normal((32, 48)).astype(np.float32)
    r = qtransit.quantize("nvfp4-2d", x)
    assert r.passed and r.codes.shape == (32, 48) and r.scales.shape == (6,)
    assert qtransit.verify_quantize("nvfp4-2d", x, r.decoded, codes=r.codes, scales=r.scales).passed
    d = r.decoded.copy()
    d[0, 47] += 1
    assert not qtransit.verify_quantize("nvfp4-2d", x, d).passed
    with pytest.raises(ValueError, match=r"tiles of 16 x 16; the tensor's shape is \[1536\]"):
        qtransit.verify_quantize("nvfp4-2d", x.reshape(-1), r.decoded.reshape(-1))
    # NVFP4 (D58): verify takes the tensor amax from x, as quantize did (the declared 2688 would not pass).
    y = x.reshape(-1) * np.float32(1e3)
    q = qtransit.quantize("nvfp4", y)
    assert np.float32(q.tensor_amax) == np.abs(y).max()  # the JSON prints the binary32 shortest
    assert qtransit.verify_quantize("nvfp4", y, q.decoded, codes=q.codes).passed
