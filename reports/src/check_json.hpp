// What the JSON writers of a checked quantization share (quantize --json, report.json's format_checks[]).
#pragma once

#include <nlohmann/json.hpp>

#include "qtransit/reports/quantization_check.hpp"

namespace qtransit::reports::detail {

// differing_elements, differing_scale_blocks, elements_in_differing_blocks and max_ulps into j.
inline void put_difference_counts(nlohmann::json& j, const QuantizationCheck& c) {
    j["differing_elements"] = c.differing_elements;
    j["differing_scale_blocks"] = c.differing_scale_blocks;
    j["elements_in_differing_blocks"] = c.elements_in_differing_blocks;
    j["max_ulps"] = c.max_ulps;
}

}  // namespace qtransit::reports::detail
