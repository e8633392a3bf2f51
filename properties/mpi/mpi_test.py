#!/usr/bin/env python3
"""The mpi backend against the in-process simulation (issue 7).

  mpi_test.py same  QTRANSIT MPIRUN NP   every path under `mpirun -np NP ... --backend mpi` gives the
                                         same output bits (--dump) and the same verdicts (JSON) as
                                         `--backend cpu`; the byte counts are the bytes really sent
  mpi_test.py mismatch QTRANSIT MPIRUN   ranks started with different arguments: exit 2 on every
                                         rank with a message, no hang
  mpi_test.py dead QTRANSIT MPIRUN       a rank that never starts: the run ends (MPI abort or the
                                         QTRANSIT_MPI_TIMEOUT watchdog) with a message, no hang
  mpi_test.py check QTRANSIT MPIRUN NP   `mpirun -np NP qtransit check --backend mpi` on a small gate
                                         written here: the same runs (worst errors, bounds, k, bytes:
                                         the same bits) and verdicts as `--backend cpu`; only rank 0
                                         writes reports and prints; every rank exits 0, 1 for a failed
                                         budget, 2 when the gate's N is not the number of processes
  mpi_test.py nccl QTRANSIT MPIRUN       `--backend nccl` under mpirun on a machine without a GPU:
                                         simulate and check stop on every rank with exit 2 and a
                                         message, no crash, no hang (skipped where a GPU is visible)
  mpi_test.py verify QTRANSIT MPIRUN NP  `mpirun -np NP qtransit verify collective --backend mpi` on
                                         per-rank dump files (in.{rank}.npy, out.{rank}.npy) of every
                                         path: the same verdicts, counts and first violations as one
                                         process on the whole files; a moved output is exit 1 on every
                                         rank; a missing rank file is exit 2 on every rank, said once
Exit 77 (skipped) without mpirun.
"""
import json, os, shutil, subprocess, sys, tempfile

PATHS = ["ring-rs", "a2a-rs", "a2a-hier-rs", "tree-rs", "two-shot-ar", "ring-ag", "ring-ag-requant",
         "hpz-ag-fp", "hpz-ag-requant", "fp32-ring-rs"]
# Every field of every run is compared bit for bit: the RMS sums too, which each rank sums over
# its own rows and the ranks combine exactly (docs/DECISIONS.md D34).


def mpirun(mpi, np):
    return [mpi, "--allow-run-as-root", "--oversubscribe", "-np", str(np)]


def run(cmd, timeout, env=None):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=e)


def same(q, mpi, np):
    g = 2 if np == 4 else 4  # two nodes: a2a-hier-rs and hpz-ag run their real two-level topology
    tmp = tempfile.mkdtemp()
    bad = 0
    # mxfp4: a 1-byte E8M0 scale on the wire; int4-sr: stochastic rounding keyed by the sending rank
    configs = [("int8", "fp32", 64), ("int4-asym", "fp16", 32), ("ds-int4", "fp32", 32), ("mxfp4", "fp32", 32),
               ("int4-sr", "fp32", 32)]
    for fmt, accum, block in configs:
        base = ["simulate", "--ranks", str(np), "--ranks-per-node", str(g), "--elements", str(np * block * 3),
                "--format", fmt, "--block", str(block), "--accum", accum, "--seed", "7", "--json"]
        for p in PATHS if fmt == "int8" else ["all"]:
            args = base + ["--path", p]
            dump = fmt == "int8"
            cd, md = os.path.join(tmp, p + ".cpu.npy"), os.path.join(tmp, p + ".mpi.npy")
            c = run([q] + args + ["--threads", "1"] + (["--dump", cd] if dump else []), 120)
            m = run(mpirun(mpi, np) + [q] + args + ["--backend", "mpi"] + (["--dump", md] if dump else []), 300,
                    {"QTRANSIT_MPI_TIMEOUT": "120"})
            what = f"np {np} {fmt} {accum} {p}"
            if c.returncode != 0 or m.returncode != 0:
                print(f"FAIL {what}: exit cpu {c.returncode} mpi {m.returncode}\n{c.stderr}\n{m.stderr}")
                bad += 1
                continue
            cj, mj = json.loads(c.stdout)["runs"], json.loads(m.stdout)["runs"]
            for a, b in zip(cj, mj):
                for k in a:
                    x, y = a[k], b.get(k)
                    if x != y:
                        print(f"FAIL {what} {a['path']}: {k}: cpu {x} mpi {y}")
                        bad += 1
            if len(cj) != len(mj):
                print(f"FAIL {what}: {len(cj)} runs on cpu, {len(mj)} on mpi")
                bad += 1
            if dump:
                if open(cd, "rb").read() != open(md, "rb").read():
                    print(f"FAIL {what}: the outputs differ (--dump)")
                    bad += 1
            print(f"ok   {what}: {len(cj)} run(s), same bits and verdicts")
    shutil.rmtree(tmp)
    return 1 if bad else 0


