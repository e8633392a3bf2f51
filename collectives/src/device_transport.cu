// The device transports of device.hpp. Each rank owns one device buffer (DeviceBufferLayout): two
// scratch rows of `max_len` floats (the values of a step) and a bump-allocated run of message slots,
// reset at every column. A message is encoded into its sender's slot and copied into a slot of the
// receiver's buffer (cudaMemcpyAsync on the receiver's stream for `device`; grouped
// ncclSend/ncclRecv for `nccl`). Ranks on one GPU share one stream, so every later step is ordered
// after the copy; across GPUs a receive synchronizes the receiver's stream. Each step stages its
// host values through one pinned buffer and waits once, for its own results (issue 51).
// Every step's output is filled with 0xff bytes (a NaN pattern) before the kernel writes it, so an
// element a kernel leaves unwritten shows up as a mismatch against `sim`.
#include <cuda_runtime.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#if QTRANSIT_HAVE_NCCL
#include <nccl.h>
#endif

#include "qtransit/collectives/device.hpp"
#include "qtransit/collectives/mpi.hpp"
#include "qtransit/kernels/block_math.hpp"
#include "qtransit/kernels/cuda_check.hpp"
#include "qtransit/kernels/fp16.hpp"
#include "qtransit/kernels/gpu.hpp"

namespace qtransit::collectives {
namespace {

namespace gpu = kernels::gpu;
namespace mpi = collectives::mpi;

// The adds of NUMERICS 3 / D11 (block_math.hpp's accum_add, the same function the CPU runs).
__global__ void add_kernel(float* acc, float* term, int64_t n, Accum accum) {
    for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
        const float t = term[i];
        acc[i] = kernels::accum_add(acc[i], t, accum);
        if (low_precision(accum)) term[i] = kernels::accum_first(t, accum);
    }
}

__global__ void round_first_kernel(float* v, int64_t n, Accum accum) {
    for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
        v[i] = kernels::accum_first(v[i], accum);
}

int grid_of(int64_t n) { return static_cast<int>(std::clamp<int64_t>((n + 255) / 256, 1, 1024)); }

constexpr size_t align_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

Error internal(const std::string& what) { return make_error(ErrorCode::kCuda, "internal error in the device transport: " + what); }

class DeviceTransport : public Transport, public DeviceOps {
public:
    DeviceTransport(int64_t ranks, int64_t per_node, FormatSpec format, int64_t max_len)
        : Transport(ranks, per_node, format), format_(format), max_len_(max_len),
          layout_(DeviceBufferLayout::of(ranks, format, max_len)), box_(static_cast<size_t>(ranks)) {}
    ~DeviceTransport() override {
        if (multi_) {
            for (size_t r = 0; r < base_.size(); ++r) {
                cudaSetDevice(gpu_[r]);
                if (stream_[r]) cudaStreamDestroy(stream_[r]);
                if (base_[r]) cudaFree(base_[r]);
            }
        } else if (!stream_.empty()) {
            if (stream_[0]) cudaStreamDestroy(stream_[0]);
            if (base_[0]) cudaFree(base_[0]);
        }
        if (pinned_) cudaFreeHost(pinned_);
    }

