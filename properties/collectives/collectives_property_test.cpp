// The collective paths (NUMERICS.md sections 3 and 5): the production schedules over the sim
// transport against the plain reference schedules, bit for bit; k from both ledgers against the
// table of section 3; every output element inside its bounds, exactly; placement; identical bits
// across ranks; hpZ's two modes; drift of a requantizing ring gather.
// Replay a failure: RC_PARAMS="reproduce=..." ./collectives_property_test --gtest_filter=...
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <bit>
#include <ostream>
#include <cmath>
#include <cstring>

#include "generators.hpp"
#include "qtransit/common/bits.hpp"
#include "qtransit/collectives/paths.hpp"
#include "qtransit/collectives/transport.hpp"
#include "qtransit/reference/checker.hpp"
#include "qtransit/reference/paths.hpp"

namespace qtransit {
// How RapidCheck prints a failing configuration.
inline void showValue(const PathConfig& c, std::ostream& os) {
    os << path_info(c.path).name << " N=" << c.ranks << " G=" << c.ranks_per_node << " M=" << c.elements
       << " block=" << c.block << " format=" << c.format_name() << " accum=" << to_string(c.accum)
       << " divide=" << to_string(c.divide) << " input=" << to_string(c.input) << " output=" << to_string(c.output);
}
namespace kernels {
inline void showValue(Distribution d, std::ostream& os) { os << to_string(d); }
}  // namespace kernels
}  // namespace qtransit

namespace qt = qtransit;
using qt::ColumnRecord;
using qt::FormatKind;
using qt::PathConfig;
using qt::PathKind;

