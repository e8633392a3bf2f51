// Properties of the rotated formats in the reference (docs/FORMATS.md section 9): the transform is
// orthogonal up to its normalization, exactly (Eigen over integers); the binary32 transform stays
// within its rounding bound of the exact one; the per-element bound holds in exact arithmetic; the
// checker's double bound and its e(a) dominate the exact one; a rotated int format is odd and scale
// equivariant; block 1 is the unrotated format; and every refusal names what is wrong.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "generators.hpp"
#include "qtransit/common/bits.hpp"
#include "qtransit/common/format.hpp"
#include "qtransit/common/transit.hpp"
#include "qtransit/reference/checker.hpp"
#include "qtransit/reference/exact.hpp"
#include "qtransit/reference/formats.hpp"
#include "qtransit/reference/hadamard.hpp"
#include "qtransit/reference/paths.hpp"

namespace qtransit::reference {
namespace {


using testing::rotated_formats;

using testing::pow2_block, testing::rotatable, testing::tensor_length;

// ---- the transform ----------------------------------------------------------------------------------

TEST(RotatedTransform, SylvesterMatricesAreOrthogonalExactly) {
    for (int64_t n = 1; n <= 256; n *= 2) EXPECT_TRUE(hadamard_orthogonal(n)) << n;
    EXPECT_FALSE(hadamard_orthogonal(3));
    EXPECT_FALSE(hadamard_orthogonal(12));
}

// H (H v) = n v with no rounding: what makes the inverse H / n.
RC_GTEST_PROP(RotatedTransform, TwiceIsNTimesTheInputExactly, ()) {
    const int64_t n = int64_t{1} << *rc::gen::inRange(0, 8);
    const auto x = rotatable(n);
    std::vector<Exact::Int> v(x.size());
    for (size_t i = 0; i < x.size(); ++i) v[i] = Exact::fixed149(x[i]);
    const auto twice = hadamard_exact_fixed(hadamard_exact_fixed(v));
    for (size_t i = 0; i < x.size(); ++i) RC_ASSERT(twice[i] == v[i] * n);
}

// |fl(H x) - H x|_i <= ((1 + u)^L - 1) sum_j |x_j|, exactly: the forward rounding of the bound.
RC_GTEST_PROP(RotatedTransform, Binary32TransformIsWithinItsRoundingBound, ()) {
    const int l = *rc::gen::inRange(0, 9);
    const int64_t n = int64_t{1} << l;
    const auto x = rotatable(n);
    std::vector<float> y(x);
    hadamard_fl32(y);
    const auto exact = hadamard_exact(x);
    Exact sum, growth = Exact::from_int(1);
    for (float v : x) sum += Exact(v).abs();
    for (int i = 0; i < l; ++i) growth = growth * (Exact::from_int(1) + Exact::pow2(-24));
    const Exact bound = (growth - Exact::from_int(1)) * sum;
    for (size_t i = 0; i < y.size(); ++i) {
        RC_ASSERT(std::isfinite(y[i]));
        RC_ASSERT((Exact(y[i]) - exact[i]).abs() <= bound);
    }
    if (l == 0) RC_ASSERT(Exact(y[0]) == exact[0]);  // H_1 is the identity
}

// ---- the bound ----------------------------------------------------------------------------------------

RC_GTEST_PROP(RotatedBound, ExactBoundHoldsAndDecodeAgrees, ()) {
    const FormatSpec f = *rc::gen::elementOf(rotated_formats());
    const int64_t block = pow2_block(f, 7);
    const int64_t n = tensor_length(block);
    const auto x = rotatable(n);
    const Site site{"input", *rc::gen::inRange<int64_t>(-1, 4), *rc::gen::inRange<int64_t>(0, 5000)};
    const StochasticKey key{*rc::gen::arbitrary<uint64_t>(), 0};
    auto q = quantize(f, x, block, Nonfinite::kError, site, key);
    if (!q.ok()) RC_FAIL(f.name() + ": " + q.error().message);
    const BoundCheck bc = check_bounds(*q, x);
    RC_LOG() << f.name() << " block " << block << " n " << n << " max err/bound " << bc.max_error_to_bound << "\n";
    RC_ASSERT(bc.holds);
    for (size_t i = 0; i < x.size(); ++i) {
        RC_ASSERT(q->codes[i] >= f.code_min());
        RC_ASSERT(q->codes[i] <= f.code_max());
        RC_ASSERT(std::isfinite(q->decoded[i]));
    }
    const auto d = decode(f, q->codes, q->scales, q->offsets, block, key.seed, site.index_base);
    for (size_t i = 0; i < x.size(); ++i) RC_ASSERT(same_bits(d[i], q->decoded[i]));
    RC_CLASSIFY(bc.max_error_to_bound > 0.25, "error > bound / 4");
}

// The checker's bound (one double per block, a-priori rounding terms) dominates the exact one, and
// e(a) of the block length dominates both.
RC_GTEST_PROP(RotatedBound, CheckerBoundDominatesTheExactOne, ()) {
    const FormatSpec f = *rc::gen::elementOf(rotated_formats());
    const int64_t block = pow2_block(f, 7);
    const auto x = rotatable(block);
    const uint64_t seed = *rc::gen::arbitrary<uint64_t>();
    const int64_t first = *rc::gen::inRange<int64_t>(0, 1 << 20);
    auto q = quantize(f, x, block, Nonfinite::kError, Site{"input", 0, first}, StochasticKey{seed, 0});
    RC_PRE(q.ok());
    QuantEvent ev;
    ev.scale = q->scales[0];
    ev.x = x;
    ev.codes = q->codes;
    float amax = 0;
    for (float v : x) amax = std::max(amax, std::fabs(v));
    const double e_of_a = event_bound_of_absmax(f, amax, block);
    const std::vector<Exact> exact = rotated_block_bounds(*q, x, 0);
    for (size_t i = 0; i < x.size(); ++i) {
        const double mine = event_element_bound(f, ev, static_cast<int64_t>(i), seed, first);
        RC_LOG() << f.name() << " exact " << exact[i].to_double() << " mine " << mine << " e(a) " << e_of_a << "\n";
        RC_ASSERT(Exact(mine) >= exact[i]);
        RC_ASSERT(e_of_a >= mine);
    }
    RC_ASSERT(event_bound_of_absmax(f, static_cast<double>(amax) * 1.5, block) >= e_of_a);
}

// ---- what a rotated int format keeps of section 6's table ---------------------------------------------

RC_GTEST_PROP(RotatedProps, OddAndScaleEquivariant, ()) {
    const FormatSpec f = *rc::gen::element(parse_format("int4-rht").value(), parse_format("int8-had").value(),
                                           parse_format("int8-rht").value());
    const int64_t block = pow2_block(f, 6);
    // Normal values in a narrow range: no sum leaves the normal range, and 2^k keeps it so.
    const int e0 = *rc::gen::inRange(-40, 40);
    std::vector<float> x(static_cast<size_t>(block));
    for (auto& v : x) {
        v = std::ldexp(1.0f + std::ldexp(static_cast<float>(*rc::gen::inRange<uint32_t>(0, 1u << 23)), -23),
                       e0 - *rc::gen::inRange(0, 8));
        if (*rc::gen::arbitrary<bool>()) v = -v;
    }
    const Site site{"input", 0, 64};
    const StochasticKey key{5, 0};
    const int k = *rc::gen::inRange(-30, 31);
    std::vector<float> neg(x.size()), big(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
        neg[i] = -x[i];
        big[i] = std::ldexp(x[i], k);
    }
    const Quantized a = quantize(f, x, block, Nonfinite::kError, site, key).value();
    const Quantized b = quantize(f, neg, block, Nonfinite::kError, site, key).value();
    const Quantized c = quantize(f, big, block, Nonfinite::kError, site, key).value();
    for (size_t i = 0; i < x.size(); ++i) {
        RC_ASSERT(b.codes[i] == -a.codes[i]);
        RC_ASSERT(b.decoded[i] == -a.decoded[i]);
        RC_ASSERT(c.codes[i] == a.codes[i]);
    }
    RC_ASSERT(c.scales[0] == std::ldexp(a.scales[0], k));
}

TEST(RotatedProps, BlockOfOneIsTheUnrotatedFormat) {
    const FormatSpec plain = parse_format("int4").value();
    const std::vector<float> x{3.0f, -0.25f, 7.5e-3f, 0.0f, -1e30f, 0x1p-140f};
    const auto want = quantize(plain, x, 1).value();
    for (const char* name : {"int4-had", "int4-rht"}) {
        const auto got = quantize(parse_format(name).value(), x, 1, Nonfinite::kError, Site{"input", 0, 9}, {3, 0}).value();
        // Equal values (a negated zero comes back as -0 under random signs) and codes up to the sign.
        for (size_t i = 0; i < x.size(); ++i) {
            EXPECT_EQ(got.decoded[i], want.decoded[i]) << name << " " << i;
            EXPECT_EQ(std::abs(got.codes[i]), std::abs(want.codes[i])) << name << " " << i;
        }
    }
}

TEST(RotatedProps, SignsAreKeyedBySeedAndBlock) {
    const FormatSpec f = parse_format("int8-rht").value();
    std::vector<float> x(64);
    for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(static_cast<float>(i)) * (i == 5 ? 40.0f : 1.0f);
    auto q = [&](uint64_t seed, int64_t first) {
        return quantize(f, x, 64, Nonfinite::kError, Site{"input", 0, first}, StochasticKey{seed, 0}).value().codes;
    };
    EXPECT_EQ(q(1, 0), q(1, 0));
    EXPECT_NE(q(1, 0), q(2, 0));
    EXPECT_NE(q(1, 0), q(1, 64));
    int negated = 0;
    for (int64_t i = 0; i < 4096; ++i) negated += hadamard_negated(11, 0, i);
    EXPECT_GT(negated, 1900);  // a fair coin: 2048 +- 4 sigma (128)
    EXPECT_LT(negated, 2200);
}

// ---- refusals -----------------------------------------------------------------------------------------

TEST(RotatedRefusals, BlocksMustBePowersOfTwo) {
    const FormatSpec f = parse_format("int4-rht").value();
    const std::vector<float> x(48, 1.0f);
    auto a = quantize(f, x, 48);
    ASSERT_FALSE(a.ok());
    EXPECT_NE(a.error().message.find("power of two"), std::string::npos) << a.error().message;
    const std::vector<float> y(44, 1.0f);  // blocks of 32: the last one has 12 elements
    auto b = quantize(f, y, 32);
    ASSERT_FALSE(b.ok());
    EXPECT_NE(b.error().message.find("12 elements"), std::string::npos) << b.error().message;
    EXPECT_TRUE(quantize(f, std::vector<float>(40, 1.0f), 32).ok());  // a last block of 8
    Decl d = *f.decl;
    d.fixed_block = 24;
    EXPECT_FALSE(finalize(d).ok());
    d = *f.decl;
    d.transform = Transform::kNone;
    EXPECT_FALSE(finalize(d).ok()) << "random signs without a transform";
    // A rotation needs a scale: with none, a poisoned block has nothing to mark it through the way back.
    d = *parse_format("fbgemm-fp8").value().decl;
    d.transform = Transform::kHadamard;
    const auto none = finalize(d);
    ASSERT_FALSE(none.ok());
    EXPECT_NE(none.error().message.find("'hadamard' needs a scale"), std::string::npos) << none.error().message;
}

TEST(RotatedRefusals, NonFiniteAndOverflowAreNamed) {
    const FormatSpec f = parse_format("int8-had").value();
    std::vector<float> x(64, 1.0f);
    x[40] = std::numeric_limits<float>::quiet_NaN();
    auto a = quantize(f, x, 32, Nonfinite::kError, Site{"grad", 2, 0});
    ASSERT_FALSE(a.ok());
    EXPECT_NE(a.error().message.find("40"), std::string::npos) << a.error().message;
    EXPECT_NE(a.error().message.find("rank 2"), std::string::npos) << a.error().message;
    std::vector<float> big(32, 3e37f);  // the transform's first output is 32 x 3e37, past FLT_MAX / 2^7
    auto b = quantize(f, big, 32);
    ASSERT_FALSE(b.ok());
    EXPECT_EQ(b.error().code, ErrorCode::kRangeOverflow);
    EXPECT_NE(b.error().message.find("Hadamard"), std::string::npos) << b.error().message;
    // Under propagate both blocks are poisoned, and decode to the one quiet NaN.
    std::vector<float> both(x);
    std::copy(big.begin(), big.end(), both.begin());
    auto c = quantize(f, both, 32, Nonfinite::kPropagate);
    ASSERT_TRUE(c.ok());
    for (float v : c->decoded) EXPECT_EQ(std::bit_cast<uint32_t>(v), 0x7FC00000u);
}

// ---- the checker on the reference paths ---------------------------------------------------------------

RC_GTEST_PROP(RotatedChecker, BoundHoldsOnReferencePaths, ()) {
    const FormatSpec f = *rc::gen::elementOf(rotated_formats());
    const PathInfo& pi = *rc::gen::elementOf(all_paths());
    RC_PRE(!typed_path(pi.kind));
    PathConfig c;
    c.path = pi.kind;
    c.format = f;
    c.accum = *rc::gen::element(Accum::kFp32, Accum::kBf16);
    const int lg = *rc::gen::inRange(0, 4);
    c.ranks = int64_t{1} << lg;
    c.ranks_per_node = *rc::gen::element<int64_t>(1, c.ranks);
    c.block = pow2_block(f, 4);
    c.elements = c.ranks * c.block * *rc::gen::inRange<int64_t>(1, 3);
    c.seed = *rc::gen::arbitrary<uint64_t>();
    const bool reduce_scatter = c.path == PathKind::kRingRs || c.path == PathKind::kA2aRs || c.path == PathKind::kA2aHierRs ||
                                c.path == PathKind::kTreeRs;
    if (reduce_scatter && *rc::gen::arbitrary<bool>()) c.rotation = Rotation::kEndToEnd;  // D28
    std::vector<float> x = rotatable(c.ranks * c.elements);
    for (auto& v : x) v = std::ldexp(v, -40);  // far below FLT_MAX / (N block): no sum overflows
    auto cols = run_path_plain(c, x);
    if (!cols.ok()) RC_FAIL(cols.error().message);
    PathChecker ck(c);
    for (const auto& col : cols.value()) ck.add(col);
    const PathStats s = ck.stats();
    RC_LOG() << f.name() << " " << pi.name << " N=" << c.ranks << " B=" << c.block << " M=" << c.elements << "\n";
    if (!s.bound_holds) RC_FAIL(s.first_violation);
    RC_ASSERT(s.max_a_posteriori <= s.max_a_priori);
}

}  // namespace
}  // namespace qtransit::reference

