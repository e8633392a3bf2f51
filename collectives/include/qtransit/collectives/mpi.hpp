// The `mpi` backend: one process per rank, launched by mpirun (or srun), every message of a path's
// schedule (paths.cpp) carried between the processes by MPI as the bytes the wire accounting
// counts (packed codes then scale, then offset for asym; or the raw values, binary32 or binary16).
//
// Design (kept deliberately simple, and exact): every process runs the whole column schedule, as
// `sim` does, so that every value, quantization event and ledger entry is the same bit for bit.
// A send whose sender is this process is really sent (MPI_Isend of the serialized payload) to the
// receiving process; a receive whose receiver is this process really receives it (MPI_Irecv), the
// received payload is compared with the one this process computed (a difference is an internal
// error that stops every rank), and the received bytes are what the receiver decodes. Sends and
// receives between two other ranks are delivered in process, like `sim`. Each process counts only
// the bytes it actually sent; the counts are summed over the processes afterwards. Each process
// checks only the output rows it holds (its own rank's), with inputs regenerated locally by the
// counter-based generator, so checking needs no extra communication: only the verdicts are reduced.
// The cost of this design: every process computes every rank's arithmetic (the compute per
// process is that of the whole simulation); the checking per process is of its own outputs only.
//
// Every wait (a receive, a send's completion, a collective) has a deadline: QTRANSIT_MPI_TIMEOUT
// seconds (default 300). Past it, or when the ranks are found to disagree (a received payload that
// differs from the one computed here), the job has failed (job_failure()): the library returns that
// Error up to its caller and never exits itself; cli/ then prints it and ends every process with
// abort_job (MPI_Abort), so a dead rank or ranks that disagree end the run with a message, never a
// hang.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "qtransit/collectives/transport.hpp"
#include "qtransit/common/status.hpp"

namespace qtransit::collectives::mpi {

bool built();  // this build has the mpi backend
// argv asks for `backend` (`--backend mpi` or `--backend=mpi`, by default).
bool requested(int argc, char** argv, const char* backend = "mpi");
// A launcher started this process as one of several (its environment has OMPI_COMM_WORLD_SIZE,
// PMI_SIZE or PMIX_RANK: Open MPI's mpirun, MPICH's Hydra, Slurm's srun --mpi=pmi2|pmix). The nccl
// backend starts MPI only then, so that a plain `qtransit simulate --backend nccl` stays one process.
bool launched();
// MPI_Init; then every rank's arguments (argv[1..]) are compared: an Error on every rank, naming
// the first rank whose arguments differ from rank 0's, when they are not all the same.
Status init(int* argc, char*** argv);
bool active();  // init succeeded and finalize has not run
int rank();
int size();
// This process's index among the processes of its node (MPI_COMM_TYPE_SHARED), and their number
// (0 and 1 when MPI is not active).
int node_local_rank();
int node_local_size();
// Runs `f` in finalize, before MPI_Finalize (the nccl backend frees its communicators there).
void at_finalize(std::function<void()> f);
// MPI_Finalize, after the at_finalize functions. Does nothing after a job failure (MPI_Finalize
// could wait forever for a dead rank): such a job ends with abort_job.
void finalize();
double timeout_s();

// The job's failure, or null while there is none: a wait past its deadline (ErrorCode::kTimeout), the
// ranks found to disagree (kInternal), an NCCL error under mpirun (kCuda). The ranks are then no
// longer in step, so every later collective and mpi transport call returns it at once, without MPI;
// the process must end the whole job with abort_job (cli/main.cpp and cli::fail do).
const Error* job_failure();
// Makes `what` the job's failure (the first one recorded stays) and returns the job's failure. For
// the transports built on MPI (the nccl transport under mpirun).
Error fail_job(ErrorCode code, const std::string& what);
// Prints "qtransit: rank R: <what>" and aborts every process of the job (MPI_Abort). For cli/ only:
// library code returns errors and never ends the process.
[[noreturn]] void abort_job(const std::string& what);

// Collectives over every process, each wait under the deadline; an Error is the job's failure.
Result<std::vector<double>> allgather(const std::vector<double>& mine);       // every rank's, by rank
Result<std::vector<std::string>> allgather_strings(const std::string& mine);  // every rank's, by rank
Status allreduce_sum(std::vector<int64_t>& v);
// Rank 0's `bytes` bytes at `data` copied to every rank's `data`.
Status broadcast(void* data, size_t bytes);
// Every rank's error ("" for none) compared: "" when no rank has one, else the lowest failing
// rank's, as "rank R: <error>" (just "<error>" when every rank has that same error); the job's
// failure's message when the ranks could not compare. Collective.
std::string first_error(const std::string& mine);
// Rank r's `row` (the same length on every rank) into rows [r] of the result, on rank 0 only.
Result<std::vector<float>> gather_rows(const std::vector<float>& row);

// Rank mpi::rank() of `ranks` (which must equal mpi::size()).
Result<std::unique_ptr<Transport>> make_mpi_transport(int64_t ranks, int64_t ranks_per_node, FormatSpec format);

}  // namespace qtransit::collectives::mpi
