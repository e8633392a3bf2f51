#!/usr/bin/env python3
"""`qtransit check --quick` (issue 16): the default gate's quick tier passes in seconds with every
verdict the full gate has: bounds and k for every (format, path), every kernel-vs-reference
verdict, every scaling rule fitted (none skipped for want of N), every budget.

  check_quick.py QTRANSIT WORK_DIR
"""
import json, os, shutil, subprocess, sys, time


def main():
    q, work = sys.argv[1], sys.argv[2]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    t0 = time.monotonic()
    r = subprocess.run([q, "check", "--quick", "--report-dir", work], capture_output=True, text=True, timeout=600)
    wall = time.monotonic() - t0
    print(r.stdout[-2000:], r.stderr[-2000:])
    if r.returncode != 0:
        print(f"FAIL: check --quick exit {r.returncode}")
        return 1
    rep = json.load(open(os.path.join(work, "report.json")))
    gate = rep["gate"]
    names = {v["name"]: v for v in rep["verdicts"]}
    bad = []
    if gate["ranks"] != [8, 64] or gate["elements"] != 2048 or gate["distributions"] != ["normal", "heavy"]:
        bad.append(f"the quick tier ran {gate}")
    staged_paths = ("a2a-hier-rs", "two-shot-ar", "hpz-ag-requant")
    # The paths that run once per distribution under a type or wire of their own (NCCL's FP8 paths, D41;
    # declared paths with their own wire or none, D45-D48), and the format their verdicts carry.
    once = {p: f for p, f in (("nccl-fp8-e4m3-ring-rs", "fp8-e4m3"), ("nccl-fp8-e4m3-tree-ar", "fp8-e4m3"),
                              ("nccl-fp8-e4m3-nvls-ar", "fp16"),  # NVLS: FP8 tensors summed in binary16 (D49)
                              ("flashinfer-fp8-2shot", "flashinfer-fp8"), ("deepep-fp8-dispatch", "fp8-e4m3-1x128"),
                              ("deepep-bf16-combine", "none"),
                              ("fsdp-float8-ag", "torchao-fp8-e4m3"),  # a tensor's scale (D50)
                              ("te-nvfp4-ag", "nvfp4"),  # NVFP4's two levels, the amax all-reduced (D58)
                              ("quickreduce-int4", "quickreduce-q4"))}  # QuickReduce's binary16 codec (D57)
    for p, f in once.items():
        if p not in gate["paths"]:
            bad.append(f"{p} is not in the default gate's paths (the collectives table of issue 49 needs it)")
        for c in ("bounds", "k"):
            if names.get(f"{c}/{f}/{p}", {}).get("status") != "pass":
                bad.append(f"{c}/{f}/{p} missing or not passed")
    for f in gate["formats"]:
        staged = "," in f  # a per-stage list (D25): its formats' kernels are checked alone; it runs where there are stages
        if not staged and names.get(f"kernel-vs-reference/{f}", {}).get("status") != "pass":
            bad.append(f"kernel-vs-reference/{f} missing or not passed")
        for p in gate["paths"]:
            if p.startswith(("bf16-", "fp16-")) or p in once:
                continue  # the 16-bit paths quantize nothing: they run once, under their own type (below)
            if staged and p not in staged_paths:
                continue
            for c in ("bounds", "k"):
                if names.get(f"{c}/{f}/{p}", {}).get("status") != "pass":
                    bad.append(f"{c}/{f}/{p} missing or not passed")
    for p in gate["paths"]:
        if p.startswith(("bf16-", "fp16-")):
            for c in ("bounds", "k"):
                if names.get(f"{c}/{p[:4]}/{p}", {}).get("status") != "pass":
                    bad.append(f"{c}/{p[:4]}/{p} missing or not passed")
    scaling = [v for v in rep["verdicts"] if v["category"] == "scaling"]
    if not scaling or any(v["status"] != "pass" for v in scaling):
        bad.append(f"scaling: {[(v['name'], v['status']) for v in scaling if v['status'] != 'pass'] or 'none'}")
    if not any(v["category"] == "budget" and v["status"] == "pass" for v in rep["verdicts"]):
        bad.append("no budget verdict passed")
    for b in bad[:20]:
        print("FAIL:", b)
    if bad:
        return 1
    print(f"check --quick: {len(rep['verdicts'])} verdicts ({len(scaling)} scaling), {len(rep['runs'])} runs, "
          f"{rep['wall_seconds']:.1f} s in the gate, {wall:.1f} s wall")
    return 0


if __name__ == "__main__":
    sys.exit(main())
