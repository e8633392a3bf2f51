// `qtransit verify collective`: a collective computed elsewhere (its inputs and what every rank held
// after it, dumped as .npy or .safetensors, one file or one per rank) judged against the path in
// exact arithmetic (gate/verify_run.hpp). Under `--backend mpi` each process reads only its own
// chunks' slices and the verdicts are combined on rank 0. `qtransit verify quantize`: one
// quantization done elsewhere (decoded values, and codes, scales, offsets when given) against the
// reference.
#include <algorithm>
#include <bit>
#include <chrono>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>

#include "qtransit/gate/commands.hpp"
#include "qtransit/collectives/mpi.hpp"
#include "qtransit/common/decl_toml.hpp"
#include "qtransit/common/path_decl.hpp"
#include "qtransit/common/text_file.hpp"
#include "qtransit/gate/codec_check.hpp"
#include "qtransit/gate/verify_run.hpp"
#include "qtransit/gate/views.hpp"
#include "qtransit/common/shortest.hpp"
#include "qtransit/kernels/block_math.hpp"
#include "qtransit/kernels/tensor_file.hpp"
#include "qtransit/reports/files.hpp"
#include "qtransit/version.hpp"

namespace qtransit::gate {
namespace {

namespace mpi = collectives::mpi;
std::string shape_text(const std::vector<int64_t>& s) {
    std::string out = "[";
    for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
    return out + "]";
}

// One file's tensor as rows of `cols` values: a per-rank file holds one row ([cols] or [1, cols]),
// a whole file N rows ([N, cols]). want_cols < 0: any (the inputs, which say what M is). With a range,
// only the flat elements [first, first + count) are read (the shape is still the file's).
Result<kernels::NpyArray> read_rows(const std::string& file, const kernels::TensorReadOptions& opt, int64_t rows, int64_t want_cols,
                                    const std::string& expect, std::optional<std::pair<int64_t, int64_t>> range = std::nullopt) {
    auto a = range ? kernels::read_tensor_slice(file, opt, range->first, range->second) : kernels::read_tensor(file, opt);
    if (!a) return a.error();
    const auto& s = a->shape;
    const bool one = rows == 1;
    const bool ok_rank = one ? (s.size() == 1 || (s.size() == 2 && s[0] == 1)) : (s.size() == 2 && s[0] == rows);
    const int64_t cols = s.empty() ? 1 : s.back();
    if (!ok_rank || (want_cols >= 0 && cols != want_cols))
        return make_error(ErrorCode::kBadFile, file + ": shape " + shape_text(s) + ", but " + expect);
    return a;
}

// A whole binary file (the packed wire codes), its size checked against the memory there is.
Result<std::vector<uint8_t>> read_file_bytes(const std::string& path) {
    std::error_code ec;
    const auto size = std::filesystem::file_size(path, ec);
    if (ec) return make_error(ErrorCode::kBadFile, path + ": cannot read it (" + ec.message() + ")");
    if (auto st = check_memory(static_cast<int64_t>(size), path); !st) return st.error();
    std::vector<uint8_t> out(static_cast<size_t>(size));
    FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) return make_error(ErrorCode::kBadFile, path + ": cannot open it");
    const size_t got = out.empty() ? 0 : std::fread(out.data(), 1, out.size(), f);
    std::fclose(f);
    if (got != out.size()) return make_error(ErrorCode::kBadFile, path + ": read " + std::to_string(got) + " of its " + std::to_string(size) + " bytes");
    return out;
}

// "" when `file` can be opened by path; otherwise what is wrong with it, naming it. The error_code
// overload: a path too long or a symlink loop is a bad file, never an uncaught filesystem_error.
std::string unreadable(const std::string& file) {
    std::error_code ec;
    const auto st = std::filesystem::status(file, ec);
    if (st.type() == std::filesystem::file_type::not_found) return file + ": no such file";
    if (ec) return file + ": cannot read it (" + ec.message() + ")";
    if (std::filesystem::is_directory(st)) return file + ": cannot read it (it is a directory)";
    return "";
}

// Whether --codes is a .npy of integer codes (else: the packed wire bytes): its extension, in any
// case, or numpy's magic string \x93NUMPY at its start (a regular file only: a pipe's bytes are not
// sniffed, they could not be read again).
bool is_npy_file(const std::string& file) {
    const std::string ext = std::filesystem::path(file).extension().string();
    if (ext.size() == 4 && ext[0] == '.' && std::tolower(static_cast<unsigned char>(ext[1])) == 'n' &&
        std::tolower(static_cast<unsigned char>(ext[2])) == 'p' && std::tolower(static_cast<unsigned char>(ext[3])) == 'y')
        return true;
    std::error_code ec;
    if (!std::filesystem::is_regular_file(file, ec)) return false;
    FILE* f = std::fopen(file.c_str(), "rb");
    if (!f) return false;
    char magic[6] = {};
    const size_t got = std::fread(magic, 1, sizeof magic, f);
    std::fclose(f);
    return got == sizeof magic && std::memcmp(magic, "\x93NUMPY", sizeof magic) == 0;
}

OutputDtype dtype_of(kernels::NpyDtype d) {
    switch (d) {
        case kernels::NpyDtype::kFloat16: return OutputDtype::kFp16;
        case kernels::NpyDtype::kBfloat16: return OutputDtype::kBf16;
        default: return OutputDtype::kFp32;
    }
}

}  // namespace

