// Transports: how a path's messages travel between ranks. A path is written once as a schedule of
// sends and receives over a Transport; `sim` delivers them in process (deterministic, any number of
// ranks), and later transports (device, nccl, mpi) carry the same messages for real. Every
// transport counts the payload bytes each rank sends, the part that crosses nodes, and what the same
// message would weigh in binary16.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "qtransit/common/format.hpp"
#include "qtransit/common/status.hpp"

namespace qtransit::collectives {

// One block on the wire: packed codes and their metadata, or raw floating-point values.
struct Message {
    int64_t len = 0;               // elements
    bool quantized = true;
    std::vector<uint8_t> codes;    // packed codes (quantized)
    float scale = 0, offset = 0;   // metadata (quantized; offset for asym only)
    std::vector<float> raw;        // the values (not quantized)
    int raw_bytes_per_element = 4; // 4 (binary32) or 2 (binary16 or bfloat16 values)
    // The format of the codes when it is not the transport's: a per-stage format (issue 17), which
    // the cpu backend carries; it points into the column's PathConfig. Null: the transport's format.
    const FormatSpec* format = nullptr;
    // A rotated format's signs (FORMATS.md section 9) are keyed by the run's seed and the index of
    // the block's first element, which both ends know from the schedule; carried here for the decode.
    int64_t sign_first = 0;
    // Not on the wire: the simulation's handle on the ledger of what the message carries (-1: none).
    int32_t provenance = -1;
    // Device transports only: where the payload lies in device memory (codes, then scale and offset;
    // or the raw values), in the buffer of rank `dev_rank`; null on the CPU.
    void* dev = nullptr;
    int64_t dev_bytes = 0;
    int32_t dev_rank = -1;
};

// Where a path's values are computed and its messages travel: `cpu` (SimTransport, the production
// CPU kernels), `device` (every rank simulated on one GPU), `nccl` (one rank per GPU, NCCL), `mpi`
// (one process per rank under mpirun, the CPU kernels, messages as MPI messages; mpi.hpp).
enum class Backend { kCpu, kDevice, kNccl, kMpi };
const char* to_string(Backend b);
Result<Backend> parse_backend(const std::string& name);  // the Error lists the known names
std::string known_backend_names();                        // "cpu, device, nccl, mpi"

class DeviceOps;  // device.hpp: Q, D and the adds of a column on a device transport

// Thrown by a transport's send or recv when the schedule cannot go on: an inconsistency it caught
// (a receive of what was never sent, a payload that differs from the one computed here) or a wait
// past its deadline. Schedules are straight-line code over recv's value; run_column turns this into
// the Error it carries, so nothing escapes the library (as ColumnFailure, DeviceFailure).
struct TransportFailure {
    Error error;
};

// Payload bytes of a message in the given format (codes + metadata, or raw values).
int64_t wire_bytes(const FormatSpec& format, const Message& m);

struct ByteCounts {
    std::vector<int64_t> sent;        // per rank: payload bytes sent
    std::vector<int64_t> cross_node;  // per rank: the part sent to another node
    std::vector<int64_t> fp16_equiv;  // per rank: the same messages as binary16 values, no metadata
    void resize(int64_t ranks);
    void merge(const ByteCounts& o);
};

class Transport {
public:
    Transport(int64_t ranks, int64_t ranks_per_node, FormatSpec format)
        : ranks_(ranks), per_node_(ranks_per_node), format_(format) {
        bytes_.resize(ranks);
    }
    virtual ~Transport() = default;
    int64_t ranks() const { return ranks_; }
    int64_t ranks_per_node() const { return per_node_; }
    int64_t nodes() const { return ranks_ / per_node_; }
    int64_t node_of(int64_t r) const { return r / per_node_; }
    int64_t local_of(int64_t r) const { return r % per_node_; }
    int64_t rank_of(int64_t node, int64_t local) const { return node * per_node_ + local; }
    // The intra-node group of node n, and the inter-node group of local index l (one rank per node).
    std::vector<int64_t> node_group(int64_t n) const;
    std::vector<int64_t> local_group(int64_t l) const;

    // Sends count their bytes here (a send to oneself is a local copy and counts nothing), then
    // hand the message to the transport.
    void send(int64_t from, int64_t to, Message&& m);
    virtual Message recv(int64_t to, int64_t from) = 0;
    const ByteCounts& bytes() const { return bytes_; }
    // The device computing a column's values (null: the CPU), and the start of every column.
    virtual DeviceOps* device_ops() { return nullptr; }
    virtual void begin_column() {}

protected:
    virtual void deliver(int64_t from, int64_t to, Message&& m) = 0;
    // Whether this transport counts the bytes `from` sends (mpi: only this process's own rank's).
    virtual bool counts(int64_t /*from*/) const { return true; }

private:
    int64_t ranks_, per_node_;
    FormatSpec format_;
    ByteCounts bytes_;
};

// In-process delivery: a FIFO mailbox per receiver. Deterministic; a receive with nothing from
// that sender is a schedule bug: a TransportFailure (ErrorCode::kInternal) naming both ranks.
class SimTransport final : public Transport {
public:
    SimTransport(int64_t ranks, int64_t ranks_per_node, FormatSpec format);
    Message recv(int64_t to, int64_t from) override;
    bool idle() const;  // no message waiting anywhere (every send was received)

protected:
    void deliver(int64_t from, int64_t to, Message&& m) override;

private:
    // Per receiver: (sender, message) in arrival order; taken ones are marked (sender -1) and skipped
    // from `head`, so a receive in arrival order moves nothing, and the box empties when all are taken.
    struct Box {
        std::vector<std::pair<int64_t, Message>> q;
        size_t head = 0;
    };
    std::vector<Box> box_;
};

}  // namespace qtransit::collectives