def mismatch(q, mpi):
    # Rank 1 asks for another seed: every rank must stop with exit 2 and say why.
    script = (f'if [ "$OMPI_COMM_WORLD_RANK" = 1 ]; then s=2; else s=1; fi; exec {q} simulate --backend mpi '
              '--path a2a-rs --ranks 4 --elements 256 --format int8 --seed $s')
    r = run(mpirun(mpi, 4) + ["sh", "-c", script], 120, {"QTRANSIT_MPI_TIMEOUT": "30"})
    print(r.stdout, r.stderr)
    n = r.stderr.count("different arguments")
    if r.returncode != 2 or n != 4:
        print(f"FAIL: exit {r.returncode} (want 2), {n} rank(s) of 4 said 'different arguments'")
        return 1
    print("ok   mismatched arguments: exit 2 with a message on every rank")
    return 0


def dead(q, mpi):
    # Rank 3 dies before it starts: the others must not hang.
    script = (f'if [ "$OMPI_COMM_WORLD_RANK" = 3 ]; then exit 9; fi; exec {q} simulate --backend mpi '
              '--path a2a-rs --ranks 4 --elements 256 --format int8')
    try:
        r = run(mpirun(mpi, 4) + ["sh", "-c", script], 90, {"QTRANSIT_MPI_TIMEOUT": "10"})
    except subprocess.TimeoutExpired:
        print("FAIL: a dead rank hangs the run")
        return 1
    print(r.stdout, r.stderr)
    if r.returncode == 0:
        print("FAIL: a run with a dead rank exited 0")
        return 1
    print(f"ok   dead rank: the run ended with exit {r.returncode} and a message")
    return 0


GATE = """[gate]
formats = ["int8", "int4-asym", "ds-int4"]
paths = ["all"]
distributions = ["normal", "heavy"]
ranks = [{np}]
ranks_per_node = {g}
elements = {m}
block = 32
seed = 3

[[budget]]
name = "a2a-int8"
path = "a2a-rs"
format = "int8"
metric = "rel_rms_error"
max = {budget}
"""


def per_rank(mpi, np, cmd, timeout, env=None):
    """Runs `cmd` (a shell command; it runs in ./rank<R>) on np ranks; returns (result, {rank: exit})."""
    script = f'cd rank$OMPI_COMM_WORLD_RANK && {cmd}; echo "rank $OMPI_COMM_WORLD_RANK exit $?"'
    r = run(mpirun(mpi, np) + ["sh", "-c", script], timeout, env)
    codes = {}
    for line in r.stdout.splitlines():
        w = line.split()
        if len(w) == 4 and w[0] == "rank" and w[2] == "exit":
            codes[int(w[1])] = int(w[3])
    return r, codes


