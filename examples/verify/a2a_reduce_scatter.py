#!/usr/bin/env python3
"""A quantized all-to-all reduce-scatter in plain numpy, written as a user's framework would.

This is what qtransit calls the `a2a-rs` path (ZeRO++'s qgZ, one hop) with the `int8` format:

  * N ranks each hold a float32 tensor X_r of M elements; M is a multiple of N and S = M / N.
    Chunk c of a tensor is its elements [c*S, (c+1)*S).
  * Every rank quantizes every chunk of its tensor (its own chunk too) with INT8 symmetric block
    quantization and sends chunk c to rank c (an all-to-all).
  * Rank c decodes what it received and sums it in rank order, in float32, starting from the first
    term:  out_c = ((D(Q(X_0[c])) + D(Q(X_1[c]))) + ...) + D(Q(X_{N-1}[c])).

The script dumps what every rank contributed (its input) and what every rank holds after the
reduce-scatter, so that `qtransit verify collective` can check the result against the path's
semantics (see README.md next to this file). It can also plant a fault (--fault) to show what a
violation looks like.

The rules followed here, bit for bit (qtransit's NUMERICS.md 1.1 and 3, docs/FORMATS.md):

  INT8, symmetric absmax, restricted range: qmax = 127. For a block x_0..x_{n-1}:
    a = max |x_i|
    a == 0:  scale s = 0, every code 0, every decoded value +0
    else:    s   = max(fl32(a / 127), 2^-149)          (the max only matters for subnormal blocks)
             q_i = clamp(rne(fl32(x_i / s)), -127, 127) (rne: nearest integer, ties to even)
             x̂_i = sat(fl32(q_i * s))                  (sat clamps to +-FLT_MAX: it only acts when
                                                         a is near FLT_MAX)
  fl32(.) is one IEEE binary32 operation rounded to nearest even; numpy's float32 arithmetic is
  exactly that (no fused multiply-add, and numpy keeps subnormals), so every step below is written
  with np.float32 operands and nothing is ever computed in float64.

  Blocks of B elements are laid within each S-element chunk: they restart at every multiple of S,
  and the last block of a chunk is short when B does not divide S.

Only numpy is needed. Run with --help for the options.
"""
import argparse
import os
import sys
from fractions import Fraction

import numpy as np

QMAX = 127                                     # int8, restricted range: codes -127..127
SMALLEST_SUBNORMAL = np.float32(2.0 ** -149)   # the least positive float32
FLT_MAX = np.finfo(np.float32).max
U = Fraction(1, 2 ** 24)                       # the unit roundoff of float32


# ---- INT8 block quantization -------------------------------------------------------------------

def quantize_block(x):
    """Quantize one block (a 1-D float32 array). Returns (scale, codes, decoded)."""
    a = np.max(np.abs(x))                       # exact: |x| and max never round
    if a == 0:
        return np.float32(0), np.zeros(x.shape, np.int8), np.zeros(x.shape, np.float32)

    s = np.maximum(a / np.float32(QMAX), SMALLEST_SUBNORMAL)   # fl32(a / 127), at least 2^-149
    q = np.clip(np.rint(x / s), -QMAX, QMAX)                   # fl32(x / s), then ties-to-even
    codes = q.astype(np.int8)

    # Decode from the integer codes: a code 0 decodes to +0 even where x was -0 (0 * s = +0).
    # The product of an 8-bit integer and s is rounded once; saturation keeps it finite.
    with np.errstate(over="ignore"):
        decoded = codes.astype(np.float32) * s
    decoded = np.clip(decoded, -FLT_MAX, FLT_MAX)
    return s, codes, decoded


def quantize_decode(x, block, chunk):
    """D(Q(x)) for a 1-D float32 tensor, blocks of `block` restarting at every multiple of `chunk`."""
    decoded = np.empty_like(x)
    for chunk_start in range(0, x.size, chunk):
        chunk_end = chunk_start + chunk
        for start in range(chunk_start, chunk_end, block):
            end = min(start + block, chunk_end)     # the last block of a chunk may be short
            _, _, decoded[start:end] = quantize_block(x[start:end])
    return decoded


# ---- the reduce-scatter ------------------------------------------------------------------------

