// .npy reader and writer (https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html).
// The reader trusts nothing in the file: every field is checked and every failure is an Error whose
// message starts with the path and says what is wrong, so a user can fix the file.
#include "qtransit/kernels/npy.hpp"
#include "qtransit/common/text_file.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <string_view>

#include "qtransit/kernels/fp16.hpp"

namespace qtransit::kernels {

int64_t NpyArray::elements() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;  // read_npy checked that this cannot overflow
    return n;
}

const char* npy_dtype_name(NpyDtype dtype) {
    switch (dtype) {
        case NpyDtype::kFloat32: return "float32";
        case NpyDtype::kFloat16: return "float16";
        case NpyDtype::kBfloat16: return "bfloat16";
    }
    return "?";
}

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;
// numpy itself refuses headers over 10000 bytes unless told otherwise (max_header_size); ours only
// ever need a few hundred, so 1 MiB is generous while stopping a corrupt length from allocating GBs.
constexpr uint32_t kMaxHeaderLen = 1u << 20;
constexpr const char* kSupportedDescrs =
    "'<f4', '>f4', '<f2', '>f2' (and '=' or '|' for native order); bfloat16 as '<V2', '|V2' (ml_dtypes) or "
    "'bfloat16'; and uint16 bits '<u2', '>u2', '|u2' with --dtype fp16 or bf16";

Error bad(const std::string& path, const std::string& what) { return make_error(ErrorCode::kBadFile, path + ": " + what); }

std::string errno_text(int e) { return std::strerror(e); }

// The header text for a message: control characters escaped, long headers cut.
std::string shown(std::string_view h) {
    std::string s;
    for (char c : h) {
        if (s.size() > 200) {
            s += "...";
            break;
        }
        const auto u = static_cast<unsigned char>(c);
        if (c == '\n') s += "\\n";
        else if (u < 0x20 || u >= 0x7f) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\x%02x", u);
            s += buf;
        } else s += c;
    }
    return s;
}

std::string shape_text(const std::vector<int64_t>& shape) {
    std::string s = "(";
    for (size_t i = 0; i < shape.size(); ++i) {
        if (i) s += ", ";
        s += std::to_string(shape[i]);
    }
    if (shape.size() == 1) s += ",";
    return s + ")";
}

struct Header {
    std::string descr;
    bool fortran_order = false;
    std::vector<int64_t> shape;
};

// A recursive-descent parser for the one Python literal a .npy header may be: a dict with exactly
// the keys 'descr' (a str), 'fortran_order' (True/False) and 'shape' (a tuple of non-negative ints),
// in any order, optional trailing comma, Python whitespace anywhere between tokens.
class HeaderParser {
public:
    explicit HeaderParser(std::string_view text) : h_(text) {}

