// The unquantized 16-bit paths (issue 18, docs/DECISIONS.md D26): bf16-/fp16-ring-rs, -ring-ar and
// -tree-ar.
//  * NCCL's binary tree (btree_links): the illustration of NCCL's trees.cc for 14 nodes, and for
//    every node count up to 1000 a tree: one root, every other node its parent's child exactly once,
//    depth at most log2.
//  * Hand-checked sums: a bf16 add that rounds the smaller value away, a tie to even, fp16's.
//  * In exact arithmetic (reference::Exact), on random inputs of the type, random N and G: a third
//    schedule written here gives the reference's outputs bit for bit and the roundings' k equal to
//    expected_ks; and for every output
//        (1 - u) |error| <= u sum|r| <= sum_j A_j (1 + u)((1 + u)^k_j - 1) <= (1 - u) a_priori,
//    (multiplied by (1 - u)/u, these are |error| <= a_posteriori <= the exact a-priori bound of k),
//    so the a-posteriori bound bounds the error, the a-priori bound (as a function of k) bounds the
//    a-posteriori one, and the checker's double a-priori is above its exact value; an overflow
//    makes the a-priori +inf and the output non-finite, never a pass.
// Replay a failure: RC_PARAMS="reproduce=..." ./reference_typed_paths_test
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "qtransit/reference/checker.hpp"
#include "qtransit/reference/exact.hpp"
#include "qtransit/reference/formats.hpp"
#include "qtransit/reference/paths.hpp"

namespace qt = qtransit;
using qt::Accum;
using qt::PathConfig;
using qt::PathKind;
using qt::reference::Exact;

