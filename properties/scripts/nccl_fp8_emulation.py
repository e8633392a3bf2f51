#!/usr/bin/env python3
"""NCCL's FP8 reductions (issue 49, docs/DECISIONS.md D41), emulated again in numpy and compared bit
for bit with `qtransit simulate --path nccl-fp8-... --in X.npy --dump OUT.npy`.

Written from the description of NCCL's arithmetic (src/device/reduce_kernel.h: FuncSum of two FP8
values is __hadd of the two widened to __half, converted back with __NV_SATFINITE), not from
qtransit's code: the FP8 values come from their bit layout, binary16 adds are numpy's float16, and
the rounding back to FP8 picks the nearest value of a sorted table (ties to the even code), a value
past the largest finite one clamping to it. The schedules: NCCL's ring (chunk c starts at rank c+1,
each hop adds the receiver's own value), the ring all-gather of the owner's sum, and NCCL's tree
(a chain inside each node of G ranks, then the node's children in ncclGetBtree's binary tree,
rooted at node 0), each also as ncclAvg (every input first times 1/N rounded to FP8, multiplied in
binary16: `--divide pre`). Also the number of outputs that a clamp reached, against the run's JSON.
And NVLS (D49; NCCL's symmetric kernels on compute capability 10: multimem.ld_reduce...acc::f16):
every rank's FP8 value summed in binary16 inside the switch, in the order the declaration documents
(the ring's: chunk c from rank c+1), then one conversion to FP8 with saturation; a binary16 sum
that overflows must come out as a failed run, never as a clamped pass.

usage: nccl_fp8_emulation.py QTRANSIT WORKDIR
"""
import json
import os
import subprocess
import sys
import zlib

import numpy as np

QT, WORK = sys.argv[1], sys.argv[2]
os.makedirs(WORK, exist_ok=True)


def fp8_table(kind):
    """Every finite value of the format, from its bits: (values ascending over >= 0, their codes)."""
    mbits, bias = (3, 7) if kind == "e4m3" else (2, 15)
    vals = []
    for code in range(128):  # the non-negative half
        e, m = code >> mbits, code & ((1 << mbits) - 1)
        if kind == "e4m3" and e == 15 and m == 7:
            continue  # e4m3fn's one NaN
        if kind == "e5m2" and e == 31:
            continue  # inf, NaN
        mag = m * 2.0 ** (1 - bias - mbits) if e == 0 else (2 ** mbits + m) * 2.0 ** (e - bias - mbits)
        vals.append((mag, code))
    vals.sort()
    return np.array([v for v, _ in vals]), np.array([c for _, c in vals])


TABLES = {k: fp8_table(k) for k in ("e4m3", "e5m2")}
# The next grid point above the largest value (what rounding without a clamp would give): e4m3's
# 480 (mantissa 111, odd), e5m2's 65536 (2^16: mantissa 00, even).
BEYOND = {"e4m3": (480.0, 1), "e5m2": (65536.0, 0)}


def to_fp8(h, kind):
    """float16 array -> FP8 values (float64) with saturation, and whether each clamped."""
    vals, codes = TABLES[kind]
    top = vals[-1]
    grid = np.append(vals, BEYOND[kind][0])
    parity = np.append(codes & 1, BEYOND[kind][1])
    x = np.abs(h.astype(np.float64))
    hi = np.clip(np.searchsorted(grid, x, side="left"), 1, len(grid) - 1)  # grid[hi - 1] < x <= grid[hi]
    lo = hi - 1
    exact = grid[hi] == x
    dl, dh = x - grid[lo], grid[hi] - x
    pick = np.where(exact | (dh < dl) | ((dh == dl) & (parity[hi] == 0)), hi, lo)
    clamp = (pick == len(grid) - 1) | (x > grid[-1]) | np.isinf(x)
    mag = np.where(clamp, top, grid[np.minimum(pick, len(grid) - 1)])
    return np.copysign(mag, h.astype(np.float64)), clamp


def fp8_add(a, b, kind):
    """NCCL's FuncSum<fp8>: __hadd in binary16, then back to FP8 with __NV_SATFINITE."""
    with np.errstate(over="ignore"):
        h = a.astype(np.float16) + b.astype(np.float16)  # FP8 values are binary16 values exactly
    return to_fp8(h, kind)


def avg_premul(x, kind):
    """ncclAvg (src/enqueue.cc: ncclDevPreMulSum with the scalar __nv_cvt_float_to_fp8(float(1.0 / nRanks),
    __NV_SATFINITE)): every input times that FP8 factor in binary16 (__hmul), back to FP8 saturated."""
    n = x.shape[0]
    f, _ = to_fp8(np.array([np.float32(1.0 / n)]), kind)  # float straight to FP8: nearest, ties to even
    with np.errstate(over="ignore", under="ignore"):
        h = x.astype(np.float16) * np.float16(f[0])
    y, _ = to_fp8(h, kind)
    return y


