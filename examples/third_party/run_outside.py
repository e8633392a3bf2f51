"""`make outside`: real third-party quantizers under qtransit (issue 52). Each adapter is checked by
qtransit.check_codec (the quick tier: the edge cases, every class of the generated boundary inputs,
two distributions, every path) as the format its declaration in conventions/ names, with the
library's conventions at the extremes declared there (docs/FORMATS.md section 10), or as a built-in
format that takes no conventions (torchao's NVFP4 as nvfp4); the verdicts,
the elements compared, each convention mismatch and each class that differs with its counts, and
the packages' versions go to OUT/outside.md and OUT/<adapter>/ (the gate's reports).

    python examples/third_party/run_outside.py OUT [NAME ...]

NAME ...: only the adapters so named (and their probes); all of them without. Exit 0 when every
adapter ran (whatever its verdict: a FAIL here is a finding, docs/FINDINGS.md); 2 when an adapter
could not run at all (a package missing or broken), or a NAME is not an adapter's."""

import json
import os
import sys
from importlib import metadata

import qtransit

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def version(pkg):
    try:
        return metadata.version(pkg)
    except metadata.PackageNotFoundError:
        return "not installed"


CONVENTIONS = os.path.join(HERE, "conventions")


def adapters():
    """(name, declaration, factory, check_codec keywords): each library's quantizer, checked as the
    format its declaration names, with the library's conventions at the extremes (FORMATS.md
    section 10) declared beside it in conventions/."""
    import bnb_nf4
    import ml_dtypes_fp8
    import torch_fp8
    import torchao_mx
    import torchao_nvfp4

    return [
        ("torchao-to-mx-floor", "torchao-mxfp8-floor.toml", lambda: torchao_mx.adapter("FLOOR"), {}),
        ("torchao-to-mx-rceil", "torchao-mxfp8-rceil.toml", lambda: torchao_mx.adapter("RCEIL"), {}),
        ("torchao-to-mx-fp4-floor", "torchao-mxfp4-floor.toml", lambda: torchao_mx.adapter("FLOOR", "float4_e2m1fn_x2"), {}),
        ("torchao-to-mx-fp4-rceil", "torchao-mxfp4-rceil.toml", lambda: torchao_mx.adapter("RCEIL", "float4_e2m1fn_x2"), {}),
        ("ml-dtypes-fp8-e4m3", "ml-dtypes-fp8-e4m3.toml", ml_dtypes_fp8.adapter, {}),
        ("torch-fp8-e4m3-cast", "torch-fp8-e4m3.toml", torch_fp8.cast_adapter, {}),
        # torchao's _choose_scale_float8 cannot take rows of one element (a reshape error): blocks >= 2.
        ("torchao-fp8-rowwise", "torchao-fp8-rowwise.toml", torch_fp8.rowwise_adapter, {"block_min": 2}),
        # bitsandbytes takes blocks of 32, 64, ..., 4096; the gate checks it at 64.
        ("bnb-nf4", "bnb-nf4.toml", bnb_nf4.adapter,
         {"block_min": 32, "block_max": 4096, "block_multiple": 32, "config": {"gate": {"block": 64}}}),
        # torchao's NVFP4 against the built-in nvfp4 (Transformer Engine's recipe): the format takes no
        # conventions (FORMATS.md section 2), so the declaration is the built-in name; blocks of 16 only.
        ("torchao-nvfp4", "nvfp4", torchao_nvfp4.adapter, dict(torchao_nvfp4.CASES[0][1])),
    ]


