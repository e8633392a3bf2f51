// The allocator `qtransit` runs on, for `qtransit info` (gate::info): the one source that reads
// QTRANSIT_HAVE_MIMALLOC (CMakeLists.txt says why).
#include <string>

#include "commands.hpp"

#if QTRANSIT_HAVE_MIMALLOC
#include <mimalloc.h>
#endif

namespace qtransit::cli {

std::string allocator() {
#if QTRANSIT_HAVE_MIMALLOC
    const int v = mi_version();
    return "mimalloc " + std::to_string(v / 100) + "." + std::to_string(v / 10 % 10) + "." + std::to_string(v % 10);
#else
    return "the C library's malloc";
#endif
}

}  // namespace qtransit::cli