def check(q, mpi, np):
    tmp = tempfile.mkdtemp()
    bad = 0
    for r in range(np):
        os.mkdir(os.path.join(tmp, f"rank{r}"))
    os.chdir(tmp)
    env = {"QTRANSIT_MPI_TIMEOUT": "120"}
    g = 2 if np % 2 == 0 else np
    cfg = os.path.join(tmp, "gate.toml")
    with open(cfg, "w") as f:
        f.write(GATE.format(np=np, g=g, m=np * 32 * 6, budget=0.5))
    # The gate in one process, then under mpirun with one process per rank. The reports go to the
    # relative path `rep` of each rank's own directory: only rank 0 may write one.
    c = run([q, "check", "--config", cfg, "--report-dir", os.path.join(tmp, "cpu")], 300)
    if c.returncode != 0:
        print(f"FAIL check --backend cpu: exit {c.returncode}\n{c.stdout}\n{c.stderr}")
        return 1
    m, codes = per_rank(mpi, np, f"{q} check --backend mpi --config {cfg} --report-dir rep", 600, env)
    print(m.stdout, m.stderr)
    if codes != {r: 0 for r in range(np)}:
        print(f"FAIL check --backend mpi: exit codes by rank {codes}, want 0 on all {np}")
        return 1
    if m.stdout.count("gate: PASS") != 1:
        print(f"FAIL: the summary was printed {m.stdout.count('gate: PASS')} times, want once (rank 0)")
        bad += 1
    for r in range(1, np):
        if os.path.exists(os.path.join(tmp, f"rank{r}", "rep")):
            print(f"FAIL: rank {r} wrote a report directory")
            bad += 1
    cj = json.load(open(os.path.join(tmp, "cpu", "report.json")))
    mj = json.load(open(os.path.join(tmp, "rank0", "rep", "report.json")))
    if len(cj["runs"]) != len(mj["runs"]) or not cj["runs"]:
        print(f"FAIL: {len(cj['runs'])} runs on cpu, {len(mj['runs'])} on mpi")
        return 1
    for a, b in zip(cj["runs"], mj["runs"]):
        for k in a:
            x, y = a[k], b.get(k)
            if x != y:
                print(f"FAIL run {a['path']} {a['format']} {a['dist']}: {k}: cpu {x} mpi {y}")
                bad += 1
    worst = [max(r[k] for r in cj["runs"]) for k in ("max_abs_error", "max_error_to_a_posteriori")]
    if [max(r[k] for r in mj["runs"]) for k in ("max_abs_error", "max_error_to_a_posteriori")] != worst:
        print("FAIL: the worst errors differ")
        bad += 1
    cv = [(v["name"], v["status"]) for v in cj["verdicts"]]
    mv = [(v["name"], v["status"]) for v in mj["verdicts"]]
    if cv != mv:
        print(f"FAIL: the verdicts differ: {set(cv) ^ set(mv)}")
        bad += 1
    for a, b in zip(cj["verdicts"], mj["verdicts"]):
        x, y = a.get("value"), b.get("value")
        if x != y:
            print(f"FAIL verdict {a['name']}: value cpu {x} mpi {y}")
            bad += 1
    if cj["format_checks"] != mj["format_checks"]:
        print("FAIL: the kernel checks differ")
        bad += 1
    if not any("--backend mpi" in n for n in mj["notes"]):
        print(f"FAIL: the report does not say it ran under --backend mpi: {mj['notes']}")
        bad += 1
    if not bad:
        print(f"ok   check --backend mpi on {np} processes: {len(mj['runs'])} runs, {len(mv)} verdicts as with cpu")

    # A budget no run can meet: exit 1 on every rank, the failed verdict in rank 0's report.
    with open(cfg, "w") as f:
        f.write(GATE.format(np=np, g=g, m=np * 32 * 6, budget=1e-9))
    m, codes = per_rank(mpi, np, f"{q} check --backend mpi --config {cfg} --report-dir rep", 600, env)
    if codes != {r: 1 for r in range(np)} or "FAILED budget/a2a-int8" not in m.stdout:
        print(f"FAIL failed budget: exit codes by rank {codes}, want 1 on all {np}\n{m.stdout}\n{m.stderr}")
        bad += 1
    else:
        print("ok   a failed verdict: exit 1 on every rank")

    # The gate's N is not the number of processes (the default gate: N = 8, 64, 384): exit 2 on every
    # rank, one message naming both, no report.
    shutil.rmtree(os.path.join(tmp, "rank0", "rep"))
    m, codes = per_rank(mpi, np, f"{q} check --backend mpi --report-dir rep", 120, env)
    want = f"the gate's ranks are [8, 64, 384] (default) but the job has {np} process(es)"
    if codes != {r: 2 for r in range(np)} or m.stderr.count(want) != 1 or os.path.exists(os.path.join(tmp, "rank0", "rep")):
        print(f"FAIL rank-count mismatch: exit codes by rank {codes}, want 2 on all {np}; stderr:\n{m.stderr}")
        bad += 1
    else:
        print("ok   the gate's N against the number of processes: exit 2 on every rank with one message")
    os.chdir("/")
    shutil.rmtree(tmp)
    return 1 if bad else 0


