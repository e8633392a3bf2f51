// qtransit._qtransit: the Python module's native half (nanobind). Every function here calls the
// same library code as the qtransit command (gate/commands.hpp: each command's request and its validate(), qtransit::gate's
// checks and JSON views), so that Python and the CLI give the same numbers, verdicts and messages.
// Arrays arrive as C-contiguous binary32 (python/qtransit/_arrays.py converts and documents the
// rest); results go back as JSON text, numpy arrays and Report objects (the gate's report model).
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <cmath>
#include <chrono>
#include <cstring>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "qtransit/gate/commands.hpp"
#include "qtransit/codec_plugin.h"
#include "qtransit/common/decl_toml.hpp"
#include "qtransit/gate/boundaries.hpp"
#include "qtransit/kernels/fp16.hpp"
#include "qtransit/reports/numbers.hpp"
#include "qtransit/gate/codec_check.hpp"
#include "qtransit/gate/gate.hpp"
#include "qtransit/gate/validate.hpp"
#include "qtransit/gate/survey.hpp"
#include "qtransit/gate/verify.hpp"
#include "qtransit/gate/verify_run.hpp"
#include "qtransit/gate/views.hpp"
#include "qtransit/kernels/plugin.hpp"
#include "qtransit/reports/files.hpp"
#include "qtransit/reports/gate_result.hpp"
#include "qtransit/version.hpp"

namespace nb = nanobind;
namespace qt = qtransit;