namespace {

const std::vector<PathKind>& typed_kinds() {
    static const std::vector<PathKind> v{PathKind::kBf16RingRs,    PathKind::kFp16RingRs,    PathKind::kBf16RingAr,
                                         PathKind::kFp16RingAr,    PathKind::kBf16TreeAr,    PathKind::kFp16TreeAr,
                                         PathKind::kFp8E4m3RingRs, PathKind::kFp8E5m2RingRs, PathKind::kFp8E4m3RingAr,
                                         PathKind::kFp8E5m2RingAr, PathKind::kFp8E4m3TreeAr, PathKind::kFp8E5m2TreeAr};
    return v;
}

bool is_tree(PathKind k) { return qt::typed_schedule(k) == qt::TypedSchedule::kTreeAr; }
bool is_ar(PathKind k) { return qt::path_info(k).shape == qt::PathShape::kAllReduce; }

// ---- the tree ------------------------------------------------------------------------------------

TEST(TypedPathsTree, NcclIllustrationFor14Nodes) {
    // 0 - 8; 8: 4, 12; 4: 2, 6; 12: 10, 13; 2: 1, 3; 6: 5, 7; 10: 9, 11; leaves 1 3 5 7 9 11 13.
    const int64_t up[14] = {-1, 2, 4, 2, 8, 6, 4, 6, 0, 10, 12, 10, 8, 12};
    for (int64_t v = 0; v < 14; ++v) EXPECT_EQ(qt::btree_links(14, v).up, up[v]) << v;
    EXPECT_EQ(qt::btree_links(14, 0).down0, 8);
    EXPECT_EQ(qt::btree_links(14, 0).down1, -1);
    EXPECT_EQ(qt::btree_links(14, 12).down0, 10);
    EXPECT_EQ(qt::btree_links(14, 12).down1, 13);
    EXPECT_EQ(qt::btree_links(14, 8).down1, 12);
    EXPECT_EQ(qt::btree_links(1, 0).down0, -1);
}

TEST(TypedPathsTree, EveryNodeCountGivesATree) {
    for (int64_t n = 1; n <= 1000; ++n) {
        std::vector<int> seen(static_cast<size_t>(n), 0);
        for (int64_t v = 0; v < n; ++v) {
            const auto l = qt::btree_links(n, v);
            for (int64_t c : {l.down0, l.down1}) {
                if (c < 0) continue;
                ASSERT_LT(c, n);
                ASSERT_EQ(qt::btree_links(n, c).up, v) << "n " << n << " node " << c;
                ++seen[static_cast<size_t>(c)];
            }
            if (v > 0) {
                ASSERT_GE(l.up, 0);
            }
        }
        EXPECT_EQ(seen[0], 0);
        int depth_max = 0;
        for (int64_t v = 1; v < n; ++v) {
            ASSERT_EQ(seen[static_cast<size_t>(v)], 1) << "n " << n << " node " << v;
            int d = 0;
            for (int64_t m = v; m != 0; m = qt::btree_links(n, m).up) ASSERT_LT(++d, 64);
            depth_max = std::max(depth_max, d);
        }
        EXPECT_LE(depth_max, std::bit_width(static_cast<uint64_t>(n))) << n;
    }
}

// ---- by hand --------------------------------------------------------------------------------------

PathConfig config(PathKind k, int64_t n, int64_t g, int64_t m, int64_t block) {
    PathConfig c;
    c.path = k;
    c.ranks = n;
    c.ranks_per_node = g;
    c.elements = m;
    c.block = block;
    qt::apply_element_type(c);
    return c;
}

TEST(TypedPathsByHand, Bf16RingRoundsEveryAdd) {
    // N = 2, S = 1: chunk 0 is X_1 + X_0, chunk 1 is X_0 + X_1, each one add in bfloat16.
    //   X_1[0] = 1, X_0[0] = 2^-9 + 2^-17 -> cast to 2^-9 (a tie of 1 + 2^-8 at 8 bits, to even);
    //   1 + 2^-9 -> 1 (below half of bf16's ulp 2^-7 at 1).
    //   X_0[1] = 1, X_1[1] = 3 * 2^-9 -> 1 + 2^-7 (above the half).
    const PathConfig c = config(PathKind::kBf16RingRs, 2, 2, 2, 1);
    const std::vector<float> x{0x1p-9f + 0x1p-17f, 1.0f, 1.0f, 3 * 0x1p-9f};
    auto r = qt::reference::run_path_plain(c, x);
    ASSERT_TRUE(r.ok()) << r.error().message;
    ASSERT_EQ(r->size(), 2u);
    EXPECT_EQ((*r)[0].outputs.at(0).values.at(0), 1.0f);
    EXPECT_EQ((*r)[0].contributions.at(0), 0x1p-9f);  // the target is the sum of the cast inputs
    EXPECT_EQ((*r)[1].outputs.at(0).values.at(0), 1.0f + 0x1p-7f);
    EXPECT_EQ((*r)[0].roundings.size(), 1u);
    EXPECT_EQ(qt::contribution_k((*r)[0], (*r)[0].outputs[0], 2), (std::vector<int32_t>{1, 1}));
    // fp16: 1 + 2^-11 is a tie at 11 bits -> 1; 1 + 3 * 2^-11 -> 1 + 2^-9 (tie to even upward).
    const PathConfig h = config(PathKind::kFp16RingRs, 2, 2, 2, 1);
    auto r16 = qt::reference::run_path_plain(h, std::vector<float>{0x1p-11f, 1.0f, 1.0f, 3 * 0x1p-11f});
    ASSERT_TRUE(r16.ok());
    EXPECT_EQ((*r16)[0].outputs.at(0).values.at(0), 1.0f);
    EXPECT_EQ((*r16)[1].outputs.at(0).values.at(0), 1.0f + 0x1p-9f);
}

TEST(TypedPathsByHand, InputTheTypeCannotHoldIsRefused) {
    const PathConfig c = config(PathKind::kFp16TreeAr, 2, 1, 2, 2);
    auto r = qt::reference::run_path_plain(c, std::vector<float>{1, 2, 3, 70000});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, qt::ErrorCode::kRangeOverflow);
    EXPECT_NE(r.error().message.find("rank 1 element 1"), std::string::npos) << r.error().message;
    EXPECT_NE(r.error().message.find("overflows fp16"), std::string::npos) << r.error().message;
    // bf16 holds it.
    EXPECT_TRUE(qt::reference::run_path_plain(config(PathKind::kBf16TreeAr, 2, 1, 2, 2), std::vector<float>{1, 2, 3, 70000}).ok());
}

