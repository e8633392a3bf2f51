"""torchao's NVFP4 quantizer (torchao 0.18.0, pure PyTorch on CPU) as a qtransit codec, checked by
qtransit.check_codec against the built-in `nvfp4` (Transformer Engine's NVFP4 recipe, 1-D blocks of
16, round to nearest even; docs/FORMATS.md section 2, `e4m3-tensor-amax`, docs/SOURCES.md section 5).
`make outside` runs it (examples/third_party/run_outside.py).

What is called (torchao 0.18.0, torchao/prototype/mx_formats/):
- nvfp4_tensor.py `per_tensor_amax_to_scale(T)`: the per-tensor scale P = fl32(T / 2688), from the
  tensor amax T that qtransit's reference uses for the call (check_codec passes it as `tensor_amax`).
- nvfp4_tensor.py `NVFP4Tensor.to_nvfp4(x, 16, per_tensor_scale=P)`, which calls `nvfp4_quantize`
  (the non-Triton path): s_b = E4M3(clamp(fl32(fl32(a / 6) / P), 2^-6, 448)) (the lower clamp is
  `E4M3_EPS`, torch.finfo(float8_e4m3fn).tiny, E4M3's smallest *normal*), the multiplier
  r = fl32(fl32(1 / P) / s_b), and the elements `kernels.py` `f32_to_f4_unpacked(clamp(fl32(x r), -6, 6))`
  (custom_fp_utils.py `_f32_to_floatx_unpacked`: round to nearest even), packed two to a byte
  (`pack_uint4`: element 2j in the low nibble), unpacked here with `kernels.py` `unpack_uint4`.
- Decode: `NVFP4Tensor(qdata, scale, 16, float32, per_tensor_scale=P).dequantize(torch.float32)`:
  `get_hp_scales` gives fl32(P s_b), and each element is fl32(`f4_unpacked_to_f32`(code) fl32(P s_b)).
  (`NVFP4Tensor.to_copy` / `_to_copy` with a dtype only relabels orig_dtype; dequantize is the path.)

Transformer Engine (FORMATS.md section 2) computes S_enc = fl32(2688 / T), s_b =
E4M3(fl32(a fl32(S_enc fl32(1/6)))) with E4M3's subnormals (0 below 2^-10), r = fl32(1 / fl32(s_b
fl32(1 / S_enc))) and decodes with fl32(fl32(s_b T) fl32(1/2688)). `probe()` shows where the two
differ, without qtransit; see its docstring and docs/FINDINGS.md F6.

Codes are qtransit's E2M1 codes (docs/FORMATS.md section 1: sign bit 8, magnitude index 0..7 for
0, 0.5, 1, 1.5, 2, 3, 4, 6), which are torchao's nibbles as they stand. Scales are s_b as binary32 (the
float8_e4m3fn tensor torchao stores, .float()). nvfp4_quantize takes rows whose length is a
multiple of 16: a shard's short last block is padded with zeros (zeros raise no absmax) and the
padding cut from the codes. `nvfp4` takes no conventions (FORMATS.md section 2), so this codec
refuses NaN and inf (raises), as a codec of a format without a `nonfinite` convention must.
"""

import numpy as np

BLOCK = 16