    // On failure returns the reason; the caller adds the path and the header.
    std::optional<std::string> parse(Header& out) {
        bool have_descr = false, have_fortran = false, have_shape = false;
        ws();
        if (!eat('{')) return fail("expected '{' to open the dict");
        ws();
        while (!peek('}')) {
            std::string key;
            if (auto e = string_literal(key, "a key")) return e;
            ws();
            if (!eat(':')) return fail("expected ':' after key '" + key + "'");
            ws();
            if (key == "descr") {
                if (have_descr) return fail("duplicate key 'descr'");
                have_descr = true;
                if (!peek('\'') && !peek('"')) return fail("'descr' must be a string such as '<f4'");
                if (auto e = string_literal(out.descr, "the value of 'descr'")) return e;
            } else if (key == "fortran_order") {
                if (have_fortran) return fail("duplicate key 'fortran_order'");
                have_fortran = true;
                if (word("True")) out.fortran_order = true;
                else if (word("False")) out.fortran_order = false;
                else return fail("'fortran_order' must be True or False");
            } else if (key == "shape") {
                if (have_shape) return fail("duplicate key 'shape'");
                have_shape = true;
                if (auto e = tuple(out.shape)) return e;
            } else {
                return fail("unexpected key '" + key + "' (a .npy header has exactly 'descr', 'fortran_order', 'shape')");
            }
            ws();
            if (eat(',')) {
                ws();
                continue;
            }
            if (!peek('}')) return fail("expected ',' or '}' after the value of '" + key + "'");
        }
        ++i_;  // the '}'
        ws();
        if (i_ != h_.size()) return fail("unexpected text after the closing '}'");
        if (!have_descr) return std::string("missing key 'descr'");
        if (!have_fortran) return std::string("missing key 'fortran_order'");
        if (!have_shape) return std::string("missing key 'shape'");
        return std::nullopt;
    }

private:
    std::string fail(const std::string& what) const { return what + " at offset " + std::to_string(i_); }
    bool peek(char c) const { return i_ < h_.size() && h_[i_] == c; }
    bool eat(char c) {
        if (!peek(c)) return false;
        ++i_;
        return true;
    }
    void ws() {
        while (i_ < h_.size() && (h_[i_] == ' ' || h_[i_] == '\t' || h_[i_] == '\n' || h_[i_] == '\r' ||
                                  h_[i_] == '\f' || h_[i_] == '\v'))
            ++i_;
    }
    static bool ident_char(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    }
    // A keyword, not followed by more identifier characters (so "Truex" is not True).
    bool word(std::string_view w) {
        if (h_.substr(i_, w.size()) != w) return false;
        if (i_ + w.size() < h_.size() && ident_char(h_[i_ + w.size()])) return false;
        i_ += w.size();
        return true;
    }
    std::optional<std::string> string_literal(std::string& out, const std::string& what) {
        if (!peek('\'') && !peek('"')) return fail("expected a quoted string as " + what);
        const char q = h_[i_++];
        const size_t start = i_;
        while (i_ < h_.size() && h_[i_] != q) {
            if (h_[i_] == '\\') return fail("escape sequences in strings are not supported");
            if (h_[i_] == '\n') return fail("unterminated string");
            ++i_;
        }
        if (i_ == h_.size()) return fail("unterminated string");
        out.assign(h_.substr(start, i_ - start));
        ++i_;
        return std::nullopt;
    }
    std::optional<std::string> integer(int64_t& v) {
        const size_t start = i_;
        bool negative = false;
        if (eat('-')) negative = true;
        else eat('+');
        ws();  // Python allows "- 3"
        const size_t digits = i_;
        uint64_t acc = 0;
        bool too_big = false;
        while (i_ < h_.size() && h_[i_] >= '0' && h_[i_] <= '9') {
            const uint64_t d = static_cast<uint64_t>(h_[i_] - '0');
            if (acc > (static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) - d) / 10) too_big = true;
            else acc = acc * 10 + d;
            ++i_;
        }
        if (i_ == digits) {
            i_ = start;
            return fail("'shape' must be a tuple of integers");
        }
        if (i_ < h_.size() && (ident_char(h_[i_]) || h_[i_] == '.')) return fail("malformed integer in 'shape'");
        // Python 3 rejects leading zeros ("007") except in zero itself ("00").
        if (h_[digits] == '0' && acc != 0) {
            i_ = digits;
            return fail("malformed integer in 'shape' (leading zero)");
        }
        // shown(): a sign and its digits may have whitespace between them ("-\n3"), and a message is one line.
        const std::string text = shown(h_.substr(start, i_ - start));
        if (too_big) return fail("shape entry " + text + " is too large");
        if (negative && acc != 0) return fail("shape entries must be non-negative, found " + text);
        v = static_cast<int64_t>(acc);
        return std::nullopt;
    }
    std::optional<std::string> tuple(std::vector<int64_t>& out) {
        out.clear();
        if (!eat('(')) return fail("'shape' must be a tuple of integers such as (2, 3)");
        ws();
        if (eat(')')) return std::nullopt;  // () : a 0-d array
        for (;;) {
            int64_t v = 0;
            if (auto e = integer(v)) return e;
            out.push_back(v);
            ws();
            if (eat(',')) {
                ws();
                if (eat(')')) return std::nullopt;
                continue;
            }
            if (eat(')')) {
                if (out.size() == 1)  // "(3)" is the integer 3 in Python, not a tuple
                    return fail("'shape' (" + std::to_string(v) + ") is an integer, not a tuple; write (" +
                                std::to_string(v) + ",)");
                return std::nullopt;
            }
            return fail("expected ',' or ')' in 'shape'");
        }
    }

    std::string_view h_;
    size_t i_ = 0;
};

