"""qtransit from Python: the numerics checks of quantized collectives, one import away.

Every function calls the same C++ library as the `qtransit` command and returns a result object
with the numbers of the command's JSON as attributes (``.passed``, ``.first_failure``,
``.to_json()``, and where the command writes them ``.write_reports(dir)``):

    qtransit.formats()                                   the built-in formats
    qtransit.quantize(fmt, x)                            qtransit's kernel, checked against the reference
    qtransit.verify_quantize(fmt, x, decoded, ...)       a quantization done elsewhere, judged
    qtransit.simulate(path, ranks=..., elements=...)     a collective path, every output checked exactly
    qtransit.verify_collective(path, inputs, outputs)    a collective run elsewhere, judged
    qtransit.check(config)                               the numerics gate
    qtransit.check_codec(fmt, encode, decode)            the gate with a quantizer written in Python
    qtransit.validate_format("my.toml")                  a declared format: every property and path
    qtransit.show_format(fmt)                            a format's TOML declaration
    qtransit.paths(), qtransit.show_path(path)           the paths as declarations (docs/PATHS.md)
    qtransit.survey(formats=..., dists=...)              every format over every input distribution
    qtransit.info()                                      version, build features, GPUs visible
    qtransit.strategies.blocks(...)                      Hypothesis strategies for binary32 blocks
    qtransit.strategies.boundary_blocks(...)             ... and for the blocks at a format's boundaries
    qtransit.layouts.quickreduce(ranks, elements)        QuickReduce's layout as a permutation of qtransit's

Arrays: numpy arrays or DLPack tensors of float32, float16 or bfloat16 (ml_dtypes.bfloat16), any
shape; CUDA tensors are copied to the host. A C-contiguous float32 array is read without a copy;
others are converted or copied first (qtransit._arrays says exactly when). Errors in what a caller
gives raise ValueError with the command's one-line message (an integer keyword out of range names
the keyword; a non-integer there is a TypeError); a failed check raises CheckFailed only with
raise_on_failure=True. docs/PYTHON.md has the whole API.
"""

import json
import os

from . import _args, _arrays, _codec, _toml
from ._qtransit import __version__
from . import _qtransit as _native
from ._results import (CheckFailed, FormatInfo, FormatValidationResult, GateResult, QuantizeResult, Record, Result,
                       SimulateResult, SurveyResult, VerifyCollectiveResult, VerifyQuantizeResult)

__all__ = ["formats", "quantize", "verify_quantize", "simulate", "verify_collective", "check", "check_codec",
           "validate_format", "show_format", "paths", "show_path", "survey", "info",
           "CheckFailed", "Record", "Result", "__version__"]


def formats(block=32):
    """Every built-in format, as `qtransit formats --json` lists them (at `block`)."""
    return [FormatInfo(r) for r in json.loads(_native.formats_json(_args.integer(block, "block", lo=1)))["formats"]]


def quantize(fmt, x, *, block=None, nonfinite="error", rounding="nearest", seed=0, raise_on_failure=False):
    """x through qtransit's production kernel for `fmt` (a name or a declaration .toml), checked
    bit for bit against the reference and element by element against the format's bound in exact
    arithmetic, as `qtransit quantize --json`. block: None for the format's own (nvfp4's 16, a
    tile's area), else 32. A tiled format (nvfp4-2d, fp8-e4m3-128x128) quantizes x as [rows, last
    dimension] in its tiles: codes and decoded come back in x's shape, scales in tile order.
    nonfinite: "error" (a NaN or inf is a ValueError naming its index) or "propagate" (its block is
    poisoned). rounding: "nearest" or "stochastic" (the format's -sr twin keyed by seed)."""
    a, shape = _arrays.as_f32(x, "x")
    blk, sd = _args.block(block), _args.seed(seed)
    r = _native.quantize(str(fmt), a.reshape(-1), shape, blk, str(nonfinite), str(rounding), sd)
    return QuantizeResult(json.loads(r["json"]), r, shape)._raise_if(raise_on_failure)