def adapter():
    """(encode, decode) for qtransit.check_codec("nvfp4", ...): encode(x, block, tensor_amax=T),
    decode(codes, scales, offsets, block, tensor_amax=T)."""
    import torch
    from torchao.prototype.mx_formats.kernels import unpack_uint4
    from torchao.prototype.mx_formats.nvfp4_tensor import NVFP4Tensor, per_tensor_amax_to_scale

    def per_tensor_scale(tensor_amax):
        return per_tensor_amax_to_scale(torch.tensor(np.float32(tensor_amax), dtype=torch.float32))

    def encode(x, block, tensor_amax):
        x = np.asarray(x, dtype=np.float32)
        if block != BLOCK:
            raise ValueError(f"torchao's NVFP4 takes blocks of {BLOCK}, not {block}")
        if not np.all(np.isfinite(x)):
            raise ValueError("NaN or inf: refused (nvfp4 declares no nonfinite convention)")
        n = x.size
        blocks = -(-n // BLOCK)
        padded = np.zeros(blocks * BLOCK, np.float32)
        padded[:n] = x
        t = NVFP4Tensor.to_nvfp4(torch.from_numpy(padded).reshape(1, -1), BLOCK,
                                 per_tensor_scale=per_tensor_scale(tensor_amax))
        codes = unpack_uint4(t.qdata.contiguous().view(torch.uint8)).reshape(-1).numpy()[:n].astype(np.int32)
        scales = t.scale.reshape(-1).to(torch.float32).numpy().astype(np.float32)
        return codes, scales

    def decode(codes, scales, offsets, block, tensor_amax):
        codes = np.asarray(codes)
        scales = np.asarray(scales, dtype=np.float32)
        n = codes.size
        padded = np.zeros(scales.size * BLOCK, np.uint8)
        padded[:n] = codes.astype(np.uint8)
        nib = torch.from_numpy(padded).reshape(1, -1)
        qdata = (nib[:, 0::2] | (nib[:, 1::2] << 4)).contiguous()  # pack_uint4's layout
        s_b = torch.from_numpy(scales).to(torch.float8_e4m3fn).reshape(1, -1)  # exact: s_b is an E4M3 value
        t = NVFP4Tensor(qdata, s_b, BLOCK, torch.float32, per_tensor_scale=per_tensor_scale(tensor_amax))
        return t.dequantize(torch.float32).reshape(-1).numpy()[:n].astype(np.float32)

    return encode, decode


# (qtransit format, check_codec keywords): what the adapter is checked against. torchao takes only
# blocks of 16.
CASES = [("nvfp4", {"block_min": 16, "block_max": 16, "block_multiple": 16})]


# ---------------------------------------------------------------------------------------------
# The probe: torchao against Transformer Engine's arithmetic (FORMATS.md section 2), without qtransit.

F32 = np.float32
FLT_MAX = np.finfo(F32).max
_E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])
# Every finite non-negative E4M3 (fn) value, byte order (0x00..0x7E).
_E4M3 = np.array([(b & 7) * 2.0**-9 if b < 8 else (1 + (b & 7) / 8) * 2.0 ** ((b >> 3) - 7) for b in range(0x7F)])


def _e4m3(v):
    """E4M3 (fn) round to nearest even of binary32 values >= 0, saturated at 448 (TE's reference
    clamps, then casts; the kernel's cvt saturates): exact float64 midpoints, ties to the even byte."""
    a = np.asarray(v, F32).astype(np.float64)
    lo = np.clip(np.searchsorted(_E4M3, a, side="right") - 1, 0, _E4M3.size - 1)
    hi = np.minimum(lo + 1, _E4M3.size - 1)
    mid = (_E4M3[lo] + _E4M3[hi]) / 2
    return _E4M3[np.where((a > mid) | ((a == mid) & (lo % 2 == 1)), hi, lo)].astype(F32)


def _e2m1_code(y):
    """qtransit's E2M1 code of binary32 values y: round to nearest even on |y| (exact float64
    midpoints), saturated at 6, sign bit 8 (a -0 keeps it)."""
    a = np.abs(np.asarray(y, F32)).astype(np.float64)
    lo = np.clip(np.searchsorted(_E2M1, a, side="right") - 1, 0, 7)
    hi = np.minimum(lo + 1, 7)
    mid = (_E2M1[lo] + _E2M1[hi]) / 2
    m = np.where(lo == 7, 7, np.where((a > mid) | ((a == mid) & (lo % 2 == 1)), hi, lo))
    return (np.where(np.signbit(y), 8, 0) | m).astype(np.int32)


def te_nvfp4(x, T):
    """Transformer Engine's NVFP4 (1-D, round to nearest even) on blocks x (rows of 16) with tensor
    amax T, written from docs/SOURCES.md section 5's recipe (one binary32 operation a step):
    (s_b per row, codes, decoded)."""
    x, T = np.asarray(x, F32).reshape(-1, BLOCK), F32(T)
    with np.errstate(all="ignore"):
        s_enc = F32(1) if T == 0 else np.minimum(F32(2688) / T, FLT_MAX)
        s_enc = F32(1) if s_enc == 0 else s_enc
        s_b = _e4m3(np.abs(x).max(axis=1) * (s_enc * (F32(1) / F32(6))))
        r = np.minimum(F32(1) / (s_b * (F32(1) / s_enc)), FLT_MAX)
        codes = _e2m1_code(x * r[:, None])
        f = (s_b * T) * (F32(1) / F32(2688))
        value = np.where(codes & 8, -_E2M1[codes & 7], _E2M1[codes & 7]).astype(F32)
        return s_b, codes, value * f[:, None]


