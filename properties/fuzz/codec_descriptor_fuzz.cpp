// libFuzzer: the codec plugin loader's checks (PluginCodec::from_descriptor) on descriptors built
// from arbitrary bytes: every field, the strings included, comes from the input. A descriptor is
// accepted or refused with one line naming what is wrong; the loader never calls into it.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "qtransit/codec_plugin.h"
#include "qtransit/kernels/plugin.hpp"

namespace {
int never_encode(void*, const qtransit_encode_args*, char*, size_t) { __builtin_trap(); }
int never_decode(void*, const qtransit_decode_args*, char*, size_t) { __builtin_trap(); }

struct Reader {
    const uint8_t* p;
    size_t n;
    template <class T>
    T take() {
        T v{};
        const size_t k = std::min(n, sizeof v);
        std::memcpy(&v, p, k);
        p += k, n -= k;
        return v;
    }
    // A string of up to 255 bytes (NUL-free: C strings end at the first NUL anyway), or NULL.
    const char* str(std::vector<std::string>& keep) {
        const uint8_t len = take<uint8_t>();
        if (len == 255) return nullptr;
        std::string s(reinterpret_cast<const char*>(p), std::min<size_t>(len, n));
        p += s.size(), n -= s.size();
        s.erase(std::remove(s.begin(), s.end(), '\0'), s.end());
        keep.push_back(s);
        return keep.back().c_str();
    }
};
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    Reader r{data, size};
    std::vector<std::string> keep;
    keep.reserve(3);
    qtransit_codec_v1_t c{};
    c.abi_version = r.take<uint8_t>() & 1 ? QTRANSIT_CODEC_ABI_VERSION : r.take<uint32_t>();
    c.struct_size = r.take<uint8_t>() & 1 ? sizeof c : r.take<uint32_t>();
    c.name = r.str(keep);
    c.format = r.str(keep);
    c.format_toml = r.str(keep);
    c.device = r.take<uint8_t>() % 3;
    c.packing = r.take<int8_t>() % 5;
    c.input_type = r.take<int8_t>() % 4;
    c.output_type = r.take<int8_t>() % 4;
    c.scale_layout = r.take<int8_t>() % 3;
    c.scale_row_blocks = r.take<int64_t>();
    c.block_min = r.take<int64_t>();
    c.block_max = r.take<int64_t>();
    c.block_multiple = r.take<int64_t>();
    c.thread_safe = r.take<int8_t>() % 3;
    const uint8_t fns = r.take<uint8_t>();
    c.encode = fns & 1 ? never_encode : nullptr;
    c.decode = fns & 2 ? never_decode : nullptr;
    auto p = qtransit::kernels::PluginCodec::from_descriptor(&c, "fuzz.so");
    if (!p) {
        if (p.error().message.empty() || p.error().message.find('\n') != std::string::npos) __builtin_trap();
        return 0;
    }
    // An accepted codec's block constraints answer for every block without calling it.
    for (int64_t b : {int64_t{1}, int64_t{32}, r.take<int64_t>()}) (void)(*p)->check_block(b);
    return 0;
}