def verify_quantize(fmt, x, decoded, *, codes=None, wire=None, scales=None, offsets=None, block=None, shard=0,
                    conformance="exact", raise_on_failure=False):
    """A quantization computed elsewhere (your kernel's output) against the reference, as
    `qtransit verify quantize --json`: decoded (x's shape) is required; codes (one integer per
    element) or wire (the packed bytes, codes.bin's layout), scales and offsets are compared when
    given. Blocks restart every `shard` elements (0: x is one shard). conformance: "exact" (every
    given value bit for bit) or "bounded" (every element within the format's bound)."""
    blk, shd = _args.block(block), _args.integer(shard, "shard", alt=" (0: x is one shard)")
    xa, xshape = _arrays.as_f32(x, "x")
    da, dshape = _arrays.as_f32(decoded, "decoded")
    if dshape != xshape:
        raise ValueError(f"decoded: shape {dshape}, but x is {xshape} (the decoded values have the input's shape)")
    if codes is not None and wire is not None:
        raise ValueError("codes and wire: give one (one code per element, or the packed bytes)")
    c = None if codes is None else _arrays.as_codes(codes, "codes")
    w = None if wire is None else bytes(wire)
    s = None if scales is None else _arrays.as_f32(scales, "scales")[0].reshape(-1)
    o = None if offsets is None else _arrays.as_f32(offsets, "offsets")[0].reshape(-1)
    r = _native.verify_quantize(str(fmt), xa.reshape(-1), xshape, da.reshape(-1), c, w, s, o, blk, shd,
                                str(conformance))
    return VerifyQuantizeResult(json.loads(r["json"]), r["report"], r["text"])._raise_if(raise_on_failure)


def _list(v):
    return [v] if isinstance(v, (str, int)) else list(v)


def simulate(path, *, ranks=None, elements=0, format="", inputs=None, ranks_per_node=0, block=None, dist="normal", seed=1,
             accum="fp32", divide="none", rotation="each-hop", rounding="nearest", threads=0, keep_outputs=False,
             codec=None, codec_name="python-codec", dtype="float32", raise_on_failure=False):
    """One or more collective paths (a name, a list, or "all") on the in-process transport at one or
    more N, every output checked exactly, as `qtransit simulate --json`. inputs: an [N, M] array
    (row r: rank r's) in place of the generator `dist`; then ranks and elements may be left out.
    format: one name, or "A,B" (one per stage). block: None for the format's fixed block (flashinfer-fp8's
    256, the MX formats' 32), else 32. keep_outputs: the one run's output rows in .outputs.
    codec: (encode, decode), a quantizer written in Python as check_codec takes it, running every
    quantization and decode of the paths (`simulate --codec`); format is then its format, dtype its
    input and output type."""
    names = [str(p) for p in _list(path)]
    if not names:
        raise ValueError("path: no path given (a name, a list of names, or \"all\"; qtransit.paths() lists them)")
    ns = _args.integers(ranks, "ranks") if ranks is not None else []
    m = _args.integer(0 if elements is None else elements, "elements", alt=" (0 or None: the columns of inputs)")
    if inputs is None and (not ns or m == 0):
        raise ValueError("ranks and elements (per rank): both are needed without inputs=")
    rpn = _args.integer(ranks_per_node, "ranks_per_node", alt=" (0: 8 when it divides N, else N)")
    blk = _args.block(block, own="the format's fixed block, else 32")
    sd, th = _args.seed(seed), _args.integer(threads, "threads", alt=" (0: every core)")
    arr = None
    if inputs is not None:
        arr, _ = _arrays.as_f32(inputs, "inputs", ndim=2)
    enc = dec = None
    if codec is not None:
        if not isinstance(codec, (tuple, list)) or len(codec) != 2:
            raise ValueError("codec: (encode, decode), the callables check_codec takes")
        if not format:
            raise ValueError("codec: name its format with format=")
        enc, dec = _codec.adapt(codec[0], codec[1], "cpu", str(dtype))
    r = _native.simulate(names, ns, rpn, m, str(format or ""), blk, str(dist), sd, str(accum),
                         str(divide), str(rotation), str(rounding), arr, th, bool(keep_outputs), enc, dec, str(codec_name),
                         str(dtype))
    return SimulateResult(json.loads(r["json"]), r["outputs"], r["text"])._raise_if(raise_on_failure)