// NCCL's FP8 add (D41): fl8sat(fl16(a + b)).
TEST(TypedPathsByHand, Fp8AddsSaturateAtTheLargestValue) {
    using qt::reference::round_to_accum;
    using qt::reference::saturates_in;
    // e4m3: 448 + 32 = 480 is past 464 (448 + half its ulp of 32): 448, a clamp; 240 + 224 = 464 is the
    // tie between 448 (mantissa 110, even) and 480: 448 by rounding, no clamp; 464.25 clamps.
    EXPECT_EQ(round_to_accum(480.0f, Accum::kFp8E4m3), 448.0f);
    EXPECT_TRUE(saturates_in(480.0f, Accum::kFp8E4m3));
    EXPECT_EQ(round_to_accum(464.0f, Accum::kFp8E4m3), 448.0f);
    EXPECT_FALSE(saturates_in(464.0f, Accum::kFp8E4m3));
    EXPECT_TRUE(saturates_in(464.25f, Accum::kFp8E4m3));
    EXPECT_EQ(round_to_accum(-1000.0f, Accum::kFp8E4m3), -448.0f);
    // 1 + 1/16 is a tie at 4 bits: 1 (even); 1 + 3/16: 1.25; the least subnormal 2^-9 and half of it.
    EXPECT_EQ(round_to_accum(1.0625f, Accum::kFp8E4m3), 1.0f);
    EXPECT_EQ(round_to_accum(1.1875f, Accum::kFp8E4m3), 1.25f);
    EXPECT_EQ(round_to_accum(0x1p-9f + 0x1p-9f, Accum::kFp8E4m3), 0x1p-8f);
    EXPECT_EQ(round_to_accum(0x1p-10f, Accum::kFp8E4m3), 0.0f);  // a tie between 0 and 2^-9: 0
    // e5m2: 57344 + 57344 overflows binary16 (an infinite __hadd), then saturates: 57344, a clamp;
    // 61440 is the tie between 57344 (mantissa 11, odd) and 65536: rounds up, so it clamps.
    EXPECT_EQ(round_to_accum(114688.0f, Accum::kFp8E5m2), 57344.0f);
    EXPECT_TRUE(saturates_in(114688.0f, Accum::kFp8E5m2));
    EXPECT_TRUE(saturates_in(61440.0f, Accum::kFp8E5m2));
    EXPECT_FALSE(saturates_in(61400.0f, Accum::kFp8E5m2));  // binary16 61408: 7.496 x 8192, 57344
    EXPECT_FALSE(saturates_in(1e30f, Accum::kFp16));
    // Through a ring of N = 2 (one add each chunk): 448 + 32 clamps, the ledger says by 32.
    const PathConfig c = config(PathKind::kFp8E4m3RingRs, 2, 2, 2, 1);
    auto r = qt::reference::run_path_plain(c, std::vector<float>{448.0f, 1.0f, 32.0f, 2.0f});
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ((*r)[0].outputs.at(0).values.at(0), 448.0f);
    EXPECT_EQ((*r)[0].outputs.at(0).saturation_count.at(0), 1);
    EXPECT_EQ((*r)[0].outputs.at(0).saturation_excess.at(0), 32.0);
    EXPECT_EQ((*r)[1].outputs.at(0).values.at(0), 3.0f);
    EXPECT_EQ((*r)[1].outputs.at(0).saturation_count.at(0), 0);
    qt::reference::PathChecker check(c);
    for (const auto& col : *r) check.add(col);
    EXPECT_TRUE(check.stats().bound_holds) << check.stats().first_violation;
    EXPECT_EQ(check.stats().saturated_outputs, 1);
    EXPECT_EQ(check.stats().max_saturations, 1);
    // ncclAvg (--divide pre): every input times fl8(1/3) = 0.34375 (+3.1%): three ranks of 104 give
    // 104 * 0.34375 = 35.75 -> 36, 36 + 36 = 72, 72 + 36 = 108, a tie between 104 and 112: 112.
    EXPECT_EQ(qt::reference::avg_factor(3, Accum::kFp8E4m3), 0.34375f);
    EXPECT_EQ(qt::reference::avg_factor(3, Accum::kFp8E5m2), 0.3125f);
    EXPECT_EQ(qt::reference::avg_factor(4, Accum::kFp8E4m3), 0.25f);
    PathConfig avg = config(PathKind::kFp8E4m3RingAr, 3, 3, 3, 1);
    avg.divide = qt::Divide::kPre;
    auto ra = qt::reference::run_path_plain(avg, std::vector<float>(9, 104.0f));
    ASSERT_TRUE(ra.ok()) << ra.error().message;
    for (const auto& col : *ra)
        for (const auto& row : col.outputs) EXPECT_EQ(row.values.at(0), 112.0f);
    qt::reference::PathChecker avg_check(avg);
    for (const auto& col : *ra) avg_check.add(col);
    EXPECT_TRUE(avg_check.stats().bound_holds) << avg_check.stats().first_violation;
    EXPECT_EQ(avg_check.stats().max_abs_error, 8.0);  // against the exact mean, 104
    avg.divide = qt::Divide::kPost;
    EXPECT_FALSE(qt::validate(avg).ok());
    // An input past FP8's range is refused (its inputs are FP8 tensors), as fp16's past binary16.
    auto bad = qt::reference::run_path_plain(c, std::vector<float>{465.0f, 1.0f, 32.0f, 2.0f});
    ASSERT_FALSE(bad.ok());
    EXPECT_NE(bad.error().message.find("overflows fp8-e4m3"), std::string::npos) << bad.error().message;
}

