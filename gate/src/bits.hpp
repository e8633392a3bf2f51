#pragma once
// Bit-level comparisons of binary32 values the gate's checks share (one definition: issue 48 counted
// seven copies). Bits, not values: -0 differs from +0, and a NaN's payload counts.
#include <bit>
#include <cstdint>

namespace qtransit::gate::detail {

inline bool same_bits(float a, float b) { return std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b); }

}  // namespace qtransit::gate::detail
