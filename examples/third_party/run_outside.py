"""`make outside`: real third-party quantizers under qtransit (issue 52). Each adapter is checked by
qtransit.check_codec (the quick tier: the edge cases, every class of the generated boundary inputs,
two distributions, every path); the verdicts, each class that differs with its counts, and the
packages' versions go to OUT/outside.md and OUT/<adapter>/ (the gate's reports).

    python examples/third_party/run_outside.py OUT

Exit 0 when every adapter ran (whatever its verdict: a FAIL here is a finding, docs/FINDINGS.md);
2 when an adapter could not run at all (a package missing or broken)."""

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


def report_check(lines, out, name, fmt, enc, dec):
    """check_codec's quick tier on one adapter; its verdict and every differing class into lines."""
    r = qtransit.check_codec(fmt, enc, dec, name=name, quick=True)
    r.write_reports(os.path.join(out, name))
    lines.append(f"## {name} as {fmt}: {'PASS' if r.passed else 'FAIL'}")
    lines.append("")
    report = json.loads(r.to_json())
    for c in report.get("format_checks", []):
        if c.get("cpu_matches_reference", True) and not c.get("boundary_classes"):
            continue
        lines.append(f"- {c['dist']}: " + ("equal to the reference bit for bit" if c.get("cpu_matches_reference") else
                                             f"{c.get('differing_elements', 0)} elements differ; first: {c.get('cpu_mismatch', '')[:400]}"))
        for b in c.get("boundary_classes", []):
            lines.append(f"  - {b['input_class']}: {b['differing_elements']} elements differ in {b['differing_cases']} of {b['cases']} cases")
            for w in b.get("differing", []):
                lines.append(f"    - {w}")
    lines.append("")


def main(out):
    os.makedirs(out, exist_ok=True)
    lines = ["# Third-party quantizers under qtransit (`make outside`)", "",
             "qtransit " + qtransit.__version__ + "; " + ", ".join(f"{p} {version(p)}" for p in ("torch", "torchao", "numpy", "ml_dtypes")), ""]
    try:
        import torchao_mx
    except Exception as e:  # noqa: BLE001  (any import failure is the same outcome: nothing ran)
        print(f"run_outside: cannot import the torchao adapter: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    for fmt, mode in torchao_mx.CASES:
        name = f"torchao-to-mx-{mode.lower()}"
        try:
            enc, dec = torchao_mx.adapter(mode)
        except Exception as e:  # noqa: BLE001
            print(f"run_outside: {name}: {type(e).__name__}: {e}", file=sys.stderr)
            return 2
        report_check(lines, out, name, fmt, enc, dec)
    try:
        import ml_dtypes_fp8

        enc, dec = ml_dtypes_fp8.adapter()
    except Exception as e:  # noqa: BLE001
        print(f"run_outside: ml_dtypes-fp8: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    report_check(lines, out, "ml-dtypes-fp8-e4m3", ml_dtypes_fp8.FORMAT, enc, dec)
    differ, total, example = torchao_mx.rceil_probe()
    lines.append(f"## RCEIL probe (docs/FINDINGS.md F1): {differ} of {total} blocks at 448 2^k and 1 or 2 ulps around it get an exponent "
                 f"other than the smallest e with absmax <= 448 2^e; e.g. absmax {example[0]!r} (k = {example[1]}, {example[2]:+d} ulp): "
                 f"{example[3]} where {example[4]}" if example else f"## RCEIL probe: all {total} blocks agree")
    text = "\n".join(lines) + "\n"
    with open(os.path.join(out, "outside.md"), "w") as f:
        f.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print("usage: run_outside.py OUT", file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1]))
