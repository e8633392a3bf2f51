// Single-quantization properties of every built-in format (NUMERICS.md section 1), checked on the
// reference and on the production CPU kernel. Replay a failure with the seed RapidCheck prints:
//   RC_PARAMS="reproduce=<string>" ./format_properties_test --gtest_filter=...
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iostream>

#include "fused_encode_check.hpp"
#include "generators.hpp"
#include "qtransit/common/bits.hpp"
#include "qtransit/common/decl_toml.hpp"
#include "qtransit/kernels/codec.hpp"
#include "qtransit/reference/formats.hpp"

namespace qt = qtransit;
using qt::FormatKind;
using qt::FormatSpec;
using namespace qt::testing;

namespace {

// ds-int<b> rounds its input to binary16 first and refuses what overflows it (DECISIONS D3): bring
// such values into [2^14, 2^15) keeping sign and mantissa, so the property exercises the format.
std::vector<float> fit_for(const FormatSpec& f, std::vector<float> x) {
    if (f.kind != FormatKind::kDs && f.kind != FormatKind::kQr) return x;
    for (float& v : x) {
        if (std::abs(v) >= 65504.0f) {
            int e;
            const float m = std::frexp(v, &e);
            v = std::ldexp(m, 15);
        }
    }
    return x;
}

// The reference quantization of x. A block whose range overflows binary32 (asym) is refused, which
// is the specified outcome (section 4): such a case ends here as a success, tagged.
qt::reference::Quantized ref_q(const FormatSpec& f, const std::vector<float>& x, int64_t block) {
    auto r = qt::reference::quantize(f, x, block);
    if (!r.ok()) {
        RC_ASSERT(r.error().code == qt::ErrorCode::kRangeOverflow);
        RC_ASSERT(f.kind == FormatKind::kAsym);
        RC_SUCCEED("refused: range overflow");
    }
    return std::move(*r);
}

using qtransit::same_bits;

// The hand-written formats: NUMERICS 1.1-1.3's and QuickReduce's (docs/FORMATS.md section 11).
const std::vector<FormatSpec>& hand_written() {
    static const std::vector<FormatSpec> v = [] {
        std::vector<FormatSpec> r = qt::builtin_formats();
        for (int b : {4, 6, 8}) r.push_back({FormatKind::kQr, b});
        return r;
    }();
    return v;
}
rc::Gen<FormatSpec> any_hand_format() { return rc::gen::elementOf(hand_written()); }

}  // namespace

RC_GTEST_PROP(Formats, BoundHoldsInExactArithmetic, ()) {
    const FormatSpec f = *any_hand_format();
    const Case c = *tensor_case();
    const auto x = fit_for(f, c.x);
    RC_CLASSIFY(true, f.name());
    const auto q = ref_q(f, x, c.block);
    const auto check = qt::reference::check_bounds(q, x);
    RC_ASSERT(check.holds);
    RC_ASSERT(check.max_error_to_bound <= 1.0);
}

RC_GTEST_PROP(Formats, CodesInRange, ()) {
    const FormatSpec f = *any_hand_format();
    const Case c = *tensor_case();
    const auto q = ref_q(f, fit_for(f, c.x), c.block);
    for (int32_t code : q.codes) {
        RC_ASSERT(code >= f.code_min());
        RC_ASSERT(code <= f.code_max());
    }
}

// int<b> is symmetric: q(-x) = -q(x) and the decoded values negate exactly.
RC_GTEST_PROP(Formats, SignSymmetryOfIntB, ()) {
    const FormatSpec f{FormatKind::kSym, *rc::gen::inRange(2, 9)};
    const Case c = *tensor_case();
    std::vector<float> neg(c.x);
    for (float& v : neg) v = -v;
    const auto q = ref_q(f, c.x, c.block), qn = ref_q(f, neg, c.block);
    for (size_t i = 0; i < c.x.size(); ++i) {
        RC_ASSERT(qn.codes[i] == -q.codes[i]);
        RC_ASSERT(qn.decoded[i] == -q.decoded[i]);
    }
}

