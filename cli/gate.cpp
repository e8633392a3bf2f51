// The numerics gate: every (format, distribution) runs every path at every N through the
// simulation with exact checking (run_sweep, with the k ledger compared to NUMERICS.md section 3),
// every format's kernels are compared with the reference (CPU, and GPU when one answers), and the
// results become named verdicts (bounds, kernel-vs-reference, k, scaling, budget, baseline).
#include "gate.hpp"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <map>
#include <set>

#include "qtransit/collectives/mpi.hpp"
#include "qtransit/kernels/gpu.hpp"
#include "sweep.hpp"
#include "verify.hpp"

namespace qtransit::cli {
namespace {

using reports::GateRun;
using reports::Verdict;
using reports::VerdictStatus;

const char* shape_name(PathShape s) {
    switch (s) {
        case PathShape::kReduceScatter: return "reduce-scatter";
        case PathShape::kAllReduce: return "all-reduce";
        case PathShape::kAllGather: return "all-gather";
    }
    return "?";
}

GateRun to_run(const RunRow& r, const std::string& dist, uint64_t seed) {
    GateRun x;
    const auto& s = r.stats;
    x.path = path_info(r.config.path).name;
    x.shape = shape_name(path_info(r.config.path).shape);
    x.quantized = path_info(r.config.path).quantized;
    x.format = r.config.format.name();
    x.dist = dist;
    x.ranks = r.config.ranks;
    x.ranks_per_node = r.config.ranks_per_node;
    x.elements = r.config.elements;
    x.block = r.config.block;
    x.seed = seed;
    x.k_min = s.k_min;
    x.k_max = s.k_max;
    x.k_checked = r.k_checked;
    x.k_mismatches = r.k_mismatches;
    x.first_k_mismatch = r.first_k_mismatch;
    x.max_abs_error = s.max_abs_error;
    x.rms_error = s.outputs_checked ? std::sqrt(s.sum_sq_error / static_cast<double>(s.outputs_checked)) : 0.0;
    x.rel_rms_error = s.rel_rms_error();
    x.max_a_posteriori = s.max_a_posteriori;
    x.max_a_priori = s.max_a_priori;
    x.max_error_to_a_posteriori = s.max_error_to_a_posteriori;
    x.bound_holds = s.bound_holds;
    x.violations = s.violations;
    x.nonfinite_outputs = s.nonfinite_outputs;
    x.outputs_checked = s.outputs_checked;
    x.first_violation = s.first_violation;
    x.bytes_per_rank = r.bytes_per_rank;
    x.cross_node_bytes_per_rank = r.cross_node_bytes_per_rank;
    x.fp16_bytes_per_rank = r.fp16_path_bytes_per_rank;
    x.fp16_ring_rs_bytes_per_rank = r.fp16_ring_rs;
    return x;
}

double metric_of(const GateRun& r, const std::string& m) {
    if (m == "rel_rms_error") return r.rel_rms_error;
    if (m == "max_abs_error") return r.max_abs_error;
    if (m == "rms_error") return r.rms_error;
    return r.max_error_to_a_posteriori;
}

std::string g4(double v) {
    char b[32];
    std::snprintf(b, sizeof b, "%.4g", v);
    return b;
}

Verdict verdict(const std::string& name, bool ok, std::string message) {
    Verdict v;
    v.name = name;
    v.category = name.substr(0, name.find('/'));
    v.status = ok ? VerdictStatus::kPass : VerdictStatus::kFail;
    v.message = std::move(message);
    return v;
}

std::string run_label(const GateRun& r) { return r.dist + " N=" + std::to_string(r.ranks); }

// GPU encode/decode of x against the CPU kernel's (already checked against the reference).
std::string gpu_compare(const FormatSpec& f, std::span<const float> x, int64_t block, const QuantizeCheck& cpu) {
    auto enc = kernels::gpu::encode(f, x, block);
    if (!enc) return "differ: GPU encode failed: " + enc.error().message;
    auto same_bits = [](const std::vector<float>& a, const std::vector<float>& b) {
        return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](float p, float q) {
                   return std::bit_cast<uint32_t>(p) == std::bit_cast<uint32_t>(q);
               });
    };
    if (enc->codes != cpu.encoded.codes) return "differ: packed codes";
    if (!same_bits(enc->scales, cpu.encoded.scales)) return "differ: scales";
    if (!same_bits(enc->offsets, cpu.encoded.offsets)) return "differ: offsets";
    auto dec = kernels::gpu::decode(*enc);
    if (!dec) return "differ: GPU decode failed: " + dec.error().message;
    if (!same_bits(*dec, cpu.decoded)) return "differ: decoded values";
    return "match";
}

