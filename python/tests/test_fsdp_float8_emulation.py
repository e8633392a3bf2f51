"""FSDP2's float8 all-gather with torchao (`enable_fsdp_float8_all_gather`), emulated independently in
numpy from torchao's Python (pytorch/ao, read 2026-12-06: torchao/float8/fsdp_utils.py at 0a4b91d4,
`WeightWithDynamicFloat8CastTensor.fsdp_pre_all_gather` / `fsdp_post_all_gather`; float8_utils.py at
00141f40, `tensor_to_amax`, `amax_to_scale`, `to_fp8_saturated`; float8_tensor.py at 0a45ccd1,
`_ToFloat8ConstrFunc.forward`; the GEMM's `addmm_float8_unwrapped`, which passes
`scale.reciprocal()` to `torch._scaled_mm`), and compared bit for bit with qtransit's built-in path
`fsdp-float8-ag`. Written from that Python, not from qtransit's C++ sources. The E4M3 grid and
encoder are e4m3_by_hand.py's (shared with the other emulations).

For N ranks, each holding its binary32 shard w[r] of the weight (S = M / N values: rank r's inputs
[r S, (r + 1) S) in qtransit's terms), every rounding written out:

  amax    a = max |w| over every rank's shard: torch.max(torch.abs(x)) on each rank, then an
          all-reduce with MAX (exact).
  scale   m = float32(float64(448) / max(float64(a), 1e-12))  (amax_to_scale: float64, then .to(float32))
  codes   q = E4M3_RNE(clamp(fl32(w * m), -448, 448))          (tensor.to(float32) * scale; to_fp8_saturated)
  gather  every rank receives every rank's codes unchanged; the scale travels as metadata (each rank
          computed the same m from the all-reduced amax).
  value   the GEMM multiplies the codes by scale.reciprocal() = fl32(1 / m); the emulation's output
          is fl32(val(q) * fl32(1 / m)) (the product a dequantization rounds to binary32).

Not modeled: `precompute_float8_dynamic_scale_for_fsdp` (its 448 / amax in the weight's dtype, not
float64); `Float8Tensor.to_original_precision`, which divides by m instead of multiplying by
fl32(1 / m) (they differ by at most an ulp of binary32); bf16 weights.
"""

import numpy as np
import pytest

import qtransit
from e4m3_by_hand import E4M3_VALUE, e4m3_encode

F32 = np.float32
PATH = "fsdp-float8-ag"


def emulate(x, *, per_block=None):
    """The gathered tensor every rank holds, [N, M] binary32. per_block: take the amax of each block
    of that many elements instead of the tensor's (a wrong model, to show the comparison can fail)."""
    N, M = x.shape
    S = M // N
    shards = [x[r, r * S:(r + 1) * S].astype(F32) for r in range(N)]
    w = np.concatenate(shards)
    if per_block is None:
        amax = np.max(np.abs(w)) if w.size else F32(0)
        amaxes = np.full(w.shape, amax, dtype=F32)
    else:
        blocks = np.abs(w).reshape(-1, per_block).max(axis=1)
        amaxes = np.repeat(blocks, per_block).astype(F32)
    m = (448.0 / np.maximum(amaxes.astype(np.float64), 1e-12)).astype(F32)
    scaled = (w * m).astype(F32)  # one binary32 multiply
    q = e4m3_encode(scaled)
    inv = (F32(1.0) / m).astype(F32)
    y = (E4M3_VALUE[q].astype(F32) * inv).astype(F32)  # one binary32 multiply (val(q) is exact)
    return np.tile(y, (N, 1)), (float(np.max(np.abs(w))) if per_block is None else None)


def run_path(x):
    r = qtransit.simulate(PATH, inputs=x, keep_outputs=True)
    run = r.to_dict()["runs"][0]
    assert run["path"] == PATH, run
    assert run["schedule"] == "ring-ag", run
    assert run["format"] == "torchao-fp8-e4m3", run["format"]
    assert run["scales"] == "per-tensor", run
    assert r.passed, f"qtransit's own bounds failed: {run}"
    assert run["k_min"] == 1 and run["k_max"] == 1, (run["k_min"], run["k_max"])
    out = np.asarray(r.outputs)
    assert out.shape == x.shape, out.shape
    return out, run


