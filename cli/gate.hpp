// The numerics gate behind `qtransit check`: its configuration (TOML, gate_config.cpp), the runs
// and kernel checks it makes, and the verdicts it draws from them (gate.cpp). Results go into
// qtransit::reports' model; the writers live there.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "qtransit/collectives/transport.hpp"
#include "qtransit/common/format.hpp"
#include "qtransit/common/transit.hpp"
#include "qtransit/kernels/inputs.hpp"
#include "qtransit/reports/gate_result.hpp"

namespace qtransit::cli {

// scaling: the fitted exponent of relative RMS error against N of `path` must lie in [min, max]
// for every format and distribution listed.
struct ScalingRule {
    PathKind path = PathKind::kRingRs;
    std::vector<FormatSpec> formats;                 // empty: every format of the gate
    std::vector<kernels::Distribution> dists;        // empty: every distribution of the gate
    double min = -1e300, max = 1e300;
    std::string why;                                 // shown in the verdict's message
};

// budget: the largest `metric` over the matching runs is at most `max`.
struct Budget {
    std::string name;
    PathKind path = PathKind::kRingRs;
    FormatSpec format{};
    std::string dist;                                // empty: every distribution
    int64_t ranks = 0;                               // 0: every N
    std::string metric = "rel_rms_error";            // rel_rms_error, max_abs_error, rms_error, max_error_to_a_posteriori
    double max = 0;
};

struct GateConfig {
    std::string source = "default";
    std::vector<FormatSpec> formats;
    std::vector<PathKind> paths;
    std::vector<kernels::Distribution> dists;
    std::vector<int64_t> ranks, tree_ranks;  // tree-rs runs at tree_ranks (powers of two)
    bool tree_ranks_derived = true;          // tree_ranks not given: derived from ranks
    int64_t ranks_per_node = 8;              // 0: 8 when 8 divides N, else N
    int64_t elements = 0, block = 32;
    uint64_t seed = 1;
    int threads = 0;
    bool gpu = true;                         // compare GPU kernels when a GPU answers
    double baseline_margin = 0.10;
    std::vector<std::string> baseline_metrics{"rel_rms_error", "max_abs_error"};
    std::vector<ScalingRule> scaling;
    std::vector<Budget> budgets;
};

// The embedded default gate (`qtransit check` with no --config), as TOML.
const char* default_gate_toml();
// The default gate with `toml` (the file's text) applied on top: keys given replace the default's;
// [[scaling]] and [[budget]] replace the default's lists when present. An Error says
// "<source>:<line>: <key>: <what>".
Result<GateConfig> parse_gate_config(const std::string& toml, const std::string& source);
Result<GateConfig> load_gate_config(const std::string& path);

struct GateOptions {
    const std::vector<reports::GateRun>* baseline = nullptr;  // compare against these runs
    std::string baseline_path;
    bool progress_tty = false;   // "\r[i/total] ..." on stderr; else one line per finished group
    bool progress = true;
    // Where the paths run (cli/check.cpp validated it against the config: under one process per
    // rank, mpi or nccl under mpirun, the gate's N is the number of processes).
    collectives::Backend backend = collectives::Backend::kCpu;
};

// Runs everything, draws every verdict. An Error only for something that is not a verdict (an
// unexpected library error); a failed check is a failed verdict.
Result<reports::GateResult> run_gate(const GateConfig& config, const GateOptions& options);

}  // namespace qtransit::cli
