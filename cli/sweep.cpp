#include "sweep.hpp"

#include <algorithm>
#include <cmath>
#include <memory>
#include <mutex>
#include <thread>

#include "qtransit/collectives/paths.hpp"

namespace qtransit::cli {
namespace {

// The busiest rank's count (paths are symmetric but for the owner-heavy gathers).
double max_of(const std::vector<int64_t>& v) {
    int64_t m = 0;
    for (int64_t x : v) m = std::max(m, x);
    return static_cast<double>(m);
}

}  // namespace

int64_t default_ranks_per_node(int64_t n) { return n % 8 == 0 ? 8 : n; }

Result<SweepResult> run_sweep(const SweepSpec& spec) {
    std::vector<std::vector<PathConfig>> groups;  // per N: the paths run together on shared inputs
    for (int64_t n : spec.ranks) {
        std::vector<PathConfig> g;
        for (PathKind p : spec.paths) {
            PathConfig c;
            c.path = p;
            c.format = spec.format;
            c.block = spec.block;
            c.ranks = n;
            c.ranks_per_node = spec.ranks_per_node > 0 ? spec.ranks_per_node : default_ranks_per_node(n);
            c.elements = spec.elements;
            c.accum = spec.accum;
            if (auto st = validate(c); !st)
                return make_error(st.error().code, std::string(path_info(p).name) + ": " + st.error().message);
            g.push_back(c);
        }
        groups.push_back(std::move(g));
    }
    const int threads = spec.backend != collectives::Backend::kCpu
                            ? 1  // run_paths runs a device backend on one thread
                            : (spec.threads > 0 ? spec.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));

    SweepResult out;
    for (size_t gi = 0; gi < groups.size(); ++gi) {
        const auto& g = groups[gi];
        const int64_t n = g.front().ranks;
        if (spec.on_group) spec.on_group(gi, groups.size(), n);
        std::unique_ptr<collectives::Inputs> inputs;
        if (spec.file) inputs = std::make_unique<collectives::ArrayInputs>(spec.file->data, spec.elements);
        else inputs = std::make_unique<collectives::GeneratedInputs>(spec.dist, spec.seed);

        std::vector<std::vector<reference::PathChecker>> checkers(g.size());
        for (size_t k = 0; k < g.size(); ++k)
            for (int t = 0; t < threads; ++t) checkers[k].emplace_back(g[k]);
        int64_t dump_cols = 0;
        if (spec.dump) {
            dump_cols = path_info(g[0].path).shape == PathShape::kReduceScatter ? g[0].shard() : spec.elements;
            spec.dump->assign(static_cast<size_t>(n * dump_cols), 0.0f);
            if (spec.dump_shape) *spec.dump_shape = {n, dump_cols};
        }
        std::mutex dump_mu;
        std::vector<std::vector<std::pair<int64_t, int64_t>>> kcount(  // per path, per thread: (checked, wrong)
            g.size(), std::vector<std::pair<int64_t, int64_t>>(static_cast<size_t>(threads)));
        std::vector<std::string> kfirst(g.size());
        auto sink = [&](size_t k, int tid, const ColumnRecord& rec) {
            checkers[k][static_cast<size_t>(tid)].add(rec);
            if (spec.check_k) {
                auto& kc = kcount[k][static_cast<size_t>(tid)];
                // Reduce paths: every rank contributes. Gather paths: the owners of the column's
                // elements do (hpz's columns can straddle two shards); every other rank has k = 0.
                const bool gather = path_info(g[k].path).shape == PathShape::kAllGather;
                std::vector<bool> owner(static_cast<size_t>(n), !gather);
                if (gather)
                    for (int64_t e = 0; e < rec.len; ++e) owner[static_cast<size_t>((rec.first + e) / g[k].shard())] = true;
                for (const auto& row : rec.outputs) {
                    const auto got = contribution_k(rec, row, n);
                    for (int64_t j = 0; j < n; ++j) {
                        const int32_t want = owner[static_cast<size_t>(j)] ? expected_k(g[k], rec.first, row.rank, j) : 0;
                        ++kc.first;
                        if (got[static_cast<size_t>(j)] == want) continue;
                        if (kc.second++ == 0) {
                            std::lock_guard<std::mutex> lock(dump_mu);
                            if (kfirst[k].empty())
                                kfirst[k] = "column " + std::to_string(rec.first) + " holder " + std::to_string(row.rank) +
                                            " contributor " + std::to_string(j) + ": k " + std::to_string(got[static_cast<size_t>(j)]) +
                                            ", expected " + std::to_string(want);
                        }
                    }
                }
            }
            if (!spec.dump) return;
            std::lock_guard<std::mutex> lock(dump_mu);
            const bool rs = path_info(g[k].path).shape == PathShape::kReduceScatter;
            for (const auto& row : rec.outputs) {
                const int64_t col0 = rs ? rec.first - row.rank * g[k].shard() : rec.first;
                std::copy(row.values.begin(), row.values.end(),
                          spec.dump->begin() + static_cast<std::ptrdiff_t>(row.rank * dump_cols + col0));
            }
        };
        auto totals = collectives::run_paths(g, *inputs, threads, sink, spec.backend);
        if (!totals) return totals.error();
        for (size_t k = 0; k < g.size(); ++k) {
            RunRow r;
            r.config = g[k];
            reference::PathChecker all(g[k]);
            for (auto& c : checkers[k]) all.merge(c);
            r.stats = all.stats();
            const auto& b = totals->bytes[k];
            r.bytes_per_rank = max_of(b.sent);
            r.cross_node_bytes_per_rank = max_of(b.cross_node);
            r.fp16_path_bytes_per_rank = max_of(b.fp16_equiv);
            r.fp16_ring_rs = static_cast<double>((n - 1) * g[k].shard() * 2);
            for (const auto& [checked, wrong] : kcount[k]) {
                r.k_checked += checked;
                r.k_mismatches += wrong;
            }
            r.first_k_mismatch = kfirst[k];
            out.runs.push_back(std::move(r));
        }
    }

