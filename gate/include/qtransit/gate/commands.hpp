// Every command of `qtransit`, as the application layer both the command line and the Python module
// call (issue 48): one request struct per command, whose validate() checks every option before any
// work and returns the Error a user is shown (one line), and one function that runs the command and
// returns its outcome. The outcome holds what was computed, and what a caller prints: `out` (the
// command's stdout, text or JSON as the request asked), `complaints` (the lines a failed check adds
// on stderr, each to be printed after "qtransit: ") and `passed`. Nothing here prints or exits.
//
// Errors: an Error of kind kCodec is a finding (a user's codec broke on valid input: the command
// fails as a check does, exit 1); any other is a user's mistake (exit 2). Under one process per rank
// (--backend mpi), a function's Error is the same on every rank, and only `speaker` ranks (rank 0)
// print: a request's speaker() says which.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qtransit/common/status.hpp"
#include "qtransit/gate/gate.hpp"
#include "qtransit/gate/survey.hpp"
#include "qtransit/gate/sweep.hpp"
#include "qtransit/gate/throughput.hpp"
#include "qtransit/gate/validate.hpp"
#include "qtransit/gate/verify_run.hpp"
#include "qtransit/kernels/npy.hpp"
#include "qtransit/kernels/plugin.hpp"

namespace qtransit::gate {

// What a command leaves for its caller to print.
struct Printed {
    std::string out;                      // stdout
    std::vector<std::string> complaints;  // stderr lines (without "qtransit: "), when a check failed
    bool passed = true;                   // false: exit 1
};

// --codec (loaded; null when not given) and the format that it and --format name together: with a
// codec, its format, which --format may repeat but not contradict, and --rounding must stay
// nearest; without one, --format under --rounding.
struct CodecAndFormat {
    std::shared_ptr<const kernels::PluginCodec> codec;
    FormatSpec format;
};
Result<CodecAndFormat> codec_and_format(const std::string& codec_path, const std::string& format, const std::string& rounding);
// The same with a codec already loaded (the Python module's callables).
Result<CodecAndFormat> codec_and_format(std::shared_ptr<const kernels::PluginCodec> codec, const std::string& format,
                                        const std::string& rounding);

// Per-rank files: a name with {rank} in it stands for one file per rank (in.{rank}.npy).
bool has_rank_field(const std::string& pattern);
std::string rank_file(const std::string& pattern, int64_t rank);  // every {rank} replaced by the rank

// Where a command's stdout goes as it is produced (a table's rows as its cases finish); an empty
// one: into Printed::out, whole at the end.
using Emit = std::function<void(const std::string&)>;

// Whether this process prints under `backend` (every process, or rank 0 under one process per rank).
bool speaker(const std::string& backend);

// ---- quantize -----------------------------------------------------------------------------------
// One tensor through qtransit's kernel (or a codec plugin), against the reference bit for bit and
// the per-element bound in exact arithmetic; with a codec, also the generated boundary inputs.
struct QuantizeSetup {
    FormatSpec format;
    Nonfinite policy = Nonfinite::kError;
    std::shared_ptr<const kernels::PluginCodec> codec;  // null: qtransit's kernel
    kernels::Conformance conformance = kernels::Conformance::kExact;
    int64_t block = 32;  // the request's, or the format's fixed block (a tile's area), else 32
};
struct QuantizeRequest {
    std::string format, in, nonfinite = "error", out_dir;
    int64_t block = 0;            // 0: the format's fixed block (nvfp4's 16, a tile's area), else 32
    std::vector<int64_t> shape;   // --shape: the tensor's shape (empty: the .npy's); a tiled format reads it as [R, C]
    bool json = false;
    std::string rounding = "nearest";  // nearest, or stochastic: the format's -sr twin
    uint64_t seed = 0;                 // stochastic rounding's key (kernels::CodecOptions::seed)
    std::string codec;                 // a codec plugin (.so) in place of qtransit's kernel
    std::string conformance = "exact"; // with --codec: exact or bounded
    int64_t shard = 0;                 // blocks restart every `shard` elements (0: the whole tensor)
    bool no_hunt = false;              // with --codec: the tensor only, not the generated boundary inputs
    // Every option (loading --codec), before the tensor is read.
    Result<QuantizeSetup> validate() const;
};
Result<Printed> quantize(const QuantizeRequest& r);

// ---- simulate -----------------------------------------------------------------------------------
// What SimulateRequest::validate makes of the options: the sweep (without its inputs, dump and
// progress), the quantized paths' format and codec, whether only 16-bit paths run.
struct SimulatePlan {
    SweepSpec spec;
    FormatSpec format;
    std::shared_ptr<const kernels::PluginCodec> codec;
    bool only_typed = false;
};
struct SimulateRequest {
    std::vector<std::string> paths;
    std::vector<int64_t> ranks;
    int64_t ranks_per_node = 0;  // 0: 8 when 8 divides N, else N (one node)
    int64_t elements = 0;
    std::string format;
    int64_t block = 0;  // 0: the (first) format's fixed block (flashinfer-fp8's 256, the MX formats' 32), else 32
    std::string dist = "normal";
    uint64_t seed = 1;
    std::string accum = "fp32";
    std::string divide = "none";
    std::string rotation = "each-hop";
    std::string in, dump;
    bool json = false;
    int threads = 0;
    std::string backend = "cpu";  // cpu, device (N ranks on one GPU), nccl (one rank per GPU), mpi
    std::string rounding = "nearest";  // nearest, or stochastic: the format's -sr twin keyed by seed
    std::string codec;                 // a codec plugin (.so) running every Q and D
    std::shared_ptr<const kernels::PluginCodec> codec_object;  // or one already loaded (Python's callables)
    bool keep_outputs = false;         // keep the one run's output rows in SimulateOutcome::dump (as --dump writes)
    // Every option but those about --in's array (paths, formats per stage, codec, block, accum,
    // divide, rotation, distribution, backend), loading --codec; never an Error of kind kCodec.
    Result<SimulatePlan> validate() const;
};
// What simulate computed.
struct SimulateOutcome {
    SweepResult result;
    FormatSpec format;                 // the quantized paths' (the first stage's with a per-stage list)
    std::shared_ptr<const kernels::PluginCodec> codec;
    Accum accum = Accum::kFp32;
    Divide divide = Divide::kNone;
    Rotation rotation = Rotation::kEachHop;
    bool only_typed = false;           // only 16-bit paths (no format)
    int64_t elements = 0;
    std::string dist_name;             // the distribution, or "file:<in>"
    std::vector<float> dump;           // --dump or keep_outputs: the run's output rows
    std::vector<int64_t> dump_shape;
    nlohmann::json json(uint64_t seed) const;  // `simulate --json`'s object: {"runs": [...], "fits": [...]}
    // What the command prints for the request: the table (or JSON) on stdout; a bound violated per
    // run as a complaint; under one process per rank, each run's checking cost (`costs`, stderr).
    Printed printed(const SimulateRequest& r) const;
    std::string costs(const SimulateRequest& r) const;
};
// validate(), then --in read (or `inputs`) and checked against --ranks and --elements, --dump's
// place checked, then the sweep; --dump written (by the speaker). `inputs`
// (one [N, M] array) stands for --in when given (r.in then only names it). on_group: (group,
// groups, N) as each group starts.
Result<std::unique_ptr<SimulateOutcome>> simulate(const SimulateRequest& r, const kernels::NpyArray* inputs = nullptr,
                                                  const std::function<void(size_t, size_t, int64_t)>& on_group = {});

// ---- check (the numerics gate) ------------------------------------------------------------------
struct CheckRequest {
    std::string config;                      // empty: the embedded default gate
    std::string report_dir = "qtransit-report";
    std::string baseline, junit;
    bool update_baseline = false;
    std::string backend = "cpu";             // as simulate's --backend
    std::string codec;                       // a codec plugin (.so) replacing gate.codec
    std::string conformance;                 // exact | bounded, replacing gate.conformance
    bool quick = false;                      // the quick tier (quick_tier)
    std::string config_text;                 // a config's TOML in place of reading `config` (which then names it)
    // The gate these options run: the config (text, file or the default), --conformance, the codec
    // (`codec`, already loaded, or --codec's library), the quick tier.
    Result<GateConfig> validate(std::shared_ptr<const kernels::PluginCodec> codec = nullptr) const;
};
// The gate run, its reports written into report_dir (and --junit, the baseline), the summary.
// Under one process per rank every problem found before the runs is compared across the ranks
// first, so that all of them fail with the same message.
Result<Printed> check(const CheckRequest& r, const std::function<void(const GateProgress&)>& progress = {});

// ---- verify collective --------------------------------------------------------------------------
// A collective run elsewhere (its inputs and what every rank held after it, .npy or .safetensors,
// one file or one per rank), judged against the path in exact arithmetic (verify_run.hpp).
struct VerifyCollectiveRequest {
    std::string path, format, inputs, outputs;  // inputs/outputs: one file, or a pattern with {rank}
    int64_t ranks = 0, ranks_per_node = 0, block = 0;  // block 0: the format's fixed block, else 32
    std::string accum = "fp32", target = "sum", conformance;  // conformance "": the path's default tier
    std::vector<int64_t> ring_order;
    std::string dtype, tensor, output_tensor;  // how the files are read (kernels/tensor_file.hpp)
    std::string report_dir = "qtransit-verify";
    bool json = false;
    std::string backend = "cpu";  // cpu, or mpi (one process per rank: each reads its own chunks)
    // Its options as a spec (path, format, block, accum, N, G, target, ring order, tier, dtype),
    // before any file is read; the caller sets config.elements and output_dtype from the tensors.
    Result<CollectiveVerifySpec> validate() const;
};
Result<Printed> verify_collective(const VerifyCollectiveRequest& r);

// ---- verify quantize ----------------------------------------------------------------------------
// One quantization done elsewhere, against the reference.
struct VerifyQuantizeSetup {
    FormatSpec format;
    kernels::Conformance conformance = kernels::Conformance::kExact;
    int64_t block = 32;  // the request's, or the format's fixed block (a tile's area), else 32
};
struct VerifyQuantizeRequest {
    std::string format, in, decoded, codes, scales, offsets;
    int64_t block = 0, shard = 0;  // block 0: the format's fixed block, else 32
    std::string conformance = "exact";
    std::string dtype, tensor, decoded_tensor;  // tensor: --in's; decoded_tensor: --decoded's ("" : the file's only one)
    std::string report_dir = "qtransit-verify";
    bool json = false;
    // The format, the block, the conformance, --dtype, --offsets only for a format with offsets.
    Result<VerifyQuantizeSetup> validate() const;
};
Result<Printed> verify_quantize(const VerifyQuantizeRequest& r);

// ---- formats, formats show, formats validate ----------------------------------------------------
struct FormatsRequest {
    int64_t block = 32;  // the wire-byte column's block
    bool json = false;
};
Result<Printed> formats(const FormatsRequest& r);
// A format's TOML declaration (a built-in's name, or FILE.toml).
Result<Printed> formats_show(const std::string& target);
// `formats validate FILE.toml`: every generic property and every path on the declared format (or a
// codec's), the gate's reports; passed when every promised property and bound holds.
struct FormatsValidateRequest {
    std::string file;                          // the declaration (FILE.toml)
    std::string report_dir = "qtransit-validate";
    uint64_t seed = 1;
    bool quick = false;                        // fewer blocks, N and elements: a few seconds
    std::string codec;                         // a codec plugin (.so) of the format: the kernel under test
    struct Setup {
        FormatSpec format;
        std::shared_ptr<const kernels::PluginCodec> codec;
        std::string source;                    // the file, or "codec <name>"
    };
    // The declaration read and registered, the codec loaded and matched to it.
    Result<Setup> validate() const;
};
// The work of formats validate on a validated request, without its report directory (Python's).
Result<FormatValidation> validate_declared(const FormatsValidateRequest& r, const FormatsValidateRequest::Setup& s,
                                          const std::function<void(const GateProgress&)>& progress = {});
// note: the line said before the work starts (stderr); progress: the path runs'.
Result<Printed> formats_validate(const FormatsValidateRequest& r, const Emit& note = {},
                                 const std::function<void(const GateProgress&)>& progress = {});

// ---- paths, paths show, paths validate (docs/PATHS.md) -------------------------------------------
// `paths`: every built-in path as its declaration (schedule, wire, types, division), text or JSON.
Result<Printed> paths(bool json);
// A path's TOML declaration (a built-in's name, or every declaration of FILE.toml).
Result<Printed> paths_show(const std::string& target);
// `paths validate FILE.toml`: every declaration read and resolved (a mistake: an Error, exit 2), then
// each run by simulate at N = 4 and 8 (a wire of "any": int8), every output checked against its
// bounds in exact arithmetic; passed when every bound holds. seed: the inputs'.
struct PathsValidateRequest {
    std::string file;
    uint64_t seed = 1;
};
Result<Printed> paths_validate(const PathsValidateRequest& r);

// ---- survey -------------------------------------------------------------------------------------
struct SurveyRequest {
    std::vector<std::string> formats;        // empty: all built-in
    std::vector<std::string> distributions;  // empty: all
    int64_t elements = 1 << 16;
    int64_t block = 0;  // 0: 32, and a format with a fixed block (nvfp4's 16, a tile's area) its own
    uint64_t seed = 1;
    std::string report_dir = "qtransit-report";
    bool json = false;
    // The formats (every built-in, or when a block is given every built-in that takes it, when none
    // is named), the distributions and the block, checked: the survey's spec (its on_case left for
    // the caller).
    Result<SurveySpec> validate() const;
};
// Every format over every distribution, survey.json and survey.md in report_dir; the table's rows
// go to `emit` as the cases finish; progress: "[i/n] format dist" per case under --json.
Result<Printed> survey(const SurveyRequest& r, const Emit& emit = {}, const std::function<void(int, int, const std::string&)>& progress = {});

// ---- bench --------------------------------------------------------------------------------------
struct BenchRequest {
    int64_t mib = 64;
    int repeats = 7;
    int threads = 0;  // 0: all hardware threads for the multi-thread rows
    bool json = false;
    int64_t block = 0;  // 0: each format's own fixed block (nvfp4's 16, a tile's area), else 32
    std::vector<std::string> formats{"int8", "int4"};  // names or .toml declarations
    Result<ThroughputSpec> validate() const;            // the block and the formats
};
// Encode/decode throughput as a ratio to memcpy in the same run; rows to `emit` as measured.
Result<Printed> bench(const BenchRequest& r, const Emit& emit = {});

// ---- info ---------------------------------------------------------------------------------------
struct InfoRequest {
    bool json = false;
    std::string allocator;  // the process's allocator, as the program that links it says
};
Printed info(const InfoRequest& r);

}  // namespace qtransit::gate
