// The numerics gate behind `qtransit check`, as a library: its configuration (TOML or built in code,
// src/config.cpp), the runs and kernel checks it makes (src/gate.cpp), and the verdicts it draws from
// them (verdicts.hpp). Results go into qtransit::reports' model; the writers live there. Nothing
// here prints or exits: progress goes to GateOptions::progress, failures come back as Errors.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "qtransit/collectives/transport.hpp"
#include "qtransit/common/format.hpp"
#include "qtransit/common/path_decl.hpp"
#include "qtransit/common/transit.hpp"
#include "qtransit/kernels/inputs.hpp"
#include "qtransit/kernels/plugin.hpp"
#include "qtransit/reports/gate_result.hpp"

namespace qtransit::gate {

// What a budget bounds, and what a baseline compares.
enum class Metric : uint8_t { kRelRmsError, kMaxAbsError, kRmsError, kMaxErrorToAPosteriori };
const char* to_string(Metric m);
// An Error listing the known names for anything else.
Result<Metric> parse_metric(std::string_view name);
double metric_of(const reports::GateRun& r, Metric m);

// scaling: the fitted exponent of relative RMS error against N of `path` must lie in [min, max]
// for every format and distribution listed.
struct ScalingRule {
    PathKind path = PathKind::kRingRs;
    // A declared path's name (one gate.paths names: fsdp-float8-ag, a user's file's), "" for a built-in
    // one; `path` is then its schedule and run_format the format its runs carry when it fixes one (its
    // own wire, "none", or its 16-bit type), both set by the config's validation.
    std::string label, run_format;
    std::string path_name() const { return label.empty() ? std::string(path_info(path).name) : label; }
    std::vector<FormatSpec> formats;                 // empty (and staged empty): every format of the gate
    std::vector<std::vector<FormatSpec>> staged;     // per-stage lists "A,B" (D25) the rule names
    std::vector<kernels::Distribution> dists;        // empty: every distribution of the gate
    double min = -1e300, max = 1e300;
    std::string why;                                 // shown in the verdict's message
};

// budget: the largest `metric` over the matching runs is at most `max`.
struct Budget {
    std::string name;
    PathKind path = PathKind::kRingRs;
    // A declared path's name (gate.paths names it: flashinfer-fp8-2shot, a user's file's), "" for a
    // built-in one; `path` is then its schedule, set with run_format by the config's validation.
    std::string label;
    // The format the matching runs carry where it is not `format`'s name: a declared path's own wire
    // ("flashinfer-fp8"), "none", or its 16-bit type.
    std::string run_format;
    bool format_given = true;  // false: a declared path's budget without `format` (its own wire's, found at validation)
    std::string path_name() const { return label.empty() ? std::string(path_info(path).name) : label; }
    std::string format_name() const;
    FormatSpec format{};
    std::vector<FormatSpec> stages;                  // a per-stage list "A,B" (D25); empty: `format` alone
    std::string dist;                                // empty: every distribution
    int64_t ranks = 0;                               // 0: every N
    Metric metric = Metric::kRelRmsError;
    double max = 0;
};

// The name a run carries for one format, or for a per-stage list: "A,B" (PathConfig::format_name).
std::string stages_name(const std::vector<FormatSpec>& stages);

struct GateConfig {
    std::string source = "default";
    std::vector<FormatSpec> formats;
    // gate.formats entries "A,B" (D25, D28): one format per stage, run on the gate's paths that have
    // two stages (a2a-hier-rs, two-shot-ar, hpz-ag-requant), named "A,B" in runs, verdicts and budgets.
    std::vector<std::vector<FormatSpec>> staged;
    std::vector<PathKind> paths;
    // gate.paths entries that are declarations other than a built-in under its own name (D43, D45): a
    // declaration-only built-in (nccl-fp8-*-avg, deepep-fp8-dispatch) or a .toml file's. Each runs as
    // its schedule with what it fixes (its add type, division, rotation, wire format), named by it.
    std::vector<PathDecl> declared;
    std::vector<kernels::Distribution> dists;
    std::vector<int64_t> ranks, tree_ranks;  // tree-rs runs at tree_ranks (powers of two)
    bool tree_ranks_derived = true;          // tree_ranks not given: derived from ranks
    int64_t ranks_per_node = kDefaultRanksPerNode;  // 0: default_ranks_per_node(N)
    int64_t elements = 0, block = 32;
    bool block_given = false;  // the user's config set gate.block (else a codec's fixed block replaces it)
    uint64_t seed = 1;
    // gate.accum: the type every path's sums are rounded to (fp32, fp16, bf16; D11, D24).
    Accum accum = Accum::kFp32;
    // gate.divide: where the 1/N of a mean goes on the reduce paths (none, pre, post; D27).
    Divide divide = Divide::kNone;
    int threads = 0;
    bool gpu = true;                         // compare GPU kernels when a GPU answers
    bool long_codec_call = true;             // a codec's one call past 2^24 elements (boundaries.hpp); off in the quick tier
    double baseline_margin = 0.10;
    std::vector<Metric> baseline_metrics{Metric::kRelRmsError, Metric::kMaxAbsError};
    std::vector<ScalingRule> scaling;
    std::vector<Budget> budgets;
    // A user's codec (gate.codec, a path relative to the config file; `check --codec`): the gate
    // runs its format only, with its encode and decode wherever it runs qtransit's kernels, and
    // judges it under `conformance` (gate.conformance; `--conformance`).
    std::string codec_path;
    std::shared_ptr<const kernels::PluginCodec> codec;
    kernels::Conformance conformance = kernels::Conformance::kExact;
    // The codec runs its own format; any other format of the config keeps qtransit's kernels (null).
    const kernels::PluginCodec* codec_for(const FormatSpec& f) const {
        return codec && codec->format() == f ? codec.get() : nullptr;
    }
};

// Loads the codec at `path` into cfg: its block constraints must take gate.block (a format with a
// fixed block, nvfp4's 16 or a tile's area, sets it where the user's config did not); the gate's
// formats become the codec's one format, and budgets about other formats are dropped. The Error names the
// library and what is wrong (docs/PLUGIN.md).
Status attach_codec(GateConfig& cfg, const std::string& path);
// The same for a codec already loaded (PluginCodec::from_descriptor: the Python module's callables).
Status attach_codec(GateConfig& cfg, std::shared_ptr<const kernels::PluginCodec> codec);

// The embedded default gate (`qtransit check` with no --config), as TOML.
const char* default_gate_toml();
// The default gate with `toml` (the file's text) applied on top: keys given replace the default's;
// [[scaling]] and [[budget]] replace the default's lists when present, and each of the user's must
// name a path, format and distribution the gate runs. An Error says
// "<source>:<line>: <key>: <what>". load_codec false: gate.codec is not loaded (a codec given on the
// command line replaces it; the caller attaches that one).
Result<GateConfig> parse_gate_config(const std::string& toml, const std::string& source, bool load_codec = true);
Result<GateConfig> load_gate_config(const std::string& path, bool load_codec = true);
// The checks parse_gate_config makes, for a config built in code: every field in range, M divisible
// by every N, G dividing every N, tree-rs at powers of two, budgets and rules naming what the gate
// runs. Derives tree_ranks from ranks when tree_ranks_derived. An Error names the field
// ("<source>: gate.elements: ...").
Status validate(GateConfig& cfg);

// The quick tier (`qtransit check --quick`, issue 16): the same formats, paths, rules and budgets on
// smaller runs, for every pull request: N = the config's two smallest (tree-rs: its two smallest),
// M = their least common multiple times the block (one block per shard at the largest N), the
// config's first two distributions. Budgets on a distribution or an N the quick tier does not run
// are left out of it. The default gate's quick tier runs N = 8, 64 and M = 2,048 on normal and heavy
// inputs. An Error when the smaller config is not valid (validate()).
Result<GateConfig> quick_tier(const GateConfig& cfg);

// One step of the gate's progress: a group (one format on one distribution) starting a sweep at
// some N, or finished.
struct GateProgress {
    size_t group = 0, groups = 0;        // 0-based index of the (format, distribution) group, and how many
    std::string format, dist;
    bool finished = false;               // false: a sweep at N starts (part, n, step, steps); true: the group is done
    bool tree = false;                   // the sweep is tree-rs's (at tree_ranks)
    int64_t n = 0;
    size_t step = 0, steps = 0;
    size_t runs = 0;                     // finished: runs made
    bool holds = true, refused = false;  // finished: every bound and k held; the input was refused (binary16 range)
    double seconds = 0;                  // finished: the group's wall time
};

struct GateOptions {
    const std::vector<reports::GateRun>* baseline = nullptr;  // compare against these runs
    std::string baseline_path;
    std::function<void(const GateProgress&)> progress;  // called as the gate goes; may be empty
    // Where the paths run (backend_problem says whether the config can run there: under one process
    // per rank, mpi or nccl under mpirun, the gate's N is the number of processes).
    collectives::Backend backend = collectives::Backend::kCpu;
};

// Runs everything, draws every verdict. An Error only for something that is not a verdict (an
// unexpected library error); a failed check is a failed verdict.
// Whether this machine (and this process's limits) has the memory the gate's kernel check needs:
// an Error naming both figures when not. run_gate checks it first; a command calls it before it
// takes its report directory, so a gate refused for memory leaves the previous reports.
Status check_gate_memory(const GateConfig& cfg);
Result<reports::GateResult> run_gate(const GateConfig& config, const GateOptions& options);

// Why `config` cannot run on `backend` ("" when it can): no GPU for device or nccl, N not the number
// of GPUs for nccl in one process, or, one process per rank, N not the number of processes.
// `name` is the backend as the user wrote it.
std::string backend_problem(const GateConfig& config, collectives::Backend backend, const std::string& name);

// The time now, UTC, ISO 8601 (a report's started_at).
std::string now_utc();

}  // namespace qtransit::gate
