// .npy files (NumPy format versions 1.0, 2.0, 3.0): binary32 and binary16, either byte order, any
// shape, C order. A malformed file is an Error that says what is wrong with it.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "qtransit/common/status.hpp"

namespace qtransit::kernels {

enum class NpyDtype : uint8_t { kFloat32, kFloat16 };

struct NpyArray {
    std::vector<int64_t> shape;  // empty for a 0-d array (one element)
    NpyDtype dtype = NpyDtype::kFloat32;  // what the file held
    std::vector<float> data;     // values widened to binary32 (binary16 converts exactly), C order
    int64_t elements() const;
};

Result<NpyArray> read_npy(const std::string& path);
// Writes atomically (a temporary file renamed into place), so a failure leaves nothing half-written.
Status write_npy(const std::string& path, std::span<const float> data, std::span<const int64_t> shape,
                 NpyDtype dtype = NpyDtype::kFloat32);

}  // namespace qtransit::kernels
