// Properties (RapidCheck) of SuperAcc and the path checker:
//  * SuperAcc against reference::Exact (Boost) on random binary32 sequences with specials
//    (subnormals, FLT_MAX, exact cancellations): the sum, its sign, its correctly rounded double,
//    exact comparisons with arbitrary doubles, merge/sub/negate;
//  * DoubleAcc against Exact on doubles of every binade: correctly rounded, and the same bits in
//    any order and any split into merged accumulators, one of them through its words;
//  * the checker's per-event bound (double) against reference::element_bound (exact), and e(a)
//    against every element's exact bound;
//  * bound_holds on columns built by a minimal correct a2a-rs / ring-rs simulation
//    (checker_sim.hpp) for int4, int8, int4-asym, ds-int4 and ds-int4-fm, N = 1..16, fp32 and fp16 accumulation;
//  * RingRangeCounter (contribution_k's and the checker's count of ring ranges) against a walk of
//    every range, rank by rank.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "generators.hpp"
#include "qtransit/common/transit.hpp"
#include "qtransit/reference/checker.hpp"
#include "qtransit/reference/exact.hpp"
#include "qtransit/reference/formats.hpp"
#include "qtransit/reference/superacc.hpp"
#include "reference/checker_sim.hpp"
#include "reference/event_bound_check.hpp"

