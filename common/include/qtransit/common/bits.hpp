// Bit-level equality of values and arrays, the one definition every room and test uses (issue 48
// counted seven copies). Bits, not values: -0 differs from +0, and a NaN's payload counts.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <vector>

namespace qtransit {

inline bool same_bits(float a, float b) { return std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b); }

// Equal sizes and the same bytes (T: a type without padding: floats, integers).
template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
    return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

}  // namespace qtransit
