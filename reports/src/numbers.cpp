#include "qtransit/reports/numbers.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace qtransit::reports {

double json_float(float v) {
    const std::string s = shortest(v);
    return std::strtod(s.c_str(), nullptr);
}

std::string g4(double v) {
    char b[32];
    std::snprintf(b, sizeof b, "%.4g", v);
    return b;
}

std::string g4_cell(double v) { return std::isnan(v) ? "-" : g4(v); }

}  // namespace qtransit::reports
