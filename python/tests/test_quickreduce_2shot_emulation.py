"""QuickReduce's quantized two-shot all-reduce (vLLM's and SGLang's ROCm quick all-reduce,
`AllReduceTwoshot` with CodecQ4, CodecQ6 or CodecQ8, fp16 arithmetic T = half: the default for bf16
payloads too, as the bf16->fp16 cast is on), emulated independently in numpy from its description in
docs/SOURCES.md section 2 (2.1 the layout, 2.6 the two-shot sum, 2.9 the recipe; vllm-project/vllm
csrc/quickreduce/quick_reduce_impl.cuh at 56522fd, AllReduceTwoshot::run from c. 19788, and base.h at
1e8e860, packed_assign_add<half> = v_pk_add_f16), and compared bit for bit with qtransit's built-in
paths `quickreduce-int4`, `quickreduce-int6` and `quickreduce-int8`. Written from that description
(cross-read against the kernel's text), not from qtransit's C++ sources. The codec is not written
again here: it is test_quickreduce_emulation.py's `emulate` (the same recipe, itself compared bit for
bit with qtransit's formats quickreduce-q4/q6/q8), applied to QuickReduce's own interleaved groups.

What is emulated, for N in {2, 4, 8} ranks with inputs x[r] (M values each, M a multiple of 16384),
codec Q<b>, r16(.) one round to nearest even to binary16 (subnormals kept):

  cast      x16 = r16(x)  (the bf16->fp16 cast, or an fp16 tensor; |x| < 65520 only)
  layout    tiles of 16384 elements; element e's owner is ((e mod 16384) div 2048) div (8/N) (rank r
            owns atoms [r 8/N, (r+1) 8/N) of every tile, 2048 elements each: SOURCES 2.1); its group
            is (e div 64, e mod 2): the even or the odd elements of an aligned 64-span. No group
            straddles two owners, so the codec can be applied to a whole row at once.
  phase 1   every rank j encodes every segment with Q<b>, the one it owns included, and owner r
            decodes the N contributions y_j = dec(enc(x16[j])) (SOURCES 2.6 step 1: "the owner's own
            input is quantized too").
  sum       S = +0 (tR's all-zero bits); S = r16(S + y_j) for j = 0, 1, ..., N-1 in rank order
            (v_pk_add_f16, one rounding each; 2.6 step 2, 2.9 step 6).
  phase 2   the owner encodes S with Q<b> (new extremes and scales, the same groups) and sends it to
            every rank, itself included; every rank decodes it: out[r] = dec(enc(S)) on every rank,
            bit-identical (2.6 steps 3-4: the owner does not keep its unrequantized sum).
  output    fp16 (the path's output type; QuickReduce's bf16_rne of it under the cast is not taken).

Signed zeros: S never is -0 (+0 + -0 = +0, and an exact cancellation gives +0), so a group whose
sum is all zero has m = +0, dec = -0, and decodes to -0: all-zero inputs give -0 on every rank, while
every contribution (from +0 inputs) is -0 and the sum is +0.

qtransit's layout differs by a permutation, the same on every rank: its chunk r is the contiguous
elements [r M/N, (r+1) M/N) and its groups are 32 consecutive elements. So qtransit runs on x[:, P],
P listing, owner by owner, QuickReduce's elements of that owner in increasing tile order, within a
tile in increasing 64-span order, each span's 32 even-position elements then its 32 odd ones; its
outputs come back to the natural positions through inv(P) and are compared with the emulation at
every rank, as binary32 bits (signed zeros count).

Not modeled (not fed): |x| >= 65520; fp16 sums past 65504 (FP16_OVFL saturation vs qtransit's inf);
NaN and inf; groups mixing +0 and -0 within one rank (the extreme's signed-zero rule, SOURCES 2.10);
the uncast bf16 kernel; the wire's byte packing (2.4, a layout, not arithmetic).
"""

import os
import sys
import types

import numpy as np
import pytest

_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:  # (pytest's rootdir insertion puts it there already)
    sys.path.insert(0, _HERE)
from test_quickreduce_emulation import (  # noqa: E402  the codec, emulated and checked there
    BITS, EPS, F16, F32, F64, FP16_MAX, GROUP, SPAN, emulate, exact_fp16, r16, rcp16)

RANKS = (2, 4, 8)
TILE = 16384  # 256 threads x 8 atoms x 8 values (base.h kTileSize)
ATOMS = 8
ATOM = TILE // ATOMS  # 2048: one atom of a tile


# ---- QuickReduce's layout and qtransit's -----------------------------------------------------------

