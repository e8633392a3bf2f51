// The mpi backend in a build without MPI: it says so, and never pretends to have run.
#include "qtransit/collectives/mpi.hpp"

#include <cstdio>
#include <cstdlib>
#include <optional>

namespace qtransit::collectives::mpi {
namespace {
Error not_built() {
    return make_error(ErrorCode::kInvalidArgument,
                      "this build has no mpi backend (install openmpi-bin and libopenmpi-dev, then reconfigure)");
}
// The same contract as with MPI, though nothing fails a job here: the one caller of fail_job, the nccl
// transport under mpirun, needs MPI.
std::optional<Error> g_failure;
}  // namespace

bool built() { return false; }
Status init(int*, char***) { return not_built(); }
bool active() { return false; }
int rank() { return 0; }
int size() { return 1; }
int node_local_rank() { return 0; }
int node_local_size() { return 1; }
void at_finalize(std::function<void()>) {}
void finalize() {}
double timeout_s() { return 0; }
const Error* job_failure() { return g_failure ? &*g_failure : nullptr; }
Error fail_job(ErrorCode code, const std::string& what) {
    if (!g_failure) g_failure = make_error(code, what);
    return *g_failure;
}
// For cli/ only (mpi.hpp): without MPI there is no job to abort, only this process.
void abort_job(const std::string& what) {
    std::fprintf(stderr, "qtransit: %s\n", what.c_str());
    std::abort();
}
Status broadcast(void*, size_t) { return Status::Ok(); }
std::string first_error(const std::string& mine) { return mine; }
Result<std::vector<double>> allgather(const std::vector<double>& mine) { return mine; }
Result<std::vector<std::string>> allgather_strings(const std::string& mine) { return std::vector<std::string>{mine}; }
Status allreduce_sum(std::vector<int64_t>&) { return Status::Ok(); }
Result<std::vector<float>> gather_rows(const std::vector<float>& row) { return row; }
Result<std::unique_ptr<Transport>> make_mpi_transport(int64_t, int64_t, FormatSpec) { return not_built(); }

}  // namespace qtransit::collectives::mpi
