"""FlashInfer's FP8 two-shot all-reduce (`flashinfer.comm.quantized_all_reduce`, the Triton kernel
`_fp8_blockscale_2shot_kernel`), emulated independently in numpy from its description in
docs/SOURCES.md section 4 ("4.1a What QAR computes" and the verdicts in 4.3), and compared bit for
bit with qtransit's built-in path `flashinfer-fp8-2shot`. The emulation is written from that
description only, not from qtransit's C++ sources. The E4M3 table and encoder are e4m3_by_hand.py's,
shared with test_fp8_cast_emulation.py (also an independent emulation; neither reads qtransit's code).

What is emulated, for N ranks with inputs x[r] (M values each), every rounding written out
(fl32 = one IEEE binary32 operation, round to nearest even; bf16(.) = round to nearest even from
binary32 to bfloat16):

  input      FlashInfer takes bf16: every x is a bf16 value (the tests round their inputs first).
  cast       (format flashinfer-fp8) groups of G = 256 elements at absolute indices [256g, 256g+256);
             a  = max |x| over the group (exact),     a' = max(a, fl32(1e-12)),
             s  = fl32(a' / 448)   (the stored dequant scale),
             m  = fl32(448 / a')   (a second, separate division: not 1/s),
             q  = E4M3_RNE(clamp(fl32(x * m), -448, +448))  (OCP e4m3fn, max 448, no inf),
             decoded = fl32(val(q) * s).
  phase 1    every rank casts all its M elements.
  ownership  super-blocks of B*N elements; in each, rank o owns the stripe
             [start + o*B, start + (o+1)*B). B is a multiple of G, so a stripe holds whole groups.
  phase 2    for each element of its stripe the owner sums, starting from acc = +0.0 and in rank
             order i = 0, 1, ..., N-1 (its own FP8 copy included):
                 acc = fl32(acc + fl32(val(q_i) * s_i))       (two roundings per term, no FMA).
  requant    the same cast applied to acc over each group of the stripe: A, S = fl32(A'/448),
             M = fl32(448/A'), Q = E4M3_RNE(clamp(fl32(acc * M), +-448)).
  outputs    the owner of a stripe holds bf16(acc)  (its sum, NOT requantized: quantized once);
             every other rank holds bf16(fl32(val(Q) * S))  (quantized twice). So ranks differ.
             The emulation returns [N, M] binary32 arrays holding these bf16 values.

Ownership: FlashInfer picks B = 4096 for numel <= 33,554,432 (16384 above), clamped to [G, numel]
(fi_B below), and rank o keeps the stripes [start + o*B, start + (o+1)*B) of every super-block of
B*N elements. The emulation takes B as a parameter with that striping; every comparison with
qtransit uses FlashInfer's own B, which qtransit's flashinfer-fp8-2shot follows (owner =
"flashinfer-stripes", D52): for M = N*4096 the stripes are qtransit's contiguous chunks, for
M = N*512 rank 0 keeps every sum (B = M), and for M = 2*8192 they alternate over the ranks.

Not modeled: Triton's lowering of fp32 `/` to the approximate div.full.f32 (<= 2 ulp; s and m are
taken as correctly rounded IEEE quotients here); an FMA contraction of acc + val(q)*s (Triton
allows fp fusion by default; SOURCES.md leaves it unverified, so it is modeled as two roundings;
it matters: on random inputs an FMA changes about a fifth of the sums); inf and NaN; FlashInfer's
own choice of B for other M, and its masking of a partial last super-block (M = N*B leaves none;
a partial last scale group is zero padded, as its masked lanes load 0).
"""

import types

import ml_dtypes
import numpy as np
import pytest

import qtransit
from e4m3_by_hand import E4M3_VALUE, e4m3_encode

F32 = np.float32
A448 = F32(448.0)
FLOOR = F32(1e-12)  # fl32(1e-12), FlashInfer's amax floor
G = 256  # SCALE_GROUP, FlashInfer's default; qtransit's flashinfer-fp8 has fixed blocks of 256
PATH = "flashinfer-fp8-2shot"


# ---- E4M3 (OCP e4m3fn) by hand: e4m3_by_hand.py, shared with test_fp8_cast_emulation.py ---------------


# ---- bf16 (round to nearest even from binary32) by bits ------------------------------------------------