def differ(ours, theirs):
    a = np.asarray(ours, dtype=F32).view(np.uint32)
    b = np.asarray(theirs, dtype=F32).view(np.uint32)
    return np.argwhere(a != b)


def assert_matches(x):
    em, amax = emulate(x)
    out, run = run_path(x)
    d = differ(em, out)
    assert d.size == 0, (
        f"{len(d)} of {out.size} values differ; first: rank {d[0][0]}, index {d[0][1]}: "
        f"emulation {em[tuple(d[0])]!r}, qtransit {out[tuple(d[0])]!r}")
    assert run["tensor_amax"] == pytest.approx(amax, rel=0, abs=0), (run["tensor_amax"], amax)
    return out, run


@pytest.mark.parametrize("N", [2, 4, 8])
@pytest.mark.parametrize("kind", ["normal", "wide", "tiny", "one-rank-amax"])
def test_random_shards_match(N, kind):
    rng = np.random.default_rng(1000 * N + len(kind))
    M = N * 512
    x = rng.standard_normal((N, M)).astype(F32)
    if kind == "wide":  # magnitudes over 2^-40 .. 2^20: most fall below E4M3's subnormals under one scale
        x = (x * np.exp2(rng.integers(-40, 21, size=(N, M)))).astype(F32)
    elif kind == "tiny":  # the whole tensor near 1e-30: m is about 448e30, still a binary32
        x = (x * F32(1e-30)).astype(F32)
    elif kind == "one-rank-amax":  # rank N-1's shard holds the amax: every other shard is scaled by it
        S = M // N
        x[N - 1, (N - 1) * S + 7] = F32(3.0e4)
    assert_matches(x)


def test_zero_tensor_and_signed_zeros():
    # amax 0: m = fl32(448 / 1e-12) = 4.48e14; every code is +0 or -0 and decodes to +-0.
    N, M = 4, 4 * 64
    x = np.zeros((N, M), dtype=F32)
    x[1, 70] = F32(-0.0)
    out, run = assert_matches(x)
    assert run["tensor_amax"] == 0.0
    assert np.signbit(out[:, 70]).all()


def test_amax_element_saturates_to_448_at_most():
    # The amax element maps to fl32(a m), which may round just above 448 and is clamped: its code is 448.
    N, M = 2, 2 * 128
    rng = np.random.default_rng(7)
    for _ in range(20):
        x = rng.standard_normal((N, M)).astype(F32)
        x[0, 3] = F32(rng.uniform(1, 2) * 2.0 ** rng.integers(-20, 20))
        assert_matches(x)


def test_per_block_model_does_not_match():
    """The comparison can fail: a per-block amax (the ring-ag path with the same format and its
    blocks' own scales) differs from the tensor's scale on almost every element."""
    N, M = 4, 4 * 256
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((N, M)) * np.exp2(rng.integers(-6, 7, size=(N, M)))).astype(F32)
    em_block, _ = emulate(x, per_block=32)
    out, _ = run_path(x)
    assert differ(em_block, out).shape[0] > M // 2


def test_bytes_are_codes_and_one_amax_all_reduce():
    N, M = 8, 8 * 1024
    x = np.random.default_rng(5).standard_normal((N, M)).astype(F32)
    _, run = run_path(x)
    S = M // N
    assert run["bytes_per_rank"] == pytest.approx((N - 1) * S + 8.0 * (N - 1) / N), run["bytes_per_rank"]


def test_verify_collective_judges_the_emulation():
    """The emulation's outputs, as dumps of a real run, through verify collective: exact against the
    tensor's scale; a per-block amax's outputs are not qtransit's bits."""
    N, M = 4, 4 * 256
    rng = np.random.default_rng(11)
    x = (rng.standard_normal((N, M)) * np.exp2(rng.integers(-6, 7, size=(N, M)))).astype(F32)
    em, _ = emulate(x)
    v = qtransit.verify_collective(PATH, x, em, conformance="exact")
    assert v.passed, v.first_failure
    assert qtransit.verify_collective(PATH, x, em).passed  # its default tier
    em_block, _ = emulate(x, per_block=32)
    bad = qtransit.verify_collective(PATH, x, em_block, conformance="exact")
    assert not bad.passed