// Every format is monotone within a block: x_i <= x_j implies q_i <= q_j and x̂_i <= x̂_j (for
// quickreduce-q<b> with a negative scale, dec < 0, the codes run the other way: q_i >= q_j).
RC_GTEST_PROP(Formats, MonotoneWithinABlock, ()) {
    const FormatSpec f = *any_hand_format();
    const auto x = fit_for(f, *block_values(64));
    const auto q = ref_q(f, x, static_cast<int64_t>(x.size()));
    for (size_t i = 0; i < x.size(); ++i)
        for (size_t j = 0; j < x.size(); ++j)
            if (x[i] <= x[j]) {
                const bool reversed = f.kind == FormatKind::kQr && std::signbit(q.scales[0]);
                const bool ordered = reversed ? q.codes[i] >= q.codes[j] : q.codes[i] <= q.codes[j];
                RC_ASSERT(ordered);
                RC_ASSERT(q.decoded[i] <= q.decoded[j]);
            }
}

// Scaling a block by 2^k scales s by 2^k and keeps the codes, when nothing overflows or underflows:
// every nonzero value, scaled or not, and the scale itself stay normal binary32 numbers (int<b>,
// int<b>-asym). ds-int<b> promises it only inside binary16's normal range, so it is left out.
RC_GTEST_PROP(Formats, PowerOfTwoScaleEquivariance, ()) {
    const FormatSpec f{*rc::gen::element(FormatKind::kSym, FormatKind::kAsym), *rc::gen::inRange(2, 9)};
    const int e0 = *rc::gen::inRange(-60, 60);
    const int k = *rc::gen::inRange(-40, 41);
    const auto x = *vector_of<float>(1, 80, dyadic(e0, e0 + 6));
    const int64_t block = *rc::gen::inRange<int64_t>(1, 40);
    std::vector<float> y(x);
    for (float& v : y) v = std::ldexp(v, k);
    const auto qx = ref_q(f, x, block), qy = ref_q(f, y, block);
    for (size_t j = 0; j < qx.scales.size(); ++j) {
        // Scales at the 2^-149 floor or in the subnormal range are not scaled exactly: out of scope.
        RC_PRE(qx.scales[j] == 0.0f || (qx.scales[j] >= FLT_MIN && qy.scales[j] >= FLT_MIN));
        RC_ASSERT(qy.scales[j] == std::ldexp(qx.scales[j], k));
        if (!qx.offsets.empty()) RC_ASSERT(same_bits(qy.offsets[j], std::ldexp(qx.offsets[j], k)));
    }
    RC_ASSERT(qx.codes == qy.codes);
    for (size_t i = 0; i < x.size(); ++i) RC_ASSERT(qy.decoded[i] == std::ldexp(qx.decoded[i], k));
}

RC_GTEST_PROP(Formats, PackingRoundTrips, ()) {
    const FormatSpec f = *any_hand_format();
    const int64_t block = *rc::gen::inRange<int64_t>(1, 70);
    const auto codes = *rc::gen::container<std::vector<int32_t>>(rc::gen::inRange(f.code_min(), f.code_max() + 1));
    const auto bytes = qt::reference::pack(f, codes, block);
    RC_ASSERT(static_cast<int64_t>(bytes.size()) ==
              f.wire_bytes(static_cast<int64_t>(codes.size()), block) -
                  f.metadata_bytes() * ((static_cast<int64_t>(codes.size()) + block - 1) / block));
    RC_ASSERT(qt::reference::unpack(f, bytes, static_cast<int64_t>(codes.size()), block) == codes);
}