def verify_collective(path, inputs, outputs, *, format=None, ranks_per_node=0, block=None, accum="fp32", target="sum",
                      conformance=None, ring_order=None, raise_on_failure=False):
    """A collective run elsewhere judged against `path` in exact arithmetic, as `qtransit verify
    collective --json`: inputs [N, M] (row r: what rank r contributed), outputs [N, S] for a
    reduce-scatter (row c: what rank c holds of chunk c) or [N, M]. Outputs of float16 or bfloat16
    are judged with their final rounding allowed for. conformance: exact, same-events or bounded
    (None: the strongest the path allows). target: sum or mean. format: the run's format; None
    when `path` is a declaration with its own wire (flashinfer-fp8-2shot)."""
    rpn = _args.integer(ranks_per_node, "ranks_per_node", alt=" (0: 8 when it divides N, else N)")
    blk = _args.block(block)
    order = [_args.integer(v, f"ring_order[{i}]") for i, v in enumerate(ring_order or [])]
    ia, _ = _arrays.as_f32(inputs, "inputs", ndim=2)
    on = _arrays.as_numpy(outputs, "outputs")
    oa, _ = _arrays.as_f32(on, "outputs", ndim=2)
    r = _native.verify_collective(str(path), str(format or ""), ia, oa, _arrays.dtype_name(on), rpn, blk, str(accum),
                                  str(target), conformance or "", order)
    return VerifyCollectiveResult(json.loads(r["json"]), r["report"], r["text"])._raise_if(raise_on_failure)


def _config(config):
    """(TOML text, source name) for check's config: None, a dict, or a TOML file's path."""
    if config is None:
        return "", ""
    if isinstance(config, dict):
        return _toml.dumps(config), "config (a dict)"
    if isinstance(config, (str, os.PathLike)):
        path = os.fspath(config)
        if not os.path.exists(path):
            raise ValueError(f"{path}: no such file")
        return "", path
    raise ValueError(f"config: a {type(config).__name__}; give None (the default gate), a dict or a TOML file's path")


def check(config=None, *, quick=False, conformance=None, codec=None, raise_on_failure=False):
    """The numerics gate (`qtransit check`): config None (the default gate), a dict with the config
    file's keys ({"gate": {...}, "budget": [...], "scaling": [...]}), or a TOML file's path. quick:
    the quick tier. codec: a codec plugin library (.so) in place of qtransit's kernels."""
    text, source = _config(config)
    rep = _native.check(text, source, bool(quick), conformance or "", os.fspath(codec) if codec else "")
    return GateResult(rep)._raise_if(raise_on_failure)


def check_codec(fmt, encode, decode, *, name="python-codec", config=None, quick=True, conformance="exact", device="cpu",
                dtype="float32", raise_on_failure=False, block_min=1, block_max=0, block_multiple=1):
    """The gate with a quantizer written in Python as the codec of `fmt`: its encode and decode run
    wherever the gate runs qtransit's kernels (the kernel-vs-reference checks over edge cases and
    random blocks, every path's Q and D), judged as a codec plugin is (docs/PLUGIN.md). The verdicts
    name the first difference (element, block, both values, both codes).

        encode(x: float32[n], block) -> (codes: int[n], scales: float32[blocks][, offsets])
        decode(codes: int32[n], scales, offsets or None, block) -> float32[n]

    One call per shard (blocks restart at every shard; the last block may be short). config: as
    check()'s (None: the default gate on fmt); quick (the default): its quick tier. device="cuda":
    the callables get torch CUDA tensors; what they return may be CUDA tensors too. A callable that
    raises, or returns the wrong count or dtype, fails the kernel-vs-reference verdict, which names it.
    dtype="bfloat16" (or "float16"): the quantizer's input and output type, as a training step calls
    it. Every input is a value of that type (the gate rounds its inputs to it, as for a plugin whose
    input_type is bfloat16), encode gets ml_dtypes.bfloat16 (np.float16) arrays, and decode's values
    must be values of that type; they are compared with the reference's, rounded to it.
    block_min, block_max (0: none), block_multiple: the block sizes the quantizer takes, as a
    plugin's descriptor declares them; the gate checks it at those only (a block it refuses
    otherwise is a failure). A format declared with [conventions] (docs/FORMATS.md section 10)
    sets the library's choices at the extremes apart: reported as convention mismatches.
    A format with a tensor amax (nvfp4) calls both callables with the keyword tensor_amax=T (the
    binary32 amax its block scales are under: the declared one in the block checks, the tensor's in
    the paths), and scales are the E4M3 block scales s_b as float32 values (448.0, 0.5, ...), what
    Transformer Engine and torchao store. A tiled format (nvfp4-2d, fp8-e4m3-128x128) hands encode
    its tiles as blocks of the tile's area, in tile order, each tile row-major (docs/PLUGIN.md)."""
    bmin = _args.integer(block_min, "block_min", lo=1)
    bmax = _args.integer(block_max, "block_max", alt=" (0: none)")
    bmul = _args.integer(block_multiple, "block_multiple", lo=1)
    enc, dec = _codec.adapt(encode, decode, device, str(dtype))
    text, source = _config(config)
    rep = _native.check_codec(str(fmt), enc, dec, str(name), text, source, bool(quick), str(conformance), str(dtype),
                              bmin, bmax, bmul)
    return GateResult(rep)._raise_if(raise_on_failure)


