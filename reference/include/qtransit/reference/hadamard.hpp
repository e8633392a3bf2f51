// The reference of a rotated format's transform (docs/FORMATS.md section 9), written from its
// definition and independent of kernels/hadamard.hpp:
// - the binary32 transform from the recursive (Sylvester) definition
//     H_1 v = v,   H_2n (a, b) = (fl32(H_n a + H_n b), fl32(H_n a - H_n b)),
//   which the kernels' stages compute in another order of loops, with the same roundings;
// - the same transform exactly, as Eigen matrices over Boost.Multiprecision integers: every binary32
//   value is an integer multiple of 2^-149, so v 2^149 is an integer and H (v 2^149) is computed
//   with no rounding at all. The rotation's bound (reference/src/formats.cpp) is then evaluated from
//   exact rounding errors.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "qtransit/common/status.hpp"
#include "qtransit/reference/exact.hpp"

namespace qtransit::reference {

// Whether element i of the block whose first element has index `first` is negated (seed: the run's).
bool hadamard_negated(uint64_t seed, int64_t first, int64_t i);
// v negated where hadamard_negated says, for the whole block (one generator call per 128 elements).
void negate_by_signs(std::span<float> v, uint64_t seed, int64_t first);

// The binary32 transform of v in place (v.size() a power of two), by the recursive definition.
void hadamard_fl32(std::span<float> v);

// A rotated format's whole rotation of one block in place (FORMATS.md section 9): forward, the signs
// (when `signs`, keyed by seed and the block's first element) then the transform; inverse, the
// transform, fl32(v 2^-L), then the signs.
void rotate_forward(std::span<float> v, bool signs, uint64_t seed, int64_t first);
void rotate_inverse(std::span<float> v, bool signs, uint64_t seed, int64_t first);

// L = log2 n of a block of n = 2^L elements.
int block_log2(int64_t n);
// FLT_MAX 2^-(L+2): the largest rotated magnitude an encodable block of n elements may reach.
double rotation_limit(int64_t n);
// Ok, or the range overflow of a rotated block y (its first element at `start` of `site`) whose
// largest magnitude (a NaN counts as past it) passes rotation_limit.
Status check_rotation_limit(std::span<const float> y, const Site& site, int64_t start, const std::string& format);

// H v exactly, v.size() a power of two (the unnormalized transform, entries +-1).
std::vector<Exact> hadamard_exact(std::span<const float> v);
// H v exactly for exact values given as integers times 2^-149 (Exact::fixed149).
std::vector<Exact::Int> hadamard_exact_fixed(std::span<const Exact::Int> v);

// The Sylvester matrix H_n (n a power of two) as integers, and whether H_n^T H_n = n I exactly:
// the orthogonality the transform's inverse (H / n) relies on.
bool hadamard_orthogonal(int64_t n);

}  // namespace qtransit::reference