    // One buffer per rank, on GPU gpus[r]; every buffer starts poisoned. Ranks on one GPU share one
    // allocation (a run's threads make a transport each: one cudaMalloc apiece, not N) and one
    // stream, so that every step is ordered after the one before without a wait; ranks on several
    // GPUs have a buffer and a stream each. One pinned host buffer stages every copy in and out
    // (each step waits for its own copies before it returns, so one suffices).
    Status init(std::vector<int> gpus) {
        gpu_ = std::move(gpus);
        multi_ = std::any_of(gpu_.begin(), gpu_.end(), [&](int g) { return g != gpu_.front(); });
        base_.assign(gpu_.size(), nullptr);
        stream_.assign(gpu_.size(), nullptr);
        used_.assign(gpu_.size(), 0);
        const size_t bytes = layout_.rank_bytes();
        QT_CUDA_CHECK(cudaSetDevice(gpu_.front()));
        if (!multi_) {
            void* p = nullptr;
            QT_CUDA_CHECK(cudaMalloc(&p, bytes * gpu_.size()));
            base_[0] = static_cast<char*>(p);
            QT_CUDA_CHECK(cudaMemset(p, 0xff, bytes * gpu_.size()));
            QT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_[0], cudaStreamNonBlocking));
            for (size_t r = 1; r < gpu_.size(); ++r) {
                base_[r] = base_[0] + r * bytes;
                stream_[r] = stream_[0];
            }
        }
        for (size_t r = 0; multi_ && r < gpu_.size(); ++r) {
            QT_CUDA_CHECK(cudaSetDevice(gpu_[r]));
            void* p = nullptr;
            QT_CUDA_CHECK(cudaMalloc(&p, bytes));
            base_[r] = static_cast<char*>(p);
            QT_CUDA_CHECK(cudaMemset(p, 0xff, bytes));
            QT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_[r], cudaStreamNonBlocking));
        }
        void* h = nullptr;
        QT_CUDA_CHECK(cudaMallocHost(&h, std::max(layout_.slot_bytes, layout_.scratch_bytes)));
        pinned_ = static_cast<char*>(h);
        QT_CUDA_CHECK(cudaDeviceSynchronize());
        return Status::Ok();
    }

    DeviceOps* device_ops() override { return this; }
    void begin_column() override { std::fill(used_.begin(), used_.end(), 0); }

    Message recv(int64_t to, int64_t from) override {
        throw_if(flush());
        auto& box = box_[static_cast<size_t>(to)];
        for (auto it = box.begin(); it != box.end(); ++it) {
            if (it->first != from) continue;
            Message m = std::move(it->second);
            box.erase(it);
            // On one GPU every step after this one is queued on the same stream as the copy that
            // carried the message. Across GPUs a step on another rank's stream may read it (a
            // forward): wait for the receiver's stream.
            if (multi_) {
                throw_if(select(to));
                throw_if(cuda(cudaStreamSynchronize(stream_[static_cast<size_t>(to)]), "cudaStreamSynchronize (recv)"));
            }
            return m;
        }
        // A schedule that receives what nobody sent is a bug in this program, not a user error.
        throw DeviceFailure{make_error(ErrorCode::kInternal, "internal error: rank " + std::to_string(to) +
                                                                 " waits for a message from rank " + std::to_string(from) +
                                                                 " that was never sent")};
    }

    // ---- DeviceOps ------------------------------------------------------------------------------
    // Each step: its inputs through the pinned buffer in one copy, its kernel, its results back in
    // one copy, one wait.
    Status encode(int64_t rank, const float* x, int64_t n, const kernels::CodecOptions& options, Message& m) override {
        if (n > max_len_) return internal("a block longer than the path's block");
        if (auto st = select(rank); !st) return st;
        auto s = slot(rank);
        if (!s) return s.error();
        cudaStream_t st = stream_of(rank);
        float* a = scratch(rank, 0);
        uint8_t* codes = reinterpret_cast<uint8_t*>(*s);
        float* meta = reinterpret_cast<float*>(*s + layout_.meta_at);
        auto* flag = reinterpret_cast<unsigned long long*>(*s + layout_.flag_at);
        std::memcpy(pinned_, x, static_cast<size_t>(n) * sizeof(float));
        QT_CUDA_CHECK(cudaMemcpyAsync(a, pinned_, static_cast<size_t>(n) * sizeof(float), cudaMemcpyHostToDevice, st));
        if (auto r = gpu::encode_device_queued(format_, a, n, max_len_, codes, meta, meta + 1, options, flag, st); !r) return r;
        const size_t back = layout_.flag_at + sizeof(uint64_t);  // codes, metadata and flag
        QT_CUDA_CHECK(cudaMemcpyAsync(pinned_, *s, back, cudaMemcpyDeviceToHost, st));
        QT_CUDA_CHECK(cudaStreamSynchronize(st));
        uint64_t bad = 0;
        std::memcpy(&bad, pinned_ + layout_.flag_at, sizeof bad);
        if (auto r = kernels::refusal_of_flag(format_, bad, x, n, max_len_, options); !r) return r;
        m.codes.assign(pinned_, pinned_ + format_.code_bytes(n));
        float md[2] = {0, 0};
        std::memcpy(md, pinned_ + layout_.meta_at, sizeof md);
        m.scale = md[0];
        m.offset = format_.has_offset() ? md[1] : 0.0f;
        m.dev = *s;
        m.dev_bytes = static_cast<int64_t>(layout_.message_bytes());
        m.dev_rank = static_cast<int32_t>(rank);
        return Status::Ok();
    }

    Status stage_raw(int64_t rank, Message& m) override {
        if (m.len > max_len_) return internal("a raw message longer than the path's block");
        if (auto st = select(rank); !st) return st;
        auto s = slot(rank);
        if (!s) return s.error();
        cudaStream_t st = stream_of(rank);
        const size_t bytes = static_cast<size_t>(m.len) * sizeof(float);
        std::memcpy(pinned_, m.raw.data(), bytes);
        QT_CUDA_CHECK(cudaMemcpyAsync(*s, pinned_, bytes, cudaMemcpyHostToDevice, st));
        QT_CUDA_CHECK(cudaStreamSynchronize(st));  // the pinned buffer is free again
        m.dev = *s;
        m.dev_bytes = m.len * static_cast<int64_t>(sizeof(float));
        m.dev_rank = static_cast<int32_t>(rank);
        return Status::Ok();
    }

    Status decode(const Message& m, float* out) override {
        if (!m.dev || m.dev_rank < 0) return internal("a message with no device payload");
        const int64_t rank = m.dev_rank;
        if (auto st = select(rank); !st) return st;
        cudaStream_t st = stream_of(rank);
        float* o = scratch(rank, 1);
        const size_t bytes = static_cast<size_t>(m.len) * sizeof(float);
        QT_CUDA_CHECK(cudaMemsetAsync(o, 0xff, bytes, st));  // poison: every element must be written
        const char* p = static_cast<const char*>(m.dev);
        if (m.quantized) {
            const float* meta = reinterpret_cast<const float*>(p + layout_.meta_at);
            if (auto r = gpu::decode_device(format_, max_len_, reinterpret_cast<const uint8_t*>(p), meta, meta + 1, o, m.len, st); !r)
                return r;
        } else {
            QT_CUDA_CHECK(cudaMemcpyAsync(o, p, bytes, cudaMemcpyDeviceToDevice, st));
        }
        QT_CUDA_CHECK(cudaMemcpyAsync(pinned_, o, bytes, cudaMemcpyDeviceToHost, st));
        QT_CUDA_CHECK(cudaStreamSynchronize(st));
        std::memcpy(out, pinned_, bytes);
        return Status::Ok();
    }

    Status round_first(int64_t rank, float* v, int64_t n, Accum accum) override {
        if (n > max_len_) return internal("a row longer than the path's block");
        if (auto st = select(rank); !st) return st;
        cudaStream_t st = stream_of(rank);
        float* a = scratch(rank, 0);
        const size_t bytes = static_cast<size_t>(n) * sizeof(float);
        std::memcpy(pinned_, v, bytes);
        QT_CUDA_CHECK(cudaMemcpyAsync(a, pinned_, bytes, cudaMemcpyHostToDevice, st));
        round_first_kernel<<<grid_of(n), 256, 0, st>>>(a, n, accum);
        QT_CUDA_LAUNCH_CHECK("qtransit::round_first_kernel");
        QT_CUDA_CHECK(cudaMemcpyAsync(pinned_, a, bytes, cudaMemcpyDeviceToHost, st));
        QT_CUDA_CHECK(cudaStreamSynchronize(st));
        std::memcpy(v, pinned_, bytes);
        return Status::Ok();
    }

    // acc and term lie in the pinned buffer as the two scratch rows lie on the device (row 1 at
    // max_len floats), so one copy takes both in, and one brings back acc (and term, rounded).
    Status add(int64_t rank, float* acc, float* term, int64_t n, Accum accum) override {
        if (n > max_len_) return internal("a row longer than the path's block");
        if (auto st = select(rank); !st) return st;
        cudaStream_t st = stream_of(rank);
        float* a = scratch(rank, 0);
        float* b = scratch(rank, 1);
        auto* pa = reinterpret_cast<float*>(pinned_);
        float* pb = pa + max_len_;
        const size_t bytes = static_cast<size_t>(n) * sizeof(float);
        const size_t both = static_cast<size_t>(max_len_) * sizeof(float) + bytes;
        std::memcpy(pa, acc, bytes);
        std::memcpy(pb, term, bytes);
        QT_CUDA_CHECK(cudaMemcpyAsync(a, pa, both, cudaMemcpyHostToDevice, st));
        add_kernel<<<grid_of(n), 256, 0, st>>>(a, b, n, accum);
        QT_CUDA_LAUNCH_CHECK("qtransit::add_kernel");
        const bool low = low_precision(accum);
        QT_CUDA_CHECK(cudaMemcpyAsync(pa, a, low ? both : bytes, cudaMemcpyDeviceToHost, st));
        QT_CUDA_CHECK(cudaStreamSynchronize(st));
        std::memcpy(acc, pa, bytes);
        if (low) std::memcpy(term, pb, bytes);
        return Status::Ok();
    }

