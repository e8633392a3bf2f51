// .npy files (NumPy format versions 1.0, 2.0, 3.0): binary32, binary16 and bfloat16, either byte
// order, any shape, C order; and uint16 arrays holding binary16 or bfloat16 bits when the caller says
// which. A malformed file is an Error that says what is wrong with it.
#pragma once

#include <cstdint>
#include <cstdio>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "qtransit/common/status.hpp"

namespace qtransit::kernels {

enum class NpyDtype : uint8_t { kFloat32, kFloat16, kBfloat16 };

struct NpyArray {
    std::vector<int64_t> shape;  // empty for a 0-d array (one element)
    NpyDtype dtype = NpyDtype::kFloat32;  // what the file held (for raw uint16 bits: what they were read as)
    std::vector<float> data;     // values widened to binary32 (binary16 and bfloat16 convert exactly), C order
    int64_t elements() const;
};

// "float32", "float16", "bfloat16": what a file holds, in messages.
const char* npy_dtype_name(NpyDtype dtype);

// bfloat16 is what ml_dtypes' numpy type writes: descr '<V2' (ml_dtypes' types are of kind 'V', and
// np.save stores dtype.str), or '|V2', or 'bfloat16' (what writing str(array.dtype) gives), all read as
// little-endian bfloat16 bits.
//
// `dtype` is what the caller says the data is (read_tensor's --dtype): a uint16 array ('<u2', '>u2',
// '|u2') has no float type of its own, so it is read only with `dtype` kFloat16 or kBfloat16, as
// those bits; a float array must then be of `dtype`, or it is an Error naming both. Both are checked
// from the header, before the data is read.
Result<NpyArray> read_npy(const std::string& path, std::optional<NpyDtype> dtype = std::nullopt);
// An integer .npy (int8..int64, uint8..uint64, either byte order): codes, one per element. The values
// come back as binary32, exactly, so each must be below 2^24 in magnitude (an Error names the first
// that is not); `dtype` says kFloat32.
Result<NpyArray> read_npy_integers(const std::string& path);
// The flat elements [first, first + count) of the array only (a slice of a file too large to hold,
// or of which only a part is needed): the header and the file's size are checked as read_npy checks
// them, the rest of the data is not read. `shape` is the file's; `data` holds the count values.
Result<NpyArray> read_npy_slice(const std::string& path, std::optional<NpyDtype> dtype, int64_t first, int64_t count);
// Writes atomically (a temporary file renamed into place), so a failure leaves nothing half-written.
// kBfloat16 is written as descr '<V2' (what ml_dtypes reads back as bfloat16), rounded to nearest
// even; a finite value that rounds to infinity in binary16 or bfloat16 is refused.
Status write_npy(const std::string& path, std::span<const float> data, std::span<const int64_t> shape,
                 NpyDtype dtype = NpyDtype::kFloat32);

// Parts of the .npy reader and writer that the .safetensors ones (tensor_file.hpp) share.
namespace detail {

// Opens `path` for reading as read_npy does: a FIFO is opened without blocking and given
// QTRANSIT_INPUT_TIMEOUT seconds (default 30) before its first byte. The caller closes the stream.
Result<std::FILE*> open_input(const std::string& path);

// Reads exactly n bytes of a stream open_input opened (fewer only at EOF); the count, or -1 on a read
// error (errno set). A pipe is read straight from its descriptor, and every read waits at most
// QTRANSIT_INPUT_TIMEOUT seconds for bytes: a writer that stalls after its first byte is errno
// ETIMEDOUT, not a wait for ever.
int64_t read_input(std::FILE* f, void* dst, size_t n);
// "<path>: read failed <when>: <why>", the timeout said as such.
std::string read_error(const std::string& path, const char* when, int err);

// A file written through a temporary beside it: fsynced and renamed into place by commit(), removed
// by the destructor when commit() was not reached, so that a failure leaves nothing half-written.
class AtomicFile {
public:
    static Result<AtomicFile> create(const std::string& path);
    AtomicFile(AtomicFile&& o) noexcept;
    AtomicFile& operator=(AtomicFile&&) = delete;
    AtomicFile(const AtomicFile&) = delete;
    AtomicFile& operator=(const AtomicFile&) = delete;
    ~AtomicFile();
    // Writes all of it (retrying partial writes and EINTR); an Error naming the path on failure.
    Status write(const void* p, size_t n);
    Status commit();

private:
    AtomicFile(std::string path, std::string tmp, int fd) : path_(std::move(path)), tmp_(std::move(tmp)), fd_(fd) {}
    std::string path_, tmp_;
    int fd_ = -1;
};

// An Error (kRangeOverflow, naming the element) when a finite value would round to infinity in
// `dtype`; what write_npy refuses before it writes anything.
Status check_fits(const std::string& path, std::span<const float> data, NpyDtype dtype);
// `values` as little-endian `dtype` (binary16 and bfloat16 rounded to nearest even) into `out`, which
// has room for them; returns the bytes written.
size_t encode_le(std::span<const float> values, NpyDtype dtype, unsigned char* out);

}  // namespace detail

}  // namespace qtransit::kernels