namespace {

std::vector<ColumnRecord> run_production(const PathConfig& c, const std::vector<float>& x) {
    qt::collectives::ArrayInputs in(x, c.elements);
    std::vector<std::pair<int64_t, ColumnRecord>> recs;
    auto totals = qt::collectives::run_paths({c}, in, 1, [&](size_t, int, const ColumnRecord& r) {
        recs.emplace_back(r.first, r);
    });
    RC_ASSERT(totals.ok());
    std::vector<ColumnRecord> out;
    for (auto& [f, r] : recs) out.push_back(std::move(r));
    return out;
}

using qtransit::same_bits;

// A random configuration: N 1..64 (a power of two for tree-rs), G dividing N, M a small multiple of
// The declared built-ins (fp8, MX, nf4, stochastic twins).
const std::vector<qt::FormatSpec>& declared_formats() {
    static const std::vector<qt::FormatSpec> v = [] {
        std::vector<qt::FormatSpec> d;
        for (const auto& f : qt::all_builtin_formats())
            if (f.kind == FormatKind::kDecl) d.push_back(f);
        return d;
    }();
    return v;
}

// N, a block that may or may not divide S, one of the formats the issue names or any built-in one.
rc::Gen<PathConfig> config_for(PathKind path) {
    return rc::gen::exec([path] {
        PathConfig c;
        c.path = path;
        if (path == PathKind::kTreeRs) c.ranks = int64_t{1} << *rc::gen::inRange(0, 7);
        else c.ranks = *rc::gen::weightedOneOf<int64_t>({{3, rc::gen::inRange<int64_t>(1, 17)}, {1, rc::gen::inRange<int64_t>(17, 65)}});
        std::vector<int64_t> divisors;
        for (int64_t g = 1; g <= c.ranks; ++g)
            if (c.ranks % g == 0) divisors.push_back(g);
        c.ranks_per_node = *rc::gen::elementOf(divisors);
        const int64_t s = *rc::gen::inRange<int64_t>(1, c.ranks > 16 ? 24 : 80);
        c.elements = s * c.ranks;
        c.block = *rc::gen::inRange<int64_t>(1, 40);
        c.format = *rc::gen::weightedOneOf<qt::FormatSpec>(
            {{4, rc::gen::element(qt::FormatSpec{FormatKind::kSym, 4}, qt::FormatSpec{FormatKind::kSym, 8},
                                  qt::FormatSpec{FormatKind::kAsym, 4}, qt::FormatSpec{FormatKind::kDs, 4})},
             {1, rc::gen::elementOf(qt::builtin_formats())},
             {1, rc::gen::element(qt::FormatSpec{FormatKind::kQr, 4}, qt::FormatSpec{FormatKind::kQr, 6}, qt::FormatSpec{FormatKind::kQr, 8})},
             {3, rc::gen::elementOf(declared_formats())}});
        if (c.format.fixed_block()) c.block = c.format.fixed_block();
        // One format per stage (issue 17) a third of the time where the path has two stages; the
        // second takes the first's block (the MX formats' 32 included).
        if (!qt::format_stages(path).empty() && *rc::gen::inRange(0, 3) == 0) {
            qt::FormatSpec second = c.format;
            for (int tries = 0; tries < 20; ++tries) {
                second = *rc::gen::weightedOneOf<qt::FormatSpec>(
                    {{3, rc::gen::element(qt::FormatSpec{FormatKind::kSym, 4}, qt::FormatSpec{FormatKind::kSym, 8},
                                          qt::FormatSpec{FormatKind::kAsym, 4}, qt::FormatSpec{FormatKind::kDs, 4})},
                     {1, rc::gen::elementOf(declared_formats())}});
                if (second.check_block(c.block).ok()) break;
                second = c.format;
            }
            c.stage_formats = {c.format, second};
        }
        // A rotated format (FORMATS.md section 9) needs every block a power of two: a power-of-two
        // block (or the fixed 32 of an MX format in the other stage) that divides the shard.
        const bool rotated = c.format.rotated() || (c.stage_formats.size() > 1 && c.stage_formats[1].rotated());
        if (rotated) {
            const int64_t fixed = std::max(c.format.fixed_block(), c.stage_formats.size() > 1 ? c.stage_formats[1].fixed_block() : 0);
            c.block = fixed ? fixed : int64_t{1} << *rc::gen::inRange(0, 6);
            c.elements = c.ranks * c.block * *rc::gen::inRange<int64_t>(1, c.ranks > 16 ? 2 : 4);
        }
        // End to end (D28) half the time where it applies: the sums taken in the rotated domain.
        const qt::FormatSpec& second = c.stage_formats.size() > 1 ? c.stage_formats[1] : c.format;
        const bool reduce_scatter = path == PathKind::kRingRs || path == PathKind::kA2aRs || path == PathKind::kA2aHierRs ||
                                    path == PathKind::kTreeRs;
        const bool end_to_end = reduce_scatter && c.format.rotated() && second.rotated() &&
                                c.format.decl->random_signs == second.decl->random_signs && *rc::gen::arbitrary<bool>();
        if (end_to_end) c.rotation = qt::Rotation::kEndToEnd;
        c.seed = *rc::gen::arbitrary<uint64_t>();
        // two-shot-ar-keep with FlashInfer's stripes (D52) half the time where its stripe holds whole
        // blocks: at these M the stripe is M itself, so rank 0 keeps every sum, most chunks' owners not.
        if (path == PathKind::kTwoShotArKeep) c.flashinfer_stripes = c.stripe() % c.block == 0 && *rc::gen::arbitrary<bool>();
        // two-shot-ar's sum from +0 (start = "zero", QuickReduce's: D57) half the time.
        if (path == PathKind::kTwoShotAr) c.sum_from_zero = *rc::gen::arbitrary<bool>();
        c.accum = *rc::gen::weightedOneOf<qt::Accum>({{5, rc::gen::just(qt::Accum::kFp32)},
                                                      {1, rc::gen::just(qt::Accum::kFp16)},
                                                      {1, rc::gen::just(qt::Accum::kBf16)}});
        qt::apply_element_type(c);  // the 16-bit paths sum in their own type (D26)
        // Where a mean's 1/N goes (D27), on the reduce paths a third of the time.
        // (NCCL's FP8 paths: pre only, their ncclAvg, D41.)
        if (qt::path_info(path).shape != qt::PathShape::kAllGather && !end_to_end)
            c.divide = *rc::gen::weightedOneOf<qt::Divide>({{4, rc::gen::just(qt::Divide::kNone)},
                                                            {1, rc::gen::just(qt::Divide::kPre)},
                                                            {qt::saturating(c.accum) ? 0 : 1, rc::gen::just(qt::Divide::kPost)}});
        // The outputs rounded to bf16 or fp16 at the end (D46) a third of the time, on every path
        // (not with --divide post: refused).
        // An FP8 output (NVLS's one rounding at the end, D49) clamps with saturation, an event counted
        // as an FP8 add's.
        if (c.divide != qt::Divide::kPost)
            c.output = *rc::gen::weightedOneOf<qt::Accum>({{6, rc::gen::just(qt::Accum::kFp32)},
                                                           {1, rc::gen::just(qt::Accum::kBf16)},
                                                           {1, rc::gen::just(qt::Accum::kFp16)},
                                                           {1, rc::gen::just(qt::Accum::kFp8E4m3)},
                                                           {1, rc::gen::just(qt::Accum::kFp8E5m2)}});
        // Inputs of a declared type (D47), on every path but the 16-bit ones (their own type); FP8
        // inputs on the 16-bit paths too (D49: NVLS's FP8 tensors summed in binary16).
        const bool sixteen = qt::typed_path(path) && !qt::saturating(qt::path_info(path).element);
        if (!qt::typed_path(path))
            c.input = *rc::gen::weightedOneOf<qt::Accum>({{4, rc::gen::just(qt::Accum::kFp32)},
                                                          {1, rc::gen::just(qt::Accum::kBf16)},
                                                          {1, rc::gen::just(qt::Accum::kFp16)},
                                                          {1, rc::gen::just(qt::Accum::kFp8E4m3)}});
        else if (sixteen)
            c.input = *rc::gen::weightedOneOf<qt::Accum>({{4, rc::gen::just(qt::Accum::kFp32)},
                                                          {1, rc::gen::just(qt::Accum::kFp8E4m3)},
                                                          {1, rc::gen::just(qt::Accum::kFp8E5m2)}});
        return c;
    });
}

std::vector<float> inputs_for(const PathConfig& c, qt::kernels::Distribution d, uint64_t seed) {
    std::vector<float> x(static_cast<size_t>(c.ranks * c.elements));
    for (int64_t r = 0; r < c.ranks; ++r)
        qt::kernels::generate_span(d, seed, static_cast<uint32_t>(r), 0,
                                   std::span<float>(x.data() + r * c.elements, static_cast<size_t>(c.elements)));
    // ds-int<b> refuses what overflows binary16 (D3): heavy-tailed inputs are brought inside.
    const auto fp16_in = [](const qt::FormatSpec& f) { return f.kind == FormatKind::kDs || f.kind == FormatKind::kQr; };
    if (fp16_in(c.format) || fp16_in(c.format_of_stage(1)) || c.accum == qt::Accum::kFp16 || c.input == qt::Accum::kFp16)
        for (float& v : x) v = std::fmod(v, 1000.0f);
    // NCCL's FP8 paths take FP8 tensors (D41): folded inside the format's range (heavy tails and
    // outliers then sum past it, and saturate).
    if (qt::saturating(c.accum))
        for (float& v : x) v = std::fmod(v, static_cast<float>(qt::saturation_max(c.accum)));
    if (qt::saturating(c.input))  // FP8 input tensors (D49), likewise
        for (float& v : x) v = std::fmod(v, static_cast<float>(qt::saturation_max(c.input)));
    return x;
}

void check_path(PathKind path) {
    const PathConfig c = *config_for(path);
    const auto dist = *rc::gen::elementOf(qt::kernels::all_distributions());
    const uint64_t seed = *rc::gen::arbitrary<uint64_t>();
    RC_TAG(c.format_name());
    if (c.rotation == qt::Rotation::kEndToEnd) RC_TAG("end-to-end");
    RC_TAG(qt::kernels::to_string(dist));
    const auto x = inputs_for(c, dist, seed);
    const auto mine = run_production(c, x);
    int64_t chained = 0;  // rows whose owners' k was also counted on from the previous row's
    auto ref = qt::reference::run_path_plain(c, x);
    RC_ASSERT(ref.ok());
    RC_ASSERT(mine.size() == ref->size());
    qt::reference::PathChecker check_mine(c), check_ref(c);
    for (size_t i = 0; i < mine.size(); ++i) {
        const ColumnRecord& m = mine[i];
        const ColumnRecord& r = (*ref)[i];
        RC_ASSERT(m.first == r.first);
        RC_ASSERT(m.len == r.len);
        RC_ASSERT(m.rotated_sum == r.rotated_sum);
        RC_ASSERT(m.rotated_sum == (c.rotation == qt::Rotation::kEndToEnd));  // the ledger says which ran (D28)
        RC_ASSERT(m.outputs.size() == r.outputs.size());
        std::vector<int32_t> prev_k;
        bool prev_others = false, prev_ok = false;
        for (size_t row = 0; row < m.outputs.size(); ++row) {
            RC_ASSERT(m.outputs[row].rank == r.outputs[row].rank);
            for (int64_t e = 0; e < m.len; ++e) {
                const float a = m.outputs[row].values[static_cast<size_t>(e)], b = r.outputs[row].values[static_cast<size_t>(e)];
                if (qt::testing::to_bits(a) != qt::testing::to_bits(b))
                    RC_FAIL("column first=" + std::to_string(m.first) + " row rank " + std::to_string(m.outputs[row].rank) +
                            " element " + std::to_string(e) + ": production " + std::to_string(a) + ", reference " +
                            std::to_string(b));
            }
            // NCCL's FP8 paths: the same clamps on every value's way, and what they removed (D41).
            RC_ASSERT(m.outputs[row].saturation_count == r.outputs[row].saturation_count);
            RC_ASSERT(m.outputs[row].saturation_excess == r.outputs[row].saturation_excess);
            const auto km = qt::contribution_k(m, m.outputs[row], c.ranks);
            const auto kr = qt::contribution_k(r, r.outputs[row], c.ranks);
            RC_ASSERT(km == kr);
            // A gather's owners' k (contribution_k_of) agrees with contribution_k, and counted on from
            // the previous row where this row's events extend it (ring-ag-requant's chain), with the
            // count from scratch.
            if (qt::path_info(c.path).shape == qt::PathShape::kAllGather && m.len > 0) {
                const int64_t lo = m.first / c.shard(), hi = (m.first + m.len - 1) / c.shard();
                std::vector<int32_t> k1;
                bool o1 = false;
                const bool ok1 = qt::contribution_k_of(m, m.outputs[row], c.ranks, lo, hi, k1, o1);
                if (ok1)
                    for (int64_t j = lo; j <= hi; ++j) RC_ASSERT(k1[static_cast<size_t>(j - lo)] == km[static_cast<size_t>(j)]);
                if (row > 0 && prev_ok && qt::extends_ledger(m.outputs[row - 1], m.outputs[row])) {
                    std::vector<int32_t> k2 = prev_k;
                    bool o2 = prev_others;
                    const bool ok2 = qt::contribution_k_of(m, m.outputs[row], c.ranks, lo, hi, k2, o2, m.outputs[row - 1].event_ids.size());
                    RC_ASSERT(ok2 == ok1);
                    if (ok1) {
                        RC_ASSERT(k2 == k1);
                        RC_ASSERT(o2 == o1);
                    }
                    ++chained;
                }
                prev_k = k1;
                prev_others = o1;
                prev_ok = ok1;
            }
            // Gathers carry only the shards' owners (for hpz a block may straddle two shards);
            // every other rank must have k = 0.
            std::vector<bool> owner(static_cast<size_t>(c.ranks), qt::path_info(c.path).shape != qt::PathShape::kAllGather);
            if (qt::path_info(c.path).shape == qt::PathShape::kAllGather)
                for (int64_t e = 0; e < m.len; ++e) owner[static_cast<size_t>((m.first + e) / c.shard())] = true;
            for (int64_t j = 0; j < c.ranks; ++j) {
                const int32_t want = owner[static_cast<size_t>(j)] ? qt::expected_k(c, m.first, m.outputs[row].rank, j) : 0;
                RC_ASSERT(km[static_cast<size_t>(j)] == want);
            }
        }
        // Every event in its stage's format, and the ledger says which (issue 17).
        for (const auto& e : m.events) {
            RC_ASSERT(e.format_stage == (!c.stage_formats.empty() && e.stage > 0 ? 1 : 0));
            const qt::FormatSpec& f = c.format_of_stage(e.stage);
            for (int32_t q : e.codes) RC_ASSERT(q >= f.code_min() && q <= f.code_max());
        }
        for (const auto& e : r.events) RC_ASSERT(e.format_stage == (!c.stage_formats.empty() && e.stage > 0 ? 1 : 0));
        check_mine.add(m);
        check_ref.add(r);
    }
    const auto s = check_mine.stats();
    // fp16 accumulation may overflow to inf: that is reported, not bounded (D11).
    if (s.nonfinite_outputs == 0 && !s.bound_holds) RC_FAIL("production: " + s.first_violation + "; reference schedule: " +
                                                           (check_ref.stats().bound_holds ? "holds" : check_ref.stats().first_violation));
    RC_ASSERT(check_ref.stats().bound_holds == s.bound_holds);
    RC_ASSERT(check_ref.stats().saturated_outputs == s.saturated_outputs);
    RC_CLASSIFY(s.saturated_outputs > 0, "saturated");
    // ring-ag-requant's rows extend the previous row's chain but at the owner: the test above ran.
    if (c.path == PathKind::kRingAgRequant && c.ranks >= 3) RC_ASSERT(chained > 0);
}

}  // namespace

