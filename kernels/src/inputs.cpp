// Names of the input distributions and the threaded CPU fill. The values themselves are defined
// once, in inputs_impl.hpp (docs/INPUTS.md), and shared with the CUDA backend.
#include "qtransit/kernels/inputs.hpp"

#include <algorithm>
#include <cstddef>
#include <system_error>
#include <thread>

namespace qtransit::kernels {

const std::vector<Distribution>& all_distributions() {
    static const std::vector<Distribution> all = {Distribution::kNormal,   Distribution::kUniform,
                                                  Distribution::kHeavy,    Distribution::kOutliers,
                                                  Distribution::kMixedScale, Distribution::kCorrelated};
    return all;
}

const char* to_string(Distribution d) {
    switch (d) {
        case Distribution::kNormal: return "normal";
        case Distribution::kUniform: return "uniform";
        case Distribution::kHeavy: return "heavy";
        case Distribution::kOutliers: return "outliers";
        case Distribution::kMixedScale: return "mixed-scale";
        case Distribution::kCorrelated: return "correlated";
    }
    return "?";
}

std::string known_distribution_names() {
    std::string s;
    for (Distribution d : all_distributions()) {
        if (!s.empty()) s += ", ";
        s += to_string(d);
    }
    return s;
}

Result<Distribution> parse_distribution(std::string_view name) {
    for (Distribution d : all_distributions())
        if (name == to_string(d)) return d;
    return make_error(ErrorCode::kInvalidArgument, "unknown distribution '" + std::string(name) +
                                                       "' (known: " + known_distribution_names() + ")");
}

namespace {

void fill(Distribution d, uint64_t seed, uint32_t rank, uint64_t first, float* out, size_t n) {
    for (size_t i = 0; i < n; ++i) out[i] = generate(d, seed, rank, first + i);
}

// Below this many elements a thread costs more than it saves (a normal costs ~50 ns).
constexpr size_t kThreadedMin = size_t{1} << 20;

}  // namespace

void generate_span(Distribution d, uint64_t seed, uint32_t rank, uint64_t first, std::span<float> out) {
    const size_t n = out.size();
    const size_t hw = std::max(1u, std::thread::hardware_concurrency());
    if (n < kThreadedMin || hw == 1) {
        fill(d, seed, rank, first, out.data(), n);
        return;
    }
    // Contiguous slices; each element's value depends only on its index, so the split cannot change
    // the result (tested: threaded == element-wise).
    const size_t parts = hw, per = (n + parts - 1) / parts;
    std::vector<std::thread> threads;
    threads.reserve(parts - 1);
    size_t begin = per;  // this thread does slice 0 itself, after launching the others
    for (; begin < n; begin += per) {
        const size_t len = std::min(per, n - begin);
        try {
            threads.emplace_back(fill, d, seed, rank, first + begin, out.data() + begin, len);
        } catch (const std::system_error&) {
            // No thread available: do the rest here rather than fail (the result is the same).
            fill(d, seed, rank, first + begin, out.data() + begin, n - begin);
            break;
        }
    }
    fill(d, seed, rank, first, out.data(), std::min(per, n));
    for (std::thread& t : threads) t.join();
}

}  // namespace qtransit::kernels
