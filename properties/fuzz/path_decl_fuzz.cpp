// libFuzzer: TOML path declarations (docs/PATHS.md). Any text gives declarations or one line of
// Error; every accepted declaration prints back to TOML that resolves to the same schedule and settings.
#include <cstdint>
#include <string>

#include "qtransit/common/path_decl.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string text(reinterpret_cast<const char*>(data), size);
    auto ds = qtransit::parse_path_decls(text, "fuzz.toml");
    if (!ds) {
        const std::string& m = ds.error().message;
        if (m.empty() || m.find('\n') != std::string::npos) __builtin_trap();
        return 0;
    }
    for (const auto& d : *ds) {
        auto again = qtransit::parse_path_decls(qtransit::path_decl_to_toml(d), "printed.toml");
        if (!again || again->size() != 1) __builtin_trap();
        const auto& e = (*again)[0];
        if (e.name != d.name || e.kind != d.kind || e.accum != d.accum || e.divide != d.divide || e.rotation != d.rotation ||
            e.wire != d.wire || e.source != d.source)
            __builtin_trap();
    }
    return 0;
}
