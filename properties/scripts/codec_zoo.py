#!/usr/bin/env python3
"""The mutant zoo (docs/PLUGIN.md): every codec of examples/codecs through `qtransit check --codec`.

For each library of zoo.tsv:
  - the correct codecs and their layout variants must pass (exit 0) under `exact`;
  - every mutant must fail under `exact` with exit 1, its kernel-vs-reference/<name> verdict failed and
    naming the first differing element; a mutant listed in EQUIVALENT must instead pass everywhere
    (it is not a mutant: the argument is in the table);
  - the same run under `bounded` is recorded (a mutant within the format's bound may pass there);
  - the smallest block size at which the gate catches it, and at that block the smallest N and path
    whose bounds fail (or none: only the bit-for-bit comparison sees it).
Writes zoo.md (the kill table) and zoo.json into --out; exits 1 when an expectation is broken.
"""
import argparse
import csv
import json
import os
import shutil
import subprocess
import sys

# Mutants that give the correct codec's bits on every input, with the argument.
EQUIVALENT = {
    "mutant08-zero-pad-int4": "zeros padded into a short block never raise its absmax (|0| <= a), so the scale, "
                              "every code and every decoded value are the correct codec's; only an offset format "
                              "(int4-asym's lo) sees the padding",
}
BLOCKS = [1, 2, 3, 4, 8, 16, 32]
# A codec that reads bfloat16 rounds every partial sum it quantizes to bfloat16: a real rounding the
# integer format's bounds do not contain, which the gate reports on ring-rs and tree-rs. It is run on
# the paths that quantize only the (already bfloat16) inputs.
PATHS = {"example-int8-bf16in": ["a2a-rs", "ring-ag", "hpz-ag-fp"]}
PATH_ORDER = ["a2a-rs", "ring-ag", "hpz-ag-fp", "a2a-hier-rs", "two-shot-ar", "hpz-ag-requant", "ring-ag-requant",
              "tree-rs", "ring-rs", "fp32-ring-rs"]


def config(fmt, block, paths, long_call=False):
    return f"""# codec_zoo.py: a small gate for one codec
[gate]
formats = ["{fmt}"]
paths = {json.dumps(paths)}
distributions = ["normal", "mixed-scale"]
ranks = [2, 4, 8]
ranks_per_node = 2
elements = {16 * block}
long_codec_call = {"true" if long_call else "false"}
block = {block}
seed = 1
gpu = false

[[scaling]]
path = "{"a2a-rs" if paths == ["all"] else paths[0]}"
min = -10.0
max = 10.0
why = "the zoo judges kernels, not scaling laws (too few elements for a fit)"

[[budget]]
name = "zoo-{fmt}"
path = "a2a-rs"
format = "{fmt}"
metric = "rel_rms_error"
max = 1.0e30
"""


def run_check(qt, lib, fmt, block, conformance, work, paths=("all",), long_call=False):
    os.makedirs(work, exist_ok=True)
    cfg = os.path.join(work, "gate.toml")
    with open(cfg, "w") as f:
        f.write(config(fmt, block, list(paths), long_call))
    rep = os.path.join(work, "report")
    shutil.rmtree(rep, ignore_errors=True)
    p = subprocess.run([qt, "check", "--config", cfg, "--codec", lib, "--conformance", conformance, "--report-dir", rep],
                       capture_output=True, text=True)
    report = None
    if os.path.exists(os.path.join(rep, "report.json")):
        with open(os.path.join(rep, "report.json")) as f:
            report = json.load(f)
    return p.returncode, p.stderr.strip(), report


def kernel_verdict(report, name):
    for v in (report or {}).get("verdicts", []):
        if v["name"] == "kernel-vs-reference/" + name:
            return v
    return None


def failing(report):
    return [v["name"] for v in (report or {}).get("verdicts", []) if v["status"] == "fail"]