// Every finite FP8 value, from the bit layout: e4m3 (bias 7, no inf, S.1111.111 NaN), e5m2 (bias
// 15, IEEE's inf and NaN), with each value's code.
std::vector<std::pair<double, int>> fp8_values(Accum t) {
    std::vector<std::pair<double, int>> v;
    const bool e4 = t == Accum::kFp8E4m3;
    const int mbits = e4 ? 3 : 2, bias = e4 ? 7 : 15, emax_field = e4 ? 15 : 31;
    for (int code = 0; code < 256; ++code) {
        const int sign = code >> 7, e = (code >> mbits) & ((1 << (7 - mbits)) - 1), m = code & ((1 << mbits) - 1);
        if (e4 && e == emax_field && m == (1 << mbits) - 1) continue;  // NaN
        if (!e4 && e == emax_field) continue;                           // inf, NaN
        const double mag = e == 0 ? std::ldexp(m, 1 - bias - mbits) : std::ldexp((1 << mbits) + m, e - bias - mbits);
        v.push_back({sign ? -mag : mag, code});
    }
    return v;
}

// For every pair of finite FP8 values, the reference's fl8sat(fl16(a + b)) is the FP8 value nearest
// to the exact sum (ties to the even code), a sum past the largest value being that value: the
// binary16 step changes nothing, which is what lets the bounds use FP8's own u (D41). The nearest is
// found on the sorted list of values with one more point above the largest (480, code 0x7F's
// mantissa: odd; 65536: even), whose choice is the clamp.
TEST(TypedPathsExact, EveryFp8PairAddsToTheNearestValue) {
    for (Accum t : {Accum::kFp8E4m3, Accum::kFp8E5m2}) {
        auto vals = fp8_values(t);
        std::vector<std::pair<double, int>> grid;  // non-negative values, code parity, and the virtual point
        for (const auto& [x, code] : vals)
            if (x >= 0 && !(x == 0 && code != 0)) grid.push_back({x, code & 1});
        std::sort(grid.begin(), grid.end());
        const double mx = grid.back().first;
        grid.push_back(t == Accum::kFp8E4m3 ? std::pair<double, int>{480.0, 1} : std::pair<double, int>{65536.0, 0});
        int64_t pairs = 0, clamps = 0;
        for (const auto& [a, ca] : vals)
            for (const auto& [b, cb] : vals) {
                const double v = a + b, m = std::fabs(v);  // exact in binary64
                size_t k = 0;
                while (k + 1 < grid.size() && grid[k + 1].first <= m) ++k;
                size_t pick = k;
                if (k + 1 < grid.size()) {
                    const double dl = m - grid[k].first, dh = grid[k + 1].first - m;
                    if (dh < dl || (dh == dl && grid[k + 1].second == 0)) pick = k + 1;
                }
                const bool clamp = pick == grid.size() - 1 || m > grid.back().first;
                const double want = std::copysign(clamp ? mx : grid[pick].first, v);
                const float sum = static_cast<float>(a) + static_cast<float>(b);
                const float got = qt::reference::round_to_accum(sum, t);
                ASSERT_EQ(static_cast<double>(got), want) << qt::to_string(t) << " " << a << " + " << b;
                if (want != 0) {
                    ASSERT_EQ(std::signbit(got), std::signbit(want));
                }
                ASSERT_EQ(qt::reference::saturates_in(sum, t), clamp) << qt::to_string(t) << " " << a << " + " << b;
                ++pairs;
                clamps += clamp;
            }
        EXPECT_EQ(pairs, static_cast<int64_t>(vals.size() * vals.size()));
        EXPECT_GT(clamps, 0);
    }
}

