// The CUDA backend's host interface. Always declared; in a build without CUDA every call returns
// an Error saying so, and gpu_compiled() is false. Device pointers are plain pointers and streams
// are passed as void* so that this header needs no CUDA header.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "qtransit/common/status.hpp"
#include "qtransit/kernels/codec.hpp"

namespace qtransit::kernels::gpu {

struct BuildInfo {
    bool cuda = false;            // the CUDA backend was compiled
    std::string cuda_archs;       // CMAKE_CUDA_ARCHITECTURES, e.g. "90"
    int cuda_toolkit_version = 0; // CUDART_VERSION at build time, e.g. 13000
    bool nccl = false;            // NCCL was found and linked
    std::string nccl_version;     // e.g. "2.27.7"
};
BuildInfo build_info();

struct Device {
    int index = 0;
    std::string name;
    int cc_major = 0, cc_minor = 0;
    int64_t memory_bytes = 0;
};
struct DeviceQuery {
    std::vector<Device> devices;
    int driver_version = 0;      // 0 when no driver answered
    std::string note;            // why there are none, when there are none
};
DeviceQuery query_devices();
bool device_available();

// On-device encode/decode of a tensor already in device memory (sizes as encoded_sizes()).
Status encode_device(const FormatSpec& format, const float* d_x, int64_t elements, int64_t block, uint8_t* d_codes,
                     float* d_scales, float* d_offsets, const CodecOptions& options, void* stream = nullptr);
Status decode_device(const FormatSpec& format, int64_t block, const uint8_t* d_codes, const float* d_scales,
                     const float* d_offsets, float* d_out, int64_t elements, void* stream = nullptr);

// Host-memory conveniences: copy in, run on the device, copy out.
Result<EncodedTensor> encode(const FormatSpec& format, std::span<const float> x, int64_t block,
                             const CodecOptions& options = {});
Result<std::vector<float>> decode(const EncodedTensor& t);

}  // namespace qtransit::kernels::gpu
