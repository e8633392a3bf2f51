// survey.json and survey.md (docs/REPORT.md).
#include "qtransit/reports/survey.hpp"

#include <cstdio>

namespace qtransit::reports {

nlohmann::json to_json(const SurveyReport& r) {
    nlohmann::json cases = nlohmann::json::array();
    for (const auto& c : r.cases) {
        if (!c.refused.empty()) {
            cases.push_back({{"format", c.format}, {"dist", c.dist}, {"refused", c.refused}});
            continue;
        }
        cases.push_back({{"format", c.format}, {"dist", c.dist}, {"elements", r.elements}, {"block", c.block ? c.block : r.block},
                         {"seed", r.seed}, {"max_abs_error", c.check.max_abs_error}, {"max_error_to_bound", c.check.max_error_to_bound},
                         {"rel_rms_error", c.rel_rms_error}, {"bound_holds", c.check.bound_holds},
                         {"matches_reference", c.check.exact}, {"reference_mismatch", c.check.first_difference},
                         {"requantized_codes_changed", c.requantized_codes_changed}, {"wire_bytes", c.wire_bytes}, {"pass", c.pass}});
    }
    return {{"schema_version", 1}, {"tool", "qtransit survey"}, {"version", r.version},
            {"elements", r.elements}, {"block", r.block}, {"seed", r.seed},
            {"cases", cases}, {"failures", r.failures}, {"skipped_formats", r.skipped_formats}};
}

std::string to_markdown(const SurveyReport& r) {
    std::string own;  // the formats that ran at a fixed block of their own
    for (const auto& c : r.cases)
        if (c.block && c.block != r.block) {
            const std::string one = c.format + " " + std::to_string(c.block);
            if (own.find(one) == std::string::npos) own += (own.empty() ? "" : ", ") + one;
        }
    std::string o = "# qtransit survey\n\n" + std::to_string(r.elements) + " elements per case, block " + std::to_string(r.block) +
                    (own.empty() ? "" : " (formats with a fixed block at their own: " + own + ")") + ", seed " + std::to_string(r.seed) +
                    ". Kernel output compared bit for bit with the reference; every element's error compared with its bound in "
                    "exact arithmetic; the decoded values requantized once (int<b> must keep its codes; ds-int<b> need not).\n\n"
                    "| format | dist | max abs error | max error/bound | rel RMS error | kernel = reference | "
                    "bound holds | requantized codes changed |\n|---|---|---|---|---|---|---|---|\n";
    for (const auto& c : r.cases) {
        if (!c.refused.empty()) {
            o += "| " + c.format + " | " + c.dist + " | refused: " + c.refused + " |||||\n";
            continue;
        }
        char line[512];
        std::snprintf(line, sizeof line, "| %s | %s | %.4g | %.4f | %.4g | %s | %s | %lld |\n", c.format.c_str(), c.dist.c_str(),
                      c.check.max_abs_error, c.check.max_error_to_bound, c.rel_rms_error, c.check.exact ? "yes" : "NO",
                      c.check.bound_holds ? "yes" : "NO", static_cast<long long>(c.requantized_codes_changed));
        o += line;
    }
    return o + "\n" + std::to_string(r.failures) + " failing case(s).\n";
}

}  // namespace qtransit::reports
