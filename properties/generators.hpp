// RapidCheck generators of the property tests: the installed ones (qtransit/testing/blocks.hpp: values
// and blocks that break quantizers) and a format chooser.
#pragma once

#include <rapidcheck.h>

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "qtransit/common/format.hpp"
#include "qtransit/testing/blocks.hpp"

namespace qtransit::testing {

inline rc::Gen<FormatSpec> any_format() { return rc::gen::elementOf(builtin_formats()); }

// The built-in rotated formats (FORMATS.md section 9), and rotated copies of the other declared
// built-ins (every element type and scale; an offset does not combine with a rotation).
inline const std::vector<FormatSpec>& rotated_formats() {
    static const std::vector<FormatSpec> v = [] {
        std::vector<FormatSpec> r;
        for (const FormatSpec& f : all_builtin_formats()) {
            if (f.rotated()) {
                r.push_back(f);
                continue;
            }
            if (f.kind != FormatKind::kDecl || f.decl->offset_min) continue;
            for (bool signs : {false, true}) {
                Decl d = *f.decl;
                d.transform = Transform::kHadamard;
                d.random_signs = signs;
                if (!finalize(d).ok()) continue;
                r.push_back(make_declared(f.name() + (signs ? "-rot-rht" : "-rot-had"), d));
            }
        }
        return r;
    }();
    return v;
}

inline const char* shape_name(const FormatSpec& f) {
    switch (f.kind) {
        case FormatKind::kSym: return "int";
        case FormatKind::kAsym: return "asym";
        default: return "ds";
    }
}

// A rotated format's block: its fixed one, or a power of two up to 2^max_log2.
inline int64_t pow2_block(const FormatSpec& f, int max_log2) {
    if (f.fixed_block() > 0) return f.fixed_block();
    return int64_t{1} << *rc::gen::inRange(0, max_log2 + 1);
}

// Finite values of one magnitude range (a rotation sums a block: far below FLT_MAX / block), with
// zeros, subnormals and a few large elements (outliers are what rotations are for).
inline std::vector<float> rotatable(int64_t n) {
    const int e = *rc::gen::inRange(-150, 90);
    std::vector<float> x(static_cast<size_t>(n));
    for (auto& v : x) {
        const int kind = *rc::gen::inRange(0, 12);
        if (kind == 0) v = *rc::gen::element(0.0f, -0.0f, 0x1p-149f, -0x1p-140f);
        else {
            const uint32_t mant = *rc::gen::inRange<uint32_t>(0, 1u << 23);
            const int de = kind == 1 ? *rc::gen::inRange(0, 12) : -*rc::gen::inRange(0, 10);
            v = std::ldexp(1.0f + std::ldexp(static_cast<float>(mant), -23), std::max(e + de, -149));
            if (*rc::gen::arbitrary<bool>()) v = -v;
        }
    }
    return x;
}

// A tensor length for a rotated format: whole blocks, and sometimes a short last block of a power-of-two length.
inline int64_t tensor_length(int64_t block) {
    int64_t n = block * *rc::gen::inRange<int64_t>(1, 4);
    if (block > 1 && *rc::gen::arbitrary<bool>()) n += int64_t{1} << *rc::gen::inRange(0, std::countr_zero(static_cast<uint64_t>(block)));
    return n;
}

}  // namespace qtransit::testing