// int<b>: decoding then re-encoding reproduces the same codes (and so the same bits), which is what
// lets a value cross many hops of a gather without drift. It holds for blocks whose scale is a
// normal number (or 0); a subnormal scale is rounded too coarsely to survive (docs/DECISIONS.md D7).
RC_GTEST_PROP(Formats, IntBIsIdempotent, ()) {
    const FormatSpec f{FormatKind::kSym, *rc::gen::inRange(2, 9)};
    const Case c = *tensor_case();
    const auto q1 = ref_q(f, c.x, c.block);
    for (float s : q1.scales) RC_PRE(s == 0.0f || s >= FLT_MIN);
    const auto q2 = ref_q(f, q1.decoded, c.block);
    RC_ASSERT(q2.codes == q1.codes);
    RC_ASSERT(q2.scales == q1.scales);
    const auto k1 = qt::kernels::encode(f, c.x, c.block);
    RC_ASSERT(k1.ok());
    const auto k2 = qt::kernels::encode(f, qt::kernels::decode(*k1), c.block);
    RC_ASSERT(k2.ok());
    RC_ASSERT(k2->codes == k1->codes);
}

namespace {
// One ds block of normal values whose largest element is positive (it is the one that gets
// clamped). With `keep_negatives_inside`, every negative value stays below 0.85 of the absmax, so
// no negative code reaches -2^(b-1) (that needs |y| >= a (1 - 2^-b)) and requantization has to
// shrink the absmax, hence the step.
rc::Gen<std::vector<float>> ds_block_with_positive_absmax(bool keep_negatives_inside) {
    return rc::gen::mapcat(rc::gen::inRange(2, 65), [keep_negatives_inside](int n) {
        return rc::gen::map(rc::gen::container<std::vector<int>>(static_cast<size_t>(n), rc::gen::inRange(-30000, 30001)),
                            [keep_negatives_inside](std::vector<int> v) {
                                int amax = 1;
                                for (int i : v) amax = std::max(amax, std::abs(i));
                                std::vector<float> x;
                                for (int i : v) {
                                    if (keep_negatives_inside) i = std::max(i, -(amax * 85) / 100);
                                    x.push_back(static_cast<float>(i) / 1024.0f);
                                }
                                x[0] = static_cast<float>(amax) / 1024.0f;  // the +absmax
                                return x;
                            });
    });
}
}  // namespace

// ds-int<b> is NOT idempotent (NUMERICS 1.3). This test *finds* that: RapidCheck is asked to prove
// idempotence, must come back with a counterexample, and the shrink of the step on requantization
// is then measured on every clamped block: (2^(b-1) - 1) / 2^(b-1), up to the binary16 rounding of
// the new absmax (relative 2^-11) and the binary32 rounding of the two steps.
TEST(Formats, DsIntBIsNotIdempotentAndShrinksTheStep) {
    for (int bits : {4, 8}) {
        const FormatSpec f{FormatKind::kDs, bits};
        std::cout << "Expected below: RapidCheck is asked to prove that ds-int" << bits
                  << " requantization keeps the codes, and must find a counterexample.\n";
        const bool idempotent = rc::check("ds-int" + std::to_string(bits) + " requantization keeps the codes", [&] {
            const auto x = *ds_block_with_positive_absmax(false);
            const auto q1 = ref_q(f, x, static_cast<int64_t>(x.size()));
            const auto q2 = ref_q(f, q1.decoded, static_cast<int64_t>(x.size()));
            RC_ASSERT(q2.codes == q1.codes);
        });
        EXPECT_FALSE(idempotent) << "RapidCheck found no block that ds-int" << bits << " requantizes differently";

        const double ratio = static_cast<double>((1 << (bits - 1)) - 1) / (1 << (bits - 1));
        double lo = 1e9, hi = 0;
        const bool shrinks = rc::check("ds-int" + std::to_string(bits) + " step shrinks by (2^(b-1)-1)/2^(b-1)", [&] {
            const auto x = *ds_block_with_positive_absmax(true);
            const auto q1 = ref_q(f, x, static_cast<int64_t>(x.size()));
            const int32_t cmax = f.code_max();
            // The shrink needs the +absmax clamped and no negative code at -2^(b-1) (which would
            // keep the absmax after decoding).
            RC_PRE(q1.codes[0] == cmax);
            for (int32_t code : q1.codes) RC_PRE(code > f.code_min());
            const auto q2 = ref_q(f, q1.decoded, static_cast<int64_t>(x.size()));
            const double r = static_cast<double>(q2.scales[0]) / q1.scales[0];
            lo = std::min(lo, r);
            hi = std::max(hi, r);
            RC_ASSERT(std::abs(r / ratio - 1.0) <= std::ldexp(1.0, -11) + std::ldexp(1.0, -21));
        });
        EXPECT_TRUE(shrinks);
        std::cout << "ds-int" << bits << ": requantization step ratio in [" << lo << ", " << hi << "], expected "
                  << ratio << " = (2^" << bits - 1 << " - 1)/2^" << bits - 1 << "\n";
        RecordProperty("ds_int" + std::to_string(bits) + "_step_ratio_min", std::to_string(lo));
    }
}

