// libFuzzer: TOML format declarations (docs/FORMATS.md section 8). Any text gives a format or one
// line of Error; an accepted declaration prints back to TOML that parses to the same declaration.
#include <cstdint>
#include <string>

#include "qtransit/common/decl_toml.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string text(reinterpret_cast<const char*>(data), size);
    auto f = qtransit::parse_declaration(text, "fuzz.toml");
    if (!f) {
        if (f.error().message.empty()) __builtin_trap();
        return 0;
    }
    auto back = qtransit::declaration_to_toml(*f);
    if (!back) return 0;
    auto again = qtransit::parse_declaration(*back, "printed.toml");
    if (!again || !qtransit::same_declaration(*f->decl, *again->decl)) __builtin_trap();
    return 0;
}
