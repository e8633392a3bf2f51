// `qtransit simulate`: run collective paths on the in-process transport, one column at a time,
// check every output element exactly (error, a-posteriori and a-priori bounds), and report per run,
// with a fitted exponent of the relative RMS error against N for every path run at several N.
#include <cmath>
#include <cstdio>
#include <mutex>
#include <nlohmann/json.hpp>
#include <numeric>
#include <thread>
#include <unistd.h>

#include "commands.hpp"
#include "qtransit/collectives/paths.hpp"
#include "qtransit/kernels/npy.hpp"
#include "qtransit/reference/checker.hpp"
#include "qtransit/reports/numbers.hpp"

namespace qtransit::cli {
namespace {

struct RunRow {
    PathConfig config;
    reference::PathStats stats;
    double bytes_per_rank = 0, cross_node_bytes_per_rank = 0, fp16_path_bytes_per_rank = 0, fp16_ring_rs = 0;
};

int64_t default_ranks_per_node(int64_t n) { return n % 8 == 0 ? 8 : n; }

// The busiest rank's count (paths are symmetric but for the owner-heavy gathers).
double max_of(const std::vector<int64_t>& v) {
    int64_t m = 0;
    for (int64_t x : v) m = std::max(m, x);
    return static_cast<double>(m);
}

nlohmann::json run_json(const RunRow& r, const SimulateArgs& a) {
    const auto& s = r.stats;
    nlohmann::json j{{"path", path_info(r.config.path).name},
                     {"ranks", r.config.ranks},
                     {"ranks_per_node", r.config.ranks_per_node},
                     {"elements", r.config.elements},
                     {"format", r.config.format.name()},
                     {"block", r.config.block},
                     {"accum", to_string(r.config.accum)},
                     {"dist", a.in.empty() ? a.dist : std::string("file:") + a.in},
                     {"seed", a.seed},
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
    // JSON has no inf: an unbounded a-priori bound (fp16 accumulation that can overflow) is null.
    if (!std::isfinite(s.max_a_priori)) j["max_a_priori"] = nullptr;
    if (!std::isfinite(s.max_abs_error)) j["max_abs_error"] = nullptr;
    return j;
}

}  // namespace

int run_simulate(const SimulateArgs& a) {
    // ---- parse and validate everything before any work -------------------------------------------
    std::vector<PathKind> paths;
    for (const auto& name : a.paths) {
        if (name == "all") {
            for (const auto& p : all_paths()) paths.push_back(p.kind);
            continue;
        }
        auto p = parse_path(name);
        if (!p) return fail(p.error());
        paths.push_back(*p);
    }
    auto format = parse_format(a.format);
    if (!format) return fail(format.error());
    auto accum = parse_accum(a.accum);
    if (!accum) return fail(accum.error());
    auto dist = kernels::parse_distribution(a.dist);
    if (!dist) return fail(dist.error());

    std::vector<int64_t> ranks = a.ranks;
    kernels::NpyArray file;
    if (!a.in.empty()) {
        auto arr = kernels::read_npy(a.in);
        if (!arr) return fail(arr.error());
        file = std::move(*arr);
        if (file.shape.size() != 2)
            return fail(a.in + ": expected a 2-d array [N, M] (one row per rank), got " +
                        std::to_string(file.shape.size()) + " dimensions");
        if (ranks.empty()) ranks = {file.shape[0]};
        if (ranks.size() != 1 || ranks[0] != file.shape[0])
            return fail(a.in + ": has " + std::to_string(file.shape[0]) + " rows but --ranks asks for " +
                        std::to_string(ranks[0]) + (ranks.size() > 1 ? " (and more): --in takes one N" : ""));
        if (a.elements != 0 && a.elements != file.shape[1])
            return fail(a.in + ": has " + std::to_string(file.shape[1]) + " elements per rank but --elements is " +
                        std::to_string(a.elements));
    }
    if (ranks.empty()) return fail("--ranks is required (or --in with a [N, M] array)");
    const int64_t elements = a.elements != 0 ? a.elements : (a.in.empty() ? 0 : file.shape[1]);
    if (elements == 0) return fail("--elements is required (elements per rank)");
    if (!a.dump.empty() && (paths.size() != 1 || ranks.size() != 1))
        return fail("--dump writes one run: give exactly one --path and one --ranks");

    std::vector<std::vector<PathConfig>> groups;  // per N: the paths run together on shared inputs
    for (int64_t n : ranks) {
        std::vector<PathConfig> g;
        for (PathKind p : paths) {
            PathConfig c;
            c.path = p;
            c.format = *format;
            c.block = a.block;
            c.ranks = n;
            c.ranks_per_node = a.ranks_per_node > 0 ? a.ranks_per_node : default_ranks_per_node(n);
            c.elements = elements;
            c.accum = *accum;
            if (auto st = validate(c); !st) return fail(std::string(path_info(p).name) + ": " + st.error().message);
            g.push_back(c);
        }
        groups.push_back(std::move(g));
    }

    const int threads = a.threads > 0 ? a.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    const bool tty = isatty(fileno(stderr)) != 0;
    std::vector<RunRow> rows;
    std::vector<float> dump;  // [N, S] or [N, M]
    int64_t dump_cols = 0;
    for (size_t gi = 0; gi < groups.size(); ++gi) {
        const auto& g = groups[gi];
        const int64_t n = g.front().ranks;
        if (tty) std::fprintf(stderr, "\r[%zu/%zu] N=%lld: %zu path(s)...   ", gi + 1, groups.size(),
                              static_cast<long long>(n), g.size());
        std::unique_ptr<collectives::Inputs> inputs;
        if (!a.in.empty()) inputs = std::make_unique<collectives::ArrayInputs>(file.data, elements);
        else inputs = std::make_unique<collectives::GeneratedInputs>(*dist, a.seed);

        std::vector<std::vector<reference::PathChecker>> checkers(g.size());
        for (size_t k = 0; k < g.size(); ++k)
            for (int t = 0; t < threads; ++t) checkers[k].emplace_back(g[k]);
        if (!a.dump.empty()) {
            const bool rs = path_info(g[0].path).shape == PathShape::kReduceScatter;
            dump_cols = rs ? g[0].shard() : elements;
            dump.assign(static_cast<size_t>(n * dump_cols), 0.0f);
        }
        std::mutex dump_mu;
        auto sink = [&](size_t k, int tid, const ColumnRecord& rec) {
            checkers[k][static_cast<size_t>(tid)].add(rec);
            if (a.dump.empty()) return;
            std::lock_guard<std::mutex> lock(dump_mu);
            const bool rs = path_info(g[k].path).shape == PathShape::kReduceScatter;
            for (const auto& row : rec.outputs) {
                const int64_t col0 = rs ? rec.first - row.rank * g[k].shard() : rec.first;
                std::copy(row.values.begin(), row.values.end(),
                          dump.begin() + static_cast<std::ptrdiff_t>(row.rank * dump_cols + col0));
            }
        };
        auto totals = collectives::run_paths(g, *inputs, threads, sink);
        if (!totals) {
            if (tty) std::fprintf(stderr, "\n");
            return fail(totals.error());
        }
        for (size_t k = 0; k < g.size(); ++k) {
            RunRow r{g[k], {}, 0, 0, 0, 0};
            reference::PathChecker all(g[k]);
            for (auto& c : checkers[k]) all.merge(c);
            r.stats = all.stats();
            const auto& b = totals->bytes[k];
            r.bytes_per_rank = max_of(b.sent);
            r.cross_node_bytes_per_rank = max_of(b.cross_node);
            r.fp16_path_bytes_per_rank = max_of(b.fp16_equiv);
            r.fp16_ring_rs = static_cast<double>((n - 1) * g[k].shard() * 2);  // the ZeRO baseline
            rows.push_back(std::move(r));
        }
    }
    if (tty) std::fprintf(stderr, "\r%60s\r", "");

    if (!a.dump.empty()) {
        const std::vector<int64_t> shape{rows.front().config.ranks, dump_cols};
        if (auto st = kernels::write_npy(a.dump, dump, shape); !st) return fail(st.error());
    }

    // ---- fits: least squares of log rel_rms_error on log N, per path run at two or more N -------------
    nlohmann::json fits = nlohmann::json::array();
    std::vector<std::pair<std::string, double>> fit_rows;
    for (PathKind p : paths) {
        std::vector<double> ns, errs;
        nlohmann::json points = nlohmann::json::array();
        for (const auto& r : rows) {
            if (r.config.path != p || !(r.stats.rel_rms_error() > 0) || !std::isfinite(r.stats.rel_rms_error())) continue;
            ns.push_back(static_cast<double>(r.config.ranks));
            errs.push_back(r.stats.rel_rms_error());
            points.push_back({{"ranks", r.config.ranks}, {"rel_rms_error", r.stats.rel_rms_error()}});
        }
        if (ns.size() < 2) continue;
        const double e = reference::fit_exponent(ns, errs);
        fits.push_back({{"path", path_info(p).name}, {"exponent", e}, {"points", points}});
        fit_rows.emplace_back(path_info(p).name, e);
    }

    bool all_hold = true;
    for (const auto& r : rows) all_hold = all_hold && r.stats.bound_holds;
    if (a.json) {
        nlohmann::json runs = nlohmann::json::array();
        for (const auto& r : rows) runs.push_back(run_json(r, a));
        std::printf("%s\n", nlohmann::json{{"runs", runs}, {"fits", fits}}.dump(2).c_str());
    } else {
        std::printf("%-16s %5s %3s %5s %11s %11s %11s %11s %6s %12s %12s %12s\n", "path", "N", "G", "k", "max|err|",
                    "relRMS", "max a_post", "max a_prio", "bound", "bytes/rank", "cross-node", "fp16 RS");
        for (const auto& r : rows) {
            const auto& s = r.stats;
            const std::string k = std::to_string(s.k_min) + (s.k_min == s.k_max ? "" : ".." + std::to_string(s.k_max));
            std::printf("%-16s %5lld %3lld %5s %11.4g %11.4g %11.4g %11.4g %6s %12.0f %12.0f %12.0f\n",
                        path_info(r.config.path).name, static_cast<long long>(r.config.ranks),
                        static_cast<long long>(r.config.ranks_per_node), k.c_str(), s.max_abs_error, s.rel_rms_error(),
                        s.max_a_posteriori, s.max_a_priori, s.bound_holds ? "holds" : "FAILS", r.bytes_per_rank,
                        r.cross_node_bytes_per_rank, r.fp16_ring_rs);
        }
        for (const auto& [name, e] : fit_rows)
            std::printf("fit %-16s relative RMS error ~ N^%.3f\n", name.c_str(), e);
        std::printf("(%s, block %lld, %lld elements per rank, %s inputs, %s accumulation; bytes: busiest rank's payload)\n",
                    format->name().c_str(), static_cast<long long>(a.block), static_cast<long long>(elements),
                    a.in.empty() ? a.dist.c_str() : a.in.c_str(), to_string(*accum));
    }
    for (const auto& r : rows)
        if (!r.stats.bound_holds)
            std::fprintf(stderr, "qtransit: %s N=%lld: bound violated: %s\n", path_info(r.config.path).name,
                         static_cast<long long>(r.config.ranks), r.stats.first_violation.c_str());
    return all_hold ? kExitOk : kExitCheckFailed;
}

}  // namespace qtransit::cli
