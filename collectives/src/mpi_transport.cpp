// The mpi backend (mpi.hpp): the design and its cost are described there.
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <thread>

#include "qtransit/common/text_file.hpp"
#include "qtransit/collectives/mpi.hpp"
#include "qtransit/kernels/fp16.hpp"

namespace qtransit::collectives::mpi {
namespace {

bool g_active = false;
int g_rank = 0, g_size = 1;
int g_local_rank = 0, g_local_size = 1;  // within this process's node (MPI_COMM_TYPE_SHARED)
std::vector<std::function<void()>> g_at_finalize;
MPI_Comm g_data = MPI_COMM_NULL;  // the transports' messages (a duplicate of MPI_COMM_WORLD)
double g_timeout = 300;
// The job's failure (job_failure()): the first wait past its deadline or the first disagreement
// between the ranks. One thread drives MPI (run_paths runs every backend but cpu on one thread).
std::optional<Error> g_failure;
// What timed-out requests may still write into. MPI cannot cancel a nonblocking collective, so
// rather than free a buffer under a late completion, it stays alive until the process ends (the
// caller's next step is abort_job).
std::vector<std::shared_ptr<void>> g_stranded;

// Waits for `req` under the deadline, polling (and yielding the CPU: ranks may be oversubscribed).
// Past the deadline: the job's failure, and `buffers` (what the request writes into) are stranded.
Status wait(MPI_Request& req, const std::string& what, std::shared_ptr<void> buffers) {
    const auto start = std::chrono::steady_clock::now();
    int done = 0;
    for (long spins = 0;; ++spins) {
        MPI_Test(&req, &done, MPI_STATUS_IGNORE);
        if (done) return Status::Ok();
        if (spins < 64) {
            std::this_thread::yield();
            continue;
        }
        std::this_thread::sleep_for(std::chrono::microseconds(spins < 4096 ? 20 : 500));
        if ((spins & 63) == 0 &&
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > g_timeout) {
            g_stranded.push_back(std::move(buffers));
            return fail_job(ErrorCode::kTimeout,
                            "timed out after " + std::to_string(static_cast<long>(g_timeout)) + " s waiting for " + what +
                                " (a rank died, or the ranks run different arguments; QTRANSIT_MPI_TIMEOUT sets the limit)");
        }
    }
}

uint64_t hash_args(int argc, char** argv) {
    uint64_t h = 1469598103934665603ull;  // FNV-1a over argv[1..], each followed by a 0 byte
    for (int i = 1; i < argc; ++i) {
        for (const char* p = argv[i];; ++p) {
            h = (h ^ static_cast<unsigned char>(*p)) * 1099511628211ull;
            if (!*p) break;
        }
    }
    return h;
}

// The payload of a message exactly as the wire accounting counts it (wire_bytes).
std::vector<uint8_t> serialize(const FormatSpec& f, const Message& m) {
    std::vector<uint8_t> b;
    if (m.quantized) {
        b.assign(m.codes.begin(), m.codes.begin() + f.code_bytes(m.len));
        b.resize(b.size() + static_cast<size_t>(f.metadata_bytes()));
        write_metadata(f, m.scale, m.offset, b.data() + f.code_bytes(m.len));
    } else if (m.raw_bytes_per_element == 2) {
        b.resize(static_cast<size_t>(m.len) * 2);
        for (int64_t i = 0; i < m.len; ++i) {
            const uint16_t h = kernels::f32_to_f16_bits(m.raw[static_cast<size_t>(i)]);
            std::memcpy(b.data() + 2 * i, &h, 2);
        }
    } else {
        b.resize(static_cast<size_t>(m.len) * 4);
        std::memcpy(b.data(), m.raw.data(), b.size());
    }
    return b;
}

// An inconsistency between this process and the others (or in the schedule): the ranks are no
// longer known to be in step, so it is the job's failure, thrown out of the schedule.
[[noreturn]] void throw_job_failure(ErrorCode code, const std::string& what) {
    throw TransportFailure{fail_job(code, what)};
}

class MpiTransport final : public Transport {
public:
    MpiTransport(int64_t ranks, int64_t per_node, FormatSpec format)
        : Transport(ranks, per_node, format), format_(format), box_(static_cast<size_t>(ranks)) {}
    ~MpiTransport() override {
        // Normally empty (every column completes its sends); after a failed column, cancel.
        for (auto& r : reqs_) {
            int done = 0;
            MPI_Test(&r, &done, MPI_STATUS_IGNORE);
            if (!done) {
                MPI_Cancel(&r);
                MPI_Request_free(&r);
            }
        }
    }