def btree(nranks, rank):
    """NCCL's ncclGetBtree (src/graph/trees.cc): (up, down0, down1); the root's one child is 2^k."""
    bit = 1
    while bit < nranks:
        if bit & rank:
            break
        bit <<= 1
    if rank == 0:
        return -1, (bit >> 1 if nranks > 1 else -1), -1
    up = (rank ^ bit) | (bit << 1)
    if up >= nranks:
        up = rank ^ bit
    low = bit >> 1
    d0 = rank - low if low else -1
    d1 = rank + low if low else -1
    while d1 >= nranks:
        low >>= 1
        d1 = rank + low if low else -1
    return up, d0, d1


def ring_rs(x, kind):
    """Rank c's chunk: P = X_{c+1}, then P = P + X_{c+1+h} for h = 1..N-1. Returns [N, S], clamps."""
    n, m = x.shape
    s = m // n
    out = np.zeros((n, s))
    clamps = np.zeros((n, s), dtype=np.int64)
    for c in range(n):
        p = x[(c + 1) % n, c * s:(c + 1) * s].copy()
        for h in range(1, n):
            p, cl = fp8_add(p, x[(c + 1 + h) % n, c * s:(c + 1) * s], kind)
            clamps[c] += cl
        out[c] = p
    return out, clamps


def tree_ar(x, kind, g):
    n, m = x.shape
    nodes = n // g

    def node_sum(v):
        s = x[v * g + g - 1].copy()
        cl = np.zeros(m, dtype=np.int64)
        for l in range(g - 2, -1, -1):
            s, c = fp8_add(x[v * g + l], s, kind)
            cl += c
        _, d0, d1 = btree(nodes, v)
        for child in (d0, d1):
            if child >= 0:
                t, tc = node_sum(child)
                s, c = fp8_add(s, t, kind)
                cl += c + tc
        return s, cl

    total, cl = node_sum(0)
    return np.tile(total, (n, 1)), np.tile(cl, (n, 1))


def nvls_ar(x, kind):
    """Chunk c: the N values summed in float16 from rank c+1 on, one rounding to FP8; every rank holds it."""
    n, m = x.shape
    s = m // n
    out = np.zeros(m)
    clamps = np.zeros(m, dtype=np.int64)
    for c in range(n):
        p = x[(c + 1) % n, c * s:(c + 1) * s].astype(np.float16)
        for h in range(1, n):
            p = p + x[(c + 1 + h) % n, c * s:(c + 1) * s].astype(np.float16)
        y, cl = to_fp8(p, kind)
        out[c * s:(c + 1) * s] = y
        clamps[c * s:(c + 1) * s] = cl
    return np.tile(out, (n, 1)), np.tile(clamps, (n, 1))


def inputs(kind, n, m, seed, big):
    """FP8 values from random codes: every exponent, zeros and subnormals; `big`: near the top too."""
    rng = np.random.default_rng(seed)
    vals, _ = TABLES[kind]
    top = vals[-1]
    pool = vals[vals <= (top if big else top / 64)]
    v = rng.choice(pool, size=(n, m)) * rng.choice([-1.0, 1.0], size=(n, m))
    return v


def run(path, x, g, avg=False):
    f = os.path.join(WORK, "in.npy")
    o = os.path.join(WORK, "out.npy")
    np.save(f, x.astype(np.float32))
    n, m = x.shape
    cmd = [QT, "simulate", "--path", path, "--ranks", str(n), "--ranks-per-node", str(g), "--elements", str(m),
           "--in", f, "--dump", o, "--json"] + (["--divide", "pre"] if avg else [])
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"FAIL: {' '.join(cmd)}: exit {r.returncode}: {r.stderr.strip()}")
    return np.load(o).astype(np.float64), json.loads(r.stdout)["runs"][0]


def differ(what, got, want):
    """1 (and the first difference printed) when the two arrays' binary32 bits differ anywhere."""
    bad = np.argwhere(got.astype(np.float32).view(np.uint32) != want.astype(np.float32).view(np.uint32))
    if not len(bad):
        return 0
    r, i = bad[0]
    print(f"FAIL {what}: {len(bad)} values differ; first rank {r} index {i}: qtransit {got[r, i]!r}, emulation {want[r, i]!r}")
    return 1


