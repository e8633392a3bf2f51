#!/usr/bin/env python3
"""The fast-math flags took effect on kernels/cuda/ds_fast_math.cu and on nothing else (docs/DECISIONS.md
D23), read from the PTX nvcc makes of each file, with no GPU:

  ptx_flags.py COMPILE_COMMANDS FAST_MATH_SOURCE IEEE_SOURCE WORK_DIR

Each source is compiled to PTX (nvcc -ptx) with the very command the build compiles it with, taken
from the build's compile_commands.json (CMAKE_EXPORT_COMPILE_COMMANDS): so a source property, a
target option or qt_numerics's IEEE flags all count, in the order nvcc sees them, and no copy of the
flags in this test can drift from the build's. (Not cuobjdump on the objects: a toolkit with only nvcc
has none, and the build's objects need not exist when ctest runs.)

The fast-math file's kernels (the .entry functions named ds_fast_math_kernel, at least one) must
each hold rcp.approx (the step's 1 / scale), an approximate division div.approx or div.full (the
scale), a .ftz operation, and no div.rn.f32. The IEEE file must hold div.rn.f32 and none of
rcp.approx, div.approx, div.full or .ftz in any of its kernels (at least one). A missing compile
command, a failed compile, or PTX without the kernels fails. And the check must be able to fail:
each file's PTX is also put to the other file's rules, and must be refused by them.
"""
import json, os, re, shlex, subprocess, sys

ENTRY = re.compile(r"^\s*(?:\.visible\s+|\.weak\s+)*\.entry\s+([\w$]+)", re.M)
FUNC_START = re.compile(r"^\s*(?:\.visible\s+|\.weak\s+|\.extern\s+)*(?:\.entry|\.func)\b", re.M)
RCP_APPROX = re.compile(r"\brcp\.approx\.")
DIV_APPROX = re.compile(r"\bdiv\.(?:approx|full)\.")
FTZ = re.compile(r"\.ftz\b")
DIV_RN = re.compile(r"\bdiv\.rn\.f32\b")


def ptx_of(commands, source, out):
    """PTX of `source` as the build compiles it, or an error string."""
    want = os.path.realpath(source)
    entry = next((e for e in commands if os.path.realpath(os.path.join(e["directory"], e["file"])) == want), None)
    if entry is None:
        return None, f"no compile command for {source} in compile_commands.json (is it in the build?)"
    args = entry["arguments"] if "arguments" in entry else shlex.split(entry["command"])
    cmd, skip = [], False
    for i, a in enumerate(args):
        if skip:
            skip = False
            continue
        if a in ("-o", "-MF", "-MT", "-MQ", "--dependency-output", "-MJ"):  # an output of the object compile
            skip = True
            continue
        if a in ("-c", "-MD", "-MMD", "--generate-dependencies-with-compile", "--generate-nonsystem-dependencies-with-compile"):
            continue
        cmd.append(a)
    cmd += ["-ptx", "-o", out]
    r = subprocess.run(cmd, cwd=entry["directory"], capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        return None, f"nvcc -ptx of {source} failed (exit {r.returncode}): {' '.join(cmd)}\n{r.stdout}{r.stderr}"
    with open(out) as f:
        text = f.read()
    return text, None


def entries(ptx):
    """(name, body) of every kernel: from its .entry to the next .entry or .func."""
    starts = [m.start() for m in FUNC_START.finditer(ptx)] + [len(ptx)]
    out = []
    for m in ENTRY.finditer(ptx):
        end = next(s for s in starts if s > m.start())
        body = "\n".join(line.split("//")[0] for line in ptx[m.start():end].splitlines())
        out.append((m.group(1), body))
    return out


def first_line(body, pattern):
    return next((line.strip() for line in body.splitlines() if pattern.search(line)), None)


def fast_math_problems(kernels):
    if not kernels:
        return ["no kernel to check"]
    bad = []
    for name, body in kernels:
        for what, pat in (("rcp.approx", RCP_APPROX), ("div.approx or div.full", DIV_APPROX), (".ftz", FTZ)):
            if not pat.search(body):
                bad.append(f"{name}: no {what}")
        if DIV_RN.search(body):
            bad.append(f"{name}: an IEEE division: {first_line(body, DIV_RN)}")
    return bad


def ieee_problems(kernels):
    if not kernels:
        return ["no kernel to check"]
    bad = []
    for name, body in kernels:
        for what, pat in (("rcp.approx", RCP_APPROX), ("div.approx or div.full", DIV_APPROX), (".ftz", FTZ)):
            if pat.search(body):
                bad.append(f"{name}: {what}: {first_line(body, pat)}")
    if not any(DIV_RN.search(body) for _, body in kernels):
        bad.append("no div.rn.f32 in any kernel")
    return bad


def show(label, kernels, patterns):
    for name, body in kernels:
        print(f"  {label} {name}")
        for what, pat in patterns:
            print(f"    {what:<24} {first_line(body, pat) or '(none)'}  [{sum(1 for l in body.splitlines() if pat.search(l))} lines]")


def main():
    if len(sys.argv) != 5:
        print(__doc__)
        return 2
    db, fast_src, ieee_src, work = sys.argv[1:5]
    os.makedirs(work, exist_ok=True)
    try:
        with open(db) as f:
            commands = json.load(f)
    except (OSError, ValueError) as e:
        print(f"FAIL: cannot read {db}: {e}")
        return 1
    texts = {}
    for src in (fast_src, ieee_src):
        text, err = ptx_of(commands, src, os.path.join(work, os.path.basename(src) + ".ptx"))
        if err:
            print(f"FAIL: {err}")
            return 1
        texts[src] = text
    fast_all, ieee_all = entries(texts[fast_src]), entries(texts[ieee_src])
    fast = [(n, b) for n, b in fast_all if "ds_fast_math_kernel" in n]
    patterns = (("rcp.approx", RCP_APPROX), ("div.approx/div.full", DIV_APPROX), (".ftz", FTZ), ("div.rn.f32", DIV_RN))
    print(f"{fast_src}: {len(fast_all)} kernels, {len(fast)} named ds_fast_math_kernel")
    show("fast-math", fast, patterns)
    print(f"{ieee_src}: {len(ieee_all)} kernels")
    show("ieee", ieee_all, patterns)
    bad = [f"{fast_src}: {p}" for p in fast_math_problems(fast)] + [f"{ieee_src}: {p}" for p in ieee_problems(ieee_all)]
    # Passing rules must still tell the two apart: each file's kernels fail the other's.
    if not bad and not fast_math_problems(ieee_all):
        bad.append(f"the fast-math rules accept {ieee_src}'s kernels too: they cannot tell the files apart")
    if not bad and not ieee_problems(fast):
        bad.append(f"the IEEE rules accept {fast_src}'s kernels too: they cannot tell the files apart")
    for b in bad:
        print(f"FAIL: {b}")
    if bad:
        return 1
    print(f"ptx_flags: ok ({len(fast)} fast-math kernels, {len(ieee_all)} IEEE kernels; PTX in {work})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
