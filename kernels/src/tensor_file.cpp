// .safetensors reader and writer (https://huggingface.co/docs/safetensors) and read_tensor, the one
// entry for the tensor files a training run dumps. As with .npy, nothing in a file is trusted: the
// header length, every entry of the JSON header and every byte range are checked before anything is
// allocated, and each failure is one line naming the file, the tensor and the offset concerned.
#include "qtransit/kernels/tensor_file.hpp"

#include <sys/types.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <new>
#include <optional>
#include <set>
#include <string_view>

#include <nlohmann/json.hpp>

#include "qtransit/common/text_file.hpp"
#include "qtransit/kernels/fp16.hpp"

namespace qtransit::kernels {

namespace {

using nlohmann::json;

constexpr const char* kAccepted = "F32, F16, BF16, and U16 with --dtype fp16 or bf16";
constexpr bool kHostLittle = std::endian::native == std::endian::little;
// Names listed in a message before "and K more".
constexpr size_t kListedNames = 20;

Error bad(const std::string& name, const std::string& what) { return make_error(ErrorCode::kBadFile, name + ": " + what); }

std::string in_quotes(std::string_view s) { return "'" + printable(s) + "'"; }

const char* option_name(NpyDtype d) {
    switch (d) {
        case NpyDtype::kFloat32: return "fp32";
        case NpyDtype::kFloat16: return "fp16";
        case NpyDtype::kBfloat16: return "bf16";
    }
    return "?";
}

// The --dtype value: nullopt for "" (what the file says).
Result<std::optional<NpyDtype>> parse_dtype(const std::string& s) {
    if (s.empty()) return std::optional<NpyDtype>();
    for (NpyDtype d : {NpyDtype::kFloat32, NpyDtype::kFloat16, NpyDtype::kBfloat16})
        if (s == option_name(d)) return std::optional<NpyDtype>(d);
    return make_error(ErrorCode::kInvalidArgument, "unknown --dtype " + in_quotes(s) + "; known: " + known_dtype_names());
}


// Bits per element of the dtypes the format defines (so that every entry's byte range can be checked,
// not only that of the tensor read); 0 for a name it does not, whose range is checked only against
// the buffer.
int dtype_bits(const std::string& d) {
    static const std::pair<const char*, int> kBits[] = {
        {"BOOL", 8}, {"U8", 8},   {"I8", 8},   {"F8_E5M2", 8}, {"F8_E4M3", 8}, {"F8_E8M0", 8}, {"I16", 16},
        {"U16", 16}, {"F16", 16}, {"BF16", 16}, {"I32", 32},   {"U32", 32},    {"F32", 32},    {"I64", 64},
        {"U64", 64}, {"F64", 64}, {"C64", 64},  {"F4", 4},     {"F6_E2M3", 6}, {"F6_E3M2", 6},
    };
    for (const auto& [n, b] : kBits)
        if (d == n) return b;
    return 0;
}

std::string shape_text(const std::vector<int64_t>& shape) {
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); ++i) {
        if (i) s += ", ";
        s += std::to_string(shape[i]);
    }
    return s + "]";
}

std::string offsets_text(uint64_t b, uint64_t e) { return "[" + std::to_string(b) + ", " + std::to_string(e) + "]"; }

// "'a', 'b', 'c'", the first kListedNames, then ", and K more".
std::string name_list(const std::vector<std::string>& names) {
    std::string s;
    for (size_t i = 0; i < names.size() && i < kListedNames; ++i) {
        if (i) s += ", ";
        s += in_quotes(names[i]);
    }
    if (names.size() > kListedNames) s += ", and " + std::to_string(names.size() - kListedNames) + " more";
    return s;
}

// What a JSON value is, for "... is a string, not ...".
std::string kind(const json& v) {
    if (v.is_number_integer()) return "an integer";
    if (v.is_number_float()) return "a non-integer number";
    if (v.is_object()) return "an object";
    if (v.is_array()) return "an array";
    if (v.is_null()) return "null";
    return std::string("a ") + v.type_name();
}

