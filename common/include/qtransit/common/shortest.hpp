// The one way qtransit writes a floating-point value as text (reports, error messages, TOML
// declarations): the shortest decimal form that reads back to the same bits, which is what
// std::to_chars gives without a precision. Reading the text back (strtof / strtod, a JSON or TOML
// parser) gives the value exactly, so nothing printed hides a difference of one ulp.
#pragma once

#include <string>

namespace qtransit {

// "0.1", "1e-45", "3.4028235e+38", "-0", "3", "nan", "inf", "-inf": binary32's shortest form (the
// float overload) is not binary64's (0.1f as a double is 0.10000000149011612).
std::string shortest(float v);
std::string shortest(double v);

}  // namespace qtransit
