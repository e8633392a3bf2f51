// RapidCheck generators of the property tests: the installed ones (qtransit/testing/blocks.hpp: values
// and blocks that break quantizers) and a format chooser.
#pragma once

#include <rapidcheck.h>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "qtransit/common/format.hpp"
#include "qtransit/testing/blocks.hpp"

namespace qtransit::testing {

inline rc::Gen<FormatSpec> any_format() { return rc::gen::elementOf(builtin_formats()); }

inline const char* shape_name(const FormatSpec& f) {
    switch (f.kind) {
        case FormatKind::kSym: return "int";
        case FormatKind::kAsym: return "asym";
        default: return "ds";
    }
}

}  // namespace qtransit::testing
