// The survey behind `qtransit survey`: every format over every input distribution through the
// production kernel, each case checked against the reference bit for bit and against its bound in
// exact arithmetic, plus one requantization of the decoded values (idempotence, NUMERICS 1.1, and
// its failure for ds-int<b>, 1.3). No printing: on_case lets the caller show each case.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qtransit/common/format.hpp"
#include "qtransit/kernels/inputs.hpp"

namespace qtransit::gate {

struct SurveyCase {
    std::string format, dist;
    std::string refused;                  // ds-int<b> beyond binary16: the reason (then nothing else is set)
    double max_abs_error = 0, max_error_to_bound = 0, rel_rms_error = 0;
    bool bound_holds = false, matches_reference = false;
    std::string reference_mismatch;
    int64_t requantized_codes_changed = -1;   // -1: the requantization failed
    int64_t wire_bytes = 0;
    bool pass = false;                    // int<b> must also keep its codes on requantization
};

struct SurveySpec {
    std::vector<FormatSpec> formats;
    std::vector<kernels::Distribution> dists;
    int64_t elements = 1 << 16, block = kDefaultBlock;
    uint64_t seed = 1;
    std::vector<std::string> skipped_formats;  // reported only: fixed-block formats the block leaves out
    std::function<void(int done, int total, const SurveyCase&)> on_case;
};

struct SurveyResult {
    std::vector<SurveyCase> cases;
    int failures = 0;
};

// An Error for an invalid block or a library failure; a failing case is a case with pass = false.
Result<SurveyResult> run_survey(const SurveySpec& spec);
// survey.json's object (schema_version 1) and survey.md's text.
nlohmann::json survey_json(const SurveySpec& spec, const SurveyResult& r);
std::string survey_markdown(const SurveySpec& spec, const SurveyResult& r);

}  // namespace qtransit::gate