struct FileCloser {
    void operator()(std::FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<std::FILE, FileCloser>;

int64_t read_some(std::FILE* f, void* dst, size_t n) { return detail::read_input(f, dst, n); }

uint32_t le32(const unsigned char* p) {
    return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}

constexpr bool kHostLittle = std::endian::native == std::endian::little;

}  // namespace

namespace detail {

Result<std::FILE*> open_input(const std::string& path) {
    errno = 0;
    std::FILE* file = nullptr;
    struct stat sb {};
    if (::stat(path.c_str(), &sb) == 0 && S_ISFIFO(sb.st_mode)) {
        // A pipe is read as it comes (process substitution, a writer in another process), but one
        // that nobody writes to would block the open forever: it is opened without blocking and
        // given QTRANSIT_INPUT_TIMEOUT seconds (default 30) before its first byte or its close.
        const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK);
        if (fd < 0) return make_error(ErrorCode::kIo, path + ": cannot open for reading: " + errno_text(errno));
        const auto timeout = env_seconds(kInputTimeout);
        if (!timeout) {
            ::close(fd);
            return timeout.error();
        }
        const int seconds = static_cast<int>(*timeout);
        pollfd p{fd, POLLIN, 0};
        if (::poll(&p, 1, seconds * 1000) <= 0) {
            ::close(fd);
            return make_error(ErrorCode::kBadFile, path + ": a FIFO nothing was written to within " + std::to_string(seconds) +
                                                       " s (QTRANSIT_INPUT_TIMEOUT)");
        }
        ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
        file = ::fdopen(fd, "rb");
        if (!file) ::close(fd);
    } else {
        file = std::fopen(path.c_str(), "rb");
    }
    if (!file) return make_error(ErrorCode::kIo, path + ": cannot open for reading: " + errno_text(errno));
    return file;
}

int64_t read_input(std::FILE* f, void* dst, size_t n) {
    const int fd = ::fileno(f);
    struct stat sb {};
    if (fd < 0 || ::fstat(fd, &sb) != 0 || !S_ISFIFO(sb.st_mode)) {
        const size_t got = std::fread(dst, 1, n, f);
        if (got < n && std::ferror(f)) return -1;
        return static_cast<int64_t>(got);
    }
    // A pipe: never through stdio's buffer (every read of it comes here), each wait bounded.
    const auto timeout = env_seconds(kInputTimeout);  // checked before any work (check_environment)
    const int ms = static_cast<int>((timeout ? *timeout : 30.0) * 1000);
    size_t got = 0;
    auto* out = static_cast<unsigned char*>(dst);
    while (got < n) {
        pollfd p{fd, POLLIN, 0};
        const int r = ::poll(&p, 1, ms);
        if (r == 0) {
            errno = ETIMEDOUT;
            return -1;
        }
        if (r < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        const ssize_t k = ::read(fd, out + got, n - got);
        if (k < 0) {
            if (errno == EINTR || errno == EAGAIN) continue;
            return -1;
        }
        if (k == 0) break;  // the writer closed: EOF
        got += static_cast<size_t>(k);
    }
    return static_cast<int64_t>(got);
}

std::string read_error(const std::string& path, const char* when, int err) {
    if (err == ETIMEDOUT) {
        const auto timeout = env_seconds(kInputTimeout);
        return path + ": read failed " + when + ": the pipe gave no byte for " + std::to_string(static_cast<int>(timeout ? *timeout : 30)) +
               " s (QTRANSIT_INPUT_TIMEOUT): its writer stalled";
    }
    return path + ": read failed " + when + ": " + errno_text(err);
}

}  // namespace detail

namespace {

// "fp32", "fp16", "bf16": the names read_tensor's --dtype gives them (tensor_file.hpp).
const char* option_name(NpyDtype dtype) {
    switch (dtype) {
        case NpyDtype::kFloat32: return "fp32";
        case NpyDtype::kFloat16: return "fp16";
        case NpyDtype::kBfloat16: return "bf16";
    }
    return "?";
}

}  // namespace

namespace {

// read_npy, and with `integers` read_npy_integers: an integer array instead of a float one.
Result<NpyArray> read_npy_impl(const std::string& path, std::optional<NpyDtype> want, bool integers,
                               std::optional<std::pair<int64_t, int64_t>> range = std::nullopt) {
    auto opened = detail::open_input(path);
    if (!opened) return opened.error();
    File file(*opened);
    std::FILE* f = file.get();
    auto io_error = [&](const char* when) { return make_error(ErrorCode::kIo, detail::read_error(path, when, errno)); };

    // Magic string and version.
    unsigned char pre[12];
    int64_t got = read_some(f, pre, 8);
    if (got < 0) return io_error("in the preamble");
    if (got < static_cast<int64_t>(kMagicLen) || std::memcmp(pre, kMagic, kMagicLen) != 0)
        return bad(path, "not a .npy file: it does not start with the magic string \\x93NUMPY");
    if (got < 8) return bad(path, "truncated: the file ends inside the format version");
    const int major = pre[6], minor = pre[7];
    if (!((major == 1 || major == 2 || major == 3) && minor == 0))
        return bad(path, "unsupported .npy format version " + std::to_string(major) + "." + std::to_string(minor) +
                             " (supported: 1.0, 2.0, 3.0)");
    // Header length: little-endian uint16 (1.0) or uint32 (2.0, 3.0).
    const size_t len_bytes = major == 1 ? 2 : 4;
    got = read_some(f, pre + 8, len_bytes);
    if (got < 0) return io_error("in the header length");
    if (got < static_cast<int64_t>(len_bytes)) return bad(path, "truncated: the file ends inside the header length field");
    const uint32_t hlen = major == 1 ? (uint32_t{pre[8]} | uint32_t{pre[9]} << 8) : le32(pre + 8);
    if (hlen > kMaxHeaderLen)
        return bad(path, "header length " + std::to_string(hlen) + " is implausibly large (limit " +
                             std::to_string(kMaxHeaderLen) + " bytes)");
    std::string header(hlen, '\0');
    got = read_some(f, header.data(), hlen);
    if (got < 0) return io_error("in the header");
    if (got < static_cast<int64_t>(hlen))
        return bad(path, "truncated header: the header length field says " + std::to_string(hlen) +
                             " bytes, but only " + std::to_string(got) + " follow");

    Header h;
    if (auto why = HeaderParser(header).parse(h))
        return bad(path, "malformed header: " + *why + " (header: " + shown(header) + ")");

    // dtype. numpy writes '<' or '>' for floats; '=' (native) and '|' (not applicable) are what
    // np.dtype also accepts for them, so a hand-written header may use them.
    NpyArray arr;
    bool little = kHostLittle;
    size_t item = 0;
    const std::string& d = h.descr;
    const bool order = d.size() == 3 && (d[0] == '<' || d[0] == '>' || d[0] == '=' || d[0] == '|');
    bool int_signed = false;
    if (integers) {
        if (!(order && (d[1] == 'i' || d[1] == 'u') && (d[2] == '1' || d[2] == '2' || d[2] == '4' || d[2] == '8')))
            return bad(path, "dtype '" + printable(d) + "' is not an integer array; supported: int8, uint8, int16, uint16, int32, uint32, int64, uint64");
        if (d[0] == '<') little = true;
        if (d[0] == '>') little = false;
        int_signed = d[1] == 'i';
        item = static_cast<size_t>(d[2] - '0');
    } else if (order && d[1] == 'f' && (d[2] == '4' || d[2] == '2')) {
        if (d[0] == '<') little = true;
        if (d[0] == '>') little = false;
        arr.dtype = d[2] == '4' ? NpyDtype::kFloat32 : NpyDtype::kFloat16;
        item = d[2] == '4' ? 4 : 2;
    } else if (d == "<V2" || d == "|V2" || d == "bfloat16") {
        // ml_dtypes' bfloat16 is a numpy type of kind 'V' (void), so np.save records only its size
        // (jax-ml/ml_dtypes issue 41); it keeps the host's byte order, little-endian everywhere it runs.
        little = true;
        arr.dtype = NpyDtype::kBfloat16;
        item = 2;
    } else if (d == "<u2" || d == ">u2" || d == "|u2" || d == "=u2") {
        // Raw bits, as a training script dumps a bf16 tensor through .view(np.uint16): which float
        // type they are is the caller's to say.
        if (want != NpyDtype::kFloat16 && want != NpyDtype::kBfloat16)
            return bad(path, std::string("a uint16 array: say what its bits are (--dtype bf16 or --dtype fp16)") +
                                 (want ? std::string("; --dtype ") + option_name(*want) + " is not a 16-bit type" : ""));
        if (d[0] == '<') little = true;
        if (d[0] == '>') little = false;
        arr.dtype = *want;
        item = 2;
    } else {
        return bad(path, "unsupported dtype '" + printable(d) + "'; supported: " + kSupportedDescrs);
    }
    if (want && !integers && arr.dtype != *want)
        return make_error(ErrorCode::kBadFile, path + " holds " + npy_dtype_name(arr.dtype) + " but --dtype says " +
                                                   option_name(*want));
    if (h.fortran_order) return bad(path, "Fortran-order arrays are not supported; save with np.ascontiguousarray");

    // Element count and data size, without overflow (any zero dimension makes the array empty).
    int64_t count = 1;
    bool empty = false;
    for (int64_t dim : h.shape) empty = empty || dim == 0;
    if (empty) count = 0;
    else
        for (int64_t dim : h.shape) {
            if (count > std::numeric_limits<int64_t>::max() / static_cast<int64_t>(item) / dim)
                return bad(path, "shape " + shape_text(h.shape) + " has too many elements (the size overflows)");
            count *= dim;
        }
    uint64_t expected = static_cast<uint64_t>(count) * item;
    auto size_error = [&](uint64_t actual) {
        std::string what = actual < expected ? "truncated data" : "trailing bytes after the data";
        return bad(path, what + ": dtype '" + d + "' and shape " + shape_text(h.shape) + " need " +
                             std::to_string(expected) + " bytes of data, the file has " + std::to_string(actual));
    };

    // Check the size before allocating, so a corrupt shape cannot ask for terabytes. A file that
    // cannot seek (a pipe) is read to its end instead.
    const off_t data_start = ftello(f);
    std::vector<unsigned char> raw;
    bool have_raw = false;
    if (data_start >= 0 && fseeko(f, 0, SEEK_END) == 0) {
        const off_t end = ftello(f);
        if (end < data_start || fseeko(f, data_start, SEEK_SET) != 0) return io_error("while seeking");
        const uint64_t actual = static_cast<uint64_t>(end - data_start);
        if (actual != expected) return size_error(actual);
    } else {
        // A pipe is read whole before anything else: its header's size is checked against the memory
        // the process may have first (issue 46: a header declaring 32 GiB was read until memory ran out).
        const uint64_t widened = static_cast<uint64_t>(count) <= (UINT64_MAX - expected) / 4 ? expected + static_cast<uint64_t>(count) * 4
                                                                                             : UINT64_MAX;
        if (auto st = check_memory(widened > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())
                                       ? std::numeric_limits<int64_t>::max()
                                       : static_cast<int64_t>(widened),
                                   path + ": reading its " + std::to_string(count) + " values from a pipe (the header declares " +
                                       std::to_string(expected) + " bytes of data)");
            !st)
            return st.error();
        std::clearerr(f);
        unsigned char buf[1 << 16];
        for (;;) {
            const int64_t n = read_some(f, buf, sizeof buf);
            if (n < 0) return io_error("in the data");
            raw.insert(raw.end(), buf, buf + n);
            if (n == 0 || raw.size() > expected) break;
        }
        if (raw.size() != expected) {
            uint64_t actual = raw.size();
            while (actual > expected) {  // count the rest, for the message
                const int64_t n = read_some(f, buf, sizeof buf);
                if (n <= 0) break;
                actual += static_cast<uint64_t>(n);
            }
            return size_error(actual);
        }
        have_raw = true;
    }

