// Internal to reference/: the declared formats (docs/FORMATS.md), implemented in decl.cpp and called
// by the public entry points of formats.cpp when format.kind == FormatKind::kDecl.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "qtransit/common/format.hpp"
#include "qtransit/reference/exact.hpp"
#include "qtransit/reference/formats.hpp"

namespace qtransit::reference::detail {

Result<Quantized> quantize_decl(const FormatSpec& f, std::span<const float> x, int64_t block, Nonfinite policy,
                                const Site& site, const StochasticKey& key);
std::vector<float> decode_decl(const FormatSpec& f, std::span<const int32_t> codes, std::span<const float> scales,
                               std::span<const float> offsets, int64_t block);
// Rotated formats (rotated.cpp): the rotation around quantize_decl / decode_decl.
Result<Quantized> quantize_rotated(const FormatSpec& f, std::span<const float> x, int64_t block, Nonfinite policy,
                                   const Site& site, const StochasticKey& key);
std::vector<float> decode_rotated(const FormatSpec& f, std::span<const int32_t> codes, std::span<const float> scales,
                                  std::span<const float> offsets, int64_t block, uint64_t seed, int64_t first);
std::vector<uint8_t> pack_decl(const FormatSpec& f, std::span<const int32_t> codes, int64_t block);
std::vector<int32_t> unpack_decl(const FormatSpec& f, std::span<const uint8_t> bytes, int64_t elements, int64_t block);

// FORMATS.md section 6 for one element x of a block with scale s (and lo, for an offset `min`; and m,
// the multiplier, for the scales that multiply: decl_multiplier_of), exactly. s must not be NaN (a
// poisoned block has no bound).
Exact decl_element_bound(const Decl& d, float x, float s, float lo, float m = 0);
// The multiplier fl32(A / max(a, F)) of a block x of a format whose scale multiplies (FORMATS.md
// section 2), a = max |x_i|; 0 for every other scale.
float decl_multiplier_of(const Decl& d, std::span<const float> x);

}  // namespace qtransit::reference::detail
