// Tests of the plain reference schedules (reference/src/paths.cpp, NUMERICS.md section 3, D11, D12).
//
// The hand-checked cases use int8 (qmax = 127, s = absmax / 127, q = rne(x / s), x̂ = q s) with
// values chosen so that every scale is an integer: a block whose absmax is 127 m has s = m exactly,
// so the arithmetic can be followed in the comments. Then the ledgers: k read from every output row
// equals NUMERICS.md's table (expected_k) for every path over several configurations.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "qtransit/common/transit.hpp"
#include "qtransit/reference/formats.hpp"
#include "qtransit/reference/paths.hpp"

namespace qtransit::reference {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
uint32_t bits(float v) { return std::bit_cast<uint32_t>(v); }

FormatSpec int8() { return {FormatKind::kSym, 8}; }
FormatSpec ds8() { return {FormatKind::kDs, 8}; }

PathConfig cfg(PathKind path, int64_t n, int64_t g, int64_t m, int64_t b, FormatSpec f = int8(),
               Accum accum = Accum::kFp32) {
    PathConfig c;
    c.path = path;
    c.format = f;
    c.block = b;
    c.ranks = n;
    c.ranks_per_node = g;
    c.elements = m;
    c.accum = accum;
    apply_element_type(c);  // the 16-bit paths sum in their own type (D26)
    return c;
}

std::vector<ColumnRecord> run(const PathConfig& c, const std::vector<float>& x) {
    auto r = run_path_plain(c, x);
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
    return r.ok() ? std::move(r).value() : std::vector<ColumnRecord>{};
}

void expect_same(const std::vector<float>& got, const std::vector<float>& want, const std::string& what = "") {
    ASSERT_EQ(got.size(), want.size()) << what;
    for (size_t i = 0; i < got.size(); ++i)
        EXPECT_EQ(bits(got[i]), bits(want[i])) << what << " element " << i << ": got " << got[i] << ", want "
                                               << want[i];
}

const ColumnRecord& column_at(const std::vector<ColumnRecord>& recs, int64_t first) {
    for (const auto& r : recs)
        if (r.first == first) return r;
    ADD_FAILURE() << "no column at " << first;
    return recs.front();
}

const OutputRow& row_of(const ColumnRecord& rec, int64_t rank) {
    for (const auto& r : rec.outputs)
        if (r.rank == rank) return r;
    ADD_FAILURE() << "no row for rank " << rank;
    return rec.outputs.front();
}

const QuantEvent& ev(const ColumnRecord& rec, const OutputRow& row, size_t i) {
    return rec.events.at(static_cast<size_t>(row.event_ids.at(i)));
}

// The full M-element tensor a rank holds, assembled from the columns.
std::vector<float> held(const std::vector<ColumnRecord>& recs, int64_t m, int64_t rank) {
    std::vector<float> out(static_cast<size_t>(m), std::numeric_limits<float>::quiet_NaN());
    for (const auto& rec : recs)
        for (const auto& row : rec.outputs)
            if (row.rank == rank)
                for (int64_t i = 0; i < rec.len; ++i) out[static_cast<size_t>(rec.first + i)] = row.values[i];
    return out;
}

std::vector<float> random_input(int64_t n, int64_t m, uint32_t seed, float scale = 1.0f) {
    std::mt19937 gen(seed);
    std::normal_distribution<float> d(0.0f, scale);
    std::vector<float> x(static_cast<size_t>(n * m));
    for (auto& v : x) v = d(gen);
    return x;
}

// Per element k: how many events whose block covers element i (through column_offset) carried
// contributor j.
int32_t element_k(const ColumnRecord& rec, const OutputRow& row, int64_t i, int32_t j, int64_t n) {
    int32_t k = 0;
    for (int32_t id : row.event_ids) {
        const QuantEvent& e = rec.events[static_cast<size_t>(id)];
        const int64_t at = i + e.column_offset;
        if (at < 0 || at >= static_cast<int64_t>(e.x.size())) continue;
        const auto& c = e.contributors;
        if (!c.list.empty()) {
            k += static_cast<int32_t>(std::count(c.list.begin(), c.list.end(), j));
        } else {
            for (int64_t t = 0; t < c.count; ++t)
                if ((c.first + t) % n == j) ++k;
        }
    }
    return k;
}

// ---- columns ---------------------------------------------------------------------------------------

TEST(PathsColumns, ColumnsRestartAtEveryChunkAndAreIncreasing) {
    // N = 2, M = 10, S = 5, B = 2: chunk 0 blocks [0,2) [2,4) [4,5), chunk 1 [5,7) [7,9) [9,10).
    auto recs = run(cfg(PathKind::kA2aRs, 2, 1, 10, 2), random_input(2, 10, 1));
    std::vector<std::pair<int64_t, int64_t>> got;
    for (const auto& r : recs) got.emplace_back(r.first, r.len);
    EXPECT_EQ(got, (std::vector<std::pair<int64_t, int64_t>>{{0, 2}, {2, 2}, {4, 1}, {5, 2}, {7, 2}, {9, 1}}));
}

TEST(PathsColumns, HpzColumnsAreSecondaryBlocks) {
    // N = 4, G = 2, M = 12: S = 3, M/G = 6, B = 4: secondary blocks [0,4) [4,6) [6,10) [10,12).
    auto recs = run(cfg(PathKind::kHpzAgRequant, 4, 2, 12, 4), random_input(4, 12, 2));
    std::vector<std::pair<int64_t, int64_t>> got;
    for (const auto& r : recs) got.emplace_back(r.first, r.len);
    EXPECT_EQ(got, (std::vector<std::pair<int64_t, int64_t>>{{0, 4}, {4, 2}, {6, 4}, {10, 2}}));
}

// ---- ring-rs ---------------------------------------------------------------------------------------

TEST(PathsRingRs, N1IsTheInput) {
    const std::vector<float> x{1.5f, -2.25f, 3.0f};
    auto recs = run(cfg(PathKind::kRingRs, 1, 1, 3, 2), x);
    ASSERT_EQ(recs.size(), 2u);
    expect_same(held(recs, 3, 0), x);
    EXPECT_TRUE(recs[0].outputs[0].event_ids.empty());
}

TEST(PathsRingRs, N2HandChecked) {
    // N = 2, M = 4, S = 2, B = 2. X_0 = {254, 3, 254, 3}, X_1 = {127, 1, 1, 2}.
    // chunk 0 starts on rank 1: P = {127, 1}; Q: s = 1, q = {127, 1}, D = {127, 1};
    //   rank 0: P = D + X_0[0:2] = {381, 4}.
    // chunk 1 starts on rank 0: P = {254, 3}; Q: s = 2, q = {127, rne(1.5) = 2}, D = {254, 4};
    //   rank 1: P = {254 + 1, 4 + 2} = {255, 6}.
    const std::vector<float> x{254, 3, 254, 3, 127, 1, 1, 2};
    auto recs = run(cfg(PathKind::kRingRs, 2, 1, 4, 2), x);
    ASSERT_EQ(recs.size(), 2u);
    const auto& c0 = recs[0];
    ASSERT_EQ(c0.outputs.size(), 1u);
    EXPECT_EQ(c0.outputs[0].rank, 0);
    expect_same(c0.outputs[0].values, {381, 4});
    expect_same(recs[1].outputs[0].values, {255, 6});
    EXPECT_EQ(recs[1].outputs[0].rank, 1);
    // the ledger of chunk 0: one hop, rank 1 -> rank 0, carrying rank 1's contribution
    ASSERT_EQ(c0.outputs[0].event_ids.size(), 1u);
    const QuantEvent& e = ev(c0, c0.outputs[0], 0);
    EXPECT_EQ(e.stage, 0);
    EXPECT_EQ(e.from_rank, 1);
    EXPECT_EQ(e.to_rank, 0);
    EXPECT_EQ(e.scale, 1.0f);
    EXPECT_EQ(e.offset, 0.0f);
    EXPECT_EQ(e.contributors.first, 1);
    EXPECT_EQ(e.contributors.count, 1);
    expect_same(e.x, {127, 1});
    EXPECT_EQ(e.codes, (std::vector<int32_t>{127, 1}));
    EXPECT_EQ(ev(recs[1], recs[1].outputs[0], 0).codes, (std::vector<int32_t>{127, 2}));
    EXPECT_EQ(c0.outputs[0].add_abs_sum, (std::vector<double>{381, 4}));
    EXPECT_EQ(c0.outputs[0].add_count, (std::vector<int32_t>{1, 1}));
    EXPECT_TRUE(c0.outputs[0].term_round_abs_sum.empty());
    EXPECT_TRUE(c0.outputs[0].term_round_count.empty());
    // contributions: the N input rows of the column
    EXPECT_EQ(c0.contribution_rows, 2);
    expect_same(c0.contributions, {254, 3, 127, 1});
    EXPECT_TRUE(c0.first_block_absmax.empty());
}

TEST(PathsRingRs, N4HandChecked) {
    // N = 4, M = 8, S = 2, B = 2; X_r[2c] = 127 (r + 1), X_r[2c+1] = 1.
    // chunk 0 starts on rank 1: P = {254, 1}: s = 2, q = {127, rne(0.5) = 0}, D = {254, 0};
    //   rank 2: P = {254 + 381, 0 + 1} = {635, 1}: s = 5, q = {127, 0}, D = {635, 0};
    //   rank 3: P = {635 + 508, 1} = {1143, 1}: s = 9, q = {127, 0};
    //   rank 0: P = {1143 + 127, 1} = {1270, 1}   (the exact sum is {1270, 4}).
    // chunk 2 starts on rank 3: {508, 1} s = 4 -> +127 = 635 (s = 5) -> +254 = 889 (s = 7) -> +381 = 1270,
    //   the second element is lost at every hop as in chunk 0 (chunk 1 too): {1270, 1}.
    // chunk 3 starts on rank 0: {127, 1}: s = 1, exact; rank 1: {381, 2}: s = 3, rne(2/3) = 1, D = {381, 3};
    //   rank 2: {762, 4}: s = 6, rne(4/6) = 1, D = {762, 6}; rank 3: {1270, 7}.
    std::vector<float> x(32);
    for (int r = 0; r < 4; ++r)
        for (int c = 0; c < 4; ++c) {
            x[r * 8 + 2 * c] = 127.0f * (r + 1);
            x[r * 8 + 2 * c + 1] = 1;
        }
    auto recs = run(cfg(PathKind::kRingRs, 4, 4, 8, 2), x);
    ASSERT_EQ(recs.size(), 4u);
    expect_same(recs[0].outputs[0].values, {1270, 1});
    expect_same(recs[1].outputs[0].values, {1270, 1});
    expect_same(recs[2].outputs[0].values, {1270, 1});
    expect_same(recs[3].outputs[0].values, {1270, 7});
    const auto& c0 = recs[0];
    const auto& row = c0.outputs[0];
    ASSERT_EQ(row.event_ids.size(), 3u);
    std::vector<float> scales;
    for (size_t i = 0; i < 3; ++i) {
        const QuantEvent& e = ev(c0, row, i);
        scales.push_back(e.scale);
        EXPECT_EQ(e.stage, static_cast<int32_t>(i));
        EXPECT_EQ(e.from_rank, static_cast<int64_t>(i + 1));
        EXPECT_EQ(e.to_rank, static_cast<int64_t>((i + 2) % 4));
        EXPECT_EQ(e.contributors.first, 1);
        EXPECT_EQ(e.contributors.count, static_cast<int64_t>(i + 1));
        EXPECT_EQ(e.codes, (std::vector<int32_t>{127, 0}));
    }
    EXPECT_EQ(scales, (std::vector<float>{2, 5, 9}));
    EXPECT_EQ(row.add_abs_sum, (std::vector<double>{635 + 1143 + 1270, 3}));
    EXPECT_EQ(row.add_count, (std::vector<int32_t>{3, 3}));
    std::vector<float> scales2;
    for (size_t i = 0; i < 3; ++i) scales2.push_back(ev(recs[2], recs[2].outputs[0], i).scale);
    EXPECT_EQ(scales2, (std::vector<float>{4, 5, 7}));
    EXPECT_EQ(contribution_k(c0, row, 4), (std::vector<int32_t>{0, 3, 2, 1}));
}

// ---- fp32-ring-rs ----------------------------------------------------------------------------------

TEST(PathsFp32RingRs, ExactLeftToRightSums) {
    // N = 4, S = 1: X_0 = -2^24, X_1 = 2^24, X_2 = X_3 = 1 (every element). Chunk c adds
    // X_{c+1} + X_{c+2} + X_{c+3} + X_c left to right:
    //   c = 0: ((2^24 + 1) -> 2^24 (tie to even), + 1 -> 2^24) + (-2^24) = 0
    //   c = 1: ((1 + 1) + (-2^24)) = -16777214 exactly, + 2^24 = 2
    //   c = 2: ((1 + (-2^24)) = -16777215, + 2^24 = 1) + 1 = 2
    //   c = 3: ((-2^24 + 2^24) = 0 + 1) + 1 = 2
    const float t = 16777216.0f;
    std::vector<float> x;
    for (float v : {-t, t, 1.0f, 1.0f})
        for (int i = 0; i < 4; ++i) x.push_back(v);
    auto recs = run(cfg(PathKind::kFp32RingRs, 4, 2, 4, 8), x);
    ASSERT_EQ(recs.size(), 4u);
    expect_same(recs[0].outputs[0].values, {0});
    expect_same(recs[1].outputs[0].values, {2});
    expect_same(recs[2].outputs[0].values, {2});
    expect_same(recs[3].outputs[0].values, {2});
    for (const auto& r : recs) {
        EXPECT_TRUE(r.events.empty());
        EXPECT_TRUE(r.outputs[0].event_ids.empty());
        EXPECT_EQ(r.outputs[0].add_count, (std::vector<int32_t>{3}));
    }
    EXPECT_EQ(recs[0].outputs[0].add_abs_sum, (std::vector<double>{2 * 16777216.0}));
    EXPECT_EQ(recs[1].outputs[0].add_abs_sum, (std::vector<double>{2 + 16777214.0 + 2}));
}

TEST(PathsFp32RingRs, N1AndN2) {
    expect_same(held(run(cfg(PathKind::kFp32RingRs, 1, 1, 2, 1), {0.1f, 0.2f}), 2, 0), {0.1f, 0.2f});
    // N = 2: chunk 0 = X_1[0] + X_0[0], chunk 1 = X_0[1] + X_1[1] (fl32).
    auto recs = run(cfg(PathKind::kFp32RingRs, 2, 1, 2, 1), {0.1f, 0.2f, 0.3f, 0.4f});
    expect_same(recs[0].outputs[0].values, {0.3f + 0.1f});
    expect_same(recs[1].outputs[0].values, {0.2f + 0.4f});
}

// ---- a2a-rs ----------------------------------------------------------------------------------------

TEST(PathsA2aRs, N2HandChecked) {
    // N = 2, M = 4, S = 2, B = 2. X_0 = {254, 3, 127, 1}, X_1 = {127, 1, 254, 5}.
    // chunk 0: D(Q({254, 3})) = {254, 4} (s = 2, 1.5 -> 2); D(Q({127, 1})) = {127, 1}; sum {381, 5}.
    // chunk 1: D(Q({127, 1})) = {127, 1}; D(Q({254, 5})) = {254, 4} (2.5 -> 2); sum {381, 5}.
    auto recs = run(cfg(PathKind::kA2aRs, 2, 2, 4, 2), {254, 3, 127, 1, 127, 1, 254, 5});
    ASSERT_EQ(recs.size(), 2u);
    expect_same(recs[0].outputs[0].values, {381, 5});
    expect_same(recs[1].outputs[0].values, {381, 5});
    const auto& row = recs[1].outputs[0];
    EXPECT_EQ(row.rank, 1);
    ASSERT_EQ(row.event_ids.size(), 2u);
    for (size_t j = 0; j < 2; ++j) {
        const QuantEvent& e = ev(recs[1], row, j);
        EXPECT_EQ(e.stage, 0);
        EXPECT_EQ(e.from_rank, static_cast<int64_t>(j));
        EXPECT_EQ(e.to_rank, 1);
        EXPECT_EQ(e.contributors.first, static_cast<int64_t>(j));
        EXPECT_EQ(e.contributors.count, 1);
    }
    EXPECT_EQ(ev(recs[1], row, 1).codes, (std::vector<int32_t>{127, 2}));
    EXPECT_EQ(row.add_count, (std::vector<int32_t>{1, 1}));
}

TEST(PathsA2aRs, N1QuantizesItsOwnChunk) {
    // N = 1: D(Q({254, 3})) = {254, 4}, one event from 0 to 0, no add.
    auto recs = run(cfg(PathKind::kA2aRs, 1, 1, 2, 2), {254, 3});
    expect_same(recs[0].outputs[0].values, {254, 4});
    EXPECT_EQ(recs[0].outputs[0].event_ids.size(), 1u);
    EXPECT_EQ(recs[0].outputs[0].add_count, (std::vector<int32_t>{0, 0}));
}

TEST(PathsA2aRs, ShortLastBlockIsItsOwnBlock) {
    // N = 1, M = 3, B = 2: blocks {254, 3} and {5} (short). {5}: s = fl32(5/127), q = 127.
    auto recs = run(cfg(PathKind::kA2aRs, 1, 1, 3, 2), {254, 3, 5});
    ASSERT_EQ(recs.size(), 2u);
    EXPECT_EQ(recs[1].len, 1);
    EXPECT_EQ(ev(recs[1], recs[1].outputs[0], 0).codes, (std::vector<int32_t>{127}));
    auto q = quantize(int8(), std::vector<float>{5}, 1);
    ASSERT_TRUE(q.ok());
    expect_same(recs[1].outputs[0].values, q->decoded);
}

// ---- a2a-hier-rs -----------------------------------------------------------------------------------

TEST(PathsA2aHierRs, N4G2HandChecked) {
    // N = 4, G = 2 (2 nodes), M = 8, S = 2, B = 2. Every rank: X[2c] = 127; X_(n,0)[2c+1] = 1,
    // X_(n,1)[2c+1] = 2. Stage 1: D(Q({127, 1})) = {127, 1}, D(Q({127, 2})) = {127, 2}, U = {254, 3}.
    // Stage 2: Q(U): s = 2, q = {127, rne(1.5) = 2}, D = {254, 4}; two nodes: {508, 8} (exact: {508, 6}).
    std::vector<float> x(32);
    for (int r = 0; r < 4; ++r)
        for (int c = 0; c < 4; ++c) {
            x[r * 8 + 2 * c] = 127;
            x[r * 8 + 2 * c + 1] = static_cast<float>(r % 2 + 1);
        }
    auto recs = run(cfg(PathKind::kA2aHierRs, 4, 2, 8, 2), x);
    ASSERT_EQ(recs.size(), 4u);
    for (const auto& rec : recs) expect_same(rec.outputs[0].values, {508, 8});
    // shard 3 (local index 1): stage 0 events go to ranks 1 and 3, stage 1 from 1 and 3 to 3
    const auto& rec = recs[3];
    const auto& row = rec.outputs[0];
    EXPECT_EQ(row.rank, 3);
    ASSERT_EQ(row.event_ids.size(), 6u);
    for (size_t i = 0; i < 4; ++i) {
        const QuantEvent& e = ev(rec, row, i);
        EXPECT_EQ(e.stage, 0);
        EXPECT_EQ(e.from_rank, static_cast<int64_t>(i));
        EXPECT_EQ(e.to_rank, i < 2 ? 1 : 3);
    }
    for (size_t i = 4; i < 6; ++i) {
        const QuantEvent& e = ev(rec, row, i);
        EXPECT_EQ(e.stage, 1);
        EXPECT_EQ(e.from_rank, i == 4 ? 1 : 3);
        EXPECT_EQ(e.to_rank, 3);
        EXPECT_EQ(e.contributors.first, i == 4 ? 0 : 2);
        EXPECT_EQ(e.contributors.count, 2);
        expect_same(e.x, {254, 3});
        EXPECT_EQ(e.codes, (std::vector<int32_t>{127, 2}));
    }
    // adds: one per node's stage-1 sum (2 of them) and one final add
    EXPECT_EQ(row.add_count, (std::vector<int32_t>{3, 3}));
    EXPECT_EQ(row.add_abs_sum, (std::vector<double>{254 + 254 + 508, 3 + 3 + 8}));
}

TEST(PathsA2aHierRs, G1AndOneNode) {
    // G = N: one node, stage 2 is the self-send of U. G = 1: stage 1 is the self-encode of X.
    const auto x = random_input(4, 8, 3);
    for (int64_t g : {1, 4}) {
        auto recs = run(cfg(PathKind::kA2aHierRs, 4, g, 8, 2), x);
        for (const auto& rec : recs) EXPECT_EQ(rec.outputs[0].event_ids.size(), 4u + 4u / g);
    }
}

// ---- tree-rs ---------------------------------------------------------------------------------------

TEST(PathsTreeRs, N4HandChecked) {
    // N = 4, M = 8, S = 2, B = 2; X_r[2c] = 127 (r + 1), X_r[2c+1] = 1. Chunk 0:
    // step 0 (d = 2): rank 2 -> 0: D(Q({381, 1})) (s = 3, 1/3 -> 0) = {381, 0}; rank 0: {127 + 381, 1} = {508, 1}
    //                 rank 3 -> 1: D(Q({508, 1})) (s = 4) = {508, 0};        rank 1: {254 + 508, 1} = {762, 1}
    // step 1 (d = 1): rank 1 -> 0: D(Q({762, 1})) (s = 6) = {762, 0};       rank 0: {1270, 1}
    // Chunks 1 and 3 lose the second element the same way. Chunk 2: rank 0 -> 2: {127, 1} (s = 1,
    // exact): rank 2 {508, 2}; rank 1 -> 3: {254, 1} -> {254, 0}: rank 3 {762, 1}; step 1: rank 3 -> 2:
    // {762, 1} -> {762, 0}: {1270, 2}.
    std::vector<float> x(32);
    for (int r = 0; r < 4; ++r)
        for (int c = 0; c < 4; ++c) {
            x[r * 8 + 2 * c] = 127.0f * (r + 1);
            x[r * 8 + 2 * c + 1] = 1;
        }
    auto recs = run(cfg(PathKind::kTreeRs, 4, 4, 8, 2), x);
    ASSERT_EQ(recs.size(), 4u);
    expect_same(recs[0].outputs[0].values, {1270, 1});
    expect_same(recs[1].outputs[0].values, {1270, 1});
    expect_same(recs[2].outputs[0].values, {1270, 2});
    expect_same(recs[3].outputs[0].values, {1270, 1});
    const auto& rec = recs[0];
    const auto& row = rec.outputs[0];
    ASSERT_EQ(row.event_ids.size(), 3u);
    const QuantEvent& e0 = ev(rec, row, 0);
    const QuantEvent& e1 = ev(rec, row, 1);
    const QuantEvent& e2 = ev(rec, row, 2);
    EXPECT_EQ(e0.stage, 0);
    EXPECT_EQ(e0.from_rank, 2);
    EXPECT_EQ(e0.to_rank, 0);
    EXPECT_EQ(e0.scale, 3.0f);
    EXPECT_EQ(e1.stage, 0);
    EXPECT_EQ(e1.from_rank, 3);
    EXPECT_EQ(e1.to_rank, 1);
    EXPECT_EQ(e1.scale, 4.0f);
    EXPECT_EQ(e2.stage, 1);
    EXPECT_EQ(e2.from_rank, 1);
    EXPECT_EQ(e2.to_rank, 0);
    EXPECT_EQ(e2.scale, 6.0f);
    EXPECT_EQ(e2.contributors.list, (std::vector<int32_t>{1, 3}));
    expect_same(e2.x, {762, 1});
    EXPECT_EQ(row.add_abs_sum, (std::vector<double>{508 + 762 + 1270, 3}));
    EXPECT_EQ(row.add_count, (std::vector<int32_t>{3, 3}));
    EXPECT_EQ(contribution_k(rec, row, 4), (std::vector<int32_t>{0, 1, 1, 2}));
}

TEST(PathsTreeRs, N1AndN2) {
    expect_same(held(run(cfg(PathKind::kTreeRs, 1, 1, 2, 2), {0.5f, 3}), 2, 0), {0.5f, 3});
    // N = 2: chunk 0 = X_0 + D(Q(X_1)), chunk 1 = X_1 + D(Q(X_0)).
    // X_0 = {254, 3, 254, 3}, X_1 = {127, 1, 1, 2}: chunk 0 = {254 + 127, 3 + 1} = {381, 4};
    // chunk 1 = {1 + 254, 2 + 4} = {255, 6} (D(Q({254, 3})) = {254, 4}).
    auto recs = run(cfg(PathKind::kTreeRs, 2, 2, 4, 2), {254, 3, 254, 3, 127, 1, 1, 2});
    expect_same(recs[0].outputs[0].values, {381, 4});
    expect_same(recs[1].outputs[0].values, {255, 6});
}

// ---- two-shot-ar -----------------------------------------------------------------------------------

TEST(PathsTwoShotAr, N2HandChecked) {
    // The a2a-rs case above reduces both chunks to {381, 5}; the owner quantizes it once:
    // s = 381 / 127 = 3, q = {127, rne(5/3) = 2}, D = {381, 6}; every rank holds {381, 6, 381, 6}.
    auto recs = run(cfg(PathKind::kTwoShotAr, 2, 2, 4, 2), {254, 3, 127, 1, 127, 1, 254, 5});
    ASSERT_EQ(recs.size(), 2u);
    for (int64_t r = 0; r < 2; ++r) expect_same(held(recs, 4, r), {381, 6, 381, 6});
    const auto& rec = recs[1];
    ASSERT_EQ(rec.outputs.size(), 2u);
    for (int64_t r = 0; r < 2; ++r) {
        const auto& row = row_of(rec, r);
        ASSERT_EQ(row.event_ids.size(), 3u);
        const QuantEvent& g = ev(rec, row, 2);
        EXPECT_EQ(g.stage, 1);
        EXPECT_EQ(g.from_rank, 1);
        EXPECT_EQ(g.to_rank, r);
        EXPECT_EQ(g.scale, 3.0f);
        EXPECT_EQ(g.codes, (std::vector<int32_t>{127, 2}));
        EXPECT_EQ(row.add_count, (std::vector<int32_t>{1, 1}));
        EXPECT_EQ(row.add_abs_sum, (std::vector<double>{381, 5}));
    }
}

TEST(PathsTwoShotAr, RowsIdenticalAcrossRanks) {
    const auto x = random_input(8, 48, 4);
    auto recs = run(cfg(PathKind::kTwoShotAr, 8, 4, 48, 4), x);
    for (int64_t r = 1; r < 8; ++r) expect_same(held(recs, 48, r), held(recs, 48, 0), "rank " + std::to_string(r));
}

// ---- ring-ag ---------------------------------------------------------------------------------------

TEST(PathsRingAg, N2HandChecked) {
    // W = X_0[0:2] ++ X_1[2:4] = {254, 3, 254, 5}; D(Q) per shard block: {254, 4}, {254, 4}.
    auto recs = run(cfg(PathKind::kRingAg, 2, 1, 4, 2), {254, 3, 0, 0, 0, 0, 254, 5});
    ASSERT_EQ(recs.size(), 2u);
    for (int64_t r = 0; r < 2; ++r) expect_same(held(recs, 4, r), {254, 4, 254, 4});
    const auto& rec = recs[1];
    EXPECT_EQ(rec.contribution_rows, 1);
    expect_same(rec.contributions, {254, 5});
    expect_same(rec.first_block_absmax, {254, 254});
    for (int64_t r = 0; r < 2; ++r) {
        const auto& row = row_of(rec, r);
        ASSERT_EQ(row.event_ids.size(), 1u);
        const QuantEvent& e = ev(rec, row, 0);
        EXPECT_EQ(e.from_rank, 1);
        EXPECT_EQ(e.to_rank, r);
        EXPECT_EQ(e.contributors.first, 1);
        EXPECT_EQ(e.contributors.count, 1);
        EXPECT_EQ(row.add_count, (std::vector<int32_t>{0, 0}));
    }
}

TEST(PathsRingAg, RowsIdenticalAcrossRanks) {
    const auto x = random_input(8, 40, 5);
    for (FormatSpec f : {int8(), FormatSpec{FormatKind::kAsym, 4}, ds8()}) {
        auto recs = run(cfg(PathKind::kRingAg, 8, 4, 40, 3, f), x);
        for (int64_t r = 1; r < 8; ++r) expect_same(held(recs, 40, r), held(recs, 40, 0), f.name());
    }
}

// ---- ring-ag-requant -------------------------------------------------------------------------------

TEST(PathsRingAgRequant, Int8DoesNotDrift) {
    // int8 is idempotent for blocks of normal scale: every rank holds the same bits, equal to ring-ag.
    const auto x = random_input(8, 64, 6);
    auto recs = run(cfg(PathKind::kRingAgRequant, 8, 8, 64, 4), x);
    const auto ag = held(run(cfg(PathKind::kRingAg, 8, 8, 64, 4), x), 64, 0);
    for (int64_t r = 0; r < 8; ++r) expect_same(held(recs, 64, r), ag, "rank " + std::to_string(r));
}

TEST(PathsRingAgRequant, DsInt8Drifts) {
    // ds-int8, block {128, 1} (shard 0, owner rank 0): a = 128, scale = 256 / 256 = 1, step 1;
    // 128 * 1 = 128 is clamped to 127: V_1 = {127, 1}. Rank 2 requantizes V_1: a = 127,
    // scale = fl32(256/254), 127 * scale = 128 clamps again to 127, so V_2[0] = fl16(127 * 254/256)
    // = 126 (126.015625 rounds to 126 in binary16), and V_2[1] = 254/256 = 0.9921875: the values drift
    // hop after hop.
    std::vector<float> x(4 * 8, 0.0f);
    x[0] = 128;
    x[1] = 1;
    auto recs = run(cfg(PathKind::kRingAgRequant, 4, 4, 8, 2, ds8()), x);
    const auto& rec = recs[0];
    expect_same(row_of(rec, 0).values, {127, 1});
    expect_same(row_of(rec, 1).values, {127, 1});
    expect_same(row_of(rec, 2).values, {126, 0.9921875f});
    EXPECT_LT(row_of(rec, 3).values[0], 126.0f);
    // the ledger: rank c+h carries h events, stages 0..h-1, a chain c -> c+1 -> ... -> c+h
    for (int64_t h = 1; h < 4; ++h) {
        const auto& row = row_of(rec, h);
        ASSERT_EQ(row.event_ids.size(), static_cast<size_t>(h));
        for (int64_t i = 0; i < h; ++i) {
            const QuantEvent& e = ev(rec, row, static_cast<size_t>(i));
            EXPECT_EQ(e.stage, i);
            EXPECT_EQ(e.from_rank, i);
            EXPECT_EQ(e.to_rank, i + 1);
        }
    }
    ASSERT_EQ(row_of(rec, 0).event_ids.size(), 1u);
    EXPECT_EQ(ev(rec, row_of(rec, 0), 0).to_rank, 0);
    expect_same(ev(rec, row_of(rec, 3), 2).x, row_of(rec, 2).values);
}

TEST(PathsRingAgRequant, N1HoldsTheDecodingOnce) {
    auto recs = run(cfg(PathKind::kRingAgRequant, 1, 1, 2, 2), {254, 3});
    expect_same(recs[0].outputs[0].values, {254, 4});
    EXPECT_EQ(recs[0].outputs[0].event_ids.size(), 1u);
}

// ---- hpz-ag ----------------------------------------------------------------------------------------

TEST(PathsHpz, FpBackwardEqualsForwardRingAg) {
    for (auto [n, g, m, b] : {std::array<int64_t, 4>{4, 2, 24, 4}, {8, 4, 96, 5}, {4, 4, 16, 8}, {2, 1, 6, 2}}) {
        const auto x = random_input(n, m, 7);
        const auto fwd = run(cfg(PathKind::kRingAg, n, g, m, b), x);
        const auto bwd = run(cfg(PathKind::kHpzAgFp, n, g, m, b), x);
        for (int64_t r = 0; r < n; ++r) expect_same(held(bwd, m, r), held(fwd, m, 0));
    }
}

TEST(PathsHpz, RequantHandChecked) {
    // N = 4, G = 2 (2 nodes), M = 8: S = 2, M/G = 4, B = 4. Primary blocks are the chunks:
    // W = {254, 3 | 127, 1 | ...}: chunk 0 {254, 3} -> {254, 4} (s = 2), chunk 1 {127, 1} -> {127, 1}.
    // Secondary shard 0 = F[0:4) = {254, 4, 127, 1}, one block: s = 2,
    // q = {127, 2, rne(63.5) = 64, rne(0.5) = 0}, backward = {254, 4, 128, 0}.
    std::vector<float> x(32, 0.0f);
    x[0] = 254;
    x[1] = 3;
    x[8 + 2] = 127;
    x[8 + 3] = 1;
    auto recs = run(cfg(PathKind::kHpzAgRequant, 4, 2, 8, 4), x);
    ASSERT_EQ(recs.size(), 2u);
    const auto& rec = recs[0];
    EXPECT_EQ(rec.first, 0);
    EXPECT_EQ(rec.len, 4);
    expect_same(rec.contributions, {254, 3, 127, 1});
    expect_same(rec.first_block_absmax, {254, 254, 127, 127});
    ASSERT_EQ(rec.outputs.size(), 4u);
    for (const auto& row : rec.outputs) {
        expect_same(row.values, {254, 4, 128, 0});
        ASSERT_EQ(row.event_ids.size(), 3u);
        const QuantEvent& p0 = ev(rec, row, 0);
        const QuantEvent& p1 = ev(rec, row, 1);
        const QuantEvent& s = ev(rec, row, 2);
        const int64_t holder = (row.rank / 2) * 2;  // local rank 0 of the row's node holds shard 0
        EXPECT_EQ(p0.stage, 0);
        EXPECT_EQ(p0.from_rank, 0);
        EXPECT_EQ(p0.to_rank, holder);
        EXPECT_EQ(p0.column_offset, 0);
        expect_same(p0.x, {254, 3});
        EXPECT_EQ(p1.from_rank, 1);
        EXPECT_EQ(p1.column_offset, -2);  // column element i is p1.x[i - 2]
        expect_same(p1.x, {127, 1});
        EXPECT_EQ(s.stage, 1);
        EXPECT_EQ(s.from_rank, holder);
        EXPECT_EQ(s.to_rank, row.rank);
        EXPECT_EQ(s.contributors.list, (std::vector<int32_t>{0, 1}));
        EXPECT_EQ(s.codes, (std::vector<int32_t>{127, 2, 64, 0}));
        EXPECT_EQ(contribution_k(rec, row, 4), (std::vector<int32_t>{2, 2, 0, 0}));
    }
}

TEST(PathsHpz, PrimaryBlockStraddlingTheColumnCarriesAnOffset) {
    // N = 4, G = 2, M = 24: S = 6, M/G = 12, B = 4. Primary blocks of chunk 1: [6,10) [10,12);
    // secondary blocks of shard 0: [0,4) [4,8) [8,12). Column [8,12) meets both primary blocks of
    // chunk 1: offsets 8 - 6 = 2 and 8 - 10 = -2, and per element k of owner 1 is 2 (requant).
    const auto x = random_input(4, 24, 8);
    auto recs = run(cfg(PathKind::kHpzAgRequant, 4, 2, 24, 4), x);
    const auto& rec = column_at(recs, 8);
    const auto& row = row_of(rec, 1);
    ASSERT_EQ(row.event_ids.size(), 3u);
    EXPECT_EQ(ev(rec, row, 0).column_offset, 2);
    EXPECT_EQ(ev(rec, row, 0).x.size(), 4u);
    EXPECT_EQ(ev(rec, row, 1).column_offset, -2);
    EXPECT_EQ(ev(rec, row, 1).x.size(), 2u);
    for (int64_t i = 0; i < 4; ++i) EXPECT_EQ(element_k(rec, row, i, 1, 4), 2) << i;
    // contribution_k counts per element (each element met one of owner 1's primary blocks), so
    // the row's k of owner 1 is 2, not the 3 events of the row
    EXPECT_EQ(contribution_k(rec, row, 4)[1], 2);
    // first_block_absmax: block [6,10) for elements 8, 9; block [10,12) for 10, 11
    float a0 = 0, a1 = 0;
    for (int i = 6; i < 10; ++i) a0 = std::max(a0, std::fabs(x[24 + i]));
    for (int i = 10; i < 12; ++i) a1 = std::max(a1, std::fabs(x[24 + i]));
    expect_same(rec.first_block_absmax, {a0, a0, a1, a1});
}

// ---- fp16 accumulation (D11) -----------------------------------------------------------------------

TEST(PathsFp16, RoundsEveryTermAndAdd) {
    // fp32-ring-rs, N = 2, S = 1: chunk 0 = X_1 + X_0 with X_1 = 1 + 2^-12, X_0 = 2048.
    // fp32: 2049 + 2^-12 exactly. fp16: fl16(X_1) = 1, fl16(2048 + 1) = 2048 (tie to even).
    const float t = 1.0f + 0x1p-12f;
    const std::vector<float> x{2048, 0, t, 0};
    auto f32 = run(cfg(PathKind::kFp32RingRs, 2, 1, 2, 1), x);
    expect_same(f32[0].outputs[0].values, {2049.0f + 0x1p-12f});
    auto f16 = run(cfg(PathKind::kFp32RingRs, 2, 1, 2, 1, int8(), Accum::kFp16), x);
    const auto& row = f16[0].outputs[0];
    expect_same(row.values, {2048});
    EXPECT_EQ(row.add_abs_sum, (std::vector<double>{2048}));
    EXPECT_EQ(row.add_count, (std::vector<int32_t>{1}));
    EXPECT_EQ(row.term_round_abs_sum, (std::vector<double>{2048.0 + t}));
    EXPECT_EQ(row.term_round_count, (std::vector<int32_t>{2}));
}

TEST(PathsFp16, RingHopRoundsDecodedAndOwnInput) {
    // ring-rs, N = 2, B = S = 2: chunk 0: D(Q({127, 1})) = {127, 1}; X_0 = {0.1, 1000.3}.
    // fp16: fl16(0.1) = 0.0999755859375, fl16(1000.3) = 1000.5 (spacing 0.5); adds:
    // fl16(127 + 0.0999755859375) = 127.125 (spacing 0.0625: 127.0999... -> 127.125),
    // fl16(1 + 1000.5) = 1001.5.
    const std::vector<float> x{0.1f, 1000.3f, 0, 0, 127, 1, 0, 0};
    auto recs = run(cfg(PathKind::kRingRs, 2, 1, 4, 2, int8(), Accum::kFp16), x);
    const auto& row = recs[0].outputs[0];
    expect_same(row.values, {127.125f, 1001.5f});
    EXPECT_EQ(row.term_round_count, (std::vector<int32_t>{2, 2}));
    EXPECT_EQ(row.term_round_abs_sum,
              (std::vector<double>{127.0 + static_cast<double>(0.1f), 1.0 + static_cast<double>(1000.3f)}));
    EXPECT_EQ(row.add_abs_sum, (std::vector<double>{127.125, 1001.5}));
}

TEST(PathsFp16, OverflowGivesInf) {
    // 40000 is a binary16 value; 40000 + 40000 = 80000 > 65504 overflows binary16 (not binary32).
    const std::vector<float> x{40000, 40000, 40000, 40000};
    for (PathKind p : {PathKind::kA2aRs, PathKind::kRingRs, PathKind::kTreeRs, PathKind::kFp32RingRs}) {
        auto f32 = run(cfg(p, 2, 2, 2, 1), x);
        for (const auto& rec : f32) EXPECT_TRUE(std::isfinite(rec.outputs[0].values[0]));
        auto f16 = run(cfg(p, 2, 2, 2, 1, int8(), Accum::kFp16), x);
        ASSERT_EQ(f16.size(), 2u);
        for (const auto& rec : f16) EXPECT_EQ(rec.outputs[0].values[0], kInf) << path_info(p).name;
    }
    // a2a-hier-rs, N = 2, G = 1: U = D(Q(40000)) per node, the inter-node sum overflows.
    auto hier = run(cfg(PathKind::kA2aHierRs, 2, 1, 2, 1, int8(), Accum::kFp16), x);
    for (const auto& rec : hier) EXPECT_EQ(rec.outputs[0].values[0], kInf);
}

TEST(PathsFp16, OverflowThatMustBeRequantizedIsAnError) {
    // ring-rs, N = 3: the partial overflows at hop 1 and would be quantized at hop 2.
    const std::vector<float> x(9, 40000.0f);
    auto r = run_path_plain(cfg(PathKind::kRingRs, 3, 3, 3, 1, int8(), Accum::kFp16), x);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, ErrorCode::kRangeOverflow);
    EXPECT_NE(r.error().message.find("partial"), std::string::npos) << r.error().message;
    // the same under fp32 is fine
    EXPECT_TRUE(run_path_plain(cfg(PathKind::kRingRs, 3, 3, 3, 1), x).ok());
}