failures = 0
cases = 0
clamped_cases = 0
for kind in ("e4m3", "e5m2"):
    for sched in ("ring-rs", "ring-ar", "tree-ar"):
        for (n, g) in ((2, 2), (3, 3), (8, 8), (12, 4), (16, 2), (24, 8)):
            for big, avg in ((False, False), (True, False), (True, True)):
                seed = zlib.crc32(f"{kind} {sched} {n} {g} {big}".encode())
                m = n * 16
                x = inputs(kind, n, m, seed, big)
                y = avg_premul(x, kind) if avg else x
                if sched == "tree-ar":
                    want, cl = tree_ar(y, kind, g)
                else:
                    want, cl = ring_rs(y, kind)
                    if sched == "ring-ar":  # every rank holds every owner's chunk, unchanged
                        want = np.tile(want.reshape(-1), (n, 1))
                        cl = np.tile(cl.reshape(-1), (n, 1))
                path = f"nccl-fp8-{kind}-{sched}"
                got, js = run(path, x, g, avg)
                cases += 1
                if got.shape != want.shape:
                    print(f"FAIL {path} N={n} G={g}: shape {got.shape}, emulation {want.shape}")
                    failures += 1
                    continue
                failures += differ(f"{path} N={n} G={g} big={big} avg={avg}", got, want)
                sat = int((cl > 0).sum())
                if js.get("saturated_outputs") != sat or not js["bound_holds"]:
                    print(f"FAIL {path} N={n} G={g} big={big} avg={avg}: saturated outputs {js.get('saturated_outputs')}, "
                          f"emulation {sat}; bound_holds {js['bound_holds']}")
                    failures += 1
                clamped_cases += sat > 0
# NVLS: binary16 sums, one FP8 rounding at the end (its clamp counted as one); e5m2 near the top would
# overflow binary16 (57344 + 57344), checked apart below.
nvls_cases = nvls_clamped = 0
for kind in ("e4m3", "e5m2"):
    for (n, g) in ((2, 2), (3, 3), (8, 8), (12, 4), (24, 8)):
        for big in ((False, True) if kind == "e4m3" else (False,)):
            seed = zlib.crc32(f"nvls {kind} {n} {g} {big}".encode())
            m = n * 16
            x = inputs(kind, n, m, seed, big)
            want, cl = nvls_ar(x, kind)
            path = f"nccl-fp8-{kind}-nvls-ar"
            got, js = run(path, x, g)
            cases += 1
            nvls_cases += 1
            failures += differ(f"{path} N={n} G={g} big={big}", got, want)
            sat = int((cl > 0).sum())
            if js.get("saturated_outputs") != sat or js.get("max_saturations", 0) > 1 or not js["bound_holds"]:
                print(f"FAIL {path} N={n} G={g} big={big}: saturated outputs {js.get('saturated_outputs')} "
                      f"(at most {js.get('max_saturations')} clamps), emulation {sat}; bound_holds {js['bound_holds']}")
                failures += 1
            nvls_clamped += sat > 0
if nvls_clamped < 3:
    print(f"FAIL: only {nvls_clamped} NVLS runs saturated at the output")
    failures += 1
# e5m2 at the top: 57344 + 57344 overflows binary16 inside the switch. qtransit keeps the sum
# non-finite (a failed bound, exit 1), whatever a clamp would print.
x = np.full((2, 32), 57344.0)
np.save(os.path.join(WORK, "in.npy"), x.astype(np.float32))
r = subprocess.run([QT, "simulate", "--path", "nccl-fp8-e5m2-nvls-ar", "--ranks", "2", "--elements", "32", "--in",
                    os.path.join(WORK, "in.npy"), "--json"], capture_output=True, text=True)
js = json.loads(r.stdout)["runs"][0] if r.stdout.strip().startswith("{") else {}
if r.returncode != 1 or js.get("nonfinite_outputs", 0) != 64 or js.get("bound_holds", True):
    print(f"FAIL: a binary16 overflow inside the switch: exit {r.returncode}, {js.get('nonfinite_outputs')} non-finite outputs, "
          f"bound_holds {js.get('bound_holds')} (want exit 1, 64, false); {r.stderr.strip()[:300]}")
    failures += 1
print(f"NVLS: {nvls_cases} runs bit for bit, {nvls_clamped} with outputs clamped at the end; the e5m2 overflow fails the run")
print(f"{cases} runs compared bit for bit with the numpy emulation, {clamped_cases} with saturated outputs, "
      f"{failures} failure(s)")
# The saturating inputs really saturated somewhere, or this checked less than it says.
if clamped_cases < 12:
    print("FAIL: fewer runs saturated than the near-the-top inputs should make")
    failures += 1
sys.exit(1 if failures else 0)