def validate_format(file=None, *, codec=None, quick=False, seed=1, raise_on_failure=False):
    """A declared format (a .toml file, docs/FORMATS.md section 8) through every generic property
    and every path next to built-in formats, as `qtransit formats validate FILE.toml`: `.passed`
    when every promised property and bound holds, `.summary()` the command's text (the properties
    and the comparison table), `.write_reports(dir)` its files (declaration.toml too). codec: a codec
    plugin library (.so) of the format, run as the kernel (file may then be left out). quick: fewer
    blocks, ranks and elements (seconds)."""
    if file is None and codec is None:
        raise ValueError("validate_format takes a declaration file (FILE.toml), or codec= a plugin library (.so)")
    v = _native.validate_format(os.fspath(file) if file is not None else "", bool(quick), _args.seed(seed),
                                os.fspath(codec) if codec is not None else "")
    return FormatValidationResult(v)._raise_if(raise_on_failure)


def paths():
    """Every built-in path as its declaration (docs/PATHS.md), as `qtransit paths --json` lists them:
    dicts with name, schedule, collective, exchange, wire, requantize, add, stored, divide, rotation,
    saturates and source (None where the run's option applies)."""
    return json.loads(_native.paths_json())["paths"]


def show_path(path):
    """The TOML declaration of a path (a built-in's name), or every declaration of a .toml file
    (registered, so that simulate can name them), as `qtransit paths show`."""
    return _native.show_path(os.fspath(path))


def show_format(fmt):
    """The TOML declaration of a format (a built-in's name or a .toml file), as `qtransit formats
    show`: it parses back to the same format."""
    return _native.show_format(os.fspath(fmt))


def survey(formats=None, dists=None, *, elements=1 << 16, block=None, seed=1, raise_on_failure=False):
    """Every format (default: every built-in; with a `block`, every built-in that takes it) over
    every input distribution (default: all), each case's kernel checked against the reference bit
    for bit and every element's error against its bound, as `qtransit survey --json`. `block`
    None: 32, and a fixed-block format (nvfp4, a 2-D tile) at its own."""
    m = _args.integer(elements, "elements", lo=1)
    blk = _args.block(block, own="32, and a fixed-block format at its own")
    r = _native.survey([str(f) for f in _list(formats or [])], [str(d) for d in _list(dists or [])], m, blk, _args.seed(seed))
    return SurveyResult(json.loads(r["json"]), r["markdown"])._raise_if(raise_on_failure)


def info():
    """Version, build features (CPU variant, CUDA archs, NCCL) and the GPUs visible now, as
    `qtransit info --json` (the allocator is the interpreter's)."""
    return Record(json.loads(_native.info_json()))


from . import strategies  # noqa: E402  (needs the names above; Hypothesis is imported only when used)
from . import layouts  # noqa: E402
