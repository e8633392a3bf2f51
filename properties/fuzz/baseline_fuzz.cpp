// libFuzzer: baseline JSON (qtransit check --baseline): a report.json's runs read back. Any bytes
// give runs or an Error, never an exception or a crash.
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "qtransit/reports/gate_result.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const auto j = nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) return 0;
    auto runs = qtransit::reports::runs_from_json(j);
    if (!runs && runs.error().message.empty()) __builtin_trap();
    return 0;
}
