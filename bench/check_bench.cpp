// Google Benchmark (issue 16): the exact checking of one output element next to a naive binary32
// sum of its contributions, measured in the same run. One column of a real path (qtransit's own
// schedule on the in-process transport), N contributions per output: the baseline sums them in
// binary32; the checker (reference::PathChecker::add) sums them exactly (SuperAcc), computes the
// a-posteriori and a-priori bounds and compares the error exactly. Compare the items_per_second
// counters (outputs per second) within one run: the ratio naive / checker is the cost of exactness.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "qtransit/collectives/paths.hpp"
#include "qtransit/collectives/transport.hpp"
#include "qtransit/reference/checker.hpp"

namespace qt = qtransit;

namespace {

struct Column {
    qt::PathConfig cfg;
    qt::ColumnRecord rec;
    int64_t outputs = 0;
};

Column make(qt::PathKind path, int64_t n) {
    Column c;
    c.cfg.path = path;
    c.cfg.format = *qt::parse_format("int4");
    c.cfg.ranks = n;
    c.cfg.ranks_per_node = n % 8 == 0 ? 8 : n;
    c.cfg.block = 32;
    c.cfg.elements = n * 32;
    qt::collectives::GeneratedInputs in(qt::kernels::Distribution::kNormal, 1);
    qt::collectives::SimTransport t(n, c.cfg.ranks_per_node, c.cfg.format);
    const auto [first, len] = qt::collectives::column_at(c.cfg, 0);
    if (auto st = qt::collectives::run_column(c.cfg, in, t, first, len, c.rec); !st) std::abort();
    for (const auto& r : c.rec.outputs) c.outputs += static_cast<int64_t>(r.values.size());
    return c;
}

// The baseline: every output's contributions summed in binary32, left to right (one row of sums
// per output row, as the checker computes one exact target per element and compares every row).
// The sums live in a 64-byte-aligned buffer of their own: in a std::vector, where the heap put it
// relative to the contributions changed the rate by up to 1.7x from one build of this program to
// the next (same code, same flags: two builds of 2026-12-03 ran it at 1.8 and 3.1 us per N = 384
// column), and a baseline must not move with the allocator.
void BM_NaiveSum(benchmark::State& st, qt::PathKind path) {
    const Column c = make(path, st.range(0));
    const int64_t len = c.rec.len, rows = c.rec.contribution_rows;
    std::vector<float> sums_buf(static_cast<size_t>(len) + 16);
    float* sums = sums_buf.data();
    while (reinterpret_cast<uintptr_t>(sums) % 64 != 0) ++sums;
    for (auto _ : st) {
        for (size_t r = 0; r < c.rec.outputs.size(); ++r) {
            for (int64_t i = 0; i < len; ++i) sums[static_cast<size_t>(i)] = c.rec.contributions[static_cast<size_t>(i)];
            for (int64_t j = 1; j < rows; ++j)
                for (int64_t i = 0; i < len; ++i) sums[static_cast<size_t>(i)] += c.rec.contributions[static_cast<size_t>(j * len + i)];
            benchmark::DoNotOptimize(sums);
        }
        benchmark::ClobberMemory();
    }
    st.SetItemsProcessed(st.iterations() * c.outputs);
}

void BM_Check(benchmark::State& st, qt::PathKind path) {
    const Column c = make(path, st.range(0));
    qt::reference::PathChecker checker(c.cfg);
    for (auto _ : st) {
        checker.add(c.rec);
        benchmark::ClobberMemory();
    }
    if (!checker.stats().bound_holds) st.SkipWithError("the bound failed");
    st.SetItemsProcessed(st.iterations() * c.outputs);
}

// Two parts of the check, each alone, against the same naive sum: what it cannot go below.
// BM_Scan: the column's scan with its exact int64 sums (each row's absmax, the extremes, the sums
// on the column's own grid: detail::scan_add_scaled, the loop PathChecker::add runs with its events
// inside). BM_APriori: the a-priori bound from the rows' absmax (a_priori_bound); for a2a-rs,
// two-shot-ar and the rings a fold of dependent roundings over the N ranks, whose order, and so
// whose bits, the report fixes.
void BM_Scan(benchmark::State& st, qt::PathKind path) {
    const Column c = make(path, st.range(0));
    const size_t rows = static_cast<size_t>(c.rec.contribution_rows), len = static_cast<size_t>(c.rec.len);
    std::vector<double> absmax(rows);
    const auto cs = qt::reference::detail::scan_column(c.rec.contributions.data(), rows, len, absmax.data());
    const int grid = cs.lo < 0x7F800000u ? std::max(static_cast<int>(cs.lo >> 23), 1) - 150 : 0;  // the smallest ulp
    std::vector<int64_t> t(len);
    bool summed = false;
    for (auto _ : st) {
        std::fill(t.begin(), t.end(), 0);
        benchmark::DoNotOptimize(qt::reference::detail::scan_add_scaled(c.rec.contributions.data(), rows, len,
                                                                        absmax.data(), grid, t.data(), summed));
        benchmark::ClobberMemory();
    }
    if (!summed) st.SkipWithError("the column's sums are not exact on its grid");
    st.SetItemsProcessed(st.iterations() * c.outputs);
}

void BM_APriori(benchmark::State& st, qt::PathKind path) {
    const Column c = make(path, st.range(0));
    const size_t rows = static_cast<size_t>(c.rec.contribution_rows), len = static_cast<size_t>(c.rec.len);
    std::vector<double> absmax(rows);
    qt::reference::detail::scan_column(c.rec.contributions.data(), rows, len, absmax.data());
    for (auto _ : st) {
        benchmark::DoNotOptimize(qt::reference::a_priori_bound(c.cfg, c.rec.first, 0, absmax));
        benchmark::ClobberMemory();
    }
    st.SetItemsProcessed(st.iterations() * c.outputs);
}

// The simulation of the same column (the schedule on the in-process transport, its ledger
// recorded), from inputs generated once as the gate reads them (GeneratedTable): what the gate
// spends next to the check, per output, against the same naive sum.
void BM_Simulate(benchmark::State& st, qt::PathKind path) {
    const Column c = make(path, st.range(0));
    const qt::collectives::GeneratedTable in(qt::kernels::Distribution::kNormal, 1, c.cfg.ranks, c.cfg.elements);
    qt::collectives::SimTransport t(c.cfg.ranks, c.cfg.ranks_per_node, c.cfg.format);
    const auto [first, len] = qt::collectives::column_at(c.cfg, 0);
    qt::ColumnRecord rec;
    for (auto _ : st) {
        if (auto s = qt::collectives::run_column(c.cfg, in, t, first, len, rec); !s) std::abort();
        benchmark::ClobberMemory();
    }
    st.SetItemsProcessed(st.iterations() * c.outputs);
}

}  // namespace