Result<CollectiveVerifySpec> VerifyCollectiveRequest::validate() const {
    const VerifyCollectiveRequest& a = *this;
    CollectiveVerifySpec spec;
    auto refuse = [](const std::string& m) { return make_error(ErrorCode::kInvalidArgument, m); };
    // A built-in path, or a declared one (docs/PATHS.md, D45): a declaration-only built-in or a .toml
    // file declaring one path. Its schedule is checked with what it fixes, under its name; an option
    // given otherwise is refused, as simulate refuses it.
    std::optional<PathDecl> decl;
    if (auto path = parse_path(a.path)) {
        spec.config.path = *path;
    } else {
        auto ds = resolve_path_arg(a.path);
        if (!ds) return refuse(ds.error().message);
        if (ds->size() != 1)
            return refuse("--path " + a.path + " declares " + std::to_string(ds->size()) + " paths; verify collective checks one run of one "
                          "(name it: --path NAME, once the file is registered, or a file of one [[path]])");
        decl = ds->front();
        spec.config.path = decl->kind;
        if (!decl->is_builtin_kind()) spec.config.label = decl->name;
        if (decl->divide && *decl->divide != Divide::kNone)
            return refuse("--path " + decl->name + " divides (divide = \"" + std::string(to_string(*decl->divide)) +
                          "\"): verify collective checks sums (--target sum) and means of sums (--target mean), not a division inside the path");
        if (decl->rotation) spec.config.rotation = *decl->rotation;
        apply_declared(*decl, spec.config);  // (a tensor's scale: its amax from the dumped inputs)
        if (spec.config.tensor_scale && a.backend == "mpi")
            return refuse("--path " + decl->name + " takes one scale per tensor from every rank's inputs: verify it with --backend cpu "
                          "(one process reads them all)");
    }
    std::string format_name = a.format;
    if (decl && decl->fixes_wire()) {
        const std::string w = decl->wire_text();
        if (decl->wire.size() > 1) return refuse("--path " + decl->name + " has one format per stage (" + w + "): verify collective takes one format");
        if (!a.format.empty() && a.format != w)
            return refuse("--format " + a.format + " contradicts the declared path " + decl->name + ", whose wire is " + w);
        format_name = w;
    }
    // Nothing quantized (fp32-ring-rs, D47's combine): the format is unused; int8 stands in, as simulate's.
    if (format_name.empty() && ((decl && decl->wire_none()) || (!decl && !path_info(spec.config.path).quantized))) format_name = "int8";
    if (format_name.empty())
        return refuse("--format is required (the format the run quantized with), unless --path names a declaration with its own wire");
    auto format = resolve_format(format_name);
    if (!format) return refuse(format.error().message);
    spec.config.format = *format;
    // --block left out (0): the format's fixed block when it has one, else 32.
    const int64_t block = a.block != 0 ? a.block : wire_block({*format}, kDefaultBlock);
    if (auto st = format->check_block(block); !st) return refuse("--block: " + st.error().message);
    spec.config.block = block;
    auto accum = parse_accum(a.accum);
    if (!accum) return refuse(accum.error().message);
    spec.config.accum = *accum;
    if (decl && decl->accum) {
        if (a.accum != "fp32" && *accum != *decl->accum)
            return refuse("--accum " + a.accum + " contradicts the declared path " + decl->name + ", which adds in " + to_string(*decl->accum));
        spec.config.accum = *decl->accum;
    }
    if (a.ranks < 1) return make_error(ErrorCode::kInvalidArgument, "--ranks is required (N, the ranks of the run)");
    spec.config.ranks = a.ranks;
    spec.config.ranks_per_node = a.ranks_per_node > 0 ? a.ranks_per_node : default_ranks_per_node(a.ranks);
    if (a.target != "sum" && a.target != "mean") return make_error(ErrorCode::kInvalidArgument, "--target " + a.target + ": sum or mean");
    spec.mean = a.target == "mean";
    spec.ring_order = a.ring_order;
    if (!a.conformance.empty()) {
        auto t = parse_tier(a.conformance);
        if (!t) return make_error(ErrorCode::kInvalidArgument, "--conformance: " + t.error().message);
        spec.asked = *t;
    }
    if (!a.dtype.empty() && a.dtype != "fp32" && a.dtype != "fp16" && a.dtype != "bf16")
        return make_error(ErrorCode::kInvalidArgument, "--dtype " + a.dtype + ": known: " + kernels::known_dtype_names());
    // --tensor picks a tensor in .safetensors files: with none among the files it was dropped
    // silently (issue 46), as verify quantize refuses it.
    const bool st_in = kernels::is_safetensors_name(a.inputs), st_out = kernels::is_safetensors_name(a.outputs);
    if (!a.tensor.empty() && !st_in && !st_out)
        return make_error(ErrorCode::kInvalidArgument, "--tensor is for .safetensors files (a .npy file holds one array); --inputs " +
                                                           a.inputs + " and --outputs " + a.outputs + " are not .safetensors");
    if (!a.output_tensor.empty() && !st_out)
        return make_error(ErrorCode::kInvalidArgument, "--output-tensor is for .safetensors files; --outputs " + a.outputs + " is not one");
    return spec;
}