def bf16(v):
    """bf16(v) for binary32 v (no NaN), as binary32 values: add 0x7FFF plus the kept lowest bit, clear
    the low 16 bits (round to nearest, ties to even; past the largest bf16 to +-inf)."""
    v = np.asarray(v, dtype=np.float32)
    assert not np.any(np.isnan(v))
    b = v.view(np.uint32).astype(np.uint64)
    r = (b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000
    return r.astype(np.uint32).view(np.float32)


def _bf16_self_check():
    one = F32(1.0)
    u = 2.0 ** -8  # half a bf16 ulp at 1 (bf16 ulp at 1: 2^-7)
    assert bf16(F32(1.0 + u)) == one  # tie -> even (1)
    assert bf16(F32(1.0 + 3 * u)) == F32(1.0 + 4 * u)  # tie 1+2^-7 (odd) | 1+2^-6 -> even
    assert bf16(np.nextafter(F32(1.0 + u), F32(2))) == F32(1.0 + 2 * u)
    assert bf16(F32(-0.0)).view(np.uint32) == 0x80000000 and bf16(F32(0.0)).view(np.uint32) == 0


_bf16_self_check()


# ---- the cast and the two-shot schedule --------------------------------------------------------------

def fi_cast(v):
    """FlashInfer's cast of one binary32 row (length a multiple of 8) in groups of G at absolute
    indices: (s float32[groups], m float32[groups], codes int64[n], decoded float32[n]). A last
    partial group is padded with zeros, which cannot change its amax (FlashInfer's masked lanes)."""
    v = np.asarray(v, dtype=np.float32)
    assert v.ndim == 1 and v.size % 8 == 0
    n = v.size
    vp = np.concatenate([v, np.zeros((-n) % G, dtype=np.float32)]).reshape(-1, G)
    a = np.max(np.abs(vp), axis=1)  # binary32, exact
    ap = np.maximum(a, FLOOR)  # a' = max(a, fl32(1e-12))
    s = ap / A448  # fl32(a' / 448)
    m = A448 / ap  # fl32(448 / a'), its own division
    y = vp * m[:, None]  # fl32(x * m)
    y = np.clip(y, -A448, A448)  # the clamp (keeps -0 as -0)
    codes = e4m3_encode(y)  # E4M3 round to nearest even
    dec = E4M3_VALUE[codes].astype(np.float32) * s[:, None]  # fl32(val(q) * s): val(q) is exact in binary32
    for arr in (s, m, y, dec):
        assert arr.dtype == np.float32
    return s, m, codes.reshape(-1)[:n], dec.reshape(-1)[:n]


def fi_B(M):
    """FlashInfer's stripe for a tensor of M elements: 4096, or 16384 past 2^25, clamped to [G, M]."""
    return min(max(4096 if M <= 2 ** 25 else 16384, G), M)


def stripe_owner(M, N, B):
    """owner[j] for FlashInfer's striping: super-blocks of B*N elements, rank o owns
    [start + o*B, start + (o+1)*B) of each."""
    j = np.arange(M)
    return (j % (B * N)) // B


def emulate_2shot(x, B, *, owner_requantizes=False, acc_from_rank0=False):
    """FlashInfer's two-shot all-reduce of x [N, M] (bf16 values held in binary32), stripes of B.
    Returns a namespace: s1 [N, groups], codes1/dec1 [N, M] (phase 1), acc [M] (phase 2's sums),
    A2/S2 [groups], Q2/dec2 [M] (the requantization), owner [M], out [N, M] (what each rank holds).
    owner_requantizes / acc_from_rank0: deliberately wrong schedules, for the tests that show a
    comparison can fail (the owner decoding Q like everyone else; a sum started from rank 0's
    value instead of +0)."""
    x = np.asarray(x, dtype=np.float32)
    N, M = x.shape
    assert B % G == 0 and B % N == 0, "FlashInfer requires B divisible by scale_group and by world_size"
    assert np.array_equal(bf16(x).view(np.uint32), x.view(np.uint32)), "inputs must be bf16 values"
    s1, codes1, dec1 = [], [], []
    for r in range(N):  # phase 1: every rank casts all of its elements
        s, _, c, d = fi_cast(x[r])
        s1.append(s), codes1.append(c), dec1.append(d)
    s1, codes1, dec1 = np.array(s1), np.array(codes1), np.array(dec1)
    # phase 2: acc = +0.0, then acc = fl32(acc + fl32(val(q_i) s_i)), i = 0..N-1 (dec1[i] is the product)
    acc = dec1[0].copy() if acc_from_rank0 else np.zeros(M, dtype=np.float32)
    for i in range(1 if acc_from_rank0 else 0, N):
        acc = acc + dec1[i]
        assert acc.dtype == np.float32
    # requantization of the sum, group by group (the groups lie inside stripes: B % G == 0)
    S2, _, Q2, dec2 = fi_cast(acc)
    A2 = np.maximum(np.max(np.abs(np.concatenate([acc, np.zeros((-M) % G, np.float32)]).reshape(-1, G)), axis=1), FLOOR)
    owner = stripe_owner(M, N, B)
    out = np.empty((N, M), dtype=np.float32)
    for r in range(N):
        keep = (owner == r) & (not owner_requantizes)
        out[r] = np.where(keep, bf16(acc), bf16(dec2))
    return types.SimpleNamespace(s1=s1, codes1=codes1, dec1=dec1, acc=acc, A2=A2, S2=S2, Q2=Q2, dec2=dec2,
                                 owner=owner, out=out)


# ---- qtransit and the comparison ---------------------------------------------------------------------

def _f32(v):
    v = F32(v)
    return f"{float(v)!r} ({float(v).hex()}, bits 0x{int(np.array(v).view(np.uint32)):08x})"


def mismatch(ours, theirs, what):
    """None when the two [N, M] binary32 arrays hold the same bits; otherwise a message naming the
    count and the first differing (rank, index) with both values and their bits."""
    ours = np.asarray(ours, dtype=np.float32)
    theirs = np.asarray(theirs)
    if theirs.shape != ours.shape:
        return f"{what}: qtransit's shape {theirs.shape}, the emulation's {ours.shape}"
    if theirs.dtype != np.float32:
        return f"{what}: qtransit's dtype {theirs.dtype}, expected float32"
    d = np.argwhere(ours.view(np.uint32) != theirs.view(np.uint32))
    if d.size == 0:
        return None
    lines = [f"{what}: {len(d)} of {ours.size} values differ in their bits; first ones:"]
    for r, j in d[:5]:
        lines.append(f"  rank {r}, index {j}: emulation {_f32(ours[r, j])}, qtransit {_f32(theirs[r, j])}")
    return "\n".join(lines)


def run_path(x):
    r = qtransit.simulate(PATH, inputs=x, block=G, keep_outputs=True)
    run = r.to_dict()["runs"][0]
    assert run["path"] == PATH, run
    assert r.passed, f"qtransit's own bounds failed: {getattr(r, 'first_failure', run)}"
    assert run["format"] == "flashinfer-fp8", run["format"]
    assert run["k_max"] == 2 and run["k_min"] == 1, (run["k_min"], run["k_max"])  # others twice, owner once
    out = np.asarray(r.outputs)
    assert out.shape == x.shape, out.shape
    return out


def assert_path_matches(x, em=None):
    """qtransit's flashinfer-fp8-2shot on x [N, M] equals the emulation bit for bit, with FlashInfer's
    own stripes (module docstring)."""
    N, M = x.shape
    assert M % N == 0 and (M // N) % G == 0
    em = em or emulate_2shot(x, B=fi_B(M))
    out = run_path(x)
    msg = mismatch(em.out, out, PATH)
    assert msg is None, msg
    return em, out


def bf16_inputs(x):
    return bf16(np.asarray(x, dtype=np.float32))


# ---- 1. random inputs ----------------------------------------------------------------------------------

def random_inputs(kind, N, M, rng):
    z = rng.standard_normal((N, M))
    if kind == "mixed":  # every (rank, group) its own magnitude, 10^-4 .. 10^4
        mag = 10.0 ** rng.uniform(-4, 4, (N, M // G))
        z = z * np.repeat(mag, G, axis=1)
    else:
        z = z * {"1e-3": 1e-3, "1": 1.0, "300": 300.0}[kind]
    return bf16_inputs(z.astype(np.float32))


@pytest.mark.parametrize("kind", ["1e-3", "1", "300", "mixed"])
@pytest.mark.parametrize("per_rank", [512, 4096])
@pytest.mark.parametrize("N", [2, 4, 8])
def test_random_inputs_match(N, per_rank, kind):
    M = N * per_rank  # FlashInfer's B: per_rank = 4096 gives qtransit's chunks, 512 rank 0 keeping all (B = M)
    rng = np.random.default_rng(10_000 + 97 * N + per_rank + ["1e-3", "1", "300", "mixed"].index(kind))
    x = random_inputs(kind, N, M, rng)
    em, out = assert_path_matches(x)
    for o in range(N):
        mine = em.owner == o
        if not np.any(mine):
            continue
        # the stripes a rank keeps hold bf16 of the unrequantized sum ...
        assert np.array_equal(out[o, mine].view(np.uint32), bf16(em.acc[mine]).view(np.uint32))
        # ... and differ from what the others hold there for some element (ranks differ)
        for r in range(N):
            if r != o:
                assert np.any(out[o, mine].view(np.uint32) != out[r, mine].view(np.uint32)), (o, r)
                assert np.array_equal(out[r, mine].view(np.uint32), bf16(em.dec2[mine]).view(np.uint32))


def test_alternating_stripes_match():
    # M = 2 x 8192: FlashInfer's stripes of 4096 alternate 0, 1, 0, 1 over qtransit's two chunks of
    # 8192, so half of each chunk's sums are kept by the rank that did not add them (D52).
    rng = np.random.default_rng(77)
    x = random_inputs("mixed", 2, 2 * 8192, rng)
    em, out = assert_path_matches(x)
    assert list(em.owner[::4096]) == [0, 1, 0, 1]
    assert np.array_equal(out[1, 4096:8192].view(np.uint32), bf16(em.acc[4096:8192]).view(np.uint32))


# ---- 2. edge cases -------------------------------------------------------------------------------------

def edge_zero_block(N, M, rng):
    x = bf16_inputs(rng.standard_normal((N, M)).astype(np.float32))
    x[:, G:2 * G] = 0.0  # group 1 all zero on every rank
    x[:, M - G:] = 0.0  # and the last group
    return x, [1, M // G - 1]


def edge_saturate(N, M, rng):
    """Large positive values on every rank, each (rank, group) its own magnitude (so the sums' amax
    differs from every input's), with some group's fl32(acc * M) above 448 (the clamp decides its
    code); and in group 0 every rank's amax 1.2109375 * 2^10, for which fl32(a * fl32(448 / a)) > 448:
    phase 1's clamp acts too."""
    for _ in range(200):
        mag = rng.uniform(600.0, 1400.0, (N, M // G))
        mag[:, 0] = 1024.0
        x = bf16_inputs((rng.uniform(0.5, 1.0, (N, M)) * np.repeat(mag, G, axis=1)).astype(np.float32))
        for r in range(N):
            x[r, rng.integers(G)] = F32(1.2109375 * 1024)  # above every other value of group 0
        em = emulate_2shot(x, B=fi_B(M))
        over = (em.acc.reshape(-1, G) * (A448 / em.A2)[:, None]) > A448
        if np.any(over):
            return x, np.flatnonzero(np.any(over, axis=1))
    raise AssertionError("no input with a saturating requantization found")


def edge_negative_zero(N, M, rng):
    """-0 on every rank at some elements of every chunk; a whole group of -0; and an element where
    every rank's value is a small negative that its cast rounds to -0 (code 0x80)."""
    x = bf16_inputs(rng.standard_normal((N, M)).astype(np.float32))
    S = M // N
    idx = [o * S + k for o in range(N) for k in (0, 7, S - 1)]
    x[:, idx] = -0.0
    x[:, 2 * G:3 * G] = -0.0
    x[:, 5] = F32(-2.0 ** -20)  # the group's amax ~ 3: x * m ~ -2^-20 * 150, far below 2^-10 -> -0
    idx += list(range(2 * G, 3 * G)) + [5]
    return x, idx


def edge_tiny(N, M, rng):
    """Values near 1e-30: a group of them alone (a' = the floor 1e-12, every code 0 or 0x80), the same
    mixed with values near 1 (codes 0 too), and a group near the floor (1e-13, non-zero codes)."""
    x = bf16_inputs(rng.standard_normal((N, M)).astype(np.float32))
    tiny = (rng.choice([-1.0, 1.0], (N, G)) * rng.uniform(0.5, 2.0, (N, G)) * 1e-30).astype(np.float32)
    x[:, 0:G] = bf16_inputs(tiny)
    x[:, G:2 * G] = np.where(rng.random((N, G)) < 0.5, bf16_inputs(tiny), x[:, G:2 * G])
    x[:, 2 * G:3 * G] = bf16_inputs((rng.standard_normal((N, G)) * 1e-13).astype(np.float32))
    return x, [0, 1, 2]


def edge_one_rank_amax(N, M, rng):
    """In group 1 one rank holds a value ~1000 times everyone else's: the sum's scale is that rank's."""
    x = bf16_inputs(rng.standard_normal((N, M)).astype(np.float32))
    x[N - 1, G + 17] = F32(-2944.0)  # bf16: 1.4375 * 2^11
    return x, [1]


EDGES = {
    "zero_block": edge_zero_block,
    "saturate": edge_saturate,
    "negative_zero": edge_negative_zero,
    "tiny": edge_tiny,
    "one_rank_amax": edge_one_rank_amax,
}


def _check_edge(kind, x, where, em):
    """What each edge case is for, asserted of the emulation (so it tests what it says)."""
    N, M = x.shape
    if kind == "zero_block":
        floor_scale = FLOOR / A448  # fl32(fl32(1e-12) / 448)
        for g in where:
            assert np.all(em.s1[:, g] == floor_scale) and em.S2[g] == floor_scale
            sl = slice(g * G, (g + 1) * G)
            assert np.all(em.out[:, sl].view(np.uint32) == 0)  # +0 everywhere
    elif kind == "saturate":
        a1 = np.max(x[:, :G], axis=1)
        assert np.all(a1 * (A448 / a1) > A448)  # phase 1's clamp acts on every rank in group 0
        for g in where:
            assert em.A2[g] not in set(np.max(np.abs(x[:, g * G:(g + 1) * G]), axis=1).tolist())
            assert np.any(em.Q2[g * G:(g + 1) * G] == 0x7E)
    elif kind == "negative_zero":
        assert np.all(em.codes1[:, where] == 0x80)  # every rank sends -0
        assert np.all(em.acc[where].view(np.uint32) == 0)  # acc started at +0: +0 + -0 = +0
        assert np.all(em.out[:, where].view(np.uint32) == 0)  # the owner's bf16(+0) and the others' +0
        wrong = emulate_2shot(x, B=fi_B(M), acc_from_rank0=True)  # a sum started from rank 0's -0
        assert np.all(wrong.acc[where].view(np.uint32) == 0x80000000)
        assert mismatch(em.out, wrong.out, "started from rank 0") is not None
    elif kind == "tiny":
        tiny = np.abs(x[:, :2 * G]) < 1e-20
        assert np.all(em.s1[:, 0] == FLOOR / A448) and np.all(np.isin(em.codes1[:, :2 * G][tiny], [0x00, 0x80]))
        assert np.all(em.out[:, :G].view(np.uint32) == 0)
        all_tiny = np.flatnonzero(np.all(tiny, axis=0))
        assert all_tiny.size and np.all(em.out[:, all_tiny].view(np.uint32) == 0)
        assert np.all(em.s1[:, 2] == FLOOR / A448) and np.any(em.codes1[:, 2 * G:3 * G] & 0x7F)
        assert np.any(em.out[:, 2 * G:3 * G] != 0)
    elif kind == "one_rank_amax":
        assert em.s1[N - 1, 1] == F32(2944.0) / A448
        assert em.A2[1] == np.max(np.abs(em.acc[G:2 * G])) and abs(em.acc[G + 17]) == em.A2[1]


@pytest.mark.parametrize("N", [2, 4, 8])
@pytest.mark.parametrize("kind", list(EDGES))
def test_edge_cases_match(kind, N):
    M = N * 512  # B = S = 512
    x, where = EDGES[kind](N, M, np.random.default_rng(20_000 + 31 * N + list(EDGES).index(kind)))
    em = emulate_2shot(x, B=fi_B(M))
    _check_edge(kind, x, where, em)
    assert_path_matches(x, em)


# ---- 3. hand goldens -----------------------------------------------------------------------------------
#
# Facts used (binary32, round to nearest even):
#   fl32(1/7) = 1/7 + (3/7) 2^-26 (relative error +3 * 2^-26, test_fp8_cast_emulation.py's derivation),
#   so fl32(1/448) = fl32(1/7) 2^-6, fl32(1/112) = fl32(1/7) 2^-4 (powers of two scale exactly) and
#   fl32(448 * fl32(1/448)) = fl32(1 + 3 * 2^-26) = 1 (3 * 2^-26 is below half an ulp, 2^-24, of 1).

def _golden_inputs(N, M, values):
    x = np.zeros((N, M), dtype=np.float32)
    for (r, j), v in values.items():
        x[r, j] = v
    return x


def test_golden_brief():
    # N = 2, M = 512: FlashInfer's B = 512 = M, so rank 0 keeps every sum.
    # Group 0: rank 0 has x[0] = 3, rank 1 has x[0] = 1, everything else 0. Group 1 is zero on both.
    # Rank 0, group 0: a' = 3.
    #   s = fl32(3/448): 3/448 lies in [2^-8, 2^-7), ulp 2^-31; 3/448 = (3 * 2^25 / 7) 2^-31
    #     = 14380470.857... 2^-31 -> s = 14380471 * 2^-31 = 0.0066964286379516125 (1/7 ulp above).
    #   m = fl32(448/3) = fl32(149 + 1/3): ulp 2^-16 in [128, 256), 1/3 = 21845.33 ulps -> 21845:
    #     m = 149 + 21845 * 2^-16 = 149.33332824707031.
    #   fl32(3 * m) = fl32(448 - 3 (1/3 - 21845 * 2^-16)) = fl32(448 - 2^-16): ulp(448) = 2^-15, so
    #     448 - 2^-16 is a tie between 448 - 2^-15 (odd significand) and 448 (even) -> 448; the clamp
    #     keeps it; E4M3 448 = 1.75 * 2^8: field 15, mantissa 6: code 0x7E.
    #   decoded = fl32(448 * s) = fl32(3 + 448 * (1/7) 2^-31) = fl32(3 + 2^-25) = 3 (ulp(3) = 2^-22).
    #   the zeros: code 0x00, decoded +0.
    # Rank 1, group 0: a' = 1: s = fl32(1/448) = fl32(1/7) 2^-6 = 0.002232142956927419, m = 448:
    #   1 * 448 = 448 -> 0x7E; decoded fl32(448 * fl32(1/448)) = 1.
    # Group 1 on both: a = 0 -> a' = fl32(1e-12), s = fl32(fl32(1e-12)/448), codes 0x00, decoded +0.
    # Phase 2 (rank 0 keeps element 0): acc = fl32(fl32(+0 + 3) + 1) = 4 exactly; elsewhere +0.
    # Requantize group 0: A = 4, S = fl32(4/448) = fl32(1/112) = fl32(1/7) 2^-4, M = fl32(448/4) = 112;
    #   4 * 112 = 448 -> 0x7E; decoded fl32(448 * S) = fl32(4 (1 + 3 * 2^-26)) = 4.
    # Outputs at element 0: the owner (rank 0) bf16(acc) = bf16(4) = 4; rank 1 bf16(4) = 4 (this input
    #   does not separate them: see test_golden_ranks_differ). Every other element: +0 on both ranks.
    N, M = 2, 512
    x = _golden_inputs(N, M, {(0, 0): 3.0, (1, 0): 1.0})
    em = emulate_2shot(x, B=fi_B(M))
    assert em.s1[0, 0] == F32(14380471 * 2.0 ** -31) == F32(3.0) / A448
    assert A448 / F32(3.0) == F32(149 + 21845 * 2.0 ** -16)
    assert em.codes1[0, 0] == 0x7E and em.dec1[0, 0] == 3.0
    assert em.s1[1, 0] == F32(1.0) / A448 and em.codes1[1, 0] == 0x7E and em.dec1[1, 0] == 1.0
    assert np.all(em.s1[:, 1] == FLOOR / A448)
    assert em.acc[0] == 4.0 and np.all(em.acc[1:].view(np.uint32) == 0)
    assert em.S2[0] == F32(1.0) / F32(112.0) and em.Q2[0] == 0x7E and em.dec2[0] == 4.0
    want = np.zeros((N, M), dtype=np.float32)
    want[:, 0] = 4.0
    assert mismatch(want, em.out, "emulation vs hand") is None
    _, out = assert_path_matches(x, em)
    assert mismatch(want, out, "qtransit vs hand") is None


def test_golden_ranks_differ():
    # N = 2, M = 16384, B = 4096 (FlashInfer's): stripes alternate 0, 1, 0, 1. Two groups hold the same
    # values: group 0 is kept by rank 0, group 16 (elements 4096, 4097) by rank 1.
    # Rank 0: x = [3.5, 0.5]: a' = 3.5, s = fl32(3.5/448) = 2^-7 (exact), m = 128 (exact);
    #   3.5 * 128 = 448 -> 0x7E, 0.5 * 128 = 64 = 1.0 * 2^6 (field 13, mantissa 0) -> 0x68;
    #   decoded 3.5 and 0.5 exactly.
    # Rank 1: x = [0.5, 0.0625]: a' = 0.5, s = fl32(1/896) = fl32(1/7) 2^-7, m = 896 (exact);
    #   0.5 * 896 = 448 -> 0x7E; 0.0625 * 896 = 56 = 1.75 * 2^5 (field 12, mantissa 6) -> 0x66;
    #   decoded fl32(448 s) = 0.5 (1 + 3 * 2^-26) -> 0.5, fl32(56 s) = 2^-4 (1 + 3 * 2^-26) -> 0.0625.
    # acc = [3.5 + 0.5, 0.5 + 0.0625] = [4, 0.5625], exact.
    # Requantize: A = 4, S = fl32(1/112) = fl32(1/7) 2^-4, M = 112: 4 * 112 = 448 -> 0x7E;
    #   0.5625 * 112 = 63, between the E4M3 neighbours 60 and 64 (spacing 4 in [32, 64)) -> 64: 0x68.
    #   decoded fl32(64 S) = 4 fl32(1/7) = fl32(4/7) = 0.5714285969734192 (exact: a power-of-two scaling).
    # bf16(4/7): in [0.5, 1) bf16's spacing is 2^-8; 0.57142860 / 2^-8 = 146.29 -> 146 * 2^-8 = 0.5703125.
    # Outputs: the owner holds bf16(0.5625) = 0.5625 (exact in bf16), the other rank 0.5703125;
    #   both hold 4 at the group's first element; +0 elsewhere.
    N, M = 2, 16384
    vals = {}
    for base in (0, 4096):
        vals.update({(0, base): 3.5, (0, base + 1): 0.5, (1, base): 0.5, (1, base + 1): 0.0625})
    x = _golden_inputs(N, M, vals)
    em = emulate_2shot(x, B=fi_B(M))
    assert fi_B(M) == 4096
    assert em.s1[0, 0] == 2.0 ** -7 and list(em.codes1[0, :2]) == [0x7E, 0x68]
    assert em.s1[1, 0] == F32(1.0) / F32(896.0) and list(em.codes1[1, :2]) == [0x7E, 0x66]
    assert list(em.dec1[:, :2].reshape(-1)) == [3.5, 0.5, 0.5, 0.0625]
    assert list(em.acc[:2]) == [4.0, 0.5625]
    assert list(em.Q2[:2]) == [0x7E, 0x68] and em.dec2[1] == F32(4.0) * (F32(1.0) / F32(7.0))
    assert float(em.dec2[1]) == 0.5714285969734192
    want = np.zeros((N, M), dtype=np.float32)
    want[:, [0, 4096]] = 4.0
    want[0, 1], want[1, 1] = 0.5625, 0.5703125  # rank 0 keeps element 1
    want[1, 4097], want[0, 4097] = 0.5625, 0.5703125  # rank 1 keeps element 4097
    assert mismatch(want, em.out, "emulation vs hand") is None
    _, out = assert_path_matches(x, em)
    assert mismatch(want, out, "qtransit vs hand") is None


# ---- the emulation's pieces against what exists already -------------------------------------------------

def test_bf16_rounding_matches_ml_dtypes():
    rng = np.random.default_rng(5)
    bits = rng.integers(0, 2 ** 32, 200_000, dtype=np.uint64).astype(np.uint32)
    bits = bits[((bits >> 23) & 0xFF) != 0xFF]  # no inf/NaN
    ties = (rng.integers(0, 2 ** 16, 5000, dtype=np.uint64).astype(np.uint32) << 16) | 0x8000
    ties = ties[((ties >> 23) & 0xFF) != 0xFF]
    v = np.concatenate([bits, ties]).view(np.float32)
    theirs = v.astype(ml_dtypes.bfloat16).astype(np.float32)
    assert np.array_equal(bf16(v).view(np.uint32), theirs.view(np.uint32))


def test_cast_matches_qtransit_flashinfer_fp8():
    """The emulation's cast (phase 1 and the requantization) is qtransit's flashinfer-fp8 format,
    which test_fp8_cast_emulation.py checks on its own: scales, codes and decoded values."""
    rng = np.random.default_rng(6)
    x = random_inputs("mixed", 4, 4 * 512, rng)
    em = emulate_2shot(x, B=512)
    rows = [(x[r], em.s1[r], em.codes1[r], em.dec1[r]) for r in range(4)] + [(em.acc, em.S2, em.Q2, em.dec2)]
    for v, s, c, d in rows:
        q = qtransit.quantize("flashinfer-fp8", v, block=G)
        assert np.array_equal(np.asarray(q.scales, np.float32).reshape(-1).view(np.uint32), s.view(np.uint32))
        assert np.array_equal(np.asarray(q.codes).reshape(-1).astype(np.int64), c)
        assert np.array_equal(np.asarray(q.decoded, np.float32).reshape(-1).view(np.uint32), d.view(np.uint32))


def test_stripes_are_chunks_when_B_is_S():
    for N in (2, 4, 8):
        for S in (256, 512, 4096):
            assert np.array_equal(stripe_owner(N * S, N, S), np.repeat(np.arange(N), S))
    # FlashInfer's own B = 4096 on M = 2 * 8192: stripes alternate, not qtransit's chunks (not modeled)
    assert list(stripe_owner(16384, 2, 4096)[::4096]) == [0, 1, 0, 1]


# ---- 4. a different schedule fails the comparison ------------------------------------------------------

@pytest.mark.parametrize("N", [2, 4, 8])
def test_a_schedule_where_the_owner_requantizes_does_not_match(N):
    """qtransit's plain two-shot-ar with the same wire (format flashinfer-fp8, accum fp32) requantizes
    the owner's chunk too: its owner rows are not the emulation's (the comparison can fail). M = N x
    4096: FlashInfer's stripes are the chunks."""
    M = N * 4096
    x = random_inputs("1", N, M, np.random.default_rng(30_000 + N))
    em = emulate_2shot(x, B=fi_B(M))
    r = qtransit.simulate("two-shot-ar", inputs=x, format="flashinfer-fp8", block=G, accum="fp32", keep_outputs=True)
    assert r.passed
    out = np.asarray(r.outputs, dtype=np.float32)
    S = M // N
    for o in range(N):
        chunk = slice(o * S, (o + 1) * S)
        msg = mismatch(em.out[o:o + 1, chunk], out[o:o + 1, chunk], f"owner {o}")
        assert msg is not None, f"owner {o}'s chunk equals the emulation under two-shot-ar"
    # and the emulation's own wrong variant (the owner decoding Q like everyone else) fails as well
    wrong = emulate_2shot(x, B=fi_B(M), owner_requantizes=True)
    assert mismatch(em.out, wrong.out, "owner requantizes") is not None
    assert all(np.any(em.out[o, o * S:(o + 1) * S] != wrong.out[o, o * S:(o + 1) * S]) for o in range(N))


# ---- binary32 inputs: the path takes bf16 (input = "bf16", D47) --------------------------------------

def test_binary32_inputs_are_cast_to_bf16_first():
    # The declaration's input type casts every input to bf16 (RNE) before anything, as the kernel only
    # ever reads bf16: the outputs are the emulation's on the rounded inputs, and the row says so.
    rng = np.random.default_rng(77)
    x = (rng.standard_normal((4, 4 * 512)) * 3.0).astype(np.float32)
    assert not np.array_equal(bf16_inputs(x), x)  # (some are not bf16 values)
    r = qtransit.simulate(PATH, inputs=x, keep_outputs=True)  # (block left out: the wire's fixed 256)
    assert r.passed and r.to_dict()["runs"][0]["input"] == "bf16" and r.to_dict()["runs"][0]["block"] == G
    msg = mismatch(emulate_2shot(bf16_inputs(x), B=fi_B(x.shape[1])).out, np.asarray(r.outputs), PATH + " on binary32 inputs")
    assert msg is None, msg


# ---- FlashInfer's own stripes: other owners, the same-events tier (D46) -----------------------------

def test_other_stripes_are_judged_same_events():
    # Stripes of B = 256 rotating over the ranks (a run with scale_group-sized stripes, not the B
    # FlashInfer picks for M = N x 1024, which is M: rank 0 keeping all): other ranks keep their sums, so
    # the bits differ from qtransit's model where the keepers differ, but every output is within verify
    # collective's same-events tolerance (the decoded contributions' sum plus one requantization, for
    # the kept sum too); its exact tier is not.
    rng = np.random.default_rng(5)
    x = bf16_inputs((rng.standard_normal((4, 4 * 1024)) * 2.0).astype(np.float32))
    em = emulate_2shot(x, B=256)
    assert mismatch(em.out, run_path(x), PATH) is not None  # (other owners: other bits somewhere)
    v = qtransit.verify_collective(PATH, x, em.out).to_dict()
    assert v["path"] == PATH and v["holds"], v
    assert v["strongest"] == "same-events", v["strongest"]
    # FlashInfer's own B: the exact tier holds (D52).
    em = emulate_2shot(x, B=fi_B(x.shape[1]))
    v = qtransit.verify_collective(PATH, x, em.out, conformance="exact")
    assert v.passed, v.first_failure
