"""`make outside`: real third-party quantizers under qtransit (issue 52). Each adapter is checked by
qtransit.check_codec (the quick tier: the edge cases, every class of the generated boundary inputs,
two distributions, every path) as the format its declaration in conventions/ names, with the
library's conventions at the extremes declared there (docs/FORMATS.md section 10), or as a built-in
format that takes no conventions (torchao's NVFP4 as nvfp4); the verdicts,
the elements compared, each convention mismatch and each class that differs with its counts, and
the packages' versions go to OUT/outside.md and OUT/<adapter>/ (the gate's reports).

    python examples/third_party/run_outside.py OUT [NAME ...]

NAME ...: only the adapters so named (and their probes), or a group's adapters by the group's name:
`torch` (torchao, torch, ml_dtypes, bitsandbytes: requirements.txt's virtual environment) or `fbgemm`
(FBGEMM's CPU codecs: requirements-fbgemm.txt's, as fbgemm-gpu-cpu loads only with its own torch
release). Without NAME: the `torch` group, every adapter but FBGEMM's. Each adapter imports its
library only when it runs, so each environment runs its own group. Exit 0 when every adapter ran
(whatever its verdict: a FAIL here is a finding, docs/FINDINGS.md); 2 when an adapter could not run
at all (a package missing or broken), or a NAME is not an adapter's or a group's."""

import json
import os
import sys
from importlib import metadata

import numpy as np
import qtransit

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def version(pkg):
    try:
        return metadata.version(pkg)
    except metadata.PackageNotFoundError:
        return "not installed"


CONVENTIONS = os.path.join(HERE, "conventions")


def _lazy(module, func, *args):
    """A factory that imports the adapter's module (and through it its library) only when called."""
    import importlib

    return lambda: getattr(importlib.import_module(module), func)(*args)


def _kw(module, read):
    """check_codec keywords that an adapter module states, read(module) when its adapter runs."""
    import importlib

    return lambda: dict(read(importlib.import_module(module)))


# The packages each group's adapters need, in the order outside.md lists their versions.
GROUPS = {
    "torch": ("torch", "torchao", "bitsandbytes", "numpy", "ml_dtypes"),
    "fbgemm": ("torch", "fbgemm-gpu-cpu", "numpy"),
}