// A per-stage path with every stage in the same format is the single-format path, bit for bit:
// values, ledger and bytes.
RC_GTEST_PROP(Paths, SameFormatInEveryStageIsTheSingleFormatPath, ()) {
    const PathKind path = *rc::gen::element(PathKind::kA2aHierRs, PathKind::kTwoShotAr, PathKind::kTwoShotArKeep, PathKind::kHpzAgRequant);
    PathConfig one = *config_for(path);
    one.stage_formats.clear();
    PathConfig two = one;
    two.stage_formats = {one.format, one.format};
    const auto x = inputs_for(one, qt::kernels::Distribution::kNormal, *rc::gen::arbitrary<uint64_t>());
    const auto a = run_production(one, x), b = run_production(two, x);
    RC_ASSERT(a.size() == b.size());
    for (size_t i = 0; i < a.size(); ++i) {
        RC_ASSERT(a[i].outputs.size() == b[i].outputs.size());
        for (size_t row = 0; row < a[i].outputs.size(); ++row) {
            RC_ASSERT(same_bits(a[i].outputs[row].values, b[i].outputs[row].values));
            RC_ASSERT(a[i].outputs[row].event_ids == b[i].outputs[row].event_ids);
        }
        RC_ASSERT(a[i].events.size() == b[i].events.size());
        for (size_t e = 0; e < a[i].events.size(); ++e) {
            RC_ASSERT(a[i].events[e].codes == b[i].events[e].codes);
            RC_ASSERT(qt::testing::to_bits(a[i].events[e].scale) == qt::testing::to_bits(b[i].events[e].scale));
        }
    }
}

