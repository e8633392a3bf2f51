// The gate's verdict builders: pure functions from its configuration and results to named
// verdicts (docs/REPORT.md lists them). run_gate calls them in this order; a user's test can call
// them on results of its own.
#pragma once

#include <string>
#include <vector>

#include "qtransit/gate/gate.hpp"
#include "qtransit/reports/gate_result.hpp"

namespace qtransit::gate {

// kernel-vs-reference/<format> from res.format_checks, and kernel-vs-reference-gpu/<format> when
// res.gpu_available (else one skipped kernel-vs-reference-gpu saying why: no_gpu_note).
std::vector<reports::Verdict> kernel_verdicts(const GateConfig& cfg, const reports::GateResult& res, const std::string& no_gpu_note);
// bounds/<format>/<path> and k/<format>/<path> over every run of the pair.
std::vector<reports::Verdict> bound_and_k_verdicts(const GateConfig& cfg, const std::vector<reports::GateRun>& runs);
// A run's k mismatches as the gate's k verdict and simulate's complaint name them: "<count> (row,
// contributor) pair(s) with k other than NUMERICS.md section 3 says; first: <first>".
std::string k_mismatch_text(int64_t count, const std::string& first);
// scaling/<format>/<path>/<dist>: each rule's fitted exponent within [min, max] (res.fits, res.refusals).
std::vector<reports::Verdict> scaling_verdicts(const GateConfig& cfg, const reports::GateResult& res);
// budget/<name>: the largest metric over the matching runs at most the budget.
std::vector<reports::Verdict> budget_verdicts(const GateConfig& cfg, const std::vector<reports::GateRun>& runs);
// baseline/<metric>/<format>/<path>: no run worse than its baseline twin by more than the margin.
std::vector<reports::Verdict> baseline_verdicts(const GateConfig& cfg, const std::vector<reports::GateRun>& runs,
                                                const std::vector<reports::GateRun>& baseline);

// Issue 15's rule: a verdict that passed over nothing (checked == 0: no element, output, k pair,
// fitted N or compared run) fails instead, saying so.
void fail_what_checked_nothing(std::vector<reports::Verdict>& verdicts);

}  // namespace qtransit::gate
