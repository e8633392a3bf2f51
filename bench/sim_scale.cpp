// The ZeRO++ scale run of issue 3: ring-rs, a2a-rs and a2a-hier-rs on 384 ranks (48 nodes of 8)
// with 1 Mi elements per rank (M = 384 * 2731 = 1,048,704, the multiple of N nearest 2^20), inputs
// from the counter-based generator, every output checked exactly (error, a-posteriori and a-priori
// bounds). Reports wall time and peak memory, next to a baseline measured in the same run:
// generating the same N x M inputs and summing them naively in binary32 (the least any simulation
// of this size must do). Peak memory is also measured at N = 48 to show it does not grow with N x M.
//
//   sim_scale [ranks=384] [elements=1048704] [format=int4] [threads=0]
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "qtransit/collectives/paths.hpp"
#include "qtransit/reference/checker.hpp"

namespace qt = qtransit;

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
long peak_rss_kib() {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return u.ru_maxrss;
}

// Baseline: generate every input once and sum each column naively (binary32, rank order).
double baseline_seconds(int64_t n, int64_t m, int threads) {
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> pool;
    std::vector<double> sink(static_cast<size_t>(threads));
    for (int t = 0; t < threads; ++t) {
        pool.emplace_back([&, t] {
            std::vector<float> acc(4096), buf(4096);
            double s = 0;
            for (int64_t first = t * 4096; first < m; first += threads * 4096) {
                const int64_t len = std::min<int64_t>(4096, m - first);
                std::fill(acc.begin(), acc.end(), 0.0f);
                for (int64_t r = 0; r < n; ++r) {
                    qt::kernels::generate_span(qt::kernels::Distribution::kNormal, 1, static_cast<uint32_t>(r),
                                               static_cast<uint64_t>(first), std::span<float>(buf.data(), static_cast<size_t>(len)));
                    for (int64_t i = 0; i < len; ++i) acc[static_cast<size_t>(i)] += buf[static_cast<size_t>(i)];
                }
                s += acc[0];
            }
            sink[static_cast<size_t>(t)] = s;
        });
    }
    for (auto& th : pool) th.join();
    return seconds_since(t0);
}

struct Outcome {
    double seconds;
    long peak_kib;
    bool holds;
};

Outcome run(int64_t n, int64_t m, const char* format, int threads, bool print) {
    std::vector<qt::PathConfig> paths;
    for (auto k : {qt::PathKind::kRingRs, qt::PathKind::kA2aRs, qt::PathKind::kA2aHierRs}) {
        qt::PathConfig c;
        c.path = k;
        c.format = *qt::parse_format(format);
        c.ranks = n;
        c.ranks_per_node = qtransit::kDefaultRanksPerNode;
        c.elements = m;
        paths.push_back(c);
    }
    qt::collectives::GeneratedInputs in(qt::kernels::Distribution::kNormal, 1);
    std::vector<std::vector<qt::reference::PathChecker>> checks(paths.size());
    for (size_t k = 0; k < paths.size(); ++k)
        for (int t = 0; t < threads; ++t) checks[k].emplace_back(paths[k]);
    const auto t0 = std::chrono::steady_clock::now();
    auto totals = qt::collectives::run_paths(paths, in, threads, [&](size_t k, int t, const qt::ColumnRecord& r) {
        checks[k][static_cast<size_t>(t)].add(r);
    });
    const double secs = seconds_since(t0);
    if (!totals) {
        std::fprintf(stderr, "sim_scale: %s\n", totals.error().message.c_str());
        std::exit(2);
    }
    bool holds = true;
    for (size_t k = 0; k < paths.size(); ++k) {
        for (int t = 1; t < threads; ++t) checks[k][0].merge(checks[k][static_cast<size_t>(t)]);
        const auto s = checks[k][0].stats();
        holds = holds && s.bound_holds;
        if (print)
            std::printf("  %-12s k %d..%d  rel RMS %.4g  max|err| %.4g  max a_post %.4g  max a_priori %.4g  bound %s  outputs %lld\n",
                        qt::path_info(paths[k].path).name, s.k_min, s.k_max, s.rel_rms_error(), s.max_abs_error,
                        s.max_a_posteriori, s.max_a_priori, s.bound_holds ? "holds" : "FAILS",
                        static_cast<long long>(s.outputs_checked));
    }
    return {secs, peak_rss_kib(), holds};
}
}  // namespace

int main(int argc, char** argv) {
    const int64_t n = argc > 1 ? std::atoll(argv[1]) : 384;
    const int64_t m = argc > 2 ? std::atoll(argv[2]) : 1048704;
    const char* format = argc > 3 ? argv[3] : "int4";
    int threads = argc > 4 ? std::atoi(argv[4]) : 0;
    if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));

    const long rss0 = peak_rss_kib();
    // Peak RSS only grows, so the smaller runs go first: if the memory depended on N x M, the
    // scale run would raise the peak by the size of its inputs (gigabytes), not by a column.
    const int64_t m_small = std::max<int64_t>(n, (m / 16 / n) * n);
    std::printf("run 1: N = %lld, M = %lld (1/16 of the elements)\n", static_cast<long long>(n), static_cast<long long>(m_small));
    const Outcome tiny = run(n, m_small, format, threads, true);
    std::printf("run 2: N = 48, M = %lld\n", static_cast<long long>(m));
    const Outcome small = run(48, m, format, threads, true);
    std::printf("scale run: ring-rs, a2a-rs, a2a-hier-rs; N = %lld (G = 8), M = %lld per rank, %s, %d threads\n",
                static_cast<long long>(n), static_cast<long long>(m), format, threads);
    const Outcome big = run(n, m, format, threads, true);
    const double base = baseline_seconds(n, m, threads);
    std::printf("time:   %.2f s for the three paths with exact checking; baseline (generate + naive fp32 sum of the "
                "same %lld x %lld inputs) %.2f s; ratio %.2f\n",
                big.seconds, static_cast<long long>(n), static_cast<long long>(m), base, big.seconds / base);
    std::printf("memory: peak RSS %.1f MiB after run 1 (N = %lld, M/16), %.1f MiB after run 2 (N = 48, M), %.1f MiB "
                "after the scale run (N = %lld, M); process start %.1f MiB; the scale run's inputs alone would be %.1f GiB\n",
                tiny.peak_kib / 1024.0, static_cast<long long>(n), small.peak_kib / 1024.0, big.peak_kib / 1024.0,
                static_cast<long long>(n), rss0 / 1024.0, static_cast<double>(n) * static_cast<double>(m) * 4 / (1 << 30));
    return big.holds && small.holds && tiny.holds ? 0 : 1;
}