// two-shot-ar's start (D57) decides the sign of an all-zero column's sum: QuickReduce's codec decodes a
// zero group of +0 inputs to -0 (dec = -0), the sum of N -0 terms is -0 from the first term and +0
// from +0, and the requantized sum's group decodes to +0 and -0. Production and reference alike.
TEST(Paths, TwoShotArSumFromZeroIsQuickReducesSignedZero) {
    for (bool from_zero : {false, true}) {
        PathConfig c;
        c.path = PathKind::kTwoShotAr;
        c.format = qt::FormatSpec{FormatKind::kQr, 4};
        c.ranks = 4;
        c.ranks_per_node = 4;
        c.elements = 4 * 64;
        c.block = 32;
        c.accum = qt::Accum::kFp16;
        c.sum_from_zero = from_zero;
        const std::vector<float> x(static_cast<size_t>(c.ranks * c.elements), 0.0f);
        const auto mine = run_production(c, x);
        auto ref = qt::reference::run_path_plain(c, x);
        ASSERT_TRUE(ref.ok());
        ASSERT_EQ(mine.size(), ref->size());
        for (size_t i = 0; i < mine.size(); ++i)
            for (size_t row = 0; row < mine[i].outputs.size(); ++row)
                for (size_t e = 0; e < mine[i].outputs[row].values.size(); ++e) {
                    const uint32_t want = from_zero ? 0x80000000u : 0u;
                    ASSERT_EQ(qt::testing::to_bits(mine[i].outputs[row].values[e]), want) << from_zero << " production";
                    ASSERT_EQ(qt::testing::to_bits((*ref)[i].outputs[row].values[e]), want) << from_zero << " reference";
                }
    }
}

RC_GTEST_PROP(Paths, RingRsEqualsReferenceWithinBounds, ()) { check_path(PathKind::kRingRs); }
RC_GTEST_PROP(Paths, A2aRsEqualsReferenceWithinBounds, ()) { check_path(PathKind::kA2aRs); }
RC_GTEST_PROP(Paths, A2aHierRsEqualsReferenceWithinBounds, ()) { check_path(PathKind::kA2aHierRs); }
RC_GTEST_PROP(Paths, TreeRsEqualsReferenceWithinBounds, ()) { check_path(PathKind::kTreeRs); }
RC_GTEST_PROP(Paths, TwoShotArEqualsReferenceWithinBounds, ()) { check_path(PathKind::kTwoShotAr); }
RC_GTEST_PROP(Paths, TwoShotArKeepEqualsReferenceWithinBounds, ()) { check_path(PathKind::kTwoShotArKeep); }
RC_GTEST_PROP(Paths, RingAgEqualsReferenceWithinBounds, ()) { check_path(PathKind::kRingAg); }
RC_GTEST_PROP(Paths, RingAgRequantEqualsReferenceWithinBounds, ()) { check_path(PathKind::kRingAgRequant); }
RC_GTEST_PROP(Paths, HpzAgFpEqualsReferenceWithinBounds, ()) { check_path(PathKind::kHpzAgFp); }
RC_GTEST_PROP(Paths, HpzAgRequantEqualsReferenceWithinBounds, ()) { check_path(PathKind::kHpzAgRequant); }
RC_GTEST_PROP(Paths, Fp32RingRsEqualsReferenceWithinBounds, ()) { check_path(PathKind::kFp32RingRs); }
RC_GTEST_PROP(Paths, Bf16RingRsEqualsReferenceWithinBounds, ()) { check_path(PathKind::kBf16RingRs); }
RC_GTEST_PROP(Paths, Fp16RingRsEqualsReferenceWithinBounds, ()) { check_path(PathKind::kFp16RingRs); }
RC_GTEST_PROP(Paths, Bf16RingArEqualsReferenceWithinBounds, ()) { check_path(PathKind::kBf16RingAr); }
RC_GTEST_PROP(Paths, Fp16RingArEqualsReferenceWithinBounds, ()) { check_path(PathKind::kFp16RingAr); }
RC_GTEST_PROP(Paths, Bf16TreeArEqualsReferenceWithinBounds, ()) { check_path(PathKind::kBf16TreeAr); }
RC_GTEST_PROP(Paths, Fp16TreeArEqualsReferenceWithinBounds, ()) { check_path(PathKind::kFp16TreeAr); }
RC_GTEST_PROP(Paths, NcclFp8E4m3RingRsEqualsReferenceWithinBounds, ()) { check_path(PathKind::kFp8E4m3RingRs); }
RC_GTEST_PROP(Paths, NcclFp8E5m2RingRsEqualsReferenceWithinBounds, ()) { check_path(PathKind::kFp8E5m2RingRs); }
RC_GTEST_PROP(Paths, NcclFp8E4m3RingArEqualsReferenceWithinBounds, ()) { check_path(PathKind::kFp8E4m3RingAr); }
RC_GTEST_PROP(Paths, NcclFp8E5m2RingArEqualsReferenceWithinBounds, ()) { check_path(PathKind::kFp8E5m2RingAr); }
RC_GTEST_PROP(Paths, NcclFp8E4m3TreeArEqualsReferenceWithinBounds, ()) { check_path(PathKind::kFp8E4m3TreeAr); }
RC_GTEST_PROP(Paths, NcclFp8E5m2TreeArEqualsReferenceWithinBounds, ()) { check_path(PathKind::kFp8E5m2TreeAr); }

