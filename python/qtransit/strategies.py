"""Hypothesis strategies for binary32 blocks, with the cases the C++ generators make
(testing/include/qtransit/testing/blocks.hpp): ±0, subnormals, FLT_MAX, exact ties, constant and
single-element blocks, next to ordinary finite values.

    from hypothesis import given
    import qtransit.strategies as qs

    @given(qs.blocks(fmt="int4", block=32))
    def test_my_int4(x): ...

Hypothesis is imported when a strategy is built, so that `import qtransit` never needs it.
"""

import numpy as np

from . import _args

FLT_MAX = float(np.finfo(np.float32).max)
FLT_TRUE_MIN = float(np.finfo(np.float32).smallest_subnormal)
FLT_MIN = float(np.finfo(np.float32).tiny)


def _st():
    try:
        import hypothesis.strategies as st
    except ImportError:
        raise ImportError("qtransit.strategies needs Hypothesis: pip install hypothesis") from None
    return st


def _grid(fmt):
    """(amplitude, integer_grid) of a built-in format's name or a declaration file (FILE.toml)."""
    from . import _native

    try:
        g = _native.format_grid(str(fmt))
    except ValueError as e:
        raise ValueError(f"fmt={fmt!r}: {e}") from None
    return float(g["amplitude"]), bool(g["integer_grid"])


def _f32(values):
    return np.array(values, dtype=np.float32)


def blocks(fmt="int4", block=32, *, min_len=1, finite=True, ties=True, extremes=True):
    """Blocks of 1..block binary32 values (np.float32 arrays), drawn from: ordinary finite values;
    subnormal blocks and subnormals under a normal absmax; ±0 and constant blocks; single-element
    blocks; blocks holding ±FLT_MAX (extremes); exact ties of `fmt`'s rounding: the absmax at
    qmax·s and every other element at (k + 1/2)·s, s a power of two, so that x / s is a tie. Every
    value is finite (finite=False adds ±inf and NaN, for testing a refusal). `fmt` is a built-in
    format's name or a declaration file (FILE.toml); the exact ties are drawn for formats whose grid
    is the integers (int<b>, ds-int<b>, a declared int element without fraction bits): for float and
    table grids use boundary_blocks(), whose near-ties come from the grid's own midpoints."""
    block = _args.integer(block, "block", lo=1)
    min_len = _args.integer(min_len, "min_len", lo=1)
    st = _st()
    if not 1 <= min_len <= block:
        raise ValueError(f"min_len={min_len}: between 1 and block={block}")
    lengths = st.integers(min_value=min_len, max_value=block)
    f32 = st.floats(width=32, allow_nan=False, allow_infinity=False, allow_subnormal=True)
    sub = st.floats(min_value=-FLT_MIN, max_value=FLT_MIN, width=32, allow_subnormal=True, exclude_min=True, exclude_max=True)
    normalish = st.floats(min_value=-1e4, max_value=1e4, width=32, allow_subnormal=True)
    specials = st.sampled_from([0.0, -0.0, FLT_TRUE_MIN, -FLT_TRUE_MIN, FLT_MIN, -FLT_MIN, 1.0, -1.0])

    def of(elements):
        return lengths.flatmap(lambda n: st.lists(elements, min_size=n, max_size=n)).map(_f32)

    choices = [
        of(normalish),
        of(f32),
        of(sub),  # a subnormal block: the scale loses bits
        of(st.one_of(sub, normalish)),  # subnormals under a normal absmax
        of(st.one_of(specials, normalish)),
        lengths.flatmap(lambda n: st.one_of(specials, normalish).map(lambda v: _f32([v] * n))),  # constant, ±0 blocks
        st.one_of(specials, f32).map(lambda v: _f32([v])),  # single-element
    ]
    if extremes:
        choices.append(of(st.one_of(normalish, st.sampled_from([FLT_MAX, -FLT_MAX]))).map(_with_extreme))
    amplitude, integer_grid = _grid(fmt)  # also refuses an unknown format before anything is drawn
    if ties and integer_grid:
        qmax = int(amplitude)

        def tie_block(args):
            n, e, ks, sign, at = args
            s = np.float32(2.0 ** e)
            vals = [(k + 0.5) * s for k in ks[: n - 1]]
            vals.insert(at % n, sign * qmax * s)  # the absmax makes the scale exactly s
            return _f32(vals)

        choices.append(st.tuples(lengths.filter(lambda n: n >= 2), st.integers(min_value=-120, max_value=100),
                                 st.lists(st.integers(min_value=-qmax, max_value=qmax - 1), min_size=block, max_size=block),
                                 st.sampled_from([1.0, -1.0]), st.integers(min_value=0, max_value=block)).map(tie_block))
    if not finite:
        choices.append(of(st.one_of(normalish, st.sampled_from([float("inf"), float("-inf"), float("nan")]))))
    return st.one_of(*choices)


def _with_extreme(a):
    a = a.copy()
    a[len(a) // 2] = FLT_MAX if len(a) % 2 else -FLT_MAX
    return a


_OTHER_BLOCKS = (1, 2, 3, 31, 33, 64, 65, 100, 128)


def boundary_cases(fmt="int4", block=32, *, seed=1, other_blocks=_OTHER_BLOCKS):
    """The inputs qtransit generates at `fmt`'s boundaries (its C++ generator, gate/boundaries.hpp),
    derived from the format's definition rather than drawn: near-ties (x where fl32(x / s) and the
    exact quotient round apart, for every code), scale boundaries (the scale's floor, the smallest
    normal, FLT_MAX, one and two ulps around A·2^k for every k), a partial last block of every
    length, and the blocks of `other_blocks` (the block-sizes class). A list of
    (input_class, what, x, block, shard): x is a float32 tensor quantized in blocks of `block`
    restarting every `shard` elements. Needs no Hypothesis. `fmt` is a format name or a declaration
    file (FILE.toml)."""
    from . import _native

    blk = _args.integer(block, "block", lo=1)
    others = [_args.integer(b, f"other_blocks[{i}]", lo=1) for i, b in enumerate(other_blocks)]
    return [tuple(c) for c in _native.boundary_cases(fmt, blk, _args.seed(seed), others)]


def boundary_blocks(fmt="int4", block=32, *, seed=1):
    """A Hypothesis strategy over the single blocks of boundary_cases(fmt, block): float32 arrays of
    1..block values, as blocks() draws, each one a block the generator built to sit on a boundary
    (a near-tie, a scale exponent's change, the scale's floor, a short last block). Mix it with
    blocks(): st.one_of(qs.blocks(fmt, block), qs.boundary_blocks(fmt, block))."""
    st = _st()
    pieces = []
    for _cls, _what, x, b, shard in boundary_cases(fmt, block, seed=seed, other_blocks=()):
        if b != block:
            continue
        for s0 in range(0, x.size, shard):
            for b0 in range(s0, s0 + shard, block):
                pieces.append(x[b0:min(b0 + block, s0 + shard)])
    if not pieces:
        raise ValueError(f"fmt={fmt!r}, block={block}: the generator has no boundary blocks for this block (a format with a fixed block takes only that one)")
    return st.sampled_from(pieces).map(np.copy)
