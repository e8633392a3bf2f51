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
#include "qtransit/reports/survey.hpp"

namespace qtransit::gate {

using reports::SurveyCase;  // the result model's (reports/survey.hpp)

struct SurveySpec {
    std::vector<FormatSpec> formats;
    std::vector<kernels::Distribution> dists;
    int64_t elements = 1 << 16, block = kDefaultBlock;
    // A format with a fixed block runs at it, the others at `block` (the block was not given).
    bool own_blocks = false;
    int64_t block_for(const FormatSpec& f) const { return own_blocks ? wire_block({f}, block) : block; }
    uint64_t seed = 1;
    std::vector<std::string> skipped_formats;  // reported only: fixed-block formats the given block leaves out
    std::function<void(int done, int total, const SurveyCase&)> on_case;
};

// The survey's result is the report model (what ran, the cases, the failures) that survey.json and
// survey.md are written from (reports::to_json, to_markdown).
using SurveyResult = reports::SurveyReport;

// An Error for an invalid block or a library failure; a failing case is a case with pass = false.
// A tiled format (FORMATS.md section 8) quantizes the case's values as a 2-D tensor of its tile's
// width ([M / c, c]; [1, M], padded, where c does not divide M).
Result<SurveyResult> run_survey(const SurveySpec& spec);

}  // namespace qtransit::gate