def report_check(lines, out, name, decl, enc, dec, kw):
    """check_codec's quick tier on one adapter; its verdict, the elements compared, each differing
    class and each convention mismatch into lines."""
    declared = decl.endswith(".toml")  # else a built-in format's name
    fmt = os.path.join(CONVENTIONS, decl) if declared else decl
    r = qtransit.check_codec(fmt, enc, dec, name=name, quick=True, **kw)
    r.write_reports(os.path.join(out, name))
    report = json.loads(r.to_json())
    checks = [c for c in report.get("format_checks", []) if "refused" not in c]
    compared = sum(c.get("elements", 0) for c in checks) + sum(b.get("elements", 0) for c in checks for b in c.get("boundary_classes", []))
    lines.append(f"## {name} as {'conventions/' if declared else ''}{decl}: {'PASS' if r.passed else 'FAIL'} ({compared} elements compared)")
    lines.append("")
    conv = {}
    for c in checks:
        for m in c.get("convention_mismatches", []):
            k = conv.setdefault(m["convention"], {"rule": m["rule"], "blocks": 0, "elements": 0, "first": m["first"]})
            k["blocks"] += m["blocks"]
            k["elements"] += m["elements"]
    for key, m in conv.items():
        lines.append(f"- convention `{key} = {m['rule']}` (declared): {m['elements']} differing elements in {m['blocks']} blocks; "
                     f"e.g. {m['first'][:300]}")
    for c in checks:
        if c.get("cpu_matches_reference", True) and not any(b.get("differing_cases") for b in c.get("boundary_classes", [])):
            continue
        lines.append(f"- {c['dist']}: " + ("equal to the reference bit for bit" if c.get("cpu_matches_reference") else
                                             f"{c.get('differing_elements', 0)} elements differ; first: {c.get('cpu_mismatch', '')[:400]}"))
        for b in c.get("boundary_classes", []):
            if not b.get("differing_cases"):
                continue
            lines.append(f"  - {b['input_class']}: {b['differing_elements']} elements differ in {b['differing_cases']} of {b['cases']} cases")
            for w in b.get("differing", []):
                lines.append(f"    - {w}")
    for v in report.get("verdicts", []):
        if v.get("status") == "fail" and not v["name"].startswith("kernel-vs-reference"):
            lines.append(f"- verdict {v['name']}: {v['message'][:300]}")
    lines.append("")


def nvfp4_probe_lines(lines):
    """torchao_nvfp4.probe(): each step where torchao's NVFP4 differs from Transformer Engine's
    arithmetic (docs/FINDINGS.md F6), with its counts over the sweep and its minimal block."""
    import torchao_nvfp4

    p = torchao_nvfp4.probe()
    lines.append(f"## NVFP4 probe (docs/FINDINGS.md F6): torchao against Transformer Engine's arithmetic, {p['total']} blocks swept")
    lines.append("")
    for step, T, x, ao, te, found in p["reproducers"]:
        c = p.get(step)
        counts = f"{c['blocks']} blocks ({c['elements']} decoded values) differ" if c else "not in the sweep"
        lines.append(f"- {step}: {counts}; T = {T!r}, block {x} (zeros after): "
                     f"torchao s_b {ao[0]!r}, decodes {ao[1]}; TE s_b {te[0]!r}, decodes {te[1]}" + ("" if found == step else f" (found: {found})"))
    lines.append("")


def main(out, only=()):
    os.makedirs(out, exist_ok=True)
    lines = ["# Third-party quantizers under qtransit (`make outside`)", "",
             "qtransit " + qtransit.__version__ + "; " +
             ", ".join(f"{p} {version(p)}" for p in ("torch", "torchao", "bitsandbytes", "numpy", "ml_dtypes")), ""]
    try:
        table = adapters()
    except Exception as e:  # noqa: BLE001  (any import failure is the same outcome: nothing ran)
        print(f"run_outside: cannot import the adapters: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    if only:
        unknown = sorted(set(only) - {t[0] for t in table})
        if unknown:
            print(f"run_outside: no adapter named {', '.join(unknown)}", file=sys.stderr)
            return 2
        table = [t for t in table if t[0] in only]
    for name, decl, factory, kw in table:
        try:
            enc, dec = factory()
        except Exception as e:  # noqa: BLE001
            print(f"run_outside: {name}: {type(e).__name__}: {e}", file=sys.stderr)
            return 2
        report_check(lines, out, name, decl, enc, dec, kw)
    names = {t[0] for t in table}
    if "torchao-to-mx-rceil" in names or "torchao-to-mx-fp4-rceil" in names:
        import torchao_mx

        differ, total, example = torchao_mx.rceil_probe()
        lines.append(f"## RCEIL probe (docs/FINDINGS.md F1): {differ} of {total} blocks at 448 2^k and 1 or 2 ulps around it get an exponent "
                     f"other than the smallest e with absmax <= 448 2^e; e.g. absmax {example[0]!r} (k = {example[1]}, {example[2]:+d} ulp): "
                     f"{example[3]} where {example[4]}" if example else f"## RCEIL probe: all {total} blocks agree")
    if "torchao-nvfp4" in names:
        nvfp4_probe_lines(lines)
    text = "\n".join(lines) + "\n"
    with open(os.path.join(out, "outside.md"), "w") as f:
        f.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print("usage: run_outside.py OUT [NAME ...]", file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1], tuple(sys.argv[2:])))