TEST(TypedPathsByHand, ConfigErrors) {
    PathConfig c = config(PathKind::kBf16RingRs, 4, 4, 8, 2);
    c.accum = Accum::kFp16;
    auto st = qt::validate(c);
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.error().message.find("bf16-ring-rs sums in bf16"), std::string::npos) << st.error().message;
    c.accum = Accum::kFp32;
    EXPECT_FALSE(qt::validate(c).ok());
    qt::apply_element_type(c);
    EXPECT_TRUE(qt::validate(c).ok());
    EXPECT_EQ(c.format_name(), "bf16");
}

// ---- exact arithmetic -------------------------------------------------------------------------------

// A value of the type: a random binary32 bit pattern with its exponent limited, rounded to the type;
// some zeros, subnormals of the type, and exact negatives of earlier values (cancellation).
float value_of_type(Accum t, int max_exp, int spread) {
    const int kind = *rc::gen::inRange(0, 10);
    if (kind == 0) return 0.0f;
    float v;
    if (kind == 1) {
        const float least = t == Accum::kFp16 ? 0x1p-24f : t == Accum::kFp8E4m3 ? 0x1p-9f : t == Accum::kFp8E5m2 ? 0x1p-16f : 0x1p-133f;
        v = least * static_cast<float>(*rc::gen::inRange(1, saturating(t) ? 8 : 64));
    } else {
        const int e = *rc::gen::inRange(max_exp - spread, max_exp);
        v = std::ldexp(1.0f + static_cast<float>(*rc::gen::inRange(0, 1 << 23)) * 0x1p-23f, e);
    }
    if (*rc::gen::arbitrary<bool>()) v = -v;
    return qt::reference::round_to_accum(v, t);
}

struct Sum {
    float v = 0;
    Exact abs_r;                 // sum of |r| over the adds behind v
    Exact clamped;               // FP8 (D41): sum of |a + b| - max over the adds that saturated
    int32_t clamps = 0;
    std::vector<int32_t> k;      // per contributor, the adds it went through (-1: not held)
    bool finite = true;
};

Sum add_sums(const Sum& a, const Sum& b, Accum t) {
    Sum s;
    s.v = qt::reference::round_to_accum(a.v + b.v, t);  // exact in binary32 first (24 >= 2p + 2)
    s.finite = a.finite && b.finite && std::isfinite(s.v);
    s.abs_r = a.abs_r + b.abs_r;
    s.clamped = a.clamped + b.clamped;
    s.clamps = a.clamps + b.clamps;
    if (saturating(t)) {  // a clamp: exactly when the exact sum's magnitude rounds past the largest value
        const Exact v = (Exact(a.v) + Exact(b.v)).abs(), mx = Exact(qt::saturation_max(t));
        if (v > mx && std::fabs(qt::reference::round_to_accum(a.v + b.v, t)) == qt::saturation_max(t) &&
            qt::reference::saturates_in(a.v + b.v, t)) {
            s.clamped += v - mx;
            ++s.clamps;
        }
    }
    if (std::isfinite(s.v)) s.abs_r += Exact(s.v).abs();
    s.k.resize(a.k.size());
    for (size_t j = 0; j < a.k.size(); ++j) {
        const int32_t h = a.k[j] >= 0 ? a.k[j] : b.k[j];
        s.k[j] = h >= 0 ? h + 1 : -1;
    }
    return s;
}

Sum leaf(const std::vector<float>& x, int64_t n, int64_t m, int64_t rank, int64_t i) {
    Sum s;
    s.v = x[static_cast<size_t>(rank * m + i)];
    s.k.assign(static_cast<size_t>(n), -1);
    s.k[static_cast<size_t>(rank)] = 0;
    return s;
}

// The schedules of D26, written again: element i of chunk ch.
Sum ring_sum(const PathConfig& c, const std::vector<float>& x, int64_t ch, int64_t i) {
    const int64_t n = c.ranks;
    Sum s = leaf(x, n, c.elements, (ch + 1) % n, i);
    for (int64_t h = 1; h < n; ++h) s = add_sums(s, leaf(x, n, c.elements, (ch + 1 + h) % n, i), c.accum);
    return s;
}
Sum tree_sum(const PathConfig& c, const std::vector<float>& x, int64_t node, int64_t i) {
    const int64_t g = c.ranks_per_node, n = c.ranks;
    Sum s = leaf(x, n, c.elements, node * g + g - 1, i);
    for (int64_t l = g - 2; l >= 0; --l) s = add_sums(leaf(x, n, c.elements, node * g + l, i), s, c.accum);
    const auto links = qt::btree_links(c.nodes(), node);
    if (links.down0 >= 0) s = add_sums(s, tree_sum(c, x, links.down0, i), c.accum);
    if (links.down1 >= 0) s = add_sums(s, tree_sum(c, x, links.down1, i), c.accum);
    return s;
}