struct Entry {
    std::string name, dtype;
    std::vector<int64_t> shape;
    int64_t count = 0;
    uint64_t begin = 0, end = 0;
};

// One tensor's entry, checked against the data buffer's size.
Result<Entry> parse_entry(const std::string& file, const std::string& key, const json& v, uint64_t data_size,
                          uint64_t data_start) {
    const std::string where = "tensor " + in_quotes(key) + ": ";
    auto fail = [&](const std::string& what) { return bad(file, where + what); };
    if (!v.is_object()) return fail("the entry is " + kind(v) + ", not an object with \"dtype\", \"shape\" and \"data_offsets\"");
    Entry e;
    e.name = key;
    for (const char* k : {"dtype", "shape", "data_offsets"})
        if (!v.contains(k)) return fail(std::string("the entry has no \"") + k + "\"");

    const json& dt = v["dtype"];
    if (!dt.is_string()) return fail("\"dtype\" is " + kind(dt) + ", not a string such as \"F32\"");
    e.dtype = dt.get<std::string>();
    const int bits = dtype_bits(e.dtype);

    const json& sh = v["shape"];
    if (!sh.is_array()) return fail("\"shape\" is " + kind(sh) + ", not an array of non-negative integers");
    for (size_t i = 0; i < sh.size(); ++i) {
        const json& d = sh[i];
        const std::string at = "\"shape\"[" + std::to_string(i) + "] ";
        if (!d.is_number_integer()) return fail(at + "is " + kind(d) + ", not a non-negative integer");
        if (d.is_number_unsigned()) {
            const auto u = d.get<uint64_t>();
            if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
                return fail(at + "is " + std::to_string(u) + ", too large");
            e.shape.push_back(static_cast<int64_t>(u));
        } else {
            const auto s = d.get<int64_t>();
            if (s < 0) return fail(at + "is " + std::to_string(s) + ": dimensions must be non-negative");
            e.shape.push_back(s);
        }
    }
    // Element count, and its size in bits, without overflow (a zero dimension makes it empty).
    const int64_t unit = bits > 0 ? bits : 64;
    e.count = 1;
    if (std::find(e.shape.begin(), e.shape.end(), 0) != e.shape.end()) e.count = 0;
    else
        for (int64_t dim : e.shape) {
            if (e.count > std::numeric_limits<int64_t>::max() / unit / dim)
                return fail("shape " + shape_text(e.shape) + " has too many elements (the size overflows)");
            e.count *= dim;
        }

    const json& off = v["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
        return fail("\"data_offsets\" must be [begin, end], two non-negative integers");
    e.begin = off[0].get<uint64_t>();
    e.end = off[1].get<uint64_t>();
    const std::string offs = "\"data_offsets\" " + offsets_text(e.begin, e.end);
    if (e.begin > e.end) return fail(offs + ": begin is past end");
    if (bits > 0) {
        const uint64_t nbits = static_cast<uint64_t>(e.count) * static_cast<uint64_t>(bits);
        if (nbits % 8 != 0)
            return fail("dtype " + e.dtype + " and shape " + shape_text(e.shape) + " make " + std::to_string(nbits) +
                        " bits, not a whole number of bytes");
        if (e.end - e.begin != nbits / 8)
            return fail(offs + " hold " + std::to_string(e.end - e.begin) + " bytes, but dtype " + e.dtype +
                        " and shape " + shape_text(e.shape) + " need " + std::to_string(nbits / 8));
    }
    if (e.end > data_size)
        return fail(offs + ": end is past the data buffer, which has " + std::to_string(data_size) +
                    " bytes (from file offset " + std::to_string(data_start) + ")");
    return e;
}

// The tensor to read and what its bytes are.
struct Selected {
    Entry entry;
    NpyDtype as = NpyDtype::kFloat32;
    size_t item = 4;
};

// The JSON header: every entry checked, then the one tensor chosen by opt.tensor and its dtype
// reconciled with `want`.
Result<Selected> parse_header(const std::string& file, std::string_view text, uint64_t data_size,
                              const std::string& tensor, std::optional<NpyDtype> want) {
    const uint64_t data_start = 8 + text.size();
    // The header is JSON text, padded at its end with spaces (0x20) only, as the format's writers
    // pad it. A NUL ended the parse early, so whatever followed it was never read or checked
    // (issue 46: {...}\0{"evil": [garbage read as a valid file).
    if (const size_t nul = text.find('\0'); nul != std::string_view::npos)
        return bad(file, "the JSON header holds a NUL byte at its byte " + std::to_string(nul) + " (file offset " + std::to_string(8 + nul) +
                             "): a header is JSON text, padded with spaces only");
    json j;
    std::string duplicate;
    try {
        // The DOM keeps the last of two equal keys; a file naming a tensor twice is ambiguous, so the
        // parser's key events are watched for it (depth 1: the top-level object's keys).
        std::set<std::string> seen;
        j = json::parse(text.begin(), text.end(), [&](int depth, json::parse_event_t ev, json& parsed) {
            if (depth == 1 && ev == json::parse_event_t::key && duplicate.empty() && parsed.is_string() &&
                !seen.insert(parsed.get<std::string>()).second)
                duplicate = parsed.get<std::string>();
            return true;
        });
    } catch (const json::parse_error& e) {
        std::string what = e.what();
        if (const size_t p = what.find("] "); what.rfind("[json.exception.", 0) == 0 && p != std::string::npos)
            what.erase(0, p + 2);
        const uint64_t at = e.byte > 0 ? e.byte - 1 : 0;
        return bad(file, "the JSON header does not parse at its byte " + std::to_string(at) + " (file offset " +
                             std::to_string(8 + at) + "): " + printable(what, 300));
    } catch (const json::exception& e) {
        // A number past binary64 (out_of_range 406) is refused by the parser without a position.
        std::string what = e.what();
        if (const size_t p = what.find("] "); what.rfind("[json.exception.", 0) == 0 && p != std::string::npos)
            what.erase(0, p + 2);
        return bad(file, "the JSON header does not parse: " + printable(what, 300));
    }
    if (!j.is_object())
        return bad(file, "the JSON header is " + kind(j) + ", not an object mapping tensor names to their entries");
    if (!duplicate.empty()) return bad(file, "the JSON header names " + in_quotes(duplicate) + " twice");

    std::vector<Entry> entries;
    for (auto it = j.begin(); it != j.end(); ++it) {
        if (it.key() == "__metadata__") {
            if (!it->is_object()) return bad(file, "\"__metadata__\" is " + kind(*it) + ", not an object of strings");
            for (auto m = it->begin(); m != it->end(); ++m)
                if (!m->is_string())
                    return bad(file, "\"__metadata__\" key " + in_quotes(m.key()) + " maps to " + kind(*m) + ", not a string");
            continue;
        }
        auto e = parse_entry(file, it.key(), *it, data_size, data_start);
        if (!e) return e.error();
        entries.push_back(std::move(*e));
    }
    // The entries' byte ranges tile the data buffer, as the format's reference reader requires
    // (safetensors' validate): sorted by begin, each begins where the one before ends (no two share
    // bytes: one buffer read twice; no gap: bytes that belong to no tensor), the first at 0, the
    // last at the buffer's end.
    {
        std::vector<const Entry*> order;
        for (const Entry& e : entries) order.push_back(&e);
        std::stable_sort(order.begin(), order.end(),
                         [](const Entry* a, const Entry* b) { return a->begin != b->begin ? a->begin < b->begin : a->end < b->end; });
        uint64_t at = 0;
        const Entry* prev = nullptr;
        for (const Entry* e : order) {
            if (e->begin < at)
                return bad(file, "tensors " + in_quotes(prev->name) + " (data_offsets " + offsets_text(prev->begin, prev->end) + ") and " +
                                     in_quotes(e->name) + " (" + offsets_text(e->begin, e->end) + ") overlap: each tensor's bytes are its own");
            if (e->begin > at)
                return bad(file, "tensor " + in_quotes(e->name) + " (data_offsets " + offsets_text(e->begin, e->end) + ") leaves bytes [" +
                                     std::to_string(at) + ", " + std::to_string(e->begin) + ") of the data buffer to no tensor" +
                                     (prev ? " (after tensor " + in_quotes(prev->name) + ")" : "") +
                                     ": the tensors' ranges follow one another from byte 0");
            at = e->end;
            prev = e;
        }
        if (!entries.empty() && at != data_size)
            return bad(file, "the tensors' data ends at byte " + std::to_string(at) + " of the data buffer, which has " +
                                 std::to_string(data_size) + " bytes: the " + std::to_string(data_size - at) + " bytes after it belong to no tensor");
    }
    std::vector<std::string> names;
    for (const Entry& e : entries) names.push_back(e.name);

    const Entry* chosen = nullptr;
    if (tensor.empty()) {
        if (entries.empty()) return bad(file, "the file holds no tensors");
        if (entries.size() > 1)
            return bad(file, "the file holds " + std::to_string(entries.size()) + " tensors; say which with --tensor: " +
                                 name_list(names));
        chosen = &entries[0];
    } else {
        for (const Entry& e : entries)
            if (e.name == tensor) chosen = &e;
        if (!chosen)
            return bad(file, "no tensor named " + in_quotes(tensor) + "; the file holds " +
                                 (names.empty() ? std::string("none") : name_list(names)));
    }

    Selected s{*chosen, NpyDtype::kFloat32, 4};
    const std::string who = "tensor " + in_quotes(chosen->name);
    const std::string& d = chosen->dtype;
    if (d == "F32") s.as = NpyDtype::kFloat32;
    else if (d == "F16") s.as = NpyDtype::kFloat16;
    else if (d == "BF16") s.as = NpyDtype::kBfloat16;
    else if (d == "U16") {
        // Raw bits (a bf16 tensor saved through .view(torch.uint16)): their meaning is the caller's to say.
        if (want != NpyDtype::kFloat16 && want != NpyDtype::kBfloat16)
            return bad(file, who + ": a uint16 array: say what its bits are (--dtype bf16 or --dtype fp16)" +
                                 (want ? std::string("; --dtype ") + option_name(*want) + " is not a 16-bit type" : ""));
        s.as = *want;
    } else {
        return bad(file, who + " has dtype " + in_quotes(d) + ", which is not read; accepted: " + kAccepted);
    }
    s.item = s.as == NpyDtype::kFloat32 ? 4 : 2;
    if (want && s.as != *want)
        return bad(file, who + " holds " + npy_dtype_name(s.as) + " but --dtype says " + option_name(*want));
    return s;
}

// Widens little-endian `n` values of `s` from `src` into dst[0..n).
void widen(const Selected& s, const unsigned char* src, size_t n, float* dst) {
    if (n == 0) return;  // an empty tensor's dst is null, and memcpy(nullptr, ..., 0) is undefined
    if (s.item == 4) {
        std::memcpy(dst, src, n * 4);
        if (!kHostLittle)
            for (size_t i = 0; i < n; ++i) dst[i] = bits_f32(__builtin_bswap32(f32_bits(dst[i])));
        return;
    }
    for (size_t i = 0; i < n; ++i) {
        const uint16_t b = static_cast<uint16_t>(src[2 * i] | src[2 * i + 1] << 8);
        dst[i] = s.as == NpyDtype::kBfloat16 ? bf16_bits_to_f32(b) : f16_bits_to_f32(b);
    }
}

// The widened values held at once: more than the machine has is refused, not an uncaught bad_alloc.
Status check_room(const std::string& file, const Selected& s) {
    const int64_t n = s.entry.count;
    return check_memory(n > std::numeric_limits<int64_t>::max() / 4 ? std::numeric_limits<int64_t>::max() : n * 4,
                        file + ": reading the " + std::to_string(n) + " values of tensor " + in_quotes(s.entry.name));
}

NpyArray start_array(const Selected& s) {
    NpyArray a;
    a.shape = s.entry.shape;
    a.dtype = s.as;
    a.data.resize(static_cast<size_t>(s.entry.count));
    return a;
}

// The 8-byte length field and what it allows, given the total size.
Result<uint64_t> header_length(const std::string& file, const unsigned char* p, uint64_t total) {
    uint64_t len = 0;
    for (int i = 7; i >= 0; --i) len = len << 8 | p[i];
    if (len > kMaxSafetensorsHeader)
        return bad(file, "the header length (bytes 0-7) is " + std::to_string(len) + ", over the limit of 100 MiB (" +
                             std::to_string(kMaxSafetensorsHeader) + " bytes)");
    if (len > total - 8)
        return bad(file, "the header length (bytes 0-7) is " + std::to_string(len) + ", but only " +
                             std::to_string(total - 8) + " bytes follow it");
    return len;
}

Error too_short(const std::string& file, uint64_t total) {
    return bad(file, "too short for a .safetensors file: " + std::to_string(total) +
                         " bytes, less than its 8-byte header length field");
}

struct FileCloser {
    void operator()(std::FILE* f) const { std::fclose(f); }
};

// Reads exactly n bytes (fewer only at EOF); the count, or -1 on a read error (errno set; a pipe's
// stalled writer: ETIMEDOUT).
int64_t read_some(std::FILE* f, void* dst, size_t n) { return detail::read_input(f, dst, n); }

Result<NpyArray> read_safetensors_file(const std::string& path, std::optional<NpyDtype> want, const std::string& tensor,
                                       std::optional<std::pair<int64_t, int64_t>> range = std::nullopt) {
    auto opened = detail::open_input(path);
    if (!opened) return opened.error();
    std::unique_ptr<std::FILE, FileCloser> file(*opened);
    std::FILE* f = file.get();
    auto io_error = [&](const char* when) { return make_error(ErrorCode::kIo, detail::read_error(path, when, errno)); };
    const TensorReadOptions opt{tensor, want ? option_name(*want) : ""};

    off_t size = -1;
    if (fseeko(f, 0, SEEK_END) == 0) size = ftello(f);
    if (size < 0 || fseeko(f, 0, SEEK_SET) != 0) {
        // A pipe cannot seek: it is read whole (the byte ranges can only be checked against its end),
        // and the in-memory reader does the rest.
        std::clearerr(f);
        std::vector<uint8_t> all;
        unsigned char buf[1 << 16];
        size_t next_check = 0;
        for (;;) {
            const int64_t n = read_some(f, buf, sizeof buf);
            if (n < 0) return io_error("in the file");
            if (n == 0) break;
            all.insert(all.end(), buf, buf + n);
            if (all.size() >= next_check) {  // every 64 MiB: the bytes, and the values they may widen to
                if (auto st = check_memory(static_cast<int64_t>(all.size()) * 3, path + ": reading it from a pipe"); !st)
                    return st.error();
                next_check = all.size() + (size_t{64} << 20);
            }
        }
        auto whole = read_safetensors_bytes(all, opt, path);
        if (!whole || !range) return whole;
        const auto [first, len] = *range;
        if (first < 0 || len < 0 || first > whole->elements() || len > whole->elements() - first)
            return bad(path, "elements [" + std::to_string(first) + ", " + std::to_string(first + len) + ") are not within its " +
                                 std::to_string(whole->elements()) + " elements");
        std::vector<float> part(whole->data.begin() + first, whole->data.begin() + first + len);
        whole->data = std::move(part);
        return whole;
    }

    const uint64_t total = static_cast<uint64_t>(size);
    unsigned char pre[8];
    int64_t got = read_some(f, pre, 8);
    if (got < 0) return io_error("in the header length");
    if (got < 8) return too_short(path, static_cast<uint64_t>(got));
    auto len = header_length(path, pre, total);
    if (!len) return len.error();
    std::string text(*len, '\0');
    got = read_some(f, text.data(), text.size());
    if (got < 0) return io_error("in the JSON header");
    if (static_cast<uint64_t>(got) != *len) return bad(path, "truncated while reading the JSON header (the file shrank?)");
    const uint64_t data_start = 8 + *len;
    auto sel = parse_header(path, text, total - data_start, tensor, want);
    if (!sel) return sel.error();
    uint64_t skip = 0;  // bytes of the tensor before a slice
    if (range) {        // a slice: the flat elements [first, first + len) only
        const auto [first, len] = *range;
        if (first < 0 || len < 0 || first > sel->entry.count || len > sel->entry.count - first)
            return bad(path, "tensor " + in_quotes(sel->entry.name) + ": elements [" + std::to_string(first) + ", " +
                                 std::to_string(first + len) + ") are not within its " + std::to_string(sel->entry.count) + " elements");
        skip = static_cast<uint64_t>(first) * sel->item;
        sel->entry.count = len;
    }
    if (auto st = check_room(path, *sel); !st) return st.error();

    NpyArray a = start_array(*sel);
    if (fseeko(f, static_cast<off_t>(data_start + sel->entry.begin + skip), SEEK_SET) != 0) return io_error("while seeking");
    // Widened a piece at a time, so the file's bytes need no second buffer.
    unsigned char buf[1 << 16];
    const size_t per = sizeof buf / sel->item;
    for (size_t done = 0; done < a.data.size();) {
        const size_t m = std::min(per, a.data.size() - done);
        got = read_some(f, buf, m * sel->item);
        if (got < 0) return io_error("in the data");
        if (static_cast<uint64_t>(got) != m * sel->item) return bad(path, "truncated while reading the data (the file shrank?)");
        widen(*sel, buf, m, a.data.data() + done);
        done += m;
    }
    return a;
}

}  // namespace

