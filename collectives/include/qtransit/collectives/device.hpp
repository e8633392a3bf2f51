// Device transports: the same schedules as `sim` (paths.cpp), with every value of a column computed
// by the CUDA kernels (kernels/gpu.hpp) and every message carried between the ranks' device
// buffers. `device`: N ranks on one GPU, one device buffer per rank, messages copied with
// cudaMemcpyAsync on the receiver's stream. `nccl`: one rank per visible GPU in one process
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

// N ranks on one GPU (device 0). `max_len`: the longest block a column sends (the path's block).
Result<std::unique_ptr<Transport>> make_device_transport(int64_t ranks, int64_t ranks_per_node, FormatSpec format,
                                                         int64_t max_len);
// One rank per visible GPU; an Error when N differs from the number of GPUs, or without NCCL.
// Under MPI: rank mpi::rank() of N = mpi::size() processes, on this process's GPU; an Error (on
// every rank alike) when a process has no GPU or two processes of a node would share one.
Result<std::unique_ptr<Transport>> make_nccl_transport(int64_t ranks, int64_t ranks_per_node, FormatSpec format,
                                                       int64_t max_len);

}  // namespace qtransit::collectives