// The production kernel equals the reference bit for bit: scales, offsets, packed bytes, decoded
// values; over random lengths and block sizes, starting at misaligned addresses, on 1..3 threads.
RC_GTEST_PROP(Kernels, CpuEqualsReferenceBitForBit, ()) {
    const FormatSpec f = *any_hand_format();
    const Case c = *tensor_case(8, 90);
    const auto x = fit_for(f, c.x);
    const int misalign = *rc::gen::inRange(0, 16);
    const int threads = *rc::gen::inRange(1, 4);
    std::vector<float> buf(x.size() + 16);
    std::copy(x.begin(), x.end(), buf.begin() + misalign);
    const std::span<const float> xs(buf.data() + misalign, x.size());
    qt::kernels::CodecOptions opt;
    opt.threads = threads;
    const auto k = qt::kernels::encode(f, xs, c.block, opt);
    const auto r = qt::reference::quantize(f, x, c.block);
    RC_ASSERT(k.ok() == r.ok());
    if (!r.ok()) {  // both refuse, with the same message
        RC_ASSERT(k.error().code == r.error().code);
        RC_ASSERT(k.error().message.substr(0, k.error().message.find(':')) ==
                  r.error().message.substr(0, r.error().message.find(':')));
        RC_SUCCEED("refused: range overflow");
    }
    RC_ASSERT(k->scales.size() == r->scales.size());
    for (size_t j = 0; j < r->scales.size(); ++j) RC_ASSERT(same_bits(k->scales[j], r->scales[j]));
    RC_ASSERT(k->offsets.size() == r->offsets.size());
    for (size_t j = 0; j < r->offsets.size(); ++j) RC_ASSERT(same_bits(k->offsets[j], r->offsets[j]));
    RC_ASSERT(k->codes == qt::reference::pack(f, r->codes, c.block));
    RC_ASSERT(qt::kernels::unpack_codes(*k) == r->codes);
    const auto dec = qt::kernels::decode(*k, threads);
    for (size_t i = 0; i < x.size(); ++i) RC_ASSERT(same_bits(dec[i], r->decoded[i]));
}

// The plain declared formats (no rotation, no offset; int and float elements, stochastic rounding
// too) are encoded, with AVX-512 and blocks of 16 to 128, in one pass over x (kernels/cpu/codec.cpp,
// encode_fused); elsewhere, and for every other block or an unusual chunk, by encode_decl_fast's
// two passes. Fused, unfused and the reference agree (and so does the decode of what they wrote,
// every packing width), error messages included, on tensors of
// several chunks with a short last block, a misaligned start, zeros and subnormals, and maybe NaN
// and inf values or an all-huge block, under both policies, from any index base and seed.
RC_GTEST_PROP(Kernels, FusedDeclaredEncodeEqualsUnfusedAndReference, ()) {
    static const std::vector<FormatSpec> plain = [] {
        std::vector<FormatSpec> v;
        for (const FormatSpec& f : qt::all_builtin_formats())
            if (f.kind == FormatKind::kDecl && !f.rotated() && !f.decl->offset_min) v.push_back(f);
        return v;
    }();
    const FormatSpec f = *rc::gen::elementOf(plain);
    const int64_t block = f.decl->fixed_block > 0 ? f.decl->fixed_block : *rc::gen::element<int64_t>(16, 32, 64, 128, 8, 96);
    int64_t n = block * *rc::gen::inRange<int64_t>(1, 3 * 4096 / block + 3);
    if (*rc::gen::arbitrary<bool>()) n += *rc::gen::inRange<int64_t>(1, block);
    check_fused_encode(f, block, n, 3e38f, true);
}

