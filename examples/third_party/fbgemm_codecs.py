"""FBGEMM's CPU communication codecs (PyPI `fbgemm-gpu-cpu` 1.9.0 with torch 2.14.1, CPU) as qtransit
codecs, checked by qtransit.check_codec against the three built-in formats that model FBGEMM's GPU
kernels (docs/FORMATS.md section 2, docs/SOURCES.md section 6, docs/DECISIONS.md D53 and D54).
`make outside` runs them in a virtual environment of their own (requirements-fbgemm.txt: fbgemm-gpu-cpu
1.9 loads only with torch 2.14; examples/third_party/run_outside.py).

What TorchRec's `QuantizedCommCodec` calls on a CPU tensor (fbgemm_gpu/quantize_comm.py, 1.9.0,
`_quantize_tensor` / `_dequantize_tensor`), and what each adapter calls the same way:

- FP8 with no row_dim (`hfp8_adapter`): `quantize_utils.fp32_to_hfp8_with_clamp(x, ebits, mbits, bias)`
  with quantize_comm's `ebits, mbits, bias = 4, 3, 15` (max_pos = 2^((1 << 4) - 2 - 15) (2 - 2^-3) =
  0.9375, computed by fp32_to_hfp8_with_clamp), i.e. `torch.ops.fbgemm.FloatToHFP8Quantized`; decode
  `hfp8_to_fp32(q, ebits, bias)` (`HFP8QuantizedToFloat`). No scale: checked as `fbgemm-fp8`, whose
  scale is `none` (s = 1 for every block; the adapter returns ones). The op takes 2-D tensors: a
  shard goes in as one row.
- INT8 (`int8_rowwise_adapter`): `torch.ops.fbgemm.FloatToFused8BitRowwiseQuantized(x.view(-1,
  row_dim))` and `Fused8BitRowwiseQuantizedToFloat`. Each row is one block; the CPU op writes each
  row as [row_dim code bytes][binary32 scale][binary32 bias] (no 4-byte alignment, unlike the GPU's
  layout). The adapter returns the codes, the scales and the biases as the offsets, and decodes by
  writing those bytes back and calling the op. A shard's short last row goes in as a second call of
  one row (the op takes rows of one length). Checked as `fbgemm-int8-rowwise` (the CUDA kernel,
  epsilon 1e-20) and as conventions/fbgemm-int8-rowwise-cpu.toml (the same with the CPU's 1e-8, and
  `zero_sign = "any"`: its row minimum is the first zero met, of either sign).
- MX4 (`mx4_adapter`): `quantize_utils.fp32_to_mx4(x, 32, rounding_mode=RoundingMode.even)` (the
  QuantizationContext default) and `mx4_to_float(q, 32)`; on a CPU tensor these run
  fbgemm_gpu/triton/quantize_ref.py `py_quantize_mx4` / `py_dequantize_mx4`. Each group of 32 is
  [16 bytes, element 2j in the low nibble][exponent byte e + 127]; the nibble is qtransit's E2M1
  code as it stands (sign bit 8, magnitude index 0..7). A shard's short last group is padded with
  zeros (as TorchRec pads each rank's width to 32; zeros raise no absmax) and the padding cut from
  the codes. Checked as conventions/fbgemm-mx4-cpu.toml: `fbgemm-mx4` (the Triton kernel) with
  `zero_sign = "any"` (FBGEMM's decode table gives code 8 as +0, D53).

Non-finite input: qtransit's formats refuse it. HFP8 writes NaN and +-inf as +-max_pos by their sign
bit (0x77, 0xF7: `fminf` in quantize_ops_utils.h `float_to_hfp8`), the convention `nonfinite =
"saturate"` (docs/FORMATS.md section 10), declared in conventions/fbgemm-fp8-cpu.toml: its encode
lets them through. The others are no convention qtransit can declare: the INT8 row-wise op skips a
NaN in its min and max and writes it as code 0 (it decodes to the row's minimum), and CPU MX4
writes a group holding NaN or inf as exponent byte 0 and codes 0 (every element decodes to 0: F9).
So those two encodes refuse NaN and inf by raising, as a codec of a format without a `nonfinite`
convention must (PLUGIN.md, the refusal probe), and `nonfinite_probe()` records what FBGEMM
itself does with them; the INT8 adapter also refuses a row whose range
overflows (FBGEMM's stored scale is then inf and the row decodes to NaN), as the format does.
"""

import numpy as np

MX4_GROUP = 32


def _refuse_nonfinite(x, what):
    if not np.all(np.isfinite(x)):
        raise ValueError(f"NaN or inf: refused ({what} declares no nonfinite convention qtransit can state; "
                         "see fbgemm_codecs.nonfinite_probe)")


