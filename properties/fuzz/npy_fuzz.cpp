// libFuzzer: the .npy reader on arbitrary bytes. Every input must give an array or an Error; a crash,
// a leak, a sanitizer report or an allocation past the input's own size is a finding.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "qtransit/kernels/npy.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static const std::string path = "/tmp/qt_npy_fuzz_" + std::to_string(getpid()) + ".npy";
    if (std::FILE* f = std::fopen(path.c_str(), "wb")) {
        std::fwrite(data, 1, size, f);
        std::fclose(f);
    } else {
        return 0;
    }
    auto a = qtransit::kernels::read_npy(path);
    if (a) {
        // A parsed array holds exactly what its shape says.
        int64_t n = 1;
        for (int64_t d : a->shape) n *= d;
        if (n != static_cast<int64_t>(a->data.size())) __builtin_trap();
    } else if (a.error().message.empty() || a.error().message.find('\n') != std::string::npos) {
        __builtin_trap();  // every refusal is one line that says something
    }
    return 0;
}
