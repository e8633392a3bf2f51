// The engine of `qtransit formats validate`: a declared format checked the way the built-in ones
// are. (a) every generic property of docs/FORMATS.md section 6 on blocks of every input distribution
// plus edge blocks; a property the format does not promise is measured and reported as skipped.
// (b) every path through the gate (run_gate) on the format next to a few built-ins, with a
// comparison table (error after k = 1 and 2 quantizations, bits per element).
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "qtransit/common/format.hpp"
#include "qtransit/gate/gate.hpp"
#include "qtransit/reports/gate_result.hpp"

namespace qtransit::gate {

struct ValidateOptions {
    uint64_t seed = 1;
    bool quick = false;       // fewer blocks, N and elements: under a second
    GateOptions gate;         // progress and backend of the path runs
    // A codec plugin of the format: the kernel every property and path of the format runs.
    std::shared_ptr<const kernels::PluginCodec> codec;
};

// One generic property: "holds", "FAILS", "not run" or "not promised", and its verdict.
struct PropertyResult {
    std::string name, outcome;
    reports::Verdict verdict;
};

struct FormatValidation {
    FormatSpec format;
    std::string file;                         // where it was declared (for the report)
    reports::GateResult result;               // the gate's verdicts plus one per property, and the
                                              // format comparison (result.format_comparison)
    std::vector<PropertyResult> properties;
};

// An Error only for what is not a verdict (a format without a declaration, a library error).
Result<FormatValidation> validate_format(const FormatSpec& f, const std::string& file, const ValidateOptions& o);
// Its reports: report.json (with format_comparison), report.md, junit.xml, report.html, declaration.toml.
std::vector<std::pair<std::string, std::string>> validation_reports(const FormatValidation& v);
// What `qtransit formats validate` prints: the gate's summary, the properties, the comparison table.
std::string validation_text(const FormatValidation& v);

}  // namespace qtransit::gate
