#!/usr/bin/env python3
"""Issue 7's benchmark: per-rank checking cost against the collective itself, under mpirun.

  bench/mpi_overhead.py QTRANSIT [--np 2,4,8] [--paths a2a-rs,ring-ag] [--elements M] [--block B]
                        [--format F] [--repeats R] [--mpirun MPIRUN]

Runs `mpirun -np N qtransit simulate --backend mpi --path P --ranks N --ranks-per-node N ...` R times
per (N, P) and reads rank 0's stderr line (cli/simulate.cpp). Per rank r, in the same run:
  checking  = CPU time of rank r checking its own outputs (exact reference and bounds, in its sink);
              the table gives the largest over the ranks;
  schedule  = CPU time of rank r's process running the path's columns (run_paths, without the sink):
              every process computes every rank's arithmetic, so rank r's share is schedule / N;
              the table gives the median over the processes (they differ by the time they poll
              for messages);
  ratio     = checking / (schedule / N) of each rank: the median and the largest over the ranks.
CPU time, not wall time: on a machine with fewer cores than ranks (oversubscribed) wall time counts
the time a process waits for the others to be scheduled. Prints the median of the R runs as a
Markdown table (and the wall-clock figures next to it).
"""
import argparse, os, re, statistics, subprocess, shutil, sys

LINE = re.compile(r"qtransit: mpi N=(\d+) (\S+): busiest rank checking ([\d.]+) s \(cpu ([\d.]+) s\); "
                  r"schedule ([\d.]+) s \(cpu ([\d.]+) s\), per rank ([\d.]+) s \(cpu ([\d.]+) s\); "
                  r"checking / rank's collective \(cpu\) median ([\d.]+), max ([\d.]+); whole pass ([\d.]+) s")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("qtransit")
    ap.add_argument("--np", default="2,4,8")
    ap.add_argument("--paths", default="a2a-rs,ring-ag")
    ap.add_argument("--elements", type=int, default=262144)
    ap.add_argument("--block", type=int, default=256)
    ap.add_argument("--format", default="int8")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--mpirun", default=shutil.which("mpirun") or "mpirun")
    a = ap.parse_args()
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    rows = []
    for path in a.paths.split(","):
        for n in [int(x) for x in a.np.split(",")]:
            got = []
            for _ in range(a.repeats):
                cmd = [a.mpirun, "--oversubscribe", "-np", str(n), a.qtransit, "simulate", "--backend", "mpi", "--path", path,
                       "--ranks", str(n), "--ranks-per-node", str(n), "--elements", str(a.elements), "--format", a.format,
                       "--block", str(a.block)]
                r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
                m = LINE.search(r.stderr)
                if r.returncode != 0 or not m:
                    print(f"run failed (exit {r.returncode}): {' '.join(cmd)}\n{r.stderr}", file=sys.stderr)
                    return 1
                got.append([float(x) for x in m.groups()[2:]])
            med = [statistics.median(c) for c in zip(*got)]
            rows.append((path, n, med))
            print(f"{path} N={n}: {med}", file=sys.stderr)
    print("| path | N | checking, cpu (s) | schedule, cpu (s) | per-rank collective, cpu (s) | checking / per-rank "
          "collective: median | max | checking, wall (s) | per-rank collective, wall (s) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for path, n, (cw, cc, sw, sc, pw, pc, ratio, rmax, _) in rows:
        print(f"| {path} | {n} | {cc:.4f} | {sc:.4f} | {pc:.4f} | {ratio:.2f} | {rmax:.2f} | {cw:.4f} | {pw:.4f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
