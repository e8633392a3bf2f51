// Every collective path of NUMERICS.md section 3, written once as a schedule of sends and receives
// over a Transport, driving the production kernels for Q and D, one column at a time (docs/
// DECISIONS.md D12), and filling the ledger of quantization events of every output.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "qtransit/collectives/transport.hpp"
#include "qtransit/common/transit.hpp"
#include "qtransit/kernels/inputs.hpp"

namespace qtransit::collectives {

// Where the ranks' inputs come from: element `first + i` of rank `rank`, any range.
class Inputs {
public:
    virtual ~Inputs() = default;
    virtual void fill(int64_t rank, int64_t first, int64_t len, float* out) const = 0;
    // What a message about a bad input value names: "input", or the file it came from.
    virtual std::string name() const { return "input"; }
};

// The counter-based generator: nothing is stored, any element of any rank is recomputed on demand.
class GeneratedInputs final : public Inputs {
public:
    GeneratedInputs(kernels::Distribution d, uint64_t seed) : dist_(d), seed_(seed) {}
    void fill(int64_t rank, int64_t first, int64_t len, float* out) const override;

private:
    kernels::Distribution dist_;
    uint64_t seed_;
};

// The generator's values for ranks [0, ranks) and elements [0, elements), computed once and kept
// (ranks * elements * 4 bytes): the same bits as GeneratedInputs, for runs that read them again and
// again (the gate reads a distribution's inputs once per format, issue 16).
// Laid out in tiles of kTile elements, every rank's tile t next to the others' ([tile][rank][kTile]):
// a column of the paths (its elements for every rank) is one contiguous stretch to read, not N
// strided ones.
class GeneratedTable final : public Inputs {
public:
    static constexpr int64_t kTile = 32;
    GeneratedTable(kernels::Distribution d, uint64_t seed, int64_t ranks, int64_t elements);
    void fill(int64_t rank, int64_t first, int64_t len, float* out) const override;
    int64_t ranks() const { return ranks_; }
    int64_t elements() const { return m_; }

private:
    int64_t ranks_, m_;
    std::vector<float> x_;
};

// Every rank's input in memory, row-major [N][M] (from a .npy file, or a test).
class ArrayInputs final : public Inputs {
public:
    ArrayInputs(std::span<const float> x, int64_t elements, std::string name = "input")
        : x_(x), m_(elements), name_(std::move(name)) {}
    void fill(int64_t rank, int64_t first, int64_t len, float* out) const override;
    std::string name() const override { return name_; }

private:
    std::span<const float> x_;
    int64_t m_;
    std::string name_;
};

// The columns of a path, in increasing `first` (D12).
int64_t column_count(const PathConfig& c);
std::pair<int64_t, int64_t> column_at(const PathConfig& c, int64_t index);  // (first, len)

// One column of the path over `transport`; `out` is overwritten (its buffers are reused).
// Under the `error` policy (the only one a collective uses) a non-finite input is refused with the
// rank and element index.
Status run_column(const PathConfig& c, const Inputs& inputs, Transport& transport, int64_t first, int64_t len,
                  ColumnRecord& out);

// Every column of every path in `paths` (which share N, G, M and block), on `threads` threads. The
// inputs of a column are generated once for all paths. `sink(path_index, thread, record)` is called
// from the worker threads, never concurrently with the same thread index. `backend`: where the
// values are computed and the messages travel (device.hpp); a device backend runs one thread, and
// an Error says why it cannot start (no GPU, a build without CUDA or NCCL, N != GPUs for nccl).
struct RunTotals {
    std::vector<ByteCounts> bytes;  // per path
    // Per path, summed over the threads: the time spent running its columns (the schedule:
    // quantization, messages, decoding, adds, and the ledger's bookkeeping), not counting `sink`
    // and, for a backend other than cpu, not counting the generation of the inputs. Wall clock, and
    // the running threads' CPU time (which leaves out time spent descheduled, e.g. on an
    // oversubscribed machine, or asleep waiting for a message).
    std::vector<double> seconds, cpu_seconds;
};
// The calling thread's CPU time in seconds (CLOCK_THREAD_CPUTIME_ID).
double thread_cpu_seconds();
Result<RunTotals> run_paths(const std::vector<PathConfig>& paths, const Inputs& inputs, int threads,
                            const std::function<void(size_t, int, const ColumnRecord&)>& sink,
                            Backend backend = Backend::kCpu);

// Whether a codec plugin (PathConfig::codec) can run the paths on `backend`: cpu and mpi, not the
// device transports, whose buffers only qtransit's CUDA kernels fill ("" when it can; docs/PLUGIN.md).
std::string codec_backend_problem(Backend backend);

// What the device transports (device, nccl) do not run yet: the 16-bit paths (D26) and a mean's
// division (D27). "" when `backend` runs `path` with `divide`; `divide_setting` names the division
// as the caller's user set it (default: "--divide pre").
std::string host_only_problem(PathKind path, Divide divide, Backend backend, const std::string& divide_setting = "");

// scales = "per-tensor" (PathConfig::tensor_scale, D50): takes the largest |x| over the finite values
// of every rank's own shard, the gathered tensor (what FSDP2's amax all-reduce with MAX gives every
// rank: a max is exact), sets tensor_amax to it and raises the format's amax_floor to it, so that
// every block's scale is the tensor's (the "-mul" scales take max(block absmax, amax_floor)).
// Nothing to do without tensor_scale. The checker and the reference are then given the resolved
// config (sweep; verify collective, from the dumped inputs).
Status resolve_tensor_scale(PathConfig& c, const Inputs& inputs);
// The transport a backend runs a path on (cpu: SimTransport).
Result<std::unique_ptr<Transport>> make_transport(Backend backend, const PathConfig& c);

}  // namespace qtransit::collectives
