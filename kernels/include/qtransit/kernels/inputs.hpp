// Counter-based inputs (NUMERICS.md section 2): every element of every rank is a pure function of
// (seed, rank, index, distribution), computed by the same __host__ __device__ code on CPU and GPU,
// so any slice can be regenerated anywhere and nothing needs storing. The transcendental functions
// used here (log, exp, cos) are our own, built from +,-,*,/ and sqrt only (all correctly rounded in
// IEEE 754), so a GPU build compiled without FMA contraction gives the same bits as the CPU build.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "qtransit/common/hd.hpp"
#include "qtransit/common/philox.hpp"
#include "qtransit/common/status.hpp"

namespace qtransit::kernels {

enum class Distribution : uint8_t { kNormal, kUniform, kHeavy, kOutliers, kMixedScale, kCorrelated };

const std::vector<Distribution>& all_distributions();
const char* to_string(Distribution d);
std::string known_distribution_names();
Result<Distribution> parse_distribution(std::string_view name);

// The value of element `index` of rank `rank` (binary32, always finite).
QT_HD float generate(Distribution d, uint64_t seed, uint32_t rank, uint64_t index);

// Fill out[i] = generate(d, seed, rank, first + i) for all i (CPU, threaded for large spans).
void generate_span(Distribution d, uint64_t seed, uint32_t rank, uint64_t first, std::span<float> out);

}  // namespace qtransit::kernels

#include "qtransit/kernels/detail/inputs_impl.hpp"