namespace {

// What one process of `verify collective` reads: the chunks it checks (all of them, or under mpi
// chunk c on process c mod P), and for each the inputs of every rank over its range and what the
// ranks hold there, read whole in one process (it needs all of it) or under mpi only the slices of
// its chunks (read_tensor_slice: the rest of a file is not read).
class CollectiveReader {
public:
    CollectiveReader(const VerifyCollectiveRequest& a, CollectiveVerifySpec& spec, int me, int procs, bool sliced)
        : a_(a), spec_(spec), n_(a.ranks), sliced_(sliced), in_split_(has_rank_field(a.inputs)), out_split_(has_rank_field(a.outputs)),
          rs_(path_info(spec.config.path).shape == PathShape::kReduceScatter),
          out_tensor_(a.output_tensor.empty() ? a.tensor : a.output_tensor) {
        for (int64_t c = me; c < n_; c += procs) mine_.push_back(c);
    }
    // The first file this process needs that cannot be opened, named ("" when all can), before any is read.
    std::string missing() const;
    // M from the inputs, the chunks laid out, every input and output this process needs read; the
    // spec's elements and output dtype set.
    Status read();
    // The first outputs file read and its dtype (every rank's must have it); "" before one is read.
    const std::string& first_file() const { return first_file_; }
    kernels::NpyDtype first_dtype() const { return first_dtype_; }
    // The first non-finite input met, chunk by chunk and rank by rank ("" when none).
    std::string nonfinite_input() const;
    // The held chunks as views for verify_chunks.
    std::vector<ChunkTensors> chunks();

private:
    struct Held {
        ChunkTensors t;
        std::vector<float> in, out;
    };
    using Range = std::function<std::pair<int64_t, int64_t>(const Held&)>;
    using Put = std::function<void(Held&, const float*)>;

    // --dtype: what raw uint16 arrays hold (typed files say it themselves); --tensor: for .safetensors files.
    kernels::TensorReadOptions opts(const std::string& file, const std::string& tensor) const {
        return kernels::TensorReadOptions{kernels::is_safetensors_name(file) ? tensor : "", a_.dtype, true};
    }
    std::string inputs_expect(bool one) const {
        return one ? std::string("a per-rank inputs file holds that rank's M elements: [M] or [1, M]")
                   : "the inputs are [N, M] with N = " + std::to_string(n_) + " (row r: rank r's input)";
    }
    std::string outputs_expect(bool one) const {
        const std::string pname = spec_.config.path_name();
        const int64_t cols = rs_ ? m_ / n_ : m_;
        const std::string what = rs_ ? "S = M / N = " + std::to_string(cols) + " elements of chunk c that rank c holds"
                                     : "M = " + std::to_string(cols) + " elements every rank holds";
        return pname + " with N = " + std::to_string(n_) + " and M = " + std::to_string(m_) + " leaves " +
               (one ? shape_text({cols}) + " per rank (the " + what + ")" : shape_text({n_, cols}) + " (row c: the " + what + ")");
    }
    Status start_chunks();
    Result<kernels::NpyDtype> gather(const std::string& file, const kernels::TensorReadOptions& o, int64_t rows_in_file, int64_t row,
                                     int64_t cols, const std::string& expect, const Range& range_of, const Put& put,
                                     const kernels::NpyArray* whole);
    Status read_m(std::optional<kernels::NpyArray>& first_in);
    Status read_inputs(std::optional<kernels::NpyArray>& first_in);
    Status read_outputs();