void check_exact(PathKind kind) {
    PathConfig c;
    c.path = kind;
    c.ranks = *rc::gen::weightedOneOf<int64_t>({{4, rc::gen::inRange<int64_t>(1, 13)}, {1, rc::gen::inRange<int64_t>(13, 41)}});
    std::vector<int64_t> divisors;
    for (int64_t g = 1; g <= c.ranks; ++g)
        if (c.ranks % g == 0) divisors.push_back(g);
    c.ranks_per_node = *rc::gen::elementOf(divisors);
    c.elements = c.ranks * *rc::gen::inRange<int64_t>(1, 4);
    c.block = *rc::gen::inRange<int64_t>(1, 5);
    qt::apply_element_type(c);
    RC_TAG(qt::path_info(kind).name);
    const Accum t = c.accum;
    const qt::AccumType at = qt::accum_type(t);
    // Near the top of the range now and then, so that sums overflow.
    const int top = t == Accum::kFp16 ? 15 : t == Accum::kFp8E4m3 ? 8 : t == Accum::kFp8E5m2 ? 15 : 127;
    const bool near_top = *rc::gen::inRange(0, 5) == 0;
    // (FP8: at the very top, as RapidCheck's small sizes pick the low end of a range, and FP8's range is short.)
    const int max_exp = near_top ? (saturating(t) ? top + 1 : *rc::gen::inRange(top - 3, top + 1))
                                 : *rc::gen::inRange(saturating(t) ? -8 : -12, saturating(t) ? 6 : 12);
    const int spread = near_top ? 2 : *rc::gen::inRange(0, saturating(t) ? 8 : 13);
    std::vector<float> x(static_cast<size_t>(c.ranks * c.elements));
    for (float& v : x) {
        v = value_of_type(t, max_exp, spread);
        if (!std::isfinite(v)) v = 0;  // the type's largest finite magnitudes stay; what rounds to inf does not
        if (*rc::gen::inRange(0, 8) == 0 && &v != x.data()) v = -*(&v - 1);
    }
    auto ref = qt::reference::run_path_plain(c, x);
    RC_ASSERT(ref.ok());
    const Exact u = Exact(at.u), one = Exact::from_int(1);
    bool overflowed = false, rounded = false, clamped = false;
    for (const auto& col : *ref) {
        const int64_t ch = col.first / c.shard();
        std::vector<double> absmax(static_cast<size_t>(c.ranks), 0.0);
        for (int64_t j = 0; j < c.ranks; ++j)
            for (int64_t i = 0; i < col.len; ++i)
                absmax[static_cast<size_t>(j)] = std::max(absmax[static_cast<size_t>(j)], std::fabs(static_cast<double>(x[static_cast<size_t>(j * c.elements + col.first + i)])));
        const std::vector<int32_t> kt = qt::expected_ks(c, col.first);
        const double prio = qt::reference::a_priori_bound(c, col.first, ch, absmax);
        // sum_j A_j (1 + u)((1 + u)^k_j - 1), exactly.
        Exact lhs;
        for (int64_t j = 0; j < c.ranks; ++j) {
            Exact p = one;
            for (int32_t q = 0; q < kt[static_cast<size_t>(j)]; ++q) p = p * (one + u);
            lhs += Exact(absmax[static_cast<size_t>(j)]) * (one + u) * (p - one);
        }
        RC_ASSERT(col.outputs.size() == static_cast<size_t>(is_ar(kind) ? c.ranks : 1));
        std::vector<Sum> sums;
        for (int64_t i = 0; i < col.len; ++i)
            sums.push_back(is_tree(kind) ? tree_sum(c, x, 0, col.first + i) : ring_sum(c, x, ch, col.first + i));
        for (const auto& row : col.outputs) {
            RC_ASSERT(qt::contribution_k(col, row, c.ranks) == kt);
            for (int64_t i = 0; i < col.len; ++i) {
                const Sum& s = sums[static_cast<size_t>(i)];
                const float got = row.values[static_cast<size_t>(i)];
                RC_ASSERT(std::bit_cast<uint32_t>(got) == std::bit_cast<uint32_t>(s.v));
                RC_ASSERT(s.k == kt);
                if (!s.finite) {  // an overflow: a non-finite output, and no bound to pass it
                    overflowed = true;
                    RC_ASSERT(!std::isfinite(got));
                    RC_ASSERT(std::isinf(prio));
                    continue;
                }
                Exact target;
                for (int64_t j = 0; j < c.ranks; ++j) target += Exact(x[static_cast<size_t>(j * c.elements + col.first + i)]);
                const Exact err = (Exact(got) - target).abs();
                if (err.sign() != 0) rounded = true;
                // The ledger counts the clamps this value went through (D41).
                if (saturating(t)) RC_ASSERT(row.saturation_count.at(static_cast<size_t>(i)) == s.clamps);
                if (s.clamps > 0) {  // the error is within the roundings' bound plus what the clamps removed
                    clamped = true;
                    RC_ASSERT((one - u) * (err - s.clamped) <= u * s.abs_r);
                    RC_ASSERT(std::isinf(prio));  // a clamp was possible: no a-priori bound
                    continue;
                }
                RC_ASSERT((one - u) * err <= u * s.abs_r);  // |error| <= a_posteriori
                RC_ASSERT(u * s.abs_r <= lhs);              // a_posteriori <= the a-priori bound of k
                if (std::isfinite(prio)) RC_ASSERT(Exact(prio) * (one - u) >= lhs);  // the checker's double is above it
                // The ledger's double of sum |r| is that sum (to binary64 rounding).
                RC_ASSERT(std::fabs(row.add_abs_sum[static_cast<size_t>(i)] - s.abs_r.to_double()) <=
                          1e-12 * s.abs_r.to_double());
            }
        }
        // The checker agrees on the column: no violation where nothing overflowed.
        qt::reference::PathChecker check(c);
        check.add(col);
        const auto st = check.stats();
        if (st.nonfinite_outputs == 0) RC_ASSERT(st.bound_holds);
        else RC_ASSERT(!st.bound_holds);
    }
    RC_CLASSIFY(clamped, "a sum saturated");
    RC_CLASSIFY(overflowed, "a sum overflowed");
    RC_CLASSIFY(rounded, "an output with an error");
}

}  // namespace

