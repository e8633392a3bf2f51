"""bitsandbytes' NF4 (`bitsandbytes.functional.quantize_4bit(x, blocksize, quant_type="nf4")` and
`dequantize_4bit`, its CPU backend from PyPI) as a codec for qtransit.check_codec, checked as
qtransit's nf4 (FORMATS.md section 7: the 16 QLoRA values, scale absmax / 1, nearest with ties to
the lower value, element 2j in the high nibble) with its conventions declared
(conventions/bnb-nf4.toml). bitsandbytes takes block sizes 32, 64, ..., 4096 only; the adapter
refuses others as a codec plugin does (its check_block), so the gate checks it at block 64."""

import numpy as np

BLOCKS = (32, 64, 128, 256, 512, 1024, 2048, 4096)


def adapter():
    import bitsandbytes.functional as F
    import torch

    def encode(x, block):
        if block not in BLOCKS:
            raise ValueError(f"bitsandbytes takes block sizes {BLOCKS}, not {block}")
        x = np.asarray(x, dtype=np.float32)
        n = x.size
        packed, state = F.quantize_4bit(torch.from_numpy(x.copy()), blocksize=block, quant_type="nf4")
        p = packed.view(torch.uint8).reshape(-1).numpy()
        codes = np.empty(p.size * 2, np.int32)
        codes[0::2] = p >> 4  # element 2j in the high nibble
        codes[1::2] = p & 0xF
        return codes[:n], state.absmax.numpy().astype(np.float32)

    def decode(codes, scales, offsets, block):
        from bitsandbytes.functional import QuantState

        n = codes.size
        c = np.zeros(n + (n & 1), np.uint8)
        c[:n] = codes
        packed = torch.from_numpy((c[0::2] << 4) | c[1::2]).reshape(-1, 1)
        code = F.get_4bit_type("nf4", device="cpu")
        state = QuantState(absmax=torch.from_numpy(scales.copy()), shape=torch.Size([n]), code=code, blocksize=block,
                           quant_type="nf4", dtype=torch.float32)
        return F.dequantize_4bit(packed, state).reshape(-1).numpy().astype(np.float32)

    return encode, decode