    const VerifyCollectiveRequest& a_;
    CollectiveVerifySpec& spec_;
    const int64_t n_;
    const bool sliced_, in_split_, out_split_, rs_;
    const std::string out_tensor_;
    std::vector<int64_t> mine_;
    std::map<int64_t, Held> held_;
    int64_t m_ = -1;
    std::string first_file_;
    kernels::NpyDtype first_dtype_ = kernels::NpyDtype::kFloat32;
};

Error mixed_dtypes(const std::string& file, kernels::NpyDtype d, const std::string& first, kernels::NpyDtype d0) {
    return make_error(ErrorCode::kBadFile, file + ": " + kernels::npy_dtype_name(d) + ", but " + first + " is " +
                                               kernels::npy_dtype_name(d0) + ": every rank's outputs must have one dtype");
}

std::string CollectiveReader::missing() const {
    std::string missing;
    auto need = [&](const std::string& f) {
        if (missing.empty()) missing = unreadable(f);
    };
    if (in_split_)
        for (int64_t r = 0; r < n_; ++r) need(rank_file(a_.inputs, r));
    else
        need(a_.inputs);
    if (out_split_) {
        if (rs_)
            for (int64_t c : mine_) need(rank_file(a_.outputs, c));
        else
            for (int64_t r = 0; r < n_; ++r) need(rank_file(a_.outputs, r));
    } else {
        need(a_.outputs);
    }
    return missing;
}

Status CollectiveReader::start_chunks() {
    spec_.config.elements = m_;
    if (auto st = check_spec(spec_); !st) return st;
    double bytes = 0;
    for (int64_t c : mine_) {
        Held h;
        h.t = chunk_layout(spec_.config, c);
        const int64_t w = h.t.in_hi - h.t.in_lo;
        bytes += 4.0 * (static_cast<double>(n_ * w) + static_cast<double>(h.t.out_ranks.size()) * static_cast<double>(h.t.out_hi - h.t.out_lo));
        held_.emplace(c, std::move(h));
    }
    if (auto st = check_memory(bytes > 9e18 ? INT64_MAX : static_cast<int64_t>(bytes), "the chunks this process checks"); !st) return st;
    for (auto& [c, h] : held_) {
        h.in.assign(static_cast<size_t>(n_ * (h.t.in_hi - h.t.in_lo)), 0.0f);
        h.out.assign(h.t.out_ranks.size() * static_cast<size_t>(h.t.out_hi - h.t.out_lo), 0.0f);
    }
    return Status::Ok();
}

// Copies row `row` of `file` (rows_in_file rows of `cols`) into every held chunk via `put`: from
// `whole` when the file is in memory already, else read whole, else (sliced) each chunk's range.
Result<kernels::NpyDtype> CollectiveReader::gather(const std::string& file, const kernels::TensorReadOptions& o, int64_t rows_in_file,
                                                   int64_t row, int64_t cols, const std::string& expect, const Range& range_of,
                                                   const Put& put, const kernels::NpyArray* whole) {
    if (whole) {
        for (auto& [c, h] : held_) {
            const auto [lo, hi] = range_of(h);
            if (hi > lo) put(h, whole->data.data() + row * cols + lo);
        }
        return whole->dtype;
    }
    if (!sliced_) {
        auto x = read_rows(file, o, rows_in_file, cols, expect);
        if (!x) return x.error();
        for (auto& [c, h] : held_) {
            const auto [lo, hi] = range_of(h);
            if (hi > lo) put(h, x->data.data() + row * cols + lo);
        }
        return x->dtype;
    }
    kernels::NpyDtype d = kernels::NpyDtype::kFloat32;
    for (auto& [c, h] : held_) {
        const auto [lo, hi] = range_of(h);
        if (hi <= lo) continue;
        auto x = read_rows(file, o, rows_in_file, cols, expect, std::pair{row * cols + lo, hi - lo});
        if (!x) return x.error();
        put(h, x->data.data());
        d = x->dtype;
    }
    return d;
}

// M: from the inputs' shape (a header read when slicing). A pipe or FIFO (--inputs <(...)) can be
// read only once: in one process it is read whole here and that array is kept in first_in.
Status CollectiveReader::read_m(std::optional<kernels::NpyArray>& first_in) {
    const std::string f0 = in_split_ ? rank_file(a_.inputs, 0) : a_.inputs;
    std::error_code ec;
    const bool once = !sliced_ && !std::filesystem::is_regular_file(f0, ec);
    auto x = once ? read_rows(f0, opts(a_.inputs, a_.tensor), in_split_ ? 1 : n_, -1, inputs_expect(in_split_))
                  : read_rows(f0, opts(a_.inputs, a_.tensor), in_split_ ? 1 : n_, -1, inputs_expect(in_split_), std::pair<int64_t, int64_t>{0, 0});
    if (!x) return x.error();
    if (once) first_in = std::move(*x);
    const kernels::NpyArray* header = once ? &*first_in : &*x;
    m_ = header->shape.back();
    // M is the inputs' row length: what is wrong with it is said of that file (not of an
    // --elements option verify does not have), before any data is read.
    const std::string bad_m = f0 + ": shape " + shape_text(header->shape) + ": ";
    if (m_ < 1) return make_error(ErrorCode::kBadFile, bad_m + "each rank's inputs hold no elements (M = 0); M must be at least 1");
    if (m_ > kMaxElements)
        return make_error(ErrorCode::kBadFile, bad_m + "M = " + std::to_string(m_) + " elements per rank is past the limit of 2^30 = 1073741824");
    if (m_ % n_ != 0)
        return make_error(ErrorCode::kBadFile, bad_m + "M = " + std::to_string(m_) + " elements per rank is not divisible by N = " +
                                                   std::to_string(n_) + " ranks (each rank's shard is M / N elements)");
    return start_chunks();
}

Status CollectiveReader::read_inputs(std::optional<kernels::NpyArray>& first_in) {
    auto in_range = [](const Held& h) { return std::pair{h.t.in_lo, h.t.in_hi}; };
    std::optional<kernels::NpyArray> whole_in;
    if (!in_split_ && !sliced_) {
        if (first_in) {
            whole_in = std::move(first_in);
        } else {
            auto x = read_rows(a_.inputs, opts(a_.inputs, a_.tensor), n_, m_, inputs_expect(false));
            if (!x) return x.error();
            whole_in = std::move(*x);
        }
    }
    for (int64_t r = 0; r < n_; ++r) {
        auto put = [&, r](Held& h, const float* src) {
            const int64_t w = h.t.in_hi - h.t.in_lo;
            std::copy(src, src + w, h.in.begin() + r * w);
        };
        auto got = in_split_ ? gather(rank_file(a_.inputs, r), opts(a_.inputs, a_.tensor), 1, 0, m_,
                                      inputs_expect(true) + ", and rank 0's has M = " + std::to_string(m_), in_range, put,
                                      r == 0 && first_in ? &*first_in : nullptr)
                             : gather(a_.inputs, opts(a_.inputs, a_.tensor), n_, r, m_, inputs_expect(false), in_range, put,
                                      whole_in ? &*whole_in : nullptr);
        if (!got) return got.error();
    }
    return Status::Ok();
}

// What each rank holds over each held chunk's output range.
Status CollectiveReader::read_outputs() {
    const int64_t cols = rs_ ? m_ / n_ : m_;
    std::optional<kernels::NpyArray> whole_out;
    if (!out_split_ && !sliced_) {
        auto y = read_rows(a_.outputs, opts(a_.outputs, out_tensor_), n_, cols, outputs_expect(false));
        if (!y) return y.error();
        whole_out = std::move(*y);
    }
    for (int64_t r = 0; r < n_; ++r) {
        auto out_range = [r](const Held& h) {
            for (int64_t k : h.t.out_ranks)
                if (k == r) return std::pair{h.t.out_lo, h.t.out_hi};
            return std::pair<int64_t, int64_t>{0, 0};  // this chunk needs nothing of rank r
        };
        bool needed = false;
        for (auto& [c, h] : held_) needed = needed || out_range(h).second > out_range(h).first;
        if (!needed) continue;
        auto put = [&, r](Held& h, const float* src) {
            for (size_t k = 0; k < h.t.out_ranks.size(); ++k)
                if (h.t.out_ranks[k] == r) {
                    const int64_t w = h.t.out_hi - h.t.out_lo;
                    std::copy(src, src + w, h.out.begin() + static_cast<int64_t>(k) * w);
                }
        };
        auto got = out_split_ ? gather(rank_file(a_.outputs, r), opts(a_.outputs, out_tensor_), 1, 0, cols, outputs_expect(true), out_range, put,
                                       nullptr)
                              : gather(a_.outputs, opts(a_.outputs, out_tensor_), n_, r, cols, outputs_expect(false), out_range, put,
                                       whole_out ? &*whole_out : nullptr);
        if (!got) return got.error();
        // One dtype for every rank's outputs: the tolerance is that dtype's, so a float32 file
        // judged with a bfloat16 file's rounding would pass what float32 does not allow.
        const std::string file = out_split_ ? rank_file(a_.outputs, r) : a_.outputs;
        if (first_file_.empty()) {
            first_file_ = file;
            first_dtype_ = *got;
            spec_.output_dtype = dtype_of(*got);
        } else if (*got != first_dtype_) {
            return mixed_dtypes(file, *got, first_file_, first_dtype_);
        }
    }
    return Status::Ok();
}

Status CollectiveReader::read() {
    std::optional<kernels::NpyArray> first_in;  // the inputs (rank 0's under {rank}) when read whole by read_m
    if (auto st = read_m(first_in); !st) return st;
    if (auto st = read_inputs(first_in); !st) return st;
    first_in.reset();
    return read_outputs();
}

// A run's inputs are finite (a NaN or inf in what a rank contributed is a bad dump, not a finding).
std::string CollectiveReader::nonfinite_input() const {
    const Accum t = spec_.config.input;  // a declared input type (D47): the dump holds what the kernel read
    for (const auto& [c, h] : held_) {
        const int64_t w = h.t.in_hi - h.t.in_lo;
        for (int64_t r = 0; r < n_; ++r)
            for (int64_t e = 0; e < w; ++e) {
                const float v = h.in[static_cast<size_t>(r * w + e)];
                if (std::isfinite(v) && (t == Accum::kFp32 || std::bit_cast<uint32_t>(kernels::cast_to(v, t)) == std::bit_cast<uint32_t>(v))) continue;
                return (in_split_ ? rank_file(a_.inputs, r) : a_.inputs) + ": rank " + std::to_string(r) + ", element " +
                       std::to_string(h.t.in_lo + e) + " is " + shortest(v) +
                       (std::isfinite(v) ? std::string(", not a ") + to_string(t) + " value: " + spec_.config.path_name() + " takes " +
                                               to_string(t) + " inputs (dump what the kernel read)"
                                         : ": a run's inputs must be finite");
            }
    }
    return "";
}

std::vector<ChunkTensors> CollectiveReader::chunks() {
    std::vector<ChunkTensors> out;
    for (auto& [c, h] : held_) {
        h.t.in = h.in.data();
        h.t.in_stride = h.t.in_hi - h.t.in_lo;
        h.t.out = h.out.data();
        h.t.out_stride = h.t.out_hi - h.t.out_lo;
        out.push_back(h.t);
    }
    return out;
}

// Under mpi each process read only its own ranks' files: their outputs' dtypes compared across the
// processes ("" when they agree); a process whose reading failed (`read`: false) offers none.
std::string mixed_dtypes_over_ranks(const CollectiveReader& reader, bool read) {
    const std::string mine = read && !reader.first_file().empty()
                                 ? std::string(1, static_cast<char>('0' + static_cast<int>(reader.first_dtype()))) + reader.first_file()
                                 : "";
    auto all = mpi::allgather_strings(mine);
    if (!all) return all.error().message;
    const std::string* ref = nullptr;
    for (const std::string& e : *all) {
        if (e.empty()) continue;
        if (!ref) ref = &e;
        else if (e[0] != (*ref)[0]) {
            auto dt = [](const std::string& x) { return static_cast<kernels::NpyDtype>(x[0] - '0'); };
            return mixed_dtypes(e.substr(1), dt(e), ref->substr(1), dt(*ref)).message;
        }
    }
    return "";
}

}  // namespace

