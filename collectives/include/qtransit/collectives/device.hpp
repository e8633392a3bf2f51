// Device transports: the same schedules as `sim` (paths.cpp), with every value of a column computed
// by the CUDA kernels (kernels/gpu.hpp) and every message carried between the ranks' device
// buffers. `device`: N ranks on one GPU, one device buffer per rank, messages copied with
// cudaMemcpyAsync on the ranks' one stream; a run's threads have a transport each (run_paths). `nccl`: one rank per visible GPU in one process
// (ncclCommInitAll), messages as grouped ncclSend/ncclRecv over the intra-node, inter-node
// (ncclCommSplit by node index and by local index) or world communicator. `nccl` under mpirun or
// srun (mpi::active()): one process per rank and GPU, ncclCommInitRank with the unique id broadcast
// over MPI, the same splits, each process sending and receiving its own rank's messages
// (device_transport.cu says how, and that it has not run on GPUs yet).
//
// The ledger stays on the host: each device step copies back what the ledger records (the encoded
// values and codes of a quantization event, the result of every add, whether an fp16 term rounding
// moved a value), so the checker runs unchanged. No CUDA header here: a build without CUDA gets
// factories that return an Error saying so.
#pragma once

#include <cstdint>
#include <memory>

#include "qtransit/collectives/transport.hpp"
#include "qtransit/common/status.hpp"
#include "qtransit/kernels/codec.hpp"

namespace qtransit::collectives {

// Thrown by a device transport's send/recv when a CUDA or NCCL call fails (run_column turns it into
// the Error it carries).
struct DeviceFailure {
    Error error;
};

// The column steps of paths.cpp's Column, on the device. Every call is synchronous as seen from
// the host (its results are in the host arrays when it returns). `rank`: whose buffer and device.
class DeviceOps {
public:
    virtual ~DeviceOps() = default;
    // Q: x[0..n) into rank's buffer, encoded there; m.dev* name the encoded block, and m.codes,
    // m.scale, m.offset hold the copies the ledger reads.
    virtual Status encode(int64_t rank, const float* x, int64_t n, const kernels::CodecOptions& options, Message& m) = 0;
    // An unquantized message: m.raw into rank's buffer.
    virtual Status stage_raw(int64_t rank, Message& m) = 0;
    // D: the message where it lies (m.dev_rank's buffer) decoded into out[0..m.len).
    virtual Status decode(const Message& m, float* out) = 0;
    // The first term of an fp16 or bf16 sum: v rounded to the type.
    virtual Status round_first(int64_t rank, float* v, int64_t n, Accum accum) = 0;
    // acc = accum_add(acc, term) (block_math.hpp); under fp16 or bf16 also term rounded to the
    // type, so that the ledger can tell whether the rounding moved it.
    virtual Status add(int64_t rank, float* acc, float* term, int64_t n, Accum accum) = 0;
};

// One rank's device buffer in a device transport (device_transport.cu): two scratch rows of
// `max_len` floats, then `slots` message slots. A slot holds a block's packed codes, its metadata
// as two binary32 words at `meta_at` (scale, offset), and the encode's refusal flag (a 64-bit word)
// after them, so that one copy brings back all three. Computed on the host, with or without CUDA.
struct DeviceBufferLayout {
    size_t meta_at = 0;        // the metadata's offset in a slot (16-byte aligned)
    size_t flag_at = 0;        // the refusal flag's offset in a slot
    size_t slot_bytes = 0;     // a slot, 256-byte aligned
    size_t scratch_bytes = 0;  // the two scratch rows, 256-byte aligned
    int64_t slots = 0;         // the most messages a rank holds in one column
    static DeviceBufferLayout of(int64_t ranks, const FormatSpec& format, int64_t max_len);
    size_t rank_bytes() const { return scratch_bytes + static_cast<size_t>(slots) * slot_bytes; }
    // What a message between ranks carries: codes and metadata (the flag stays behind).
    size_t message_bytes() const { return meta_at + 2 * sizeof(float); }
};

// The device memory a `device` transport for `ranks` ranks takes (DeviceBufferLayout::of, every rank).
int64_t device_transport_bytes(int64_t ranks, const FormatSpec& format, int64_t max_len);

// How many host threads run a `device` backend's columns, each with its own transports (their own
// buffers and stream): `wanted` (at least 1), as many as fit in half of the GPU's `device_bytes`
// when each thread's transports take `bytes_per_thread`, and never fewer than 1. The CUDA calls
// of a column are round trips of a few microseconds, so threads overlap them (issue 51).
int device_thread_count(int wanted, int64_t bytes_per_thread, int64_t device_bytes);

// N ranks on one GPU (device 0). `max_len`: the longest block a column sends (the path's block).
Result<std::unique_ptr<Transport>> make_device_transport(int64_t ranks, int64_t ranks_per_node, FormatSpec format,
                                                         int64_t max_len);
// One rank per visible GPU; an Error when N differs from the number of GPUs, or without NCCL.
// Under MPI: rank mpi::rank() of N = mpi::size() processes, on this process's GPU; an Error (on
// every rank alike) when a process has no GPU or two processes of a node would share one.
Result<std::unique_ptr<Transport>> make_nccl_transport(int64_t ranks, int64_t ranks_per_node, FormatSpec format,
                                                       int64_t max_len);

}  // namespace qtransit::collectives