RC_GTEST_PROP(TypedPathsExact, Bf16RingRs, ()) { check_exact(PathKind::kBf16RingRs); }
RC_GTEST_PROP(TypedPathsExact, Fp16RingRs, ()) { check_exact(PathKind::kFp16RingRs); }
RC_GTEST_PROP(TypedPathsExact, Bf16RingAr, ()) { check_exact(PathKind::kBf16RingAr); }
RC_GTEST_PROP(TypedPathsExact, Fp16RingAr, ()) { check_exact(PathKind::kFp16RingAr); }
RC_GTEST_PROP(TypedPathsExact, Bf16TreeAr, ()) { check_exact(PathKind::kBf16TreeAr); }
RC_GTEST_PROP(TypedPathsExact, Fp16TreeAr, ()) { check_exact(PathKind::kFp16TreeAr); }
RC_GTEST_PROP(TypedPathsExact, NcclFp8E4m3RingRs, ()) { check_exact(PathKind::kFp8E4m3RingRs); }
RC_GTEST_PROP(TypedPathsExact, NcclFp8E5m2RingRs, ()) { check_exact(PathKind::kFp8E5m2RingRs); }
RC_GTEST_PROP(TypedPathsExact, NcclFp8E4m3RingAr, ()) { check_exact(PathKind::kFp8E4m3RingAr); }
RC_GTEST_PROP(TypedPathsExact, NcclFp8E5m2RingAr, ()) { check_exact(PathKind::kFp8E5m2RingAr); }
RC_GTEST_PROP(TypedPathsExact, NcclFp8E4m3TreeAr, ()) { check_exact(PathKind::kFp8E4m3TreeAr); }
RC_GTEST_PROP(TypedPathsExact, NcclFp8E5m2TreeAr, ()) { check_exact(PathKind::kFp8E5m2TreeAr); }

TEST(TypedPathsExact, KindsAreTheTwelveTypedPaths) {
    int n = 0;
    for (const auto& p : qt::all_paths()) n += qt::typed_path(p.kind);
    EXPECT_EQ(n, static_cast<int>(typed_kinds().size()));
    for (PathKind k : typed_kinds()) EXPECT_FALSE(qt::path_info(k).quantized);
}
