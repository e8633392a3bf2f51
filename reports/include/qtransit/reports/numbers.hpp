// How numbers are written in every report: a binary32 value in its shortest decimal form that reads
// back to the same bits (common's shortest, the one formatter of the tree), and as a JSON number
// that prints that same form.
#pragma once

#include <string>

#include "qtransit/common/shortest.hpp"

namespace qtransit::reports {

// "0.1", "1e-45", "3.4028235e+38", "nan", "inf", "-inf" (reports::shortest is common's).
using qtransit::shortest;

// A double whose shortest decimal form is the shortest form of v (nlohmann::json writes doubles in
// their shortest form, so this makes it print "0.1" for 0.1f rather than 0.10000000149011612).
// NaN and inf have no JSON form: callers write null for them.
double json_float(float v);

// Four significant digits ("%.4g"): how verdict messages and comparison tables print a measured value.
std::string g4(double v);
// g4(v), or "-" for NaN: a table cell of a figure that no run measured (the format comparison's).
std::string g4_cell(double v);

}  // namespace qtransit::reports