    void begin_column() override { complete_sends(); }

    Message recv(int64_t to, int64_t from) override {
        if (g_failure) throw TransportFailure{*g_failure};
        auto& box = box_[static_cast<size_t>(to)];
        auto it = box.begin();
        while (it != box.end() && it->first != from) ++it;
        if (it == box.end()) throw_job_failure(ErrorCode::kInternal, "internal error: a receive with no matching send in the schedule");
        Message m = std::move(it->second);
        box.erase(it);
        if (to != g_rank || from == to) return m;
        // This process is the receiver: the payload comes from the sender's process.
        const std::vector<uint8_t> local = serialize(format_, m);
        auto got = std::make_shared<std::vector<uint8_t>>(local.size());
        MPI_Request req;
        MPI_Irecv(got->data(), static_cast<int>(got->size()), MPI_BYTE, static_cast<int>(from), 0, g_data, &req);
        if (auto st = wait(req, "a message from rank " + std::to_string(from), got); !st) throw TransportFailure{st.error()};
        if (*got != local)
            throw_job_failure(ErrorCode::kInternal,
                              "internal error: the payload received from rank " + std::to_string(from) +
                                  " differs from the one computed here (the ranks disagree on the inputs or the schedule)");
        // Decode what arrived. (A binary16 raw message keeps the binary32 values the sender held
        // before rounding for the ledger, whose first add rounds them; its bits were compared.)
        if (m.quantized) {
            const size_t cb = static_cast<size_t>(format_.code_bytes(m.len));
            std::memcpy(m.codes.data(), got->data(), cb);
            read_metadata(format_, got->data() + cb, &m.scale, &m.offset);
        } else if (m.raw_bytes_per_element == 4) {
            std::memcpy(m.raw.data(), got->data(), got->size());
        }
        return m;
    }

    int64_t actually_sent() const { return actually_sent_; }

protected:
    bool counts(int64_t from) const override { return from == g_rank; }

    void deliver(int64_t from, int64_t to, Message&& m) override {
        if (g_failure) throw TransportFailure{*g_failure};
        if (from == g_rank && to != from) {
            out_.push_back(serialize(format_, m));
            const auto& b = out_.back();
            if (static_cast<int64_t>(b.size()) != wire_bytes(format_, m))
                throw_job_failure(ErrorCode::kInternal, "internal error: a payload of " + std::to_string(b.size()) +
                                                            " bytes where the wire accounting says " +
                                                            std::to_string(wire_bytes(format_, m)));
            reqs_.emplace_back();
            MPI_Isend(b.data(), static_cast<int>(b.size()), MPI_BYTE, static_cast<int>(to), 0, g_data, &reqs_.back());
            actually_sent_ += static_cast<int64_t>(b.size());
        }
        box_[static_cast<size_t>(to)].emplace_back(from, std::move(m));
    }

private:
    void complete_sends() {
        if (g_failure) throw TransportFailure{*g_failure};
        // A send only reads its payload (out_, kept until every send completed or was cancelled).
        for (auto& r : reqs_)
            if (auto st = wait(r, "a message to another rank to be received", nullptr); !st) throw TransportFailure{st.error()};
        reqs_.clear();
        out_.clear();
    }

