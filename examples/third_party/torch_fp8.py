"""Two float8 quantizers from torch and torchao, as codecs for qtransit.check_codec (`make outside`):

- `cast_adapter`: torch's own float8 cast with one binary32 scale per block, as people write it:
  s = amax / 448, then `(x / s).to(torch.float8_e4m3fn)`; decode `codes.float() * s`.
- `rowwise_adapter`: torchao's float8 row-wise quantization (torchao.quantization.quant_primitives:
  `_choose_scale_float8` with block [1, block], `_quantize_affine_float8`, `_dequantize_affine_float8`),
  each row of `block` elements one block.

Both are checked as fp8-e4m3 with their conventions declared (conventions/torch-fp8-e4m3.toml,
conventions/torchao-fp8-rowwise.toml: no scale floor, 0/0 = NaN for a zero block)."""

import numpy as np


def _blocks(x, block):
    n = x.size
    nb = -(-n // block)
    b = np.zeros(nb * block, np.float32)
    b[:n] = np.asarray(x, dtype=np.float32)  # zeros pad a short last block: they raise no absmax
    return b.reshape(nb, block), n


def _decode_fp8(codes, scales, block):
    import torch

    n = codes.size
    v = np.zeros(scales.size * block, np.float32)
    v[:n] = torch.from_numpy(codes.astype(np.uint8)).view(torch.float8_e4m3fn).to(torch.float32).numpy()
    return v.reshape(scales.size, block), n


def cast_adapter():
    import torch

    def encode(x, block):
        b, n = _blocks(x, block)
        t = torch.from_numpy(b)
        s = t.abs().amax(dim=1, keepdim=True) / 448.0
        q = (t / s).to(torch.float8_e4m3fn)
        return q.view(torch.uint8).reshape(-1)[:n].numpy().astype(np.int32), s.reshape(-1).numpy()

    def decode(codes, scales, offsets, block):
        v, n = _decode_fp8(codes, scales, block)
        out = torch.from_numpy(v).to(torch.float32) * torch.from_numpy(scales).reshape(-1, 1)
        return out.reshape(-1)[:n].numpy()

    return encode, decode


def rowwise_adapter():
    import torch
    from torchao.quantization.quant_primitives import (
        _choose_scale_float8,
        _dequantize_affine_float8,
        _quantize_affine_float8,
    )

    def encode(x, block):
        b, n = _blocks(x, block)
        t = torch.from_numpy(b)
        s = _choose_scale_float8(t, block_size=[1, block], float8_dtype=torch.float8_e4m3fn)
        q = _quantize_affine_float8(t, s, torch.float8_e4m3fn)
        return q.view(torch.uint8).reshape(-1)[:n].numpy().astype(np.int32), s.reshape(-1).numpy().astype(np.float32)

    def decode(codes, scales, offsets, block):
        v, n = _decode_fp8(codes, scales, block)
        q = torch.from_numpy(v).to(torch.float8_e4m3fn)
        out = _dequantize_affine_float8(q, torch.from_numpy(scales).reshape(-1, 1), torch.float32)
        return out.reshape(-1)[:n].numpy()

    return encode, decode
