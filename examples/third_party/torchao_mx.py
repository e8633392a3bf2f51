"""torchao's MX quantizer (torchao.prototype.mx_formats.to_mx) as a qtransit codec: the adapter a
maintainer would write, checked by qtransit.check_codec against mxfp8-e4m3 and mxfp4 (FLOOR) and
their -rceil twins (RCEIL), with torchao's conventions declared (conventions/torchao-mx*.toml). `make outside` runs it (examples/third_party/run_outside.py).

to_mx takes a tensor whose last dimension is a multiple of the block: a shard's short last block is
padded with zeros here (zeros raise no absmax, so the padded block quantizes as the short one) and
the padding cut from the codes. Scales come back as E8M0 bytes: 2^(byte - 127), byte 255 NaN.
Decode is what torchao's to_dtype does for these: the element value times the scale in binary32.
"""

import numpy as np


def adapter(mode_name, elem="float8_e4m3fn"):
    """(encode, decode) for qtransit.check_codec with torchao's ScaleCalculationMode `mode_name`."""
    import torch
    from torchao.prototype.mx_formats.config import ScaleCalculationMode
    from torchao.prototype.mx_formats.mx_tensor import to_mx

    mode = getattr(ScaleCalculationMode, mode_name)
    dtype = getattr(torch, elem)
    fp4 = elem == "float4_e2m1fn_x2"  # two E2M1 codes per byte, element 2j in the low nibble (pack_uint4)

    def encode(x, block):
        n = x.size
        blocks = -(-n // block)
        padded = np.zeros(blocks * block, np.float32)
        padded[:n] = np.asarray(x, dtype=np.float32)
        scale, data = to_mx(torch.from_numpy(padded).reshape(1, -1), dtype, block, scaling_mode=mode)
        raw = data.view(torch.uint8).reshape(-1).numpy()
        if fp4:
            unpacked = np.empty(raw.size * 2, np.uint8)
            unpacked[0::2] = raw & 0xF
            unpacked[1::2] = raw >> 4
            raw = unpacked
        codes = raw[:n].astype(np.int32)
        byte = scale.view(torch.uint8).reshape(-1).numpy().astype(np.int64)
        with np.errstate(over="ignore"):
            s = np.where(byte == 255, np.nan, np.ldexp(1.0, byte - 127)).astype(np.float32)
        return codes, s

    def decode(codes, scales, offsets, block):
        n = codes.size
        if fp4:
            from torchao.prototype.mx_formats.kernels import f4_unpacked_to_f32

            values = f4_unpacked_to_f32(torch.from_numpy(codes.astype(np.uint8))).numpy()
        else:
            values = torch.from_numpy(codes.astype(np.uint8)).view(dtype).to(torch.float32).numpy()
        padded = np.zeros(scales.size * block, np.float32)
        padded[:n] = values
        with np.errstate(over="ignore", invalid="ignore"):
            return (padded.reshape(scales.size, block) * scales[:, None]).reshape(-1)[:n].astype(np.float32)

    return encode, decode


# (qtransit format, torchao mode): what each adapter is checked against.
CASES = [("mxfp8-e4m3", "FLOOR"), ("mxfp8-e4m3-rceil", "RCEIL")]


def rceil_probe():
    """The finding of docs/FINDINGS.md F1 without qtransit: blocks whose absmax is 448 2^k and one or
    two ulps either side, for k in [-120, 100), through to_mx RCEIL; counts the scale exponents that
    differ from the smallest e with absmax <= 448 2^e (exact)."""
    import torch
    from torchao.prototype.mx_formats.config import ScaleCalculationMode
    from torchao.prototype.mx_formats.mx_tensor import to_mx

    differ, total, example = 0, 0, None
    for k in range(-120, 100):
        for u in (-2, -1, 0, 1, 2):
            a = np.float32(448.0) * np.float32(2.0) ** k
            for _ in range(abs(u)):
                a = np.nextafter(a, np.float32(np.inf) if u > 0 else np.float32(0))
            x = np.full(32, a / np.float32(3), np.float32)
            x[0] = a
            s, _ = to_mx(torch.from_numpy(x).reshape(1, -1), torch.float8_e4m3fn, 32, scaling_mode=ScaleCalculationMode.RCEIL)
            got = int(s.view(torch.uint8).reshape(-1)[0]) - 127
            m, e = np.frexp(np.float64(a))
            want = max(-127, min(127, int(e) - 9 + (1 if m > 0.875 else 0)))
            total += 1
            if got != want:
                differ += 1
                example = example or (float(a), k, u, got, want)
    return differ, total, example