    FormatSpec format_;
    std::vector<std::vector<std::pair<int64_t, Message>>> box_;
    std::deque<std::vector<uint8_t>> out_;  // payloads in flight (stable addresses)
    std::deque<MPI_Request> reqs_;
    int64_t actually_sent_ = 0;
};

}  // namespace

bool built() { return true; }

Status init(int* argc, char*** argv) {
    if (g_active) return Status::Ok();
    if (std::getenv(kMpiTimeout.name)) {
        auto v = env_seconds(kMpiTimeout);
        if (!v) return v.error();
        g_timeout = *v;
    }
    if (MPI_Init(argc, argv) != MPI_SUCCESS) return make_error(ErrorCode::kInvalidArgument, "MPI_Init failed");
    g_active = true;
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    MPI_Comm_dup(MPI_COMM_WORLD, &g_data);
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, g_rank, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &g_local_rank);
    MPI_Comm_size(node, &g_local_size);
    MPI_Comm_free(&node);
    // Every rank must run the same command: compare the hashes of the arguments.
    const uint64_t mine = hash_args(*argc, *argv);
    auto all = std::make_shared<std::vector<uint64_t>>(static_cast<size_t>(g_size));
    MPI_Request req;
    MPI_Iallgather(&mine, 1, MPI_UINT64_T, all->data(), 1, MPI_UINT64_T, MPI_COMM_WORLD, &req);
    if (auto st = wait(req, "every rank to start (comparing the ranks' arguments)", all); !st) return st;
    for (int r = 1; r < g_size; ++r)
        if ((*all)[static_cast<size_t>(r)] != (*all)[0])
            return make_error(ErrorCode::kInvalidArgument,
                              "the ranks were started with different arguments (rank " + std::to_string(r) +
                                  "'s differ from rank 0's): every rank must run the same command");
    return Status::Ok();
}

bool active() { return g_active; }
int rank() { return g_rank; }
int size() { return g_size; }
int node_local_rank() { return g_local_rank; }
int node_local_size() { return g_local_size; }
double timeout_s() { return g_timeout; }
void at_finalize(std::function<void()> f) { g_at_finalize.push_back(std::move(f)); }

const Error* job_failure() { return g_failure ? &*g_failure : nullptr; }

Error fail_job(ErrorCode code, const std::string& what) {
    if (!g_failure) g_failure = make_error(code, what);
    return *g_failure;
}

void abort_job(const std::string& what) {
    std::fprintf(stderr, "qtransit: rank %d: %s\n", g_rank, what.c_str());
    std::fflush(stderr);
    if (g_active) MPI_Abort(MPI_COMM_WORLD, 3);
    std::abort();  // MPI_Abort does not return; nor may this
}

void finalize() {
    if (!g_active) return;
    // After a job failure the ranks are out of step: MPI_Finalize (and NCCL's clean-up) could wait
    // for a rank that is dead. Such a job ends with abort_job instead (mpi.hpp).
    if (g_failure) return;
    for (auto it = g_at_finalize.rbegin(); it != g_at_finalize.rend(); ++it) (*it)();
    g_at_finalize.clear();
    MPI_Comm_free(&g_data);
    MPI_Finalize();
    g_active = false;
}

Result<std::vector<double>> allgather(const std::vector<double>& mine) {
    if (g_failure) return *g_failure;
    auto all = std::make_shared<std::vector<double>>(mine.size() * static_cast<size_t>(g_size));
    MPI_Request req;
    MPI_Iallgather(mine.data(), static_cast<int>(mine.size()), MPI_DOUBLE, all->data(), static_cast<int>(mine.size()),
                   MPI_DOUBLE, MPI_COMM_WORLD, &req);
    if (auto st = wait(req, "every rank's results", all); !st) return st.error();
    return std::move(*all);
}