protected:
    void deliver(int64_t from, int64_t to, Message&& m) override {
        if (from != to) {
            if (!m.dev) throw_if(internal("a message sent with no device payload"));
            auto d = slot(to);
            if (!d) throw_if(d.error());
            throw_if(move(from, to, m, *d));
            m.dev = *d;
            m.dev_rank = static_cast<int32_t>(to);
        }
        box_[static_cast<size_t>(to)].emplace_back(from, std::move(m));
    }

    // Carry m's payload (m.dev, m.dev_bytes: in some rank's buffer on the sender's side) to dst (in
    // `to`'s buffer).
    virtual Status move(int64_t /*from*/, int64_t to, const Message& m, void* dst) {
        if (auto st = select(to); !st) return st;
        QT_CUDA_CHECK(cudaMemcpyAsync(dst, m.dev, static_cast<size_t>(m.dev_bytes), cudaMemcpyDeviceToDevice, stream_of(to)));
        return Status::Ok();
    }
    // Start whatever move() left pending (nccl groups its sends and receives here).
    virtual Status flush() { return Status::Ok(); }

    Status select(int64_t rank) {
        if (!multi_) return Status::Ok();
        QT_CUDA_CHECK(cudaSetDevice(gpu_[static_cast<size_t>(rank)]));
        return Status::Ok();
    }
    cudaStream_t stream_of(int64_t rank) const { return stream_[static_cast<size_t>(rank)]; }
    float* scratch(int64_t rank, int row) const {
        return reinterpret_cast<float*>(base_[static_cast<size_t>(rank)]) + static_cast<size_t>(row) * static_cast<size_t>(max_len_);
    }
    Result<char*> slot(int64_t rank) {
        int64_t& u = used_[static_cast<size_t>(rank)];
        if (u >= layout_.slots) return internal("rank " + std::to_string(rank) + " ran out of message slots in one column");
        char* p = base_[static_cast<size_t>(rank)] + layout_.scratch_bytes + static_cast<size_t>(u) * layout_.slot_bytes;
        ++u;
        return p;
    }
    static Status cuda(cudaError_t e, const char* what) { return gpu::cuda_status(e, what, __FILE__, __LINE__); }
    static void throw_if(const Status& st) {
        if (!st) throw DeviceFailure{st.error()};
    }
    static void throw_if(const Error& e) { throw DeviceFailure{e}; }

    FormatSpec format_;
    int64_t max_len_;
    DeviceBufferLayout layout_;
    std::vector<int> gpu_;
    bool multi_ = false;
    std::vector<char*> base_;
    std::vector<cudaStream_t> stream_;
    std::vector<int64_t> used_;
    char* pinned_ = nullptr;  // page-locked host staging: max(a slot, the two scratch rows)
    std::vector<std::vector<std::pair<int64_t, Message>>> box_;
};

