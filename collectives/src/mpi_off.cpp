// The mpi backend in a build without MPI: it says so, and never pretends to have run.
#include "qtransit/collectives/mpi.hpp"

#include <cstdio>
#include <cstdlib>

namespace qtransit::collectives::mpi {
namespace {
Error not_built() {
    return make_error(ErrorCode::kInvalidArgument,
                      "this build has no mpi backend (install openmpi-bin and libopenmpi-dev, then reconfigure)");
}
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
void abort_job(const std::string& what) {
    std::fprintf(stderr, "qtransit: %s\n", what.c_str());
    std::abort();
}
void broadcast(void*, size_t) {}
std::string first_error(const std::string& mine) { return mine; }
std::vector<double> allgather(const std::vector<double>& mine) { return mine; }
std::vector<std::string> allgather_strings(const std::string& mine) { return {mine}; }
void allreduce_sum(std::vector<int64_t>&) {}
std::vector<float> gather_rows(const std::vector<float>& row) { return row; }
Result<std::unique_ptr<Transport>> make_mpi_transport(int64_t, int64_t, FormatSpec) { return not_built(); }

}  // namespace qtransit::collectives::mpi
