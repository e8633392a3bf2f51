// What main() reads before MPI starts (mpi.hpp): built with or without MPI.
#include <cstdlib>
#include <cstring>
#include <string>

#include "qtransit/collectives/mpi.hpp"

namespace qtransit::collectives::mpi {

bool requested(int argc, char** argv, const char* backend) {
    const std::string eq = std::string("--backend=") + backend;
    for (int i = 1; i < argc; ++i) {
        if (argv[i] == eq) return true;
        if (std::strcmp(argv[i], "--backend") == 0 && i + 1 < argc && std::strcmp(argv[i + 1], backend) == 0) return true;
    }
    return false;
}

bool launched() {
    for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"})
        if (const char* s = std::getenv(v); s && *s) return true;
    return false;
}

}  // namespace qtransit::collectives::mpi
