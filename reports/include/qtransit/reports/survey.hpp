// `qtransit survey`'s result model and its writers: survey.json (schema_version 1) and survey.md.
// The gate runs the survey (gate/survey.hpp) and fills these structs; this module writes them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qtransit/reports/quantization_check.hpp"

namespace qtransit::reports {

// One format on one input distribution through the production kernel.
struct SurveyCase {
    std::string format, dist;
    std::string refused;                  // ds-int<b> beyond binary16: the reason (then nothing else is set)
    int64_t block = 0;                    // the report's, or the format's own fixed block
    QuantizationCheck check;              // the kernel against the reference: exact, the bound, max_abs_error
    double rel_rms_error = 0;
    int64_t requantized_codes_changed = -1;   // -1: the requantization failed
    int64_t wire_bytes = 0;
    bool pass = false;                    // int<b> must also keep its codes on requantization
};

struct SurveyReport {
    std::string version;  // qtransit's
    int64_t elements = 0, block = 0;
    uint64_t seed = 0;
    std::vector<SurveyCase> cases;
    int failures = 0;
    std::vector<std::string> skipped_formats;  // fixed-block formats a given block left out
};

nlohmann::json to_json(const SurveyReport& r);
std::string to_markdown(const SurveyReport& r);

}  // namespace qtransit::reports