// Placement, exactly: every input is 0 but one element of one rank. A zero block quantizes to
// exact zeros and 0 + 0 = 0, so the single nonzero output must sit exactly where that element
// belongs (reduce-scatter: on the chunk's owner, at its offset; gathers and all-reduce: at its
// position on every rank), and everything else must be exactly 0. Any wrong swizzle, chunk or
// rank order moves or loses it.
RC_GTEST_PROP(Paths, PlacementIsExact, ()) {
    const PathKind path = *rc::gen::elementOf(std::vector<PathKind>{
        PathKind::kRingRs, PathKind::kA2aRs, PathKind::kA2aHierRs, PathKind::kTreeRs, PathKind::kTwoShotAr, PathKind::kTwoShotArKeep,
        PathKind::kRingAg, PathKind::kRingAgRequant, PathKind::kHpzAgFp, PathKind::kHpzAgRequant, PathKind::kFp32RingRs});
    PathConfig c = *config_for(path);
    c.accum = qt::Accum::kFp32;
    const int64_t j0 = *rc::gen::inRange<int64_t>(0, c.ranks);
    // Gathers carry rank j's own shard only: put the impulse there.
    const bool gather = qt::path_info(path).shape == qt::PathShape::kAllGather;
    const int64_t p0 = gather ? j0 * c.shard() + *rc::gen::inRange<int64_t>(0, c.shard())
                              : *rc::gen::inRange<int64_t>(0, c.elements);
    std::vector<float> x(static_cast<size_t>(c.ranks * c.elements), 0.0f);
    x[static_cast<size_t>(j0 * c.elements + p0)] = 3.0f;
    const auto recs = run_production(c, x);
    int64_t nonzero = 0;
    for (const auto& rec : recs) {
        for (const auto& row : rec.outputs) {
            for (int64_t i = 0; i < rec.len; ++i) {
                const float v = row.values[static_cast<size_t>(i)];
                const int64_t pos = rec.first + i;
                const bool here = pos == p0 && (qt::path_info(path).shape != qt::PathShape::kReduceScatter ||
                                                row.rank == p0 / c.shard());
                if (here) {
                    RC_ASSERT(v != 0.0f);
                    ++nonzero;
                } else {
                    RC_ASSERT(v == 0.0f);
                }
            }
        }
    }
    RC_ASSERT(nonzero == (qt::path_info(path).shape == qt::PathShape::kReduceScatter ? 1 : c.ranks));
}

// two-shot-ar-keep (D46) is two-shot-ar but on the owner, which holds a2a-rs's sum: the other ranks
// hold two-shot-ar's values, the owner a2a-rs's (== rather than the bits: the owner's sum starts at
// +0, so a column of -0 sums to +0 there and to -0 on the other two).
RC_GTEST_PROP(Paths, TwoShotArKeepIsTwoShotArButOnTheOwner, ()) {
    PathConfig keep = *config_for(PathKind::kTwoShotArKeep);
    PathConfig two = keep, a2a = keep;
    two.path = PathKind::kTwoShotAr;
    a2a.path = PathKind::kA2aRs;
    a2a.stage_formats.clear();  // one stage: the first format, which keep's sum took
    two.flashinfer_stripes = a2a.flashinfer_stripes = false;  // (they keep no sum: who keeps one is keep's alone)
    const auto x = inputs_for(keep, qt::kernels::Distribution::kNormal, *rc::gen::arbitrary<uint64_t>());
    const auto k = run_production(keep, x), t = run_production(two, x), r = run_production(a2a, x);
    RC_ASSERT(k.size() == t.size() && k.size() == r.size());
    int64_t owner_rows = 0, differ = 0;
    for (size_t i = 0; i < k.size(); ++i) {
        const int64_t owner = keep.keeper(k[i].first);  // the chunk's owner, or FlashInfer's stripe's (D52)
        RC_ASSERT(k[i].outputs.size() == static_cast<size_t>(keep.ranks) && r[i].outputs.size() == 1);
        for (size_t row = 0; row < k[i].outputs.size(); ++row) {
            const auto& got = k[i].outputs[row];
            const bool is_owner = got.rank == owner;
            const auto& want = is_owner ? r[i].outputs[0].values : t[i].outputs[row].values;
            for (size_t e = 0; e < got.values.size(); ++e) {
                RC_ASSERT(got.values[e] == want[e]);
                if (is_owner) differ += got.values[e] != t[i].outputs[row].values[e];
            }
            owner_rows += is_owner;
        }
    }
    RC_ASSERT(owner_rows == static_cast<int64_t>(k.size()));
    RC_CLASSIFY(differ > 0, "the owner's values differ from the requantized ones");
    RC_CLASSIFY(keep.flashinfer_stripes, "FlashInfer's stripes");
}

// After a gather or an all-reduce every rank holds the same bits (ring-ag-requant excepted: its
// point is that they differ for a non-idempotent format).
RC_GTEST_PROP(Paths, GathersAndAllReduceGiveIdenticalBitsOnEveryRank, ()) {
    const PathKind path = *rc::gen::element(PathKind::kTwoShotAr, PathKind::kRingAg, PathKind::kHpzAgFp, PathKind::kHpzAgRequant,
                                            PathKind::kBf16RingAr, PathKind::kFp16RingAr, PathKind::kBf16TreeAr, PathKind::kFp16TreeAr,
                                            PathKind::kFp8E4m3RingAr, PathKind::kFp8E5m2TreeAr);
    const PathConfig c = *config_for(path);
    RC_TAG(c.format.name());
    const auto x = inputs_for(c, qt::kernels::Distribution::kNormal, *rc::gen::arbitrary<uint64_t>());
    // hpz-ag-requant with stochastic rounding: each node's holder re-encodes the secondary shard
    // with its own rank's random bits, so nodes differ (every rank of one node holds the same bits).
    const bool per_node = path == PathKind::kHpzAgRequant && c.format_of_stage(1).stochastic();
    for (const auto& rec : run_production(c, x))
        for (const auto& row : rec.outputs) {
            const auto& first = per_node ? rec.outputs[static_cast<size_t>((row.rank / c.ranks_per_node) * c.ranks_per_node)]
                                         : rec.outputs[0];
            RC_ASSERT(same_bits(row.values, first.values));
        }
}

// hpz-ag-fp: the backward weights are the forward weights bit for bit.
RC_GTEST_PROP(Paths, HpzFpBackwardEqualsForward, ()) {
    PathConfig c = *config_for(PathKind::kHpzAgFp);
    const auto x = inputs_for(c, qt::kernels::Distribution::kMixedScale, *rc::gen::arbitrary<uint64_t>());
    std::vector<float> fwd(static_cast<size_t>(c.elements)), bwd(static_cast<size_t>(c.elements));
    PathConfig f = c;
    f.path = PathKind::kRingAg;
    for (const auto& rec : run_production(f, x))
        std::copy(rec.outputs[0].values.begin(), rec.outputs[0].values.end(), fwd.begin() + rec.first);
    for (const auto& rec : run_production(c, x))
        for (const auto& row : rec.outputs)
            for (int64_t i = 0; i < rec.len; ++i) RC_ASSERT(qt::testing::to_bits(row.values[static_cast<size_t>(i)]) ==
                                                         qt::testing::to_bits(fwd[static_cast<size_t>(rec.first + i)]));
    (void)bwd;
}