#if QTRANSIT_HAVE_NCCL

// Every ncclResult_t becomes a Status naming the call and the place.
#define QT_NCCL_CHECK(call)                                                                                     \
    do {                                                                                                        \
        const ncclResult_t qt_r_ = (call);                                                                      \
        if (qt_r_ != ncclSuccess)                                                                               \
            return make_error(ErrorCode::kCuda, std::string(#call) + " failed: " + ncclGetErrorString(qt_r_) + \
                                                    " at " __FILE__ ":" + std::to_string(__LINE__));            \
    } while (0)

// One rank per GPU: world communicator by ncclCommInitAll, the intra-node group (color = node,
// key = local index) and the inter-node group (color = local index, key = node) by ncclCommSplit.
// A message between two ranks of one node goes over the intra-node communicator, one between the
// same local index of two nodes over the inter-node one, any other over the world. Sends are held
// until the next receive and then issued together, every ncclSend with its ncclRecv, in one
// ncclGroupStart/End: the all-to-all's N sends become one grouped exchange.
class NcclTransport final : public DeviceTransport {
public:
    using DeviceTransport::DeviceTransport;
    ~NcclTransport() override {
        for (auto* v : {&inter_, &intra_, &world_})
            for (ncclComm_t c : *v)
                if (c) ncclCommDestroy(c);
    }

    Status init_nccl() {
        const int n = static_cast<int>(ranks());
        std::vector<int> devs(static_cast<size_t>(n));
        for (int i = 0; i < n; ++i) devs[static_cast<size_t>(i)] = i;
        if (auto st = init(devs); !st) return st;
        world_.assign(static_cast<size_t>(n), nullptr);
        intra_.assign(static_cast<size_t>(n), nullptr);
        inter_.assign(static_cast<size_t>(n), nullptr);
        QT_NCCL_CHECK(ncclCommInitAll(world_.data(), n, devs.data()));
        QT_NCCL_CHECK(ncclGroupStart());
        for (int r = 0; r < n; ++r)
            QT_NCCL_CHECK(ncclCommSplit(world_[static_cast<size_t>(r)], static_cast<int>(node_of(r)),
                                        static_cast<int>(local_of(r)), &intra_[static_cast<size_t>(r)], nullptr));
        QT_NCCL_CHECK(ncclGroupEnd());
        QT_NCCL_CHECK(ncclGroupStart());
        for (int r = 0; r < n; ++r)
            QT_NCCL_CHECK(ncclCommSplit(world_[static_cast<size_t>(r)], static_cast<int>(local_of(r)),
                                        static_cast<int>(node_of(r)), &inter_[static_cast<size_t>(r)], nullptr));
        QT_NCCL_CHECK(ncclGroupEnd());
        return Status::Ok();
    }

protected:
    Status move(int64_t from, int64_t to, const Message& m, void* dst) override {
        pending_.push_back({from, to, m.dev, dst, m.dev_bytes});
        return Status::Ok();
    }

    Status flush() override {
        if (pending_.empty()) return Status::Ok();
        QT_NCCL_CHECK(ncclGroupStart());
        for (const Pending& p : pending_) {
            ncclComm_t cs, cr;
            int peer_of_from, peer_of_to;
            route(p.from, p.to, cs, cr, peer_of_from, peer_of_to);
            QT_NCCL_CHECK(ncclSend(p.src, static_cast<size_t>(p.bytes), ncclUint8, peer_of_to, cs, stream_of(p.from)));
            QT_NCCL_CHECK(ncclRecv(p.dst, static_cast<size_t>(p.bytes), ncclUint8, peer_of_from, cr, stream_of(p.to)));
        }
        QT_NCCL_CHECK(ncclGroupEnd());
        for (const Pending& p : pending_) {
            if (auto st = select(p.from); !st) return st;
            QT_CUDA_CHECK(cudaStreamSynchronize(stream_of(p.from)));
        }
        pending_.clear();
        return Status::Ok();
    }

private:
    struct Pending {
        int64_t from, to;
        const void* src;
        void* dst;
        int64_t bytes;
    };
    // The communicator each side uses and the other side's rank in it.
    void route(int64_t from, int64_t to, ncclComm_t& cs, ncclComm_t& cr, int& peer_of_from, int& peer_of_to) const {
        const auto f = static_cast<size_t>(from), t = static_cast<size_t>(to);
        if (node_of(from) == node_of(to)) {
            cs = intra_[f], cr = intra_[t];
            peer_of_from = static_cast<int>(local_of(from)), peer_of_to = static_cast<int>(local_of(to));
        } else if (local_of(from) == local_of(to)) {
            cs = inter_[f], cr = inter_[t];
            peer_of_from = static_cast<int>(node_of(from)), peer_of_to = static_cast<int>(node_of(to));
        } else {
            cs = world_[f], cr = world_[t];
            peer_of_from = static_cast<int>(from), peer_of_to = static_cast<int>(to);
        }
    }

    std::vector<ncclComm_t> world_, intra_, inter_;
    std::vector<Pending> pending_;
};

// ---- nccl across processes (under mpirun or srun) -------------------------------------------------
// One process per rank, each driving one GPU: device = the process's index on its node modulo the
// GPUs it sees (with one GPU per task, CUDA_VISIBLE_DEVICES leaves one: device 0). The world
// communicator comes from ncclCommInitRank (rank 0 makes the ncclUniqueId and MPI broadcasts it),
// made once per process; the intra-node and inter-node communicators of each G from ncclCommSplit
// (color = node, key = local index; color = local index, key = node), so that a2a-hier-rs's two
// hops and hpz's node rings travel over their real groups.
//
// As with the mpi backend (mpi.hpp), every process runs the whole column schedule, here with every
// rank's buffers on its own GPU (as `device` does), so that every value, quantization event and
// ledger entry is the same bit for bit; a message from this process's rank to another is really
// sent (ncclSend of the wire bytes: the packed codes, then the metadata; or the values, binary32 or
// binary16), a message to this process's rank really received (ncclRecv into its buffer, which is
// what it then decodes) and compared with the payload computed here; messages between two other
// ranks are copied on this GPU. Each process counts only the bytes it sent and checks only its own
// rank's outputs (cli/sweep.cpp combines the verdicts over MPI, as for `mpi`). Every wait for NCCL
// has the deadline QTRANSIT_MPI_TIMEOUT; NCCL's own set-up (ncclCommInitRank, ncclCommSplit) has not.
//
// Written and compiled without a GPU (none on the development or CI machines): this mode has not
// run on GPUs yet; a machine without one stops with "no GPU" (exit 2) on every rank.

// The communicators of this process (one GPU), made at the first nccl transport and kept until
// mpi::finalize.
struct NcclRanks {
    int device = -1;
    ncclComm_t world = nullptr;
    std::map<int64_t, std::pair<ncclComm_t, ncclComm_t>> split;  // G -> (intra-node, inter-node)
};
NcclRanks* g_ranks = nullptr;

// After a job failure: every communicator of this process aborted (ncclCommAbort ends the NCCL
// kernels still waiting for a peer) and forgotten, so nothing waits on them or destroys them again.
void abort_nccl_ranks() {
    if (!g_ranks) return;
    for (auto& [g, c] : g_ranks->split) {
        ncclCommAbort(c.first);
        ncclCommAbort(c.second);
    }
    g_ranks->split.clear();
    if (g_ranks->world) ncclCommAbort(g_ranks->world);
    g_ranks->world = nullptr;
}

std::string nccl_error(const char* call, ncclResult_t r) {
    return std::string(call) + " failed: " + ncclGetErrorString(r) + " (NCCL_DEBUG=WARN says more)";
}

Result<NcclRanks*> nccl_ranks() {
    if (g_ranks) return g_ranks;
    // Every rank needs a GPU of its own: the ranks compare before any NCCL call, so that all of them
    // stop with the same message instead of some waiting for the others inside NCCL.
    const auto q = gpu::query_devices();
    std::string mine;
    int device = -1;
    char bus[64] = "";
    if (q.devices.empty()) {
        mine = "no GPU: " + q.note + " (--backend nccl needs one GPU per process)";
    } else {
        device = mpi::node_local_rank() % static_cast<int>(q.devices.size());
        if (cudaSetDevice(device) != cudaSuccess || cudaDeviceGetPCIBusId(bus, sizeof bus, device) != cudaSuccess)
            mine = "cannot use GPU " + std::to_string(device);
    }
    if (std::string e = mpi::first_error(mine); !e.empty()) return make_error(ErrorCode::kCuda, e);
    // Two processes of one node on the same GPU: NCCL refuses that; say which ranks and how to fix it.
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    const auto all_ids = mpi::allgather_strings(std::string(host) + " " + bus);
    if (!all_ids) return all_ids.error();
    const std::vector<std::string>& ids = *all_ids;
    for (size_t a = 0; a < ids.size(); ++a)
        for (size_t b = a + 1; b < ids.size(); ++b)
            if (ids[a] == ids[b])
                return make_error(ErrorCode::kInvalidArgument,
                                  "--backend nccl runs one process per GPU, but ranks " + std::to_string(a) + " and " +
                                      std::to_string(b) + " would share GPU " + ids[a] + " (" +
                                      std::to_string(mpi::node_local_size()) + " processes on the node, " +
                                      std::to_string(q.devices.size()) +
                                      " GPU(s) visible to each: start at most one process per GPU)");
    ncclUniqueId id{};
    std::string e0;
    if (mpi::rank() == 0)
        if (const ncclResult_t r = ncclGetUniqueId(&id); r != ncclSuccess) e0 = nccl_error("ncclGetUniqueId", r);
    if (std::string e = mpi::first_error(e0); !e.empty()) return make_error(ErrorCode::kCuda, e);
    if (auto st = mpi::broadcast(&id, sizeof id); !st) return st.error();
    auto w = std::make_unique<NcclRanks>();
    w->device = device;
    if (const ncclResult_t r = ncclCommInitRank(&w->world, mpi::size(), id, mpi::rank()); r != ncclSuccess)
        return make_error(ErrorCode::kCuda, nccl_error("ncclCommInitRank", r));
    g_ranks = w.release();
    mpi::at_finalize([] {
        for (auto& [g, c] : g_ranks->split) {
            ncclCommDestroy(c.first);
            ncclCommDestroy(c.second);
        }
        if (g_ranks->world) ncclCommDestroy(g_ranks->world);
        delete g_ranks;
        g_ranks = nullptr;
    });
    return g_ranks;
}

// The intra-node and inter-node communicators of node size g (collective: every rank asks in turn).
Result<std::pair<ncclComm_t, ncclComm_t>> nccl_split(NcclRanks& w, int64_t g) {
    if (auto it = w.split.find(g); it != w.split.end()) return it->second;
    const int r = mpi::rank();
    const int node = static_cast<int>(r / g), local = static_cast<int>(r % g);
    ncclComm_t intra = nullptr, inter = nullptr;
    if (const ncclResult_t e = ncclCommSplit(w.world, node, local, &intra, nullptr); e != ncclSuccess)
        return make_error(ErrorCode::kCuda, nccl_error("ncclCommSplit (intra-node)", e));
    if (const ncclResult_t e = ncclCommSplit(w.world, local, node, &inter, nullptr); e != ncclSuccess)
        return make_error(ErrorCode::kCuda, nccl_error("ncclCommSplit (inter-node)", e));
    w.split[g] = {intra, inter};
    return w.split[g];
}

class NcclRankTransport final : public DeviceTransport {
public:
    NcclRankTransport(int64_t ranks, int64_t per_node, FormatSpec format, int64_t max_len)
        : DeviceTransport(ranks, per_node, format, max_len), me_(mpi::rank()) {}
    ~NcclRankTransport() override {
        if (stage_) cudaFree(stage_);
    }

    Status init_ranks(NcclRanks& w) {
        world_ = w.world;
        auto split = nccl_split(w, ranks_per_node());
        if (!split) return split.error();
        intra_ = split->first;
        inter_ = split->second;
        // Every rank's buffers on this process's GPU (the whole schedule runs here, as `device`).
        if (auto st = init(std::vector<int>(static_cast<size_t>(ranks()), w.device)); !st) return st;
        stage_bytes_ = align_up(static_cast<size_t>(max_len_) * 2, 256);
        void* p = nullptr;
        QT_CUDA_CHECK(cudaMalloc(&p, static_cast<size_t>(layout_.slots) * stage_bytes_));
        stage_ = static_cast<char*>(p);
        return Status::Ok();
    }

    void begin_column() override {
        DeviceTransport::begin_column();
        stage_used_ = 0;
    }

protected:
    bool counts(int64_t from) const override { return from == me_; }

    Status move(int64_t from, int64_t to, const Message& m, void* dst) override {
        const bool out = from == me_ && to != me_, in = to == me_ && from != me_;
        const bool half = !m.quantized && m.raw_bytes_per_element == 2;
        // Every other rank's copy, this rank's own message to another, and the binary32 values of a
        // binary16 message stay simulated here; otherwise what this rank receives is what arrives.
        if (!in || half)
            if (auto st = DeviceTransport::move(from, to, m, dst); !st) return st;
        if (!out && !in) return Status::Ok();
        Real x;
        x.send = out;
        x.peer = out ? to : from;
        char* base = static_cast<char*>(out ? m.dev : dst);
        if (m.quantized) {
            // The packed codes, then the metadata (binary32 scale, then offset for -asym), as the
            // wire accounting counts them; on the device the metadata lies at layout_.meta_at.
            const size_t cb = static_cast<size_t>(format_.code_bytes(m.len)), mb = static_cast<size_t>(format_.metadata_bytes());
            if (mb > 2 * sizeof(float)) return internal("metadata wider than the device's two binary32 words");
            x.expect.assign(m.codes.begin(), m.codes.begin() + static_cast<std::ptrdiff_t>(cb));
            uint8_t wire[8] = {};
            write_metadata(format_, m.scale, m.offset, wire);
            x.expect.insert(x.expect.end(), wire, wire + mb);
            // On the device the metadata lies as binary32 words; a declared format whose wire form
            // differs (an E8M0 byte, a binary16 scale) goes through a staging slot, and a receiver
            // turns the bytes that arrived back into the words after the exchange (flush()).
            const float md[2] = {m.scale, m.offset};
            if (std::memcmp(md, wire, mb) == 0 || mb == 0) {
                x.parts = {{base, cb}, {base + layout_.meta_at, mb}};
            } else {
                if (stage_used_ >= layout_.slots) return internal("ran out of staging slots in one column");
                char* st = stage_ + static_cast<size_t>(stage_used_++) * stage_bytes_;
                if (out) QT_CUDA_CHECK(cudaMemcpyAsync(st, wire, mb, cudaMemcpyHostToDevice, stream_of(me_)));
                else x.meta_words = base + layout_.meta_at;
                x.parts = {{base, cb}, {st, mb}};
                if (out) QT_CUDA_CHECK(cudaStreamSynchronize(stream_of(me_)));  // `wire` is on the stack
            }
        } else if (m.raw_bytes_per_element == 4) {
            const size_t b = static_cast<size_t>(m.len) * 4;
            x.parts = {{base, b}};
            const auto* rb = reinterpret_cast<const uint8_t*>(m.raw.data());
            x.expect.assign(rb, rb + b);
        } else {
            // binary16 values (fp16 accumulation): rounded here, staged, and sent as 2 bytes each. The
            // receiver compares them and keeps computing with its own binary32 copy, as under `mpi`
            // (the ledger's first add rounds it to these bits).
            if (stage_used_ >= layout_.slots) return internal("ran out of binary16 staging slots in one column");
            char* st = stage_ + static_cast<size_t>(stage_used_++) * stage_bytes_;
            x.expect.resize(static_cast<size_t>(m.len) * 2);
            for (int64_t i = 0; i < m.len; ++i) {
                const uint16_t h = kernels::f32_to_f16_bits(m.raw[static_cast<size_t>(i)]);
                std::memcpy(x.expect.data() + 2 * i, &h, 2);
            }
            if (out)
                QT_CUDA_CHECK(cudaMemcpyAsync(st, x.expect.data(), x.expect.size(), cudaMemcpyHostToDevice, stream_of(me_)));
            x.parts = {{st, x.expect.size()}};
        }
        int64_t total = 0;
        for (const auto& pt : x.parts) total += static_cast<int64_t>(pt.second);
        if (total != wire_bytes(format_, m))
            return internal("a payload of " + std::to_string(total) + " bytes where the wire accounting says " +
                            std::to_string(wire_bytes(format_, m)));
        if (out && half) QT_CUDA_CHECK(cudaStreamSynchronize(stream_of(me_)));  // the staged bytes are on the device
        if (out) x.expect.clear();
        real_.push_back(std::move(x));
        return Status::Ok();
    }

    // This window's real messages, in one group: every process issues its part of the same window
    // of the schedule (every process runs the whole schedule), so the groups match across processes.
    Status flush() override {
        if (real_.empty()) return Status::Ok();
        cudaStream_t s = stream_of(me_);
        QT_NCCL_CHECK(ncclGroupStart());
        for (const Real& x : real_) {
            ncclComm_t comm;
            int peer;
            route(x.peer, comm, peer);
            for (const auto& [ptr, bytes] : x.parts) {
                if (bytes == 0) continue;
                if (x.send) QT_NCCL_CHECK(ncclSend(ptr, bytes, ncclUint8, peer, comm, s));
                else QT_NCCL_CHECK(ncclRecv(ptr, bytes, ncclUint8, peer, comm, s));
            }
        }
        QT_NCCL_CHECK(ncclGroupEnd());
        if (auto st = wait(s); !st) return st;
        for (const Real& x : real_) {
            if (x.send) continue;
            std::vector<uint8_t> got;
            for (const auto& [ptr, bytes] : x.parts) {
                const size_t at = got.size();
                got.resize(at + bytes);
                QT_CUDA_CHECK(cudaMemcpy(got.data() + at, ptr, bytes, cudaMemcpyDeviceToHost));
            }
            if (got != x.expect)  // the ranks are out of step: the job's failure (mpi.hpp)
                return mpi::fail_job(ErrorCode::kInternal,
                                     "internal error: the payload received from rank " + std::to_string(x.peer) +
                                         " over NCCL differs from the one computed here (the ranks disagree on the "
                                         "inputs or the schedule)");
            if (x.meta_words) {  // staged wire metadata: what arrived becomes the device's binary32 words
                float md[2] = {0, 0};
                read_metadata(format_, got.data() + (got.size() - x.parts.back().second), &md[0], &md[1]);
                QT_CUDA_CHECK(cudaMemcpy(x.meta_words, md, sizeof md, cudaMemcpyHostToDevice));
            }
        }
        real_.clear();
        return Status::Ok();
    }

private:
    struct Real {
        bool send = false;
        int64_t peer = 0;
        std::vector<std::pair<char*, size_t>> parts;  // device ranges, in wire order
        std::vector<uint8_t> expect;                  // a receive: the wire bytes computed here
        char* meta_words = nullptr;                   // a receive of staged metadata: where its words go
    };

    // The communicator a message between this rank and `other` travels on, and other's rank in it.
    void route(int64_t other, ncclComm_t& comm, int& peer) const {
        if (node_of(me_) == node_of(other)) {
            comm = intra_, peer = static_cast<int>(local_of(other));
        } else if (local_of(me_) == local_of(other)) {
            comm = inter_, peer = static_cast<int>(node_of(other));
        } else {
            comm = world_, peer = static_cast<int>(other);
        }
    }

    // The stream's NCCL work done, under the deadline. An NCCL error or the deadline is the job's
    // failure (mpi.hpp; cli/ then aborts the job); the communicators are aborted first, so that the
    // NCCL kernels still waiting for a peer end and freeing this transport's device memory (which
    // synchronizes with them) cannot hang the process on its way back to the caller.
    Status wait(cudaStream_t s) {
        const auto start = std::chrono::steady_clock::now();
        for (long spins = 0;; ++spins) {
            const cudaError_t e = cudaStreamQuery(s);
            if (e == cudaSuccess) return Status::Ok();
            if (e != cudaErrorNotReady) return cuda(e, "cudaStreamQuery (NCCL messages)");
            for (ncclComm_t c : {world_, intra_, inter_}) {
                ncclResult_t a = ncclSuccess;
                if (ncclCommGetAsyncError(c, &a) == ncclSuccess && a != ncclSuccess && a != ncclInProgress) {
                    abort_nccl_ranks();
                    return mpi::fail_job(ErrorCode::kCuda, nccl_error("an NCCL send or receive", a));
                }
            }
            std::this_thread::sleep_for(std::chrono::microseconds(spins < 1000 ? 10 : 500));
            if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > mpi::timeout_s()) {
                abort_nccl_ranks();
                return mpi::fail_job(ErrorCode::kTimeout,
                                     "timed out after " + std::to_string(static_cast<long>(mpi::timeout_s())) +
                                         " s waiting for NCCL messages (a rank died, or the ranks run different "
                                         "arguments; QTRANSIT_MPI_TIMEOUT sets the limit)");
            }
        }
    }

    int64_t me_;
    ncclComm_t world_ = nullptr, intra_ = nullptr, inter_ = nullptr;
    char* stage_ = nullptr;  // binary16 payloads: one slot of stage_bytes_ per message, reset every column
    size_t stage_bytes_ = 0;
    int64_t stage_used_ = 0;
    std::vector<Real> real_;
};

