// libFuzzer: gate configs (qtransit check --config). Any text gives a validated config or an Error;
// nothing runs. Declared formats are registered process-wide, so names may repeat across inputs:
// that is an Error like any other.
#include <cstdint>
#include <string>

#include "qtransit/gate/gate.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string text(reinterpret_cast<const char*>(data), size);
    auto cfg = qtransit::gate::parse_gate_config(text, "fuzz.toml");
    if (!cfg) {
        if (cfg.error().message.empty()) __builtin_trap();
        return 0;
    }
    // What parse accepted, validate accepts too.
    if (!qtransit::gate::validate(*cfg)) __builtin_trap();
    return 0;
}
