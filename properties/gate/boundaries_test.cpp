// The boundary generator (gate/boundaries.hpp, issue 47): its inputs are the ones it claims to be.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <string>

#include "qtransit/common/format.hpp"
#include "qtransit/gate/boundaries.hpp"
#include "qtransit/kernels/codec.hpp"
#include "qtransit/reference/formats.hpp"

namespace qtransit::gate {
namespace {

std::vector<BoundaryCase> of_class(const std::vector<BoundaryCase>& all, const std::string& cls) {
    std::vector<BoundaryCase> r;
    for (const auto& c : all)
        if (c.input_class == cls) r.push_back(c);
    return r;
}

// Every case is an input the reference quantizes (a refused one would test nothing but refusal).
TEST(Boundaries, EveryCaseIsQuantizedByTheReference) {
    for (const char* name : {"int8", "int4", "int4-asym"}) {
        auto f = parse_format(name);
        ASSERT_TRUE(f);
        const auto cases = boundary_cases(*f, 32, 1, {1, 3, 65});
        for (const char* cls : {"near-ties", "scale-boundaries", "lengths", "block-sizes"})
            EXPECT_FALSE(of_class(cases, cls).empty()) << name << " has no " << cls << " case";
        for (const auto& c : cases) {
            for (int64_t s = 0; s * c.shard < static_cast<int64_t>(c.x.size()); ++s) {
                Site site;
                EXPECT_TRUE(reference::quantize(*f, std::span<const float>(c.x).subspan(static_cast<size_t>(s * c.shard), static_cast<size_t>(c.shard)),
                                                c.block, Nonfinite::kError, site))
                    << name << " " << c.input_class << ": " << c.what;
            }
        }
    }
}

// near-ties: many elements where rne(fl32(x / s)) and rne(x / s) in binary64 (exact here) differ,
// s the block's scale as the reference computes it, on every format of the example codecs.
TEST(Boundaries, NearTiesSeparateTheBinary32QuotientFromTheExactOne) {
    for (const char* name : {"int8", "int4", "int4-asym"}) {
        auto f = parse_format(name);
        ASSERT_TRUE(f);
        const auto nt = of_class(boundary_cases(*f, 32, 1, {}), "near-ties");
        ASSERT_EQ(nt.size(), 1u) << name;
        const auto& c = nt[0];
        Site site;
        auto q = reference::quantize(*f, c.x, c.block, Nonfinite::kError, site);
        ASSERT_TRUE(q);
        int64_t apart = 0;
        for (size_t i = 0; i < c.x.size(); ++i) {
            const float s = q->scales[i / static_cast<size_t>(c.block)];
            const float lo = f->kind == FormatKind::kAsym ? q->offsets[i / static_cast<size_t>(c.block)] : 0.0f;
            const float d = c.x[i] - lo;
            apart += std::nearbyint(static_cast<double>(d / s)) != std::nearbyint(static_cast<double>(d) / static_cast<double>(s));
        }
        EXPECT_GT(apart, 100) << name;
    }
}

// scale-boundaries: blocks whose scale is the floor 2^-149 while a / qmax rounds below it.
TEST(Boundaries, ScaleBoundariesReachTheFloor) {
    for (const char* name : {"int8", "int4", "int4-asym"}) {
        auto f = parse_format(name);
        ASSERT_TRUE(f);
        bool floor_hit = false;
        for (const auto& c : of_class(boundary_cases(*f, 32, 1, {}), "scale-boundaries")) {
            Site site;
            auto q = reference::quantize(*f, c.x, c.block, Nonfinite::kError, site);
            ASSERT_TRUE(q);
            const float qm = f->kind == FormatKind::kAsym ? 15.0f : (f->bits == 8 ? 127.0f : 7.0f);
            for (size_t j = 0; j < q->scales.size(); ++j) {
                float a = 0, lo = 0, hi = 0;
                for (int64_t i = 0; i < c.block; ++i) {
                    const float v = c.x[j * static_cast<size_t>(c.block) + static_cast<size_t>(i)];
                    a = std::max(a, std::fabs(v));
                    lo = i ? std::min(lo, v) : v;
                    hi = i ? std::max(hi, v) : v;
                }
                const float stat = f->kind == FormatKind::kAsym ? hi - lo : a;
                if (stat > 0 && stat / qm < 0x1p-149f && q->scales[j] == 0x1p-149f) floor_hit = true;
            }
        }
        EXPECT_TRUE(floor_hit) << name;
    }
}

// quickreduce-q<b> (docs/FORMATS.md section 11): its boundaries come from its own definition. The
// scale-boundaries groups straddle the reciprocal's saturation for both signs of the extreme, the
// near-ties hold elements where rounding y enc to binary16 first decides the code, and the kernels
// equal the reference on every case.
TEST(Boundaries, QuickReduceStraddlesTheSaturationAndItsBinary16Ties) {
    for (const char* name : {"quickreduce-q4", "quickreduce-q6", "quickreduce-q8"}) {
        auto f = parse_format(name);
        ASSERT_TRUE(f);
        const int top = 1 << (f->bits - 1);
        const auto cases = boundary_cases(*f, 32, 1, {});
        bool sat[2] = {false, false}, unsat[2] = {false, false};  // [m < 0]
        int64_t decided_by_fl16 = 0;
        for (const auto& c : cases) {
            if (c.input_class != "scale-boundaries" && c.input_class != "near-ties") continue;
            Site site;
            auto q = reference::quantize(*f, c.x, c.block, Nonfinite::kError, site);
            ASSERT_TRUE(q) << name << " " << c.what;
            auto k = kernels::encode(*f, c.x, c.block);
            ASSERT_TRUE(k) << name << " " << c.what;
            EXPECT_EQ(kernels::unpack_codes(*k), q->codes) << name << " " << c.what;
            const auto d = kernels::decode(*k);
            for (size_t i = 0; i < d.size(); ++i)
                ASSERT_EQ(std::bit_cast<uint32_t>(d[i]), std::bit_cast<uint32_t>(q->decoded[i])) << name << " " << c.what << " element " << i;
            for (size_t j = 0; j < q->scales.size(); ++j) {
                const float dec = q->scales[j], enc = reference::quickreduce_enc(dec);
                const bool neg = dec > 0 || (dec == 0 && !std::signbit(dec));  // dec's sign is the opposite of m's
                const double t = reference::round_to_fp16(dec + 0x1p-24f);
                (t == 0 || std::fabs(1.0 / t) >= 65520.0 ? sat : unsat)[neg] = true;
                for (int64_t i = 0; c.input_class == "near-ties" && i < c.block; ++i) {
                    const float y = reference::round_to_fp16(c.x[j * static_cast<size_t>(c.block) + static_cast<size_t>(i)]);
                    const double exact = static_cast<double>(y) * enc, w = reference::round_to_fp16(static_cast<float>(exact));
                    if (std::fabs(w) < top - 1 && std::nearbyint(w) != std::nearbyint(exact)) ++decided_by_fl16;
                }
            }
        }
        EXPECT_TRUE(sat[0] && sat[1] && unsat[0] && unsat[1]) << name;
        EXPECT_GT(decided_by_fl16, 20) << name;
    }
}

}  // namespace
}  // namespace qtransit::gate