std::string known_dtype_names() { return "fp32, fp16, bf16"; }

Result<NpyArray> read_safetensors_bytes(std::span<const uint8_t> bytes, const TensorReadOptions& opt, const std::string& name) {
    auto want = parse_dtype(opt.dtype);
    if (!want) return want.error();
    if (bytes.size() < 8) return too_short(name, bytes.size());
    auto len = header_length(name, bytes.data(), bytes.size());
    if (!len) return len.error();
    const std::string_view text(reinterpret_cast<const char*>(bytes.data() + 8), *len);
    const uint64_t data_start = 8 + *len;
    try {
        auto sel = parse_header(name, text, bytes.size() - data_start, opt.tensor, *want);
        if (!sel) return sel.error();
        if (auto st = check_room(name, *sel); !st) return st.error();
        NpyArray a = start_array(*sel);
        widen(*sel, bytes.data() + data_start + sel->entry.begin, a.data.size(), a.data.data());
        return a;
    } catch (const std::bad_alloc&) {
        return make_error(ErrorCode::kBadFile, name + ": out of memory while reading its header");
    }
}

bool is_safetensors_name(const std::string& path) {
    constexpr std::string_view ext = ".safetensors";
    if (path.size() < ext.size()) return false;
    for (size_t i = 0; i < ext.size(); ++i) {
        char c = path[path.size() - ext.size() + i];
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
        if (c != ext[i]) return false;
    }
    return true;
}

