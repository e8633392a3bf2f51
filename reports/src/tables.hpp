// The summary tables shared by the Markdown, text and HTML writers.
#pragma once

#include <string>
#include <vector>

#include "qtransit/reports/gate_result.hpp"

namespace qtransit::reports::detail {

struct Table {
    std::vector<std::string> header;
    std::vector<std::vector<std::string>> rows;
};

// Verdict counts per category (first-seen order), then "all".
Table category_table(const GateResult& r);
// Relative RMS error at each path's largest N on the first distribution, one row per format.
Table error_table(const GateResult& r);
std::string fmt_g(double v, int digits = 3);

}  // namespace qtransit::reports::detail
