#include <cstdio>
#include <fstream>

#include "commands.hpp"

namespace qtransit::cli {

int fail(const Error& e) { return fail(e.message); }

int fail(const std::string& message) {
    std::fprintf(stderr, "qtransit: %s\n", message.c_str());
    return kExitUsage;
}

Status write_file(const std::filesystem::path& p, const std::string& text) {
    std::ofstream f(p, std::ios::binary | std::ios::trunc);
    f << text;
    f.close();
    if (!f) return make_error(ErrorCode::kIo, p.string() + ": cannot write");
    return {};
}

}  // namespace qtransit::cli
