#include <cstdio>

#include "commands.hpp"

namespace qtransit::cli {

int fail(const Error& e) { return fail(e.message); }

int fail(const std::string& message) {
    std::fprintf(stderr, "qtransit: %s\n", message.c_str());
    return kExitUsage;
}

}  // namespace qtransit::cli
