// How numbers are written in every report: a binary32 value in its shortest decimal form that reads
// back to the same bits (std::to_chars), and as a JSON number that prints that same form.
#pragma once

#include <string>

namespace qtransit::reports {

// "0.1", "1e-45", "3.4028235e+38", "nan", "inf", "-inf".
std::string shortest(float v);
std::string shortest(double v);

// A double whose shortest decimal form is the shortest form of v (nlohmann::json writes doubles in
// their shortest form, so this makes it print "0.1" for 0.1f rather than 0.10000000149011612).
// NaN and inf have no JSON form: callers write null for them.
double json_float(float v);

}  // namespace qtransit::reports