namespace {

Result<NpyArray> read_any(const std::string& path, const TensorReadOptions& opt, std::optional<std::pair<int64_t, int64_t>> range) {
    auto want = parse_dtype(opt.dtype);
    if (!want) return want.error();
    if (opt.raw_only && *want) {
        // --dtype for raw uint16 arrays only: a typed file is read as it says; only one that asks for
        // the meaning of its bits is read again with it.
        TensorReadOptions typed = opt;
        typed.dtype.clear();
        typed.raw_only = false;
        auto r = read_any(path, typed, range);
        if (r || r.error().message.find("a uint16 array: say what its bits are") == std::string::npos) return r;
    }
    if (!is_safetensors_name(path)) {
        if (!opt.tensor.empty())
            return make_error(ErrorCode::kInvalidArgument,
                              path + ": --tensor is for .safetensors files (a .npy file holds one array)");
        return range ? read_npy_slice(path, *want, range->first, range->second) : read_npy(path, *want);
    }
    try {
        return read_safetensors_file(path, *want, opt.tensor, range);
    } catch (const std::bad_alloc&) {
        return make_error(ErrorCode::kBadFile, path + ": out of memory while reading its header");
    }
}

}  // namespace

Result<NpyArray> read_tensor(const std::string& path, const TensorReadOptions& opt) { return read_any(path, opt, std::nullopt); }