namespace {

using F32 = nb::ndarray<const float, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using F32x2 = nb::ndarray<const float, nb::ndim<2>, nb::c_contig, nb::device::cpu>;
using I32 = nb::ndarray<const int32_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

// A caller's mistake is a ValueError with the command's line. No function here takes a codec whose
// failure could come back as an error (check and check_codec turn a codec's failure into a failed
// verdict, as `qtransit check --codec` does); were one to, it is not the caller's mistake, so it is a
// RuntimeError rather than a ValueError.
[[noreturn]] void raise(const qt::Error& e) {
    if (e.code == qt::ErrorCode::kCodec) throw std::runtime_error(qt::one_line(e.message));
    throw nb::value_error(qt::one_line(e.message).c_str());
}
template <class T>
T take(qt::Result<T> r) {
    if (!r) raise(r.error());
    return std::move(*r);
}
void take(const qt::Status& st) {
    if (!st) raise(st.error());
}

template <class T>
nb::ndarray<nb::numpy, T> to_numpy(std::vector<T> v, std::vector<size_t> shape) {
    auto* owned = new std::vector<T>(std::move(v));
    nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
    return nb::ndarray<nb::numpy, T>(owned->data(), shape.size(), shape.data(), owner);
}
template <class T>
nb::ndarray<nb::numpy, T> to_numpy(std::vector<T> v) {
    const size_t n = v.size();
    return to_numpy(std::move(v), {n});
}

std::span<const float> span_of(const F32& a) { return {a.data(), a.shape(0)}; }

// The gate's report model behind a Python result: its JSON, its text summary, its files.
struct Report {
    qt::reports::GateResult r;
    std::string json() const { return qt::reports::to_json(r).dump(); }
    std::string summary() const { return qt::reports::summary_text(r); }
    void write(const std::string& dir) const { take(qt::reports::write_reports(r, dir)); }
    bool passed() const { return r.passed(); }
};

// ---- a codec written in Python (check_codec) -------------------------------------------------------
// The descriptor of docs/PLUGIN.md filled in with two trampolines that call the Python callables
// (python/qtransit/_codec.py wraps the user's encode and decode into these two):
//   encode(x: float32[elements], block, shard, tensor_amax) -> (codes: int32[elements], scales: float32[blocks],
//                                                                offsets: float32[blocks] or None)
//   decode(codes: int32[elements], scales, offsets or None, block, shard, tensor_amax) -> float32[elements]
// tensor_amax: T for a format with a tensor amax (nvfp4; scales are then E4M3 block scales s_b), else None.
// one byte per code (QTRANSIT_PACKING_BYTE_PER_CODE), scales in order, binary32 in and out.
struct PyCodec {
    nb::object encode, decode;
    std::string name, format_name, format_toml;
    qt::FormatSpec format;
    qtransit_codec_v1_t desc{};
};

int64_t blocks_of(int64_t elements, int64_t block, int64_t shard) { return (elements / shard) * ((shard + block - 1) / block); }

int fail_into(char* err, size_t err_len, const std::string& m) {
    if (err && err_len) std::snprintf(err, err_len, "%s", m.c_str());
    return 1;
}

// "RuntimeError: my kernel broke": the exception's type and text, on one line (no traceback).
std::string python_error_line(nb::python_error& e) {
    std::string type = nb::type_name(e.type()).c_str();
    std::string text = nb::str(e.value()).c_str();
    return type + (text.empty() ? "" : ": " + text);
}

int py_encode(void* state, const qtransit_encode_args* a, char* err, size_t err_len) {
    auto* c = static_cast<PyCodec*>(state);
    nb::gil_scoped_acquire gil;
    try {
        // The input as binary32 values (a bfloat16 or binary16 input widened exactly); the Python
        // adapter hands the user's encode an array of the codec's dtype.
        std::vector<float> x(static_cast<size_t>(a->elements));
        if (c->desc.input_type == QTRANSIT_BINARY32) {
            if (a->elements > 0) std::memcpy(x.data(), a->x, static_cast<size_t>(a->elements) * sizeof(float));
        } else {
            const auto* h = static_cast<const uint16_t*>(a->x);
            for (int64_t i = 0; i < a->elements; ++i)
                x[static_cast<size_t>(i)] = c->desc.input_type == QTRANSIT_BFLOAT16 ? qt::kernels::bf16_bits_to_f32(h[i])
                                                                                    : qt::kernels::f16_bits_to_f32(h[i]);
        }
        // A tensor amax (nvfp4) is handed on when struct_size covers it; None for other formats.
        nb::object t_amax = nb::none();
        if (c->format.takes_tensor_amax() && a->struct_size >= offsetof(qtransit_encode_args, tensor_amax) + sizeof(float))
            t_amax = nb::float_(a->tensor_amax);
        nb::object r = c->encode(to_numpy(std::move(x)), a->block, a->shard, t_amax);
        auto t = nb::cast<nb::tuple>(r);
        auto codes = nb::cast<I32>(t[0]);
        auto scales = nb::cast<F32>(t[1]);
        const int64_t blocks = blocks_of(a->elements, a->block, a->shard);
        if (static_cast<int64_t>(codes.shape(0)) != a->elements || static_cast<int64_t>(scales.shape(0)) != blocks)
            return fail_into(err, err_len, "encode returned " + std::to_string(codes.shape(0)) + " codes and " + std::to_string(scales.shape(0)) +
                                               " scales for " + std::to_string(a->elements) + " elements in " + std::to_string(blocks) + " blocks");
        const int32_t lo = c->format.code_min(), hi = c->format.code_max();
        for (int64_t i = 0; i < a->elements; ++i) {
            const int32_t q = codes.data()[i];
            if (q < lo || q > hi || q < -128 || q > 255)
                return fail_into(err, err_len, "encode returned code " + std::to_string(q) + " at element " + std::to_string(a->index_base + i) +
                                                   ": " + c->format.name() + "'s codes are " + std::to_string(lo) + ".." + std::to_string(hi));
            a->codes[i] = static_cast<uint8_t>(q);
        }
        std::memcpy(a->scales, scales.data(), static_cast<size_t>(blocks) * sizeof(float));
        if (a->offsets) {
            if (t.size() < 3 || t[2].is_none()) return fail_into(err, err_len, "encode returned no offsets; " + c->format.name() + " has one per block");
            auto offs = nb::cast<F32>(t[2]);
            if (static_cast<int64_t>(offs.shape(0)) != blocks)
                return fail_into(err, err_len, "encode returned " + std::to_string(offs.shape(0)) + " offsets for " + std::to_string(blocks) + " blocks");
            std::memcpy(a->offsets, offs.data(), static_cast<size_t>(blocks) * sizeof(float));
        }
        return 0;
    } catch (nb::python_error& e) {
        return fail_into(err, err_len, "encode raised " + python_error_line(e));
    } catch (const std::exception& e) {
        return fail_into(err, err_len, std::string("encode: ") + e.what());
    }
}

int py_decode(void* state, const qtransit_decode_args* a, char* err, size_t err_len) {
    auto* c = static_cast<PyCodec*>(state);
    nb::gil_scoped_acquire gil;
    try {
        const int64_t blocks = blocks_of(a->elements, a->block, a->shard);
        const bool is_signed = c->format.code_min() < 0;
        std::vector<int32_t> codes(static_cast<size_t>(a->elements));
        for (int64_t i = 0; i < a->elements; ++i)
            codes[static_cast<size_t>(i)] = is_signed ? static_cast<int8_t>(a->codes[i]) : a->codes[i];
        std::vector<float> scales(a->scales, a->scales + blocks);
        nb::object offsets = nb::none();
        if (a->offsets) offsets = nb::cast(to_numpy(std::vector<float>(a->offsets, a->offsets + blocks)));
        nb::object t_amax = nb::none();
        if (c->format.takes_tensor_amax() && a->struct_size >= offsetof(qtransit_decode_args, tensor_amax) + sizeof(float))
            t_amax = nb::float_(a->tensor_amax);
        nb::object r = c->decode(to_numpy(std::move(codes)), to_numpy(std::move(scales)), offsets, a->block, a->shard, t_amax);
        auto out = nb::cast<F32>(r);
        if (static_cast<int64_t>(out.shape(0)) != a->elements)
            return fail_into(err, err_len, "decode returned " + std::to_string(out.shape(0)) + " values for " + std::to_string(a->elements) + " elements");
        if (c->desc.output_type == QTRANSIT_BINARY32) {
            if (a->elements > 0) std::memcpy(a->out, out.data(), static_cast<size_t>(a->elements) * sizeof(float));
            return 0;
        }
        // A bfloat16 or binary16 codec's decoded values, as that type's bits: each must be one of its
        // values (the adapter widened them exactly), never rounded here.
        const bool bf = c->desc.output_type == QTRANSIT_BFLOAT16;
        auto* o = static_cast<uint16_t*>(a->out);
        for (int64_t i = 0; i < a->elements; ++i) {
            const float v = out.data()[i];
            const uint16_t b = bf ? qt::kernels::f32_to_bf16_bits(v) : qt::kernels::f32_to_f16_bits(v);
            const float back = bf ? qt::kernels::bf16_bits_to_f32(b) : qt::kernels::f16_bits_to_f32(b);
            if (std::memcmp(&back, &v, sizeof v) != 0 && !(std::isnan(back) && std::isnan(v)))
                return fail_into(err, err_len, "decode returned " + qt::reports::shortest(v) + " at element " + std::to_string(i) + ", which is not a " +
                                                   (bf ? "bfloat16" : "float16") + " value (the codec's dtype)");
            o[i] = b;
        }
        return 0;
    } catch (nb::python_error& e) {
        return fail_into(err, err_len, "decode raised " + python_error_line(e));
    } catch (const std::exception& e) {
        return fail_into(err, err_len, std::string("decode: ") + e.what());
    }
}

std::unique_ptr<PyCodec> make_codec(const std::string& fmt, nb::object encode, nb::object decode, const std::string& name,
                                    int64_t block_min, int64_t block_max, int64_t block_multiple,
                                    const std::string& dtype) {
    auto c = std::make_unique<PyCodec>();
    c->encode = std::move(encode);
    c->decode = std::move(decode);
    c->name = name;
    c->format = take(qt::resolve_format(fmt));
    const bool builtin = qt::parse_format(c->format.name()).ok();
    if (builtin) c->format_name = c->format.name();
    else c->format_toml = take(qt::declaration_to_toml(c->format));
    auto& d = c->desc;
    d.abi_version = QTRANSIT_CODEC_ABI_VERSION;
    d.struct_size = sizeof(qtransit_codec_v1_t);
    d.name = c->name.c_str();
    d.format = builtin ? c->format_name.c_str() : nullptr;
    d.format_toml = builtin ? nullptr : c->format_toml.c_str();
    d.device = QTRANSIT_DEVICE_CPU;
    d.packing = QTRANSIT_PACKING_BYTE_PER_CODE;
    // What encode reads and decode writes: a bf16 quantizer is checked on bf16 inputs, against the
    // reference on the same values, and its decoded values compared in bf16 (docs/PLUGIN.md).
    if (dtype == "float32") d.input_type = QTRANSIT_BINARY32;
    else if (dtype == "bfloat16") d.input_type = QTRANSIT_BFLOAT16;
    else if (dtype == "float16") d.input_type = QTRANSIT_BINARY16;
    else raise(qt::make_error(qt::ErrorCode::kInvalidArgument, "dtype=" + qt::printable(dtype, 40) + ": float32, bfloat16 or float16"));
    d.output_type = d.input_type;
    d.scale_layout = QTRANSIT_SCALES_IN_ORDER;
    // The block sizes the quantizer takes (bitsandbytes: powers of two from 32): the gate checks it at
    // those only, as a plugin's descriptor says (docs/PLUGIN.md).
    d.block_min = block_min;
    d.block_max = block_max;
    d.block_multiple = block_multiple;
    d.thread_safe = 0;  // the GIL serializes the callables anyway
    d.state = c.get();
    d.encode = py_encode;
    d.decode = py_decode;
    return c;
}

// ---- the functions ------------------------------------------------------------------------------------

std::string formats_json(int64_t block) { return qt::reports::to_json(take(qt::gate::format_table(block))).dump(); }

nb::dict quantize(const std::string& fmt, F32 x, std::vector<int64_t> shape, int64_t block, const std::string& nonfinite,
                  const std::string& rounding, uint64_t seed) {
    qt::gate::QuantizeRequest a;
    a.format = fmt;
    a.block = block;
    a.nonfinite = nonfinite;
    a.rounding = rounding;
    a.seed = seed;
    const auto setup = take(a.validate());
    // As `qtransit quantize` refuses it: a check of no elements would pass over nothing.
    if (x.size() == 0) raise(qt::make_error(qt::ErrorCode::kInvalidArgument, "x: the tensor has no elements"));
    qt::Site site;
    site.tensor = "x";
    qt::gate::CodecCheck c;
    std::string json, text;
    {
        nb::gil_scoped_release nogil;
        c = take(qt::gate::quantize_tensor(setup.format, span_of(x), shape, setup.block, setup.policy, site, seed));
        const auto q = qt::gate::quantized_tensor(setup.format, c, shape, setup.policy, seed);
        json = qt::reports::to_json(q).dump();
        text = qt::reports::to_text(q);  // what `qtransit quantize` prints
    }
    nb::dict d;
    d["json"] = json;
    d["text"] = text;
    d["wire"] = nb::bytes(reinterpret_cast<const char*>(c.encoded.codes.data()), c.encoded.codes.size());
    d["codes"] = to_numpy(std::move(c.codes));
    d["scales"] = to_numpy(std::move(c.encoded.scales));
    d["offsets"] = to_numpy(std::move(c.encoded.offsets));
    d["decoded"] = to_numpy(std::move(c.decoded));
    return d;
}

nb::dict verify_quantize(const std::string& fmt, F32 x, std::vector<int64_t> shape, F32 decoded, std::optional<I32> codes,
                         std::optional<nb::bytes> wire, std::optional<F32> scales, std::optional<F32> offsets, int64_t block, int64_t shard,
                         const std::string& conformance) {
    qt::gate::VerifyQuantizeRequest a;
    a.format = fmt;
    a.block = block;
    a.shard = shard;
    a.conformance = conformance;
    if (offsets) a.offsets = "offsets";
    const auto setup = take(a.validate());
    const int64_t blk = setup.block;  // the format's own where block is 0
    // NVFP4 (D58): the blocks take the amax of the whole input tensor.
    const qt::FormatSpec format = setup.format.for_tensor(span_of(x));
    if (decoded.shape(0) != x.shape(0))
        throw nb::value_error(("decoded: " + std::to_string(decoded.shape(0)) + " elements, but x has " + std::to_string(x.shape(0)) +
                               " (the decoded values have the input's shape)").c_str());
    qt::gate::RunQuantization run;
    run.decoded.assign(decoded.data(), decoded.data() + decoded.shape(0));
    if (codes) {
        if (codes->shape(0) != x.shape(0))
            throw nb::value_error(("codes: " + std::to_string(codes->shape(0)) + " codes, but x has " + std::to_string(x.shape(0)) +
                                   " elements (one code per element)").c_str());
        run.has_codes = true;
        run.codes.assign(codes->data(), codes->data() + codes->shape(0));
    } else if (wire) {
        run.has_wire = true;
        const auto* p = static_cast<const uint8_t*>(wire->data());
        run.wire_codes.assign(p, p + wire->size());
    }
    if (scales) run.has_scales = true, run.scales.assign(scales->data(), scales->data() + scales->shape(0));
    if (offsets) run.has_offsets = true, run.offsets.assign(offsets->data(), offsets->data() + offsets->shape(0));
    std::vector<float> xs(x.data(), x.data() + x.shape(0));  // a tiled format's: in tile order, as the blocks are
    if (auto st = qt::gate::tile_order_run(format, shape, shard, xs, run); !st) raise(st.error());
    Report rep;
    std::string json, text;
    {
        nb::gil_scoped_release nogil;
        const auto started = std::chrono::steady_clock::now();
        const auto c = take(qt::gate::run_check(format, xs, blk, shard, run, setup.conformance));
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
        const auto v = qt::gate::verified_quantization(format, blk, c, run, setup.conformance,
                                                       {"decoded", codes ? "codes" : "wire", "scales", "offsets"});
        text = qt::reports::to_text(v);
        const auto j = qt::reports::to_json(v);
        json = j.dump();
        rep.r = qt::gate::verify_quantize_report("qtransit.verify_quantize", seconds, v, j, text);
    }
    nb::dict d;
    d["json"] = json;
    d["text"] = text;
    d["report"] = nb::cast(std::move(rep));
    return d;
}

nb::dict verify_collective(const std::string& path, const std::string& fmt, F32x2 inputs, F32x2 outputs, const std::string& output_dtype,
                           int64_t ranks_per_node, int64_t block, const std::string& accum, const std::string& target,
                           const std::string& conformance, std::vector<int64_t> ring_order) {
    qt::gate::VerifyCollectiveRequest a;
    a.path = path;
    a.format = fmt;
    a.ranks = static_cast<int64_t>(inputs.shape(0));
    a.ranks_per_node = ranks_per_node;
    a.block = block;
    a.accum = accum;
    a.target = target;
    a.conformance = conformance;
    a.ring_order = ring_order;
    auto spec = take(a.validate());
    const int64_t n = a.ranks, m = static_cast<int64_t>(inputs.shape(1));
    spec.config.elements = m;
    spec.output_dtype = output_dtype == "fp16" ? qt::gate::OutputDtype::kFp16
                        : output_dtype == "bf16" ? qt::gate::OutputDtype::kBf16
                                                 : qt::gate::OutputDtype::kFp32;
    take(qt::gate::check_spec(spec));
    const bool rs = qt::path_info(spec.config.path).shape == qt::PathShape::kReduceScatter;
    const int64_t cols = rs ? m / n : m;
    if (static_cast<int64_t>(outputs.shape(0)) != n || static_cast<int64_t>(outputs.shape(1)) != cols)
        throw nb::value_error(("outputs: shape [" + std::to_string(outputs.shape(0)) + ", " + std::to_string(outputs.shape(1)) + "], but " +
                               path + " with N = " + std::to_string(n) + " and M = " + std::to_string(m) + " leaves [" + std::to_string(n) +
                               ", " + std::to_string(cols) + "] (row c: " +
                               (rs ? "the S = M / N elements of chunk c that rank c holds)" : "the M elements rank c holds)"))
                                  .c_str());
    Report rep;
    std::string json, text;
    {
        nb::gil_scoped_release nogil;
        const auto started = std::chrono::steady_clock::now();
        const auto v = take(qt::gate::verify_arrays(spec, {inputs.data(), static_cast<size_t>(n * m)},
                                                    {outputs.data(), static_cast<size_t>(n * cols)}));
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
        const qt::reports::VerifiedCollective shown = qt::gate::verified_collective(v);
        json = qt::reports::to_json(shown).dump();
        text = qt::reports::to_text(shown);
        rep.r = qt::gate::verify_collective_report("qtransit.verify_collective", seconds, v);
    }
    nb::dict d;
    d["json"] = json;
    d["text"] = text;
    d["report"] = nb::cast(std::move(rep));
    return d;
}

nb::dict simulate(std::vector<std::string> paths, std::vector<int64_t> ranks, int64_t ranks_per_node, int64_t elements, const std::string& fmt,
                  int64_t block, const std::string& dist, uint64_t seed, const std::string& accum, const std::string& divide,
                  const std::string& rotation, const std::string& rounding, std::optional<F32x2> inputs, int threads, bool keep_outputs,
                  nb::object encode, nb::object decode, const std::string& codec_name, const std::string& dtype) {
    // A codec written in Python (encode and decode adapted by qtransit._codec): it runs every Q and D
    // of the paths, as --codec's library does. It outlives the outcome (declared first).
    std::unique_ptr<PyCodec> py;
    qt::gate::SimulateRequest a;
    if (!encode.is_none()) {
        py = make_codec(fmt, std::move(encode), std::move(decode), codec_name, 1, 0, 1, dtype);
        a.codec_object = take(qt::kernels::PluginCodec::from_descriptor(&py->desc, "python:" + codec_name));
    }
    a.paths = std::move(paths);
    a.ranks = std::move(ranks);
    a.ranks_per_node = ranks_per_node;
    a.elements = elements;
    a.format = fmt;
    a.block = block;
    a.dist = dist;
    a.seed = seed;
    a.accum = accum;
    a.divide = divide;
    a.rotation = rotation;
    a.rounding = rounding;
    a.threads = threads;
    a.keep_outputs = keep_outputs;
    qt::kernels::NpyArray in;
    if (inputs) {
        a.in = "inputs";
        in.shape = {static_cast<int64_t>(inputs->shape(0)), static_cast<int64_t>(inputs->shape(1))};
        in.data.assign(inputs->data(), inputs->data() + inputs->size());
    }
    std::unique_ptr<qt::gate::SimulateOutcome> o;
    {
        nb::gil_scoped_release nogil;
        o = take(qt::gate::simulate(a, inputs ? &in : nullptr));
        a.codec_object.reset();
    }
    nb::dict d;
    d["json"] = o->json(seed).dump();
    d["text"] = o->printed(a).out;  // the table `qtransit simulate` prints
    if (keep_outputs) {
        std::vector<size_t> shape(o->dump_shape.begin(), o->dump_shape.end());
        d["outputs"] = nb::cast(to_numpy(std::move(o->dump), shape));
    } else {
        d["outputs"] = nb::none();
    }
    return d;
}

// check's options as the command's (config_text in place of reading the file `source` names).
qt::gate::CheckRequest check_args(const std::string& config_text, const std::string& source, bool quick, const std::string& conformance) {
    qt::gate::CheckRequest a;
    a.config_text = config_text;
    a.config = source;
    a.quick = quick;
    a.conformance = conformance;
    return a;
}

Report check(const std::string& config_text, const std::string& source, bool quick, const std::string& conformance, const std::string& codec) {
    qt::gate::CheckRequest a = check_args(config_text, source, quick, conformance);
    a.codec = codec;
    auto cfg = take(a.validate());
    Report rep;
    nb::gil_scoped_release nogil;
    rep.r = take(qt::gate::run_gate(cfg, {}));
    return rep;
}

Report check_codec(const std::string& fmt, nb::object encode, nb::object decode, const std::string& name, const std::string& config_text,
                   const std::string& source, bool quick, const std::string& conformance, const std::string& dtype,
                   int64_t block_min, int64_t block_max, int64_t block_multiple) {
    auto py = make_codec(fmt, std::move(encode), std::move(decode), name, block_min, block_max, block_multiple, dtype);
    Report rep;
    {
        auto codec = take(qt::kernels::PluginCodec::from_descriptor(&py->desc, "python:" + name));
        auto cfg = take(check_args(config_text, source, quick, conformance).validate(codec));
        codec.reset();
        nb::gil_scoped_release nogil;
        rep.r = take(qt::gate::run_gate(cfg, {}));
    }  // the gate's config, and with it the codec, is gone before its callables are
    return rep;
}

// formats validate's outcome: the gate's report with the properties and the comparison, the text
// the command prints, and its files (report.json, report.md, junit.xml, report.html, declaration.toml).
struct Validation {
    qt::gate::FormatValidation v;
    std::string json() const {
        for (const auto& [name, text] : qt::gate::validation_reports(v))
            if (name == "report.json") return text;
        return "{}";
    }
    std::string summary() const { return qt::gate::validation_text(v); }
    void write(const std::string& dir) const { take(qt::reports::write_files(dir, qt::gate::validation_reports(v))); }
    bool passed() const { return v.result.passed(); }
};

// `qtransit formats validate FILE.toml` (or --codec lib.so): the request's checks, then the work,
// without the command's report directory (Validation.write writes the same files).
Validation validate_format(const std::string& file, bool quick, uint64_t seed, const std::string& codec) {
    qt::gate::FormatsValidateRequest a;
    a.file = file;
    a.quick = quick;
    a.seed = seed;
    a.codec = codec;
    auto setup = take(a.validate());
    Validation out;
    {
        nb::gil_scoped_release nogil;
        out.v = take(qt::gate::validate_declared(a, setup));
    }
    return out;
}

// `qtransit formats show`: a format's declaration as TOML.
std::string show_format(const std::string& target) { return take(qt::gate::formats_show(target)).out; }

// `qtransit paths --json` and `paths show` (docs/PATHS.md).
std::string paths_json() { return take(qt::gate::paths(true)).out; }
std::string show_path(const std::string& target) { return take(qt::gate::paths_show(target)).out; }

// `qtransit info --json`, for this process (the interpreter's allocator).
std::string info_json() { return qt::gate::info({true, "the Python interpreter's (the C library's malloc)"}).out; }

// `qtransit survey --json`'s object and its survey.md, without the report directory.
nb::dict survey(std::vector<std::string> formats, std::vector<std::string> dists, int64_t elements, int64_t block, uint64_t seed) {
    qt::gate::SurveyRequest a;
    a.formats = std::move(formats);
    a.distributions = std::move(dists);
    a.elements = elements;
    a.block = block;
    a.seed = seed;
    auto spec = take(a.validate());
    std::string json, markdown;
    {
        nb::gil_scoped_release nogil;
        auto res = take(qt::gate::run_survey(spec));
        json = qt::reports::to_json(res).dump();
        markdown = qt::reports::to_markdown(res);
    }
    nb::dict d;
    d["json"] = json;
    d["markdown"] = markdown;
    return d;
}

// What qtransit.strategies.blocks needs of a format (a name or a declaration file): the amplitude A
// the scale maps a block's absmax onto, and whether the grid is the integers q s (exact ties at
// (k + 1/2) s).
nb::dict format_grid(const std::string& fmt) {
    const auto f = take(qt::resolve_format(fmt));
    nb::dict d;
    d["name"] = f.name();
    if (f.kind == qt::FormatKind::kDecl && f.decl) {
        d["amplitude"] = f.decl->amp;
        d["integer_grid"] = f.decl->elem == qt::ElemType::kInt && f.decl->fraction_bits == 0 && !f.decl->rotated();
    } else {
        d["amplitude"] = static_cast<double>(std::max(std::abs(f.code_min()), std::abs(f.code_max())));
        d["integer_grid"] = true;
    }
    return d;
}

// The inputs gate/boundaries.hpp generates for a format (issue 47): (input_class, what, x, block,
// shard) each, for qtransit.strategies.boundary_cases.
nb::list boundary_cases(const std::string& fmt, int64_t block, uint64_t seed, std::vector<int64_t> other_blocks) {
    const auto format = take(qt::resolve_format(fmt));
    if (block < 1 || block > qt::kMaxBlock)
        raise(qt::make_error(qt::ErrorCode::kInvalidArgument, "block=" + std::to_string(block) + ": between 1 and " + std::to_string(qt::kMaxBlock)));
    for (int64_t b : other_blocks)
        if (b < 1 || b > 4096)
            raise(qt::make_error(qt::ErrorCode::kInvalidArgument, "other_blocks: " + std::to_string(b) + " is not between 1 and 4096"));
    nb::list out;
    for (auto& c : qt::gate::boundary_cases(format, block, seed, other_blocks))
        out.append(nb::make_tuple(c.input_class, c.what, to_numpy(std::move(c.x)), c.block, c.shard));
    return out;
}

}  // namespace