#endif  // QTRANSIT_HAVE_NCCL

Error no_gpu() {
    const auto q = gpu::query_devices();
    return make_error(ErrorCode::kCuda, "no GPU: " + q.note);
}

}  // namespace

Result<std::unique_ptr<Transport>> make_device_transport(int64_t ranks, int64_t ranks_per_node, FormatSpec format,
                                                         int64_t max_len) {
    if (!gpu::device_available()) return no_gpu();
    auto t = std::make_unique<DeviceTransport>(ranks, ranks_per_node, format, max_len);
    if (auto st = t->init(std::vector<int>(static_cast<size_t>(ranks), 0)); !st) return st.error();
    return std::unique_ptr<Transport>(std::move(t));
}

Result<std::unique_ptr<Transport>> make_nccl_transport(int64_t ranks, int64_t ranks_per_node, FormatSpec format,
                                                       int64_t max_len) {
#if QTRANSIT_HAVE_NCCL
    if (mpi::active()) {  // under mpirun/srun: one process per rank, one GPU each
        if (ranks != mpi::size())
            return make_error(ErrorCode::kInvalidArgument, "--backend nccl under mpirun runs one process per rank: N = " +
                                                               std::to_string(ranks) + " but mpirun started " +
                                                               std::to_string(mpi::size()) + " process(es)");
        auto w = nccl_ranks();
        if (!w) return w.error();
        auto t = std::make_unique<NcclRankTransport>(ranks, ranks_per_node, format, max_len);
        if (auto st = t->init_ranks(**w); !st) return st.error();
        return std::unique_ptr<Transport>(std::move(t));
    }
    const auto q = gpu::query_devices();
    if (q.devices.empty()) return no_gpu();
    if (static_cast<int64_t>(q.devices.size()) != ranks)
        return make_error(ErrorCode::kInvalidArgument,
                          "the nccl backend runs one rank per GPU: N=" + std::to_string(ranks) + " but " +
                              std::to_string(q.devices.size()) + " GPU(s) are visible (use --ranks " +
                              std::to_string(q.devices.size()) + ", or --backend device)");
    auto t = std::make_unique<NcclTransport>(ranks, ranks_per_node, format, max_len);
    if (auto st = t->init_nccl(); !st) return st.error();
    return std::unique_ptr<Transport>(std::move(t));
#else
    (void)ranks, (void)ranks_per_node, (void)format, (void)max_len;
    return make_error(ErrorCode::kCuda, "this build has no NCCL (configure with QTRANSIT_NCCL=ON where NCCL is installed)");
#endif
}

}  // namespace qtransit::collectives
