// The simulation core shared by `qtransit simulate` and the numerics gate: a set of paths run at
// one or more N on shared inputs, every output checked exactly, relative RMS error fitted against
// N. No printing here: callers decide how to show progress and results.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qtransit/collectives/paths.hpp"
#include "qtransit/collectives/transport.hpp"
#include "qtransit/common/transit.hpp"
#include "qtransit/kernels/inputs.hpp"
#include "qtransit/kernels/npy.hpp"
#include "qtransit/kernels/plugin.hpp"
#include "qtransit/reference/checker.hpp"
#include "qtransit/reports/gate_result.hpp"

namespace qtransit::gate {

struct RunRow {
    PathConfig config;
    reference::PathStats stats;
    double bytes_per_rank = 0;             // the busiest rank's payload bytes
    double cross_node_bytes_per_rank = 0;  // the busiest rank's bytes to other nodes
    double fp16_path_bytes_per_rank = 0;   // the same messages as binary16 values
    double fp16_ring_rs = 0;               // the ZeRO baseline: a binary16 ring reduce-scatter
    int64_t k_checked = 0, k_mismatches = 0;  // (row, contributor) pairs, with SweepSpec::check_k
    std::string first_k_mismatch;
    // One process per rank (one_process_per_rank): the busiest rank's seconds in the whole run of
    // this N's group (schedule, its messages and checking) and in checking its own outputs (the exact
    // reference and the bounds), wall clock; the same checking in CPU time.
    double group_seconds = 0, check_seconds = 0, check_cpu_seconds = 0;
    // A process's time running this path's schedule (run_paths' RunTotals::seconds): every rank's
    // arithmetic, since each process computes the whole simulation, plus its own messages; the
    // median over the processes, wall clock and CPU time. (The processes differ by the CPU time
    // they spend polling for messages.)
    double collective_seconds = 0, collective_cpu_seconds = 0;
    // Issue 7's overhead figure: rank r's checking CPU time over its share of the collective, its
    // process's schedule CPU time / N (each rank's share is the same for the symmetric paths; for
    // the owner-heavy gathers it is the mean share); the median and the largest over the ranks.
    double check_to_collective = 0, check_to_collective_max = 0;
};

struct SweepSpec {
    std::vector<PathKind> paths;
    // Parallel to paths, or empty: the declared path each one runs as (PathConfig::label; "" for a
    // built-in path under its own name).
    std::vector<std::string> labels;
    std::vector<int64_t> ranks;          // one run of every path per N
    int64_t ranks_per_node = 0;          // 0: 8 when 8 divides N, else N (one node)
    int64_t elements = 0;                // M per rank
    FormatSpec format{};
    std::vector<FormatSpec> stage_formats;  // one per stage (PathConfig::stage_formats); empty: format for all
    int64_t block = kDefaultBlock;
    Accum accum = Accum::kFp32;
    Divide divide = Divide::kNone;       // where a mean's 1/N goes (reduce paths; D27)
    Rotation rotation = Rotation::kEachHop;  // a rotated format's sums (D28)
    kernels::Distribution dist = kernels::Distribution::kNormal;
    uint64_t seed = 1;
    const kernels::NpyArray* file = nullptr;  // inputs [N, M] instead of the generator (one N)
    std::string file_name = "input";          // what messages about its values name
    // The generator's values computed once (`dist` and `seed`, at least every N's ranks and M
    // elements): the same bits as generating them, shared by the sweeps that read them (the gate's).
    std::shared_ptr<const collectives::GeneratedTable> table;
    // Runs of paths that quantize nothing (fp32-ring-rs), made by an earlier sweep with the same
    // inputs, N, sizes and options but another format: taken as they are (their config becomes this
    // sweep's) instead of being run again, since no format enters them. Matched by path and N; a
    // row whose other settings differ, or any reuse with a codec (it casts the inputs), is refused.
    const std::vector<RunRow>* reuse = nullptr;
    int threads = 0;                     // 0: every hardware thread
    collectives::Backend backend = collectives::Backend::kCpu;  // device backends run one thread
    // When set (one path, one N): every output row written here, [N, S] for a reduce-scatter or
    // [N, M] for the others, and its shape.
    std::vector<float>* dump = nullptr;
    std::vector<int64_t>* dump_shape = nullptr;
    // Called before each N's group of paths starts: (group index, groups, N).
    std::function<void(size_t, size_t, int64_t)> on_group;
    // When set: every output row's k per contributor (contribution_k, from the ledger) is compared
    // with NUMERICS.md section 3's table (expected_k); RunRow::k_mismatches counts the differences.
    bool check_k = false;
    // A codec plugin run in place of qtransit's kernels (its format is `format`). Inputs are cast to
    // its input type first, as a framework's tensors already are.
    std::shared_ptr<const kernels::PluginCodec> codec;
};

struct FitRow {
    PathKind path;
    std::string name;  // the path's (PathConfig::path_name)
    std::string format;  // its runs' (PathConfig::format_name)
    double exponent = 0;                               // least squares of log rel_rms on log N
    std::vector<std::pair<int64_t, double>> points;    // (N, rel_rms_error)
};

struct SweepResult {
    std::vector<RunRow> runs;
    std::vector<FitRow> fits;  // paths run at two or more N with a non-zero error
};

// The backends that run one process per rank, each holding and checking only its own rank's rows
// (verdicts combined over the processes): mpi, and nccl started by a launcher (MPI active).
bool one_process_per_rank(collectives::Backend b);

// Why the sweep cannot run on spec.backend ("" when it can): mpi outside a launcher, N not the number
// of processes, no GPU, N not the number of GPUs for nccl.
// Under one process per rank the ranks agree on the answer. `name` is the backend as written.
std::string sweep_backend_problem(const SweepSpec& spec, const std::string& name);

// Validates every configuration before any work (an Error names the path and the constraint).
Result<SweepResult> run_sweep(const SweepSpec& spec);

// One run as the result model holds it (report.json's runs[], `simulate --json`'s runs: written by
// reports::to_json alone). dist: the distribution's name or "file:<path>".
reports::GateRun gate_run(const RunRow& r, const std::string& dist, uint64_t seed);

}  // namespace qtransit::gate