namespace {
struct Spread {
    double max_diff = 0;        // largest |requant - fp| over every element
    bool within_bounds = true;  // every element inside its a-posteriori bound (the Δ1 + Δ2 of two events)
};
Spread hpz_modes(const PathConfig& base, const std::vector<float>& x) {
    PathConfig fp = base, rq = base;
    fp.path = PathKind::kHpzAgFp;
    rq.path = PathKind::kHpzAgRequant;
    const auto a = run_production(fp, x), b = run_production(rq, x);
    Spread s;
    qt::reference::PathChecker check(rq);
    for (size_t i = 0; i < a.size(); ++i) {
        for (int64_t e = 0; e < a[i].len; ++e)
            s.max_diff = std::max(s.max_diff, std::abs(static_cast<double>(a[i].outputs[0].values[static_cast<size_t>(e)]) -
                                                       b[i].outputs[0].values[static_cast<size_t>(e)]));
        check.add(b[i]);
    }
    s.within_bounds = check.stats().bound_holds;
    return s;
}
}  // namespace

// hpz-ag-requant with ds-int8 (DeepSpeed's behaviour) differs from mode fp, and stays inside the
// bound of two quantization events Δ1 + Δ2.
TEST(Paths, HpzRequantWithDsInt8DiffersWithinTwoSteps) {
    PathConfig c;
    c.format = *qt::parse_format("ds-int8");
    c.ranks = 16;
    c.ranks_per_node = 4;
    c.elements = 16 * 96;
    c.block = 32;
    std::vector<float> x(static_cast<size_t>(c.ranks * c.elements));
    for (int64_t r = 0; r < c.ranks; ++r)
        qt::kernels::generate_span(qt::kernels::Distribution::kNormal, 11, static_cast<uint32_t>(r), 0,
                                   std::span<float>(x.data() + r * c.elements, static_cast<size_t>(c.elements)));
    const Spread s = hpz_modes(c, x);
    EXPECT_GT(s.max_diff, 0.0) << "ds-int8 requantization should move the backward weights";
    EXPECT_TRUE(s.within_bounds);
    std::cout << "hpz-ag-requant vs hpz-ag-fp with ds-int8: max |difference| = " << s.max_diff << "\n";
    RecordProperty("hpz_ds_int8_max_difference", std::to_string(s.max_diff));
}

// ring-ag-requant: no drift for int<b> (idempotent: every rank holds the owner's bits), drift for
// ds-int<b> (the clamped +absmax shrinks the step at every hop).
TEST(Paths, RingAgRequantDriftsOnlyForDsFormats) {
    for (const char* name : {"int8", "int4", "ds-int8", "ds-int4"}) {
        PathConfig c;
        c.path = PathKind::kRingAgRequant;
        c.format = *qt::parse_format(name);
        c.ranks = 16;
        c.ranks_per_node = qt::kDefaultRanksPerNode;
        c.elements = 16 * 64;
        std::vector<float> x(static_cast<size_t>(c.ranks * c.elements));
        for (int64_t r = 0; r < c.ranks; ++r)
            qt::kernels::generate_span(qt::kernels::Distribution::kNormal, 5, static_cast<uint32_t>(r), 0,
                                       std::span<float>(x.data() + r * c.elements, static_cast<size_t>(c.elements)));
        qt::collectives::ArrayInputs in(x, c.elements);
        int64_t differing = 0;
        auto totals = qt::collectives::run_paths({c}, in, 1, [&](size_t, int, const ColumnRecord& rec) {
            for (const auto& row : rec.outputs) differing += !same_bits(row.values, rec.outputs[static_cast<size_t>(rec.first / c.shard())].values);
        });
        ASSERT_TRUE(totals.ok());
        if (std::string(name).rfind("ds-", 0) == 0) EXPECT_GT(differing, 0) << name;
        else EXPECT_EQ(differing, 0) << name;
        std::cout << name << ": " << differing << " (rank, block) pairs differ from the owner's bits\n";
    }
}

// A small config for the tests below: by default four ranks in two nodes, 16 elements per rank's
// shard, blocks of 16.
static PathConfig small_config(PathKind path, int64_t ranks = 4, int64_t per_node = 2, int64_t elements = 64) {
    PathConfig c;
    c.path = path;
    c.ranks = ranks;
    c.ranks_per_node = per_node;
    c.elements = elements;
    c.block = 16;
    qt::apply_element_type(c);
    return c;
}

// Per-stage formats (D25) run on the cpu backend; the others carry one format and say so before
// any work.

TEST(Paths, PerStageFormatsRunOnTheCpuBackendOnly) {
    PathConfig c = small_config(PathKind::kA2aHierRs);
    c.format = qt::FormatSpec{FormatKind::kSym, 8};
    c.stage_formats = {c.format, qt::FormatSpec{FormatKind::kSym, 4}};
    const std::vector<float> x(static_cast<size_t>(c.ranks * c.elements), 0.5f);
    qt::collectives::ArrayInputs in(x, c.elements);
    int columns = 0;
    auto sink = [&](size_t, int, const ColumnRecord&) { ++columns; };
    for (auto b : {qt::collectives::Backend::kMpi, qt::collectives::Backend::kDevice, qt::collectives::Backend::kNccl}) {
        const auto r = qt::collectives::run_paths({c}, in, 1, sink, b);
        ASSERT_FALSE(r.ok()) << qt::collectives::to_string(b);
        EXPECT_NE(r.error().message.find("per-stage formats (int8,int4) run with --backend cpu"), std::string::npos) << r.error().message;
    }
    EXPECT_EQ(columns, 0);
    ASSERT_TRUE(qt::collectives::run_paths({c}, in, 1, sink, qt::collectives::Backend::kCpu).ok());
    EXPECT_GT(columns, 0);
}

