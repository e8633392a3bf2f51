"""How qtransit takes arrays: numpy arrays and DLPack tensors, as binary32.

- dtypes: float32 as it is; float16 and bfloat16 (ml_dtypes.bfloat16, or a DLPack tensor's bf16)
  widened to float32, which is exact. Any other dtype is refused (a float64 array would have to be
  rounded first, and qtransit never rounds a user's values silently).
- layout: a C-contiguous float32 array is passed to the checks without a copy. A non-contiguous
  one (a transposed or strided view) is copied into C order first; the values checked are the
  same, element for element in C order.
- devices: a CPU DLPack tensor (a torch CPU tensor, say) is read through DLPack, without a copy
  where numpy can view it. A CUDA tensor is copied to the host (``.cpu()`` or ``.get()``) and
  checked there. torch is never imported by qtransit.
"""

import numpy as np

_DLPACK_CPU = 1
_DLPACK_CUDA = (2, 3, 13)  # CUDA, CUDA host, CUDA managed
_DLPACK_NAMES = {2: "cuda", 3: "cuda-host", 4: "opencl", 7: "vulkan", 8: "metal", 9: "vpi", 10: "rocm", 13: "cuda-managed", 14: "oneapi"}


def _bfloat16():
    try:
        import ml_dtypes  # noqa: F401

        return np.dtype(ml_dtypes.bfloat16)
    except ImportError:
        return None


def _to_host(x, name):
    """A DLPack tensor on a GPU, copied to the host; anything else as it is."""
    if isinstance(x, np.ndarray) or not hasattr(x, "__dlpack_device__"):
        return x
    dev = x.__dlpack_device__()[0]
    if dev == _DLPACK_CPU:
        return x
    if dev in _DLPACK_CUDA:
        for method in ("cpu", "get"):  # torch, cupy
            f = getattr(x, method, None)
            if callable(f):
                return f()
        raise ValueError(f"{name}: a CUDA tensor without .cpu() or .get(): copy it to the host first")
    raise ValueError(f"{name}: a tensor on {_DLPACK_NAMES.get(dev, 'device type %d' % dev)}: qtransit reads CPU and CUDA tensors")


def _torch_bf16_to_numpy(x):
    """A torch bfloat16 tensor's bits as an ml_dtypes.bfloat16 array (numpy has no bf16 for DLPack)."""
    bf16 = _bfloat16()
    if bf16 is None:
        raise ValueError("a bfloat16 tensor needs ml_dtypes (pip install ml_dtypes) to be read")
    import torch  # only reached with a torch tensor in hand

    return x.detach().contiguous().view(torch.int16).numpy().view(bf16)


def as_numpy(x, name):
    """x as a numpy array of float32, float16 or bfloat16 (any shape), copied only where needed."""
    x = _to_host(x, name)
    if isinstance(x, np.ndarray):
        a = x
    elif hasattr(x, "__dlpack__"):
        if "bfloat16" in str(getattr(x, "dtype", "")) and type(x).__module__.startswith("torch"):
            a = _torch_bf16_to_numpy(x)
        else:
            try:
                a = np.from_dlpack(x)
            except (TypeError, BufferError, RuntimeError) as e:
                raise ValueError(f"{name}: cannot read this DLPack tensor ({e})") from None
    elif isinstance(x, (list, tuple)) or np.isscalar(x):
        raise ValueError(f"{name}: a {type(x).__name__}; give a numpy array (float32, float16 or ml_dtypes.bfloat16) "
                         "or a DLPack tensor, so that no value is rounded on the way in")
    else:
        raise ValueError(f"{name}: a {type(x).__name__} is not an array (numpy, or any object with __dlpack__)")
    dt = a.dtype
    bf16 = _bfloat16()
    if dt != np.float32 and dt != np.float16 and (bf16 is None or dt != bf16):
        raise ValueError(f"{name}: dtype {dt}: qtransit takes binary32, binary16 or bfloat16 "
                         "(float32, float16, ml_dtypes.bfloat16); convert it yourself, knowing how it rounds")
    return a


def dtype_name(a):
    """"fp32", "fp16" or "bf16" for an array as_numpy() returned."""
    if a.dtype == np.float32:
        return "fp32"
    if a.dtype == np.float16:
        return "fp16"
    return "bf16"


def as_f32(x, name, ndim=None):
    """x widened to C-contiguous float32 (no copy for a C-contiguous float32 array), and its shape."""
    a = as_numpy(x, name)
    if ndim is not None and a.ndim != ndim:
        raise ValueError(f"{name}: {a.ndim} dimensions {list(a.shape)}, expected {ndim}"
                         + (" ([N, M]: row r is rank r's)" if ndim == 2 else ""))
    shape = list(a.shape)
    if a.dtype != np.float32:
        a = a.astype(np.float32)  # exact for binary16 and bfloat16
    return np.ascontiguousarray(a), shape


def as_codes(x, name):
    """Integer codes as C-contiguous int32 (refused when a value does not fit)."""
    x = _to_host(x, name)
    a = np.from_dlpack(x) if not isinstance(x, np.ndarray) and hasattr(x, "__dlpack__") else x
    if not isinstance(a, np.ndarray):
        raise ValueError(f"{name}: a {type(x).__name__} is not an array")
    if not np.issubdtype(a.dtype, np.integer):
        raise ValueError(f"{name}: dtype {a.dtype}: codes are integers (one per element)")
    if a.size and (a.min() < -(2**31) or a.max() >= 2**31):
        raise ValueError(f"{name}: a code outside int32")
    return np.ascontiguousarray(a.reshape(-1), dtype=np.int32)
