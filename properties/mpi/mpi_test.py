#!/usr/bin/env python3
"""The mpi backend against the in-process simulation (issue 7).

  mpi_test.py same  QTRANSIT MPIRUN NP   every path under `mpirun -np NP ... --backend mpi` gives the
                                         same output bits (--dump) and the same verdicts (JSON) as
                                         `--backend cpu`; the byte counts are the bytes really sent
  mpi_test.py mismatch QTRANSIT MPIRUN   ranks started with different arguments: exit 2 on every
                                         rank with a message, no hang
  mpi_test.py dead QTRANSIT MPIRUN       a rank that never starts: the run ends (MPI abort or the
                                         QTRANSIT_MPI_TIMEOUT watchdog) with a message, no hang
Exit 77 (skipped) without mpirun.
"""
import json, os, shutil, subprocess, sys, tempfile

PATHS = ["ring-rs", "a2a-rs", "a2a-hier-rs", "tree-rs", "two-shot-ar", "ring-ag", "ring-ag-requant",
         "hpz-ag-fp", "hpz-ag-requant", "fp32-ring-rs"]
# Sums (RMS) are added in another order when each rank checks its own rows: equal to 1e-12.
LOOSE = {"rms_error", "rel_rms_error"}


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
    configs = [("int8", "fp32", 64), ("int4-asym", "fp16", 32), ("ds-int4", "fp32", 32)]
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
                    ok = x == y or (k in LOOSE and x is not None and y is not None and abs(x - y) <= 1e-12 * abs(x))
                    if not ok:
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


def main():
    mode, q, mpi = sys.argv[1], sys.argv[2], sys.argv[3]
    if not mpi or not shutil.which(mpi):
        print("skipped: no mpirun (install openmpi-bin)")
        return 77
    if mode == "same":
        return same(q, mpi, int(sys.argv[4]))
    if mode == "mismatch":
        return mismatch(q, mpi)
    return dead(q, mpi)


if __name__ == "__main__":
    sys.exit(main())