// The 16-bit paths (D26) run on the cpu and mpi backends, say so on a device before any work, and refuse an
// input their type cannot hold, naming it.
TEST(Paths, TypedPathsRunOffTheDeviceAndRefuseWhatTheirTypeCannotHold) {
    const PathConfig c = small_config(PathKind::kFp16RingAr);
    std::vector<float> x(static_cast<size_t>(c.ranks * c.elements), 0.5f);
    int columns = 0;
    auto sink = [&](size_t, int, const ColumnRecord&) { ++columns; };
    {
        qt::collectives::ArrayInputs in(x, c.elements);
        for (auto b : {qt::collectives::Backend::kDevice, qt::collectives::Backend::kNccl}) {
            const auto r = qt::collectives::run_paths({c}, in, 1, sink, b);
            ASSERT_FALSE(r.ok());
            EXPECT_NE(r.error().message.find("fp16-ring-ar runs with --backend cpu or mpi"), std::string::npos) << r.error().message;
        }
        EXPECT_EQ(columns, 0);
        ASSERT_TRUE(qt::collectives::run_paths({c}, in, 1, sink, qt::collectives::Backend::kCpu).ok());
        EXPECT_GT(columns, 0);
    }
    x[static_cast<size_t>(2 * c.elements + 5)] = 65520.0f;  // rounds to inf in binary16
    qt::collectives::ArrayInputs in(x, c.elements);
    const auto r = qt::collectives::run_paths({c}, in, 1, sink, qt::collectives::Backend::kCpu);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, qt::ErrorCode::kRangeOverflow);
    EXPECT_NE(r.error().message.find("rank 2 element 5"), std::string::npos) << r.error().message;
    EXPECT_NE(r.error().message.find("overflows fp16"), std::string::npos) << r.error().message;
    // The largest finite value is held; two of them overflow the sum: a non-finite output on every
    // rank and a failed bound, never a pass.
    x[static_cast<size_t>(2 * c.elements + 5)] = 65504.0f;
    x[static_cast<size_t>(3 * c.elements + 5)] = 65504.0f;
    qt::collectives::ArrayInputs in2(x, c.elements);
    std::vector<ColumnRecord> recs;
    ASSERT_TRUE(qt::collectives::run_paths({c}, in2, 1, [&](size_t, int, const ColumnRecord& rec) { recs.push_back(rec); },
                                           qt::collectives::Backend::kCpu).ok());
    qt::reference::PathChecker check(c);
    for (const auto& rec : recs) check.add(rec);
    const auto s = check.stats();
    EXPECT_FALSE(s.bound_holds);
    EXPECT_EQ(s.nonfinite_outputs, c.ranks);  // element 5 on every rank
    EXPECT_TRUE(std::isinf(s.max_a_priori));
}

// --divide (D27): a mean that forgot its division, or divided twice, or a pre-divided run judged as
// a plain sum, is caught; the right one passes. N = 3, so 1/N rounds.
TEST(Paths, DivideMistakesAreCaught) {
    for (PathKind path : {PathKind::kA2aRs, PathKind::kRingRs, PathKind::kBf16RingRs, PathKind::kFp16TreeAr}) {
        for (qt::Divide d : {qt::Divide::kPre, qt::Divide::kPost}) {
            PathConfig c = small_config(path, 3, 3, 96);
            c.format = qt::FormatSpec{FormatKind::kSym, 8};
            c.divide = d;
            SCOPED_TRACE(std::string(qt::path_info(path).name) + " " + to_string(d));
            const auto x = inputs_for(c, qt::kernels::Distribution::kNormal, 5);
            const auto recs = run_production(c, x);
            auto judge = [&](const PathConfig& as, const std::vector<ColumnRecord>& rs) {
                qt::reference::PathChecker check(as);
                for (const auto& r : rs) check.add(r);
                return check.stats();
            };
            const auto ok = judge(c, recs);
            EXPECT_TRUE(ok.bound_holds) << ok.first_violation;
            EXPECT_GT(ok.outputs_checked, 0);
            // The same outputs judged as a sum, or the sum judged as a mean: violations.
            PathConfig as_sum = c;
            as_sum.divide = qt::Divide::kNone;
            EXPECT_FALSE(judge(as_sum, recs).bound_holds);
            auto times = [&](float f) {
                auto rs = recs;
                for (auto& r : rs)
                    for (auto& row : r.outputs)
                        for (float& v : row.values) v *= f;
                return rs;
            };
            EXPECT_FALSE(judge(c, times(3.0f)).bound_holds);         // forgot the division
            EXPECT_FALSE(judge(c, times(1.0f / 3.0f)).bound_holds);  // divided twice
        }
    }
}

// A schedule that receives what was never sent is a bug in qtransit: the transport says so with an
// Error that run_column returns (ErrorCode::kInternal), never by ending the process.
TEST(Transport, ReceiveOfWhatWasNeverSentIsAnInternalError) {
    qt::collectives::SimTransport t(4, 4, *qt::parse_format("int8"));
    try {
        (void)t.recv(1, 0);
        FAIL() << "recv returned a message that nobody sent";
    } catch (const qt::collectives::TransportFailure& f) {
        EXPECT_EQ(f.error.code, qt::ErrorCode::kInternal);
        EXPECT_EQ(f.error.message, "internal error: rank 1 waits for a message from rank 0 that was never sent");
    }
}

// The gate keeps each distribution's inputs in a GeneratedTable (issue 16): any range of any rank
// must read the generator's own bits, for every distribution.
RC_GTEST_PROP(Inputs, GeneratedTableHoldsTheGeneratorsBits, ()) {
    const auto& dists = qt::kernels::all_distributions();
    const auto d = *rc::gen::elementOf(dists);
    const auto seed = *rc::gen::arbitrary<uint64_t>();
    const int64_t ranks = *rc::gen::inRange<int64_t>(1, 40);
    const int64_t m = *rc::gen::inRange<int64_t>(1, 600);
    const qt::collectives::GeneratedTable table(d, seed, ranks, m);
    const qt::collectives::GeneratedInputs gen(d, seed);
    RC_ASSERT(table.ranks() == ranks);
    RC_ASSERT(table.elements() == m);
    for (int trial = 0; trial < 8; ++trial) {
        const int64_t r = *rc::gen::inRange<int64_t>(0, ranks);
        const int64_t first = *rc::gen::inRange<int64_t>(0, m);
        const int64_t len = *rc::gen::inRange<int64_t>(0, m - first + 1);
        std::vector<float> a(static_cast<size_t>(len)), b(static_cast<size_t>(len));
        table.fill(r, first, len, a.data());
        gen.fill(r, first, len, b.data());
        // (RC_ASSERT's operands do not short-circuit: no memcmp of an empty range's null pointer.)
        const bool same = a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
        RC_ASSERT(same);
    }
}