    // A slice: the flat elements [first, first + len) only; the rest of the data is not read.
    if (range && !integers) {
        const auto [first, len] = *range;
        if (first < 0 || len < 0 || first > count || len > count - first)
            return bad(path, "elements [" + std::to_string(first) + ", " + std::to_string(first + len) + ") are not within its " +
                                 std::to_string(count) + " elements (shape " + shape_text(h.shape) + ")");
        if (have_raw) {
            raw.erase(raw.begin(), raw.begin() + static_cast<std::ptrdiff_t>(static_cast<uint64_t>(first) * item));
            raw.resize(static_cast<size_t>(len) * item);
        } else if (fseeko(f, data_start + static_cast<off_t>(first) * static_cast<off_t>(item), SEEK_SET) != 0) {
            return io_error("while seeking");
        }
        count = len;
        expected = static_cast<uint64_t>(len) * item;
    }
    const size_t n = static_cast<size_t>(count);
    // The values widened to binary32, held at once: more than the machine has is refused, not
    // an uncaught bad_alloc.
    if (auto st = check_memory(count > std::numeric_limits<int64_t>::max() / 4 ? std::numeric_limits<int64_t>::max() : count * 4,
                               path + ": reading its " + std::to_string(count) + " values");
        !st)
        return st.error();
    arr.shape = h.shape;
    arr.data.resize(n);
    if (integers) {
        std::vector<unsigned char> bytes;
        if (have_raw) bytes = std::move(raw);
        else {
            bytes.resize(static_cast<size_t>(expected));
            got = read_some(f, bytes.data(), expected);
            if (got < 0) return io_error("in the data");
            if (static_cast<uint64_t>(got) != expected) return size_error(static_cast<uint64_t>(got));
        }
        for (size_t i = 0; i < n; ++i) {
            uint64_t u = 0;
            for (size_t k = 0; k < item; ++k) {
                const unsigned char byte = bytes[i * item + (little ? k : item - 1 - k)];
                u |= static_cast<uint64_t>(byte) << (8 * k);
            }
            int64_t v = static_cast<int64_t>(u);
            if (int_signed && item < 8 && (u >> (8 * item - 1)) & 1u) v = static_cast<int64_t>(u | (~uint64_t{0} << (8 * item)));
            const bool too_big = (!int_signed && u >= (uint64_t{1} << 24)) || (int_signed && (v >= (int64_t{1} << 24) || v <= -(int64_t{1} << 24)));
            if (too_big)
                return bad(path, "element " + std::to_string(i) + " is " + (int_signed ? std::to_string(v) : std::to_string(u)) +
                                     ", beyond the 2^24 an integer array may hold here");
            arr.data[i] = static_cast<float>(v);
        }
        return arr;
    }
    if (item == 4) {
        if (have_raw) {
            if (expected > 0) std::memcpy(arr.data.data(), raw.data(), expected);  // an empty vector's data() may be null
        } else {
            got = read_some(f, arr.data.data(), expected);
            if (got < 0) return io_error("in the data");
            if (static_cast<uint64_t>(got) != expected) return size_error(static_cast<uint64_t>(got));
        }
        if (little != kHostLittle)
            for (float& v : arr.data) v = bits_f32(__builtin_bswap32(f32_bits(v)));
    } else {
        // binary16 or bfloat16 bits (both 2 bytes; raw uint16 was given its meaning above).
        std::vector<uint16_t> halves(n);
        if (have_raw) {
            if (expected > 0) std::memcpy(halves.data(), raw.data(), expected);
        } else {
            got = read_some(f, halves.data(), expected);
            if (got < 0) return io_error("in the data");
            if (static_cast<uint64_t>(got) != expected) return size_error(static_cast<uint64_t>(got));
        }
        for (size_t i = 0; i < n; ++i) {
            const uint16_t b = little != kHostLittle ? __builtin_bswap16(halves[i]) : halves[i];
            arr.data[i] = arr.dtype == NpyDtype::kBfloat16 ? bf16_bits_to_f32(b) : f16_bits_to_f32(b);
        }
    }
    return arr;
}

}  // namespace

