// The verdicts of the gate, drawn from its results: pure functions, no I/O.
#include "qtransit/gate/verdicts.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <map>

#include "qtransit/gate/codec_check.hpp"
#include "qtransit/reports/numbers.hpp"

namespace qtransit::gate {
namespace {

using reports::GateRun;
using reports::Verdict;
using reports::VerdictStatus;

using reports::g4;

Verdict verdict(const std::string& name, bool ok, std::string message) {
    Verdict v;
    v.name = name;
    v.category = name.substr(0, name.find('/'));
    v.status = ok ? VerdictStatus::kPass : VerdictStatus::kFail;
    v.message = std::move(message);
    return v;
}

Verdict checked(int64_t n, Verdict v) {
    v.checked = n;
    return v;
}

std::string run_label(const GateRun& r) { return r.dist + " N=" + std::to_string(r.ranks); }

}  // namespace

std::vector<Verdict> kernel_verdicts(const GateConfig& cfg, const reports::GateResult& res, const std::string& no_gpu_note) {
    std::vector<Verdict> out;
    for (const auto& f : cfg.formats) {
        const kernels::PluginCodec* codec = cfg.codec_for(f);
        const std::string who = codec ? "codec " + codec->name() : "CPU kernel";
        const bool bounded = codec && cfg.conformance == kernels::Conformance::kBounded;
        int checked = 0, refused = 0;
        std::string bad, bad_edge, differs;
        double worst = 0;
        int64_t elements = 0, diff = 0, diff_blocks = 0, in_blocks = 0, ulps = 0, generated = 0;
        std::vector<ConventionTally> conv;  // over every input, by convention
        for (const auto& fc : res.format_checks) {
            if (fc.format != f.name()) continue;
            if (!fc.refused.empty()) {
                ++refused;
                continue;
            }
            const reports::QuantizationCheck& c = fc.check;
            const std::string& dist = fc.dist;
            ++checked;
            elements += c.elements;
            for (const auto& b : c.boundary_classes) generated += b.elements;
            add_tallies(conv, c.conventions);
            worst = std::max(worst, c.max_error_to_bound);
            diff += c.differing_elements;
            diff_blocks += c.differing_scale_blocks;
            in_blocks += c.elements_in_differing_blocks;
            ulps = std::max(ulps, c.max_ulps);
            // A random distribution's difference (the normal range) leads over the edge cases' (issue 52).
            if (!c.exact && (differs.empty() || (dist != "edge-cases" && differs.rfind("edge-cases: ", 0) == 0)))
                differs = dist + ": first difference: " + c.first_difference;
            // The first violation, a random distribution's before the edge cases' (the normal range leads).
            std::string& slot = dist == "edge-cases" ? bad_edge : bad;
            const bool grid_first = c.input_class == "near-ties" || c.input_class == "scale-boundaries";
            if (slot.empty() && !c.bound_holds && grid_first && !c.first_difference.empty() && c.first_difference != c.violation)
                slot = dist + ": " + c.first_difference + "; past the format's bound: " + c.violation;  // the grid's difference leads
            else if (slot.empty() && !c.bound_holds)
                slot = dist + ": " + (c.violation.empty() ? "an element's error exceeds the format's bound" : c.violation) +
                       (c.first_difference.empty() || c.first_difference == c.violation ? "" : "; first difference: " + c.first_difference);
        }
        if (bad.empty()) bad = bad_edge;
        if (bad.empty() && !bounded && !differs.empty()) bad = differs;
        std::string extra = refused ? " (" + std::to_string(refused) + " input(s) refused by both: beyond the format's range)" : "";
        if (generated) extra += "; " + std::to_string(generated) + " more elements in the generated boundary inputs";
        // Declared conventions (FORMATS.md section 10): differences apart from the verdict.
        if (!conv.empty()) extra += "; convention mismatches, as declared: " + tallies_summary(conv);
        const std::string counts = std::to_string(diff) + " of " + std::to_string(elements) + " elements differ in bits (" +
                                   std::to_string(in_blocks) + " of them in the " + std::to_string(diff_blocks) +
                                   " blocks whose scale differs), largest difference " + std::to_string(ulps) + " ulp";
        std::string msg;
        if (!bad.empty()) msg = bad;
        else if (f.kind == FormatKind::kDs && f.fast_math && (!bounded || diff == 0))
            msg = who + " gives one of the admissible results (D23) on every element of " + std::to_string(checked) + " input(s) (" +
                  std::to_string(elements) + " elements, the edge cases included); " + counts + " from the IEEE arithmetic; largest error/bound " +
                  g4(worst) + extra;
        else if (!bounded || diff == 0)
            msg = who + " equals the reference bit for bit (scales, offsets, codes, decoded) on " + std::to_string(checked) +
                  " input(s) (" + std::to_string(elements) + " elements, the edge cases included); largest error/bound " + g4(worst) + extra;
        else
            msg = who + " is within the format's bound on every element (bounded conformance); " + counts + "; " + differs +
                  "; largest error/bound " + g4(worst) + extra;
        Verdict v = verdict("kernel-vs-reference/" + (codec ? codec->name() : f.name()), bad.empty(), msg);
        v.value = static_cast<double>(diff);
        v.checked = elements;
        out.push_back(v);
        if (res.gpu_available && !codec) {
            std::string gbad;
            for (const auto& c : res.format_checks)
                if (c.format == f.name() && c.refused.empty() && c.gpu != "match" && c.dist != "edge-cases" && gbad.empty()) gbad = c.dist + ": " + c.gpu;
            out.push_back(verdict("kernel-vs-reference-gpu/" + f.name(), gbad.empty(),
                                           gbad.empty() ? "GPU kernel equals the CPU kernel (and so the reference) bit for bit" : gbad));
        }
    }
    if (!res.gpu_available) {
        Verdict v;
        v.name = v.category = "kernel-vs-reference-gpu";
        v.status = VerdictStatus::kSkip;
        v.message = cfg.gpu ? "no GPU answered: " + no_gpu_note : "gate.gpu = false";
        out.push_back(v);
    }

    return out;
}

// What the gate ran, as the (format name, path name) pairs its runs carry: every format on every path
// (the 16-bit paths once, under their own type, D26), then every per-stage list on the paths with
// stages, then the declared paths (D45: once with their own wire or type, or wire none; else with every format).
std::vector<std::pair<std::string, std::string>> format_paths(const GateConfig& cfg) {
    std::vector<std::pair<std::string, std::string>> out;
    for (const auto& f : cfg.formats)
        for (auto p : cfg.paths) {
            if (typed_path(p) && &f != &cfg.formats.front()) continue;
            out.emplace_back(typed_path(p) ? to_string(path_info(p).element) : f.name(), path_info(p).name);
        }
    for (const auto& l : cfg.staged)
        for (auto p : cfg.paths)
            if (!format_stages(p).empty()) out.emplace_back(stages_name(l), path_info(p).name);
    for (const auto& d : cfg.declared) {
        if (typed_path(d.kind)) out.emplace_back(to_string(path_info(d.kind).element), d.name);
        else if (d.fixes_wire()) out.emplace_back(d.wire_text(), d.name);
        else if (d.wire_none()) out.emplace_back("none", d.name);  // quantizes nothing: runs once (deepep-bf16-combine)
        else
            for (const auto& f : cfg.formats) out.emplace_back(f.name(), d.name);
    }
    return out;
}

std::string k_mismatch_text(int64_t count, const std::string& first) {
    return std::to_string(count) + " (row, contributor) pair(s) with k other than NUMERICS.md section 3 says; first: " + first;
}

std::vector<Verdict> bound_and_k_verdicts(const GateConfig& cfg, const std::vector<GateRun>& runs) {
    std::vector<Verdict> out;
    for (const auto& [fname, pn] : format_paths(cfg)) {
        {
            const std::string suffix = fname + "/" + pn;
            int nruns = 0;
            int64_t outputs = 0, kpairs = 0;
            double worst = 0;
            int32_t kmin = INT32_MAX, kmax = 0;
            std::string bad, kbad;
            for (const auto& r : runs) {
                if (r.path != pn || r.format != fname) continue;
                ++nruns;
                outputs += r.outputs_checked;
                kpairs += r.k_checked;
                worst = std::max(worst, r.max_error_to_a_posteriori);
                kmin = std::min(kmin, r.k_min);
                kmax = std::max(kmax, r.k_max);
                if (bad.empty() && !r.bound_holds)
                    bad = run_label(r) + ": " + std::to_string(r.violations) + " violation(s)" +
                          (r.nonfinite_outputs ? ", " + std::to_string(r.nonfinite_outputs) + " non-finite output(s)" : "") +
                          (r.first_violation.empty() ? "" : "; first: " + r.first_violation);
                if (kbad.empty() && r.k_mismatches)
                    kbad = run_label(r) + ": " + k_mismatch_text(r.k_mismatches, r.first_k_mismatch);
            }
            if (nruns == 0) continue;  // refused for every distribution
            out.push_back(checked(outputs, verdict("bounds/" + suffix, bad.empty(),
                                           bad.empty() ? "|error| <= a_posteriori <= a_priori on all " + std::to_string(outputs) +
                                                             " outputs of " + std::to_string(nruns) + " runs; largest |error|/a_posteriori " + g4(worst)
                                                       : bad)));
            out.push_back(checked(kpairs, verdict("k/" + suffix, kbad.empty(),
                                           kbad.empty() ? "k of all " + std::to_string(kpairs) + " (output row, contributor) pairs as NUMERICS.md "
                                                          "section 3 says; k in " + std::to_string(kmin) + ".." + std::to_string(kmax)
                                                        : kbad)));
        }
    }

    return out;
}

std::vector<Verdict> scaling_verdicts(const GateConfig& cfg, const reports::GateResult& res) {
    std::vector<Verdict> out;
    for (const auto& rule : cfg.scaling) {
        if (rule.label.empty() && std::find(cfg.paths.begin(), cfg.paths.end(), rule.path) == cfg.paths.end()) continue;
        const auto& dists = rule.dists.empty() ? cfg.dists : rule.dists;
        const std::string pname = rule.path_name();
        // The formats and per-stage lists the rule names that the gate ran (all of them when it names none);
        // a declared path with a wire of its own: that one.
        std::vector<std::string> fnames;
        const bool all = rule.formats.empty() && rule.staged.empty();
        if (!rule.run_format.empty()) fnames.push_back(rule.run_format);
        else
            for (const auto& f : all ? cfg.formats : rule.formats)
                if (std::find(cfg.formats.begin(), cfg.formats.end(), f) != cfg.formats.end()) fnames.push_back(f.name());
        if (rule.label.empty() && !format_stages(rule.path).empty())
            for (const auto& l : all ? cfg.staged : rule.staged)
                for (const auto& g : cfg.staged)
                    if (stages_name(g) == stages_name(l)) fnames.push_back(stages_name(l));
        for (const auto& fname : fnames) {
            for (auto d : dists) {
                if (std::find(cfg.dists.begin(), cfg.dists.end(), d) == cfg.dists.end()) continue;
                const std::string name = "scaling/" + fname + "/" + pname + "/" + kernels::to_string(d);
                const reports::GateFit* fit = nullptr;
                for (const auto& x : res.fits)
                    if (x.path == pname && x.format == fname && x.dist == kernels::to_string(d)) fit = &x;
                bool refused = false;
                for (const auto& x : res.refusals) refused = refused || (x.format == fname && x.dist == kernels::to_string(d));
                Verdict v;
                if (!fit) {
                    v = verdict(name, true, refused ? "not run: the input was refused" : "fewer than two N with a non-zero error: no fit");
                    v.status = VerdictStatus::kSkip;
                } else {
                    const bool ok = fit->exponent >= rule.min && fit->exponent <= rule.max;
                    std::string range = "[" + g4(rule.min) + ", " + g4(rule.max) + "]";
                    v = verdict(name, ok, "fitted exponent " + g4(fit->exponent) + " over " + std::to_string(fit->points.size()) +
                                              " N, allowed " + range + (rule.why.empty() ? "" : ": " + rule.why));
                    v.value = fit->exponent;
                    v.checked = static_cast<int64_t>(fit->points.size());
                    v.limit = ok ? rule.max : (fit->exponent < rule.min ? rule.min : rule.max);
                }
                out.push_back(v);
            }
        }
    }

    return out;
}

std::vector<Verdict> budget_verdicts(const GateConfig& cfg, const std::vector<GateRun>& runs) {
    std::vector<Verdict> out;
    for (const auto& b : cfg.budgets) {
        double worst = -1;
        const GateRun* at = nullptr;
        int64_t outputs = 0;
        for (const auto& r : runs) {
            if (r.path != b.path_name() || r.format != b.format_name()) continue;
            if (!b.dist.empty() && r.dist != b.dist) continue;
            if (b.ranks != 0 && r.ranks != b.ranks) continue;
            outputs += r.outputs_checked;
            const double m = metric_of(r, b.metric);
            if (!at || !(m <= worst)) {
                worst = m;
                at = &r;
            }
        }
        const std::string what = std::string(to_string(b.metric)) + " of " + b.path_name() + " with " + b.format_name() +
                                 (b.dist.empty() ? "" : " on " + b.dist) + (b.ranks ? " at N=" + std::to_string(b.ranks) : "");
        Verdict v;
        if (!at) {
            v = verdict("budget/" + b.name, false, what + ": no run matched (the input was refused)");
        } else {
            const bool ok = worst <= b.max;
            v = verdict("budget/" + b.name, ok,
                        what + ": " + g4(worst) + " (worst: " + run_label(*at) + ") " + (ok ? "<=" : "exceeds the budget") + " " + g4(b.max));
            v.value = worst;
        }
        v.limit = b.max;
        v.checked = outputs;
        out.push_back(v);
    }

    return out;
}

std::vector<Verdict> baseline_verdicts(const GateConfig& cfg, const std::vector<GateRun>& runs, const std::vector<GateRun>& baseline) {
    std::vector<Verdict> out;
    std::map<std::string, const GateRun*> base;
    for (const auto& r : baseline) base[r.key()] = &r;
    for (const auto& m : cfg.baseline_metrics) {
        for (const auto& [fname, pn] : format_paths(cfg)) {
            {
                int matched = 0, missing = 0;
                double worst_ratio = 0;
                std::string bad;
                for (const auto& r : runs) {
                    if (r.path != pn || r.format != fname) continue;
                    auto it = base.find(r.key());
                    if (it == base.end()) {
                        ++missing;
                        continue;
                    }
                    ++matched;
                    const double now = metric_of(r, m), was = metric_of(*it->second, m);
                    if (!std::isfinite(was)) {  // null in the baseline: nothing to compare against is no pass
                        if (bad.empty())
                            bad = run_label(r) + ": the baseline's " + to_string(m) + " is null (not finite): nothing to compare against";
                        continue;
                    }
                    const double ratio = was > 0 ? now / was : (now > 0 ? INFINITY : 1.0);
                    worst_ratio = std::max(worst_ratio, ratio);
                    if (bad.empty() && (!std::isfinite(now) || now > was * (1 + cfg.baseline_margin)))
                        bad = run_label(r) + ": " + to_string(m) + " " + g4(now) + " against " + g4(was) + " in the baseline (more than " +
                              g4(cfg.baseline_margin * 100) + "% worse)";
                }
                const std::string name = std::string("baseline/") + to_string(m) + "/" + fname + "/" + pn;
                Verdict v;
                if (matched == 0) {
                    v = verdict(name, true, "no run of the baseline matches (path, format, dist, N, G, M, block, seed)");
                    v.status = VerdictStatus::kSkip;
                } else {
                    v = verdict(name, bad.empty(),
                                bad.empty() ? std::to_string(matched) + " run(s) compared; worst ratio to the baseline " + g4(worst_ratio) +
                                                  " (allowed " + g4(1 + cfg.baseline_margin) + ")" +
                                                  (missing ? "; " + std::to_string(missing) + " run(s) not in the baseline" : "")
                                            : bad);
                    v.value = worst_ratio;
                    v.limit = 1 + cfg.baseline_margin;
                    v.checked = matched;
                }
                out.push_back(v);
            }
        }
    }
    // A baseline that matches no run at all compared nothing: that is a failure, not a row of skips
    // (a --quick report given as the baseline of a full gate, or one of another seed or M).
    if (!out.empty() && std::none_of(out.begin(), out.end(), [](const Verdict& v) { return v.status != VerdictStatus::kSkip; }))
        for (auto& v : out) {
            v.status = VerdictStatus::kFail;
            v.message = "the baseline (" + std::to_string(baseline.size()) +
                        " runs) matches no run of this gate by (path, format, dist, N, G, M, block, seed): it compared nothing; "
                        "give a baseline written by the same gate configuration (a --quick report for --quick)";
        }
    return out;
}

}  // namespace qtransit::gate

namespace qtransit::gate {

void fail_what_checked_nothing(std::vector<Verdict>& verdicts) {
    for (auto& v : verdicts)
        if (v.status == VerdictStatus::kPass && v.checked == 0) {
            v.status = VerdictStatus::kFail;
            v.message = "checked nothing (0 elements, outputs or runs): a check over nothing never passes; " + v.message;
        }
}

}  // namespace qtransit::gate
