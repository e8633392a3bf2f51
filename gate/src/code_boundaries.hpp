// Inputs that hunt (issue 47): the floats where a format's code changes, from the reference alone.
#pragma once

#include <cstdint>
#include <vector>

#include "qtransit/common/format.hpp"

namespace qtransit::gate {

// In a block whose statistics `anchors` fix (the absmax; an offset format's lo too), the last float
// of each code and the first of the next, with one more float on each side: at most max_values.
// Empty for a format whose codes are not a function of the element alone (rotated, stochastic) and
// for blocks under 2.
std::vector<float> code_boundaries(const FormatSpec& f, int64_t block, const std::vector<float>& anchors, int64_t max_values);

// The boundary values of every anchor set the generator probes for f at this block (cached).
struct BoundaryBlockSet {
    std::vector<float> anchors;
    std::vector<float> values;
};
std::vector<BoundaryBlockSet> boundary_blocks(const FormatSpec& f, int64_t block);

}  // namespace qtransit::gate