Result<NpyArray> read_npy(const std::string& path, std::optional<NpyDtype> want) { return read_npy_impl(path, want, false); }
Result<NpyArray> read_npy_integers(const std::string& path) { return read_npy_impl(path, std::nullopt, true); }
Result<NpyArray> read_npy_slice(const std::string& path, std::optional<NpyDtype> want, int64_t first, int64_t count) {
    return read_npy_impl(path, want, false, std::pair{first, count});
}

namespace {

// write(2) until done, retrying on EINTR and partial writes.
bool write_all(int fd, const void* p, size_t n) {
    const char* c = static_cast<const char*>(p);
    while (n > 0) {
        const ssize_t w = ::write(fd, c, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return false;
        }
        c += w;
        n -= static_cast<size_t>(w);
    }
    return true;
}

std::string header_for(const char* descr, std::span<const int64_t> shape, int& major) {
    std::string dict = std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': (";
    for (size_t i = 0; i < shape.size(); ++i) {
        if (i) dict += ", ";
        dict += std::to_string(shape[i]);
    }
    if (shape.size() == 1) dict += ",";
    dict += "), }";
    // Pad with spaces and end with '\n' so the data starts at a multiple of 64 bytes (what numpy
    // does, so that the data can be memory-mapped aligned). Version 2.0 only when the header
    // cannot fit the 16-bit length of 1.0, as numpy does.
    major = 1;
    size_t prefix = 10;
    if (dict.size() + 1 + 64 > 65535) {
        major = 2;
        prefix = 12;
    }
    const size_t total = prefix + dict.size() + 1;
    dict.append((64 - total % 64) % 64, ' ');
    dict += '\n';
    return dict;
}

std::atomic<uint64_t> g_tmp_counter{0};

}  // namespace

