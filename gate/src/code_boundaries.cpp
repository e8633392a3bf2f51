// Inputs that hunt (issue 47): the floats where a format's code changes, found from its definition.
//
// The reference is the format's definition (NUMERICS.md, FORMATS.md), so the generator asks it, and
// nothing else, where each code ends: in a block whose statistics an anchor fixes, the code of x is
// a step function of x, and between two samples with different codes a bisection over the floats'
// order finds the last float of one code and the first of the next. Those are the inputs where an
// implementation that computes the same function another way (the quotient in binary64 and rounded
// once, a multiply by the reciprocal, a fused multiply-add, a wider or narrower intermediate) gives
// another code; random inputs reach them at about 2e-6 of elements for int8 (issue 47), so a check
// on normal data all but never does. A declared format gets its own boundaries the same way.
#include "code_boundaries.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "qtransit/reference/formats.hpp"

namespace qtransit::gate {
namespace {

// Floats in the order of their values, as integers (-0 just below +0).
int64_t key_of(float f) {
    const int32_t i = std::bit_cast<int32_t>(f);
    return i >= 0 ? int64_t{i} : -int64_t{i & 0x7fffffff} - 1;
}
float of_key(int64_t k) {
    if (k >= 0) return std::bit_cast<float>(static_cast<int32_t>(k));
    return std::bit_cast<float>(static_cast<int32_t>((-(k + 1)) | int64_t{0x80000000}));
}

// A probe block: the anchors, the value under test, and the first anchor again to the probe's length
// (copies of an anchor change no statistic).
struct Prober {
    const FormatSpec& f;
    int64_t block;
    std::vector<float> anchors;
    int64_t len;
    float scale = 0.0f, offset = 0.0f;
    bool ok = false;

    Prober(const FormatSpec& format, int64_t b, std::vector<float> a) : f(format), block(b), anchors(std::move(a)) {
        len = std::min<int64_t>(block, 64);
        if (len < static_cast<int64_t>(anchors.size()) + 1) return;
        auto q = quantize(anchors[0]);
        if (!q) return;
        scale = q->scales.empty() ? 0.0f : q->scales[0];
        offset = q->offsets.empty() ? 0.0f : q->offsets[0];
        ok = scale != 0.0f && std::isfinite(scale);
    }
    Result<reference::Quantized> quantize(float x) const {
        std::vector<float> v(static_cast<size_t>(len), anchors[0]);
        std::copy(anchors.begin(), anchors.end(), v.begin());
        v[anchors.size()] = x;
        Site s;
        return reference::quantize(f, v, block, Nonfinite::kError, s);
    }
    // The code of x, or nullopt when x would change the block's statistics (or is refused).
    std::optional<int32_t> code(float x) const {
        auto q = quantize(x);
        if (!q || q->scales.empty() || std::bit_cast<uint32_t>(q->scales[0]) != std::bit_cast<uint32_t>(scale)) return std::nullopt;
        if (!q->offsets.empty() && std::bit_cast<uint32_t>(q->offsets[0]) != std::bit_cast<uint32_t>(offset)) return std::nullopt;
        return q->codes[anchors.size()];
    }
};

// The formats whose code of an element depends on that element alone, given the block's statistics:
// not the stochastic ones (a draw per element and index) nor the rotated ones (the block is mixed).
bool elementwise(const FormatSpec& f) { return !f.stochastic() && !f.rotated(); }

// The anchors of the blocks probed: scales whose quotients are rarely exact (pi/4, 10/3, ...), one
// tiny, one large; an offset format gets a low end too. Kept inside binary16 for ds-int<b> and
// quickreduce-q<b>, whose input is rounded to it.
std::vector<std::vector<float>> anchor_sets(const FormatSpec& f) {
    const bool fp16_input = f.kind == FormatKind::kDs || f.kind == FormatKind::kQr;
    std::vector<float> tops = {0.78539819f, 3.33333325f, 117.001404f, 1.70001e-5f};
    if (!fp16_input) tops.push_back(6.1234567e20f);
    std::vector<std::vector<float>> out;
    for (float a : tops) {
        if (f.has_offset()) out.push_back({a, -0.37012345f * a});
        else out.push_back({a});
    }
    return out;
}

}  // namespace

std::vector<float> code_boundaries(const FormatSpec& f, int64_t block, const std::vector<float>& anchors, int64_t max_values) {
    std::vector<float> out;
    if (!elementwise(f) || block < 2) return out;
    const Prober p(f, block, anchors);
    if (!p.ok) return out;
    // The range the anchors allow: [-a, a], or [lo, hi] for an offset format.
    float lo = -std::fabs(anchors[0]), hi = std::fabs(anchors[0]);
    if (anchors.size() > 1) lo = std::min(anchors[0], anchors[1]), hi = std::max(anchors[0], anchors[1]);
    const int levels = f.bits >= 1 && f.bits <= 12 ? (1 << f.bits) : 4096;
    const int samples = std::min(4 * levels + 1, 4097);
    const int64_t klo = key_of(lo), khi = key_of(hi);
    // Samples evenly spaced in value (not in key): codes are evenly spaced in value for int formats.
    std::vector<std::pair<float, int32_t>> grid;
    for (int i = 0; i < samples; ++i) {
        const double t = static_cast<double>(lo) + (static_cast<double>(hi) - lo) * i / (samples - 1);
        const float x = static_cast<float>(t);
        if (auto c = p.code(x)) grid.emplace_back(x, *c);
    }
    for (size_t i = 1; i < grid.size() && static_cast<int64_t>(out.size()) < max_values; ++i) {
        if (grid[i].second == grid[i - 1].second) continue;
        int64_t a = key_of(grid[i - 1].first), b = key_of(grid[i].first);  // code(a) != code(b)
        const int32_t ca = grid[i - 1].second;
        while (b - a > 1) {
            const int64_t m = a + (b - a) / 2;
            const auto cm = p.code(of_key(m));
            if (!cm) break;
            if (*cm == ca) a = m;
            else b = m;
        }
        if (b - a != 1) continue;
        // The last float of one code, the first of the next, and one more on each side.
        for (int64_t k = a - 1; k <= b + 1; ++k)
            if (k >= klo && k <= khi) out.push_back(of_key(k));
    }
    return out;
}

std::vector<BoundaryBlockSet> boundary_blocks(const FormatSpec& f, int64_t block) {
    static std::mutex m;
    static std::map<std::pair<std::string, int64_t>, std::vector<BoundaryBlockSet>> cache;
    {
        std::lock_guard<std::mutex> lock(m);
        if (auto it = cache.find({f.name(), block}); it != cache.end()) return it->second;
    }
    std::vector<BoundaryBlockSet> sets;
    for (const auto& a : anchor_sets(f)) {
        auto values = code_boundaries(f, block, a, 1 << 12);
        if (!values.empty()) sets.push_back({a, std::move(values)});
    }
    std::lock_guard<std::mutex> lock(m);
    cache[{f.name(), block}] = sets;
    return sets;
}

}  // namespace qtransit::gate
