// libFuzzer: the .safetensors reader on arbitrary bytes, and on arbitrary JSON headers framed as a
// file (issue 46). Every input must give an array or an Error; a
// crash, a leak, a sanitizer report or an allocation past the input's own size is a finding. Each
// input is read twice: as the file says, and with --dtype bf16 (the path that reads U16 bits).
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "qtransit/kernels/tensor_file.hpp"

namespace {

void check(const qtransit::Result<qtransit::kernels::NpyArray>& a) {
    if (a) {
        // A parsed array holds exactly what its shape says.
        int64_t n = 1;
        for (int64_t d : a->shape) n *= d;
        if (n != static_cast<int64_t>(a->data.size())) __builtin_trap();
    } else if (a.error().message.empty() || a.error().message.find('\n') != std::string::npos) {
        __builtin_trap();  // every refusal is one line that says something
    }
}

// An accepted file's header holds no NUL, and its tensors' ranges tile the data (issue 46: a NUL
// ended the parse early; overlapping data_offsets were read). The header is checked from the bytes
// themselves, not from the reader's view of them.
void check_accepted_header(std::span<const uint8_t> bytes) {
    if (bytes.size() < 8) __builtin_trap();
    uint64_t len = 0;
    for (int i = 7; i >= 0; --i) len = len << 8 | bytes[static_cast<size_t>(i)];
    if (len > bytes.size() - 8) __builtin_trap();
    for (uint64_t i = 0; i < len; ++i)
        if (bytes[8 + i] == 0) __builtin_trap();
    const auto j = nlohmann::json::parse(bytes.begin() + 8, bytes.begin() + 8 + static_cast<std::ptrdiff_t>(len), nullptr, false);
    if (j.is_discarded() || !j.is_object()) __builtin_trap();
    // An accepted file's ranges tile its data buffer (safetensors' validate): sorted, each begins
    // where the one before ends, from 0 to the buffer's end.
    std::vector<std::pair<uint64_t, uint64_t>> spans;
    for (auto it = j.begin(); it != j.end(); ++it) {
        if (it.key() == "__metadata__") continue;
        const auto& o = (*it)["data_offsets"];
        spans.emplace_back(o[0].get<uint64_t>(), o[1].get<uint64_t>());
    }
    std::sort(spans.begin(), spans.end());
    uint64_t at = 0;
    for (const auto& [b, e] : spans) {
        if (b != at || e < b) __builtin_trap();
        at = e;
    }
    if (!spans.empty() && at != bytes.size() - 8 - len) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    // Half the inputs are taken as the JSON header itself, framed as a file with 64 bytes of data,
    // so that the mutations land in the header's JSON rather than in its length field.
    std::vector<uint8_t> framed;
    std::span<const uint8_t> bytes(data, size);
    if (size > 0 && (data[0] & 1)) {
        const uint64_t len = size - 1;
        for (int i = 0; i < 8; ++i) framed.push_back(static_cast<uint8_t>(len >> (8 * i)));
        framed.insert(framed.end(), data + 1, data + size);
        // The data: as many bytes as the entries' largest end says (the ranges must tile the
        // buffer, so a fixed size would leave most headers refused for their length), or 64.
        uint64_t data_bytes = 64;
        const auto j = nlohmann::json::parse(data + 1, data + size, nullptr, false);
        if (!j.is_discarded() && j.is_object()) {
            uint64_t end = 0;
            for (auto it = j.begin(); it != j.end(); ++it)
                if (it->is_object() && it->contains("data_offsets")) {
                    const auto& o = (*it)["data_offsets"];
                    if (o.is_array() && o.size() == 2 && o[1].is_number_unsigned()) end = std::max(end, o[1].get<uint64_t>());
                }
            if (end > 0 && end <= (uint64_t{1} << 20)) data_bytes = end;
        }
        framed.insert(framed.end(), data_bytes, 0x3f);
        bytes = framed;
    }
    const auto plain = qtransit::kernels::read_safetensors_bytes(bytes, {}, "fuzz.safetensors");
    check(plain);
    auto bf = qtransit::kernels::read_safetensors_bytes(bytes, {"", "bf16"}, "fuzz.safetensors");
    check(bf);
    if (plain || bf) check_accepted_header(bytes);
    if (bf && bf->dtype != qtransit::kernels::NpyDtype::kBfloat16) __builtin_trap();  // --dtype is kept to
    return 0;
}