namespace detail {

Result<AtomicFile> AtomicFile::create(const std::string& path) {
    // A temporary file beside the target (same file system, so rename(2) replaces it atomically).
    std::string tmp;
    int fd = -1;
    for (int attempt = 0; attempt < 100 && fd < 0; ++attempt) {
        tmp = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(g_tmp_counter++);
        fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0 && errno != EEXIST) break;
    }
    if (fd < 0)
        return make_error(ErrorCode::kIo, path + ": cannot create the temporary file " + tmp + ": " + errno_text(errno));
    return AtomicFile(path, tmp, fd);
}

AtomicFile::AtomicFile(AtomicFile&& o) noexcept : path_(std::move(o.path_)), tmp_(std::move(o.tmp_)), fd_(o.fd_) {
    o.fd_ = -1;
    o.tmp_.clear();
}

AtomicFile::~AtomicFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!tmp_.empty()) ::unlink(tmp_.c_str());
}

Status AtomicFile::write(const void* p, size_t n) {
    if (fd_ < 0) return make_error(ErrorCode::kInternal, path_ + ": write after the file was closed");
    if (!write_all(fd_, p, n)) return make_error(ErrorCode::kIo, path_ + ": write failed: " + errno_text(errno));
    return Status::Ok();
}

Status AtomicFile::commit() {
    if (fd_ < 0) return make_error(ErrorCode::kInternal, path_ + ": commit after the file was closed");
    // Durable before it becomes visible: a crash after the rename must not expose a short file.
    if (::fsync(fd_) != 0) return make_error(ErrorCode::kIo, path_ + ": fsync failed: " + errno_text(errno));
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) return make_error(ErrorCode::kIo, path_ + ": close failed: " + errno_text(errno));
    if (std::rename(tmp_.c_str(), path_.c_str()) != 0)
        return make_error(ErrorCode::kIo, path_ + ": cannot rename " + tmp_ + " into place: " + errno_text(errno));
    tmp_.clear();  // it is the file now
    return Status::Ok();
}