// A user's declaration: an int or float element of any width, every rounding mode, every scale type
// and packing order. Blocks of 32 take encode_fused's codes in registers (int_codes16_avx512,
// float_codes16_avx512, pack_regs_avx512), the others its staged steps; fused, unfused and the
// reference agree as above, also on values of 2, 3 or 5 significant bits (ties of the rounding under
// power-of-two scales). The built-ins alone round to nearest-even or stochastically: the other modes
// (ties away, ties down on the signed value, toward zero) are only declared.
RC_GTEST_PROP(Kernels, FusedEncodeOfAnyDeclaredIntOrFloatEqualsTheReference, ()) {
    std::string text = "name = \"prop-decl\"\n";
    text += "scale = \"" + *rc::gen::element<std::string>("fp32-absmax", "fp16-absmax", "e8m0-floor", "e8m0-rceil", "none") + "\"\n";
    text += "rounding = \"" +
            *rc::gen::element<std::string>("nearest-even", "nearest-away", "nearest-down", "toward-zero", "stochastic") + "\"\n";
    text += "packing = \"" + *rc::gen::element<std::string>("lsb-first", "msb-first") + "\"\n[element]\n";
    if (*rc::gen::arbitrary<bool>()) {
        text += "type = \"int\"\nbits = " + std::to_string(*rc::gen::inRange(2, 9)) + "\n";
        text += "range = \"" + *rc::gen::element<std::string>("restricted", "full") + "\"\n";
        text += "fraction_bits = " + std::to_string(*rc::gen::element(0, 0, 1, 3)) + "\n";
    } else {
        const int e = *rc::gen::inRange(1, 6);
        text += "type = \"float\"\nexponent_bits = " + std::to_string(e) + "\n";
        text += "mantissa_bits = " + std::to_string(*rc::gen::inRange(0, 8 - e)) + "\n";
        text += "special = \"" + *rc::gen::element<std::string>("ieee", "nan-only", "none") + "\"\n";
    }
    const auto f = qt::parse_declaration(text, "prop-decl.toml");
    RC_PRE(f.ok());  // (a float too narrow for its specials)
    RC_LOG() << text;
    const int64_t block = *rc::gen::element<int64_t>(32, 32, 32, 16, 64);
    int64_t n = block * *rc::gen::inRange<int64_t>(1, 2 * 4096 / block + 3);
    if (*rc::gen::arbitrary<bool>()) n += *rc::gen::inRange<int64_t>(1, block);
    check_fused_encode(*f, block, n, 3e38f, true, qt::kernels::set_fused_encode, *rc::gen::element(24, 24, 2, 3, 5));
}

// int2, int3, int5, int6 and int7 are encoded and decoded, with AVX-512, as their declared twins
// (kernels/cpu/codec.cpp, declared_twin: the same declaration through the declared formats'
// kernels); elsewhere, and with kernels::set_declared_twins(false), by their hand-written loops.
// Twin, hand-written loops and the reference agree, refusals and decode included, on tensors with
// NaN, inf and huge blocks, short last blocks and blocks from 1 to 128, under both policies.
RC_GTEST_PROP(Kernels, HandWrittenIntEqualsItsDeclaredTwin, ()) {
    const FormatSpec f(FormatKind::kSym, *rc::gen::element(2, 3, 5, 6, 7));
    const int64_t block = *rc::gen::element<int64_t>(16, 32, 64, 128, 1, 5, 33, 96);
    int64_t n = block * *rc::gen::inRange<int64_t>(1, 2 * 4096 / block + 3);
    if (block > 1 && *rc::gen::arbitrary<bool>()) n += *rc::gen::inRange<int64_t>(1, block);
    check_fused_encode(f, block, n, 3e38f, true, qt::kernels::set_declared_twins);
}