def torchao_nvfp4(x, T):
    """torchao 0.18.0's NVFP4 on blocks x (rows of 16) with per_tensor_amax_to_scale(T), through the
    library's to_nvfp4 and dequantize: (s_b per row, codes, decoded)."""
    import torch
    from torchao.prototype.mx_formats.kernels import unpack_uint4
    from torchao.prototype.mx_formats.nvfp4_tensor import NVFP4Tensor, per_tensor_amax_to_scale

    x = np.asarray(x, F32).reshape(-1, BLOCK)
    t = NVFP4Tensor.to_nvfp4(torch.from_numpy(np.ascontiguousarray(x)), BLOCK,
                             per_tensor_scale=per_tensor_amax_to_scale(torch.tensor(F32(T))))
    codes = unpack_uint4(t.qdata.contiguous().view(torch.uint8)).reshape(x.shape).numpy().astype(np.int32)
    return t.scale.float().reshape(-1).numpy(), codes, t.dequantize(torch.float32).numpy()


def _block(*values):
    x = np.zeros(BLOCK, F32)
    x[:len(values)] = values
    return x


# One minimal block for each step where the two differ: (step, T, block). probe() runs them.
REPRODUCERS = [
    ("block scale rounding", 2688.0, _block(np.nextafter(F32(7.125), F32(0)))),  # 7.125 - 1 ulp
    ("block scale floor 2^-6", 2688.0, _block(0.046875, 0.00390625)),
    ("element multiplier", 6.0, _block(6.0, 0.75, 1.75, 3.5)),
    ("decode factor", 10.0, _block(10.0, 1.0)),
    ("zero tensor amax", 0.0, _block(0.0)),  # an all-zero tensor; not in the sweep
]


def _ulps(a, k):
    for _ in range(abs(k)):
        a = np.nextafter(a, F32(np.inf) if k > 0 else F32(0))
    return a


def _sweep_blocks(T):
    """Blocks a boundary hunt would build for tensor amax T: the absmax within 2 ulps of 6 m T / 2688
    for every midpoint m of E4M3's grid (where s_b changes), the tensor's own block (absmax T, s_b
    448) holding the E2M1 ties t T / 6 and 1 ulp either side (where a code changes), and ramps whose
    absmax is T 2^-k, k = 8..20 (E4M3's subnormal scales)."""
    T = F32(T)
    rows = []
    for m in (_E4M3[:-1] + _E4M3[1:]) / 2:
        a0 = F32(6 * m * float(T) / 2688)
        for k in range(-2, 3):
            a = _ulps(a0, k)
            if 0 < a <= T:
                rows.append(_block(a, a / F32(3), a / F32(7)))
    ties = [_ulps(F32(t * float(T) / 6), k) for t in (0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0) for k in (-1, 0, 1)]
    for i in range(0, len(ties), BLOCK - 1):
        rows.append(_block(T, *ties[i:i + BLOCK - 1]))
    for k in range(8, 21):
        a = F32(float(T) * 2.0**-k)
        rows.append((a * np.arange(BLOCK, dtype=F32) / F32(BLOCK - 1)).astype(F32))
    return np.stack(rows)


def _step(T, x, ao, te):
    """Which step makes a differing block differ: the first of scale (floor or rounding), codes,
    decoded values."""
    if np.isnan(ao[0]):
        return "zero tensor amax"
    if ao[0] != te[0]:
        return "block scale floor 2^-6" if te[0] < 2.0**-6 else "block scale rounding"
    if np.any(ao[1] != te[1]):
        return "element multiplier"
    return "decode factor"


