// The rotated formats' production kernels (kernels/hadamard.hpp, docs/FORMATS.md section 9) against
// the reference bit for bit: whole tensors on 1..3 threads from misaligned addresses, one block at
// a time as the collectives call them, the sign key on both sides, and every refusal the same.
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

#include "fused_encode_check.hpp"
#include "generators.hpp"
#include "qtransit/common/format.hpp"
#include "qtransit/kernels/codec.hpp"
#include "qtransit/kernels/hadamard.hpp"
#include "qtransit/reference/formats.hpp"
#include "qtransit/reference/hadamard.hpp"

namespace qt = qtransit;
using qt::FormatSpec;
using qt::testing::check_fused_encode, qt::testing::pow2_block, qt::testing::rotatable, qt::testing::rotated_formats, qt::testing::tensor_length;

namespace {

uint32_t bits(float v) { return std::bit_cast<uint32_t>(v); }

RC_GTEST_PROP(RotatedKernels, CpuEqualsReferenceBitForBit, ()) {
    const FormatSpec f = *rc::gen::elementOf(rotated_formats());
    const int64_t block = pow2_block(f, 7);
    const int64_t n = tensor_length(block);
    const auto x = rotatable(n);
    const int misalign = *rc::gen::inRange(0, 16);
    std::vector<float> buf(x.size() + 16);
    std::copy(x.begin(), x.end(), buf.begin() + misalign);
    qt::kernels::CodecOptions opt;
    opt.threads = *rc::gen::inRange(1, 4);
    opt.seed = *rc::gen::arbitrary<uint64_t>();
    opt.site = qt::Site{"grad", *rc::gen::inRange<int64_t>(-1, 8), *rc::gen::inRange<int64_t>(0, 100000)};
    const auto k = qt::kernels::encode(f, std::span<const float>(buf.data() + misalign, x.size()), block, opt);
    const auto r = qt::reference::quantize(f, x, block, qt::Nonfinite::kError, opt.site, {opt.seed, 0});
    RC_ASSERT(k.ok() == r.ok());
    if (!r.ok()) RC_FAIL("refused: " + r.error().message);
    for (size_t j = 0; j < r->scales.size(); ++j) RC_ASSERT(bits(k->scales[j]) == bits(r->scales[j]));
    RC_ASSERT(k->codes == qt::reference::pack(f, r->codes, block));
    const auto dec = qt::kernels::decode(*k, opt.threads);
    for (size_t i = 0; i < x.size(); ++i) RC_ASSERT(bits(dec[i]) == bits(r->decoded[i]));
    // One block at a time, as a collective encodes and decodes a column.
    for (int64_t b0 = 0; b0 < n; b0 += block) {
        const int64_t len = std::min(block, n - b0);
        std::vector<uint8_t> codes(static_cast<size_t>(f.code_bytes(len)));
        float s = 0, lo = 0;
        qt::kernels::CodecOptions one = opt;
        one.site.index_base += b0;
        RC_ASSERT(qt::kernels::encode_block(f, x.data() + b0, len, codes.data(), &s, &lo, one).ok());
        RC_ASSERT(bits(s) == bits(r->scales[static_cast<size_t>(b0 / block)]));
        std::vector<float> out(static_cast<size_t>(len));
        qt::kernels::decode_block(f, codes.data(), len, s, lo, out.data(), qt::kernels::sign_key(one));
        for (int64_t i = 0; i < len; ++i) RC_ASSERT(bits(out[static_cast<size_t>(i)]) == bits(r->decoded[static_cast<size_t>(b0 + i)]));
    }
}

// Tensors of several of the kernel's 4,096-element chunks (each thread rotates a chunk and encodes
// it while it is in cache; with AVX-512 eight blocks at a time) equal the reference bit for bit,
// and a refusal in a later chunk is the same first block; under propagate the same blocks are
// poisoned.
RC_GTEST_PROP(RotatedKernels, LongTensorsEqualTheReferenceAcrossChunks, ()) {
    const FormatSpec f = *rc::gen::elementOf(rotated_formats());
    const int64_t block = pow2_block(f, 7);
    int64_t n = *rc::gen::inRange<int64_t>(2 * 4096, 3 * 4096 + 1) / block * block;
    if (block > 1 && *rc::gen::arbitrary<bool>()) n += int64_t{1} << *rc::gen::inRange(0, std::countr_zero(static_cast<uint64_t>(block)));
    auto x = rotatable(n);
    qt::kernels::CodecOptions opt;
    opt.threads = *rc::gen::inRange(1, 4);
    opt.seed = *rc::gen::arbitrary<uint64_t>();
    opt.site = qt::Site{"grad", 2, *rc::gen::inRange<int64_t>(0, 100000)};
    const auto k = qt::kernels::encode(f, x, block, opt);
    const auto r = qt::reference::quantize(f, x, block, qt::Nonfinite::kError, opt.site, {opt.seed, 0});
    RC_ASSERT(k.ok() && r.ok());
    for (size_t j = 0; j < r->scales.size(); ++j) RC_ASSERT(bits(k->scales[j]) == bits(r->scales[j]));
    RC_ASSERT(k->codes == qt::reference::pack(f, r->codes, block));
    const auto dec = qt::kernels::decode(*k, opt.threads);
    for (size_t i = 0; i < x.size(); ++i) RC_ASSERT(bits(dec[i]) == bits(r->decoded[i]));

    // Two bad blocks past the first chunk: one whose transform passes the limit, one with a NaN.
    const int64_t blocks = (n + block - 1) / block;
    const int64_t b_over = *rc::gen::inRange<int64_t>(blocks / 2, blocks), b_nan = *rc::gen::inRange<int64_t>(blocks / 2, blocks);
    for (int64_t i = b_over * block; i < std::min(n, (b_over + 1) * block); ++i) x[static_cast<size_t>(i)] = 1e38f;
    const int64_t at_nan = b_nan * block + *rc::gen::inRange<int64_t>(0, std::min(block, n - b_nan * block));
    x[static_cast<size_t>(at_nan)] = NAN;
    const auto ke = qt::kernels::encode(f, x, block, opt);
    const auto re = qt::reference::quantize(f, x, block, qt::Nonfinite::kError, opt.site, {opt.seed, 0});
    RC_ASSERT(!ke.ok() && !re.ok());
    RC_ASSERT(ke.error().code == re.error().code);
    // The lowest refused block names its non-finite element, or its first element when it overflows
    // (D5), counted from the site's index_base.
    const std::string where = "element " + std::to_string(opt.site.index_base + (b_nan <= b_over ? at_nan : b_over * block)) + ":";
    RC_ASSERT(ke.error().message.find(where) != std::string::npos);
    RC_ASSERT(re.error().message.find(where) != std::string::npos);
    qt::kernels::CodecOptions prop = opt;
    prop.policy = qt::Nonfinite::kPropagate;
    const auto kp = qt::kernels::encode(f, x, block, prop);
    const auto rp = qt::reference::quantize(f, x, block, qt::Nonfinite::kPropagate, opt.site, {opt.seed, 0});
    RC_ASSERT(kp.ok() && rp.ok());
    for (size_t j = 0; j < rp->scales.size(); ++j) RC_ASSERT(bits(kp->scales[j]) == bits(rp->scales[j]));
    RC_ASSERT(std::isnan(kp->scales[static_cast<size_t>(b_over)]) && std::isnan(kp->scales[static_cast<size_t>(b_nan)]));
    const auto decp = qt::kernels::decode(*kp, opt.threads);
    for (size_t i = 0; i < x.size(); ++i) RC_ASSERT(bits(decp[i]) == bits(rp->decoded[i]));
}

// The kernels' signs are the reference's (FORMATS.md section 9), and the transform of a block is
// the reference's recursive one.
RC_GTEST_PROP(RotatedKernels, SignsAndTransformAreTheReferences, ()) {
    const uint64_t seed = *rc::gen::arbitrary<uint64_t>();
    const int64_t first = *rc::gen::inRange<int64_t>(0, int64_t{1} << 40);
    for (int64_t i = 0; i < 300; ++i)
        RC_ASSERT(qt::kernels::hadamard_sign({seed, first}, i) == qt::reference::hadamard_negated(seed, first, i));
    const int64_t len = int64_t{1} << *rc::gen::inRange(0, 11);
    auto x = rotatable(len);
    std::vector<float> ref(x);
    qt::reference::hadamard_fl32(ref);
    qt::kernels::hadamard_forward(x.data(), len, false, {});
    for (int64_t i = 0; i < len; ++i) RC_ASSERT(bits(x[static_cast<size_t>(i)]) == bits(ref[static_cast<size_t>(i)]));
}

TEST(RotatedKernels, DecodeNeedsTheSignKey) {
    const FormatSpec f = qt::parse_format("int8-rht").value();
    std::vector<float> x(64);
    for (size_t i = 0; i < x.size(); ++i) x[i] = std::cos(0.3f * static_cast<float>(i));
    qt::kernels::CodecOptions opt;
    opt.seed = 42;
    opt.site.index_base = 128;
    auto t = qt::kernels::encode(f, x, 32, opt).value();
    const auto good = qt::kernels::decode(t);
    double err = 0;
    for (size_t i = 0; i < x.size(); ++i) err = std::max(err, std::fabs(static_cast<double>(good[i]) - x[i]));
    EXPECT_LT(err, 0.02);
    t.key.seed = 43;  // another key: other signs, another tensor
    const auto bad = qt::kernels::decode(t);
    double wrong = 0;
    for (size_t i = 0; i < x.size(); ++i) wrong = std::max(wrong, std::fabs(static_cast<double>(bad[i]) - x[i]));
    EXPECT_GT(wrong, 0.1);
}

// Both refuse the same inputs with the same kind of message, before writing anything; under
// propagate both poison the same blocks.
RC_GTEST_PROP(RotatedKernels, RefusalsAndPoisonAgree, ()) {
    const FormatSpec f = *rc::gen::elementOf(rotated_formats());
    const int64_t block = pow2_block(f, 6);
    const int64_t n = block * *rc::gen::inRange<int64_t>(2, 5);
    auto x = rotatable(n);
    const int64_t at = *rc::gen::inRange<int64_t>(0, n);
    const bool overflow = *rc::gen::arbitrary<bool>();
    if (overflow) {
        const int64_t b0 = at / block * block;
        for (int64_t i = b0; i < b0 + block; ++i) x[static_cast<size_t>(i)] = 1e38f;  // the transform passes the limit
    } else {
        x[static_cast<size_t>(at)] = *rc::gen::element(NAN, INFINITY, -INFINITY);
    }
    const qt::Site site{"grad", 3, 0};
    const auto k = qt::kernels::encode(f, x, block, {qt::Nonfinite::kError, site, 1});
    const auto r = qt::reference::quantize(f, x, block, qt::Nonfinite::kError, site);
    RC_ASSERT(!k.ok());
    RC_ASSERT(!r.ok());
    RC_ASSERT(k.error().code == r.error().code);
    const std::string where = overflow ? "element " + std::to_string(at / block * block) + ":"
                                       : "element " + std::to_string(at) + ":";
    RC_ASSERT(k.error().message.find(where) != std::string::npos);
    RC_ASSERT(r.error().message.find(where) != std::string::npos);
    const auto kp = qt::kernels::encode(f, x, block, {qt::Nonfinite::kPropagate, site, 1});
    const auto rp = qt::reference::quantize(f, x, block, qt::Nonfinite::kPropagate, site);
    RC_ASSERT(kp.ok() && rp.ok());
    const auto dec = qt::kernels::decode(*kp);
    for (size_t i = 0; i < x.size(); ++i) RC_ASSERT(bits(dec[i]) == bits(rp->decoded[i]));
    RC_ASSERT(std::isnan(kp->scales[static_cast<size_t>(at / block)]));
}

// With AVX-512, encode rotates and encodes blocks of 16 to 128 elements in one pass (the fused
// path, for int and float elements); elsewhere, and for every other block, it rotates a chunk into
// a buffer and encodes that. Both equal each other and the reference, error messages included, on
// awkward tensors: several chunks, a short last block, a misaligned start, subnormals, and maybe
// NaN and inf values and blocks whose transform passes the limit, under both policies.
RC_GTEST_PROP(RotatedKernels, FusedEncodeEqualsUnfusedAndReference, ()) {
    const FormatSpec f = *rc::gen::elementOf(rotated_formats());
    const int64_t block = f.decl->fixed_block > 0 ? f.decl->fixed_block : *rc::gen::element<int64_t>(16, 32, 64, 128, 8, 256);
    int64_t n = block * *rc::gen::inRange<int64_t>(1, 3 * 4096 / block + 3);
    if (block > 1 && *rc::gen::arbitrary<bool>()) n += int64_t{1} << *rc::gen::inRange(0, std::countr_zero(static_cast<uint64_t>(block)));
    check_fused_encode(f, block, n, 1e38f, false);
}

TEST(RotatedKernels, LengthsThatAreNotPowersOfTwoAreRefused) {
    const FormatSpec f = qt::parse_format("int4-had").value();
    const std::vector<float> x(44, 1.0f);
    auto a = qt::kernels::encode(f, x, 32);
    ASSERT_FALSE(a.ok());
    EXPECT_NE(a.error().message.find("12 elements"), std::string::npos) << a.error().message;
    auto b = qt::kernels::encode(f, x, 44);
    ASSERT_FALSE(b.ok());
    EXPECT_NE(b.error().message.find("power of two"), std::string::npos) << b.error().message;
    std::vector<uint8_t> codes(16);
    float s = 0, lo = 0;
    EXPECT_FALSE(qt::kernels::encode_block(f, x.data(), 24, codes.data(), &s, &lo).ok());
}

}  // namespace
