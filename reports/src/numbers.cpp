#include "qtransit/reports/numbers.hpp"

#include <array>
#include <charconv>
#include <cstdlib>

namespace qtransit::reports {

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

double json_float(float v) {
    const std::string s = shortest(v);
    return std::strtod(s.c_str(), nullptr);
}

}  // namespace qtransit::reports
