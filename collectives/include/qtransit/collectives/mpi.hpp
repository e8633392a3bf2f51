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
// seconds (default 300). Past it the rank prints what it was waiting for and calls MPI_Abort, so a
// dead rank or ranks that disagree end the run with a message, never a hang.
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
void finalize();
double timeout_s();
// Prints "qtransit: rank R: <what>" and aborts every process of the job (MPI_Abort).
[[noreturn]] void abort_job(const std::string& what);

// Collectives over every process, each wait under the deadline.
std::vector<double> allgather(const std::vector<double>& mine);          // every rank's, by rank
std::vector<std::string> allgather_strings(const std::string& mine);     // every rank's, by rank
void allreduce_sum(std::vector<int64_t>& v);
// Rank 0's `bytes` bytes at `data` copied to every rank's `data`.
void broadcast(void* data, size_t bytes);
// Every rank's error ("" for none) compared: "" when no rank has one, else the lowest failing
// rank's, as "rank R: <error>" (just "<error>" when every rank has that same error). Collective.
std::string first_error(const std::string& mine);
// Rank r's `row` (the same length on every rank) into rows [r] of the result, on rank 0 only.
std::vector<float> gather_rows(const std::vector<float>& row);

// Rank mpi::rank() of `ranks` (which must equal mpi::size()).
Result<std::unique_ptr<Transport>> make_mpi_transport(int64_t ranks, int64_t ranks_per_node, FormatSpec format);

}  // namespace qtransit::collectives::mpi