def a2a_reduce_scatter(inputs, block, skip=None):
    """Every rank's output [N, S]: out[c] = sum over j of D(Q(inputs[j, chunk c])), left to right.

    `skip` maps a shard c to a rank whose contribution is left out of it (a planted fault).
    Returns (outputs [N, S], decoded [N, M]); decoded[j] is what rank j sent, all chunks together.
    """
    n, m = inputs.shape
    s = m // n
    # What each rank puts on the wire, decoded (the receiver decodes it the same way).
    decoded = np.stack([quantize_decode(inputs[j], block, s) for j in range(n)])

    outputs = np.empty((n, s), np.float32)
    for c in range(n):                              # rank c receives chunk c from everyone
        received = [decoded[j, c * s:(c + 1) * s] for j in range(n) if skip is None or skip.get(c) != j]
        acc = received[0].copy()                    # the sum starts from the first term, not from 0
        for term in received[1:]:
            acc = acc + term                        # one float32 add per element, rounded to nearest
        outputs[c] = acc
    return outputs, decoded


# ---- what `qtransit verify collective` checks (the same-events tier) ----------------------------

def gamma(n):
    """gamma_n = n u / (1 - n u): the classic bound on n float32 adds, in any order."""
    return n * U / (1 - n * U)


def exact_sum_and_tolerance(decoded, c, i):
    """For element i of shard c: the exact sum of the decoded contributions, and the same-events
    tolerance gamma_{N-1} * sum_j |D_j[i]|, both exact (Fractions: every decoded value is a float32)."""
    n, m = decoded.shape
    s = m // n
    terms = [Fraction(float(decoded[j, c * s + i])) for j in range(n)]
    return sum(terms), gamma(n - 1) * sum(abs(t) for t in terms)


def first_float32_above(v):
    """The least float32 strictly greater than the exact value v (a Fraction)."""
    f = np.float32(float(v))
    while Fraction(float(f)) <= v:
        f = np.nextafter(f, np.float32(np.inf))
    while Fraction(float(np.nextafter(f, np.float32(-np.inf)))) > v:
        f = np.nextafter(f, np.float32(-np.inf))
    return f


# ---- inputs ------------------------------------------------------------------------------------