def probe():
    """Where torchao's NVFP4 differs from Transformer Engine's arithmetic, without qtransit: the
    REPRODUCERS, and a sweep of _sweep_blocks over T = 2688 (S_enc = 1), 1..64 and 2688 2^(j/3),
    j = -60..60. Returns {step: {"blocks": differing blocks, "elements": differing decoded values,
    "first": (T, block, torchao (s_b, decoded), TE (s_b, decoded))}}, "total" (blocks swept) and
    "reproducers" [(step, T, block, torchao (s_b, decoded), TE (s_b, decoded), the step found)].

    The steps (torchao 0.18.0 nvfp4_tensor.py `nvfp4_quantize`, `per_tensor_amax_to_scale`,
    `NVFP4Tensor.dequantize` / `get_hp_scales`; TE as FORMATS.md section 2), with P = fl32(T / 2688),
    S_enc = fl32(2688 / T):
    - block scale rounding: torchao rounds fl32(fl32(a / 6) / P) to E4M3, TE fl32(a fl32(S_enc
      fl32(1/6))); the two binary32 values differ by an ulp or so, and where they straddle an E4M3
      midpoint s_b differs by one E4M3 step (every element of the block with it). At T = 2688 (P =
      S_enc = 1) only absmax 6 (19/16) 2^k - 1 ulp: fl32(1/6) is 1/6 (1 + 2^-25), so TE's product
      rounds up onto the midpoint (19/16) 2^k and ties to even, above; the exact a/6 is below it.
    - block scale floor 2^-6: torchao clamps the scale to E4M3_EPS = finfo(float8_e4m3fn).tiny = 2^-6
      (E4M3's smallest normal) before the cast: a block whose TE scale is an E4M3 subnormal (or 0:
      absmax below about T / 28672) is quantized on the coarser grid of 2^-6, and its small elements
      go to 0; an all-zero block stores 2^-6, not 0.
    - element multiplier: torchao multiplies by fl32(fl32(1 / P) / s_b), TE by fl32(1 / fl32(s_b
      fl32(1 / S_enc))); an ulp apart for about 40% of (T, s_b), which moves an element at (or within an
      ulp of) an E2M1 tie to the other code. T = 6: 1/P = 447.99997, so 0.75, 1.75, 3.5 scale to just
      under the tie and go down (0.5, 1.5, 3), where TE's multiplier is exactly 1 and they tie to even (up).
    - decode factor: torchao decodes with fl32(P s_b), TE with fl32(fl32(s_b T) fl32(1/2688)); an
      ulp apart for about 38% of (T, s_b): every nonzero element of such a block decodes an ulp or
      two apart. Equal at T = 2688.
    - zero tensor amax (an extreme, the first reproducer only): per_tensor_amax_to_scale(0) = 0, and
      nvfp4_quantize divides by it: 0 / 0 is NaN, every block scale is NaN and every element decodes
      to NaN. TE takes S_enc = 1 there (s_b = 0, zeros). torchao's dynamic per-tensor scale
      (`use_dynamic_per_tensor_scale`, nvfp4_tensor.py `nvfp4_linear`, `nvfp4_mm`) takes T from the
      activation, so an all-zero activation gives NaN.
    """
    out = {"total": 0, "reproducers": []}
    for step, T, x in REPRODUCERS:
        ao, te = torchao_nvfp4(x, T), te_nvfp4(x, T)
        same = ao[0][0] == te[0][0] and np.array_equal(ao[2], te[2])
        found = "none" if same else _step(T, x, (ao[0][0], ao[1][0]), (te[0][0], te[1][0]))
        shown = (x != 0) | (np.arange(BLOCK) == 0)  # the nonzero elements (the first one always)
        out["reproducers"].append((step, T, x[shown].tolist(), (float(ao[0][0]), ao[2][0][shown].tolist()),
                                   (float(te[0][0]), te[2][0][shown].tolist()), found))
    for T in [2688.0] + [float(t) for t in range(1, 65)] + [2688.0 * 2.0 ** (j / 3) for j in range(-60, 61) if j]:
        x = _sweep_blocks(T)
        ao, te = torchao_nvfp4(x, T), te_nvfp4(x, T)
        out["total"] += x.shape[0]
        for i in range(x.shape[0]):
            if ao[0][i] == te[0][i] and np.array_equal(ao[2][i], te[2][i]):
                continue
            step = _step(T, x[i], (ao[0][i], ao[1][i]), (te[0][i], te[1][i]))
            c = out.setdefault(step, {"blocks": 0, "elements": 0, "first": None})
            c["blocks"] += 1
            c["elements"] += int(np.sum(ao[2][i] != te[2][i]))
            if c["first"] is None:
                nz = x[i] != 0
                c["first"] = (float(F32(T)), x[i][nz].tolist(), (float(ao[0][i]), ao[2][i][nz].tolist()),
                              (float(te[0][i]), te[2][i][nz].tolist()))
    return out
