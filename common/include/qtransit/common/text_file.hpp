// Reading a small text file a user names (a gate config, a declaration, a baseline): a missing file,
// a directory, a FIFO or device, and a file past the size limit are Errors naming the path, found
// before anything is read, so that no read blocks or grows without bound.
#pragma once

#include <cstdint>
#include <string>

#include "qtransit/common/status.hpp"

namespace qtransit {

// `what` names the file's role in messages ("config file", "declaration file", "baseline").
Result<std::string> read_text_file(const std::string& path, int64_t max_bytes, const std::string& what);
// Whether `path` is a regular file (an Error naming it and what it is instead when not): for inputs
// read by other means (.npy).
Status check_regular_file(const std::string& path, const std::string& what);

// Whether a file can be written at `path` later (checked before a long run, so that its result is
// not lost at the end): its folder exists and is writable, and `path` is not a directory.
Status check_writable_file(const std::string& path, const std::string& what);

// The machine's physical memory in bytes (0 when the OS does not say), and the check every run
// makes before it starts: an Error (kInvalidArgument) naming both figures when `need` is larger.
int64_t physical_memory_bytes();
Status check_memory(int64_t need, const std::string& what);

inline constexpr int64_t kMaxConfigBytes = int64_t{16} << 20;   // gate configs and declarations: 16 MiB
inline constexpr int64_t kMaxBaselineBytes = int64_t{1} << 30;  // a previous report.json: 1 GiB

}  // namespace qtransit
