#!/usr/bin/env python3
"""ctest verify_example: `qtransit verify collective` on the dumps of examples/verify.

  verify_example.py QTRANSIT SOURCE_DIR WORK_DIR

examples/verify/a2a_reduce_scatter.py computes an INT8 a2a reduce-scatter in numpy, as a user's
framework would, and can plant a fault. This driver runs it into WORK_DIR and checks:
  0. the example itself: its fault-free outputs equal `qtransit simulate --path a2a-rs --dump` bit
     for bit (so what verify is given is right to begin with);
  1. no fault (N = 8 whole files, N = 8 per-rank files, N = 16 M = 2048): exit 0 and
     `strongest tier met: exact`;
  2. outside-bound: exit 1, stderr names the shard and the element;
  3. one-ulp: exit 0 under the default tier with `strongest tier met: same-events`; exit 1 under
     `--conformance exact`, stderr naming the shard and the element;
  4. drop-rank: exit 1, stderr names the shard; `--conformance bounded` on it is reported only (the
     a-priori bound may or may not catch a missing contribution);
  5. bad input: outputs of the wrong shape (exit 2, both shapes named), a missing per-rank file
     (exit 2, the file named).
Exits 1 on the first wrong outcome, with what was run and what came back. numpy is required: without
it the test fails (a check that checked nothing is not a pass).
"""
import os
import re
import shutil
import subprocess
import sys

TIMEOUT = 120


def fail(msg):
    print(f"verify_example: FAIL: {msg}", flush=True)
    sys.exit(1)


try:
    import numpy as np
except ImportError:
    print("verify_example: FAIL: numpy is missing: install python3-numpy (make deps-test)", flush=True)
    sys.exit(1)


def tail(text, lines=25):
    rows = text.rstrip("\n").splitlines()
    if len(rows) > lines:
        rows = [f"... ({len(rows) - lines} lines above)"] + rows[-lines:]
    return "\n".join("    " + r for r in rows)


def run(cmd, what):
    print(f"\n--- {what}\n$ {' '.join(cmd)}", flush=True)
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        fail(f"{what}: no answer within {TIMEOUT} s: {' '.join(cmd)}")
    print(f"  exit {r.returncode}")
    if r.stdout.strip():
        print("  stdout:\n" + tail(r.stdout))
    if r.stderr.strip():
        print("  stderr:\n" + tail(r.stderr))
    return r


class Driver:
    def __init__(self, qtransit, source_dir, work_dir):
        self.q = qtransit
        self.example = os.path.join(source_dir, "examples", "verify", "a2a_reduce_scatter.py")
        self.work = work_dir
        if not os.path.isfile(self.example):
            fail(f"the example is missing: {self.example}")
        if not os.access(self.q, os.X_OK):
            fail(f"not an executable qtransit: {self.q}")
        shutil.rmtree(self.work, ignore_errors=True)
        os.makedirs(self.work)

    def make(self, name, ranks, elements, block, *extra):
        """Run the example into WORK_DIR/name; return (dir, its stdout)."""
        d = os.path.join(self.work, name)
        cmd = [sys.executable, self.example, "--ranks", str(ranks), "--elements", str(elements), "--block", str(block),
               "--seed", "11", "--out-dir", d, *extra]
        r = run(cmd, f"example: {name}")
        if r.returncode != 0:
            fail(f"the example failed (exit {r.returncode}) for {name}")
        return d, r.stdout

    def verify(self, what, d, ranks, block, *extra, per_rank=False):
        ins = os.path.join(d, "in.{rank}.npy" if per_rank else "inputs.npy")
        outs = os.path.join(d, "out.{rank}.npy" if per_rank else "outputs.npy")
        cmd = [self.q, "verify", "collective", "--path", "a2a-rs", "--ranks", str(ranks), "--format", "int8",
               "--block", str(block), "--inputs", ins, "--outputs", outs, "--report-dir", os.path.join(d, "report"), *extra]
        return run(cmd, what)


def tier(r):
    m = re.search(r"^strongest tier met: (\S+)\s*$", r.stdout, re.M)
    return m.group(1) if m else None