def smallest_path_run(report):
    bad = [r for r in (report or {}).get("runs", []) if not r["bound_holds"]]
    if not bad:
        return None
    bad.sort(key=lambda r: (r["ranks"], PATH_ORDER.index(r["path"]) if r["path"] in PATH_ORDER else 99))
    return f'{bad[0]["path"]} N={bad[0]["ranks"]}'


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--qtransit", required=True)
    ap.add_argument("--zoo", required=True, help="zoo.tsv written by examples/codecs")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    libdir = os.path.dirname(os.path.abspath(a.zoo))
    with open(a.zoo) as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    if not rows:
        print(f"codec_zoo: {a.zoo} lists no codecs: nothing was checked", file=sys.stderr)
        return 1
    os.makedirs(a.out, exist_ok=True)
    problems, results = [], []
    for r in rows:
        name, kind, fmt, lib = r["name"], r["kind"], r["format"], os.path.join(libdir, r["library_file"])
        work = os.path.join(a.out, name)
        paths = PATHS.get(name, ["all"])
        # The one call past 2^24 elements (seconds each): for the codecs that must pass it and the
        # mutant only it catches.
        long_call = kind in ("correct", "variant", "cuda") or r.get("slug") == "float-index"
        rc, err, rep = run_check(a.qtransit, lib, fmt, 32, "exact", work, paths, long_call)
        if kind == "cuda" and rc == 2 and ("no GPU answered" in err or "built without CUDA" in err):
            print(f"codec_zoo: {name}: skipped: {err}", flush=True)
            results.append({"name": name, "kind": kind, "skipped": err})
            continue
        res = {"name": name, "kind": kind, "format": fmt, "mutant": r.get("mutant_number", ""), "description": r["description"],
               "exact_rc": rc}
        kv = kernel_verdict(rep, name)
        res["exact_verdict"] = kv["status"] if kv else None
        res["first_difference"] = kv["message"] if kv and kv["status"] == "fail" else ""
        res["failed_verdicts"] = failing(rep)
        brc, berr, brep = run_check(a.qtransit, lib, fmt, 32, "bounded", work + "-bounded", paths)
        bkv = kernel_verdict(brep, name)
        res["bounded_rc"] = brc
        res["bounded_verdict"] = bkv["status"] if bkv else None
        res["bounded_message"] = bkv["message"] if bkv else berr
        if kind in ("correct", "variant", "cuda") or name in EQUIVALENT:
            if rc != 0 or brc != 0:
                problems.append(f"{name}: expected to pass, exact exit {rc}, bounded exit {brc}: {err or failing(rep)}")
        else:
            if rc != 1 or not kv or kv["status"] != "fail" or "element" not in kv["message"]:
                problems.append(f"{name}: the gate did not catch it under exact (exit {rc}, verdict {kv and kv['status']}): "
                                f"{err or (kv and kv['message'])}")
        if kind == "mutant" or name in EQUIVALENT:
            # The smallest block that catches it, and there the smallest path and N whose bounds fail.
            res["smallest_block"], res["smallest_path"] = None, None
            for b in BLOCKS:
                brc2, _, brep2 = run_check(a.qtransit, lib, fmt, b, "exact", work + f"-b{b}", ("all",), long_call)
                v = kernel_verdict(brep2, name)
                if brc2 == 1 and v and v["status"] == "fail":
                    res["smallest_block"] = b
                    res["smallest_path"] = smallest_path_run(brep2)
                    break
            if name in EQUIVALENT:
                res["equivalent"] = EQUIVALENT[name]
                if res["smallest_block"] is not None:
                    problems.append(f"{name}: listed as equivalent but caught at block {res['smallest_block']}")
        results.append(res)
        print(f"codec_zoo: {name}: exact exit {rc}, bounded exit {brc}", flush=True)

    with open(os.path.join(a.out, "zoo.json"), "w") as f:
        json.dump(results, f, indent=1)
    md = ["| mutant | format | mistake | caught by (exact) | first difference | bounded | smallest block; path, N whose bounds fail |",
          "|---|---|---|---|---|---|---|"]
    eq = []
    for x in results:
        if x.get("kind") != "mutant":
            continue
        if x["name"] in EQUIVALENT:
            eq.append(f"- `{x['name']}`: not a mutant: {x['equivalent']}. Every run passed, at every block of {BLOCKS}.")
            continue
        fd = x["first_difference"]
        fd = fd.split("first difference: ", 1)[-1].split("; scale")[0].replace("|", "/")
        bounded = "passes" if x["bounded_rc"] == 0 else "caught"
        where = f"{x['smallest_block']}; {x['smallest_path'] or 'none (within the bound of its own scale)'}"
        md.append(f"| {x['name']} | {x['format']} | {x['description']} | kernel-vs-reference/{x['name']} | {fd} | {bounded} | {where} |")
    text = "\n".join(md) + "\n\nEquivalent (listed apart, never as caught):\n\n" + "\n".join(eq) + "\n"
    with open(os.path.join(a.out, "zoo.md"), "w") as f:
        f.write(text)
    # One row per mistake, for the README.
    short = ["| # | mistake | formats | exact | bounded | smallest block (a path's bounds fail too) |", "|---|---|---|---|---|---|"]
    by = {}
    for x in results:
        if x.get("kind") == "mutant" and x["name"] not in EQUIVALENT:
            by.setdefault(x["mutant"], []).append(x)
    for num in sorted(by, key=int):
        xs = by[num]
        slug = xs[0]["name"].split("-", 1)[1].rsplit("-" + xs[0]["format"], 1)[0]
        fmts = ", ".join(x["format"] for x in xs)
        exact = "caught" if all(x["exact_rc"] == 1 for x in xs) else "MISSED"
        passes = [x["format"] for x in xs if x["bounded_rc"] == 0]
        bounded = "caught" if not passes else ("passes" if len(passes) == len(xs) else "passes on " + ", ".join(passes))
        blk = min(x["smallest_block"] for x in xs if x["smallest_block"] is not None)
        paths = sorted({x["smallest_path"] for x in xs if x["smallest_path"]})
        short.append(f"| {int(num)} | {slug} | {fmts} | {exact} | {bounded} | {blk}" + (f" ({'; '.join(paths)})" if paths else " (none)") + " |")
    with open(os.path.join(a.out, "zoo-short.md"), "w") as f:
        f.write("\n".join(short) + "\n")
    print(text)
    caught = sum(1 for x in results if x.get("kind") == "mutant" and x["name"] not in EQUIVALENT and x["exact_rc"] == 1)
    print(f"codec_zoo: {caught} mutants caught under exact; {len(eq)} equivalent; "
          f"{sum(1 for x in results if x.get('kind') in ('correct', 'variant'))} correct codecs and variants checked")
    if problems:
        print("codec_zoo: FAILED:\n  " + "\n  ".join(problems), file=sys.stderr)
        return 1
    if caught < 12:
        print(f"codec_zoo: only {caught} mutants caught; the issue asks for at least 12", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