TEST(PathsFp16, GatherPathsIgnoreIt) {
    const auto x = random_input(4, 16, 9);
    for (PathKind p : {PathKind::kRingAg, PathKind::kRingAgRequant, PathKind::kHpzAgFp, PathKind::kHpzAgRequant}) {
        auto a = run(cfg(p, 4, 2, 16, 3), x);
        auto b = run(cfg(p, 4, 2, 16, 3, int8(), Accum::kFp16), x);
        for (int64_t r = 0; r < 4; ++r) expect_same(held(b, 16, r), held(a, 16, r));
        for (const auto& rec : b)
            for (const auto& row : rec.outputs) EXPECT_TRUE(row.term_round_count.empty());
    }
}

// ---- the ledgers against NUMERICS.md's table -------------------------------------------------------

struct Shape {
    int64_t n, g, m, b;
};

TEST(PathsLedger, ContributionKEqualsExpectedK) {
    const std::vector<Shape> shapes{{1, 1, 4, 2}, {2, 1, 8, 3}, {2, 2, 6, 1}, {4, 2, 24, 4}, {4, 4, 16, 8},
                                    {8, 4, 64, 3}, {8, 4, 96, 5}, {8, 2, 32, 4}, {6, 3, 36, 4}};
    for (const auto& s : shapes) {
        const auto x = random_input(s.n, s.m, static_cast<uint32_t>(s.n * 1000 + s.m));
        for (const auto& info : all_paths()) {
            for (Accum acc : {Accum::kFp32, Accum::kFp16, Accum::kBf16}) {
                PathConfig c = cfg(info.kind, s.n, s.g, s.m, s.b, int8(), acc);
                if (!validate(c).ok()) continue;  // tree-rs with N = 6
                auto recs = run(c, x);
                ASSERT_FALSE(recs.empty()) << info.name;
                const int64_t shard = s.m / s.n;
                // hpz's row-level k double counts when two primary blocks of one owner meet a column
                const bool straddle = (info.kind == PathKind::kHpzAgFp || info.kind == PathKind::kHpzAgRequant) &&
                                      shard > s.b && shard % s.b != 0;
                for (const auto& rec : recs) {
                    const size_t want_rows = info.shape == PathShape::kReduceScatter ? 1 : static_cast<size_t>(s.n);
                    ASSERT_EQ(rec.outputs.size(), want_rows) << info.name;
                    std::set<int64_t> owners;
                    for (int64_t i = rec.first; i < rec.first + rec.len; ++i) owners.insert(i / shard);
                    for (const auto& row : rec.outputs) {
                        const auto k = contribution_k(rec, row, s.n);
                        for (int64_t j = 0; j < s.n; ++j) {
                            std::string where = std::string(info.name) + " N=" + std::to_string(s.n) + " G=" +
                                                std::to_string(s.g) + " B=" + std::to_string(s.b) + " column " +
                                                std::to_string(rec.first) + " holder " + std::to_string(row.rank) +
                                                " contributor " + std::to_string(j);
                            int32_t want = 0;
                            if (info.shape != PathShape::kAllGather || owners.count(j))
                                want = expected_k(c, rec.first, row.rank, j);
                            if (!straddle) {
                                EXPECT_EQ(k[static_cast<size_t>(j)], want) << where;
                            }
                        }
                        // gather paths, per element: k of the element's owner, through column_offset
                        if (info.shape == PathShape::kAllGather) {
                            for (int64_t i = 0; i < rec.len; ++i) {
                                const auto owner = static_cast<int32_t>((rec.first + i) / shard);
                                EXPECT_EQ(element_k(rec, row, i, owner, s.n), expected_k(c, rec.first, row.rank, owner))
                                    << info.name << " N=" << s.n << " B=" << s.b << " element " << rec.first + i
                                    << " holder " << row.rank;
                            }
                        }
                        // shapes of the row
                        EXPECT_EQ(row.values.size(), static_cast<size_t>(rec.len));
                        EXPECT_EQ(row.add_abs_sum.size(), static_cast<size_t>(rec.len));
                        EXPECT_EQ(row.add_count.size(), static_cast<size_t>(rec.len));
                        const bool rounds = low_precision(c.accum) && info.shape != PathShape::kAllGather;
                        EXPECT_EQ(row.term_round_count.size(), rounds ? static_cast<size_t>(rec.len) : 0u) << info.name;
                        for (int32_t id : row.event_ids) {
                            ASSERT_GE(id, 0);
                            ASSERT_LT(static_cast<size_t>(id), rec.events.size());
                            const QuantEvent& e = rec.events[static_cast<size_t>(id)];
                            EXPECT_EQ(e.x.size(), e.codes.size());
                            if (info.kind != PathKind::kHpzAgFp && info.kind != PathKind::kHpzAgRequant) {
                                EXPECT_EQ(e.x.size(), static_cast<size_t>(rec.len));
                                EXPECT_EQ(e.column_offset, 0);
                            }
                        }
                    }
                    if (info.shape == PathShape::kAllGather) {
                        EXPECT_EQ(rec.contribution_rows, 1);
                        EXPECT_EQ(rec.first_block_absmax.size(), static_cast<size_t>(rec.len));
                    } else {
                        EXPECT_EQ(rec.contribution_rows, s.n);
                        EXPECT_TRUE(rec.first_block_absmax.empty());
                    }
                    EXPECT_EQ(rec.contributions.size(), static_cast<size_t>(rec.contribution_rows * rec.len));
                }
            }
        }
    }
}

