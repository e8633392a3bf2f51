// The subcommands of `qtransit`. Each returns the process exit code: 0 success, 1 a check that
// failed (a bound, a bit-exactness verdict), 2 a user error (bad file, bad option, NaN under the
// `error` policy); user errors print one line on stderr before returning 2.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "qtransit/common/status.hpp"
#include "qtransit/gate/gate.hpp"
#include "qtransit/gate/sweep.hpp"
#include "qtransit/gate/verify_run.hpp"
#include "qtransit/kernels/npy.hpp"
#include "qtransit/kernels/plugin.hpp"

namespace qtransit::cli {

inline constexpr int kExitOk = 0, kExitCheckFailed = 1, kExitUsage = 2;

// The message with control characters escaped (\n, \t, \xNN) and cut to 1,000 bytes around the
// middle: what fail() prints.
std::string one_line(const std::string& message);
// Print "qtransit: <message>" on stderr, as one_line(), and return kExitUsage.
int fail(const Error& e);
int fail(const std::string& message);
// The gate's progress on stderr: on a terminal "\r[i/total] format dist paths N=.. (j/n)" and a cleared
// line at the end; else one line per finished group.
std::function<void(const gate::GateProgress&)> progress_printer(bool tty);

// --codec (loaded; null when not given) and the format that it and --format name together: with a
// codec, its format, which --format may repeat but not contradict, and --rounding must stay
// nearest; without one, --format under --rounding. The Error is the one line to print.
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

struct QuantizeArgs {
    std::string format, in, nonfinite = "error", out_dir;
    int64_t block = 32;
    bool json = false;
    std::string rounding = "nearest";  // nearest, or stochastic: the format's -sr twin
    uint64_t seed = 0;                 // stochastic rounding's key (kernels::CodecOptions::seed)
    std::string codec;                 // a codec plugin (.so) in place of qtransit's kernel
    std::string conformance = "exact"; // with --codec: exact or bounded
    int64_t shard = 0;                 // blocks restart every `shard` elements (0: the whole tensor)
    bool no_hunt = false;              // with --codec: the tensor only, not the generated boundary inputs
};
int run_quantize(const QuantizeArgs& a);
// quantize's options for qtransit's own kernels (no --codec), checked before any work: the format
// under --rounding, the block, the non-finite policy. The Error is the line `quantize` prints.
struct QuantizeSetup {
    FormatSpec format;
    Nonfinite policy = Nonfinite::kError;
};
Result<QuantizeSetup> quantize_setup(const QuantizeArgs& a);

struct FormatsArgs {
    int64_t block = 32;
    bool json = false;
};
int run_formats(const FormatsArgs& a);
// `qtransit formats show NAME|FILE.toml`: the TOML declaration on stdout.
int run_formats_show(const std::string& target);
struct ValidateArgs {
    std::string file;                          // the declaration (FILE.toml)
    std::string report_dir = "qtransit-validate";
    uint64_t seed = 1;
    bool quick = false;                        // fewer blocks, N and elements: a few seconds
    std::string codec;                         // a codec plugin (.so) of the format: the kernel under test
};
// `qtransit formats validate FILE.toml`: every generic property and every path on the declared
// format; the gate's reports. 0 all promised properties and bounds hold, 1 one fails, 2 bad file.
int run_formats_validate(const ValidateArgs& a);

int run_info(bool json);

struct BenchArgs {
    int64_t mib = 64;
    int repeats = 7;
    int threads = 0;  // 0: all hardware threads for the multi-thread rows
    bool json = false;
    int64_t block = 32;
    std::vector<std::string> formats{"int8", "int4"};  // names or .toml declarations
};
int run_bench(const BenchArgs& a);

struct SurveyArgs {
    std::vector<std::string> formats;        // empty: all built-in
    std::vector<std::string> distributions;  // empty: all
    int64_t elements = 1 << 16;
    int64_t block = 32;
    uint64_t seed = 1;
    std::string report_dir = "qtransit-report";
    bool json = false;
};
int run_survey(const SurveyArgs& a);

struct SimulateArgs {
    std::vector<std::string> paths;
    std::vector<int64_t> ranks;
    int64_t ranks_per_node = 0;  // 0: 8 when 8 divides N, else N (one node)
    int64_t elements = 0;
    std::string format;
    int64_t block = 32;
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
};
// What `qtransit simulate` computed, before it prints (the Python module's simulate()).
struct SimulateOutcome {
    gate::SweepResult result;
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
};
// Every option checked before any work, then the sweep. `inputs` (one [N, M] array) stands for
// --in when given (a.in then only names it). An Error of kind kCodec: a codec failed on valid
// input (a finding); any other: the one line a user error prints.
Result<std::unique_ptr<SimulateOutcome>> simulate(const SimulateArgs& a, const kernels::NpyArray* inputs = nullptr,
                                                  const std::function<void(size_t, size_t, int64_t)>& on_group = {});
int run_simulate(const SimulateArgs& a);

struct CheckArgs {
    std::string config;                      // empty: the embedded default gate
    std::string report_dir = "qtransit-report";
    std::string baseline, junit;
    bool update_baseline = false;
    std::string backend = "cpu";             // as simulate's --backend
    std::string codec;                       // a codec plugin (.so) replacing gate.codec
    std::string conformance;                 // exact | bounded, replacing gate.conformance
    bool quick = false;                      // the quick tier (gate::quick_tier)
    std::string config_text;                 // a config's TOML in place of reading `config` (which then names it)
};
int run_check(const CheckArgs& a);
// The gate `check` runs for these options: the config (text, file or the default), --conformance,
// the codec (`codec`, already loaded, or --codec's library), the quick tier. The Error is the line
// `check` prints.
Result<gate::GateConfig> check_config(const CheckArgs& a, std::shared_ptr<const kernels::PluginCodec> codec = nullptr);

// `qtransit verify collective`: a collective run elsewhere, judged (gate/verify_run.hpp).
struct VerifyCollectiveArgs {
    std::string path, format, inputs, outputs;  // inputs/outputs: one file, or a pattern with {rank}
    int64_t ranks = 0, ranks_per_node = 0, block = 32;
    std::string accum = "fp32", target = "sum", conformance;  // conformance "": the path's default tier
    std::vector<int64_t> ring_order;
    std::string dtype, tensor, output_tensor;  // how the files are read (kernels/tensor_file.hpp)
    std::string report_dir = "qtransit-verify";
    bool json = false;
    std::string backend = "cpu";  // cpu, or mpi (one process per rank: each reads its own chunks)
};
int run_verify_collective(const VerifyCollectiveArgs& a);
// Its options as a spec, checked (path, format, block, accum, N, G, target, ring order, tier, dtype),
// before any file is read; the caller sets config.elements and output_dtype from the tensors.
Result<gate::CollectiveVerifySpec> verify_collective_spec(const VerifyCollectiveArgs& a);

// `qtransit verify quantize`: one quantization done elsewhere against the reference.
struct VerifyQuantizeArgs {
    std::string format, in, decoded, codes, scales, offsets;
    int64_t block = 32, shard = 0;
    std::string conformance = "exact";
    std::string dtype, tensor, decoded_tensor;  // tensor: --in's; decoded_tensor: --decoded's ("" : the file's only one)
    std::string report_dir = "qtransit-verify";
    bool json = false;
};
int run_verify_quantize(const VerifyQuantizeArgs& a);
// Its options, checked before any file is read: the format, the block, the conformance, --dtype,
// --offsets only for a format with offsets.
struct VerifyQuantizeSetup {
    FormatSpec format;
    kernels::Conformance conformance = kernels::Conformance::kExact;
};
Result<VerifyQuantizeSetup> verify_quantize_setup(const VerifyQuantizeArgs& a);

}  // namespace qtransit::cli
