// Properties of the inputs: Philox avalanche (counter independence), purity of generate(), and .npy
// round trips and truncation over random shapes and bit patterns. Replay a failure with
// RC_PARAMS="replay=..." as printed by RapidCheck.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include "inputs/temp_dir.hpp"
#include "qtransit/common/philox.hpp"
#include "qtransit/kernels/fp16.hpp"
#include "qtransit/kernels/inputs.hpp"
#include "qtransit/kernels/npy.hpp"

namespace qk = qtransit::kernels;
using qtransit::testing::TempDir;

namespace {

// binary32 values from raw bit patterns (which cover every class, NaN payloads included) mixed with
// the specials a uniform draw of bits almost never hits.
rc::Gen<float> gen_float_bits() {
    const std::vector<uint32_t> specials = {
        0x00000000u, 0x80000000u,              // +-0
        0x00000001u, 0x807fffffu,              // smallest / largest subnormal
        0x00800000u, 0x7f7fffffu, 0xff7fffffu,  // smallest normal, +-FLT_MAX
        0x7f800000u, 0xff800000u,              // +-inf
        0x7fc00000u, 0xffc00001u, 0x7f800001u,  // quiet NaNs, a signalling NaN
        0x3f800000u, 0x3f000000u,              // 1, 0.5
        0x477fe000u, 0x477ff000u,              // 65504, 65520 (binary16 max, first overflow)
    };
    return rc::gen::map(rc::gen::oneOf(rc::gen::arbitrary<uint32_t>(), rc::gen::elementOf(specials)),
                        [](uint32_t b) { return qk::bits_f32(b); });
}

// binary16 values (exactly representable after widening) from binary16 bit patterns and specials.
rc::Gen<float> gen_half_values() {
    const std::vector<uint16_t> specials = {0x0000, 0x8000, 0x0001, 0x03ff, 0x0400, 0x7bff,
                                            0xfbff, 0x7c00, 0xfc00, 0x7e00, 0x3c00};
    return rc::gen::map(rc::gen::oneOf(rc::gen::arbitrary<uint16_t>(), rc::gen::elementOf(specials)),
                        [](uint16_t h) { return qk::f16_bits_to_f32(h); });
}

// Shapes of 0 to 4 dimensions (0-d one time in ten), each dimension 1..8 or, one time in eight, 0.
rc::Gen<std::vector<int64_t>> gen_shape() {
    const auto dims = rc::gen::weightedOneOf<size_t>(
        {{1, rc::gen::just<size_t>(0)}, {9, rc::gen::inRange<size_t>(1, 5)}});
    return rc::gen::mapcat(dims, [](size_t n) {
        const auto dim = rc::gen::weightedOneOf<int64_t>(
            {{1, rc::gen::just<int64_t>(0)}, {7, rc::gen::inRange<int64_t>(1, 9)}});
        return rc::gen::container<std::vector<int64_t>>(n, dim);
    });
}

int64_t product(const std::vector<int64_t>& s) {
    int64_t n = 1;
    for (int64_t d : s) n *= d;
    return n;
}

int popcount128(const qtransit::Philox4x32& a, const qtransit::Philox4x32& b) {
    int n = 0;
    for (int i = 0; i < 4; ++i) n += __builtin_popcount(a.v[i] ^ b.v[i]);
    return n;
}

// Flipping any one bit of the counter or key changes about half of the 128 output bits: the Hamming
// distance is Binomial(128, 1/2) for an ideal generator (mean 64, sd 5.66); [24, 104] is 7 sd, so a
// correct Philox fails it with probability ~1e-12 per case, while a broken round (a lost word, a
// missing key bump) leaves some inputs with few or no changed bits.
RC_GTEST_PROP(PhiloxProperty, OneBitChangeAvalanches, ()) {
    const auto c = *rc::gen::container<std::vector<uint32_t>>(4, rc::gen::arbitrary<uint32_t>());
    const uint32_t k0 = *rc::gen::arbitrary<uint32_t>(), k1 = *rc::gen::arbitrary<uint32_t>();
    // elementOf draws uniformly (inRange would favour small values at small sizes).
    const int word = *rc::gen::elementOf(std::vector<int>{0, 1, 2, 3, 4, 5});  // 4, 5: the key
    const int bit = *rc::gen::elementOf(std::vector<int>{0, 1, 2, 7, 8, 15, 16, 23, 24, 30, 31});
    uint32_t c2[4] = {c[0], c[1], c[2], c[3]}, k2[2] = {k0, k1};
    if (word < 4) c2[word] ^= 1u << bit;
    else k2[word - 4] ^= 1u << bit;
    RC_TAG(word < 4 ? "counter" : "key");
    const auto a = qtransit::philox4x32_10(qtransit::Philox4x32{{c[0], c[1], c[2], c[3]}}, k0, k1);
    const auto b = qtransit::philox4x32_10(qtransit::Philox4x32{{c2[0], c2[1], c2[2], c2[3]}}, k2[0], k2[1]);
    const int d = popcount128(a, b);
    RC_ASSERT(d >= 24);
    RC_ASSERT(d <= 104);
}

// generate() is a pure function of (distribution, seed, rank, index): any element regenerates to the
// same bits, alone or inside a span, and is finite; uniform stays in [-1, 1).
RC_GTEST_PROP(GenerateProperty, PureFiniteAndRegenerable, ()) {
    const auto& all = qk::all_distributions();
    const qk::Distribution d = *rc::gen::elementOf(all);
    const uint64_t seed = *rc::gen::arbitrary<uint64_t>();
    const uint32_t rank = *rc::gen::arbitrary<uint32_t>();
    const uint64_t first = *rc::gen::arbitrary<uint64_t>();
    const size_t n = *rc::gen::inRange<size_t>(1, 300);
    RC_TAG(std::string(qk::to_string(d)));
    std::vector<float> span(n);
    qk::generate_span(d, seed, rank, first, span);
    const size_t i = *rc::gen::inRange<size_t>(0, n);
    const float x = qk::generate(d, seed, rank, first + i);
    RC_ASSERT(qk::f32_bits(x) == qk::f32_bits(span[i]));
    for (float v : span) RC_ASSERT(std::isfinite(v));
    if (d == qk::Distribution::kUniform) RC_ASSERT(x >= -1.0f && x < 1.0f);
}

// Round trip of binary32: every bit pattern (NaN payloads, -0, subnormals, inf) and every shape
// (0-d, zero-size dims) comes back bit for bit, with the shape.
RC_GTEST_PROP(NpyProperty, Float32RoundTripIsBitExact, ()) {
    const auto shape = *gen_shape();
    const auto values = *rc::gen::container<std::vector<float>>(static_cast<size_t>(product(shape)), gen_float_bits());
    RC_CLASSIFY(shape.empty(), "0-d");
    RC_CLASSIFY(product(shape) == 0, "zero-size");
    RC_CLASSIFY(product(shape) > 100, "over 100 elements");
    TempDir dir;
    const std::string p = dir.file("r.npy");
    const auto st = qk::write_npy(p, values, shape);
    RC_ASSERT(st.ok());
    auto a = qk::read_npy(p);
    RC_ASSERT(a.ok());
    RC_ASSERT(a->shape == shape);
    RC_ASSERT(a->dtype == qk::NpyDtype::kFloat32);
    RC_ASSERT(a->data.size() == values.size());
    for (size_t i = 0; i < values.size(); ++i) RC_ASSERT(qk::f32_bits(a->data[i]) == qk::f32_bits(values[i]));
    RC_ASSERT(dir.entries() == 1u);
}

// Round trip of binary16 for values binary16 can hold: exact, except that a NaN comes back as a NaN
// of the same sign (binary16 conversion keeps sign and quietness, not the payload).
RC_GTEST_PROP(NpyProperty, Float16RoundTripOfRepresentableValues, ()) {
    const auto shape = *gen_shape();
    const auto values = *rc::gen::container<std::vector<float>>(static_cast<size_t>(product(shape)), gen_half_values());
    TempDir dir;
    const std::string p = dir.file("h.npy");
    RC_ASSERT(qk::write_npy(p, values, shape, qk::NpyDtype::kFloat16).ok());
    auto a = qk::read_npy(p);
    RC_ASSERT(a.ok());
    RC_ASSERT(a->shape == shape);
    RC_ASSERT(a->dtype == qk::NpyDtype::kFloat16);
    for (size_t i = 0; i < values.size(); ++i) {
        if (std::isnan(values[i])) {
            RC_ASSERT(std::isnan(a->data[i]));
            RC_ASSERT(std::signbit(a->data[i]) == std::signbit(values[i]));
        } else {
            RC_ASSERT(qk::f32_bits(a->data[i]) == qk::f32_bits(values[i]));
        }
    }
}

// Writing arbitrary binary32 values as binary16 either fails on the first finite value that
// overflows (naming it, leaving no file) or stores fl16 of every value.
RC_GTEST_PROP(NpyProperty, Float16WriteRoundsOrRefuses, ()) {
    const auto values = *rc::gen::container<std::vector<float>>(gen_float_bits());
    const std::vector<int64_t> shape = {static_cast<int64_t>(values.size())};
    size_t first_overflow = values.size();
    for (size_t i = 0; i < values.size() && first_overflow == values.size(); ++i)
        if (std::isfinite(values[i]) && std::isinf(qk::round_f16(values[i]))) first_overflow = i;
    RC_CLASSIFY(first_overflow < values.size(), "overflow");
    TempDir dir;
    const std::string p = dir.file("o.npy");
    const auto st = qk::write_npy(p, values, shape, qk::NpyDtype::kFloat16);
    if (first_overflow < values.size()) {
        RC_ASSERT(!st.ok());
        RC_ASSERT(st.error().code == qtransit::ErrorCode::kRangeOverflow);
        RC_ASSERT(st.error().message.find("element " + std::to_string(first_overflow) + " ") != std::string::npos);
        RC_ASSERT(dir.entries() == 0u);
    } else {
        RC_ASSERT(st.ok());
        auto a = qk::read_npy(p);
        RC_ASSERT(a.ok());
        for (size_t i = 0; i < values.size(); ++i) {
            const float want = qk::round_f16(values[i]);
            RC_ASSERT((std::isnan(want) && std::isnan(a->data[i])) || qk::f32_bits(want) == qk::f32_bits(a->data[i]));
        }
    }
}

// Every proper prefix of a valid file is refused as a bad file (never read as something else, never
// a crash), and so is the file with bytes appended.
RC_GTEST_PROP(NpyProperty, TruncatedOrExtendedFilesAreRefused, ()) {
    const auto shape = *gen_shape();
    const auto values = *rc::gen::container<std::vector<float>>(static_cast<size_t>(product(shape)), gen_float_bits());
    const bool half = *rc::gen::arbitrary<bool>();
    std::vector<float> vals = values;
    if (half)
        for (float& v : vals)
            if (std::isfinite(v) && std::isinf(qk::round_f16(v))) v = 0.0f;  // keep the write valid
    TempDir dir;
    const std::string p = dir.file("t.npy");
    RC_ASSERT(qk::write_npy(p, vals, shape, half ? qk::NpyDtype::kFloat16 : qk::NpyDtype::kFloat32).ok());
    const std::string bytes = qtransit::testing::read_bytes(p);
    const size_t cut = *rc::gen::inRange<size_t>(0, bytes.size());
    const std::string extra = *rc::gen::nonEmpty<std::string>();
    auto a = qk::read_npy(dir.write("cut.npy", bytes.substr(0, cut)));
    RC_ASSERT(!a.ok());
    RC_ASSERT(a.error().code == qtransit::ErrorCode::kBadFile);
    auto b = qk::read_npy(dir.write("ext.npy", bytes + extra));
    RC_ASSERT(!b.ok());
    RC_ASSERT(b.error().code == qtransit::ErrorCode::kBadFile);
}

// A header with one byte changed either still parses to a consistent array or is refused as a bad
// file; it never crashes (the message property is checked in the unit tests).
RC_GTEST_PROP(NpyProperty, CorruptHeaderNeverCrashes, ()) {
    const float v[] = {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f};
    const int64_t shape[] = {2, 3};
    TempDir dir;
    const std::string p = dir.file("c.npy");
    RC_ASSERT(qk::write_npy(p, v, shape).ok());
    std::string bytes = qtransit::testing::read_bytes(p);
    const size_t pos = *rc::gen::inRange<size_t>(0, 128);  // the preamble and header
    bytes[pos] = static_cast<char>(*rc::gen::arbitrary<uint8_t>());
    auto a = qk::read_npy(dir.write("c2.npy", bytes));
    if (a.ok()) {
        RC_ASSERT(static_cast<int64_t>(a->data.size()) == a->elements());
    } else {
        RC_ASSERT(a.error().code == qtransit::ErrorCode::kBadFile);
        RC_ASSERT(a.error().message.rfind(dir.file("c2.npy") + ": ", 0) == 0u);
    }
}

}  // namespace