// quickreduce-q<b> where its own arithmetic decides (docs/FORMATS.md section 11): groups of every
// binary16 magnitude (the extreme from 2^-30 to 2^15: subnormal, zero and saturating scales), ties of
// the extreme (+a and -a), signed-zero groups, binary32 inputs between binary16 values, and values
// that overflow binary16 (poisoned under propagate). The kernel equals the reference bit for bit, on
// 1..3 threads, and every element is within its bound.
RC_GTEST_PROP(Kernels, QuickReduceEqualsTheReferenceAndItsBoundHolds, ()) {
    const FormatSpec f{FormatKind::kQr, *rc::gen::element(4, 6, 8)};
    const int64_t block = *rc::gen::element<int64_t>(32, 32, 1, 2, 7, 33, 64);
    const int64_t groups = *rc::gen::inRange<int64_t>(1, 7);
    std::vector<float> x;
    for (int64_t g = 0; g < groups; ++g) {
        const int64_t len = g + 1 < groups ? block : *rc::gen::inRange<int64_t>(1, block + 1);
        const int center = *rc::gen::inRange(-30, 16);
        const int kind = *rc::gen::inRange(0, 8);
        std::vector<float> v(static_cast<size_t>(len));
        for (auto& e : v) {
            const float mant = 1.0f + static_cast<float>(*rc::gen::inRange(0, 1 << 20)) * 0x1p-20f;
            e = (*rc::gen::arbitrary<bool>() ? -1.0f : 1.0f) * std::ldexp(mant, center - *rc::gen::inRange(0, 14));
            if (std::fabs(e) >= 65520.0f) e = std::copysign(65504.0f, e);
        }
        if (kind == 1 && len > 1) v[1] = -v[0], v[0] = std::fabs(v[0]) * 1.0f;  // maybe a tie of the extreme
        if (kind == 2) std::fill(v.begin(), v.end(), *rc::gen::element(0.0f, -0.0f));
        if (kind == 3) v[0] = *rc::gen::element(65519.99f, -65519.99f, 65504.0f);
        if (kind == 4) v[static_cast<size_t>(*rc::gen::inRange<int64_t>(0, len))] = *rc::gen::element(65520.0f, -70000.0f);
        x.insert(x.end(), v.begin(), v.end());
    }
    RC_CLASSIFY(true, f.name());
    qt::kernels::CodecOptions opt;
    opt.policy = qt::Nonfinite::kPropagate;
    opt.threads = *rc::gen::inRange(1, 4);
    const auto k = qt::kernels::encode(f, x, block, opt);
    const auto r = qt::reference::quantize(f, x, block, qt::Nonfinite::kPropagate);
    RC_ASSERT(k.ok() && r.ok());
    RC_ASSERT(k->scales.size() == r->scales.size());
    for (size_t j = 0; j < r->scales.size(); ++j) RC_ASSERT(same_bits(k->scales[j], r->scales[j]));
    RC_ASSERT(k->codes == qt::reference::pack(f, r->codes, block));
    const auto dec = qt::kernels::decode(*k, opt.threads);
    for (size_t i = 0; i < x.size(); ++i) RC_ASSERT(same_bits(dec[i], r->decoded[i]));
    const auto check = qt::reference::check_bounds(*r, x);
    RC_ASSERT(check.holds);
}

