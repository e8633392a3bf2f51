// The CUDA backend's host interface. Always declared; in a build without CUDA every call returns
// an Error saying so, and gpu_compiled() is false. Device pointers are plain pointers and streams
// are passed as void* so that this header needs no CUDA header.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "qtransit/common/status.hpp"
#include "qtransit/common/transit.hpp"
#include "qtransit/kernels/codec.hpp"
#include "qtransit/kernels/fused.hpp"

namespace qtransit::kernels::gpu {

struct BuildInfo {
    bool cuda = false;            // the CUDA backend was compiled
    std::string cuda_archs;       // CMAKE_CUDA_ARCHITECTURES, e.g. "90"
    int cuda_toolkit_version = 0; // CUDART_VERSION at build time, e.g. 13000
    bool nccl = false;            // NCCL was found and linked
    std::string nccl_version;     // e.g. "2.27.7"
    std::vector<std::string> kernels;  // the CUDA kernels compiled in
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
// encode_device without its wait: the encode is queued on `stream` after 0xff bytes in *d_flag (a
// device word the caller owns), where it leaves the lowest refused block (~0: none) for the caller
// to copy back with its other results and pass to refusal_of_flag (codec.hpp) with the values it
// encoded. Nothing is copied back and nothing waits here. Not for rotated formats (their check reads
// back; encode_device rotates).
Status encode_device_queued(const FormatSpec& format, const float* d_x, int64_t elements, int64_t block,
                            uint8_t* d_codes, float* d_scales, float* d_offsets, const CodecOptions& options,
                            unsigned long long* d_flag, void* stream);
// key: a rotated format's sign key, as encode had it (sign_key() of its options).
Status decode_device(const FormatSpec& format, int64_t block, const uint8_t* d_codes, const float* d_scales,
                     const float* d_offsets, float* d_out, int64_t elements, void* stream = nullptr,
                     const SignKey& key = {});

// Host-memory conveniences: copy in, run on the device, copy out.
Result<EncodedTensor> encode(const FormatSpec& format, std::span<const float> x, int64_t block,
                             const CodecOptions& options = {});
Result<std::vector<float>> decode(const EncodedTensor& t);

// ---- the composite steps on the device (fused.hpp has their CPU versions) ----------------------
// An encoded tensor in device memory (offsets: asym only, else may be null).
struct DeviceEncoded {
    const uint8_t* codes = nullptr;
    const float* scales = nullptr;
    const float* offsets = nullptr;
};
struct DeviceEncodedOut {
    uint8_t* codes = nullptr;
    float* scales = nullptr;
    float* offsets = nullptr;
};
// The fused kernel takes its inputs as one kernel argument: at most this many (G ranks per node).
inline constexpr int kMaxReduceInputs = 64;

// qgZ stage 1: the swizzled chunk-by-chunk encode of one rank's M elements (fused.hpp's layout).
Status encode_swizzled_device(const FormatSpec& format, const SwizzleLayout& layout, const float* d_x, int64_t block,
                              DeviceEncodedOut out, const CodecOptions& options, void* stream = nullptr);
// qgZ stage 2 fused: G encoded inputs of `elements` values -> decode, sum in input order (fp32 or
// fp16, D11), requantize into `out`. The sum never goes through device memory.
Status reduce_requantize_device(const FormatSpec& format, int64_t block, std::span<const DeviceEncoded> inputs,
                                int64_t elements, Accum accum, DeviceEncodedOut out, const CodecOptions& options,
                                void* stream = nullptr);
// A ring hop: d_out = accum_add(accum_first(D(in)), d_own) element-wise (d_out may equal d_own).
Status decode_add_device(const FormatSpec& format, int64_t block, DeviceEncoded in, const float* d_own, float* d_out,
                         int64_t elements, Accum accum, void* stream = nullptr);

// Device memory without CUDA headers (tests, the device transport, the benchmark).
Result<void*> device_alloc(size_t bytes);
void device_free(void* p);
Status copy_to_device(void* d_dst, const void* src, size_t bytes);
Status copy_to_host(void* dst, const void* d_src, size_t bytes);
Status device_fill(void* d_dst, int byte, size_t bytes);
Status device_synchronize();

// Host-memory conveniences for the composite steps.
Result<EncodedTensor> reduce_requantize(std::span<const EncodedTensor> inputs, Accum accum,
                                        const CodecOptions& options = {});
Result<std::vector<float>> decode_add(const EncodedTensor& in, std::span<const float> own, Accum accum);

// ds-int<b> as DeepSpeed's build computes it (--use_fast_math, cuda/ds_fast_math.cu; docs/DECISIONS.md D23)
struct FastMathDs { std::vector<int32_t> codes; std::vector<float> steps; std::vector<float> decoded; };
// bits 4 or 8; groups of `block` from the start of x (the last one may be short). Refuses, before any
// launch, a value that rounds to binary16 infinity (|x| >= 65520) or a NaN.
Result<FastMathDs> ds_encode_fast_math(int bits, std::span<const float> x, int64_t block);

}  // namespace qtransit::kernels::gpu
