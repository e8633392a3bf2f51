// One quantization checked both ways: the production kernel's output compared bit for bit with the
// reference's, and every element's error compared with its bound in exact arithmetic.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "qtransit/common/format.hpp"
#include "qtransit/common/tiles.hpp"
#include "qtransit/gate/codec_check.hpp"
#include "qtransit/kernels/codec.hpp"
#include "qtransit/reference/formats.hpp"

namespace qtransit::gate {

// x through the production kernel and the reference with `format` as given (a block-level check: NVFP4
// under its declared tensor amax), under `policy` (a poisoned block's scale is NaN), the bound checked
// on the kernel's own output: a CodecCheck (codec_check.hpp) with the comparison's verdict (exact,
// first_difference), the bound, max_abs_error and poisoned_blocks, judged under exact conformance.
Result<CodecCheck> quantize_and_check(const FormatSpec& format, std::span<const float> x, int64_t block,
                                      Nonfinite policy, const Site& site = {}, uint64_t seed = 0);
// quantize_and_check of a user's tensor: a format whose blocks take the tensor's amax (NVFP4, D58) takes
// x's largest finite |x| (FormatSpec::for_tensor), as Transformer Engine's recipe does.
// A tiled format (FORMATS.md section 8) quantizes x as its tile grid over `shape` in tile order, and
// the codes and decoded values come back in x's order (first_violation too); the encoded
// tensor and the first_difference text stay in tile order.
Result<CodecCheck> quantize_tensor(const FormatSpec& format, std::span<const float> x, std::span<const int64_t> shape, int64_t block,
                                   Nonfinite policy, const Site& site = {}, uint64_t seed = 0);
// A check of a tensor quantized in tile order over `grid`: its codes, decoded values and
// first_violation back in the tensor's order (the padding dropped), and the grid kept; the
// encoded tensor and any message stay in tile order (quantize_tensor, and quantize --codec).
void to_tensor_order(CodecCheck& c, const TileGrid& grid);

// `--out DIR`: decoded.npy (input shape), scales.npy, offsets.npy (asym), codes.bin (the packed wire codes).
Status write_quantize_outputs(const std::string& dir, const CodecCheck& c, const std::vector<int64_t>& shape);

}  // namespace qtransit::gate
