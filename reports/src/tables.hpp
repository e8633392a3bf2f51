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

// Issue 18's comparison: int8 and int4 through a2a-rs and a2a-hier-rs against the 16-bit ring
// reduce-scatters (with and without pre-division) and the fp32 ring, by relative RMS error on the
// normal, heavy and correlated inputs and cross-node bytes per rank, at every N of the gate. Rows
// that did not run are left out.
struct CompareRow {
    std::string what, path, format, divide;
};
std::vector<CompareRow> compare_rows(const GateResult& r);
// The run of a row at (dist, N), or null.
const GateRun* compare_run(const GateResult& r, const CompareRow& row, const std::string& dist, int64_t n);
std::vector<std::string> compare_dists(const GateResult& r);
Table compare_table(const GateResult& r);
// Which row wins where: per distribution at the largest N, the most accurate and the one with the
// fewest cross-node bytes, in words.
std::vector<std::string> compare_notes(const GateResult& r);

// Issue 49's table: the collectives run now (NCCL's FP8 paths with ncclAvg, the declared paths:
// FlashInfer, DeepEP, a user's) beside ZeRO++'s qgZ (int4 a2a-hier-rs) and the bf16 ring, one
// line per row and N: the busiest rank's bytes on the wire, k (least..most quantizations of one
// contribution), and per distribution the relative RMS error with the outputs a clamp reached;
// "refused" where the inputs did not fit the path's type. Rows that did not run are left out.
std::vector<CompareRow> collectives_rows(const GateResult& r);
Table collectives_table(const GateResult& r);
// What the table shows, in words: per distribution at the largest N the rows from the least error
// up, and every ncclAvg whose FP8 factor is not 1/N (N not a power of two) with what it costs.
std::vector<std::string> collectives_notes(const GateResult& r);

}  // namespace qtransit::reports::detail
