// Shared by format_properties_test and rotated_kernel_test: encode's fused AVX-512 paths against
// its unfused ones (kernels::set_fused_encode(false)) and the reference, on one generated tensor.
#pragma once

#include <rapidcheck.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

#include "generators.hpp"
#include "qtransit/kernels/codec.hpp"
#include "qtransit/reference/formats.hpp"

namespace qtransit::testing {

// n values of rotatable() with up to two accidents (a NaN or inf, or a whole block of `huge`), from a
// misaligned start, under either policy, 1..3 threads, any seed and index base: fused, unfused and
// the reference agree on refusing (code and message) or on every scale and code byte; with
// `decode`, the fused encoding also decodes to the reference's values. `path`: the tests-only
// switch between the two ways (set_fused_encode, or set_declared_twins). `keep`: the significant
// bits kept of each value (the others cleared: with few of them, a quotient by a power-of-two scale
// often lands on a tie of the rounding).
inline void check_fused_encode(const FormatSpec& f, int64_t block, int64_t n, float huge, bool decode,
                               void (*path)(bool) = kernels::set_fused_encode, int keep = 24) {
    auto x = rotatable(n);
    if (keep < 24)
        for (auto& v : x) v = std::bit_cast<float>(std::bit_cast<uint32_t>(v) & ~((1u << (24 - keep)) - 1));
    for (int bad = *rc::gen::inRange(0, 3); bad > 0; --bad) {
        const int64_t at = *rc::gen::inRange<int64_t>(0, n);
        if (*rc::gen::arbitrary<bool>()) {
            x[static_cast<size_t>(at)] = *rc::gen::element(NAN, INFINITY, -INFINITY);
        } else {
            const int64_t b0 = at / block * block;
            for (int64_t i = b0; i < std::min(n, b0 + block); ++i) x[static_cast<size_t>(i)] = huge;
        }
    }
    const int misalign = *rc::gen::inRange(0, 16);
    std::vector<float> buf(x.size() + 16);
    std::copy(x.begin(), x.end(), buf.begin() + misalign);
    const std::span<const float> in(buf.data() + misalign, x.size());
    kernels::CodecOptions opt;
    opt.policy = *rc::gen::element(Nonfinite::kError, Nonfinite::kPropagate);
    opt.threads = *rc::gen::inRange(1, 4);
    opt.seed = *rc::gen::arbitrary<uint64_t>();
    opt.site = Site{"grad", 1, *rc::gen::inRange<int64_t>(0, 100000)};
    const auto fused = kernels::encode(f, in, block, opt);
    path(false);
    const auto unfused = kernels::encode(f, in, block, opt);
    path(true);
    const auto r = reference::quantize(f, x, block, opt.policy, opt.site, {opt.seed, 0});
    RC_ASSERT(fused.ok() == unfused.ok());
    RC_ASSERT(fused.ok() == r.ok());
    if (!r.ok()) {
        RC_ASSERT(fused.error().code == unfused.error().code);
        RC_ASSERT(fused.error().message == unfused.error().message);
        RC_LOG() << "fused: " << fused.error().message << "\nreference: " << r.error().message << "\n";
        RC_ASSERT(fused.error().code == r.error().code);
        return;
    }
    auto bits = [](float v) { return std::bit_cast<uint32_t>(v); };
    for (size_t j = 0; j < r->scales.size(); ++j) {
        RC_ASSERT(bits(fused->scales[j]) == bits(r->scales[j]));
        RC_ASSERT(bits(unfused->scales[j]) == bits(r->scales[j]));
    }
    const auto packed = reference::pack(f, r->codes, block);
    RC_ASSERT(fused->codes == packed);
    RC_ASSERT(unfused->codes == packed);
    if (decode) {
        const auto dec = kernels::decode(*fused, opt.threads);
        RC_ASSERT(dec.size() == r->decoded.size());
        for (size_t i = 0; i < dec.size(); ++i) RC_ASSERT(bits(dec[i]) == bits(r->decoded[i]));
    }
}

}  // namespace qtransit::testing
