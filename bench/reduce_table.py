#!/usr/bin/env python3
"""Quantized against unquantized 16-bit reduce-scatter, measured the same way (issue 18, D24): the
relative RMS error of every output and the cross-node bytes per rank, at each N and input
distribution, for int8 and int4 through a2a-rs and a2a-hier-rs (fp32 accumulation, as qgZ sums;
and a2a-hier-rs with int8 inside the node and int4 across it, one format per stage)
and a plain ring reduce-scatter (fp32-ring-rs) accumulated in bf16, fp16 and fp32. The 16-bit rings
cast their inputs to the type first, as real gradients already are. Runs `qtransit simulate
--json`; prints Markdown. A bound that failed, or a non-finite output (a binary16 overflow), is
marked in its cell.

usage: bench/reduce_table.py [--qtransit PATH] [--ranks 8,64,384] [--elements M] [--dists D,...]
"""
import argparse
import json
import subprocess
import sys

ROWS = [  # (label, path, format, accum)
    ("int8 a2a-rs", "a2a-rs", "int8", "fp32"),
    ("int8 a2a-hier-rs", "a2a-hier-rs", "int8", "fp32"),
    ("int4 a2a-rs", "a2a-rs", "int4", "fp32"),
    ("int4 a2a-hier-rs", "a2a-hier-rs", "int4", "fp32"),
    ("int8,int4 a2a-hier-rs", "a2a-hier-rs", "int8,int4", "fp32"),  # int8 inside the node, int4 across (issue 17)
    ("bf16 ring-rs", "fp32-ring-rs", "int8", "bf16"),
    ("fp16 ring-rs", "fp32-ring-rs", "int8", "fp16"),
    ("fp32 ring-rs", "fp32-ring-rs", "int8", "fp32"),
]


def run(q, path, fmt, accum, ranks, elements, dist):
    cmd = [q, "simulate", "--path", path, "--ranks", ",".join(map(str, ranks)), "--elements", str(elements),
           "--format", fmt, "--accum", accum, "--dist", dist, "--json"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode not in (0, 1):
        raise SystemExit(f"reduce_table: {' '.join(cmd)}: exit {p.returncode}: {p.stderr.strip()}")
    return {r["ranks"]: r for r in json.loads(p.stdout)["runs"]}


def cell(r):
    s = f"{r['rel_rms_error']:.3g} / {r['cross_node_bytes_per_rank'] / 1024:.1f}"
    if r["nonfinite_outputs"]:
        s += f" ({r['nonfinite_outputs']} non-finite)"
    if not r["bound_holds"]:
        s += " (BOUND FAILS)"
    return s


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--qtransit", default="build/release/cli/qtransit")
    ap.add_argument("--ranks", default="8,64,384")
    ap.add_argument("--elements", type=int, default=12288)
    ap.add_argument("--dists", default="normal,heavy,correlated")
    a = ap.parse_args()
    ranks = [int(n) for n in a.ranks.split(",")]
    print(f"M = {a.elements} elements per rank, 8 ranks per node, block 32, seed 1. Each cell: relative RMS "
          "error of the outputs / cross-node KiB sent per rank (the busiest rank's).\n")
    for dist in a.dists.split(","):
        print(f"**{dist}**\n")
        print("| path | " + " | ".join(f"N = {n}" for n in ranks) + " |")
        print("|---|" + "---|" * len(ranks))
        for label, path, fmt, accum in ROWS:
            runs = run(a.qtransit, path, fmt, accum, ranks, a.elements, dist)
            print(f"| {label} | " + " | ".join(cell(runs[n]) for n in ranks) + " |")
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