// Policy `error`: a NaN or inf is refused, by both implementations, naming the first bad index.
RC_GTEST_PROP(Nonfinite, ErrorPolicyNamesTheIndex, ()) {
    const FormatSpec f = *any_hand_format();
    Case c = *tensor_case();
    c.x = fit_for(f, c.x);
    const size_t bad = *rc::gen::inRange<size_t>(0, c.x.size());
    c.x[bad] = 0.0f;
    RC_PRE(qt::reference::quantize(f, c.x, c.block).ok());  // no other refusal (an asym range overflow)
    c.x[bad] = *rc::gen::element(NAN, INFINITY, -INFINITY);
    qt::Site site;
    site.tensor = "grad";
    site.rank = 5;
    const auto k = qt::kernels::encode(f, c.x, c.block, {qt::Nonfinite::kError, site, 1});
    const auto r = qt::reference::quantize(f, c.x, c.block, qt::Nonfinite::kError, site);
    RC_ASSERT(!k.ok());
    RC_ASSERT(!r.ok());
    // The first bad element may sit in an earlier block than `bad` only if that block is bad too;
    // here only one element is non-finite.
    const std::string expect = "tensor 'grad' rank 5 element " + std::to_string(bad) + ":";
    RC_ASSERT(k.error().message.rfind(expect, 0) == 0);
    RC_ASSERT(r.error().message.rfind(expect, 0) == 0);
    RC_ASSERT(k.error().code == qt::ErrorCode::kNonFinite);
}

// Policy `propagate`: exactly the blocks holding a non-finite value are poisoned (NaN scale, every
// element 0x7FC00000); every other block is what it would be on its own.
RC_GTEST_PROP(Nonfinite, PropagatePoisonsExactlyTheAffectedBlocks, ()) {
    const FormatSpec f = *any_hand_format();
    Case c = *tensor_case();
    c.x = fit_for(f, c.x);
    const auto bad = *vector_of<size_t>(1, 3, rc::gen::inRange<size_t>(0, c.x.size()));
    for (size_t i : bad) c.x[i] = 0.0f;
    RC_PRE(qt::reference::quantize(f, c.x, c.block).ok());  // no other refusal (an asym range overflow)
    for (size_t i : bad) c.x[i] = *rc::gen::element(NAN, INFINITY, -INFINITY);
    const auto k = qt::kernels::encode(f, c.x, c.block, {qt::Nonfinite::kPropagate, {}, 1});
    RC_ASSERT(k.ok());
    const auto dec = qt::kernels::decode(*k);
    const auto r = qt::reference::quantize(f, c.x, c.block, qt::Nonfinite::kPropagate);
    RC_ASSERT(r.ok());
    const int64_t n = static_cast<int64_t>(c.x.size());
    for (int64_t j = 0; j * c.block < n; ++j) {
        const int64_t first = j * c.block, len = std::min(c.block, n - first);
        bool has_bad = false;
        for (int64_t i = first; i < first + len; ++i) has_bad |= !std::isfinite(c.x[static_cast<size_t>(i)]);
        RC_ASSERT(std::isnan(k->scales[static_cast<size_t>(j)]) == has_bad);
        RC_ASSERT(r->poisoned[static_cast<size_t>(j)] == has_bad);
        if (has_bad) {
            for (int64_t i = first; i < first + len; ++i) {
                RC_ASSERT(to_bits(dec[static_cast<size_t>(i)]) == 0x7fc00000u);
                RC_ASSERT(to_bits(r->decoded[static_cast<size_t>(i)]) == 0x7fc00000u);
            }
        } else {
            const std::vector<float> alone(c.x.begin() + first, c.x.begin() + first + len);
            const auto one = qt::kernels::encode(f, alone, c.block);
            RC_ASSERT(one.ok());
            const auto dec1 = qt::kernels::decode(*one);
            for (int64_t i = 0; i < len; ++i) RC_ASSERT(same_bits(dec1[static_cast<size_t>(i)], dec[static_cast<size_t>(first + i)]));
        }
    }
}