Status check_fits(const std::string& path, std::span<const float> data, NpyDtype dtype) {
    // A finite value that rounds to infinity would silently change the data: refuse it before
    // anything is written. (NaN and +-inf are kept as such.)
    if (dtype == NpyDtype::kFloat32) return Status::Ok();
    const bool half = dtype == NpyDtype::kFloat16;
    for (size_t i = 0; i < data.size(); ++i) {
        const uint32_t ax = f32_bits(data[i]) & 0x7fffffffu;
        if (ax >= 0x7f800000u) continue;
        const bool inf = half ? (f32_to_f16_bits(data[i]) & 0x7fffu) == 0x7c00u : (f32_to_bf16_bits(data[i]) & 0x7fffu) == 0x7f80u;
        if (inf) {
            char buf[64];
            std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(data[i]));
            return make_error(ErrorCode::kRangeOverflow,
                              path + ": element " + std::to_string(i) + " (value " + buf + ") overflows " +
                                  (half ? "binary16 (largest finite value 65504)" : "bfloat16 (largest finite value 3.38953139e38)") +
                                  "; write it as float32");
        }
    }
    return Status::Ok();
}

size_t encode_le(std::span<const float> values, NpyDtype dtype, unsigned char* out) {
    size_t bytes = 0;
    for (float v : values) {
        if (dtype == NpyDtype::kFloat32) {
            const uint32_t b = f32_bits(v);
            out[bytes++] = static_cast<unsigned char>(b);
            out[bytes++] = static_cast<unsigned char>(b >> 8);
            out[bytes++] = static_cast<unsigned char>(b >> 16);
            out[bytes++] = static_cast<unsigned char>(b >> 24);
        } else {
            const uint16_t b = dtype == NpyDtype::kFloat16 ? f32_to_f16_bits(v) : f32_to_bf16_bits(v);
            out[bytes++] = static_cast<unsigned char>(b);
            out[bytes++] = static_cast<unsigned char>(b >> 8);
        }
    }
    return bytes;
}

}  // namespace detail

