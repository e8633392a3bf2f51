"""qtransit.layouts.quickreduce: a QuickReduce run's dumps, in QuickReduce's own layout, judged by
verify_collective through the permutation. The "dumps" are the numpy emulation of QuickReduce's
two-shot (test_quickreduce_2shot_emulation.py, written from docs/SOURCES.md, not from qtransit):
through the permutation the exact tier holds; without it, or with one wrong output, it does not."""

import numpy as np
import pytest

import qtransit
from qtransit import layouts

from test_quickreduce_2shot_emulation import emulate_2shot, permutation


@pytest.mark.parametrize("N", [2, 4, 8])
def test_the_layout_is_the_emulations_permutation(N):
    M = 2 * layouts.QUICKREDUCE_TILE
    P = layouts.quickreduce(N, M)
    assert P.dtype == np.int64 and np.array_equal(np.sort(P), np.arange(M))
    assert np.array_equal(P, permutation(M, N))  # the emulation's own, written independently
    assert np.array_equal(P[layouts.inverse(P)], np.arange(M))


def dumps(N, b, seed):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((N, layouts.QUICKREDUCE_TILE)) * 10.0 ** rng.uniform(-3, 1, (N, 1))).astype(np.float16)
    x = x.astype(np.float32)
    return x, emulate_2shot(x, b).out  # inputs and every rank's outputs, QuickReduce's natural layout


@pytest.mark.parametrize("N,b", [(2, 4), (4, 8), (8, 6)])
def test_a_quickreduce_runs_dumps_verify_exactly_through_the_layout(N, b):
    x, out = dumps(N, b, 40 + N + b)
    P = layouts.quickreduce(N, x.shape[1])
    r = qtransit.verify_collective(f"quickreduce-int{b}", x[:, P], out[:, P], conformance="exact")
    assert r.passed, r.first_failure
    # In QuickReduce's own order qtransit's contiguous chunks and groups are other arithmetic: refused.
    wrong = qtransit.verify_collective(f"quickreduce-int{b}", x, out, conformance="exact")
    assert not wrong.passed
    # One output one binary16 step off, through the layout: found.
    bad = out.copy()
    bad[N - 1, 12345] = np.nextafter(np.float16(bad[N - 1, 12345]), np.float16(np.inf)).astype(np.float32)
    caught = qtransit.verify_collective(f"quickreduce-int{b}", x[:, P], bad[:, P], conformance="exact")
    assert not caught.passed


def test_simulate_reads_back_in_the_natural_layout():
    x, out = dumps(4, 4, 7)
    P = layouts.quickreduce(4, x.shape[1])
    sim = qtransit.simulate("quickreduce-int4", inputs=x[:, P], keep_outputs=True)
    natural = np.asarray(sim.outputs)[:, layouts.inverse(P)]
    assert np.array_equal(natural.view(np.uint32), out.view(np.uint32))


@pytest.mark.parametrize("ranks,elements,block,what", [(3, 16384, 32, "ranks must be 2, 4 or 8"),
                                                       (8, 16385, 32, "multiple of 16384"),
                                                       (8, 16384, 64, "groups hold 32")])
def test_what_quickreduce_does_not_run_is_refused(ranks, elements, block, what):
    with pytest.raises(ValueError, match=what):
        layouts.quickreduce(ranks, elements, block=block)