def expect_exit(r, code, what):
    if r.returncode != code:
        fail(f"{what}: exit {r.returncode}, expected {code}")


def expect_tier(r, allowed, what):
    t = tier(r)
    if t is None:
        fail(f"{what}: stdout has no line `strongest tier met: <tier>`")
    if t not in allowed:
        fail(f"{what}: strongest tier met: {t}, expected {' or '.join(allowed)}")


def expect_stderr(r, patterns, what):
    for label, pattern in patterns:
        if not re.search(pattern, r.stderr):
            where = " (only stdout does)" if re.search(pattern, r.stdout) else ""
            fail(f"{what}: stderr does not name {label}{where}")


def shard_element(c, i=None):
    pats = [(f"`shard {c}`", rf"\bshard {c}\b")]
    if i is not None:
        pats.append((f"`element {i}`", rf"\belement {i}\b"))
    return pats


def shape_pattern(rows, cols):
    return rf"[\[(]\s*{rows}\s*,\s*{cols}\s*,?\s*[\])]|\b{rows}\s*[x×]\s*{cols}\b"


def main(argv):
    if len(argv) != 4:
        print(__doc__)
        fail("usage: verify_example.py QTRANSIT SOURCE_DIR WORK_DIR")
    drv = Driver(*argv[1:])
    q = drv.q

    # 0. The example agrees with qtransit's own schedule, bit for bit (B = 24 does not divide S).
    for n, m, b in [(8, 4096, 32), (6, 600, 24)]:
        d, _ = drv.make(f"sim-N{n}-B{b}", n, m, b)
        sim = os.path.join(d, "sim.npy")
        r = run([q, "simulate", "--path", "a2a-rs", "--format", "int8", "--block", str(b), "--ranks", str(n),
                 "--in", os.path.join(d, "inputs.npy"), "--dump", sim], f"qtransit simulate, N = {n}, B = {b}")
        expect_exit(r, 0, "qtransit simulate")
        ours, theirs = np.load(os.path.join(d, "outputs.npy")), np.load(sim)
        if ours.shape != theirs.shape:
            fail(f"example N = {n}, B = {b}: outputs {list(ours.shape)}, simulate dumped {list(theirs.shape)}")
        diff = np.argwhere(ours.view(np.uint32) != theirs.view(np.uint32))
        if diff.size:
            c, i = diff[0]
            fail(f"example N = {n}, B = {b}: {len(diff)} outputs differ from qtransit simulate's, first shard {c} "
                 f"element {i}: {ours[c, i]!r} vs {theirs[c, i]!r} (the example is wrong, or qtransit is)")
        print(f"  ok: the example's outputs equal qtransit simulate's bit for bit (N = {n}, M = {m}, B = {b})")

    r = run([q, "verify", "collective", "--help"], "qtransit verify collective --help")
    if r.returncode != 0 or "--outputs" not in r.stdout:
        # (a qtransit without the subcommand prints its top-level help, exit 0)
        fail(f"`qtransit verify collective --help` (exit {r.returncode}) does not document --outputs: "
             "this qtransit has no `verify collective`")

    # 1. No fault: the outputs are qtransit's schedule, so the strongest tier holds.
    n, m, b = 8, 4096, 32
    d, _ = drv.make("none", n, m, b)
    r = drv.verify("no fault, N = 8, whole files", d, n, b)
    expect_exit(r, 0, "no fault, whole files")
    expect_tier(r, ["exact"], "no fault, whole files")
    d, _ = drv.make("none-per-rank", n, m, b, "--per-rank")
    r = drv.verify("no fault, N = 8, per-rank files", d, n, b, per_rank=True)
    expect_exit(r, 0, "no fault, per-rank files")
    expect_tier(r, ["exact"], "no fault, per-rank files")
    d16, _ = drv.make("none-N16", 16, 2048, 32)
    r = drv.verify("no fault, N = 16, M = 2048", d16, 16, 32)
    expect_exit(r, 0, "no fault, N = 16")
    expect_tier(r, ["exact"], "no fault, N = 16")

    # 2. One element just outside the same-events tolerance.
    c, i = 3, 17
    d, out = drv.make("outside-bound", n, m, b, "--fault", "outside-bound", "--fault-shard", str(c),
                      "--fault-element", str(i))
    if "OUTSIDE the same-events tolerance" not in out:
        fail("the example's outside-bound fault is not outside the tolerance (a bug of the example)")
    r = drv.verify(f"outside-bound at shard {c}, element {i}", d, n, b)
    expect_exit(r, 1, "outside-bound")
    expect_tier(r, ["bounded", "none"], "outside-bound")
    expect_stderr(r, shard_element(c, i), "outside-bound")

    # 3. One ulp off: not exact, but within same-events.
    c, i = 2, 40
    d, out = drv.make("one-ulp", n, m, b, "--fault", "one-ulp", "--fault-shard", str(c), "--fault-element", str(i))
    if "inside the same-events tolerance" not in out:
        fail("the example's one-ulp fault is not inside the tolerance here (pick another element in this driver)")
    r = drv.verify(f"one-ulp at shard {c}, element {i} (default tier)", d, n, b)
    expect_exit(r, 0, "one-ulp, default tier")
    expect_tier(r, ["same-events"], "one-ulp, default tier")
    r = drv.verify(f"one-ulp at shard {c}, element {i}, --conformance exact", d, n, b, "--conformance", "exact")
    expect_exit(r, 1, "one-ulp, --conformance exact")
    expect_tier(r, ["same-events"], "one-ulp, --conformance exact")
    expect_stderr(r, shard_element(c, i), "one-ulp, --conformance exact")

    # 4. A rank's contribution missing from one shard.
    c = 5
    d, _ = drv.make("drop-rank", n, m, b, "--fault", "drop-rank", "--fault-shard", str(c))
    r = drv.verify(f"drop-rank: shard {c} without rank {(c + 1) % n}", d, n, b)
    expect_exit(r, 1, "drop-rank")
    expect_tier(r, ["bounded", "none"], "drop-rank")
    expect_stderr(r, shard_element(c), "drop-rank")
    r = drv.verify(f"drop-rank, --conformance bounded (reported, not asserted)", d, n, b, "--conformance", "bounded")
    verdict = {0: "passes: the a-priori bound does not see the missing contribution",
               1: "fails: the a-priori bound catches the missing contribution"}.get(r.returncode, "unexpected exit")
    print(f"  report: drop-rank under --conformance bounded: exit {r.returncode}, {verdict}; "
          f"strongest tier met: {tier(r)}")
    if r.returncode not in (0, 1):
        fail(f"drop-rank, --conformance bounded: exit {r.returncode}, expected 0 or 1")

    # 5. Bad input: a wrong shape, a missing file.
    d, _ = drv.make("bad-shape", n, m, b)
    s = m // n
    outs = np.load(os.path.join(d, "outputs.npy"))
    np.save(os.path.join(d, "outputs.npy"), np.concatenate([outs, outs[:, :1]], axis=1))
    r = drv.verify(f"outputs of shape [{n}, {s + 1}] instead of [{n}, {s}]", d, n, b)
    expect_exit(r, 2, "wrong output shape")
    expect_stderr(r, [(f"the shape [{n}, {s + 1}] it was given", shape_pattern(n, s + 1)),
                      (f"the shape [{n}, {s}] it expects", shape_pattern(n, s))], "wrong output shape")
    d, _ = drv.make("missing-file", n, m, b, "--per-rank")
    os.remove(os.path.join(d, "out.3.npy"))
    r = drv.verify("per-rank outputs with out.3.npy deleted", d, n, b, per_rank=True)
    expect_exit(r, 2, "missing per-rank file")
    expect_stderr(r, [("the missing file out.3.npy", re.escape(os.path.join(d, "out.3.npy")) + "|" +
                       r"\bout\.3\.npy\b")], "missing per-rank file")

    print("\nverify_example: every outcome as expected")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
