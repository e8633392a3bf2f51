#!/usr/bin/env python3
"""Every format on one table: the relative RMS error of a value quantized once (k = 1) and twice
(k = 2), on a gather (ring-ag, then hpz-ag-requant: the same values re-encoded) and on a reduce
(a2a-rs, then a2a-hier-rs: partial sums re-encoded), with the bytes per element each puts on the
wire. Runs `qtransit simulate --json`; prints Markdown.

usage: bench/format_table.py [--qtransit PATH] [--ranks N] [--per-node G] [--elements M] [--dist D]
                             [--seed S] [FORMAT ...]
"""
import argparse
import json
import subprocess
import sys

DEFAULT = ["int8", "int4", "int4-asym", "ds-int8", "ds-int4", "fp8-e4m3", "fp8-e5m2", "mxfp8-e4m3",
           "mxfp8-e4m3-rceil", "mxfp8-e5m2", "mxfp6-e3m2", "mxfp6-e2m3", "mxfp4", "mxfp4-rceil", "mxint8",
           "nf4", "int4-sr", "fp8-e4m3-sr"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--qtransit", default="build/release/cli/qtransit")
    ap.add_argument("--ranks", type=int, default=16)
    ap.add_argument("--per-node", type=int, default=4)
    ap.add_argument("--elements", type=int, default=65536)
    ap.add_argument("--dist", default="normal")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("formats", nargs="*", default=DEFAULT)
    a = ap.parse_args()
    print(f"N = {a.ranks}, G = {a.per_node}, M = {a.elements} per rank, {a.dist} inputs, seed {a.seed}, block 32, "
          "fp32 accumulation; relative RMS error of the outputs; every bound held unless marked\n")
    print("| format | bytes/elem | gather k=1 | gather k=2 | reduce k=1 | reduce k=2 |")
    print("|---|---|---|---|---|---|")
    for f in a.formats:
        cmd = [a.qtransit, "simulate", "--path", "ring-ag,hpz-ag-requant,a2a-rs,a2a-hier-rs", "--ranks",
               str(a.ranks), "--ranks-per-node", str(a.per_node), "--elements", str(a.elements), "--format", f,
               "--dist", a.dist, "--seed", str(a.seed), "--json"]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode not in (0, 1):
            print(f"| {f} | error: {p.stderr.strip()} |")
            continue
        runs = {r["path"]: r for r in json.loads(p.stdout)["runs"]}
        ag = runs["ring-ag"]
        bpe = ag["bytes_per_rank"] / (a.elements / a.ranks * (a.ranks - 1))

        def cell(path):
            r = runs[path]
            s = f"{r['rel_rms_error']:.3g}"
            return s if r["bound_holds"] else s + " (BOUND FAILS)"
        print(f"| {f} | {bpe:.3f} | {cell('ring-ag')} | {cell('hpz-ag-requant')} | {cell('a2a-rs')} | "
              f"{cell('a2a-hier-rs')} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
