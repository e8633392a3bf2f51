// libFuzzer: the .safetensors reader on arbitrary bytes. Every input must give an array or an Error; a
// crash, a leak, a sanitizer report or an allocation past the input's own size is a finding. Each
// input is read twice: as the file says, and with --dtype bf16 (the path that reads U16 bits).
#include <cstdint>
#include <span>
#include <string>

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

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::span<const uint8_t> bytes(data, size);
    check(qtransit::kernels::read_safetensors_bytes(bytes, {}, "fuzz.safetensors"));
    auto bf = qtransit::kernels::read_safetensors_bytes(bytes, {"", "bf16"}, "fuzz.safetensors");
    check(bf);
    if (bf && bf->dtype != qtransit::kernels::NpyDtype::kBfloat16) __builtin_trap();  // --dtype is kept to
    return 0;
}