Result<Printed> verify_collective(const VerifyCollectiveRequest& a) {
    // ---- options, before any file is read ---------------------------------------------------------
    // Under mpi every process parsed the same arguments; a user error is said once, by rank 0 (the
    // same Error on every rank: each problem is compared across the processes first).
    auto refuse = [](const std::string& msg) { return make_error(ErrorCode::kInvalidArgument, msg); };
    const bool on_mpi = a.backend == "mpi";
    if (a.backend != "cpu" && !on_mpi)
        return refuse("--backend " + a.backend + ": verify runs on cpu (one process) or mpi (one process per rank, under mpirun)");
    if (on_mpi && !mpi::active()) return refuse("--backend mpi needs a launcher: run it as mpirun -np P qtransit verify collective ...");
    auto agreed = [on_mpi](const std::string& problem) { return on_mpi ? mpi::first_error(problem) : problem; };
    const int me = on_mpi ? mpi::rank() : 0, procs = on_mpi ? mpi::size() : 1;
    const bool speaker = me == 0;

    auto spec_or = a.validate();
    if (!spec_or) return refuse(spec_or.error().message);
    // Where the reports go, before any file is read: rank 0 writes them, and every rank learns its verdict.
    // The directory is locked from here to the end, and the previous set removed (ReportRun).
    std::optional<reports::ReportRun> report_run;
    {
        std::string bad_dir;
        if (speaker && !a.report_dir.empty()) {
            auto r = reports::ReportRun::begin(a.report_dir, reports::report_file_names());
            if (!r) bad_dir = r.error().message;
            else report_run.emplace(std::move(*r));
        }
        if (bad_dir = agreed(bad_dir); !bad_dir.empty()) return refuse(bad_dir);
    }
    CollectiveVerifySpec spec = std::move(*spec_or);
    CollectiveReader reader(a, spec, me, procs, on_mpi);
    // Every file this process reads exists, before any is read (a missing rank file is named).
    if (const std::string missing = agreed(reader.missing()); !missing.empty())
        return refuse(missing + (has_rank_field(a.inputs) || has_rank_field(a.outputs)
                                     ? " (a per-rank file: {rank} is 0.." + std::to_string(a.ranks - 1) + ")"
                                     : ""));

    // ---- read: every chunk's inputs and outputs this process checks --------------------------------
    std::string problem;
    if (auto st = reader.read(); !st) problem = st.error().message;
    if (on_mpi && has_rank_field(a.outputs)) {
        const std::string mixed = mixed_dtypes_over_ranks(reader, problem.empty());
        if (problem.empty()) problem = mixed;
    }
    // The first non-finite input met, chunk by chunk and rank by rank, is named.
    if (problem.empty()) problem = reader.nonfinite_input();
    if (problem = agreed(problem); !problem.empty()) return refuse(problem);

    // ---- check ---------------------------------------------------------------------------------------
    const auto started = std::chrono::steady_clock::now();
    CollectiveVerification total;
    {
        auto acc = verify_chunks(spec, reader.chunks());  // none (more processes than ranks): an empty partial
        if (const std::string err = agreed(acc ? std::string() : acc.error().message); !err.empty()) return refuse(err);
        if (on_mpi) {
            auto all = combine_over_ranks(*acc);
            if (!all) return all.error();
            total = std::move(*all);
        } else {
            total = std::move(*acc);
        }
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    Printed p;
    p.passed = total.holds();
    if (!speaker) return p;

    // ---- say it ----------------------------------------------------------------------------------------
    if (!a.report_dir.empty()) {
        const reports::GateResult r =
            verify_collective_report("verify collective --inputs " + a.inputs + " --outputs " + a.outputs, seconds, total);
        if (auto st = report_run->commit(reports::report_files(r)); !st) return st.error();
    }
    const reports::VerifiedCollective shown = verified_collective(total);
    if (a.json) {
        p.out = reports::to_json(shown).dump(2) + "\n";
    } else {
        p.out = reports::to_text(shown);
        if (!a.report_dir.empty()) p.out += "(reports in " + a.report_dir + ")\n";
    }
    if (!total.holds()) {
        const auto& t = total.tiers[static_cast<size_t>(total.asked)];
        if (!t.holds) p.complaints.push_back(std::string("verify: ") + to_string(total.asked) + " violated: " + one_line(t.first));
        if (total.same_bits_applies && !total.same_bits)
            p.complaints.push_back("verify: the ranks do not hold the same bits: " + one_line(total.same_bits_first));
    }
    return p;
}

Result<VerifyQuantizeSetup> VerifyQuantizeRequest::validate() const {
    const VerifyQuantizeRequest& a = *this;
    auto format = resolve_format(a.format);
    if (!format) return format.error();
    if (a.block < 0) return make_error(ErrorCode::kInvalidArgument, "--block must be a positive integer (0: the format's own), got " +
                                                                      std::to_string(a.block));
    const int64_t block = a.block > 0 ? a.block : (format->fixed_block() ? format->fixed_block() : kDefaultBlock);
    if (auto st = format->check_block(block); !st) return make_error(st.error().code, "--block: " + st.error().message);
    auto conf = kernels::parse_conformance(a.conformance);
    if (!conf) return make_error(conf.error().code, "--conformance: " + conf.error().message);
    if (!a.dtype.empty() && a.dtype != "fp32" && a.dtype != "fp16" && a.dtype != "bf16")
        return make_error(ErrorCode::kInvalidArgument, "--dtype " + a.dtype + ": known: " + kernels::known_dtype_names());
    if (!a.offsets.empty() && !format->has_offset()) return make_error(ErrorCode::kInvalidArgument, "--offsets: " + format->name() + " has no offsets");
    return VerifyQuantizeSetup{*format, *conf, block};
}

Result<Printed> verify_quantize(const VerifyQuantizeRequest& a) {
    auto setup = a.validate();
    if (!setup) return setup.error();
    const FormatSpec* format = &setup->format;
    const kernels::Conformance* conf = &setup->conformance;
    std::optional<reports::ReportRun> report_run;
    if (!a.report_dir.empty()) {
        auto r = reports::ReportRun::begin(a.report_dir, reports::report_file_names());
        if (!r) return r.error();
        report_run.emplace(std::move(*r));
    }
    for (const std::string* f : {&a.in, &a.decoded, &a.codes, &a.scales, &a.offsets})
        if (!f->empty())
            if (const std::string why = unreadable(*f); !why.empty()) return make_error(ErrorCode::kBadFile, why);

    auto x = kernels::read_tensor(a.in, {a.tensor, a.dtype, true});
    if (!x) return x.error();
    auto y = kernels::read_tensor(a.decoded, {a.decoded_tensor, a.dtype, true});
    if (!y) return y.error();
    if (y->shape != x->shape)
        return make_error(ErrorCode::kBadFile, a.decoded + ": shape " + shape_text(y->shape) + ", but the input " + a.in + " is " + shape_text(x->shape) +
                    " (the decoded values have the input's shape)");
    RunQuantization run;
    run.decoded = y->data;
    if (!a.codes.empty()) {
        if (is_npy_file(a.codes)) {
            auto c = kernels::read_npy_integers(a.codes);
            if (!c) return c.error();
            if (c->elements() != x->elements())
                return make_error(ErrorCode::kBadFile, a.codes + ": shape " + shape_text(c->shape) + ", but the input is " + shape_text(x->shape) +
                            " (one code per element)");
            run.has_codes = true;
            run.codes.assign(c->data.begin(), c->data.end());
        } else {
            auto bytes = read_file_bytes(a.codes);
            if (!bytes) return bytes.error();
            run.has_wire = true;
            run.wire_codes = std::move(*bytes);
        }
    }
    auto floats = [&](const std::string& f, std::vector<float>& into, bool& flag) -> Status {
        if (f.empty()) return Status::Ok();
        auto s = kernels::read_tensor(f, {"", a.dtype, true});  // --dtype: what raw uint16 bits are, as for --in and --decoded
        if (!s) return s.error();
        into = std::move(s->data);
        flag = true;
        return Status::Ok();
    };
    if (auto st = floats(a.scales, run.scales, run.has_scales); !st) return st.error();
    if (auto st = floats(a.offsets, run.offsets, run.has_offsets); !st) return st.error();

    // NVFP4 (D58): the blocks take the amax of the whole input tensor (every shard's).
    const FormatSpec resolved = format->for_tensor(x->data);
    format = &resolved;
    // A tiled format (FORMATS.md section 8): the input, the decoded values and the integer codes in
    // tile order, as the blocks are; the scales and a wire file are in that order already.
    if (auto st = tile_order_run(*format, x->shape, a.shard, x->data, run); !st)
        return make_error(a.shard != 0 ? ErrorCode::kInvalidArgument : ErrorCode::kBadFile,
                          (a.shard != 0 ? "--" : a.in + ": ") + st.error().message);
    const auto started = std::chrono::steady_clock::now();
    const int64_t block = setup->block;
    auto r = run_check(*format, x->data, block, a.shard, run, *conf);
    if (!r) {
        std::string msg = r.error().message;
        for (auto [what, file] : {std::pair{"decoded", a.decoded}, std::pair{"codes", a.codes}, std::pair{"scales", a.scales},
                                  std::pair{"offsets", a.offsets}})
            if (msg.starts_with(what)) msg = file + ": " + msg;  // name the file the count or code came from
        return make_error(ErrorCode::kBadFile, msg);
    }
    const CodecCheck& c = *r;
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    const reports::VerifiedQuantization v = verified_quantization(*format, block, c, run, *conf, {a.decoded, a.codes, a.scales, a.offsets});
    const std::string text = reports::to_text(v);
    const nlohmann::json j = reports::to_json(v);
    if (!a.report_dir.empty()) {
        const reports::GateResult rep = verify_quantize_report("verify quantize --in " + a.in + " --decoded " + a.decoded, seconds, v, j, text);
        if (auto st = report_run->commit(reports::report_files(rep)); !st) return st.error();
    }
    Printed p;
    p.out = a.json ? j.dump(2) + "\n" : text;
    if (!c.conforms)
        p.complaints.push_back(std::string("verify: ") + kernels::to_string(*conf) + " violated: " +
                               one_line(*conf == kernels::Conformance::kExact ? c.first_difference : c.violation));
    p.passed = c.conforms;
    return p;
}

}  // namespace qtransit::gate