Result<NpyArray> read_tensor_slice(const std::string& path, const TensorReadOptions& opt, int64_t first, int64_t count) {
    return read_any(path, opt, std::pair{first, count});
}

Status write_safetensors(const std::string& path, const std::vector<std::pair<std::string, NpyArray>>& tensors,
                         const std::map<std::string, std::string>& metadata) {
    auto invalid = [&](const std::string& what) { return make_error(ErrorCode::kInvalidArgument, path + ": " + what); };
    // A string nlohmann would refuse to write (invalid UTF-8), found before anything is written.
    auto utf8 = [](const std::string& s) {
        try {
            (void)json(s).dump();
            return true;
        } catch (const json::exception&) {
            return false;
        }
    };
    try {
        json header = json::object();  // std::map order; the data follows in the order given
        if (!metadata.empty()) {
            json m = json::object();
            for (const auto& [k, v] : metadata) {
                if (!utf8(k) || !utf8(v)) return invalid("metadata " + in_quotes(k) + " is not valid UTF-8");
                m[k] = v;
            }
            header["__metadata__"] = std::move(m);
        }
        uint64_t offset = 0;
        for (const auto& [name, a] : tensors) {
            const std::string who = "tensor " + in_quotes(name);
            if (name.empty()) return invalid("a tensor has an empty name");
            if (name == "__metadata__") return invalid("\"__metadata__\" is not a tensor name (it is the header's metadata)");
            if (!utf8(name)) return invalid(who + ": the name is not valid UTF-8");
            if (header.contains(name)) return invalid(who + " is given twice");
            uint64_t count = 1;
            bool empty = false, overflow = false;
            for (int64_t d : a.shape) {
                if (d < 0) return invalid(who + ": shape " + shape_text(a.shape) + " has a negative dimension");
                empty = empty || d == 0;
            }
            if (empty) count = 0;
            else
                for (int64_t d : a.shape) {
                    if (count > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / 4 / static_cast<uint64_t>(d))
                        overflow = true;
                    else count *= static_cast<uint64_t>(d);
                }
            if (overflow || count != a.data.size())
                return invalid(who + ": shape " + shape_text(a.shape) + " holds " +
                               (overflow ? std::string("too many") : std::to_string(count)) + " elements but " +
                               std::to_string(a.data.size()) + " values were given");
            if (auto st = detail::check_fits(path + ": " + who, a.data, a.dtype); !st) return st;
            const uint64_t bytes = count * (a.dtype == NpyDtype::kFloat32 ? 4 : 2);
            header[name] = {{"dtype", a.dtype == NpyDtype::kFloat32   ? "F32"
                                      : a.dtype == NpyDtype::kFloat16 ? "F16"
                                                                      : "BF16"},
                            {"shape", a.shape},
                            {"data_offsets", {offset, offset + bytes}}};
            offset += bytes;
        }
        std::string text = header.dump();
        text.append((8 - text.size() % 8) % 8, ' ');  // the data 8-byte aligned, as the reference writer does
        unsigned char len[8];
        for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(static_cast<uint64_t>(text.size()) >> (8 * i));

        auto file = detail::AtomicFile::create(path);
        if (!file) return file.error();
        if (auto st = file->write(len, sizeof len); !st) return st;
        if (auto st = file->write(text.data(), text.size()); !st) return st;
        constexpr size_t kChunk = 1 << 14;
        unsigned char buf[kChunk * 4];
        for (const auto& [name, a] : tensors) {
            const std::span<const float> v(a.data);
            for (size_t off = 0; off < v.size(); off += kChunk) {
                const size_t bytes = detail::encode_le(v.subspan(off, std::min(kChunk, v.size() - off)), a.dtype, buf);
                if (auto st = file->write(buf, bytes); !st) return st;
            }
        }
        return file->commit();
    } catch (const std::exception& e) {  // nlohmann or an allocation: never past the library boundary
        return make_error(ErrorCode::kInternal, path + ": writing the header failed: " + printable(e.what()));
    }
}

}  // namespace qtransit::kernels
