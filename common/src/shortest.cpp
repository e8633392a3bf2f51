#include "qtransit/common/shortest.hpp"

#include <array>
#include <charconv>

namespace qtransit {

// 64 characters hold every shortest form (binary64's longest is 24: "-2.2250738585072014e-308").
std::string shortest(float v) {
    std::array<char, 64> buf{};
    auto [end, ec] = std::to_chars(buf.data(), buf.data() + buf.size(), v);
    return {buf.data(), end};
}

std::string shortest(double v) {
    std::array<char, 64> buf{};
    auto [end, ec] = std::to_chars(buf.data(), buf.data() + buf.size(), v);
    return {buf.data(), end};
}

}  // namespace qtransit