Result<std::vector<std::string>> allgather_strings(const std::string& mine) {
    if (g_failure) return *g_failure;
    struct Buffers {  // what the two collectives write into and read during their progress
        std::vector<int> lens, displs;
        std::string all;
    };
    auto b = std::make_shared<Buffers>();
    int len = static_cast<int>(mine.size());
    b->lens.resize(static_cast<size_t>(g_size));
    b->displs.resize(static_cast<size_t>(g_size));
    MPI_Request req;
    MPI_Iallgather(&len, 1, MPI_INT, b->lens.data(), 1, MPI_INT, MPI_COMM_WORLD, &req);
    if (auto st = wait(req, "every rank's results", b); !st) return st.error();
    int total = 0;
    for (int r = 0; r < g_size; ++r) {
        b->displs[static_cast<size_t>(r)] = total;
        total += b->lens[static_cast<size_t>(r)];
    }
    b->all.assign(static_cast<size_t>(total), '\0');
    MPI_Iallgatherv(mine.data(), len, MPI_CHAR, b->all.data(), b->lens.data(), b->displs.data(), MPI_CHAR, MPI_COMM_WORLD,
                    &req);
    if (auto st = wait(req, "every rank's results", b); !st) return st.error();
    std::vector<std::string> out;
    for (int r = 0; r < g_size; ++r)
        out.push_back(b->all.substr(static_cast<size_t>(b->displs[static_cast<size_t>(r)]),
                                    static_cast<size_t>(b->lens[static_cast<size_t>(r)])));
    return out;
}

Status allreduce_sum(std::vector<int64_t>& v) {
    if (g_failure) return *g_failure;
    auto out = std::make_shared<std::vector<int64_t>>(v.size());
    MPI_Request req;
    MPI_Iallreduce(v.data(), out->data(), static_cast<int>(v.size()), MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD, &req);
    if (auto st = wait(req, "every rank's byte counts", out); !st) return st;
    v = std::move(*out);
    return Status::Ok();
}

Status broadcast(void* data, size_t bytes) {
    if (g_failure) return *g_failure;
    // Staged, so that a broadcast that times out writes into nothing of the caller's.
    auto* p = static_cast<uint8_t*>(data);
    auto buf = std::make_shared<std::vector<uint8_t>>(p, p + bytes);
    MPI_Request req;
    MPI_Ibcast(buf->data(), static_cast<int>(bytes), MPI_BYTE, 0, MPI_COMM_WORLD, &req);
    if (auto st = wait(req, "rank 0's broadcast", buf); !st) return st;
    std::memcpy(data, buf->data(), bytes);
    return Status::Ok();
}

std::string first_error(const std::string& mine) {
    const auto all = allgather_strings(mine);
    if (!all) return all.error().message;  // the ranks could not even compare: the job's failure
    for (int r = 0; r < g_size; ++r) {
        const std::string& e = (*all)[static_cast<size_t>(r)];
        if (e.empty()) continue;
        bool everywhere = true;
        for (const auto& x : *all) everywhere = everywhere && x == e;
        return everywhere ? e : "rank " + std::to_string(r) + ": " + e;
    }
    return "";
}

Result<std::vector<float>> gather_rows(const std::vector<float>& row) {
    if (g_failure) return *g_failure;
    auto all = std::make_shared<std::vector<float>>(g_rank == 0 ? row.size() * static_cast<size_t>(g_size) : 0);
    MPI_Request req;
    MPI_Igather(row.data(), static_cast<int>(row.size()), MPI_FLOAT, all->data(), static_cast<int>(row.size()), MPI_FLOAT,
                0, MPI_COMM_WORLD, &req);
    if (auto st = wait(req, "every rank's output rows", all); !st) return st.error();
    return std::move(*all);
}

Result<std::unique_ptr<Transport>> make_mpi_transport(int64_t ranks, int64_t ranks_per_node, FormatSpec format) {
    if (!g_active)
        return make_error(ErrorCode::kInvalidArgument, "--backend mpi runs under mpirun (or srun): MPI is not initialized");
    if (ranks != g_size)
        return make_error(ErrorCode::kInvalidArgument, "--backend mpi runs one process per rank: N = " +
                                                           std::to_string(ranks) + " but mpirun started " +
                                                           std::to_string(g_size) + " process(es)");
    return std::unique_ptr<Transport>(std::make_unique<MpiTransport>(ranks, ranks_per_node, format));
}

}  // namespace qtransit::collectives::mpi
