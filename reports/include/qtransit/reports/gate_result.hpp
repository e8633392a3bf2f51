// The result model of the numerics gate (`qtransit check`) and its writers. Plain structs: the
// gate in cli/ fills them from the simulation, the kernels and the reference; this module knows
// nothing of those, only of these structs (docs/REPORT.md documents the JSON schema).
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "qtransit/common/status.hpp"
#include "qtransit/common/transit.hpp"
#include "qtransit/reports/quantization_check.hpp"

namespace qtransit::reports {

inline constexpr int kSchemaVersion = 1;

// One collective path run at one N on one input distribution, checked exactly: what report.json's
// runs[] and `simulate --json`'s runs hold, written by to_json(const GateRun&) alone (D64).
struct GateRun {
    std::string path, format, dist;
    std::string schedule;            // a declared path's (D43): the schedule it ran as; "" for a built-in path
    std::string divide = "none";     // where a mean's 1/N went (D27); part of the key when not none
    std::string accum = "fp32";      // the type the sums are taken in (D11, D24, D26)
    std::string rotation = "none";   // a rotated format's: each-hop or end-to-end (D28); none otherwise
    std::string input, output;       // a declared input (D47) or output type (D46); "" for binary32
    bool per_tensor = false;         // one scale for the tensor (D50), from tensor_amax of every rank's inputs
    double tensor_amax = 0;
    PathShape shape = PathShape::kReduceScatter;
    bool quantized = true;           // false for fp32-ring-rs
    int64_t ranks = 0, ranks_per_node = 0, elements = 0, block = 0;
    uint64_t seed = 0;
    int32_t k_min = 0, k_max = 0;    // from the ledger
    int64_t k_checked = 0, k_mismatches = 0;  // (output row, contributor) pairs against NUMERICS 3
    std::string first_k_mismatch;
    double max_abs_error = 0, rms_error = 0, rel_rms_error = 0;
    double max_a_posteriori = 0, max_a_priori = 0, max_error_to_a_posteriori = 0;
    bool bound_holds = true;
    int64_t violations = 0, nonfinite_outputs = 0, outputs_checked = 0;
    // NCCL's FP8 paths (D41): whether the path saturates at all, the outputs a clamp reached and
    // the most clamps on one value's way (written to the reports only where `saturating`).
    bool saturating = false;
    int64_t saturated_outputs = 0;
    int32_t max_saturations = 0;
    double mean_factor = 0;          // an NCCL FP8 path's ncclAvg: the FP8 factor that stands for 1/N (0 elsewhere)
    std::string first_violation;
    double bytes_per_rank = 0, cross_node_bytes_per_rank = 0, fp16_bytes_per_rank = 0, fp16_ring_rs_bytes_per_rank = 0;
    // The busiest rank's payload in bits per element of its M-element tensor.
    double wire_bits_per_element() const { return elements > 0 ? bytes_per_rank * 8.0 / static_cast<double>(elements) : 0.0; }
    // The key a baseline matches runs by.
    std::string key() const;
};

// A (path, format, dist) run group that could not run: ds-int<b> refuses inputs beyond binary16.
struct GateRefusal {
    std::string format, dist, what;  // what: the library's one-line message
};

// Fitted exponent of relative RMS error against N for one (path, format, dist).
struct GateFit {
    std::string path, format, dist;
    double exponent = 0;
    std::vector<std::pair<int64_t, double>> points;  // (N, rel_rms_error)
};

// One quantization of one distribution's input by the production kernels (or a codec plugin),
// checked against the reference bit for bit (CPU, and GPU when one answers) and against its bound
// in exact arithmetic: report.json's format_checks[].
struct FormatCheck {
    std::string format, dist;
    std::string refused;             // non-empty: the kernel and the reference refused the input (nothing else set)
    // The check (elements, block, shard, the comparison, the bound, the boundary classes, the
    // conventions over the check and its classes). Its input_class is the distribution's name
    // where the distribution's own input found the first difference.
    QuantizationCheck check;
    std::string gpu;                 // "match", "differ: <what>", or "not run: <why>"
    // Whose kernel ran ("qtransit", or a codec plugin's name), judged under `conformance` ("exact"
    // or "bounded").
    std::string kernel = "qtransit", conformance = "exact";
};

enum class VerdictStatus : uint8_t { kPass, kFail, kSkip };
const char* to_string(VerdictStatus s);

// One named check with its outcome: "bounds/int4/ring-rs", "budget/<name>", ...
struct Verdict {
    std::string name;
    std::string category;            // the name's first component
    VerdictStatus status = VerdictStatus::kPass;
    std::string message;             // what was measured against what; for a failure, why
    std::optional<double> value, limit;
    // How many things it checked (elements, outputs, (row, contributor) pairs, fitted N, compared
    // runs; -1: not counted, as for a skip). A pass over 0 is turned into a failure.
    int64_t checked = -1;
};

// `qtransit formats validate`'s table: the declared format against the built-in formats of its
// gate, one row per format (the declared one first): wire bits per element at the gate's block, the
// relative RMS error of the reduce-scatter runs whose largest k is 1 and 2 (at the largest N) and at
// the largest k, on the first distribution; NaN where no run had that k.
struct FormatComparison {
    struct Row {
        std::string format;
        double bits = 0, k1 = NAN, k2 = NAN, kmax_err = NAN;
        int32_t kmax = 0;
        bool holds = true;  // every run of the format held its bounds
    };
    std::string declared, file, dist;
    std::vector<Row> rows;
};

struct GateResult {
    int schema_version = kSchemaVersion;
    std::string version;             // qtransit's
    std::string config_source;       // "default" or the config file's path
    std::string started_at;          // UTC, ISO 8601
    double wall_seconds = 0;
    // What ran.
    std::vector<std::string> formats, paths, dists;
    std::vector<int64_t> ranks, tree_ranks;
    int64_t ranks_per_node = 0, elements = 0, block = 0;
    uint64_t seed = 0;
    std::string accum = "fp32";  // gate.accum
    std::string divide = "none";  // gate.divide (D27)
    bool gpu_available = false;
    std::string baseline;            // the baseline file compared against, if any
    std::vector<std::string> notes;  // e.g. why tree-rs ran at other N
    std::vector<GateRun> runs;
    std::vector<GateRefusal> refusals;
    std::vector<GateFit> fits;
    std::vector<FormatCheck> format_checks;
    std::vector<Verdict> verdicts;
    // `qtransit verify` (a run computed elsewhere, judged): its JSON (report.json's "verify") and its
    // text (the Markdown and HTML reports' "Verify" section); empty for the gate.
    nlohmann::json verify;
    std::string verify_text;
    // `formats validate`: report.json's "format_comparison", a section at the end of report.md and
    // report.html; absent for the gate.
    std::optional<FormatComparison> format_comparison;

    int64_t count(VerdictStatus s) const;
    bool passed() const { return count(VerdictStatus::kFail) == 0; }
};

// ---- writers (json.cpp, markdown.cpp, junit.cpp, html.cpp) ----------------------------------------
nlohmann::json to_json(const GateResult& r);
// One run, one fit: as report.json's runs[] and fits[] hold them, and `simulate --json` prints them.
nlohmann::json to_json(const GateRun& x);
nlohmann::json to_json(const GateFit& f);
// The runs of a report.json (for baselines): an Error names what is missing or has the wrong type.
Result<std::vector<GateRun>> runs_from_json(const nlohmann::json& j);

// The summary: verdicts per category, then the relative RMS error at the largest N per format and
// path; then every failed verdict. Fit for a CI job summary or a pull-request comment.
std::string to_markdown(const GateResult& r);
// The same summary table as plain text for a terminal.
std::string summary_text(const GateResult& r);
std::string to_junit(const GateResult& r);
// One self-contained HTML file with inline SVG plots (ids plot-*), no script, no network.
std::string to_html(const GateResult& r);

// Escapes for XML/HTML text and attributes.
std::string xml_escape(const std::string& s);

}  // namespace qtransit::reports
