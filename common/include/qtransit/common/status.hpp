// Error values at library boundaries. C++20 has no std::expected, so this is the small subset we
// need: a Result<T> holds either a T or an Error, and nothing at a library boundary throws or exits.
// The CLI maps an Error to one line on stderr and exit code 2 (see cli/).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace qtransit {

enum class ErrorCode {
    kInvalidArgument,  // a bad size, block, option value, unknown format
    kNonFinite,        // NaN/inf in an input under the `error` policy
    kRangeOverflow,    // a block whose range (hi - lo) overflows binary32, or an fp16 overflow
    kBadFile,          // a malformed or unreadable file
    kIo,               // the OS refused a read or write
    kCuda,             // a CUDA or NCCL call failed
    kInternal,         // a bug in qtransit that it caught itself (a schedule receiving what was never sent)
    kTimeout,          // a wait past its deadline: another rank died or stalled (mpi, nccl under mpirun)
    kCodec,            // a codec plugin's own call failed, or it broke its declared layout (its message)
};

struct Error {
    ErrorCode code;
    std::string message;  // one line, says what and where; never ends with a newline
};

template <class T>
class [[nodiscard]] Result {
public:
    Result(T value) : v_(std::move(value)) {}              // NOLINT: implicit by design
    Result(Error error) : v_(std::move(error)) {}          // NOLINT
    bool ok() const { return v_.index() == 0; }
    explicit operator bool() const { return ok(); }
    T& value() & { return std::get<0>(v_); }
    const T& value() const& { return std::get<0>(v_); }
    T&& value() && { return std::get<0>(std::move(v_)); }
    T& operator*() & { return value(); }
    const T& operator*() const& { return value(); }
    T* operator->() { return &value(); }
    const T* operator->() const { return &value(); }
    const Error& error() const { return std::get<1>(v_); }

private:
    std::variant<T, Error> v_;
};

// Result<void>: success or an Error.
class [[nodiscard]] Status {
public:
    Status() = default;
    Status(Error error) : err_(std::move(error)), ok_(false) {}  // NOLINT
    static Status Ok() { return {}; }
    bool ok() const { return ok_; }
    explicit operator bool() const { return ok_; }
    const Error& error() const { return err_; }

private:
    Error err_{ErrorCode::kInvalidArgument, {}};
    bool ok_ = true;
};

inline Error make_error(ErrorCode code, std::string message) { return Error{code, std::move(message)}; }

// Where a tensor came from, so that an error can name the tensor, the rank and the element index
// (NUMERICS.md section 4). `index_base` is added to indices local to the span being processed.
struct Site {
    std::string tensor = "input";
    int64_t rank = -1;  // -1: not part of a collective
    int64_t index_base = 0;
};

// A name a user or a plugin gave, fit for a one-line message: control characters escaped (\n, \t,
// \xNN) and anything past `max` bytes cut, with the count of what was cut.
std::string printable(std::string_view s, size_t max = 200);
// A message on one line, as the command prints it: control characters escaped (\n, \t, \xNN) and
// cut to 1,000 bytes around the middle.
std::string one_line(const std::string& message);

// "tensor 'input' rank 3 element 17" (rank omitted when < 0).
std::string describe(const Site& site, int64_t local_index);

}  // namespace qtransit