std::string now_utc() {
    const std::time_t t = std::time(nullptr);
    char b[32];
    std::strftime(b, sizeof b, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
    return b;
}

}  // namespace

Result<reports::GateResult> run_gate(const GateConfig& cfg, const GateOptions& opt) {
    const auto t0 = std::chrono::steady_clock::now();
    reports::GateResult res;
    res.version = QTRANSIT_VERSION;
    res.config_source = cfg.source;
    res.started_at = now_utc();
    for (const auto& f : cfg.formats) res.formats.push_back(f.name());
    for (auto p : cfg.paths) res.paths.push_back(path_info(p).name);
    for (auto d : cfg.dists) res.dists.push_back(kernels::to_string(d));
    res.ranks = cfg.ranks;
    res.ranks_per_node = cfg.ranks_per_node;
    res.elements = cfg.elements;
    res.block = cfg.block;
    res.seed = cfg.seed;
    res.baseline = opt.baseline_path;
    const bool tree = std::find(cfg.paths.begin(), cfg.paths.end(), PathKind::kTreeRs) != cfg.paths.end();
    std::vector<PathKind> flat_paths;
    for (auto p : cfg.paths)
        if (p != PathKind::kTreeRs) flat_paths.push_back(p);
    if (tree) {
        res.tree_ranks = cfg.tree_ranks;
        if (cfg.tree_ranks != cfg.ranks) {
            std::string ns;
            for (auto n : cfg.tree_ranks) ns += (ns.empty() ? "" : ", ") + std::to_string(n);
            res.notes.push_back("tree-rs needs N a power of two: it runs at N = " + ns + " instead of the gate's N.");
        }
    }
    res.gpu_available = cfg.gpu && kernels::gpu::device_available();
    if (opt.backend != collectives::Backend::kCpu) {
        const char* b = collectives::to_string(opt.backend);
        res.notes.push_back(
            one_process_per_rank(opt.backend)
                ? std::string("The paths ran with --backend ") + b + ": one process per rank (" +
                      std::to_string(collectives::mpi::size()) + " processes), each checking its own outputs; the "
                      "verdicts were combined on rank 0. RMS errors are summed in another order than in one process "
                      "(equal to about 1e-15 relative)."
                : std::string("The paths ran with --backend ") + b + ".");
    }

    // ---- runs ------------------------------------------------------------------------------------
    const size_t total = cfg.formats.size() * cfg.dists.size();
    size_t done = 0;
    std::vector<float> x(static_cast<size_t>(cfg.elements));
    for (const auto& f : cfg.formats) {
        for (auto d : cfg.dists) {
            const auto g0 = std::chrono::steady_clock::now();
            const std::string dist = kernels::to_string(d);
            size_t runs_before = res.runs.size();
            bool refused = false;
            // The kernels on rank 0's input.
            kernels::generate_span(d, cfg.seed, 0, 0, x);
            reports::FormatCheck fc;
            fc.format = f.name();
            fc.dist = dist;
            fc.elements = cfg.elements;
            fc.block = cfg.block;
            Site site;
            site.tensor = dist + " input";
            site.rank = 0;
            auto qc = quantize_and_check(f, x, cfg.block, Nonfinite::kError, site);
            if (!qc) {
                fc.refused = qc.error().message;
            } else {
                fc.cpu_matches_reference = qc->matches_reference;
                fc.cpu_mismatch = qc->mismatch;
                fc.bound_holds = qc->bounds.holds;
                fc.max_error_to_bound = qc->bounds.max_error_to_bound;
                fc.gpu = !cfg.gpu ? "not run: gate.gpu = false"
                         : res.gpu_available ? gpu_compare(f, x, cfg.block, *qc)
                                             : "not run: no GPU answered";
            }
            res.format_checks.push_back(fc);

            // The paths: every path but tree-rs at the gate's N, tree-rs at tree_ranks.
            for (int part = 0; part < 2 && !refused; ++part) {
                SweepSpec spec;
                spec.paths = part == 0 ? flat_paths : std::vector<PathKind>{PathKind::kTreeRs};
                if (spec.paths.empty() || (part == 1 && !tree)) continue;
                spec.ranks = part == 0 ? cfg.ranks : cfg.tree_ranks;
                spec.ranks_per_node = cfg.ranks_per_node;
                spec.elements = cfg.elements;
                spec.format = f;
                spec.block = cfg.block;
                spec.dist = d;
                spec.seed = cfg.seed;
                spec.threads = cfg.threads;
                spec.check_k = true;
                spec.backend = opt.backend;
                if (opt.progress && opt.progress_tty)
                    spec.on_group = [&, part](size_t i, size_t groups, int64_t n) {
                        std::fprintf(stderr, "\r[%zu/%zu] %-10s %-12s %s N=%-4lld (%zu/%zu)   ", done + 1, total, f.name().c_str(),
                                     dist.c_str(), part == 0 ? "paths" : "tree-rs", static_cast<long long>(n), i + 1, groups);
                        std::fflush(stderr);
                    };
                auto sw = run_sweep(spec);
                if (!sw) {
                    if (sw.error().code == ErrorCode::kRangeOverflow || sw.error().code == ErrorCode::kNonFinite) {
                        // ds-int<b> refuses inputs beyond binary16 (docs/DECISIONS.md D3): reported, not run.
                        res.refusals.push_back({f.name(), dist, sw.error().message});
                        refused = true;
                        break;
                    }
                    return sw.error();
                }
                for (const auto& r : sw->runs) res.runs.push_back(to_run(r, dist, cfg.seed));
                for (const auto& fit : sw->fits)
                    res.fits.push_back({path_info(fit.path).name, f.name(), dist, fit.exponent, fit.points});
            }
            ++done;
            if (opt.progress && !opt.progress_tty) {
                bool holds = true;
                for (size_t i = runs_before; i < res.runs.size(); ++i) holds = holds && res.runs[i].bound_holds && res.runs[i].k_mismatches == 0;
                const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - g0).count();
                std::fprintf(stderr, "qtransit check: [%zu/%zu] %s %s: %s, %.1f s\n", done, total, f.name().c_str(), dist.c_str(),
                             refused ? "input refused (binary16 range)"
                                     : (std::to_string(res.runs.size() - runs_before) + " runs, " +
                                        (holds ? "bounds and k hold" : "FAILURES")).c_str(),
                             s);
            }
        }
    }
    if (opt.progress && opt.progress_tty) std::fprintf(stderr, "\r%100s\r", "");

    // ---- verdicts: kernels -----------------------------------------------------------------------
    for (const auto& f : cfg.formats) {
        int checked = 0, refused = 0;
        std::string bad;
        double worst = 0;
        for (const auto& c : res.format_checks) {
            if (c.format != f.name()) continue;
            if (!c.refused.empty()) {
                ++refused;
                continue;
            }
            ++checked;
            worst = std::max(worst, c.max_error_to_bound);
            if (bad.empty() && !c.cpu_matches_reference) bad = c.dist + ": kernel differs from the reference: " + c.cpu_mismatch;
            if (bad.empty() && !c.bound_holds) bad = c.dist + ": an element's error exceeds its bound";
        }
        const std::string extra = refused ? " (" + std::to_string(refused) + " distribution(s) refused: beyond binary16)" : "";
        res.verdicts.push_back(verdict("kernel-vs-reference/" + f.name(), bad.empty(),
                                       bad.empty() ? "CPU kernel equals the reference bit for bit (scales, offsets, codes, decoded) on " +
                                                         std::to_string(checked) + " distribution(s); largest error/bound " + g4(worst) + extra
                                                   : bad));
        if (res.gpu_available) {
            std::string gbad;
            for (const auto& c : res.format_checks)
                if (c.format == f.name() && c.refused.empty() && c.gpu != "match" && gbad.empty()) gbad = c.dist + ": " + c.gpu;
            res.verdicts.push_back(verdict("kernel-vs-reference-gpu/" + f.name(), gbad.empty(),
                                           gbad.empty() ? "GPU kernel equals the CPU kernel (and so the reference) bit for bit" : gbad));
        }
    }
    if (!res.gpu_available) {
        Verdict v;
        v.name = v.category = "kernel-vs-reference-gpu";
        v.status = VerdictStatus::kSkip;
        v.message = cfg.gpu ? "no GPU answered: " + kernels::gpu::query_devices().note : "gate.gpu = false";
        res.verdicts.push_back(v);
    }

    // ---- verdicts: bounds and k per (format, path) -----------------------------------------------
    for (const auto& f : cfg.formats) {
        for (auto p : cfg.paths) {
            const std::string pn = path_info(p).name, suffix = f.name() + "/" + pn;
            int runs = 0;
            int64_t outputs = 0, kpairs = 0;
            double worst = 0;
            int32_t kmin = INT32_MAX, kmax = 0;
            std::string bad, kbad;
            for (const auto& r : res.runs) {
                if (r.path != pn || r.format != f.name()) continue;
                ++runs;
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
                    kbad = run_label(r) + ": " + std::to_string(r.k_mismatches) + " (row, contributor) pair(s) with k other than "
                           "NUMERICS.md section 3 says; first: " + r.first_k_mismatch;
            }
            if (runs == 0) continue;  // refused for every distribution
            res.verdicts.push_back(verdict("bounds/" + suffix, bad.empty(),
                                           bad.empty() ? "|error| <= a_posteriori <= a_priori on all " + std::to_string(outputs) +
                                                             " outputs of " + std::to_string(runs) + " runs; largest |error|/a_posteriori " + g4(worst)
                                                       : bad));
            res.verdicts.push_back(verdict("k/" + suffix, kbad.empty(),
                                           kbad.empty() ? "k of all " + std::to_string(kpairs) + " (output row, contributor) pairs as NUMERICS.md "
                                                          "section 3 says; k in " + std::to_string(kmin) + ".." + std::to_string(kmax)
                                                        : kbad));
        }
    }

    // ---- verdicts: scaling -----------------------------------------------------------------------
    for (const auto& rule : cfg.scaling) {
        if (std::find(cfg.paths.begin(), cfg.paths.end(), rule.path) == cfg.paths.end()) continue;
        const auto& formats = rule.formats.empty() ? cfg.formats : rule.formats;
        const auto& dists = rule.dists.empty() ? cfg.dists : rule.dists;
        for (const auto& f : formats) {
            if (std::find(cfg.formats.begin(), cfg.formats.end(), f) == cfg.formats.end()) continue;
            for (auto d : dists) {
                if (std::find(cfg.dists.begin(), cfg.dists.end(), d) == cfg.dists.end()) continue;
                const std::string name = std::string("scaling/") + f.name() + "/" + path_info(rule.path).name + "/" + kernels::to_string(d);
                const reports::GateFit* fit = nullptr;
                for (const auto& x : res.fits)
                    if (x.path == path_info(rule.path).name && x.format == f.name() && x.dist == kernels::to_string(d)) fit = &x;
                bool refused = false;
                for (const auto& x : res.refusals) refused = refused || (x.format == f.name() && x.dist == kernels::to_string(d));
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
                    v.limit = ok ? rule.max : (fit->exponent < rule.min ? rule.min : rule.max);
                }
                res.verdicts.push_back(v);
            }
        }
    }

    // ---- verdicts: budgets -----------------------------------------------------------------------
    for (const auto& b : cfg.budgets) {
        double worst = -1;
        const GateRun* at = nullptr;
        for (const auto& r : res.runs) {
            if (r.path != path_info(b.path).name || r.format != b.format.name()) continue;
            if (!b.dist.empty() && r.dist != b.dist) continue;
            if (b.ranks != 0 && r.ranks != b.ranks) continue;
            const double m = metric_of(r, b.metric);
            if (!at || !(m <= worst)) {
                worst = m;
                at = &r;
            }
        }
        const std::string what = b.metric + " of " + path_info(b.path).name + " with " + b.format.name() +
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
        res.verdicts.push_back(v);
    }

    // ---- verdicts: baseline ----------------------------------------------------------------------
    if (opt.baseline) {
        std::map<std::string, const GateRun*> base;
        for (const auto& r : *opt.baseline) base[r.key()] = &r;
        for (const auto& m : cfg.baseline_metrics) {
            for (const auto& f : cfg.formats) {
                for (auto p : cfg.paths) {
                    const std::string pn = path_info(p).name;
                    int matched = 0, missing = 0;
                    double worst_ratio = 0;
                    std::string bad;
                    for (const auto& r : res.runs) {
                        if (r.path != pn || r.format != f.name()) continue;
                        auto it = base.find(r.key());
                        if (it == base.end()) {
                            ++missing;
                            continue;
                        }
                        ++matched;
                        const double now = metric_of(r, m), was = metric_of(*it->second, m);
                        if (!std::isfinite(was)) continue;  // null in the baseline: nothing to compare
                        const double ratio = was > 0 ? now / was : (now > 0 ? INFINITY : 1.0);
                        worst_ratio = std::max(worst_ratio, ratio);
                        if (bad.empty() && (!std::isfinite(now) || now > was * (1 + cfg.baseline_margin)))
                            bad = run_label(r) + ": " + m + " " + g4(now) + " against " + g4(was) + " in the baseline (more than " +
                                  g4(cfg.baseline_margin * 100) + "% worse)";
                    }
                    const std::string name = "baseline/" + m + "/" + f.name() + "/" + pn;
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
                    }
                    res.verdicts.push_back(v);
                }
            }
        }
    }

    res.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return res;
}

}  // namespace qtransit::cli
