"""E4M3 (e4m3fn) and E2M1 grids by hand, for the NVFP4 and tile emulations (test_nvfp4_emulation.py,
test_tile_emulation.py): every non-negative value from the formats' definitions, and round to nearest
even onto an ascending grid with saturation at its top, by exact float64 comparisons with the
midpoints (not ml_dtypes, not torch, not qtransit)."""

import numpy as np


def e4m3_value(byte):
    """The value of a non-negative E4M3 (fn) byte 0eeeemmm, from the definition (bias 7)."""
    e, m = byte >> 3, byte & 7
    return m * 2.0**-9 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7)


E4M3_GRID = np.array([e4m3_value(c) for c in range(0x7F)])  # bytes 0x00..0x7E: every finite value >= 0
E2M1_GRID = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])  # magnitude index 0..7


def nearest_even(a, grid):
    """Index into the ascending grid of the value nearest to each a >= 0 (float64 copies of binary32
    values; inf allowed), a tie going to the even index (= the even code: the grids are in code order,
    and across an E4M3 binade 0x?7 -> 0x?8 the even byte is the even mantissa), anything at or above
    the grid's last value saturating to it. The midpoints are exact in float64 (grid values of <= 4
    significant bits), so every comparison is exact."""
    a = np.asarray(a, np.float64)
    top = len(grid) - 1
    lo = np.clip(np.searchsorted(grid, a, side="right") - 1, 0, top)  # grid[lo] <= a
    hi = np.minimum(lo + 1, top)
    mid = (grid[lo] + grid[hi]) / 2
    up = (a > mid) | ((a == mid) & (lo % 2 == 1))
    return np.where(lo == top, top, np.where(up, hi, lo)).astype(np.int64)