NB_MODULE(_qtransit, m) {
    m.doc() = "qtransit's native half: see the qtransit package";
    m.attr("__version__") = QTRANSIT_VERSION;
    nb::class_<Report>(m, "Report")
        .def("json", &Report::json, "the report as report.json's text")
        .def("summary", &Report::summary, "the text summary `qtransit check` prints")
        .def("write", &Report::write, nb::arg("dir"), "report.json, report.md, junit.xml and report.html into dir")
        .def_prop_ro("passed", &Report::passed);
    nb::class_<Validation>(m, "Validation")
        .def("json", &Validation::json, "report.json's text (with the properties and format_comparison)")
        .def("summary", &Validation::summary, "the text `qtransit formats validate` prints")
        .def("write", &Validation::write, nb::arg("dir"), "report.json, report.md, junit.xml, report.html, declaration.toml into dir")
        .def_prop_ro("passed", &Validation::passed);
    m.def("formats_json", &formats_json, nb::arg("block"));
    m.def("validate_format", &validate_format, nb::arg("file"), nb::arg("quick"), nb::arg("seed"), nb::arg("codec"));
    m.def("show_format", &show_format, nb::arg("target"));
    m.def("paths_json", &paths_json);
    m.def("show_path", &show_path, nb::arg("target"));
    m.def("info_json", &info_json);
    m.def("survey", &survey, nb::arg("formats"), nb::arg("dists"), nb::arg("elements"), nb::arg("block"), nb::arg("seed"));
    m.def("quantize", &quantize, nb::arg("fmt"), nb::arg("x"), nb::arg("shape"), nb::arg("block"), nb::arg("nonfinite"),
          nb::arg("rounding"), nb::arg("seed"));
    m.def("verify_quantize", &verify_quantize, nb::arg("fmt"), nb::arg("x"), nb::arg("shape"), nb::arg("decoded"), nb::arg("codes").none(),
          nb::arg("wire").none(), nb::arg("scales").none(), nb::arg("offsets").none(), nb::arg("block"), nb::arg("shard"),
          nb::arg("conformance"));
    m.def("verify_collective", &verify_collective, nb::arg("path"), nb::arg("fmt"), nb::arg("inputs"), nb::arg("outputs"),
          nb::arg("output_dtype"), nb::arg("ranks_per_node"), nb::arg("block"), nb::arg("accum"), nb::arg("target"),
          nb::arg("conformance"), nb::arg("ring_order"));
    m.def("simulate", &simulate, nb::arg("paths"), nb::arg("ranks"), nb::arg("ranks_per_node"), nb::arg("elements"), nb::arg("fmt"),
          nb::arg("block"), nb::arg("dist"), nb::arg("seed"), nb::arg("accum"), nb::arg("divide"), nb::arg("rotation"),
          nb::arg("rounding"), nb::arg("inputs").none(), nb::arg("threads"), nb::arg("keep_outputs"), nb::arg("encode").none(),
          nb::arg("decode").none(), nb::arg("codec_name"), nb::arg("dtype"));
    m.def("check", &check, nb::arg("config_text"), nb::arg("source"), nb::arg("quick"), nb::arg("conformance"), nb::arg("codec"));
    m.def("format_grid", &format_grid, nb::arg("fmt"));
    m.def("boundary_cases", &boundary_cases, nb::arg("fmt"), nb::arg("block"), nb::arg("seed"), nb::arg("other_blocks"));
    m.def("check_codec", &check_codec, nb::arg("fmt"), nb::arg("encode"), nb::arg("decode"), nb::arg("name"), nb::arg("config_text"),
          nb::arg("source"), nb::arg("quick"), nb::arg("conformance"), nb::arg("dtype"), nb::arg("block_min"), nb::arg("block_max"),
          nb::arg("block_multiple"));
}