TEST(PathsLedger, AddCountsMatchTheSchedule) {
    // Adds that produced each value: ring N-1, a2a N-1, hier nodes*(G-1) + nodes-1, tree N-1.
    const int64_t n = 8, g = 4;
    const auto x = random_input(n, 32, 10);
    const std::vector<std::pair<PathKind, int32_t>> want{{PathKind::kRingRs, 7},    {PathKind::kFp32RingRs, 7},
                                                         {PathKind::kA2aRs, 7},     {PathKind::kA2aHierRs, 7},
                                                         {PathKind::kTreeRs, 7},    {PathKind::kTwoShotAr, 7},
                                                         {PathKind::kRingAg, 0},    {PathKind::kHpzAgRequant, 0}};
    for (auto [p, count] : want) {
        auto recs = run(cfg(p, n, g, 32, 3), x);
        for (const auto& rec : recs)
            for (const auto& row : rec.outputs)
                for (int32_t v : row.add_count) EXPECT_EQ(v, count) << path_info(p).name;
    }
}

TEST(PathsLedger, A2aIsTheSumOfDecodedContributions) {
    // An independent check of a2a-rs and a2a-hier-rs with G = 1 on random data: the reduced chunk is
    // the left-to-right sum of the decodings of every rank's block (hier with G = 1 decodes twice).
    const int64_t n = 4, m = 20, b = 3;
    const auto x = random_input(n, m, 11);
    auto recs = run(cfg(PathKind::kA2aRs, n, n, m, b), x);
    for (const auto& rec : recs) {
        std::vector<float> sum;
        for (int64_t j = 0; j < n; ++j) {
            std::vector<float> blk(x.begin() + j * m + rec.first, x.begin() + j * m + rec.first + rec.len);
            auto q = quantize(int8(), blk, b);
            ASSERT_TRUE(q.ok());
            if (j == 0) {
                sum = q->decoded;
            } else {
                for (int64_t i = 0; i < rec.len; ++i) sum[i] = sum[i] + q->decoded[i];
            }
        }
        expect_same(rec.outputs[0].values, sum);
    }
}