namespace qtransit::reference {
namespace {

// End to end (D28): the same schedule summed in the rotated domain; the ledger says so, its bound
// holds, and an output moved by twice its a-posteriori bound is caught (the check is not vacuous).
TEST(RotatedChecker, EndToEndIsRecordedAndChecked) {
    PathConfig c;
    c.path = PathKind::kA2aHierRs;
    c.format = parse_format("int4-rht").value();
    c.ranks = 16;
    c.ranks_per_node = 4;
    c.block = 32;
    c.elements = 16 * 64;
    c.seed = 9;
    std::vector<float> x(static_cast<size_t>(c.ranks * c.elements));
    for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * static_cast<float>(i)) * (i % 97 == 0 ? 50.0f : 1.0f);
    auto each = run_path_plain(c, x);
    c.rotation = Rotation::kEndToEnd;
    auto end = run_path_plain(c, x);
    ASSERT_TRUE(each.ok() && end.ok());
    PathChecker ce(c), cr(c);
    PathConfig ceach = c;
    ceach.rotation = Rotation::kEachHop;
    PathChecker ch(ceach);
    int differ = 0;
    for (size_t k = 0; k < end->size(); ++k) {
        EXPECT_TRUE((*end)[k].rotated_sum);
        EXPECT_FALSE((*each)[k].rotated_sum);
        ce.add((*end)[k]);
        ch.add((*each)[k]);
        for (size_t i = 0; i < (*end)[k].outputs[0].values.size(); ++i)
            differ += (*end)[k].outputs[0].values[i] != (*each)[k].outputs[0].values[i];
    }
    EXPECT_TRUE(ce.stats().bound_holds) << ce.stats().first_violation;
    EXPECT_TRUE(ch.stats().bound_holds) << ch.stats().first_violation;
    EXPECT_GT(differ, 0) << "summing in the rotated domain rounds differently";
    // The a-priori bound of the end-to-end sum is the rotated domain's, taken back once: far below
    // each hop's, which pays the block's growth at every quantization.
    EXPECT_LT(ce.stats().max_a_priori, ch.stats().max_a_priori);
    auto moved = *end;
    auto& v = moved[3].outputs[0].values[5];
    v = static_cast<float>(v + 2 * ce.stats().max_a_posteriori + 1);
    for (const auto& col : moved) cr.add(col);
    EXPECT_FALSE(cr.stats().bound_holds);
}

}  // namespace
}  // namespace qtransit::reference
