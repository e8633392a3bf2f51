#include "qtransit/common/text_file.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
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
    return pages > 0 && size > 0 ? static_cast<int64_t>(pages) * size : 0;
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

}  // namespace qtransit