namespace qtransit::reference {
namespace {

using testing::from_bits;

rc::Gen<float> sum_value() {
    return rc::gen::weightedOneOf<float>({{6, testing::any_value()},
                                          {1, rc::gen::element(FLT_MAX, -FLT_MAX, 0x1p127f, -0x1p127f)},
                                          {2, testing::subnormal()}});
}

double any_double() {
    const int kind = *rc::gen::inRange(0, 4);
    if (kind == 0) {
        for (;;) {
            const double v = std::bit_cast<double>(*rc::gen::arbitrary<uint64_t>());
            if (!std::isnan(v)) return v;
        }
    }
    if (kind == 1) return static_cast<double>(*sum_value());
    // near the grid: a float plus a tiny offset
    const double f = static_cast<double>(*sum_value());
    const int e = *rc::gen::inRange(-200, -140);
    return f + std::ldexp(static_cast<double>(*rc::gen::inRange(-3, 4)), e);
}

// ---- SuperAcc ----------------------------------------------------------------------------------

RC_GTEST_PROP(SuperAccProps, MatchesExact, ()) {
    const auto xs = *rc::gen::container<std::vector<float>>(sum_value());
    SuperAcc a;
    Exact e;
    for (float v : xs) {
        a.add(v);
        e += Exact(v);
    }
    // Exact cancellation: add the same values negated, in reverse order, half of the time.
    if (*rc::gen::arbitrary<bool>()) {
        for (auto it = xs.rbegin(); it != xs.rend(); ++it) a.sub(*it);
        e = Exact();
    }
    RC_ASSERT(a.to_exact() == e);
    RC_ASSERT(a.sign() == e.sign());
    RC_ASSERT(a.to_double() == e.to_double());  // both correctly rounded
    const double d = any_double();
    if (std::isfinite(d)) {
        RC_ASSERT(a.compare(d) == (e - Exact(d)).sign());
        RC_ASSERT(a.compare_abs(d) == (e.abs() - Exact(d)).sign());
    }
    RC_ASSERT(a.compare(a.to_double()) == (e - Exact(e.to_double())).sign());
}

RC_GTEST_PROP(SuperAccProps, MergeSubNegate, ()) {
    const auto xs = *rc::gen::container<std::vector<float>>(sum_value());
    const auto ys = *rc::gen::container<std::vector<float>>(sum_value());
    SuperAcc a, b;
    Exact ea, eb;
    for (float v : xs) {
        a.add(v);
        ea += Exact(v);
    }
    for (float v : ys) {
        b.add(v);
        eb += Exact(v);
    }
    RC_ASSERT(a.compare(b) == (ea - eb).sign());
    SuperAcc s = a;
    s.add(b);
    RC_ASSERT(s.to_exact() == ea + eb);
    SuperAcc t = a;
    t.sub(b);
    RC_ASSERT(t.to_exact() == ea - eb);
    t.negate();
    RC_ASSERT(t.to_exact() == eb - ea);
    RC_ASSERT(t.to_double() == (eb - ea).to_double());
}

RC_GTEST_PROP(SuperAccProps, GridDoublesAddExactly, ()) {
    const float f = *sum_value();
    const int e = *rc::gen::inRange(-149, 140);
    const double d = std::ldexp(static_cast<double>(*rc::gen::inRange<int64_t>(-(int64_t{1} << 52), int64_t{1} << 52)), e);
    SuperAcc a;
    a.add(f);
    RC_ASSERT(a.add(d));
    RC_ASSERT(a.to_exact() == Exact(f) + Exact(d));
}

// ---- DoubleAcc ---------------------------------------------------------------------------------

// A finite double of any binade (subnormals included) below 2^1000, so that sums of a few hundred
// stay finite; a third of them squares of floats, the checker's own terms.
rc::Gen<double> acc_term() {
    return rc::gen::map(rc::gen::pair(rc::gen::arbitrary<uint64_t>(), rc::gen::inRange(0, 3)), [](std::pair<uint64_t, int> p) {
        if (p.second == 0) {
            const double f = static_cast<double>(from_bits(static_cast<uint32_t>(p.first) & 0x7f7fffffu));
            return (p.first >> 63) ? -f * f : f * f;
        }
        uint64_t b = p.first;
        const uint64_t ef = (b >> 52) & 0x7FF;
        if (ef >= 2023) b = (b & ~(uint64_t{0x7FF} << 52)) | ((ef % 2023) << 52);  // below 2^1000
        return std::bit_cast<double>(b);
    });
}

RC_GTEST_PROP(DoubleAccProps, ExactInAnyOrderAndAnySplit, ()) {
    auto xs = *rc::gen::container<std::vector<double>>(acc_term());
    // Exact cancellations: some terms again, negated, half of the time.
    if (*rc::gen::arbitrary<bool>() && !xs.empty()) {
        const size_t k = *rc::gen::inRange<size_t>(0, xs.size());
        for (size_t i = 0; i < k; ++i) xs.push_back(-xs[i]);
    }
    DoubleAcc a;
    Exact e;
    for (double v : xs) {
        a.add(v);
        e += Exact(v);
    }
    RC_ASSERT(a.to_double() == e.to_double());  // both correctly rounded
    // The same terms shuffled and split between two accumulators, merged: the same bits.
    auto ys = xs;
    std::mt19937_64 rng(*rc::gen::arbitrary<uint64_t>());
    std::shuffle(ys.begin(), ys.end(), rng);
    const size_t k = *rc::gen::inRange<size_t>(0, ys.size() + 1);
    DoubleAcc p, q;
    for (size_t i = 0; i < ys.size(); ++i) (i < k ? p : q).add(ys[i]);
    // One side through its words, as another process's sums arrive (--backend mpi).
    if (*rc::gen::arbitrary<bool>()) q = DoubleAcc::from_words(q.to_words().data());
    if (*rc::gen::arbitrary<bool>()) {
        p.add(q);
        RC_ASSERT(std::bit_cast<uint64_t>(p.to_double()) == std::bit_cast<uint64_t>(a.to_double()));
    } else {
        q.add(p);
        RC_ASSERT(std::bit_cast<uint64_t>(q.to_double()) == std::bit_cast<uint64_t>(a.to_double()));
    }
    // The words are exact doubles: integers below 2^53.
    for (double w : a.to_words()) RC_ASSERT(w == std::trunc(w) && std::fabs(w) < 0x1p53);
}

// add_times(v, n) is n adds of v: against Exact (v times n) and against n plain adds, mixed with
// plain adds, for counts up to past 2^31 (where it takes the term in parts) and 2^40; every run and
// its negation cancel exactly.
RC_GTEST_PROP(DoubleAccProps, AddTimesIsThatManyAdds, ()) {
    const auto runs = *rc::gen::container<std::vector<std::pair<double, int64_t>>>(rc::gen::pair(
        acc_term(), rc::gen::weightedOneOf<int64_t>({{6, rc::gen::inRange<int64_t>(-2, 400)},
                                                     {1, rc::gen::inRange<int64_t>((int64_t{1} << 31) - 3, (int64_t{1} << 31) + 3)},
                                                     {1, rc::gen::inRange<int64_t>(int64_t{1} << 40, (int64_t{1} << 40) + 9)}})));
    DoubleAcc a, b;
    Exact e;
    for (const auto& [v, n] : runs) {
        a.add_times(v, n);
        if (n > 0) e += Exact(v) * Exact(static_cast<double>(n));
        if (n > 0 && n <= 400)
            for (int64_t i = 0; i < n; ++i) b.add(v);
        else
            b.add_times(v, n);
        if (*rc::gen::arbitrary<bool>()) {  // a plain add between runs, and the run negated: it cancels
            a.add(v);
            b.add(v);
            e += Exact(v);
        }
    }
    RC_ASSERT(std::bit_cast<uint64_t>(a.to_double()) == std::bit_cast<uint64_t>(e.to_double()));
    RC_ASSERT(std::bit_cast<uint64_t>(a.to_double()) == std::bit_cast<uint64_t>(b.to_double()));
    // Every run and its negation: exactly zero.
    DoubleAcc z;
    for (const auto& [v, n] : runs) z.add_times(v, n);
    for (const auto& [v, n] : runs) z.add_times(-v, n);
    RC_ASSERT(z.to_double() == 0.0);
}

TEST(DoubleAcc, AddTimesKeepsTheSpecials) {
    const double inf = std::numeric_limits<double>::infinity();
    DoubleAcc a;
    a.add_times(inf, 3);
    EXPECT_EQ(a.to_double(), inf);
    a.add_times(-inf, 0);  // nothing
    EXPECT_EQ(a.to_double(), inf);
    a.add_times(-inf, 1);
    EXPECT_TRUE(std::isnan(a.to_double()));
    DoubleAcc b;
    b.add_times(std::numeric_limits<double>::quiet_NaN(), -1);  // nothing
    b.add_times(0x1p-1074, 5);
    EXPECT_EQ(b.to_double(), 5 * 0x1p-1074);
    b.add_times(DBL_MAX, 2);
    b.add_times(-DBL_MAX, 2);
    EXPECT_EQ(b.to_double(), 5 * 0x1p-1074);  // exact past DBL_MAX on the way
}

TEST(DoubleAcc, RoundsAndKeepsTheSpecials) {
    const auto sum = [](std::initializer_list<double> xs) {
        DoubleAcc a;
        for (double v : xs) a.add(v);
        return a.to_double();
    };
    const double inf = std::numeric_limits<double>::infinity(), tiny = std::numeric_limits<double>::denorm_min();
    EXPECT_EQ(sum({}), 0.0);
    EXPECT_EQ(sum({1e300, 1.0, -1e300}), 1.0);  // a naive sum gives 0
    EXPECT_EQ(sum({1.0, 0x1p-53}), 1.0);                       // a tie: to even
    EXPECT_EQ(sum({1.0, 0x1p-53, tiny}), 1.0 + 0x1p-52);       // just above the tie (sticky)
    EXPECT_EQ(sum({1.0 + 0x1p-52, 0x1p-53}), 1.0 + 0x1p-51);   // a tie: to even, up
    EXPECT_EQ(sum({tiny, tiny, tiny}), 3 * tiny);              // subnormal, exact
    EXPECT_EQ(sum({0x1p-1022, -tiny}), 0x1p-1022 - tiny);     // the largest subnormal
    EXPECT_EQ(sum({-0x1p-1060, 0x1p-1074}), -0x1p-1060 + 0x1p-1074);
    EXPECT_EQ(sum({DBL_MAX, DBL_MAX, -DBL_MAX}), DBL_MAX);    // no overflow in between
    EXPECT_EQ(sum({DBL_MAX, DBL_MAX}), inf);                   // past DBL_MAX: round to nearest is inf
    EXPECT_EQ(sum({-DBL_MAX, -DBL_MAX}), -inf);
    EXPECT_EQ(sum({DBL_MAX, 0x1p969}), DBL_MAX);               // below half an ulp of DBL_MAX
    EXPECT_EQ(sum({DBL_MAX, 0x1p970}), inf);                   // the tie with 2^1024 goes to even: inf
    EXPECT_EQ(sum({1.0, inf, -5.0}), inf);
    EXPECT_EQ(sum({1.0, -inf}), -inf);
    EXPECT_TRUE(std::isnan(sum({inf, -inf})));
    EXPECT_TRUE(std::isnan(sum({1.0, std::numeric_limits<double>::quiet_NaN()})));
    DoubleAcc a, b;
    a.add(inf);
    b.add(std::numeric_limits<double>::quiet_NaN());
    a.add(b);
    EXPECT_TRUE(std::isnan(a.to_double()));
    DoubleAcc c;
    c.add(-inf);
    c.add(2.5);
    EXPECT_EQ(DoubleAcc::from_words(c.to_words().data()).to_double(), -inf);  // the flags travel too
    EXPECT_TRUE(std::isnan(DoubleAcc::from_words(a.to_words().data()).to_double()));
}

// ---- the checker's bounds against the exact reference --------------------------------------------

const std::vector<FormatSpec>& checked_formats() {
    static const std::vector<FormatSpec> f{{FormatKind::kSym, 4}, {FormatKind::kSym, 8}, {FormatKind::kSym, 2},
                                           {FormatKind::kAsym, 4}, {FormatKind::kAsym, 8}, {FormatKind::kDs, 4},
                                           {FormatKind::kDs, 8},   *parse_format("ds-int4-fm"),
                                           *parse_format("ds-int8-fm")};
    return f;
}

RC_GTEST_PROP(CheckerBounds, EventBoundMirrorsElementBound, ()) {
    const FormatSpec f = *rc::gen::elementOf(checked_formats());
    auto x = *testing::block_values(33);
    for (auto& v : x) {
        if (!std::isfinite(v)) v = 1.0f;
        if (f.kind == FormatKind::kDs && std::fabs(v) >= 65504.0f) v = std::copysign(65504.0f, v);
        if (f.kind == FormatKind::kAsym && std::fabs(v) > 0x1p126f) v = std::ldexp(v, -2);
    }
    const auto q = quantize(f, x, static_cast<int64_t>(x.size()));
    RC_PRE(q.ok());
    testing::assert_event_bound_mirrors(f, x, q.value());
}

// ---- bound_holds on simulated columns -------------------------------------------------------------

// A value for a column whose magnitudes are at most 2^max_exp (exclusive): a random bit pattern
// with its exponent field limited, mixed with zeros and subnormals, and a per-column scale so that
// blocks look like real data (most values of one magnitude) as well as like anything at all.
float column_value(int max_exp, int center) {
    const int kind = *rc::gen::inRange(0, 10);
    if (kind == 0) return *rc::gen::element(0.0f, -0.0f, 0x1p-149f, -0x1p-149f, 0x1p-126f);
    if (kind == 1) return *testing::subnormal();
    const int emax_field = std::min(254, 127 + max_exp - 1);
    int ef = 0;
    if (kind <= 3)
        ef = *rc::gen::inRange(0, emax_field + 1);
    else
        ef = std::clamp(center + *rc::gen::inRange(-6, 2), 1, emax_field);
    const uint32_t mant = *rc::gen::inRange<uint32_t>(0, 1u << 23);
    const uint32_t sign = *rc::gen::arbitrary<bool>() ? 0x80000000u : 0u;
    return from_bits(sign | (static_cast<uint32_t>(ef) << 23) | mant);
}

void check_simulated(Accum accum) {
    const FormatSpec f = *rc::gen::element(FormatSpec{FormatKind::kSym, 4}, FormatSpec{FormatKind::kSym, 8},
                                           FormatSpec{FormatKind::kAsym, 4}, FormatSpec{FormatKind::kDs, 4},
                                           *parse_format("ds-int4-fm"));
    const PathKind path = *rc::gen::element(PathKind::kA2aRs, PathKind::kRingRs);
    const int64_t n = *rc::gen::inRange<int64_t>(1, 17);
    const int64_t len = *rc::gen::inRange<int64_t>(1, 9);
    const int64_t chunk = *rc::gen::inRange<int64_t>(0, n);
    PathConfig c;
    c.path = path;
    c.format = f;
    c.block = len;
    c.ranks = n;
    c.ranks_per_node = 1;
    c.elements = n * len;
    c.accum = accum;
    // Magnitude limits: binary32 sums of N values (with compounding ring errors) must stay finite,
    // ds inputs below 60000 / N, binary16 accumulation below 65504 overall.
    const int lg = std::bit_width(static_cast<uint64_t>(n));
    int max_exp = 120 - lg;
    if (f.kind == FormatKind::kDs || accum == Accum::kFp16) max_exp = 15 - lg - 1;  // < 2^14 / N < 60000 / N
    const int center = 127 + *rc::gen::inRange(-140, max_exp);
    std::vector<std::vector<float>> x(static_cast<size_t>(n), std::vector<float>(static_cast<size_t>(len)));
    for (auto& row : x)
        for (auto& v : row) v = column_value(max_exp, center);
    const auto col = testing::simulate_column(c, chunk * len, x);
    RC_PRE(col.has_value());  // a ds ring partial that overflowed binary16 is refused: no output
    PathChecker ck(c);
    ck.add(*col);
    const PathStats s = ck.stats();
    RC_LOG() << f.name() << " " << path_info(path).name << " N=" << n << " len=" << len << " " << to_string(accum)
             << "\n";
    RC_ASSERT_FALSE(s.first_violation.size() > 0 && s.bound_holds);
    if (!s.bound_holds) RC_FAIL(s.first_violation);
    RC_ASSERT(s.outputs_checked == len);
    RC_ASSERT(s.nonfinite_outputs == 0);
    if (path == PathKind::kA2aRs) {
        RC_ASSERT(s.k_min == 1 && s.k_max == 1);
    } else {
        RC_ASSERT(s.k_min == 0 && s.k_max == static_cast<int32_t>(n - 1));
    }
    RC_ASSERT(s.max_a_posteriori <= s.max_a_priori);
    RC_CLASSIFY(s.max_abs_error > 0, "non-zero error");
    RC_CLASSIFY(s.max_error_to_a_posteriori > 0.25, "error > a_post / 4");
}

// Ranges of every kind, mixed: one rank (the fast case), runs of ranges from one first (a ring's
// hops, whose ++ the counter defers), wrapping ones, N or more (whole turns), a first outside
// 0..N-1 (taken mod N, negative too) and a negative count (counts nothing); k starts non-zero (the
// counter adds to it).
RC_GTEST_PROP(RingRangeCounterProps, CountsWhatAWalkOfEveryRangeCounts, ()) {
    const int64_t n = *rc::gen::inRange<int64_t>(1, 40);
    const auto first = rc::gen::weightedOneOf<int64_t>({{6, rc::gen::inRange<int64_t>(0, n)},
                                                        {1, rc::gen::inRange<int64_t>(-3 * n, 3 * n + 1)}});
    const auto count = rc::gen::weightedOneOf<int64_t>({{3, rc::gen::just<int64_t>(1)},
                                                        {4, rc::gen::inRange<int64_t>(0, n + 1)},
                                                        {1, rc::gen::inRange<int64_t>(n, 3 * n + 1)},
                                                        {1, rc::gen::inRange<int64_t>(-3, 0)}});
    const auto run = rc::gen::mapcat(rc::gen::pair(first, rc::gen::inRange(1, 6)), [count](std::pair<int64_t, int> fr) {
        return rc::gen::map(rc::gen::container<std::vector<int64_t>>(static_cast<size_t>(fr.second), count),
                            [f = fr.first](std::vector<int64_t> cs) {
                                std::vector<std::pair<int64_t, int64_t>> v;
                                for (int64_t c : cs) v.emplace_back(f, c);
                                return v;
                            });
    });
    const auto runs = *rc::gen::container<std::vector<std::vector<std::pair<int64_t, int64_t>>>>(run);
    std::vector<int32_t> k(static_cast<size_t>(n)), want(static_cast<size_t>(n));
    for (int64_t r = 0; r < n; ++r) k[static_cast<size_t>(r)] = want[static_cast<size_t>(r)] = static_cast<int32_t>(r % 3);
    std::vector<int32_t> diff(static_cast<size_t>(n) + 1, 0);
    RingRangeCounter ring(n, k.data(), diff.data());
    for (const auto& rs : runs)
        for (const auto& [f, c] : rs) {
            ring.add(f, c);
            for (int64_t i = 0; i < c; ++i) ++want[static_cast<size_t>(((f + i) % n + n) % n)];
        }
    ring.finish();
    RC_ASSERT(k == want);
}

RC_GTEST_PROP(CheckerOnSimulatedPaths, BoundHoldsFp32, ()) { check_simulated(Accum::kFp32); }
RC_GTEST_PROP(CheckerOnSimulatedPaths, BoundHoldsFp16, ()) { check_simulated(Accum::kFp16); }
RC_GTEST_PROP(CheckerOnSimulatedPaths, BoundHoldsBf16, ()) { check_simulated(Accum::kBf16); }

}  // namespace
}  // namespace qtransit::reference
