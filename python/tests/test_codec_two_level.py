"""check_codec on formats whose codecs the ABI refused before: NVFP4's two-level scales (the codec is
handed the tensor amax T and exchanges E4M3 block scales s_b) and 2-D tiles (the codec quantizes
tiles as blocks of the tile's area, in tile order).

The codecs here are the independent numpy emulations of test_nvfp4_emulation.py and
test_tile_emulation.py (written from docs/SOURCES.md, not from qtransit's C++), wrapped as the
adapter a user writes. Each right codec must pass the whole quick gate; each wrong one must fail
with a message naming what differs, so that the check cannot pass by checking nothing.
"""

import numpy as np
import pytest

from grids_by_hand import E2M1_GRID, E4M3_GRID
from test_nvfp4_emulation import C2688, emulate
from test_tile_emulation import A448, FLOOR, e4m3_signed

F32 = np.float32

qtransit = pytest.importorskip("qtransit")

# The quick tier at N = 2, 4 on the paths that quantize once, each hop and by stages, and nvfp4's own
# te-nvfp4-ag: the kernel checks (edge cases, boundary inputs) in full, the paths on a few blocks a
# rank (the default gate takes 14 s a check for nvfp4; flashinfer's stripes need a larger M).
PATHS = ["ring-rs", "a2a-rs", "ring-ag", "two-shot-ar"]
SMALL = {"gate": {"ranks": [2, 4], "ranks_per_node": 2, "paths": PATHS + ["te-nvfp4-ag"]}}
SMALL_TILES = {"gate": {"ranks": [2, 4], "ranks_per_node": 2, "paths": PATHS}}


def nvfp4_codec(*, own_amax=False, decode_rule="te", scales="sb", calls=None):
    """(encode, decode) of TE's NVFP4 on a shard. own_amax: ignore the T handed in and take the
    shard's max |x| (the mistake of quantizing a shard as its own tensor). decode_rule="torchao":
    decode by fl32(s_b fl32(T / 2688)) instead of TE's fl32(fl32(s_b T) fl32(1/2688)).
    scales="factor": return the decode factors instead of s_b. calls: a list collecting each T."""

    def encode(x, block, tensor_amax):
        assert block == 16
        if calls is not None:
            calls.append(float(tensor_amax))
        r = emulate(x, t=None if own_amax else tensor_amax)
        sb = E4M3_GRID[r["e4m3_bytes"]].astype(F32)
        return r["codes"].astype(np.int32), (r["scales"] if scales == "factor" else sb)

    def decode(codes, scales, offsets, block, tensor_amax):
        assert offsets is None
        t = F32(tensor_amax)
        sb = np.asarray(scales, F32)
        f = (sb * t) * C2688 if decode_rule == "te" else sb * (t / F32(2688))
        codes = np.asarray(codes)
        mag = E2M1_GRID[codes & 7].astype(F32)
        value = np.where(codes & 8, -mag, mag).astype(F32)
        with np.errstate(over="ignore", invalid="ignore"):
            return (value * np.repeat(f, block)[:codes.size]).astype(F32)

    return encode, decode


def test_nvfp4_codec_passes_the_quick_gate_and_gets_t():
    calls = []
    enc, dec = nvfp4_codec(calls=calls)
    r = qtransit.check_codec("nvfp4", enc, dec, name="numpy-nvfp4", config=SMALL)
    assert r.passed, r.summary()
    # The block checks hand the declared T (448 * 6 = 2688); te-nvfp4-ag hands each tensor's own amax.
    assert 2688.0 in calls
    assert any(t != 2688.0 for t in calls), sorted(set(calls))[:5]


@pytest.mark.parametrize(
    "kw, words",
    [
        ({"own_amax": True}, "differ"),
        ({"decode_rule": "torchao"}, "differ"),
        ({"scales": "factor"}, "not a non-negative E4M3 value"),
    ],
)
def test_nvfp4_codec_mistakes_fail(kw, words):
    enc, dec = nvfp4_codec(**kw)
    r = qtransit.check_codec("nvfp4", enc, dec, name="numpy-nvfp4-wrong", config=SMALL)
    assert not r.passed
    assert words in r.summary(), r.summary()


def fp8_tile_codec(area, *, multiplier="exact"):
    """DeepGEMM's per_block_cast_to_fp8 on one tile, as a 1-D block of the tile's area in tile order:
    s = fl32(a' / 448), m = fl32(448 / a') with a' = max(a, 1e-4); multiplier="inv-s": m = fl32(1 / s)."""

    def encode(x, block):
        assert block == area
        x = np.asarray(x, F32)
        if not np.all(np.isfinite(x)):
            raise ValueError("not finite")  # DeepGEMM's cast would give NaN codes: a codec refuses instead
        codes, scales = [], []
        for b0 in range(0, x.size, block):
            xb = x[b0:b0 + block]
            ap = np.maximum(np.abs(xb).max(), FLOOR)
            s = F32(ap / A448)
            m = F32(A448 / ap) if multiplier == "exact" else F32(F32(1) / s)
            byte, _ = e4m3_signed(xb * m)
            codes.append(byte.astype(np.int32))
            scales.append(s)
        return np.concatenate(codes), np.asarray(scales, F32)

    def decode(codes, scales, offsets, block):
        codes = np.asarray(codes, np.int64)
        mag = E4M3_GRID[codes & 0x7F].astype(F32)
        value = np.where(codes & 0x80, -mag, mag).astype(F32)
        return (value * np.repeat(np.asarray(scales, F32), block)[:codes.size]).astype(F32)

    return encode, decode


# fp8-e4m3-128x128 with 16 x 16 tiles: the same arithmetic and the same ABI path (tiles handed as
# blocks in tile order) as the 128 x 128 built-in, whose 16,384-element blocks make the codec
# check's exact bound checks take minutes (the edge tensor's boundary blocks: 44 M elements).
TILE16 = """name = "test-fp8-e4m3-16x16"
like = "fp8-e4m3-128x128"
tile = [16, 16]
"""


@pytest.fixture(scope="module")
def tile16(tmp_path_factory):
    p = tmp_path_factory.mktemp("tile16") / "test-fp8-e4m3-16x16.toml"
    p.write_text(TILE16)
    return str(p)


def test_tiled_codec_passes_the_quick_gate(tile16):
    enc, dec = fp8_tile_codec(256)
    r = qtransit.check_codec(tile16, enc, dec, name="numpy-deepgemm-fp8", config=SMALL_TILES)
    assert r.passed, r.summary()
    assert "block 256" in r.summary()


def test_tiled_codec_mistake_fails(tile16):
    enc, dec = fp8_tile_codec(256, multiplier="inv-s")
    r = qtransit.check_codec(tile16, enc, dec, name="numpy-deepgemm-fp8-wrong", config=SMALL_TILES)
    assert not r.passed
    assert "differ" in r.summary()
