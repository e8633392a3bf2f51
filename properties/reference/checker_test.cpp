// Unit tests of SuperAcc and the path checker: hand-made ColumnRecords whose errors and bounds are
// known (one int8 ring hop with N = 2, a ring-ag-requant gather), detection of tampered values and
// ledgers, non-finite outputs, merge, fit_exponent, the column scan's and int64 sum's AVX-512 and
// portable loops against plain ones, and the checker's speed on a 384-rank ring-rs column.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "qtransit/reference/checker.hpp"
#include "qtransit/reference/exact.hpp"
#include "qtransit/reference/formats.hpp"
#include "qtransit/reference/paths.hpp"
#include "qtransit/reference/superacc.hpp"
#include "reference/checker_sim.hpp"

namespace qtransit::reference {
namespace {

constexpr double kU = 0x1p-24;

// ---- a column's scan and its int64 sum (column_scan.cpp) -----------------------------------------

// Random rows x n columns mixing normal values, zeros of both signs, subnormals, the largest finite,
// infinities and NaNs (several payloads): the AVX-512 loops (where the CPU has them) and the portable
// ones against a plain loop written from the header's contract.
TEST(CheckerColumn, ScanAgreesWithAPlainLoopOnBothPaths) {
    std::mt19937 rng(7);
    const float specials[] = {0.0f, -0.0f, 0x1p-149f, -0x1p-140f, 0x1.8p-127f, FLT_MAX, -FLT_MAX,
                              std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                              std::bit_cast<float>(0x7FC00000u), std::bit_cast<float>(0xFF800001u),
                              std::bit_cast<float>(0x7F800001u)};
    std::normal_distribution<float> nd(0.0f, 3.0f);
    int cases = 0;
    for (size_t rows : {size_t{0}, size_t{1}, size_t{3}, size_t{16}, size_t{17}, size_t{40}}) {
        for (size_t n : {size_t{0}, size_t{1}, size_t{5}, size_t{15}, size_t{16}, size_t{17}, size_t{32}, size_t{47}, size_t{70}}) {
            for (int special_rate : {0, 3, 30}) {
                std::vector<float> x(rows * n);
                for (float& v : x) v = static_cast<int>(rng() % 100) < special_rate ? specials[rng() % 12] : nd(rng);
                uint32_t top = 0, num = 0, lo = 0x7F800000u;
                std::vector<double> want(rows, 0.0);
                for (size_t r = 0; r < rows; ++r)
                    for (size_t i = 0; i < n; ++i) {
                        const float v = x[r * n + i];
                        const uint32_t b = std::bit_cast<uint32_t>(v) & 0x7FFFFFFFu;
                        top = std::max(top, b);
                        if (!std::isnan(v)) {
                            num = std::max(num, b);
                            want[r] = std::max(want[r], static_cast<double>(std::fabs(v)));
                        }
                        if (b != 0) lo = std::min(lo, b);
                    }
                for (bool simd : {true, false}) {
                    std::vector<double> got(rows, -1.0);
                    const detail::ColumnScan cs = detail::scan_column(x.data(), rows, n, got.data(), simd);
                    EXPECT_EQ(cs.top, top) << rows << "x" << n << " simd " << simd;
                    EXPECT_EQ(cs.top_number, num) << rows << "x" << n << " simd " << simd;
                    EXPECT_EQ(cs.lo, lo) << rows << "x" << n << " simd " << simd;
                    for (size_t r = 0; r < rows; ++r)
                        EXPECT_EQ(std::bit_cast<uint64_t>(got[r]), std::bit_cast<uint64_t>(want[r])) << rows << "x" << n << " row " << r;
                }
                ++cases;
            }
        }
    }
    EXPECT_EQ(cases, 162);
    if (!detail::column_simd()) GTEST_LOG_(INFO) << "no AVX-512 here: both runs took the portable loops";
}

TEST(CheckerColumn, ScaledSumsAgreeWithAPlainLoopOnBothPaths) {
    std::mt19937 rng(11);
    for (size_t rows : {size_t{1}, size_t{2}, size_t{9}, size_t{384}}) {
        for (size_t n : {size_t{1}, size_t{7}, size_t{31}, size_t{32}, size_t{33}, size_t{64}, size_t{100}}) {
            // Integers times 2^-20 (up = 2^20 makes each an integer), both signs, below 2^40.
            std::vector<float> x(rows * n);
            for (float& v : x) v = std::ldexp(static_cast<float>(static_cast<int32_t>(rng() % (1u << 24)) - (1 << 23)), -20 + static_cast<int>(rng() % 30));
            std::vector<int64_t> want(n, 5);
            for (size_t r = 0; r < rows; ++r)
                for (size_t i = 0; i < n; ++i) want[i] += static_cast<int64_t>(std::ldexp(static_cast<double>(x[r * n + i]), 20));
            for (bool simd : {true, false}) {
                std::vector<int64_t> t(n + 3, 5);  // the 3 past n stay as they are
                detail::add_scaled_rows(x.data(), rows, n, 0x1p20, t.data(), simd);
                for (size_t i = 0; i < n; ++i) EXPECT_EQ(t[i], want[i]) << rows << "x" << n << " simd " << simd << " column " << i;
                for (size_t i = n; i < n + 3; ++i) EXPECT_EQ(t[i], 5) << "written past the row, simd " << simd;
            }
        }
    }
}

// scan_add_scaled: the scan and the int64 sums on a given grid in one pass. Columns of integers times
// 2^-20 spread over a range of binades (and, in some, specials), summed on grids that fit, grids too
// coarse for the smallest value and grids too fine for the largest sum: the scan is scan_column's,
// `summed` is the condition computed here from plain loops, and the sums, when summed, are exact.
TEST(CheckerColumn, ScanAndScaledSumsInOnePass) {
    std::mt19937 rng(13);
    const float specials[] = {0.0f, -0.0f, 0x1p-149f, 0x1.8p-140f, std::numeric_limits<float>::infinity(),
                              std::bit_cast<float>(0x7FC00000u)};
    int summed_cases = 0, refused_cases = 0;
    for (size_t rows : {size_t{0}, size_t{1}, size_t{3}, size_t{17}, size_t{384}}) {
        for (size_t n : {size_t{1}, size_t{5}, size_t{16}, size_t{17}, size_t{31}, size_t{32}, size_t{33}, size_t{70}}) {
            for (int kind = 0; kind < 3; ++kind) {  // 0: plain values, 1: with zeros and subnormals, 2: with inf/NaN
                std::vector<float> x(rows * n);
                for (float& v : x) {
                    v = std::ldexp(static_cast<float>(static_cast<int32_t>(rng() % (1u << 24)) - (1 << 23)), -44 + static_cast<int>(rng() % 40));
                    if (kind > 0 && rng() % 10 == 0) v = specials[rng() % (kind == 1 ? 4 : 6)];
                }
                // The condition from plain loops: finite, every x a multiple of 2^grid, rows * max|x| < 2^(62 + grid).
                bool finite = true;
                float top = 0;
                for (float v : x) {
                    finite = finite && std::isfinite(v);
                    if (std::isfinite(v)) top = std::max(top, std::fabs(v));
                }
                for (int grid : {-170, -80, -70, -67, -60, -50, -40, 0}) {
                    // "a multiple of 2^grid" as the checker reads it: the ulp of every non-zero x,
                    // 2^(max(ilogb x, -126) - 23), is at least 2^grid.
                    bool want = finite;
                    for (float v : x)
                        if (std::isfinite(v) && v != 0) want = want && std::max(std::ilogb(v), -126) - 23 >= grid;
                    if (want && top > 0) {
                        int ex = 0;
                        (void)std::frexp(top, &ex);
                        want = ex + static_cast<int>(std::bit_width(std::max<size_t>(rows, 1))) <= 62 + grid;
                    }
                    std::vector<int64_t> plain(n, 0);
                    if (want)
                        for (size_t r = 0; r < rows; ++r)
                            for (size_t i = 0; i < n; ++i) plain[i] += static_cast<int64_t>(std::ldexp(static_cast<double>(x[r * n + i]), -grid));
                    std::vector<double> absmax_plain(rows, -1.0);
                    const detail::ColumnScan scan = detail::scan_column(x.data(), rows, n, absmax_plain.data(), false);
                    for (bool simd : {true, false}) {
                        std::vector<int64_t> t(n + 3, 0);
                        t[n] = t[n + 1] = t[n + 2] = 5;  // past the row: left as they are
                        std::vector<double> absmax(rows, -1.0);
                        bool summed = !want;
                        const detail::ColumnScan cs = detail::scan_add_scaled(x.data(), rows, n, absmax.data(), grid, t.data(), summed, simd);
                        const std::string at = std::to_string(rows) + "x" + std::to_string(n) + " kind " + std::to_string(kind) +
                                               " grid " + std::to_string(grid) + " simd " + std::to_string(simd);
                        EXPECT_EQ(cs.top, scan.top) << at;
                        EXPECT_EQ(cs.top_number, scan.top_number) << at;
                        EXPECT_EQ(cs.lo, scan.lo) << at;
                        for (size_t r = 0; r < rows; ++r) EXPECT_EQ(std::bit_cast<uint64_t>(absmax[r]), std::bit_cast<uint64_t>(absmax_plain[r])) << at;
                        EXPECT_EQ(summed, want) << at;
                        EXPECT_EQ(detail::grid_fits(cs, rows, grid), want) << at;
                        if (summed) {
                            for (size_t i = 0; i < n; ++i) EXPECT_EQ(t[i], plain[i]) << at << " column " << i;
                            for (float v : x) ASSERT_EQ(std::ldexp(static_cast<double>(v), -grid), std::trunc(std::ldexp(static_cast<double>(v), -grid))) << at;
                        }
                        for (size_t i = n; i < n + 3; ++i) EXPECT_EQ(t[i], 5) << "written past the row: " << at;
                        (want ? summed_cases : refused_cases) += 1;
                    }
                }
            }
        }
    }
    // Both outcomes are exercised, on both paths.
    EXPECT_GT(summed_cases, 100);
    EXPECT_GT(refused_cases, 100);
}

// The checker's sums taken on the previous column's grid (or, when the new column does not fit it,
// again on its own): a column checked after columns of very different magnitudes (so that the grid
// guessed from them is too coarse, too fine, or right) gives the same targets, errors and verdicts
// as when it is checked first. The column has one tampered value, so its first violation (which
// prints the target and the error) is compared too.
// ---- a declared format's element bounds over a block (decl_simd.cpp) ----------------------------

// The AVX-512 lanes against decl_at one element at a time, bit for bit: every declared built-in's
// declaration and those of int<b> and int<b>-asym (an offset), each also with rounding toward zero;
// scales of the format's own blocks, powers of two from 2^-149 up (the exact division), 0 and the
// largest float; elements across and past the range, zeros of both signs, subnormals, the largest
// finite; blocks of 1 to 70 elements (the tails).
TEST(CheckerDecl, BlockBoundsHaveTheScalarBits) {
    if (!detail::column_simd()) GTEST_SKIP() << "no AVX-512 on this CPU: only the scalar loop runs here";
    std::vector<Decl> decls;
    for (const FormatSpec& f : all_builtin_formats()) {
        auto d = declaration_of(f);
        if (!d) continue;
        decls.push_back(*d);
        Decl tz = *d;
        tz.rounding = Rounding::kTowardZero;
        decls.push_back(tz);
    }
    ASSERT_GT(decls.size(), 40u);
    bool saw_offset = false, saw_table = false, saw_int = false, saw_float = false;
    std::mt19937 rng(29);
    std::uniform_real_distribution<double> unit(-1.5, 1.5);
    const float specials[] = {0.0f, -0.0f, 0x1p-149f, -0x1.8p-140f, 0x1p-126f, FLT_MAX, -FLT_MAX, 1.0f, -3.0f};
    int64_t elements = 0, differ_from_zero = 0;
    for (const Decl& d : decls) {
        saw_offset = saw_offset || d.offset_min;
        saw_table = saw_table || d.elem == ElemType::kTable;
        saw_int = saw_int || d.elem == ElemType::kInt;
        saw_float = saw_float || d.elem == ElemType::kFloat;
        const double top = std::max(std::fabs(static_cast<double>(d.vmax)), std::fabs(static_cast<double>(d.vmin)));
        for (int trial = 0; trial < 24; ++trial) {
            const size_t n = trial < 8 ? static_cast<size_t>(trial + 1) : static_cast<size_t>(rng() % 70 + 1);
            // The block's absmax spread over 2^-140 .. 2^120, its scale from it as the format's
            // amplitude maps it (or a power of two, 0, the largest float).
            const double absmax = std::ldexp(1.0 + (rng() % 1000) / 1000.0, static_cast<int>(rng() % 260) - 140);
            float s = static_cast<float>(absmax / std::max(top, 1e-30));
            switch (trial % 6) {
                case 1: s = std::ldexp(1.0f, static_cast<int>(rng() % 250) - 149); break;
                case 2: s = trial == 2 ? 0.0f : FLT_MAX; break;
                default: break;
            }
            std::vector<float> x(n);
            for (float& v : x) {
                v = static_cast<float>(std::clamp(unit(rng) * static_cast<double>(s) * top, -3.0e38, 3.0e38));
                if (rng() % 8 == 0) v = specials[rng() % 9];
            }
            float lo = 0.0f;
            if (d.offset_min && !x.empty()) lo = rng() % 4 == 0 ? -static_cast<float>(absmax) : *std::min_element(x.begin(), x.end());
            std::vector<double> scalar(n + 2), lanes(n + 2);
            for (size_t i = 0; i < n + 2; ++i) scalar[i] = lanes[i] = i < n ? 0.0 : 7.0;  // the bounds alone; past: untouched
            detail::add_decl_bounds(d, s, lo, 0.0f, x.data(), n, scalar.data(), false);
            detail::add_decl_bounds(d, s, lo, 0.0f, x.data(), n, lanes.data(), true);
            for (size_t i = 0; i < n + 2; ++i) {
                ASSERT_EQ(std::bit_cast<uint64_t>(lanes[i]), std::bit_cast<uint64_t>(scalar[i]))
                    << "elem " << static_cast<int>(d.elem) << " bits " << d.bits << " offset " << d.offset_min << " scale " << s
                    << " lo " << lo << " element " << i << " of " << n << (i < n ? " x " + std::to_string(x[i]) : " (past the block)")
                    << ": " << lanes[i] << " vs " << scalar[i];
                if (i < n) {
                    ++elements;
                    differ_from_zero += scalar[i] != 0;
                } else {
                    EXPECT_EQ(lanes[i], 7.0) << "written past the block";
                }
            }
        }
    }
    EXPECT_TRUE(saw_offset && saw_table && saw_int && saw_float);
    // Most bounds are not 0 (a block of scale 0 is): the comparison compared something.
    EXPECT_GT(differ_from_zero, elements / 2);
}

// One column of `ranks` blocks of `block` int4 values on `path`, eight ranks a node.
PathConfig one_column(PathKind path, int64_t ranks, int64_t block) {
    PathConfig c;
    c.path = path;
    c.format = FormatSpec{FormatKind::kSym, 4};
    c.block = block;
    c.ranks = ranks;
    c.ranks_per_node = 8;
    c.elements = ranks * block;
    return c;
}

TEST(PathChecker, SameResultsWhateverTheColumnBefore) {
    const PathConfig c = one_column(PathKind::kA2aRs, 64, 32);
    std::mt19937 rng(5);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    auto column = [&](int shift) {
        std::vector<std::vector<float>> x(64, std::vector<float>(32));
        for (auto& row : x)
            for (auto& v : row) v = std::ldexp(nd(rng), shift);
        auto col = testing::simulate_column(c, 0, x);
        EXPECT_TRUE(col.has_value());
        return *col;
    };
    ColumnRecord target = column(0);
    target.outputs[0].values[7] += 100.0f;  // far beyond its bound (about 10 for 64 int4 blocks)
    PathChecker first(c);
    first.add(target);
    const PathStats want = first.stats();
    ASSERT_FALSE(want.bound_holds);
    for (int shift : {-60, -30, -8, 0, 8, 30, 60}) {
        const ColumnRecord before = column(shift);
        PathChecker ck(c);
        ck.add(before);
        ASSERT_TRUE(ck.stats().bound_holds) << ck.stats().first_violation;
        const PathStats b = ck.stats();
        ck.add(target);
        const PathStats got = ck.stats();
        EXPECT_EQ(got.first_violation, want.first_violation) << "after a column scaled by 2^" << shift;
        EXPECT_EQ(got.violations, want.violations) << shift;
        EXPECT_EQ(got.max_abs_error, std::max(b.max_abs_error, want.max_abs_error)) << shift;
        EXPECT_EQ(got.max_a_posteriori, std::max(b.max_a_posteriori, want.max_a_posteriori)) << shift;
        EXPECT_EQ(got.max_a_priori, std::max(b.max_a_priori, want.max_a_priori)) << shift;
        EXPECT_EQ(got.max_error_to_a_posteriori, std::max(b.max_error_to_a_posteriori, want.max_error_to_a_posteriori)) << shift;
        EXPECT_EQ(got.outputs_checked, b.outputs_checked + want.outputs_checked) << shift;
    }
}

// PathChecker prepares a column's events, and takes the a-priori bound of the paths whose bound is
// one fold over the ranks' absmax (a2a-rs, two-shot-ar, ring-rs, fp32-ring-rs) a step at a time,
// beside other work: in the column scan's loop when the checker has a grid to guess from (any column
// after its first), else after the scan (EventPrep, PriorFold). Every column of every reduce path,
// for several N, an int and a declared format, checked first by a fresh checker and then after a
// column 2^-30 as large (so that its maxima are the column's), must carry a_priori_bound's bits and
// the same maxima both ways. With int4, rank 1's values are near 2^-140, so that its blocks' scales
// are subnormal: the scan's loop leaves that event and the ones after it to prepare_events.
TEST(PathChecker, EventsAndAPrioriAreTheSameInTheScansLoopAndAfterIt) {
    std::mt19937 rng(23);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::uniform_int_distribution<int> shift(-6, 6);
    int compared = 0, subnormal = 0;
    for (const char* fmt : {"int4", "fp8-e4m3"}) {
        for (PathKind path : {PathKind::kA2aRs, PathKind::kTwoShotAr, PathKind::kRingRs, PathKind::kFp32RingRs,
                              PathKind::kA2aHierRs, PathKind::kTreeRs}) {
            for (int64_t n : {1, 2, 8, 16, 64, 128}) {  // (the loop takes events from 128 rows: kEventsInScanRows)
                if (path == PathKind::kA2aHierRs && n % 8 != 0) continue;
                PathConfig c = one_column(path, n, 16);
                c.ranks_per_node = std::min<int64_t>(n, 8);
                c.format = *parse_format(fmt);
                std::vector<float> x(static_cast<size_t>(n * c.elements)), small(x.size());
                for (int64_t r = 0; r < n; ++r) {  // each rank its own magnitude: the absmax differ
                    const int sh = std::string(fmt) == "int4" && r == 1 ? -140 : shift(rng);
                    for (int64_t i = 0; i < c.elements; ++i) x[static_cast<size_t>(r * c.elements + i)] = std::ldexp(nd(rng), sh);
                }
                for (size_t i = 0; i < x.size(); ++i) small[i] = std::ldexp(x[i], -30);
                auto cols = reference::run_path_plain(c, x);
                auto warm = reference::run_path_plain(c, small);
                ASSERT_TRUE(cols.ok()) << cols.error().message << " " << path_info(path).name << " N = " << n;
                ASSERT_TRUE(warm.ok()) << warm.error().message << " " << path_info(path).name << " N = " << n;
                for (size_t k = 0; k < cols->size(); ++k) {
                    const ColumnRecord& col = (*cols)[k];
                    std::vector<double> absmax(static_cast<size_t>(n), 0.0);
                    for (int64_t r = 0; r < n; ++r)
                        for (int64_t i = 0; i < col.len; ++i)
                            absmax[static_cast<size_t>(r)] = std::max(
                                absmax[static_cast<size_t>(r)],
                                std::fabs(static_cast<double>(col.contributions[static_cast<size_t>(r * col.len + i)])));
                    if (n > 1 && absmax[1] > 0 && absmax[1] < 0x1p-120) ++subnormal;
                    PathChecker after(c), in_loop(c);
                    after.add(col);             // a first column: no grid to guess, the events after the scan
                    in_loop.add((*warm)[k]);
                    in_loop.add(col);           // in the scan's loop
                    const PathStats a = after.stats(), b = in_loop.stats();
                    ASSERT_TRUE(a.bound_holds) << a.first_violation;
                    ASSERT_TRUE(b.bound_holds) << b.first_violation;
                    const double want = a_priori_bound(c, col.first, 0, absmax);
                    const std::string where = std::string(fmt) + " " + path_info(path).name + " N = " + std::to_string(n) +
                                              " column " + std::to_string(col.first);
                    EXPECT_EQ(std::bit_cast<uint64_t>(a.max_a_priori), std::bit_cast<uint64_t>(want))
                        << where << ": " << a.max_a_priori << " against " << want;
                    EXPECT_EQ(std::bit_cast<uint64_t>(b.max_a_priori), std::bit_cast<uint64_t>(want))
                        << where << ": " << b.max_a_priori << " against " << want;
                    EXPECT_EQ(a.max_a_posteriori, b.max_a_posteriori) << where;
                    EXPECT_EQ(a.max_abs_error, b.max_abs_error) << where;
                    EXPECT_EQ(a.max_error_to_a_posteriori, b.max_error_to_a_posteriori) << where;
                    EXPECT_EQ(a.k_min, b.k_min) << where;
                    EXPECT_EQ(a.k_max, b.k_max) << where;
                    ++compared;
                }
            }
        }
    }
    EXPECT_GT(compared, 500);
    EXPECT_GT(subnormal, 100);  // the scan's loop met events it leaves to prepare_events
}

// The scan's loop takes an event only when it can do what prepare_events does without a call; any
// other must stop it there. An event of a2a-rs at N = 128 (in the loop) is changed, one at a time,
// into each kind the loop must leave: a scale that is negative, subnormal, NaN, or an infinity's
// neighbour left as is; contributors listed, or of a negative count; codes of another length; a
// block that starts elsewhere. The checker must say the same, in the loop or after it.
TEST(PathChecker, EventsTheScansLoopCannotTakeAreLeftToPrepareEvents) {
    PathConfig c = one_column(PathKind::kA2aRs, 128, 16);
    std::mt19937 rng(5);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> x(static_cast<size_t>(c.ranks * c.elements)), small(x.size());
    for (size_t i = 0; i < x.size(); ++i) x[i] = nd(rng), small[i] = std::ldexp(x[i], -30);
    auto cols = reference::run_path_plain(c, x);
    auto warm = reference::run_path_plain(c, small);
    ASSERT_TRUE(cols.ok() && warm.ok());
    int checked_clean = 0;
    for (int how = 0; how < 9; ++how) {
        ColumnRecord col = (*cols)[0];
        QuantEvent& ev = col.events[7];
        switch (how) {
            case 0: ev.scale = -ev.scale; break;
            case 1: ev.scale = 0x1p-130f; break;
            case 2: ev.scale = std::numeric_limits<float>::quiet_NaN(); break;
            case 3: ev.scale = 0; break;                  // the loop takes it: the same as after
            case 4: ev.contributors.list = {7}; break;
            case 5: ev.contributors.count = -1; break;
            case 6: ev.codes.push_back(0); break;
            case 7: ev.column_offset = 1; break;
            default: ev.scale = std::nextafter(0x1p-126f, 0.0f); break;
        }
        PathChecker after(c), in_loop(c);
        after.add(col);
        in_loop.add((*warm)[0]);
        in_loop.add(col);
        const PathStats a = after.stats(), b = in_loop.stats();
        EXPECT_EQ(a.bound_holds, b.bound_holds) << how;
        EXPECT_EQ(a.violations, b.violations) << how;
        EXPECT_EQ(a.first_violation, b.first_violation) << how;
        // (a malformed ledger adds nothing of the column: b's maxima are then the warm column's)
        const bool malformed = a.first_violation.find("malformed") != std::string::npos;
        if (!malformed) {
            EXPECT_EQ(std::bit_cast<uint64_t>(a.max_a_posteriori), std::bit_cast<uint64_t>(b.max_a_posteriori)) << how;
            EXPECT_EQ(a.k_min, b.k_min) << how;
            EXPECT_EQ(a.k_max, b.k_max) << how;
        }
        checked_clean += malformed ? 0 : 1;
    }
    EXPECT_EQ(checked_clean, 7);
}

// PathChecker counts k from its own copy of the events' ranges (count_k) when every event of a row is
// a ring range over the whole column, and with contribution_k otherwise (a listed contributor, as
// a2a-hier-rs's second hop has). Its k_min and k_max over a column must be contribution_k's, on every
// reduce path, read as a first column and in the scan's loop.
TEST(PathChecker, KOfEveryReducePathIsContributionK) {
    std::mt19937 rng(29);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    int compared = 0;
    for (PathKind path : {PathKind::kA2aRs, PathKind::kTwoShotAr, PathKind::kRingRs, PathKind::kFp32RingRs,
                          PathKind::kA2aHierRs, PathKind::kTreeRs}) {
        for (int64_t n : {2, 8, 16, 128}) {
            if (path == PathKind::kA2aHierRs && n % 8 != 0) continue;
            PathConfig c = one_column(path, n, 16);
            c.ranks_per_node = std::min<int64_t>(n, 8);
            std::vector<float> x(static_cast<size_t>(n * c.elements));
            for (float& v : x) v = nd(rng);
            auto cols = reference::run_path_plain(c, x);
            ASSERT_TRUE(cols.ok()) << cols.error().message;
            PathChecker in_loop(c);
            for (const ColumnRecord& col : *cols) {
                int32_t kmin = std::numeric_limits<int32_t>::max(), kmax = std::numeric_limits<int32_t>::min();
                for (const OutputRow& row : col.outputs)
                    for (int32_t k : contribution_k(col, row, n)) {
                        kmin = std::min(kmin, k);
                        kmax = std::max(kmax, k);
                    }
                PathChecker first(c);
                first.add(col);
                in_loop.add(col);  // after the previous columns: in the scan's loop from the second on
                const std::string where = std::string(path_info(path).name) + " N = " + std::to_string(n) + " column " +
                                          std::to_string(col.first);
                EXPECT_EQ(first.stats().k_min, kmin) << where;
                EXPECT_EQ(first.stats().k_max, kmax) << where;
                ++compared;
            }
            // Over the columns, the checker's extremes are the extremes of theirs.
            int32_t kmin = std::numeric_limits<int32_t>::max(), kmax = std::numeric_limits<int32_t>::min();
            for (const ColumnRecord& col : *cols)
                for (const OutputRow& row : col.outputs)
                    for (int32_t k : contribution_k(col, row, n)) {
                        kmin = std::min(kmin, k);
                        kmax = std::max(kmax, k);
                    }
            EXPECT_EQ(in_loop.stats().k_min, kmin) << path_info(path).name << " N = " << n;
            EXPECT_EQ(in_loop.stats().k_max, kmax) << path_info(path).name << " N = " << n;
            EXPECT_TRUE(in_loop.stats().bound_holds) << in_loop.stats().first_violation;
        }
    }
    EXPECT_GT(compared, 100);
}

// The gate shares a path's columns among its threads (column i to thread i mod T) and merges their
// checkers: the sums of squares, and so rms_error and rel_rms_error, must have the same bits for
// any T (D34). Columns of magnitudes 2^-40 to 2^40, whose plain double sums depend on the order.
TEST(PathChecker, SumsHaveTheSameBitsHoweverTheColumnsAreShared) {
    const PathConfig c = one_column(PathKind::kRingRs, 16, 8);
    std::mt19937 rng(11);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<ColumnRecord> cols;
    std::vector<double> col_sse;  // each column's own sum, from a checker of its own
    for (int i = 0; i < 24; ++i) {
        const int shift = (i * 37) % 81 - 40;
        std::vector<std::vector<float>> x(16, std::vector<float>(8));
        for (auto& row : x)
            for (auto& v : row) v = std::ldexp(nd(rng), shift);
        auto col = testing::simulate_column(c, 0, x);
        ASSERT_TRUE(col.has_value());
        cols.push_back(*col);
        PathChecker one(c);
        one.add(*col);
        col_sse.push_back(one.stats().sum_sq_error);
    }
    PathChecker seq(c);
    for (const auto& col : cols) seq.add(col);
    const PathStats want = seq.stats();
    ASSERT_TRUE(want.bound_holds) << want.first_violation;
    ASSERT_GT(want.sum_sq_error, 0.0);
    bool naive_differs = false;
    for (int threads : {2, 3, 5, 7}) {
        std::vector<PathChecker> part(static_cast<size_t>(threads), PathChecker(c));
        std::vector<double> naive(static_cast<size_t>(threads), 0.0);
        for (size_t i = 0; i < cols.size(); ++i) {
            part[i % static_cast<size_t>(threads)].add(cols[i]);
            naive[i % static_cast<size_t>(threads)] += col_sse[i];
        }
        PathChecker all(c);  // as the gate merges: a fresh checker, then every thread's in turn
        for (auto it = part.rbegin(); it != part.rend(); ++it) all.merge(*it);
        const PathStats got = all.stats();
        EXPECT_EQ(std::bit_cast<uint64_t>(got.sum_sq_error), std::bit_cast<uint64_t>(want.sum_sq_error)) << threads;
        EXPECT_EQ(std::bit_cast<uint64_t>(got.sum_sq_target), std::bit_cast<uint64_t>(want.sum_sq_target)) << threads;
        EXPECT_EQ(got.rel_rms_error(), want.rel_rms_error()) << threads;
        EXPECT_EQ(got.outputs_checked, want.outputs_checked);
        EXPECT_EQ(got.max_abs_error, want.max_abs_error);
        EXPECT_EQ(got.max_a_posteriori, want.max_a_posteriori);
        double sum = 0, seq_sum = 0;
        for (double v : naive) sum += v;
        for (double v : col_sse) seq_sum += v;
        naive_differs = naive_differs || sum != seq_sum;
    }
    // The columns are such that plain double sums do depend on the sharing: the test tests something.
    EXPECT_TRUE(naive_differs);
}

// ---- SuperAcc -----------------------------------------------------------------------------------

TEST(SuperAcc, SmallSums) {
    SuperAcc a;
    EXPECT_EQ(a.sign(), 0);
    EXPECT_EQ(a.to_double(), 0.0);
    a.add(1.5f);
    a.add(-0.25f);
    EXPECT_EQ(a.to_double(), 1.25);
    EXPECT_EQ(a.to_exact(), Exact(1.25));
    a.sub(1.25f);
    EXPECT_EQ(a.sign(), 0);
    a.add(0x1p-149f);
    EXPECT_EQ(a.sign(), 1);
    EXPECT_EQ(a.to_double(), 0x1p-149);
    a.negate();
    EXPECT_EQ(a.sign(), -1);
    EXPECT_EQ(a.to_double(), -0x1p-149);
}

TEST(SuperAcc, FullSpanAndCancellation) {
    SuperAcc a;
    a.add(FLT_MAX);
    a.add(0x1p-149f);
    a.add(-FLT_MAX);
    EXPECT_EQ(a.to_exact(), Exact::pow2(-149));
    // 2^31 copies of FLT_MAX would not fit a double-free sum; 10^6 do, exactly.
    SuperAcc b;
    for (int i = 0; i < 1000000; ++i) b.add(FLT_MAX);
    EXPECT_EQ(b.to_exact(), Exact(FLT_MAX) * Exact::from_int(1000000));
    for (int i = 0; i < 1000000; ++i) b.add(-FLT_MAX);
    EXPECT_EQ(b.sign(), 0);
    // 0.1f summed 10^7 times: exact, and the correctly rounded double of the exact sum.
    SuperAcc c;
    Exact e;
    for (int i = 0; i < 10000000; ++i) c.add(0.1f);
    e = Exact(0.1f) * Exact::from_int(10000000);
    EXPECT_EQ(c.to_exact(), e);
    EXPECT_EQ(c.to_double(), e.to_double());
}

TEST(SuperAcc, ToDoubleRoundsToNearestEven) {
    // 1 + 2^-53 (a tie) rounds to 1; 1 + 2^-53 + 2^-149 rounds up; 1 + 3 * 2^-53 (a tie) rounds to even
    // 1 + 2^-51.
    SuperAcc a;
    a.add(1.0f);
    a.add(0x1p-53f);
    EXPECT_EQ(a.to_double(), 1.0);
    a.add(0x1p-149f);
    EXPECT_EQ(a.to_double(), 1.0 + 0x1p-52);
    SuperAcc b;
    b.add(1.0f);
    b.add(0x1p-52f);
    b.add(0x1p-53f);
    EXPECT_EQ(b.to_double(), 1.0 + 0x1p-51);
    SuperAcc c;
    c.add(-1.0f);
    c.add(-0x1p-53f);
    c.add(-0x1p-149f);
    EXPECT_EQ(c.to_double(), -(1.0 + 0x1p-52));
}

TEST(SuperAcc, CompareWithDoublesExactly) {
    SuperAcc a;
    a.add(1.0f);
    EXPECT_EQ(a.compare(1.0), 0);
    EXPECT_EQ(a.compare(1.0 + 0x1p-52), -1);
    EXPECT_EQ(a.compare(1.0 - 0x1p-53), 1);
    EXPECT_EQ(a.compare(std::numeric_limits<double>::infinity()), -1);
    EXPECT_EQ(a.compare(-std::numeric_limits<double>::infinity()), 1);
    EXPECT_EQ(a.compare(0x1p300), -1);
    SuperAcc t;  // 2^-149: a double just above or below it, off the 2^-149 grid
    t.add(0x1p-149f);
    EXPECT_EQ(t.compare(0x1p-149), 0);
    EXPECT_EQ(t.compare(0x1p-149 + 0x1p-200), -1);
    EXPECT_EQ(t.compare(0x1p-149 - 0x1p-200), 1);
    EXPECT_EQ(t.compare(0x1p-1074), 1);
    t.negate();
    EXPECT_EQ(t.compare(-0x1p-149 - 0x1p-200), 1);
    EXPECT_EQ(t.compare(-0x1p-149 + 0x1p-200), -1);
    EXPECT_EQ(t.compare_abs(0x1p-149), 0);
    EXPECT_EQ(t.compare_abs(0x1p-150), 1);
    EXPECT_TRUE(SuperAcc::representable(0x1p-149));
    EXPECT_FALSE(SuperAcc::representable(0x1p-150));
    SuperAcc d;
    EXPECT_TRUE(d.add(0x1p-149 * 3 + 0x1p-100));  // 49 bits: exact in double
    EXPECT_EQ(d.to_exact(), Exact(0x1p-100) + Exact::from_int(3) * Exact::pow2(-149));
    EXPECT_FALSE(d.add(0x1p-150));
    EXPECT_FALSE(d.add(0x1p201));
    EXPECT_TRUE(d.add(0.1));  // 0.1 is a multiple of 2^-56
}

TEST(SuperAcc, MergeAndNonFinite) {
    SuperAcc a, b;
    a.add(3.0f);
    b.add(-0.5f);
    a.add(b);
    EXPECT_EQ(a.to_double(), 2.5);
    a.sub(b);
    EXPECT_EQ(a.to_double(), 3.0);
    EXPECT_EQ(a.compare(b), 1);
    EXPECT_EQ(b.compare(a), -1);
    a.add(std::numeric_limits<float>::infinity());
    EXPECT_TRUE(a.nonfinite());
    EXPECT_TRUE(std::isnan(a.to_double()));
}

// ---- the checker on hand-made columns ---------------------------------------------------------

FormatSpec int8() { return {FormatKind::kSym, 8}; }

PathConfig ring2() {
    PathConfig c;
    c.path = PathKind::kRingRs;
    c.format = int8();
    c.block = 2;
    c.ranks = 2;
    c.ranks_per_node = 2;
    c.elements = 4;  // S = 2: the column at 0 is chunk 0
    return c;
}

// N = 2, chunk 0: P = X_1 = {127, 1.5}; int8 gives a = 127, s = fl32(127/127) = 1, codes {127, 2}
// (rne(1.5) = 2), decoded {127, 2}; rank 0 adds X_0 = {1, 0.25}: P = {128, 2.25}. The exact sum is
// {128, 1.75}: errors {0, 0.5}.
ColumnRecord ring2_column() {
    ColumnRecord col;
    col.first = 0;
    col.len = 2;
    col.contribution_rows = 2;
    col.contributions = {1.0f, 0.25f, 127.0f, 1.5f};
    const auto q = quantize(int8(), std::vector<float>{127.0f, 1.5f}, 2);
    EXPECT_TRUE(q.ok());
    EXPECT_EQ(q.value().scales[0], 1.0f);
    EXPECT_EQ(q.value().codes, (std::vector<int32_t>{127, 2}));
    QuantEvent ev;
    ev.stage = 0;
    ev.from_rank = 1;
    ev.to_rank = 0;
    ev.scale = q.value().scales[0];
    ev.contributors.first = 1;
    ev.contributors.count = 1;
    ev.x = {127.0f, 1.5f};
    ev.codes = q.value().codes;
    OutputRow row;
    row.rank = 0;
    row.values = {q.value().decoded[0] + 1.0f, q.value().decoded[1] + 0.25f};
    EXPECT_EQ(row.values, (std::vector<float>{128.0f, 2.25f}));
    col.events.push_back(ev);
    row.event_ids.push_back(0);
    row.add_abs_sum = {128.0, 2.25};
    row.add_count = {1, 1};
    col.outputs.push_back(row);
    return col;
}

TEST(PathChecker, RingHopByHand) {
    PathChecker ck(ring2());
    ck.add(ring2_column());
    const PathStats s = ck.stats();
    EXPECT_TRUE(s.bound_holds) << s.first_violation;
    EXPECT_EQ(s.violations, 0);
    EXPECT_EQ(s.outputs_checked, 2);
    EXPECT_EQ(s.nonfinite_outputs, 0);
    EXPECT_EQ(s.max_abs_error, 0.5);
    EXPECT_DOUBLE_EQ(s.rel_rms_error(), std::sqrt(0.25 / (128.0 * 128.0 + 1.75 * 1.75)));
    EXPECT_EQ(s.k_min, 0);  // rank 0 (the owner) is never quantized
    EXPECT_EQ(s.k_max, 1);
    // a_post: E = s (1/2 + 2^-22 * 127) + 2^-149 for the event, plus u/(1-u) |P| for the add; the
    // largest is element 0's (|P| = 128).
    const double e = 0.5 + 127 * 0x1p-22 + 0x1p-149;
    const double gamma = kU / (1 - kU);
    EXPECT_NEAR(s.max_a_posteriori, (e + gamma * 128) * (1 + 0x1p-30), 1e-15);
    EXPECT_NEAR(s.max_error_to_a_posteriori, 0.5 / ((e + gamma * 2.25) * (1 + 0x1p-30)), 1e-15);
    // a_priori: e(127) = (1 + u)(1/2 + 2^-22 127)/127 * 127 + 2^-149 (c' + 1 + 127/2), then the add
    // term u(1 + u)/(1 - u) (128 + e(127)), inflated by 1 + 2^-20.
    const double cp = 0.5 + 127 * 0x1p-22;
    const double e127 = (1 + kU) * cp / 127 * 127 + 0x1p-149 * (cp + 1 + 63.5);
    const double prio = (e127 + kU * (1 + kU) / (1 - kU) * (128 + e127)) * (1 + 0x1p-20);
    EXPECT_NEAR(s.max_a_priori, prio, 1e-12);
    EXPECT_DOUBLE_EQ(a_priori_bound(ring2(), 0, 0, std::vector<double>{1.0, 127.0}), prio);
    EXPECT_DOUBLE_EQ(event_bound_of_absmax(int8(), 127.0), e127);
    EXPECT_GT(s.max_a_priori, s.max_a_posteriori);
}

TEST(PathChecker, TamperedValueIsAViolation) {
    ColumnRecord col = ring2_column();
    col.outputs[0].values[1] = 2.26f;  // error 0.51 > a_post ~ 0.50003
    PathChecker ck(ring2());
    ck.add(col);
    const PathStats s = ck.stats();
    EXPECT_FALSE(s.bound_holds);
    EXPECT_EQ(s.violations, 1);
    EXPECT_NE(s.first_violation.find("element 1"), std::string::npos) << s.first_violation;
    EXPECT_NE(s.first_violation.find("|error| > a_posteriori"), std::string::npos) << s.first_violation;
    EXPECT_NE(s.first_violation.find("row rank 0"), std::string::npos) << s.first_violation;
    // One ulp off at 128 is 2^-16: still within 128 u/(1-u) + E? 128 has error 0 + 2^-16 < E: holds.
    ColumnRecord ok = ring2_column();
    ok.outputs[0].values[0] = std::nextafter(128.0f, 200.0f);
    PathChecker ck2(ring2());
    ck2.add(ok);
    EXPECT_TRUE(ck2.stats().bound_holds) << ck2.stats().first_violation;
}

TEST(PathChecker, TamperedLedgerIsAViolation) {
    // Without its event, the a_posteriori (add term only) cannot explain the error of 0.5.
    ColumnRecord lost = ring2_column();
    lost.outputs[0].event_ids.clear();
    PathChecker a(ring2());
    a.add(lost);
    EXPECT_FALSE(a.stats().bound_holds);
    EXPECT_EQ(a.stats().k_max, 0);
    // With the event recorded twice, the a_posteriori exceeds what the path allows a priori.
    ColumnRecord twice = ring2_column();
    twice.outputs[0].event_ids.push_back(0);
    PathChecker b(ring2());
    b.add(twice);
    EXPECT_FALSE(b.stats().bound_holds);
    EXPECT_NE(b.stats().first_violation.find("a_posteriori > a_priori"), std::string::npos) << b.stats().first_violation;
    EXPECT_EQ(b.stats().k_max, 2);
    // An event whose codes and x differ in length, an id past the events, or a contributor list
    // naming a rank the path does not have (past N, or negative: counting it would write past k):
    // a malformed ledger, whatever else the event's fields say.
    for (int how = 0; how < 4; ++how) {
        ColumnRecord bad = ring2_column();
        if (how == 0) bad.events[0].codes.push_back(0);
        else if (how == 1) bad.outputs[0].event_ids[0] = 1;
        else bad.events[0].contributors.list = {1, how == 2 ? 1000000 : -3};
        PathChecker c(ring2());
        c.add(bad);
        EXPECT_FALSE(c.stats().bound_holds) << how;
        EXPECT_NE(c.stats().first_violation.find("malformed ledger"), std::string::npos) << how << ": " << c.stats().first_violation;
    }
    // A ring range of a negative count names no rank: malformed too (counting it wrote before k's
    // first entry). Its first is taken mod N, negative or past N: -1 and 3 are rank 1 of 2, as 1 is.
    ColumnRecord neg = ring2_column();
    neg.events[0].contributors.count = -1;
    PathChecker c(ring2());
    c.add(neg);
    EXPECT_FALSE(c.stats().bound_holds);
    EXPECT_NE(c.stats().first_violation.find("malformed ledger"), std::string::npos) << c.stats().first_violation;
    PathChecker one(ring2());
    one.add(ring2_column());
    for (int64_t first : {-1, 3, -3}) {
        ColumnRecord wrapped = ring2_column();
        wrapped.events[0].contributors.first = first;
        PathChecker w(ring2());
        w.add(wrapped);
        EXPECT_TRUE(w.stats().bound_holds) << first << ": " << w.stats().first_violation;
        EXPECT_EQ(w.stats().k_min, one.stats().k_min) << first;
        EXPECT_EQ(w.stats().k_max, one.stats().k_max) << first;
        EXPECT_EQ(w.stats().max_a_posteriori, one.stats().max_a_posteriori) << first;
    }
}

TEST(PathChecker, NonFiniteOutputs) {
    ColumnRecord col = ring2_column();
    col.outputs[0].values[0] = std::numeric_limits<float>::infinity();
    col.outputs[0].values[1] = std::numeric_limits<float>::quiet_NaN();
    PathChecker ck(ring2());
    ck.add(col);
    const PathStats s = ck.stats();
    EXPECT_EQ(s.nonfinite_outputs, 2);
    EXPECT_EQ(s.violations, 2);
    EXPECT_FALSE(s.bound_holds);
    EXPECT_NE(s.first_violation.find("element 0"), std::string::npos) << s.first_violation;
}

TEST(PathChecker, MalformedColumn) {
    ColumnRecord col = ring2_column();
    col.contribution_rows = 1;
    PathChecker ck(ring2());
    ck.add(col);
    EXPECT_FALSE(ck.stats().bound_holds);
    EXPECT_NE(ck.stats().first_violation.find("malformed"), std::string::npos);
}

TEST(PathChecker, MergeKeepsTheFirstViolation) {
    ColumnRecord bad = ring2_column();
    bad.outputs[0].values[1] = 3.0f;
    ColumnRecord later = bad;
    later.first = 2;  // chunk 1 (the owner would be rank 1; the values do not matter here)
    later.outputs[0].rank = 1;
    PathChecker a(ring2()), b(ring2());
    a.add(later);
    b.add(bad);
    b.add(ring2_column());
    a.merge(b);
    const PathStats s = a.stats();
    EXPECT_EQ(s.outputs_checked, 6);
    EXPECT_GE(s.violations, 2);
    EXPECT_NE(s.first_violation.find("column at 0"), std::string::npos) << s.first_violation;
    EXPECT_EQ(s.k_min, 0);
}

// ring-ag-requant, N = 2, int8: shard 0 = W = {127, 1.5}; the owner and rank 1 (h = 1) both hold
// D(Q(W)) = {127, 2}: error 0.5, a_post = E = 1/2 + 127 2^-22 + 2^-149, a_priori e(127).
TEST(PathChecker, GatherByHand) {
    PathConfig c = ring2();
    c.path = PathKind::kRingAgRequant;
    ColumnRecord col;
    col.first = 0;
    col.len = 2;
    col.contribution_rows = 1;
    col.contributions = {127.0f, 1.5f};
    col.first_block_absmax = {127.0f, 127.0f};
    for (int r = 0; r < 2; ++r) {
        OutputRow row;
        row.rank = r;
        row.values = {127.0f, 2.0f};
        QuantEvent ev;
        ev.scale = 1.0f;
        ev.from_rank = 0;
        ev.to_rank = r;
        ev.contributors.first = 0;
        ev.contributors.count = 1;
        ev.x = {127.0f, 1.5f};
        ev.codes = {127, 2};
        row.event_ids.push_back(static_cast<int32_t>(col.events.size()));
        col.events.push_back(ev);
        row.add_abs_sum = {0.0, 0.0};
        row.add_count = {0, 0};
        col.outputs.push_back(row);
    }
    PathChecker ck(c);
    ck.add(col);
    const PathStats s = ck.stats();
    EXPECT_TRUE(s.bound_holds) << s.first_violation;
    EXPECT_EQ(s.outputs_checked, 4);
    EXPECT_EQ(s.max_abs_error, 0.5);
    EXPECT_EQ(s.k_min, 1);
    EXPECT_EQ(s.k_max, 1);
    const double e = 0.5 + 127 * 0x1p-22 + 0x1p-149;
    EXPECT_NEAR(s.max_a_posteriori, e * (1 + 0x1p-30), 1e-15);
    EXPECT_NEAR(s.max_a_priori, event_bound_of_absmax(int8(), 127.0) * (1 + 0x1p-20), 1e-12);
}

TEST(PathChecker, FitExponent) {
    const std::vector<double> n{4, 16, 64, 256};
    std::vector<double> y;
    for (double v : n) y.push_back(0.01 * std::pow(v, 0.54));
    EXPECT_NEAR(fit_exponent(n, y), 0.54, 1e-12);
    EXPECT_TRUE(std::isnan(fit_exponent(std::vector<double>{4}, std::vector<double>{1})));
    const std::vector<double> flat{0.1, 0.1, 0.1, 0.1};
    EXPECT_NEAR(fit_exponent(n, flat), 0.0, 1e-12);
}

// ---- speed ------------------------------------------------------------------------------------------

// A 384-rank ring-rs column (32-element blocks, normal inputs): 383 events reach the output.
// Reports ns per contribution (one element of one rank's row), for int8, int4-asym and ds-int4.
TEST(PathCheckerSpeed, RingRs384) {
    for (const FormatSpec& f : {FormatSpec{FormatKind::kSym, 8}, FormatSpec{FormatKind::kAsym, 4},
                               FormatSpec{FormatKind::kDs, 4}}) {
        PathConfig c;
        c.path = PathKind::kRingRs;
        c.format = f;
        c.block = 32;
        c.ranks = 384;
        c.ranks_per_node = kDefaultRanksPerNode;
        c.elements = 384 * 32;
        std::mt19937 rng(7);
        std::normal_distribution<float> nd(0.0f, 1.0f);
        std::vector<std::vector<float>> x(384, std::vector<float>(32));
        for (auto& row : x)
            for (auto& v : row) v = nd(rng);
        const auto col = testing::simulate_column(c, 5 * 32, x);
        ASSERT_TRUE(col.has_value());
        PathChecker warm(c);
        warm.add(*col);
        ASSERT_TRUE(warm.stats().bound_holds) << warm.stats().first_violation;
        const int reps = 20;
        PathChecker ck(c);
        const auto t0 = std::chrono::steady_clock::now();
        for (int r = 0; r < reps; ++r) ck.add(*col);
        const auto t1 = std::chrono::steady_clock::now();
        const double ns = std::chrono::duration<double, std::nano>(t1 - t0).count() / (reps * 384.0 * 32.0);
        std::cout << "checker: " << ns << " ns per contribution (384-rank ring-rs column, " << f.name()
                  << ", B = 32)\n";
        RecordProperty("ns_per_contribution_" + f.name(), std::to_string(ns));
        EXPECT_TRUE(ck.stats().bound_holds);
    }
}

}  // namespace
}  // namespace qtransit::reference
