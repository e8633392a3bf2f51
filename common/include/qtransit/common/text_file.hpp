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

// The settings qtransit reads from the environment, each a number of seconds in a range (issue 46:
// QTRANSIT_INPUT_TIMEOUT=4294967297 wrapped to 1 s; a bad value was ignored). Unset or empty: the
// default. Anything else outside [lo, hi], or not a decimal number, is an Error naming the variable
// and its range, so the CLI can refuse it before any work (check_environment).
struct EnvSeconds {
    const char* name;
    double dflt, lo, hi;
    bool whole;  // whole seconds only
};
inline constexpr EnvSeconds kInputTimeout{"QTRANSIT_INPUT_TIMEOUT", 30, 1, 86400, true};
inline constexpr EnvSeconds kMpiTimeout{"QTRANSIT_MPI_TIMEOUT", 300, 0.001, 86400, false};
Result<double> env_seconds(const EnvSeconds& e);
Status check_environment();

inline constexpr int64_t kMaxConfigBytes = int64_t{16} << 20;   // gate configs and declarations: 16 MiB
inline constexpr int64_t kMaxBaselineBytes = int64_t{1} << 30;  // a previous report.json: 1 GiB

}  // namespace qtransit
