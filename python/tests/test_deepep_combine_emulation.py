"""DeepEP's low-latency combine (docs/SOURCES.md section 3, D47), emulated in numpy from its
description and compared bit for bit with qtransit's declared path `deepep-bf16-combine`.

  inputs   every rank's contribution is a bf16 tensor (an expert's output): binary32 inputs are
           rounded to bf16 (RNE) first;
  sum      the owner of chunk c adds the contributions in binary32, one IEEE rounding per add,
           in the ring's order X_{c+1}, X_{c+2}, ..., X_{c+N} = X_c (fp32-ring-rs's schedule: the
           partial starts as X_{c+1} and hop h adds X_{c+1+h});
  output   the sum rounded to bf16 (RNE) once.

DeepEP adds the top-k slots in the order the router gave them, each times a binary32 weight; here
every weight is 1 and the order is the ring's (not modeled, D47). A combine in another order is not
qtransit's bits, but verify collective's same-events tier, which does not depend on the order, holds.
"""

import ml_dtypes
import numpy as np

import qtransit

PATH = "deepep-bf16-combine"


def bf16(a):
    return np.asarray(a, dtype=np.float32).astype(ml_dtypes.bfloat16).astype(np.float32)


def combine(x, order):
    """[N, S] outputs: row c is chunk c, summed over the ranks in order(c) in binary32, then bf16."""
    n, m = x.shape
    s = m // n
    out = np.empty((n, s), dtype=np.float32)
    for c in range(n):
        ranks = order(c, n)
        acc = x[ranks[0], c * s:(c + 1) * s].copy()
        for r in ranks[1:]:
            acc = (acc + x[r, c * s:(c + 1) * s]).astype(np.float32)  # one binary32 rounding per add
        out[c] = bf16(acc)
    return out


def ring(c, n):
    return [(c + 1 + h) % n for h in range(n)]


def slots(c, n):
    return list(range(n))


def inputs(n, m, seed):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((n, m)) * 10.0 ** rng.uniform(-3, 3, (n, 1))).astype(np.float32)


def test_the_combine_is_the_emulation_bit_for_bit():
    for n, m, seed in [(2, 64, 1), (4, 4096, 2), (8, 8192, 3), (5, 5 * 77, 4)]:
        x = inputs(n, m, seed)
        r = qtransit.simulate(PATH, inputs=x, keep_outputs=True)
        run = r.to_dict()["runs"][0]
        assert r.passed and run["schedule"] == "fp32-ring-rs" and run["input"] == "bf16" and run["output"] == "bf16"
        got = np.asarray(r.outputs)
        want = combine(bf16(x), ring)
        assert got.shape == want.shape
        bad = np.argwhere(got.view(np.uint32) != want.view(np.uint32))
        assert bad.size == 0, f"N={n}: {len(bad)} differ, first {bad[0]}: qtransit {got[tuple(bad[0])]!r}, emulation {want[tuple(bad[0])]!r}"


def test_another_order_is_same_events_not_exact():
    # The slots in rank order 0..N-1 instead of the ring's: other bits for some elements; verify
    # collective then finds the outputs within the same-events tolerance, not qtransit's bits.
    # (ranks 1 and 2 hold +-2^30 y, which cancel: summed first (the ring's order for chunk 0) they
    # leave rank 0's value, added after rank 0's (the slots') they swallow it; the bf16 rounding at the
    # end hides most binary32 differences of order, not these)
    rng = np.random.default_rng(9)
    x = bf16(rng.standard_normal((8, 8 * 512)))
    y = bf16(rng.uniform(1, 2, 8 * 512))
    x[1], x[2] = y * 2.0 ** 30, -y * 2.0 ** 30
    other = combine(x, slots)
    assert not np.array_equal(other.view(np.uint32), combine(x, ring).view(np.uint32))
    v = qtransit.verify_collective(PATH, x, other).to_dict()
    assert v["path"] == PATH and v["schedule"] == "fp32-ring-rs"
    assert v["strongest"] == "same-events", v["strongest"]
    mine = qtransit.verify_collective(PATH, x, combine(x, ring)).to_dict()
    assert mine["strongest"] == "exact"
