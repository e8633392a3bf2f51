"""An int4 block quantizer written in numpy, as a user would: symmetric, absmax scale, round to
nearest even (NUMERICS.md section 1.3):

    qmax = 7, a = max|x|;  a == 0: s = 0, codes 0, decode +0;
    else s = max(fl32(a / 7), 2^-149), q = clamp(rne(fl32(x / s)), -7, 7), decode fl32(q * s) saturated.

encode and decode take one shard (blocks of `block`, the last one maybe short), which is what
qtransit.check_codec hands them. Every operation is binary32 (numpy float32 arithmetic, no FMA).
"""

import numpy as np

QMAX = 7
TINY = np.float32(2.0**-149)
FLT_MAX = np.finfo(np.float32).max


def _blocks(x, block):
    n = x.size
    nb = -(-n // block)
    padded = np.zeros(nb * block, dtype=np.float32)  # a zero never raises an absmax
    padded[:n] = x
    return padded.reshape(nb, block), n


def round_codes(v):
    """Round to nearest, ties to even (np.rint)."""
    return np.rint(v)


def encode(x, block, rounding=round_codes):
    x = np.asarray(x, dtype=np.float32)
    # A quantizer must refuse NaN and inf (NUMERICS.md section 4): the gate sends it such blocks and
    # fails a codec that encodes one. Raising is how a Python codec refuses.
    if not np.all(np.isfinite(x)):
        raise ValueError("int4: the input holds NaN or inf")
    b, n = _blocks(x, block)
    a = np.max(np.abs(b), axis=1)
    s = np.where(a == 0, np.float32(0), np.maximum(a / np.float32(QMAX), TINY)).astype(np.float32)
    q = np.zeros_like(b)
    nz = s > 0
    q[nz] = np.clip(rounding(b[nz] / s[nz, None]), -QMAX, QMAX)
    return q.reshape(-1)[:n].astype(np.int8), s


def decode(codes, scales, offsets, block):
    codes = np.asarray(codes)
    n = codes.size
    b, _ = _blocks(codes.astype(np.float32), block)
    with np.errstate(over="ignore"):  # q * s past FLT_MAX saturates to FLT_MAX (D1)
        out = np.clip(b * np.asarray(scales, dtype=np.float32)[:, None], -FLT_MAX, FLT_MAX)
    return out.reshape(-1)[:n].astype(np.float32)