def nccl(q, mpi):
    if shutil.which("nvidia-smi") and run(["nvidia-smi", "-L"], 30).stdout.strip():
        print("skipped: a GPU is visible (this test is the no-GPU behaviour)")
        return 77
    tmp = tempfile.mkdtemp()
    for r in range(2):
        os.mkdir(os.path.join(tmp, f"rank{r}"))
    os.chdir(tmp)
    cfg = os.path.join(tmp, "gate.toml")
    with open(cfg, "w") as f:
        f.write(GATE.format(np=2, g=2, m=2 * 32 * 6, budget=0.5))
    bad = 0
    for what, cmd in [("simulate", f"{q} simulate --backend nccl --path a2a-rs --ranks 2 --elements 256 --format int8"),
                      ("check", f"{q} check --backend nccl --config {cfg} --report-dir rep")]:
        try:
            m, codes = per_rank(mpi, 2, cmd, 120, {"QTRANSIT_MPI_TIMEOUT": "30"})
        except subprocess.TimeoutExpired:
            print(f"FAIL {what} --backend nccl without a GPU hangs")
            bad += 1
            continue
        if codes != {0: 2, 1: 2} or "qtransit: no GPU: " not in m.stderr:
            print(f"FAIL {what} --backend nccl without a GPU: exit codes by rank {codes}, want 2 on both\n{m.stdout}\n{m.stderr}")
            bad += 1
        else:
            print(f"ok   {what} --backend nccl under mpirun without a GPU: exit 2 on every rank: {m.stderr.strip()}")
    os.chdir("/")
    shutil.rmtree(tmp)
    return 1 if bad else 0


