"""A codec written in Python, as check_codec runs it: the user's encode and decode adapted to the
native module's two callables (python/src/module.cpp), shard by shard.

The user writes, for one shard of a tensor (blocks of `block` elements, the last one maybe short):
    encode(x: float32[n] (or the codec's dtype), block) -> (codes: int[n], scales: float32[blocks])
                                  or (codes, scales, offsets: float32[blocks])  (formats with an offset)
    decode(codes: int32[n], scales: float32[blocks], offsets or None, block) -> float32[n]
A format with a tensor amax (nvfp4) calls both with the keyword tensor_amax=T, the tensor's amax the
block scales are under, and its scales are the E4M3 block scales s_b as float32 values.
Arrays may come back as numpy arrays or DLPack tensors, CUDA ones included (copied to the host).
With device="cuda" the callables are handed torch CUDA tensors instead of numpy arrays.
"""

import numpy as np

from ._arrays import as_codes, as_numpy


def _float32(v, what):
    a = as_numpy(v, what)
    if a.dtype != np.float32:
        raise ValueError(f"{what}: dtype {a.dtype}; the format's metadata is binary32 (return float32)")
    return np.ascontiguousarray(a.reshape(-1))


def _decoded(v, what):
    a = as_numpy(v, what)  # float32, float16 or bfloat16: widened exactly
    return np.ascontiguousarray(a.reshape(-1).astype(np.float32))


def _device_put(device):
    if device == "cpu":
        return lambda a: a
    if device != "cuda":
        raise ValueError(f"device={device!r}: cpu or cuda")
    try:
        import torch
    except ImportError:
        raise ValueError("device='cuda' hands the callables torch CUDA tensors: torch is not installed") from None
    if not torch.cuda.is_available():
        raise ValueError("device='cuda': torch sees no CUDA device")
    return lambda a: torch.from_numpy(a).cuda()


def _as_dtype(dtype):
    """float32 values (widened exactly from the codec's dtype) back to arrays of that dtype."""
    if dtype == "float32":
        return lambda a: a
    if dtype == "float16":
        return lambda a: a.astype(np.float16)
    if dtype == "bfloat16":
        try:
            import ml_dtypes
        except ImportError:
            raise ValueError("dtype='bfloat16' hands encode ml_dtypes.bfloat16 arrays: pip install ml_dtypes") from None
        return lambda a: a.astype(ml_dtypes.bfloat16)
    raise ValueError(f"dtype={dtype!r}: float32, bfloat16 or float16")


def adapt(encode, decode, device="cpu", dtype="float32"):
    if not callable(encode) or not callable(decode):
        raise ValueError("encode and decode must be callables")
    put = _device_put(device)
    cast = _as_dtype(dtype)

    def enc(x, block, shard, tensor_amax=None):
        kw = {} if tensor_amax is None else {"tensor_amax": tensor_amax}
        codes, scales, offsets = [], [], []
        for s0 in range(0, x.size, shard):
            r = encode(put(cast(x[s0:s0 + shard])), block, **kw)
            if not isinstance(r, (tuple, list)) or len(r) not in (2, 3):
                raise TypeError("encode must return (codes, scales) or (codes, scales, offsets)")
            codes.append(as_codes(r[0], "encode's codes"))
            scales.append(_float32(r[1], "encode's scales"))
            # Whether the format needs offsets is the native side's to say (it names the format).
            offsets.append(None if len(r) < 3 or r[2] is None else _float32(r[2], "encode's offsets"))
        given = [o is not None for o in offsets]
        if any(given) and not all(given):
            raise TypeError("encode returned offsets for some shards and not for others")
        return (np.concatenate(codes), np.concatenate(scales), np.concatenate(offsets) if all(given) else None)

    def dec(codes, scales, offsets, block, shard, tensor_amax=None):
        kw = {} if tensor_amax is None else {"tensor_amax": tensor_amax}
        per = -(-shard // block)
        out = []
        for i, s0 in enumerate(range(0, codes.size, shard)):
            o = None if offsets is None else put(offsets[i * per:(i + 1) * per])
            out.append(_decoded(decode(put(codes[s0:s0 + shard]), put(scales[i * per:(i + 1) * per]), o, block, **kw), "decode's values"))
        return np.concatenate(out)

    return enc, dec