def hfp8_adapter():
    """(encode, decode) for check_codec("fbgemm-fp8", ...): FBGEMM's HFP8 (1-4-3, bias 15, saturating
    at max_pos = 0.9375) as TorchRec's FP8 comm codec calls it when no row_dim is set."""
    import torch
    from fbgemm_gpu.quantize_comm import bias, ebits, mbits
    from fbgemm_gpu.quantize_utils import fp32_to_hfp8_with_clamp, hfp8_to_fp32

    def encode(x, block):
        x = np.asarray(x, dtype=np.float32)  # NaN and inf go through: conventions/fbgemm-fp8-cpu.toml
        q = fp32_to_hfp8_with_clamp(torch.from_numpy(x.copy()).reshape(1, -1), ebits, mbits, bias)
        return q.reshape(-1).numpy().astype(np.int32), np.ones(-(-x.size // block), np.float32)

    def decode(codes, scales, offsets, block):
        q = torch.from_numpy(np.asarray(codes).astype(np.uint8)).reshape(1, -1)
        return hfp8_to_fp32(q, ebits, bias).reshape(-1).numpy().astype(np.float32)

    return encode, decode


def _int8_rows(t, torch):
    """FloatToFused8BitRowwiseQuantized on a (rows, n) binary32 tensor: codes (rows, n) uint8, and
    the scale and bias of each row (binary32), read from the last 8 bytes of each fused row."""
    fused = torch.ops.fbgemm.FloatToFused8BitRowwiseQuantized(t.contiguous()).numpy()
    n = t.shape[1]
    if fused.shape[1] != n + 8:
        raise RuntimeError(f"FloatToFused8BitRowwiseQuantized wrote rows of {fused.shape[1]} bytes for {n} values; "
                           f"the CPU layout is n codes + 8 bytes")
    tail = np.ascontiguousarray(fused[:, n:]).view(np.float32)  # (rows, 2): scale, bias
    return fused[:, :n], tail[:, 0].copy(), tail[:, 1].copy()


def int8_rowwise_adapter():
    """(encode, decode) for check_codec("fbgemm-int8-rowwise", ...): FBGEMM's fused 8-bit row-wise
    quantization on the CPU, each block one row (TorchRec's row_dim)."""
    import torch
    import fbgemm_gpu  # noqa: F401  (registers torch.ops.fbgemm)

    def encode(x, block):
        x = np.asarray(x, dtype=np.float32)
        _refuse_nonfinite(x, "fbgemm-int8-rowwise (an offset format: no nonfinite convention)")
        n = x.size
        full = n // block
        parts = []
        if full:
            parts.append(_int8_rows(torch.from_numpy(x[:full * block].copy()).reshape(full, block), torch))
        if n > full * block:
            parts.append(_int8_rows(torch.from_numpy(x[full * block:].copy()).reshape(1, -1), torch))
        codes = np.concatenate([p[0].reshape(-1) for p in parts]).astype(np.int32)
        scales = np.concatenate([p[1] for p in parts]).astype(np.float32)
        biases = np.concatenate([p[2] for p in parts]).astype(np.float32)
        if not np.all(np.isfinite(scales)):
            j = int(np.flatnonzero(~np.isfinite(scales))[0])
            raise ValueError(f"range overflow: FBGEMM stored scale {scales[j]} for row {j} (the row decodes to NaN)")
        return codes, scales, biases

    def decode(codes, scales, offsets, block):
        codes = np.asarray(codes).astype(np.uint8)
        scales = np.asarray(scales, dtype=np.float32)
        offsets = np.asarray(offsets, dtype=np.float32)
        n = codes.size
        out = []
        for r0, r1, width in ((0, n // block, block), (n // block, scales.size, n - (n // block) * block)):
            rows = r1 - r0
            if rows <= 0 or width <= 0:
                continue
            fused = np.empty((rows, width + 8), np.uint8)
            fused[:, :width] = codes[r0 * block:r0 * block + rows * width].reshape(rows, width)
            fused[:, width:width + 4] = scales[r0:r1].reshape(rows, 1).view(np.uint8)
            fused[:, width + 4:] = offsets[r0:r1].reshape(rows, 1).view(np.uint8)
            out.append(torch.ops.fbgemm.Fused8BitRowwiseQuantizedToFloat(torch.from_numpy(fused)).reshape(-1).numpy())
        return np.concatenate(out).astype(np.float32)

    return encode, decode


def _mx4_exponent_bytes(scales):
    """E8M0 bytes e + 127 for scales 2^e (FBGEMM stores e + 127 after each group's 16 code bytes)."""
    m, e = np.frexp(np.asarray(scales, dtype=np.float64))
    if not np.all(m == 0.5):
        raise ValueError(f"a scale that is not a power of two: {scales[np.flatnonzero(m != 0.5)[0]]}")
    return (e - 1 + 127).astype(np.uint8)


def mx4_adapter():
    """(encode, decode) for check_codec("fbgemm-mx4", ...): FBGEMM's MX4 on the CPU (quantize_ref.py),
    group 32, rounding mode even, as TorchRec's MX4 comm codec calls it."""
    import torch
    from fbgemm_gpu.quantize_utils import RoundingMode, fp32_to_mx4, mx4_to_float

    def encode(x, block):
        x = np.asarray(x, dtype=np.float32)
        if block != MX4_GROUP:
            raise ValueError(f"TorchRec's MX4 codec uses groups of {MX4_GROUP}, not {block}")
        _refuse_nonfinite(x, "fbgemm-mx4")
        n = x.size
        groups = -(-n // MX4_GROUP)
        padded = np.zeros(groups * MX4_GROUP, np.float32)
        padded[:n] = x
        byte, codes = _mx4_unpack(fp32_to_mx4(torch.from_numpy(padded), MX4_GROUP, rounding_mode=RoundingMode.even))
        scales = np.ldexp(1.0, byte - 127).astype(np.float32)  # bytes 0..252: 2^-127..2^125, all exact
        return codes.reshape(-1)[:n].astype(np.int32), scales

    def decode(codes, scales, offsets, block):
        codes = np.asarray(codes).astype(np.uint8)
        n = codes.size
        groups = np.asarray(scales).size
        c = np.zeros(groups * MX4_GROUP, np.uint8)
        c[:n] = codes
        c = c.reshape(groups, MX4_GROUP)
        packed = np.empty((groups, MX4_GROUP // 2 + 1), np.uint8)
        packed[:, :MX4_GROUP // 2] = c[:, 0::2] | (c[:, 1::2] << 4)
        packed[:, -1] = _mx4_exponent_bytes(scales)
        out = mx4_to_float(torch.from_numpy(packed.reshape(-1)), MX4_GROUP)
        return out.reshape(-1).numpy()[:n].astype(np.float32)

    return encode, decode


# ---------------------------------------------------------------------------------------------------
# Probes: what FBGEMM's CPU ops do where the findings (docs/FINDINGS.md F7-F9) and the non-finite
# behaviour lie, without qtransit. Each calls the library and compares with the rule the GPU kernel
# follows (stated here from docs/SOURCES.md section 6, not computed by qtransit).


def _kernel_even_byte(a):
    """The Triton kernel's exponent byte for absmax a (docs/SOURCES.md 6.2, qtransit's e8m0-fbgemm-even):
    the exponent field of the binary32 whose bits are bits(a) + 2^21 - 1, less 127 and 2, clamped to
    [-127, 125], plus 127. A zero a reads as 2^-126."""
    a = np.where(np.asarray(a, np.float32) == 0, np.float32(2.0 ** -126), np.abs(np.asarray(a, np.float32)))
    field = ((a.view(np.uint32).astype(np.int64) + (1 << 21) - 1) >> 23) & 0xFF
    return np.clip(field - 127 - 2, -127, 125) + 127


def _mx4_unpack(q):
    """FBGEMM's packed MX4 (per group of 32: 16 bytes, element 2j in the low nibble, then the exponent
    byte e + 127) as (exponent bytes, codes [groups, 32])."""
    import torch

    packed = q.view(torch.uint8).reshape(-1, MX4_GROUP // 2 + 1).numpy()
    codes = np.empty((packed.shape[0], MX4_GROUP), np.uint8)
    codes[:, 0::2] = packed[:, :-1] & 0xF
    codes[:, 1::2] = packed[:, :-1] >> 4
    return packed[:, -1].astype(np.int64), codes


def mx4_cpu(x):
    """FBGEMM's CPU MX4 (TorchRec's call) on groups of 32: (exponent bytes, codes, decoded)."""
    import torch
    from fbgemm_gpu.quantize_utils import RoundingMode, fp32_to_mx4, mx4_to_float

    t = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32).reshape(-1))
    q = fp32_to_mx4(t, MX4_GROUP, rounding_mode=RoundingMode.even)
    byte, codes = _mx4_unpack(q)
    return byte, codes, mx4_to_float(q, MX4_GROUP).numpy().reshape(-1, MX4_GROUP)


def mx4_probe(below=128):
    """F8 and F9 without qtransit. For each binade E in [-126, 127], groups whose absmax is 1.75 2^E,
    the `below` floats under it and the one above (the other elements 0), through FBGEMM's CPU MX4;
    compares each exponent byte with the Triton kernel's rule (`_kernel_even_byte`, which moves up only
    strictly above 1.75 2^E). Returns the count of groups that differ, per binade the floats below
    1.75 2^E that move up, and the groups at the top of the range (F9)."""
    total, differ, band, first = 0, 0, {}, None
    for E in range(-126, 128):
        base = np.float32(np.ldexp(1.75, E))
        bits = int(np.array([base], np.float32).view(np.uint32)[0])
        a = np.arange(bits - below, bits + 2, dtype=np.int64).astype(np.uint32).view(np.float32)
        x = np.zeros((a.size, MX4_GROUP), np.float32)
        x[:, 0] = a
        got, _, _ = mx4_cpu(x)
        want = _kernel_even_byte(a)
        bad = got != want
        total += a.size
        differ += int(bad.sum())
        band[E] = int(bad[:below].sum())  # floats below 1.75 2^E that the CPU moves up
        if first is None and bad.any():
            i = int(np.flatnonzero(bad)[0])
            first = (float(a[i]), E, int(got[i]) - 127, int(want[i]) - 127)
    top = []
    big = np.float32(np.ldexp(1.75, 127))
    for a in (big, np.nextafter(big, np.float32(np.inf)), np.nextafter(np.nextafter(big, np.float32(np.inf)), np.float32(np.inf)),
              np.finfo(np.float32).max):
        x = np.zeros((1, MX4_GROUP), np.float32)
        x[0, 0], x[0, 1] = a, 1e38
        got, codes, dec = mx4_cpu(x)
        top.append((float(a), int(got[0]), int(_kernel_even_byte(np.array([a]))[0]), int(codes[0, 0]), float(dec[0, 0]), float(dec[0, 1])))
    return {"total": total, "differ": differ, "band": band, "first": first, "top": top}


def int8_eps_probe():
    """F7: rows (0, r) for ranges r = 2^k, k in [-40, 20]: the CPU op's top code (FBGEMM's CPU epsilon is
    1e-8, the CUDA kernel's 1e-20: docs/SOURCES.md 6.1); on the GPU it is 255 for every r above about
    5e-18. Returns [(r, code of r)] where the code is not 255."""
    import torch
    import fbgemm_gpu  # noqa: F401

    short = []
    for k in range(-40, 21):
        r = float(2.0 ** k)
        codes, _, _ = _int8_rows(torch.tensor([[0.0, r]]), torch)
        if int(codes[0, 1]) != 255:
            short.append((r, int(codes[0, 1])))
    return short


def nonfinite_probe():
    """What FBGEMM's CPU codecs write for NaN and inf (HFP8's is declared as nonfinite = "saturate"; the INT8
    and MX4 adapters refuse them): {codec: text}."""
    import torch
    from fbgemm_gpu.quantize_comm import bias, ebits, mbits
    from fbgemm_gpu.quantize_utils import RoundingMode, fp32_to_hfp8_with_clamp, hfp8_to_fp32, fp32_to_mx4, mx4_to_float

    out = {}
    v = torch.tensor([[float("nan"), float("inf"), -float("inf")]])
    q = fp32_to_hfp8_with_clamp(v, ebits, mbits, bias)
    out["hfp8"] = f"NaN, inf, -inf encode to {[hex(c) for c in q.reshape(-1).tolist()]}, decode to {hfp8_to_fp32(q, ebits, bias).reshape(-1).tolist()}"
    rows = []
    for bad in (float("nan"), float("inf")):
        x = torch.tensor([[1.0, bad, 2.0]])
        codes, s, b = _int8_rows(x, torch)
        dec = torch.ops.fbgemm.Fused8BitRowwiseQuantizedToFloat(torch.ops.fbgemm.FloatToFused8BitRowwiseQuantized(x))
        rows.append(f"row (1, {bad}, 2): codes {codes.reshape(-1).tolist()}, scale {float(s[0])!r}, bias {float(b[0])!r}, "
                    f"decodes to {dec.reshape(-1).tolist()}")
    out["int8-rowwise"] = "; ".join(rows)
    groups = []
    for bad in (float("nan"), float("inf")):
        x = torch.ones(MX4_GROUP)
        x[3] = bad
        q = fp32_to_mx4(x, MX4_GROUP, rounding_mode=RoundingMode.even)
        d = mx4_to_float(q, MX4_GROUP)
        groups.append(f"a group of ones with {bad} at element 3: exponent byte {int(q.view(torch.uint8)[MX4_GROUP // 2])}, "
                      f"decodes to {sorted(set(d.tolist()), key=str)}")
    out["mx4"] = "; ".join(groups)
    return out