def verify(q, mpi, np):
    import numpy  # Debian's python3-numpy (make deps-test)
    n, g, m, block = 8, 4, 8 * 48, 16  # N ranks in the dumps, checked by np processes (chunk c on c mod np)
    tmp = tempfile.mkdtemp()
    rng = numpy.random.default_rng(3)
    x = (rng.standard_normal((n, m)) * numpy.exp(rng.standard_normal((n, 1)))).astype(numpy.float32)
    numpy.save(os.path.join(tmp, "inputs.npy"), x)
    for r in range(n):
        numpy.save(os.path.join(tmp, f"in.{r}.npy"), x[r])
    bad = 0
    # Every field must agree exactly: tiers and counts, and the sums, which are exact and rounded once
    # (D34), whichever process checked which chunk.
    for p in PATHS:
        d = os.path.join(tmp, p)
        os.mkdir(d)
        whole = os.path.join(d, "outputs.npy")
        sim = run([q, "simulate", "--path", p, "--format", "int4", "--ranks", str(n), "--ranks-per-node", str(g),
                   "--block", str(block), "--in", os.path.join(tmp, "inputs.npy"), "--dump", whole], 120)
        if sim.returncode != 0:
            print(f"FAIL {p}: simulate --dump exit {sim.returncode}: {sim.stderr}")
            bad += 1
            continue
        y = numpy.load(whole)
        y[5, 3] = numpy.nextafter(y[5, 3], numpy.float32(numpy.inf))  # a moved output: exact fails everywhere
        numpy.save(whole, y)
        for r in range(n):
            numpy.save(os.path.join(d, f"out.{r}.npy"), y[r])
        args = ["verify", "collective", "--path", p, "--format", "int4", "--ranks", str(n), "--ranks-per-node", str(g),
                "--block", str(block), "--json", "--report-dir", ""]
        c = run([q] + args + ["--inputs", os.path.join(tmp, "inputs.npy"), "--outputs", whole], 120)
        mm = run(mpirun(mpi, np) + [q] + args + ["--backend", "mpi", "--inputs", os.path.join(tmp, "in.{rank}.npy"),
                                                 "--outputs", os.path.join(d, "out.{rank}.npy")], 300,
                 {"QTRANSIT_MPI_TIMEOUT": "120"})
        what = f"verify np {np} {p}"
        try:
            jc, jm = json.loads(c.stdout), json.loads(mm.stdout)
        except json.JSONDecodeError:
            print(f"FAIL {what}: no JSON (exit cpu {c.returncode}, mpi {mm.returncode})\n{c.stderr}\n{mm.stderr}")
            bad += 1
            continue
        exact = jc["tiers"][0]
        if c.returncode != mm.returncode or jc != jm:
            print(f"FAIL {what}: one process and {np} processes differ: exit {c.returncode} vs {mm.returncode}\n"
                  f"{json.dumps(jc)}\n{json.dumps(jm)}")
            bad += 1
        elif exact["holds"] or exact["violations"] < 1:
            print(f"FAIL {what}: the moved output was not seen by the exact tier: {exact}")
            bad += 1
        else:
            print(f"ok   {what}: exit {mm.returncode}, {jm['outputs']} outputs, strongest {jm['strongest']}, "
                  f"exact's first: {exact['first_violation'][:90]}")
    # simulate --backend mpi --in 'in.{rank}.npy': each process reads its own rank's file; the same bits
    # as one process on the whole [N, M] file.
    n4 = 4
    numpy.save(os.path.join(tmp, "inputs4.npy"), x[:n4])
    for r in range(n4):
        numpy.save(os.path.join(tmp, f"in4.{r}.npy"), x[r])
    for p in ["a2a-rs", "ring-rs", "ring-ag"]:
        cd, md = os.path.join(tmp, f"sim4.{p}.cpu.npy"), os.path.join(tmp, f"sim4.{p}.mpi.npy")
        args = ["simulate", "--path", p, "--format", "int8", "--ranks", str(n4), "--block", str(block)]
        c = run([q] + args + ["--in", os.path.join(tmp, "inputs4.npy"), "--dump", cd], 120)
        mm = run(mpirun(mpi, n4) + [q] + args + ["--backend", "mpi", "--in", os.path.join(tmp, "in4.{rank}.npy"), "--dump", md],
                 300, {"QTRANSIT_MPI_TIMEOUT": "120"})
        what = f"simulate np {n4} {p} --in per-rank files"
        if c.returncode != 0 or mm.returncode != 0:
            print(f"FAIL {what}: exit cpu {c.returncode} mpi {mm.returncode}\n{c.stderr}\n{mm.stderr}")
            bad += 1
        elif open(cd, "rb").read() != open(md, "rb").read():
            print(f"FAIL {what}: the dumps differ")
            bad += 1
        else:
            print(f"ok   {what}: the same dump as one process on the whole file")
    # A missing rank file: exit 2 on every rank, said once.
    os.remove(os.path.join(tmp, "a2a-rs", "out.6.npy"))
    mm = run(mpirun(mpi, np) + [q, "verify", "collective", "--backend", "mpi", "--path", "a2a-rs", "--format", "int4",
                                "--ranks", str(n), "--ranks-per-node", str(g), "--block", str(block),
                                "--inputs", os.path.join(tmp, "in.{rank}.npy"),
                                "--outputs", os.path.join(tmp, "a2a-rs", "out.{rank}.npy"), "--report-dir", ""], 300,
             {"QTRANSIT_MPI_TIMEOUT": "120"})
    said = [line for line in mm.stderr.splitlines() if line.startswith("qtransit:")]
    if mm.returncode != 2 or len(said) != 1 or "out.6.npy: no such file" not in said[0]:
        print(f"FAIL verify np {np}: a missing rank file: exit {mm.returncode}, said {said}")
        bad += 1
    else:
        print(f"ok   verify np {np}: a missing rank file: exit 2, once: {said[0]}")
    shutil.rmtree(tmp)
    return 1 if bad else 0


def main():
    mode, q, mpi = sys.argv[1], os.path.abspath(sys.argv[2]), sys.argv[3]
    if not mpi or not shutil.which(mpi):
        print("skipped: no mpirun (install openmpi-bin)")
        return 77
    if mode == "same":
        return same(q, mpi, int(sys.argv[4]))
    if mode == "mismatch":
        return mismatch(q, mpi)
    if mode == "check":
        return check(q, mpi, int(sys.argv[4]))
    if mode == "nccl":
        return nccl(q, mpi)
    if mode == "verify":
        return verify(q, mpi, int(sys.argv[4]))
    return dead(q, mpi)


if __name__ == "__main__":
    sys.exit(main())