// scales = "per-tensor" (D50, FSDP2's float8 all-gather): one amax over every rank's shard, every block's
// scale the same, the bounds holding in exact arithmetic; a config whose amax was never taken is refused.
TEST(Paths, PerTensorScaleIsTheTensorsForEveryBlock) {
    PathConfig c = small_config(PathKind::kRingAg, 4, 2, 256);
    c.format = *qt::parse_format("torchao-fp8-e4m3");
    c.tensor_scale = true;
    std::vector<float> x(static_cast<size_t>(c.ranks * c.elements));
    for (int64_t r = 0; r < c.ranks; ++r)
        qt::kernels::generate_span(qt::kernels::Distribution::kNormal, 9, static_cast<uint32_t>(r), 0,
                                   std::span<float>(x.data() + r * c.elements, static_cast<size_t>(c.elements)));
    // rank 3 holds the amax in its own shard; rank 0 a larger value outside its shard, which is not gathered
    x[static_cast<size_t>(3 * c.elements + 3 * c.shard() + 5)] = -37.5f;
    x[static_cast<size_t>(0 * c.elements + c.shard() + 1)] = 1000.0f;
    qt::collectives::ArrayInputs in(x, c.elements);
    const auto unresolved = qt::collectives::run_paths({c}, in, 1, [](size_t, int, const ColumnRecord&) {});
    ASSERT_FALSE(unresolved.ok());
    EXPECT_NE(unresolved.error().message.find("per-tensor scale was not resolved"), std::string::npos) << unresolved.error().message;
    ASSERT_TRUE(qt::collectives::resolve_tensor_scale(c, in).ok());
    EXPECT_EQ(c.tensor_amax, 37.5f);
    EXPECT_EQ(c.format.name(), "torchao-fp8-e4m3");
    qt::reference::PathChecker checker(c);
    std::vector<float> scales;
    auto totals = qt::collectives::run_paths({c}, in, 1, [&](size_t, int, const ColumnRecord& rec) {
        checker.add(rec);
        for (const auto& e : rec.events) scales.push_back(e.scale);
    });
    ASSERT_TRUE(totals.ok()) << totals.error().message;
    const auto st = checker.stats();
    EXPECT_TRUE(st.bound_holds) << st.first_violation;
    EXPECT_EQ(st.k_min, 1);
    EXPECT_EQ(st.k_max, 1);
    ASSERT_EQ(scales.size(), static_cast<size_t>(c.elements / c.block));
    // fl32(1 / m), m = fl32(448 / 37.5), in every block
    const float m = 448.0f / 37.5f;
    for (float s : scales) EXPECT_EQ(s, 1.0f / m);
    // Not per-tensor: the same format's blocks take their own absmax, and the scales differ.
    c = small_config(PathKind::kRingAg, 4, 2, 256);
    c.format = *qt::parse_format("torchao-fp8-e4m3");
    scales.clear();
    ASSERT_TRUE(qt::collectives::run_paths({c}, in, 1, [&](size_t, int, const ColumnRecord& rec) {
                    for (const auto& e : rec.events) scales.push_back(e.scale);
                }).ok());
    EXPECT_NE(*std::min_element(scales.begin(), scales.end()), *std::max_element(scales.begin(), scales.end()));
}

// FlashInfer's stripes (D52) where they rotate over the ranks: M = 4 x 8192, stripes of 4096, so
// chunk c's sums are kept by ranks 2c mod 4 and 2c + 1 mod 4, not by its owner c. Production equals
// the reference bit for bit, the keeper holds the unrequantized sum (k = 1), every other rank its
// requantization (k = 2), and the bounds hold.
TEST(Paths, FlashInferStripesKeepTheSumsWhereTheyRotate) {
    PathConfig c = small_config(PathKind::kTwoShotArKeep, 4, 4, 4 * 8192);
    c.format = *qt::parse_format("flashinfer-fp8");
    c.block = 256;
    c.flashinfer_stripes = true;
    ASSERT_EQ(c.stripe(), 4096);
    EXPECT_EQ(c.keeper(0), 0);
    EXPECT_EQ(c.keeper(4096), 1);
    EXPECT_EQ(c.keeper(8192), 2);
    EXPECT_EQ(c.keeper(3 * 4096), 3);
    EXPECT_EQ(c.keeper(4 * 4096), 0);
    std::vector<float> x(static_cast<size_t>(c.ranks * c.elements));
    for (int64_t r = 0; r < c.ranks; ++r)
        qt::kernels::generate_span(qt::kernels::Distribution::kNormal, 3, static_cast<uint32_t>(r), 0,
                                   std::span<float>(x.data() + r * c.elements, static_cast<size_t>(c.elements)));
    qt::collectives::ArrayInputs in(x, c.elements);
    auto ref = qt::reference::run_path_plain(c, x);
    ASSERT_TRUE(ref.ok()) << ref.error().message;
    qt::reference::PathChecker checker(c);
    std::vector<ColumnRecord> mine;
    auto totals = qt::collectives::run_paths({c}, in, 1, [&](size_t, int, const ColumnRecord& rec) {
        checker.add(rec);
        mine.push_back(rec);
    });
    ASSERT_TRUE(totals.ok()) << totals.error().message;
    std::sort(mine.begin(), mine.end(), [](const ColumnRecord& a, const ColumnRecord& b) { return a.first < b.first; });
    ASSERT_EQ(mine.size(), ref->size());
    int64_t kept_elsewhere = 0;
    for (size_t i = 0; i < mine.size(); ++i) {
        const int64_t keeper = c.keeper(mine[i].first), owner = mine[i].first / c.shard();
        kept_elsewhere += keeper != owner;
        for (size_t row = 0; row < mine[i].outputs.size(); ++row) {
            const auto& m = mine[i].outputs[row];
            ASSERT_TRUE(same_bits(m.values, (*ref)[i].outputs[row].values)) << "column " << mine[i].first << " rank " << m.rank;
            const auto k = qt::contribution_k(mine[i], m, c.ranks);
            for (int64_t j = 0; j < c.ranks; ++j)
                EXPECT_EQ(k[static_cast<size_t>(j)], qt::expected_k(c, mine[i].first, m.rank, j)) << "rank " << m.rank;
            EXPECT_EQ(k[0], m.rank == keeper ? 1 : 2);
        }
    }
    EXPECT_EQ(kept_elsewhere, static_cast<int64_t>(mine.size()) * 3 / 4);  // chunks 0 and 3 keep half their columns, 1 and 2 none
    const auto st = checker.stats();
    EXPECT_TRUE(st.bound_holds) << st.first_violation;
}