def qr_owner(M, N):
    """owner[e] for QuickReduce's two-shot: ((e mod 16384) div 2048) div (8/N) (SOURCES 2.1, 2.9 step 1)."""
    e = np.arange(M)
    return ((e % TILE) // ATOM) // (ATOMS // N)


def qr_group(e):
    """QuickReduce's group of element e: (e div 64, e mod 2), numbered 2 (e div 64) + (e mod 2)."""
    e = np.asarray(e)
    return 2 * (e // SPAN) + e % 2


def permutation(M, N):
    """P: qtransit's position k holds QuickReduce's element P[k]. Owner by owner (qtransit's chunks),
    that owner's elements in tile order, then 64-span order, each span's even positions then its odd."""
    assert N in RANKS and M % TILE == 0
    e = np.arange(M).reshape(M // TILE, N, TILE // N)  # [tile, owner, element within the owner's atoms]
    e = e.transpose(1, 0, 2).reshape(-1, GROUP, 2)  # owner-major; [span, j, parity]: 64 k + 2 j + p
    return np.ascontiguousarray(e.transpose(0, 2, 1)).reshape(-1)  # [span, parity, j]


def inverse(P):
    inv = np.empty_like(P)
    inv[P] = np.arange(P.size)
    return inv


# ---- the emulation ---------------------------------------------------------------------------------

def fp16_values(z):
    """binary32 arrays holding fp16 values (r16 of z)."""
    return np.asarray(z, F64).astype(F16).astype(F32)


def emulate_2shot(x, b, *, owner_keeps=False, start="zero", accum="fp16", layout="interleaved"):
    """QuickReduce's two-shot all-reduce with CodecQ<b> of x [N, M] (binary32, natural layout).
    Returns a namespace: x16 [N, M], owner [M], dec1 [N, M/32] (qtransit's group order: span 0 even,
    span 0 odd, ...), u1/y1 [N, M] (phase 1's codes and decoded contributions, natural positions),
    S [M] (the sums), dec2 [M/32], u2/y2 [M] (the requantization), out [N, M] (every rank's output).
    The keywords select deliberately wrong variants (test_a_wrong_emulation_is_caught):
    owner_keeps=True, the owner adding its own fp16 input instead of its decoded contribution;
    start="first", the sum started from rank 0's term instead of +0; accum="fp32", the sum in binary32
    (rounded to fp16 once, by the requantization's input cast); layout="consecutive", groups of 32
    consecutive elements instead of the even/odd interleave."""
    x = np.asarray(x, F32)
    N, M = x.shape
    assert N in RANKS and M % TILE == 0, (N, M)
    x16 = x.astype(F64).astype(F16).astype(F64)  # the cast, RNE (emulate applies the same rounding)
    # phase 1: every rank encodes every segment, its own included. A group lies inside one owner's
    # segment (and one row), so the codec over the flattened [N * M] array is the codec per segment.
    dec1, u1, y1 = emulate(x.reshape(-1), b, layout=layout)
    dec1, u1, y1 = dec1.reshape(N, -1), u1.reshape(N, M), y1.reshape(N, M)
    owner = qr_owner(M, N)
    terms = y1.astype(F64)
    if owner_keeps:
        terms = np.where(owner[None, :] == np.arange(N)[:, None], x16, terms)
    # the owner's sum, in rank order
    if accum == "fp16":
        if start == "zero":
            S, first = np.zeros(M), 0  # +0: tR's all-zero bits
        else:
            S, first = terms[0].copy(), 1
        for j in range(first, N):
            exact = S + terms[j]  # two fp16 values: the sum is exact in binary64
            assert np.all(np.abs(exact) <= FP16_MAX), "an fp16 sum past 65504: not modeled"
            S = r16(exact).astype(F64)  # v_pk_add_f16: one rounding
    else:
        assert accum == "fp32" and start == "zero"
        S32 = np.zeros(M, F32)
        for j in range(N):
            S32 = S32 + terms[j].astype(F32)  # binary32 adds (wrong)
        S = S32.astype(F64)
    S = S.astype(F32)
    # phase 2: the owner requantizes its sum; every rank decodes it
    dec2, u2, y2 = emulate(S, b, layout=layout)
    out = np.tile(y2, (N, 1))
    return types.SimpleNamespace(x16=x16.astype(F32), owner=owner, dec1=dec1, u1=u1, y1=y1, S=S,
                                 dec2=dec2, u2=u2, y2=y2, out=out)


def enc_of(dec):
    """The encode factor of the scales dec (the codec's t = r16(dec + 2^-24), enc = rcp16(t))."""
    return rcp16(r16(np.asarray(dec, F64) + EPS).astype(F64)).astype(F64)


# ---- qtransit and the comparison -------------------------------------------------------------------

def _f32(v):
    v = F32(v)
    return f"{float(v)!r} ({float(v).hex()}, bits 0x{int(np.array(v).view(np.uint32)):08x})"


def mismatch(ours, theirs, what):
    """None when the two [N, M] binary32 arrays (natural positions) hold the same bits; otherwise a
    message with the count and the first differing (rank, element): owner, group, qtransit's position."""
    ours = np.asarray(ours, dtype=F32)
    theirs = np.asarray(theirs)
    if theirs.shape != ours.shape:
        return f"{what}: qtransit's shape {theirs.shape}, the emulation's {ours.shape}"
    if theirs.dtype != F32:
        return f"{what}: qtransit's dtype {theirs.dtype}, expected float32"
    d = np.argwhere(ours.view(np.uint32) != theirs.view(np.uint32))
    if d.size == 0:
        return None
    N, M = ours.shape
    owner, inv = qr_owner(M, N), inverse(permutation(M, N))
    lines = [f"{what}: {len(d)} of {ours.size} values differ in their bits; first ones:"]
    for r, e in d[:6]:
        lines.append(f"  rank {r}, element {e} (owner {owner[e]}, span {e // SPAN} "
                     f"{'odd' if e % 2 else 'even'}, qtransit position {inv[e]}): "
                     f"emulation {_f32(ours[r, e])}, qtransit {_f32(theirs[r, e])}")
    return "\n".join(lines)


def run_path(x, b):
    """qtransit's quickreduce-int<b> on x [N, M] as given (qtransit's layout); its outputs [N, M]."""
    import qtransit  # here, so that the emulation's own checks run without the new paths

    path = f"quickreduce-int{b}"
    r = qtransit.simulate(path, inputs=x, keep_outputs=True)  # block: the wire's default, 32
    run = r.to_dict()["runs"][0]
    assert run["path"] == path, run
    assert r.passed, f"qtransit's own bounds failed: {getattr(r, 'first_failure', run)}"
    assert run["format"] == f"quickreduce-q{b}", run["format"]
    assert run["k_min"] == 2 and run["k_max"] == 2, (run["k_min"], run["k_max"])  # every value twice
    out = np.asarray(r.outputs)
    assert out.shape == x.shape, out.shape
    return out


def qtransit_outputs(x, b):
    """qtransit on the permuted inputs x[:, P], its outputs back at the natural positions."""
    N, M = x.shape
    P = permutation(M, N)
    out = run_path(np.ascontiguousarray(np.asarray(x, F32)[:, P]), b)
    return np.ascontiguousarray(out[:, inverse(P)])


def assert_path_matches(x, b, em=None):
    em = em or emulate_2shot(x, b)
    out = qtransit_outputs(x, b)
    msg = mismatch(em.out, out, f"quickreduce-int{b}")
    assert msg is None, msg
    return em, out


# ---- inputs (binary32 [N, M], natural layout) ------------------------------------------------------

def _view(z, N, M):
    """[N, M] -> [N, spans, 32, 2]: [r, k, j, p] is element 64 k + 2 j + p, group (k, p)."""
    return z.reshape(N, M // SPAN, GROUP, 2)


def normal(rng, N, M):
    return fp16_values(rng.standard_normal((N, M)) * 2.0)


def mixed(rng, N, M):
    """Every (rank, group) its own magnitude, 10^-6 .. 10^2; every fifth span the same tiny magnitude
    (10^-6 .. 10^-3) on every rank, so that sums too have groups whose enc saturates (SOURCES 2.8)."""
    spans = M // SPAN
    mag = 10.0 ** rng.uniform(-6, 2, (N, spans, 1, 2))
    shared = np.arange(spans) % 5 == 0
    mag[:, shared] = 10.0 ** rng.uniform(-6, -3, (1, int(shared.sum()), 1, 2))
    z = rng.standard_normal((N, spans, GROUP, 2)) * mag
    return fp16_values(z.reshape(N, M))


def not_fp16(rng, N, M):
    """binary32 values that are not fp16 values (the cast): spread over 10^-7 .. 10^2, and on every
    third element an exact midpoint between two neighbouring fp16 values below 100 (normal or
    subnormal), which rounds to the even one."""
    n = N * M
    x = rng.standard_normal(n) * 10.0 ** rng.uniform(-7, 2, n)
    bits = rng.integers(1, 0x5640, n).astype(np.uint16)  # positive fp16 values below 100
    lo, hi = bits.view(F16).astype(F64), (bits + np.uint16(1)).view(F16).astype(F64)
    mid = (lo + hi) / 2 * np.where(rng.random(n) < 0.5, 1.0, -1.0)  # 12 significant bits: binary32
    x = np.where(np.arange(n) % 3 == 0, mid, x)
    return x.astype(F32).reshape(N, M)


ZT_KINDS = 5  # zeros_ties: the span kinds, k mod 5


def zeros_ties(rng, N, M):
    """Spans of five kinds (span k: kind k mod 5) on fp16 values near 1:
    0  all +0 on every rank: every contribution -0, the sum +0, the output -0;
    1  the even group all +0 on rank 0 only, the odd group all -0 on rank N-1 only (no group mixes);
    2  a tie of the extreme on every rank: +4 at j = 3 and -4 at j = 17 (m = -4, +4 takes the top code);
    3  a tie in the sum: rank 0 holds +4 at j = 5 (and small values, 0 at j = 9), rank N-1 holds -4 at
       j = 9 alone, the others 0: S = +4 and -4, the requantization's m = -4;
    4  ranks cancel in pairs (rank 2i+1 = -rank 2i, unique extremes +-3): every sum is +0, output -0."""
    g = _view(np.clip(rng.standard_normal((N, M)), -2.5, 2.5), N, M).copy()
    kind = np.arange(M // SPAN) % ZT_KINDS
    g[:, kind == 0] = 0.0
    g[0, kind == 1, :, 0] = 0.0
    g[N - 1, kind == 1, :, 1] = -0.0
    t = kind == 2
    g[:, t, 3, :], g[:, t, 17, :] = 4.0, -4.0
    t = kind == 3
    g[:, t] = 0.0
    g[0, t] = np.clip(rng.standard_normal(g[0, t].shape) * 0.25, -1, 1)
    g[0, t, 5, :], g[0, t, 9, :] = 4.0, 0.0
    g[N - 1, t, 9, :] = -4.0
    t = kind == 4
    g[0::2, t, 0, :] = 3.0 * np.where(rng.random(g[0::2, t, 0, :].shape) < 0.5, 1.0, -1.0)
    g[1::2, t] = -g[0::2, t]
    return fp16_values(g.reshape(N, M))


INPUTS = {"normal": normal, "mixed": mixed, "not-fp16": not_fp16, "zeros-ties": zeros_ties}


def make(kind, b, N, M):
    x = INPUTS[kind](np.random.default_rng(52_000 + 1000 * list(INPUTS).index(kind) + 10 * b + N), N, M)
    assert x.dtype == F32 and x.shape == (N, M)
    return x


# The compared inputs (kind, b, N, M): mixed magnitudes for every b and N on two tiles (so that the
# permutation's tile order counts); the other kinds on one tile, each kind and each b meeting every N
# once (a Latin square).
OTHER = ("normal", "not-fp16", "zeros-ties")
CASES = ([("mixed", b, N, 2 * TILE) for b in BITS for N in RANKS]
         + [(kind, b, RANKS[(i + j) % 3], TILE) for i, kind in enumerate(OTHER) for j, b in enumerate(BITS)])


# ---- the emulation's own checks (no qtransit needed) ---------------------------------------------

@pytest.mark.parametrize("M", [16384, 32768])
@pytest.mark.parametrize("N", RANKS)
def test_permutation_maps_owners_to_chunks(N, M):
    P = permutation(M, N)
    assert np.array_equal(np.sort(P), np.arange(M))  # a permutation
    owner = qr_owner(M, N)
    assert np.array_equal(np.bincount(owner, minlength=N), np.full(N, M // N))  # M/N each
    C = M // N
    for r in range(N):
        assert np.all(owner[P[r * C:(r + 1) * C]] == r)  # qtransit's chunk r: owner r's elements
        mine = P[r * C:(r + 1) * C]
        assert np.all(np.diff(mine // SPAN) >= 0)  # in tile, then span order
    # qtransit's group of 32 consecutive positions is exactly one QuickReduce group, each met once
    grp = qr_group(P).reshape(-1, GROUP)
    assert np.all(grp == grp[:, :1])
    assert np.array_equal(np.sort(grp[:, 0]), np.arange(M // GROUP))
    # a QuickReduce group lies inside one owner's segment
    assert np.all(owner.reshape(-1, SPAN) == owner[::SPAN, None])
    # N = 2: rank 0 owns the first 8192 elements of every tile
    if N == 2:
        assert np.array_equal(owner[:TILE], np.repeat([0, 1], 8192))
    assert np.array_equal(inverse(P)[P], np.arange(M))


def test_phase_one_is_the_codec_per_owner_segment():
    """The whole-row codec equals the codec applied to each owner's segment on its own, and the sum is
    the exact rational sum rounded to fp16 after every term (exact_fp16, by Fractions)."""
    N, M, b = 8, 32768, 4
    x = make("mixed", b, N, M)
    em = emulate_2shot(x, b)
    for r in (0, 5):
        for o in range(N):
            seg = em.owner == o
            _, u, y = emulate(x[r, seg], b)
            assert np.array_equal(u, em.u1[r, seg])
            assert np.array_equal(y.view(np.uint32), em.y1[r, seg].view(np.uint32))
    sample = np.random.default_rng(3).choice(M, 300, replace=False)
    for e in sample:
        s = 0.0
        for j in range(N):
            s = exact_fp16(s + float(em.y1[j, e]))  # s and y are binary64-exact; Fraction inside
        assert s == float(em.S[e]), (e, s, em.S[e])
    assert not np.any(np.signbit(em.S) & (em.S == 0))  # the sum is never -0


@pytest.mark.parametrize("kind, b, N, M", CASES)
def test_inputs_reach_their_cases(kind, b, N, M):
    """Each compared input exercises what its kind is named for, so that the comparisons cover it."""
    x = make(kind, b, N, M)
    em = emulate_2shot(x, b)
    assert np.all(em.out.view(np.uint32) == em.out[:1].view(np.uint32))  # every rank the same
    assert np.all(np.abs(em.x16) < 65520)
    sat1 = np.abs(enc_of(em.dec1)) == FP16_MAX
    sat2 = np.abs(enc_of(em.dec2)) == FP16_MAX
    if kind == "normal":
        assert np.array_equal(em.x16, x) and not sat1.any() and not sat2.any()
    if kind == "mixed":
        assert np.array_equal(em.x16, x)
        assert sat1.any() and (~sat1).any() and sat2.any() and (~sat2).any()
        assert np.any((em.y1 != 0) & (np.abs(em.y1) < 2.0 ** -14))  # subnormal contributions
        # groups whose every contribution decodes to zero (saturated, tiny): a +0 sum, -0 outputs
        assert np.any(np.all((em.S == 0).reshape(-1, GROUP, 2), axis=1))
    if kind == "not-fp16":
        assert (em.x16 != x).mean() > 0.5
        assert np.any((np.abs(x) > 0) & (em.x16 == 0)) and np.any((em.x16 != 0) & (np.abs(em.x16) < 2.0 ** -14))
    if kind == "zeros-ties":
        e = np.arange(M)
        kind_of = (e // SPAN) % ZT_KINDS  # each element's span kind
        j = (e % SPAN) // 2  # its place in its group
        zero = (kind_of == 0) | (kind_of == 4)
        assert np.all(em.S[zero].view(np.uint32) == 0)  # +0 sums
        assert np.all(em.out[:, zero].view(np.uint32) == 0x80000000)  # -0 outputs
        assert np.all(em.y1[:, kind_of == 0].view(np.uint32) == 0x80000000)  # -0 contributions
        k1 = kind_of == 1
        assert np.all(em.y1[0, k1 & (e % 2 == 0)].view(np.uint32) == 0x80000000)  # +0 group -> -0
        assert np.all(em.y1[N - 1, k1 & (e % 2 == 1)].view(np.uint32) == 0)  # -0 group -> +0
        top = 2 ** b - 1
        assert np.all(em.u1[:, (kind_of == 2) & (j == 3)] == top)  # the tie's +4, clamped
        assert np.all(em.u1[:, (kind_of == 2) & (j == 17)] == 0)
        assert np.all(em.u2[(kind_of == 3) & (j == 5)] == top) and np.all(em.u2[(kind_of == 3) & (j == 9)] == 0)
        assert np.all(em.S[(kind_of == 3) & (j == 5)] == 4.0) and np.all(em.S[(kind_of == 3) & (j == 9)] == -4.0)


def test_all_zero_inputs_by_hand():
    # Every input +0 on ranks 0..N-2 and -0 on rank N-1 (no group mixes the two).
    # A +0 group: m = +0 (max = min = +0), dec = r16(+0 * s) = -0 (s < 0); t = r16(-0 + 2^-24) = 2^-24,
    #   1/t = 2^24 overflows: enc = +65504 (saturated); w = r16(+0 * 65504) = +0, q = 0, u = bias,
    #   y = (u - bias) * dec = 0 * -0 = -0: every contribution from a +0 group is -0.
    # A -0 group: m = -0, dec = +0, t = 2^-24, enc = +65504; w = -0, q = 0, y = 0 * +0 = +0.
    # The sum: S = +0; r16(+0 + -0) = +0 (RNE: a sum of opposite zeros is +0); r16(+0 + +0) = +0.
    # Requantize S = +0 everywhere: as a +0 group, dec = -0 and every output is -0, on every rank.
    # (A sum started from rank 0's term would be -0 + -0 + ... ; with rank N-1's +0 it is +0 here, and
    # for all-(+0) inputs it stays -0: then m = -0, dec = +0 and the outputs would be +0.)
    for b in BITS:
        for N in RANKS:
            x = np.zeros((N, TILE), F32)
            x[N - 1] = -0.0
            em = emulate_2shot(x, b)
            assert np.all(em.dec1[:N - 1].view(np.uint32) == 0x80000000) and np.all(em.dec1[N - 1].view(np.uint32) == 0)
            assert np.all(em.u1 == 2 ** (b - 1))
            assert np.all(em.y1[:N - 1].view(np.uint32) == 0x80000000) and np.all(em.y1[N - 1].view(np.uint32) == 0)
            assert np.all(em.S.view(np.uint32) == 0)  # +0
            assert np.all(em.dec2.view(np.uint32) == 0x80000000) and np.all(em.u2 == 2 ** (b - 1))
            assert np.all(em.out.view(np.uint32) == 0x80000000)  # -0 on every rank
            wrong = emulate_2shot(np.zeros((N, TILE), F32), b, start="first")
            assert np.all(wrong.S.view(np.uint32) == 0x80000000) and np.all(wrong.out.view(np.uint32) == 0)


# ---- the hand golden -----------------------------------------------------------------------------
#
# N = 2, M = 16384, Q4 (s = -1/8, codes -8..7, bias 8). Rank 0 owns [0, 8192), rank 1 [8192, 16384).
# Two groups hold values; everything else is +0 on both ranks (-> -0 outputs, as above).
#
# Group A = span 0, even positions (elements 0, 2, ..., 62), owner 0.
#   rank 0: x[0] = 1.0, x[2] = 0.3 (binary32; not an fp16 value). x16(0.3): in [0.25, 0.5) fp16 steps
#     are 2^-12; 0.3 * 4096 = 1228.8 -> 1229: x16 = 1229/4096. m = 1.0 (max 1 vs min +0).
#     dec = -0.125, t = r16(-0.125 + 2^-24) = -0.125 (half a step there is 2^-15), enc = -8.
#     1.0 -> w = -8, u = 0, y = 1.0.   1229/4096 -> w = -9832/4096 = -2.400390625 (exact), q = -2,
#     u = 6, y = 0.25.   +0 -> w = -0, u = 8, y = 0 * -0.125 = -0.
#   rank 1: x[0] = 0.75, x[2] = -0.5. max 0.75, min -0.5: m = 0.75. dec = r16(-0.09375) = -0.09375;
#     t = -0.09375 (half a step, 2^-15, > 2^-24); enc = r16(-10.666...): steps of 2^-7 in [8, 16),
#     10.6667 * 128 = 1365.33 -> -1365/128 = -10.6640625.
#     0.75 -> w = r16(-7.998046875): steps of 2^-8 in [4, 8), 2047.5 -> a tie, to even 2048: -8.0;
#     u = 0, y = -8 * -0.09375 = 0.75.   -0.5 -> w = 5.33203125 (1365 * 2^-8, exact), q = 5, u = 13,
#     y = 5 * -0.09375 = -0.46875.   +0 -> y = -0.
#   sums: S[0] = r16(r16(+0 + 1.0) + 0.75) = 1.75; S[2] = r16(r16(+0 + 0.25) - 0.46875) = -0.21875;
#     S[4..62 even] = r16(r16(+0 + -0) + -0) = +0.
#   requantize: m = 1.75, dec = r16(-1.75/8) = -0.21875, t = -0.21875, enc = r16(-4.5714...): steps
#     2^-8, 1170.29 -> -1170/256 = -4.5703125.
#     1.75 -> w = r16(-7.998046875) = -8 (the same tie), u = 0, y = 1.75.
#     -0.21875 -> w = r16(0.999755859375): steps of 2^-11 in [0.5, 1), 2047.5 -> a tie, to even
#     2048: 1.0; q = 1, u = 9, y = 1 * -0.21875 = -0.21875.   +0 -> w = -0, u = 8, y = -0.
# Group B = span 128, odd positions (elements 8193, 8195, ..., 8255), owner 1.
#   rank 0: x[8193] = 0.75, x[8195] = 1.0: m = 1, dec = -0.125, enc = -8: 0.75 -> w = -6, u = 2,
#     y = 0.75; 1.0 -> u = 0, y = 1.0; +0 -> y = -0.
#   rank 1: x[8193] = 1000, x[8195] = 250: m = 1000, dec = -125, t = -125, enc = r16(-0.008): steps of
#     2^-17 in [2^-7, 2^-6), 0.008 * 2^17 = 1048.576 -> -1049 * 2^-17.
#     1000 -> w = r16(-1049000 * 2^-17) = r16(-8.00323...): steps 2^-7, 1024.41 -> -8.0; u = 0,
#     y = 1000.   250 -> w = r16(-262250 * 2^-17) = r16(-2.00081): steps 2^-9, 1024.41 -> -2.0;
#     u = 6, y = -2 * -125 = 250.   +0 -> y = -0.
#   sums: S[8193] = r16(0.75 + 1000) = r16(1000.75): steps of 0.5 in [512, 1024), 2001.5 -> a tie, to
#     even 2002: 1001 (the fp16 sum rounds). S[8195] = r16(1.0 + 250) = 251 (exact). Others +0.
#   requantize: m = 1001, dec = r16(-125.125) = -125.125 (2002 steps of 2^-4), t = -125.125,
#     enc = r16(-1/125.125) = r16(-0.0079920...): 2^17/125.125 = 1047.52 -> -1048 * 2^-17.
#     1001 -> w = r16(-1049048 * 2^-17) = r16(-8.0036): 1024.46 steps of 2^-7 -> -8.0; u = 0,
#     y = 1001.   251 -> w = r16(-263048 * 2^-17) = r16(-2.006897): steps 2^-9, 1027.53 -> 1028:
#     -2.0078125; q = -2, u = 6, y = -2 * -125.125 = 250.25 (2002 steps of 2^-3: exact).
#     +0 -> y = -0.
# Outputs, on both ranks: [0] = 1.75, [2] = -0.21875, [8193] = 1001, [8195] = 250.25; every other
# element -0 (bits 0x80000000): the zeros of groups A and B, and all-(+0) groups elsewhere.

GOLDEN_N, GOLDEN_M, GOLDEN_B = 2, TILE, 4
GOLDEN_IN = {(0, 0): 1.0, (0, 2): 0.3, (1, 0): 0.75, (1, 2): -0.5,
             (0, 8193): 0.75, (0, 8195): 1.0, (1, 8193): 1000.0, (1, 8195): 250.0}
GOLDEN_OUT = {0: 1.75, 2: -0.21875, 8193: 1001.0, 8195: 250.25}


def golden():
    x = np.zeros((GOLDEN_N, GOLDEN_M), F32)
    for (r, e), v in GOLDEN_IN.items():
        x[r, e] = v
    want = np.full((GOLDEN_N, GOLDEN_M), -0.0, F32)
    for e, v in GOLDEN_OUT.items():
        want[:, e] = v
    return x, want


def test_emulation_gives_the_hand_golden():
    x, want = golden()
    em = emulate_2shot(x, GOLDEN_B)
    A, B = 0, 2 * 128 + 1  # the groups' numbers in dec1/dec2 (qtransit's order, 2 span + parity)
    assert list(em.dec1[:, A]) == [-0.125, -0.09375] and list(em.dec1[:, B]) == [-0.125, -125.0]
    assert list(enc_of(em.dec1[:, A])) == [-8.0, -1365 / 128] and enc_of(em.dec1[1, B]) == -1049 * 2.0**-17
    assert list(em.u1[0, [0, 2, 4]]) == [0, 6, 8] and list(em.u1[1, [0, 2, 4]]) == [0, 13, 8]
    assert list(em.y1[0, [0, 2]]) == [1.0, 0.25] and list(em.y1[1, [0, 2]]) == [0.75, -0.46875]
    assert list(em.u1[:, 8193]) == [2, 0] and list(em.u1[:, 8195]) == [0, 6]
    assert list(em.y1[:, 8193]) == [0.75, 1000.0] and list(em.y1[:, 8195]) == [1.0, 250.0]
    assert em.y1[0, 4].view(np.uint32) == 0x80000000 and em.y1[1, 8197].view(np.uint32) == 0x80000000
    assert list(em.S[[0, 2, 8193, 8195]]) == [1.75, -0.21875, 1001.0, 251.0]
    others = np.ones(GOLDEN_M, bool)
    others[[0, 2, 8193, 8195]] = False
    assert np.all(em.S[others].view(np.uint32) == 0)  # +0
    assert em.dec2[A] == -0.21875 and enc_of(em.dec2[A]) == -4.5703125
    assert em.dec2[B] == -125.125 and enc_of(em.dec2[B]) == -1048 * 2.0**-17
    assert list(em.u2[[0, 2, 4, 8193, 8195, 8197]]) == [0, 9, 8, 0, 6, 8]
    msg = mismatch(want, em.out, "emulation vs hand")
    assert msg is None, msg


# ---- the comparisons with qtransit ----------------------------------------------------------------

def test_hand_golden():
    x, want = golden()
    out = qtransit_outputs(x, GOLDEN_B)
    msg = mismatch(want, out, "qtransit vs hand")
    assert msg is None, msg


@pytest.mark.parametrize("kind, b, N, M", CASES)
def test_inputs_match(kind, b, N, M):
    em, out = assert_path_matches(make(kind, b, N, M), b)
    assert np.all(out.view(np.uint32) == out[:1].view(np.uint32))  # every rank the same bits


@pytest.mark.parametrize("b, N", list(zip(BITS, RANKS)))
def test_all_zero_inputs(b, N):
    # +0 on every rank but the last, -0 there: every output -0 (test_all_zero_inputs_by_hand)
    x = np.zeros((N, TILE), F32)
    x[N - 1] = -0.0
    out = qtransit_outputs(x, b)
    assert np.all(out.view(np.uint32) == 0x80000000), mismatch(np.full_like(x, -0.0), out, "all zero")
    out = qtransit_outputs(np.zeros((N, TILE), F32), b)  # all +0
    assert np.all(out.view(np.uint32) == 0x80000000), mismatch(np.full_like(x, -0.0), out, "all +0")


@pytest.mark.parametrize("b", BITS)
def test_a_wrong_emulation_is_caught(b):
    """Variants that must differ from qtransit: the owner keeping its own unquantized contribution;
    the sum started from rank 0's term instead of +0 (on all-(+0) inputs: -0 sums, +0 outputs); the
    sum in binary32 (N >= 3: for N = 2 the one rounding of y0 + y1 is the fp16 sum's); consecutive
    groups of 32 instead of the even/odd interleave (qtransit still run on the same P)."""
    N = 4
    x = make("normal", b, N, TILE)
    out = qtransit_outputs(x, b)
    msg = mismatch(emulate_2shot(x, b).out, out, "the emulation")
    assert msg is None, msg
    for kw in ({"owner_keeps": True}, {"accum": "fp32"}, {"layout": "consecutive"}):
        assert mismatch(emulate_2shot(x, b, **kw).out, out, str(kw)) is not None, f"{kw} equals qtransit"
    z = np.zeros((N, TILE), F32)  # all +0: every contribution -0
    out = qtransit_outputs(z, b)
    msg = mismatch(emulate_2shot(z, b).out, out, "the emulation on zeros")
    assert msg is None, msg
    assert mismatch(emulate_2shot(z, b, start="first").out, out, "first") is not None, "a sum from rank 0's term"


@pytest.mark.parametrize("b, N, kind", [(4, 8, "normal"), (6, 2, "mixed"), (8, 4, "zeros-ties")])
def test_generic_two_shot_agrees_but_for_signed_zeros(b, N, kind):
    """qtransit's generic two-shot-ar with the same wire (format quickreduce-q<b>) and fp16 sums, on
    the same permuted inputs (fp16 values), equals the emulation bit for bit wherever the output is
    not zero; it equals one of the two sum starts in full (+0, QuickReduce's, or rank 0's term: the
    generic path's before quickreduce-int<b>, which then decodes all-zero sums to +0). This runs
    without the new paths: it checks the permutation and the harness against qtransit today."""
    import qtransit

    x = make(kind, b, N, TILE)
    P = permutation(TILE, N)
    r = qtransit.simulate("two-shot-ar", inputs=np.ascontiguousarray(x[:, P]), format=f"quickreduce-q{b}",
                          accum="fp16", keep_outputs=True)
    out = np.ascontiguousarray(np.asarray(r.outputs)[:, inverse(P)])
    em = emulate_2shot(x, b)
    nz = em.out != 0
    assert nz.mean() > 0.5
    assert np.array_equal(em.out[nz].view(np.uint32), out[nz].view(np.uint32)), mismatch(em.out, out, "two-shot-ar")
    first = emulate_2shot(x, b, start="first").out
    assert mismatch(em.out, out, "") is None or mismatch(first, out, "") is None, mismatch(first, out, "two-shot-ar")


def test_wrong_variants_differ_from_the_emulation():
    """The same variants differ from the emulation itself (no qtransit needed), where the test above
    expects them to differ from qtransit; and the binary32 sum equals the fp16 one for N = 2."""
    for b in BITS:
        x = make("normal", b, 4, TILE)
        right = emulate_2shot(x, b).out
        for kw in ({"owner_keeps": True}, {"accum": "fp32"}, {"layout": "consecutive"}):
            assert mismatch(right, emulate_2shot(x, b, **kw).out, str(kw)) is not None, kw
        z = np.zeros((4, TILE), F32)
        assert mismatch(emulate_2shot(z, b).out, emulate_2shot(z, b, start="first").out, "first") is not None
        x2 = make("mixed", b, 2, TILE)
        assert mismatch(emulate_2shot(x2, b).out, emulate_2shot(x2, b, accum="fp32").out, "N = 2") is None
