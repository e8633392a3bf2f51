"""A float8 quantizer as people write it with ml_dtypes (PyPI): one binary32 scale per block,
s = amax / 448, and the cast `(x / s).astype(ml_dtypes.float8_e4m3fn)`; decode `codes * s`. Checked
as qtransit's fp8-e4m3 (FORMATS.md: fp32-absmax scale, E4M3 elements, round to nearest even,
saturating). `make outside` runs it (run_outside.py)."""

import numpy as np

FORMAT = "fp8-e4m3"


def adapter():
    import ml_dtypes

    f8 = ml_dtypes.float8_e4m3fn

    def encode(x, block):
        x = np.asarray(x, dtype=np.float32)
        n = x.size
        blocks = -(-n // block)
        padded = np.zeros(blocks * block, np.float32)
        padded[:n] = x
        b = padded.reshape(blocks, block)
        amax = np.max(np.abs(b), axis=1)
        s = (amax / np.float32(448.0)).astype(np.float32)
        with np.errstate(divide="ignore", invalid="ignore"):
            v = np.where(s[:, None] > 0, b / s[:, None], b).astype(np.float32)
        codes = v.astype(f8).view(np.uint8).reshape(-1)[:n].astype(np.int32)
        return codes, s

    def decode(codes, scales, offsets, block):
        n = codes.size
        v = codes.astype(np.uint8).view(f8).astype(np.float32)
        padded = np.zeros(scales.size * block, np.float32)
        padded[:n] = v
        with np.errstate(over="ignore", invalid="ignore"):
            return (padded.reshape(scales.size, block) * scales[:, None]).reshape(-1)[:n].astype(np.float32)

    return encode, decode
