"""Layouts of collectives whose chunks or groups are not qtransit's.

qtransit's schedules give rank r the contiguous chunk [r M/N, (r + 1) M/N) of every rank's tensor and
quantize groups of `block` consecutive elements. A collective that assigns its elements otherwise is
the same arithmetic on a permutation of the positions, the same on every rank: a vector P with
qtransit's position k holding that collective's element P[k]. Run or judge it with qtransit on every
rank's row permuted (``x[:, P]``), and read qtransit's outputs back with the inverse::

    P = qtransit.layouts.quickreduce(ranks=8, elements=x.shape[1])
    qtransit.verify_collective("quickreduce-int4", x[:, P], outputs[:, P])   # a QuickReduce run's dumps
    sim = qtransit.simulate("quickreduce-int4", inputs=x[:, P], keep_outputs=True)
    natural = sim.outputs[:, qtransit.layouts.inverse(P)]
"""

import numpy as np

from . import _args

__all__ = ["quickreduce", "inverse"]

QUICKREDUCE_TILE = 16384  # 256 threads x 8 atoms of 8 values (base.h kTileSize)
_ATOMS = 8                # atoms per tile, 2048 elements each


def quickreduce(ranks, elements, *, block=32):
    """QuickReduce's two-shot layout (vLLM's and SGLang's quick all-reduce; docs/SOURCES.md section 2,
    docs/PATHS.md): in every tile of 16384 elements rank r owns atoms [r 8/N, (r + 1) 8/N) of 2048
    elements, and a quantization group is the even or the odd elements of an aligned 64-element span.
    Returns P (int64, length `elements`): owner by owner (qtransit's chunks), that owner's elements in
    tile order, then span order, each span's 32 even-position elements, then its 32 odd ones, so that
    qtransit's groups of 32 consecutive elements are QuickReduce's groups.

    ranks: 2, 4 or 8 (QuickReduce's world sizes). elements: a multiple of 16384 (QuickReduce pads a
    tensor's last tile; pad inputs and outputs to whole tiles, with +0, before permuting)."""
    n, m = _args.integer(ranks, "ranks", lo=1), _args.integer(elements, "elements", lo=1)
    if n not in (2, 4, 8):
        raise ValueError(f"quickreduce layout: ranks must be 2, 4 or 8 (QuickReduce's world sizes), got {ranks}")
    if m <= 0 or m % QUICKREDUCE_TILE:
        raise ValueError(f"quickreduce layout: elements must be a positive multiple of {QUICKREDUCE_TILE} (whole tiles; "
                         f"pad inputs and outputs with +0), got {elements}")
    if _args.integer(block, "block", lo=1) != 32:
        raise ValueError(f"quickreduce layout: QuickReduce's groups hold 32 values, got block {block}")
    e = np.arange(m, dtype=np.int64).reshape(m // QUICKREDUCE_TILE, n, QUICKREDUCE_TILE // n)  # [tile, owner, within]
    e = e.transpose(1, 0, 2).reshape(-1, 32, 2)  # owner-major; [span, j, parity]: element 64 k + 2 j + parity
    return np.ascontiguousarray(e.transpose(0, 2, 1)).reshape(-1)  # [span, parity, j]


def inverse(P):
    """The inverse permutation: ``a[:, P][:, inverse(P)]`` is ``a``."""
    P = np.asarray(P, dtype=np.int64)
    inv = np.empty_like(P)
    inv[P] = np.arange(P.size, dtype=np.int64)
    return inv