Status write_npy(const std::string& path, std::span<const float> data, std::span<const int64_t> shape,
                 NpyDtype dtype) {
    // Shape: non-negative, no overflow, and exactly as many elements as values.
    uint64_t count = 1;
    bool overflow = false;
    std::vector<int64_t> shape_v(shape.begin(), shape.end());
    for (size_t i = 0; i < shape.size(); ++i) {
        if (shape[i] < 0)
            return make_error(ErrorCode::kInvalidArgument,
                              path + ": shape " + shape_text(shape_v) + " has a negative dimension");
    }
    bool empty = false;
    for (int64_t dim : shape) empty = empty || dim == 0;
    if (empty) count = 0;
    else
        for (int64_t dim : shape) {
            if (count > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / 4 / static_cast<uint64_t>(dim))
                overflow = true;
            else count *= static_cast<uint64_t>(dim);
        }
    if (overflow || count != data.size())
        return make_error(ErrorCode::kInvalidArgument,
                          path + ": shape " + shape_text(shape_v) + " holds " +
                              (overflow ? std::string("too many") : std::to_string(count)) + " elements but " +
                              std::to_string(data.size()) + " values were given");
    if (auto st = detail::check_fits(path, data, dtype); !st) return st;

    int major = 1;
    const char* descr = dtype == NpyDtype::kFloat32 ? "<f4" : dtype == NpyDtype::kFloat16 ? "<f2" : "<V2";
    const std::string header = header_for(descr, shape, major);
    std::string pre(kMagic, kMagicLen);
    pre += static_cast<char>(major);
    pre += '\0';
    const size_t hl = header.size();
    pre += static_cast<char>(hl & 0xff);
    pre += static_cast<char>((hl >> 8) & 0xff);
    if (major == 2) {
        pre += static_cast<char>((hl >> 16) & 0xff);
        pre += static_cast<char>((hl >> 24) & 0xff);
    }

    auto file = detail::AtomicFile::create(path);
    if (!file) return file.error();
    if (auto st = file->write(pre.data(), pre.size()); !st) return st;
    if (auto st = file->write(header.data(), header.size()); !st) return st;
    // Little-endian data in 64 KiB pieces.
    constexpr size_t kChunk = 1 << 14;
    unsigned char buf[kChunk * 4];
    for (size_t off = 0; off < data.size(); off += kChunk) {
        const size_t bytes = detail::encode_le(data.subspan(off, std::min(kChunk, data.size() - off)), dtype, buf);
        if (auto st = file->write(buf, bytes); !st) return st;
    }
    return file->commit();
}

}  // namespace qtransit::kernels