    for (PathKind p : spec.paths) {
        FitRow f{p, 0, {}};
        std::vector<double> ns, errs;
        for (const auto& r : out.runs) {
            const double e = r.stats.rel_rms_error();
            if (r.config.path != p || !(e > 0) || !std::isfinite(e)) continue;
            ns.push_back(static_cast<double>(r.config.ranks));
            errs.push_back(e);
            f.points.emplace_back(r.config.ranks, e);
        }
        if (ns.size() < 2) continue;
        f.exponent = reference::fit_exponent(ns, errs);
        out.fits.push_back(std::move(f));
    }
    return out;
}

nlohmann::json run_json(const RunRow& r, const std::string& dist, uint64_t seed) {
    const auto& s = r.stats;
    nlohmann::json j{{"path", path_info(r.config.path).name},
                     {"ranks", r.config.ranks},
                     {"ranks_per_node", r.config.ranks_per_node},
                     {"elements", r.config.elements},
                     {"format", r.config.format.name()},
                     {"block", r.config.block},
                     {"accum", to_string(r.config.accum)},
                     {"dist", dist},
                     {"seed", seed},
                     {"k_min", s.k_min},
                     {"k_max", s.k_max},
                     {"max_abs_error", s.max_abs_error},
                     {"rms_error", s.outputs_checked ? std::sqrt(s.sum_sq_error / static_cast<double>(s.outputs_checked)) : 0.0},
                     {"rel_rms_error", s.rel_rms_error()},
                     {"max_a_posteriori", s.max_a_posteriori},
                     {"max_a_priori", s.max_a_priori},
                     {"max_error_to_a_posteriori", s.max_error_to_a_posteriori},
                     {"bound_holds", s.bound_holds},
                     {"violations", s.violations},
                     {"nonfinite_outputs", s.nonfinite_outputs},
                     {"outputs_checked", s.outputs_checked},
                     {"bytes_per_rank", r.bytes_per_rank},
                     {"cross_node_bytes_per_rank", r.cross_node_bytes_per_rank},
                     {"fp16_bytes_per_rank", r.fp16_path_bytes_per_rank},
                     {"fp16_ring_rs_bytes_per_rank", r.fp16_ring_rs}};
    if (!s.first_violation.empty()) j["first_violation"] = s.first_violation;
    // JSON has no inf or NaN: an unbounded a-priori bound (fp16 accumulation that can overflow) or
    // an error that overflowed is null.
    for (const char* k : {"max_a_priori", "max_abs_error", "max_a_posteriori", "rel_rms_error", "rms_error"})
        if (!std::isfinite(j[k].get<double>())) j[k] = nullptr;
    return j;
}

nlohmann::json fit_json(const FitRow& f) {
    nlohmann::json pts = nlohmann::json::array();
    for (const auto& [n, e] : f.points) pts.push_back({{"ranks", n}, {"rel_rms_error", e}});
    return {{"path", path_info(f.path).name}, {"exponent", f.exponent}, {"points", pts}};
}

}  // namespace qtransit::cli
