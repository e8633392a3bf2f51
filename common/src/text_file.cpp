#include "qtransit/common/text_file.hpp"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

namespace qtransit {

Status check_regular_file(const std::string& path, const std::string& what) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0)
        return make_error(ErrorCode::kBadFile, path + ": cannot read the " + what + " (" + std::strerror(errno) + ")");
    if (S_ISDIR(st.st_mode)) return make_error(ErrorCode::kBadFile, path + ": is a directory, not a " + what);
    if (!S_ISREG(st.st_mode))
        return make_error(ErrorCode::kBadFile, path + ": is not a regular file (" +
                                                   (S_ISFIFO(st.st_mode) ? "a FIFO" : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device" : "a socket or other") +
                                                   "), not a " + what);
    return {};
}

Status check_writable_file(const std::string& path, const std::string& what) {
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
        return make_error(ErrorCode::kBadFile, path + ": is a directory; the " + what + " is a file");
    // A FIFO would block the writer after the work (issue 46: check --junit FIFO hung forever), and a
    // device takes the bytes somewhere else (/dev/full refuses them, /dev/null drops them): the
    // file is replaced as a whole, which only a regular file can be.
    if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
        return make_error(ErrorCode::kBadFile, path + ": is not a regular file (" +
                                                   (S_ISFIFO(st.st_mode) ? "a FIFO" : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device" : "a socket or other") +
                                                   "); the " + what + " is written as a file");
    std::string dir = path.substr(0, path.find_last_of('/') == std::string::npos ? 0 : path.find_last_of('/'));
    if (dir.empty()) dir = path.find('/') == 0 ? "/" : ".";
    if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
        return make_error(ErrorCode::kBadFile, path + ": cannot write the " + what + ": the folder " + dir + " does not exist");
    if (::access(dir.c_str(), W_OK) != 0)
        return make_error(ErrorCode::kBadFile, path + ": cannot write the " + what + " in " + dir + " (" + std::strerror(errno) + ")");
    // An existing file is rewritten in place: it must itself be writable.
    if (::stat(path.c_str(), &st) == 0 && ::access(path.c_str(), W_OK) != 0)
        return make_error(ErrorCode::kBadFile, path + ": cannot write the " + what + " (" + std::strerror(errno) + ")");
    return {};
}

Result<std::string> read_text_file(const std::string& path, int64_t max_bytes, const std::string& what) {
    if (auto st = check_regular_file(path, what); !st) return st.error();
    std::FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) return make_error(ErrorCode::kBadFile, path + ": cannot read the " + what + " (" + std::strerror(errno) + ")");
    std::string text;
    char buf[1 << 16];
    size_t got;
    while ((got = std::fread(buf, 1, sizeof buf, f)) > 0) {
        // Counted as read, not from stat: the file may grow while it is read.
        if (static_cast<int64_t>(text.size() + got) > max_bytes) {
            std::fclose(f);
            return make_error(ErrorCode::kBadFile, path + ": the " + what + " is larger than the limit of " +
                                                       std::to_string(max_bytes) + " bytes");
        }
        text.append(buf, got);
    }
    const bool failed = std::ferror(f) != 0;
    std::fclose(f);
    if (failed) return make_error(ErrorCode::kIo, path + ": read failed: " + std::strerror(errno));
    return text;
}

}  // namespace qtransit

namespace qtransit {

int64_t physical_memory_bytes() {
    const long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGE_SIZE);
    int64_t have = pages > 0 && size > 0 ? static_cast<int64_t>(pages) * size : 0;
    // What this process may take is less where a limit says so: ulimit -v or -d, or the cgroup's
    // memory.max (a container, a CI job). Past it an allocation fails or the OOM killer ends the
    // process with no message (issue 46).
    auto lower = [&have](int64_t v) {
        if (v > 0 && (have <= 0 || v < have)) have = v;
    };
    for (int res : {RLIMIT_AS, RLIMIT_DATA}) {
        struct rlimit rl {};
        if (::getrlimit(res, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) lower(static_cast<int64_t>(rl.rlim_cur));
    }
    if (std::FILE* f = std::fopen("/sys/fs/cgroup/memory.max", "r")) {
        char buf[64] = {0};
        if (std::fgets(buf, sizeof buf, f) && buf[0] >= '0' && buf[0] <= '9') lower(std::strtoll(buf, nullptr, 10));
        std::fclose(f);
    }
    return have;
}

Status check_memory(int64_t need, const std::string& what) {
    const int64_t have = physical_memory_bytes();
    if (have <= 0 || need <= have) return Status::Ok();
    auto gib = [](int64_t b) {
        char t[32];
        std::snprintf(t, sizeof t, "%.3g GiB", static_cast<double>(b) / static_cast<double>(int64_t{1} << 30));
        return std::string(t);
    };
    return make_error(ErrorCode::kInvalidArgument, what + " needs about " + gib(need) + " of memory; this machine has " + gib(have) +
                                                       ": nothing was run");
}

Result<double> env_seconds(const EnvSeconds& e) {
    const char* v = std::getenv(e.name);
    if (!v || !*v) return e.dflt;
    const std::string text(v);
    auto bad = [&] {
        char range[96];
        std::snprintf(range, sizeof range, "%s seconds from %g to %g", e.whole ? "whole" : "", e.lo, e.hi);
        return make_error(ErrorCode::kInvalidArgument, std::string(e.name) + "=" + printable(text, 40) + ": must be " +
                                                           (e.whole ? std::string(range) : std::string(range).substr(1)));
    };
    // Decimal digits only (with a fraction where allowed): no sign, hex, exponent, inf or nan.
    bool dot = false, digit = false;
    for (const char c : text) {
        if (c >= '0' && c <= '9') digit = true;
        else if (c == '.' && !dot && !e.whole) dot = true;
        else return bad();
    }
    if (!digit || text.size() > 20) return bad();
    const double d = std::strtod(text.c_str(), nullptr);
    if (!(d >= e.lo && d <= e.hi)) return bad();
    return d;
}

Status check_environment() {
    for (const EnvSeconds* e : {&kInputTimeout, &kMpiTimeout})
        if (auto v = env_seconds(*e); !v) return v.error();
    return Status::Ok();
}

}  // namespace qtransit