// ---- errors ----------------------------------------------------------------------------------------

TEST(PathsErrors, InvalidConfigs) {
    auto expect_invalid = [](const PathConfig& c, size_t size, const std::string& needle) {
        auto r = run_path_plain(c, std::vector<float>(size, 1.0f));
        ASSERT_FALSE(r.ok()) << needle;
        EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
        EXPECT_NE(r.error().message.find(needle), std::string::npos) << r.error().message;
    };
    expect_invalid(cfg(PathKind::kRingRs, 4, 4, 10, 2), 40, "not divisible");     // M % N
    expect_invalid(cfg(PathKind::kA2aHierRs, 4, 3, 8, 2), 32, "does not divide"); // N % G
    expect_invalid(cfg(PathKind::kTreeRs, 6, 6, 12, 2), 72, "power of two");
    expect_invalid(cfg(PathKind::kRingRs, 4, 4, 8, 0), 32, "block");
    expect_invalid(cfg(PathKind::kRingRs, 4, 4, 8, 2), 31, "N * M");
    EXPECT_TRUE(run_path_plain(cfg(PathKind::kRingRs, 6, 6, 12, 2), std::vector<float>(72, 1.0f)).ok());
}

TEST(PathsErrors, NonFiniteInputIsRefused) {
    std::vector<float> x(16, 1.0f);
    x[2 * 4 + 3] = std::numeric_limits<float>::quiet_NaN();  // rank 2, element 3
    x[3 * 4 + 0] = kInf;
    for (const auto& info : all_paths()) {
        auto r = run_path_plain(cfg(info.kind, 4, 2, 4, 2), x);
        ASSERT_FALSE(r.ok()) << info.name;
        EXPECT_EQ(r.error().code, ErrorCode::kNonFinite);
        EXPECT_NE(r.error().message.find("rank 2 element 3"), std::string::npos) << r.error().message;
    }
}

TEST(PathsErrors, DsInputOverflowingBinary16) {
    std::vector<float> x(8, 1.0f);
    x[5] = 70000;  // rank 1, element 1
    auto r = run_path_plain(cfg(PathKind::kA2aRs, 2, 2, 4, 2, ds8()), x);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, ErrorCode::kRangeOverflow);
    EXPECT_NE(r.error().message.find("rank 1 element 1"), std::string::npos) << r.error().message;
}

}  // namespace
}  // namespace qtransit::reference