def make_inputs(n, m, block, seed):
    """Gradients-like float32 inputs [N, M]: normal(0, 1) values, with
      - a component shared by every rank (real gradients are correlated, their sum grows like N),
      - every rank at its own magnitude (a factor up to 100 between ranks),
      - a few outliers per rank (x 50), which coarsen their blocks' scales,
      - one all-zero block (rank 0's last block), the format's zero-scale case."""
    rng = np.random.default_rng(seed)
    shared = rng.standard_normal(m)
    own = rng.standard_normal((n, m))
    rank_scale = 10.0 ** rng.uniform(-1.0, 1.0, size=(n, 1))
    x = rank_scale * (0.5 * shared + own)
    outliers = rng.integers(0, m, size=(n, max(1, m // 512)))
    for r in range(n):
        x[r, outliers[r]] *= 50.0
    x = x.astype(np.float32)                        # the inputs are float32 from here on
    s = m // n
    last_block = (m - s) + ((s - 1) // block) * block   # blocks restart at every chunk
    x[0, last_block:] = 0.0
    return x


# ---- main --------------------------------------------------------------------------------------

FAULTS = ("none", "outside-bound", "one-ulp", "drop-rank")


def parse_args(argv):
    p = argparse.ArgumentParser(
        description="A quantized all-to-all reduce-scatter (qtransit's a2a-rs path, INT8 blocks) "
                    "computed in numpy; writes every rank's input and output as .npy for "
                    "`qtransit verify collective`.",
        epilog="Example: %(prog)s --ranks 8 --out-dir run && qtransit verify collective --path a2a-rs "
               "--ranks 8 --format int8 --block 32 --inputs run/inputs.npy --outputs run/outputs.npy")
    p.add_argument("--ranks", type=int, default=8, metavar="N", help="number of ranks (default 8)")
    p.add_argument("--elements", type=int, default=4096, metavar="M",
                   help="elements per rank; must be a multiple of N (default 4096)")
    p.add_argument("--block", type=int, default=32, metavar="B",
                   help="quantization block size; blocks restart at every chunk of M/N elements (default 32)")
    p.add_argument("--seed", type=int, default=1, help="seed of the inputs (default 1)")
    p.add_argument("--out-dir", default=".", metavar="DIR", help="where to write the .npy files (default .)")
    p.add_argument("--per-rank", action="store_true",
                   help="write one file per rank, in.{rank}.npy [M] and out.{rank}.npy [S], instead of "
                        "inputs.npy [N, M] and outputs.npy [N, S]")
    p.add_argument("--dump-decoded", action="store_true",
                   help="also write decoded.npy [N, M] (decoded.{rank}.npy [M] with --per-rank): what "
                        "each rank sent, decoded")
    p.add_argument("--fault", choices=FAULTS, default="none",
                   help="plant a fault in the outputs: outside-bound (one element just outside the "
                        "same-events tolerance), one-ulp (one element one ulp up: not bit exact, and "
                        "usually within the tolerance for N >= 4; the script says whether it is), drop-rank (shard C's sum leaves out rank "
                        "(C+1) %% N) (default none)")
    p.add_argument("--fault-shard", type=int, default=1, metavar="C", help="the shard of the fault (default 1)")
    p.add_argument("--fault-element", type=int, default=5, metavar="I",
                   help="the element of the fault, 0..S-1 within the shard (default 5)")
    args = p.parse_args(argv)

    if args.ranks < 2:
        p.error(f"--ranks must be at least 2, got {args.ranks}")
    if args.elements <= 0 or args.elements % args.ranks:
        p.error(f"--elements must be a positive multiple of --ranks ({args.ranks}), got {args.elements}")
    if args.block <= 0:
        p.error(f"--block must be positive, got {args.block}")
    shard = args.elements // args.ranks
    if args.fault != "none":
        if not 0 <= args.fault_shard < args.ranks:
            p.error(f"--fault-shard must be in 0..{args.ranks - 1}, got {args.fault_shard}")
        if not 0 <= args.fault_element < shard:
            p.error(f"--fault-element must be in 0..{shard - 1} (S = {shard}), got {args.fault_element}")
    return args


def main(argv=None):
    args = parse_args(argv)
    n, m, b = args.ranks, args.elements, args.block
    s = m // n
    c, i = args.fault_shard, args.fault_element

    inputs = make_inputs(n, m, b, args.seed)
    skip = {c: (c + 1) % n} if args.fault == "drop-rank" else None
    outputs, decoded = a2a_reduce_scatter(inputs, b, skip)

    what = "no fault: every output is the a2a-rs sum, bit for bit"
    if args.fault in ("outside-bound", "one-ulp"):
        exact, tol = exact_sum_and_tolerance(decoded, c, i)
        before = outputs[c, i]
        if args.fault == "outside-bound":
            outputs[c, i] = first_float32_above(exact + Fraction(3, 2) * tol)
        else:
            outputs[c, i] = np.nextafter(before, np.float32(np.inf))
        off = abs(Fraction(float(outputs[c, i])) - exact)
        inside = "inside" if off <= tol else "OUTSIDE"
        what = (f"{args.fault}: shard {c} (rank {c}), element {i} (tensor index {c * s + i}): "
                f"{float(before)!r} -> {float(outputs[c, i])!r}; |output - exact sum| = {float(off):.6g}, "
                f"{inside} the same-events tolerance gamma_{n - 1} * sum_j |D_j| = {float(tol):.6g}")
        if args.fault == "one-ulp" and off > tol:
            # One ulp is up to 2u |x|, and the tolerance is (N-1) u sum_j |D_j| (about): with few
            # ranks and little cancellation the move can leave it (N = 3 does for some elements).
            print(f"note: this one-ulp move is outside the same-events tolerance (N = {n}); "
                  "pick another element or more ranks for a fault only `exact` sees", file=sys.stderr)
    elif args.fault == "drop-rank":
        what = f"drop-rank: shard {c} (rank {c}) leaves out rank {(c + 1) % n}'s contribution in every element"

    os.makedirs(args.out_dir, exist_ok=True)
    written = []

    def save(name, array):
        path = os.path.join(args.out_dir, name)
        np.save(path, array)
        written.append(f"  {path}  {array.dtype} {list(array.shape)}")

    if args.per_rank:
        for r in range(n):
            save(f"in.{r}.npy", inputs[r])
            save(f"out.{r}.npy", outputs[r])
            if args.dump_decoded:
                save(f"decoded.{r}.npy", decoded[r])
        in_arg, out_arg = os.path.join(args.out_dir, "in.{rank}.npy"), os.path.join(args.out_dir, "out.{rank}.npy")
    else:
        save("inputs.npy", inputs)
        save("outputs.npy", outputs)
        if args.dump_decoded:
            save("decoded.npy", decoded)
        in_arg, out_arg = os.path.join(args.out_dir, "inputs.npy"), os.path.join(args.out_dir, "outputs.npy")

    print(f"a2a-rs reduce-scatter, int8: N = {n} ranks, M = {m} elements per rank, S = {s}, "
          f"block B = {b}, seed {args.seed}")
    print(what)
    print("wrote:")
    print("\n".join(written))
    print("verify with:")
    print(f"  qtransit verify collective --path a2a-rs --ranks {n} --format int8 --block {b} "
          f"--inputs '{in_arg}' --outputs '{out_arg}'")
    return 0


if __name__ == "__main__":
    sys.exit(main())