def adapters():
    """(name, group, declaration, factory, check_codec keywords): each library's quantizer, checked as
    the format its declaration names, with the library's conventions at the extremes (FORMATS.md
    section 10) declared beside it in conventions/. Nothing is imported here: a factory imports its
    adapter's module and library when it is called, and keywords given as a callable are read then."""
    return [
        ("torchao-to-mx-floor", "torch", "torchao-mxfp8-floor.toml", _lazy("torchao_mx", "adapter", "FLOOR"), {}),
        ("torchao-to-mx-rceil", "torch", "torchao-mxfp8-rceil.toml", _lazy("torchao_mx", "adapter", "RCEIL"), {}),
        ("torchao-to-mx-fp4-floor", "torch", "torchao-mxfp4-floor.toml", _lazy("torchao_mx", "adapter", "FLOOR", "float4_e2m1fn_x2"), {}),
        ("torchao-to-mx-fp4-rceil", "torch", "torchao-mxfp4-rceil.toml", _lazy("torchao_mx", "adapter", "RCEIL", "float4_e2m1fn_x2"), {}),
        ("ml-dtypes-fp8-e4m3", "torch", "ml-dtypes-fp8-e4m3.toml", _lazy("ml_dtypes_fp8", "adapter"), {}),
        ("torch-fp8-e4m3-cast", "torch", "torch-fp8-e4m3.toml", _lazy("torch_fp8", "cast_adapter"), {}),
        # torchao's _choose_scale_float8 cannot take rows of one element (a reshape error): blocks >= 2.
        ("torchao-fp8-rowwise", "torch", "torchao-fp8-rowwise.toml", _lazy("torch_fp8", "rowwise_adapter"), {"block_min": 2}),
        # bitsandbytes takes blocks of 32, 64, ..., 4096; the gate checks it at 64.
        ("bnb-nf4", "torch", "bnb-nf4.toml", _lazy("bnb_nf4", "adapter"),
         {"block_min": 32, "block_max": 4096, "block_multiple": 32, "config": {"gate": {"block": 64}}}),
        # torchao's NVFP4 against the built-in nvfp4 (Transformer Engine's recipe): the format takes no
        # conventions (FORMATS.md section 2), so the declaration is the built-in name; blocks of 16 only.
        ("torchao-nvfp4", "torch", "nvfp4", _lazy("torchao_nvfp4", "adapter"), _kw("torchao_nvfp4", lambda m: m.CASES[0][1])),
        # FBGEMM's CPU codecs (fbgemm_codecs.py) against the built-ins that model its GPU kernels. HFP8
        # has no scale (any block); INT8 row-wise is one row per block (any row_dim; the gate's 32 is
        # TorchRec's default), checked as the CUDA kernel and as the same with the CPU's epsilon and its
        # signed-zero convention; MX4 takes groups of 32 only, checked with FBGEMM's +0 decode declared
        # (zero_sign). HFP8 saturates NaN and inf (nonfinite = "saturate"); INT8's and MX4's NaN and inf
        # behaviours are no convention qtransit states (fbgemm_codecs).
        ("fbgemm-cpu-hfp8", "fbgemm", "fbgemm-fp8-cpu.toml", _lazy("fbgemm_codecs", "hfp8_adapter"), {}),
        ("fbgemm-cpu-int8-rowwise", "fbgemm", "fbgemm-int8-rowwise", _lazy("fbgemm_codecs", "int8_rowwise_adapter"), {}),
        ("fbgemm-cpu-int8-rowwise-1e-8", "fbgemm", "fbgemm-int8-rowwise-cpu.toml", _lazy("fbgemm_codecs", "int8_rowwise_adapter"), {}),
        ("fbgemm-cpu-mx4", "fbgemm", "fbgemm-mx4-cpu.toml", _lazy("fbgemm_codecs", "mx4_adapter"),
         {"block_min": 32, "block_max": 32, "block_multiple": 32}),
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


def _bits(v):
    return np.ascontiguousarray(v, dtype=np.float32).view(np.uint32)


def difference_kinds(fmt, enc, dec, block, seed=1):
    """Each element where the codec differs from qtransit's reference for fmt, by kind: `signed zero
    only` (codes, scales and offsets equal as numbers, a zero decoded or an offset with the other
    sign), `scale or offset differs`, `code differs` (same scale and offset), `decoded differs`
    (same code, scale and offset). Over the generated boundary inputs at `block` (qtransit.strategies
    .boundary_cases) and 2^16 values each of three random distributions; non-finite shards and shards
    the reference refuses are left out. {kind: (elements, [input classes])}, and the elements compared."""
    import collections

    rng = np.random.default_rng(seed)
    n = 1 << 16
    inputs = [(f"{cls}: {what}", np.asarray(x, np.float32).reshape(-1), shard or np.asarray(x).size)
              for cls, what, x, b, shard in qtransit.strategies.boundary_cases(fmt, block) if b == block]
    inputs += [("normal", rng.standard_normal(n).astype(np.float32), n),
               ("student-t(2)", rng.standard_t(2, n).astype(np.float32), n),
               ("normal in a random binade 2^-120..2^120 per block",
                (rng.standard_normal(n) * np.exp2(rng.integers(-120, 121, n // block).repeat(block))).astype(np.float32), n)]
    kinds = collections.defaultdict(lambda: [0, []])
    compared = 0
    for label, x, shard in inputs:
        for s0 in range(0, x.size, shard):
            xs = x[s0:s0 + shard]
            if not np.all(np.isfinite(xs)):
                continue
            try:
                ref = qtransit.quantize(fmt, xs, block=block)
            except ValueError:
                continue
            r = enc(xs, block)
            codes, scales = np.asarray(r[0]).astype(np.int64), np.asarray(r[1], np.float32)
            offs = None if len(r) < 3 or r[2] is None else np.asarray(r[2], np.float32)
            d = np.asarray(dec(r[0], r[1], offs, block), np.float32)
            blk = np.arange(xs.size) // block
            rc = np.asarray(ref.codes).reshape(-1).astype(np.int64)
            rd = np.asarray(ref.decoded, np.float32).reshape(-1)
            rs = np.asarray(ref.scales, np.float32).reshape(-1)[blk]
            sc = scales[blk]
            if offs is not None:
                ro, of = np.asarray(ref.offsets, np.float32).reshape(-1)[blk], offs[blk]
            else:
                ro = of = np.zeros(xs.size, np.float32)
            compared += xs.size
            same = (_bits(sc) == _bits(rs)) & (_bits(of) == _bits(ro)) & (codes == rc) & (_bits(d) == _bits(rd))
            meta = (sc == rs) & (of == ro)
            kind = np.where(same, "", np.where((_bits(sc) == _bits(rs)) & (of == ro) & (codes == rc) & (d == rd), "signed zero only",
                            np.where(~meta, "scale or offset differs", np.where(codes != rc, "code differs", "decoded differs"))))
            for k in set(kind.tolist()) - {""}:
                kinds[k][0] += int((kind == k).sum())
                if label not in kinds[k][1]:
                    kinds[k][1].append(label)
    return dict(kinds), compared


def kinds_lines(lines, name, fmt, enc, dec, block):
    """difference_kinds as lines of outside.md: what a FAIL is made of."""
    kinds, compared = difference_kinds(fmt, enc, dec, block)
    lines.append(f"## {name}: where it differs from {os.path.basename(fmt)}, by kind ({compared} elements of the boundary inputs and "
                 f"three random distributions)")
    lines.append("")
    if not kinds:
        lines.append("- nowhere: equal bit for bit")
    for k, (count, labels) in sorted(kinds.items()):
        lines.append(f"- {k}: {count} elements, in {len(labels)} inputs: " + "; ".join(labels[:6]) + ("; ..." if len(labels) > 6 else ""))
    lines.append("")


def fbgemm_probe_lines(lines, names):
    """fbgemm_codecs's probes (docs/FINDINGS.md F7-F9, and what FBGEMM does with NaN and inf, which
    the adapters refuse) for the FBGEMM adapters that ran."""
    import fbgemm_codecs

    if "fbgemm-cpu-int8-rowwise" in names or "fbgemm-cpu-int8-rowwise-1e-8" in names:
        short = fbgemm_codecs.int8_eps_probe()
        lines.append(f"## INT8 row-wise epsilon probe (docs/FINDINGS.md F7): rows (0, 2^k), k in [-40, 20], whose top code is not 255 "
                     f"on the CPU: {len(short)} of 61" + (f", from 2^{int(np.log2(short[0][0]))} (code {short[0][1]}) to "
                                                            f"2^{int(np.log2(short[-1][0]))} (code {short[-1][1]})" if short else ""))
        rng = np.random.default_rng(1)
        rates = []
        for sigma in (1.0, 1e-3, 1e-6):
            x = (sigma * rng.standard_normal(1 << 16)).astype(np.float32)
            codes, _, _ = fbgemm_codecs.int8_rowwise_adapter()[0](x, 32)
            ref = np.asarray(qtransit.quantize("fbgemm-int8-rowwise", x, block=32).codes).reshape(-1)
            rates.append(f"sigma {sigma:g}: {int((codes != ref).sum())}")
        lines.append(f"- codes that differ from fbgemm-int8-rowwise's (the CUDA kernel's) on 65,536 normal values in rows of 32: {'; '.join(rates)}")
        lines.append("")
    if "fbgemm-cpu-mx4" in names:
        p = fbgemm_codecs.mx4_probe()
        band = p["band"]
        moved = {E: n for E, n in band.items() if n}
        lines.append(f"## MX4 probe (docs/FINDINGS.md F8, F9): {p['differ']} of {p['total']} groups (absmax 1.75 2^E, the 128 floats below "
                     f"it and the one above, E in [-126, 127]) get a CPU exponent other than the Triton kernel's rule")
        lines.append("")
        if p["first"]:
            a, E, got, want = p["first"]
            lines.append(f"- first: absmax {a!r} (binade {E}): CPU exponent {got}, the kernel's {want}")
        if moved:
            lines.append(f"- floats at or below 1.75 2^E whose exponent the CPU moves up, per binade: {len(moved)} binades "
                         f"(E from {min(moved)} to {max(moved)}), from {min(moved.values())} to {max(moved.values())} floats each "
                         f"(E = 4: {band.get(4, 0)}, E = 20: {band.get(20, 0)}, E = 100: {band.get(100, 0)}, E = -100: {band.get(-100, 0)})")
        for a, got, want, code, d0, d1 in p["top"]:
            lines.append(f"- group (absmax {a!r}, 1e38, zeros): CPU exponent byte {got} (the kernel's {want}), first code {code}, "
                         f"decodes to {d0!r}, {d1!r}")
        lines.append("")
    if names & {"fbgemm-cpu-hfp8", "fbgemm-cpu-int8-rowwise", "fbgemm-cpu-int8-rowwise-1e-8", "fbgemm-cpu-mx4"}:
        lines.append("## What FBGEMM's CPU codecs write for NaN and inf (HFP8's is declared, nonfinite = 'saturate'; the INT8 and MX4 adapters refuse them: no declarable convention)")
        lines.append("")
        for codec, text in fbgemm_codecs.nonfinite_probe().items():
            lines.append(f"- {codec}: {text}")
        lines.append("")


def main(out, only=()):
    os.makedirs(out, exist_ok=True)
    table = adapters()
    if only:
        unknown = sorted(set(only) - {t[0] for t in table} - set(GROUPS))
        if unknown:
            print(f"run_outside: no adapter or group named {', '.join(unknown)} (groups: {', '.join(GROUPS)})", file=sys.stderr)
            return 2
        table = [t for t in table if t[0] in only or t[1] in only]
    else:
        table = [t for t in table if t[1] == "torch"]
    packages = list(dict.fromkeys(p for g in dict.fromkeys(t[1] for t in table) for p in GROUPS[g]))
    lines = ["# Third-party quantizers under qtransit (`make outside`)", "",
             "qtransit " + qtransit.__version__ + "; " + ", ".join(f"{p} {version(p)}" for p in packages), ""]
    for name, group, decl, factory, kw in table:
        try:
            enc, dec = factory()
            kw = kw() if callable(kw) else kw
        except Exception as e:  # noqa: BLE001  (any import failure is the same outcome: nothing ran)
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
    if any(t[1] == "fbgemm" for t in table):
        for name, group, decl, factory, kw in table:
            if group == "fbgemm" and name != "fbgemm-cpu-hfp8":
                enc, dec = factory()
                fmt = os.path.join(CONVENTIONS, decl) if decl.endswith(".toml") else decl
                kinds_lines(lines, name, fmt, enc, dec, 32)
        fbgemm_probe_lines(lines, names)
    text = "\n".join(lines) + "\n"
    with open(os.path.join(out, "outside.md"), "w") as f:
        f.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print("usage: run_outside.py OUT [NAME | torch | fbgemm ...]", file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1], tuple(sys.argv[2:])))
