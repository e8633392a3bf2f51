// 2-D blocks (a declared `tile = [r, c]`, docs/FORMATS.md section 8): a [R, C] tensor in row-major order
// is quantized tile by tile, tile (i, j) (rows i r .. i r + r - 1, columns j c .. j c + c - 1) being block
// i (C / c) + j of the tensor in tile order, its elements row by row (a tensor padded to whole tiles:
// C' / c, see tile_grid). Every kernel, the reference and the
// bounds see 1-D blocks of r c elements in that order; the tensor commands reorder their input into it
// and their codes and decoded values back.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "qtransit/common/format.hpp"
#include "qtransit/common/status.hpp"

namespace qtransit {

struct TileGrid {
    int64_t rows = 0, cols = 0;          // the tensor as [R, C]
    int64_t tile_rows = 0, tile_cols = 0;
    // The grid's [R, C] rounded up to whole tiles: R and C unless padded (tile_grid's `pad`), when the
    // tiles on the last row and column hold zeros past the tensor, as DeepGEMM and TE pad.
    int64_t padded_rows = 0, padded_cols = 0;
    bool padded() const { return padded_rows != rows || padded_cols != cols; }
    int64_t elements() const { return padded_rows * padded_cols; }  // in tile order
};

// The grid of a tiled format over a tensor of `shape` (its last dimension is C, the product of the
// others R); an Error naming the shape and the tile when the tensor is not 2-D or more, or, without
// `pad`, when R or C is not a multiple of the tile's. With `pad` such a tensor is padded with zeros to
// whole tiles (DeepGEMM's per_block_cast_to_fp8 and TE do; a zero raises no tile's amax, so every
// tile's scale is its clipped part's).
inline Result<TileGrid> tile_grid(const FormatSpec& f, std::span<const int64_t> shape, bool pad = false) {
    TileGrid g;
    g.tile_rows = f.decl ? f.decl->tile_rows : 0;
    g.tile_cols = f.decl ? f.decl->tile_cols : 0;
    std::string text = "[";
    for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
    text += "]";
    const std::string tile = std::to_string(g.tile_rows) + " x " + std::to_string(g.tile_cols);
    if (shape.size() < 2)
        return make_error(ErrorCode::kInvalidArgument, f.name() + " quantizes a 2-D tensor in tiles of " + tile + "; the tensor's shape is " +
                                                           text + " (give it its 2-D shape: a 2-D array, or quantize --shape ROWS,COLS)");
    g.cols = shape.back();
    g.rows = 1;
    for (size_t i = 0; i + 1 < shape.size(); ++i) g.rows *= shape[i];
    if (!pad && (g.rows % g.tile_rows != 0 || g.cols % g.tile_cols != 0))
        return make_error(ErrorCode::kInvalidArgument, f.name() + " quantizes in tiles of " + tile + ", but the tensor's shape " + text +
                                                           " (as [" + std::to_string(g.rows) + ", " + std::to_string(g.cols) +
                                                           "]) is not a multiple of it (here the tensor is taken as given, unpadded)");
    g.padded_rows = (g.rows + g.tile_rows - 1) / g.tile_rows * g.tile_rows;
    g.padded_cols = (g.cols + g.tile_cols - 1) / g.tile_cols * g.tile_cols;
    return g;
}

// The row-major index of element k of the tensor in tile order in the padded [R', C'] grid, and its
// index in the tensor (-1: padding).
inline int64_t row_major_index(int64_t k, const TileGrid& g) {
    const int64_t area = g.tile_rows * g.tile_cols, tile = k / area, in = k % area;
    const int64_t per_row = g.padded_cols / g.tile_cols;
    return ((tile / per_row) * g.tile_rows + in / g.tile_cols) * g.padded_cols + (tile % per_row) * g.tile_cols + in % g.tile_cols;
}
inline int64_t tensor_index(int64_t k, const TileGrid& g) {
    const int64_t p = row_major_index(k, g), r = p / g.padded_cols, c = p % g.padded_cols;
    return r < g.rows && c < g.cols ? r * g.cols + c : -1;
}
// x in row-major [R, C] order to tile order (with zeros for the padding), and back (the padding dropped).
template <class T>
std::vector<T> to_tile_order(std::span<const T> x, const TileGrid& g) {
    std::vector<T> out(static_cast<size_t>(g.elements()), T{});
    for (size_t k = 0; k < out.size(); ++k)
        if (const int64_t i = tensor_index(static_cast<int64_t>(k), g); i >= 0) out[k] = x[static_cast<size_t>(i)];
    return out;
}
template <class T>
std::vector<T> from_tile_order(std::span<const T> t, const TileGrid& g) {
    std::vector<T> out(static_cast<size_t>(g.rows * g.cols));
    for (size_t k = 0; k < t.size(); ++k)
        if (const int64_t i = tensor_index(static_cast<int64_t>(k), g); i >= 0) out[static_cast<size_t>(i)] = t[k];
    return out;
}

}  // namespace qtransit