BENCHMARK_CAPTURE(BM_Simulate, a2a_rs, qt::PathKind::kA2aRs)->Arg(64)->Arg(384);
BENCHMARK_CAPTURE(BM_Simulate, ring_rs, qt::PathKind::kRingRs)->Arg(64)->Arg(384);
BENCHMARK_CAPTURE(BM_Simulate, two_shot_ar, qt::PathKind::kTwoShotAr)->Arg(64)->Arg(384);
BENCHMARK_CAPTURE(BM_Simulate, ring_ag, qt::PathKind::kRingAg)->Arg(64)->Arg(384);
BENCHMARK_CAPTURE(BM_NaiveSum, a2a_rs, qt::PathKind::kA2aRs)->Arg(8)->Arg(64)->Arg(384);
BENCHMARK_CAPTURE(BM_Check, a2a_rs, qt::PathKind::kA2aRs)->Arg(8)->Arg(64)->Arg(384);
BENCHMARK_CAPTURE(BM_NaiveSum, ring_rs, qt::PathKind::kRingRs)->Arg(8)->Arg(64)->Arg(384);
BENCHMARK_CAPTURE(BM_Check, ring_rs, qt::PathKind::kRingRs)->Arg(8)->Arg(64)->Arg(384);
BENCHMARK_CAPTURE(BM_NaiveSum, two_shot_ar, qt::PathKind::kTwoShotAr)->Arg(8)->Arg(64)->Arg(384);
BENCHMARK_CAPTURE(BM_Check, two_shot_ar, qt::PathKind::kTwoShotAr)->Arg(8)->Arg(64)->Arg(384);
BENCHMARK_CAPTURE(BM_Scan, a2a_rs, qt::PathKind::kA2aRs)->Arg(384);
BENCHMARK_CAPTURE(BM_APriori, a2a_rs, qt::PathKind::kA2aRs)->Arg(384);
BENCHMARK_CAPTURE(BM_Scan, ring_rs, qt::PathKind::kRingRs)->Arg(384);
BENCHMARK_CAPTURE(BM_APriori, ring_rs, qt::PathKind::kRingRs)->Arg(384);
BENCHMARK_CAPTURE(BM_NaiveSum, ring_ag, qt::PathKind::kRingAg)->Arg(8)->Arg(64)->Arg(384);
BENCHMARK_CAPTURE(BM_Check, ring_ag, qt::PathKind::kRingAg)->Arg(8)->Arg(64)->Arg(384);

BENCHMARK_MAIN();
