// The a-posteriori bound of one element of a declared format's block (FORMATS.md section 6), as
// PathChecker::add computes it: the scalar definition (checker.cpp, where its derivation is) and
// the same operations eight elements at a time (decl_simd.cpp). Internal to the reference.
#pragma once

#include <cstddef>

#include "qtransit/common/decl.hpp"

namespace qtransit::reference::detail {

// What decl_at reads of a block's scale: the same for every element of the block, so computed
// once per event (the operations decl_at did for each element, in the same order: the same bits).
struct DeclScale {
    double ds = 0;
    bool zero = true, pow2 = false, nearest = true;
    double lo126 = 0, hi = 0, tiny = 0, step_int = 0, vmax = 0, vmin = 0, vabs = 0;
    int e_ds = 0;
    double m = 0;  // the scales that multiply: the block's multiplier (decl_at's other branch); else 0
};

// m: the block's multiplier for a scale that multiplies (FORMATS.md section 2), ignored otherwise.
DeclScale decl_scale_of(const Decl& d, float s, float m = 0);

// E(x) of an element x of a block of scale c (and offset lo, for an offset format). With c.m set
// (a scale that multiplies) the bound of x m s instead of x / s (decl.cpp's derivation); decl_at only,
// the AVX-512 form takes the other scales.
double decl_at(const Decl& d, const DeclScale& c, float x, float lo);

// acc[i] += decl_at(d, c, x[i], lo) for i < n, with AVX-512F/DQ: each lane takes decl_at's
// operations in decl_at's order, so every sum has decl_at's bits. Only where column_simd() says
// the CPU has AVX-512 (x86-64 builds; elsewhere it is not defined).
void add_decl_at_avx512(const Decl& d, const DeclScale& c, const float* x, size_t n, float lo, double* acc);

}  // namespace qtransit::reference::detail
