// ds-int<b> as DeepSpeed's build computes it (docs/DECISIONS.md D23): ZeRO++'s quantizer
// (csrc/quantization/quantize.cu with quantization_utils.h's Params<Symmetric>) is compiled with
// -O3 --use_fast_math, and this file alone is too (kernels/CMakeLists.txt). The arithmetic is
// written as DeepSpeed writes it, with plain operators, so that nvcc picks the fast-math
// instructions itself: the scale's `/` becomes an approximate division, the step's `1 / scale` an
// approximate reciprocal, and every float operation flushes subnormals. block_math.hpp's ds_scale
// and ds_step are not used here: their __fdiv_rn stays IEEE under any flag, which is the point of
// them and the opposite of the point of this file. properties/scripts/ptx_flags.py checks from the
// PTX that the flags took effect.
//
// Work unit: one CTA per group (DeepSpeed's one-block-per-group layout), grid-stride over groups;
// the threads of a CTA stride over the group's elements, so any group length works.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>

#include "qtransit/kernels/cuda_check.hpp"
#include "qtransit/kernels/gpu.hpp"

namespace qtransit::kernels::gpu {
namespace {

constexpr int kMaxThreads = 256;
constexpr int kMaxCtas = 1 << 16;  // grid-stride beyond: many times what an H200 holds at once

// y = fl16(x): DeepSpeed quantizes a half tensor; qtransit's binary32 input is rounded first.
__device__ __forceinline__ float to_half_and_back(float v) { return __half2float(__float2half_rn(v)); }

template <int kBits>
__global__ void __launch_bounds__(kMaxThreads) ds_fast_math_kernel(const float* __restrict__ x, int64_t n,
                                                                   int64_t block, int32_t* __restrict__ codes,
                                                                   float* __restrict__ steps,
                                                                   float* __restrict__ decoded) {
    constexpr int32_t q_range = 1 << kBits;
    constexpr int32_t q_min = -(q_range >> 1);
    constexpr int32_t q_max = (q_range >> 1) - 1;
    __shared__ float s_max[kMaxThreads / 32];
    const int t = static_cast<int>(threadIdx.x), lane = t & 31, w = t >> 5, warps = (blockDim.x + 31) >> 5;
    const int64_t groups = (n + block - 1) / block;
    for (int64_t g = blockIdx.x; g < groups; g += gridDim.x) {
        const int64_t first = g * block, len = min(block, n - first);
        // The group's absmax of the fp16 values (DeepSpeed reduces the half values it holds).
        float a = 0.0f;
        for (int64_t i = t; i < len; i += blockDim.x) a = fmaxf(a, fabsf(to_half_and_back(x[first + i])));
        for (int off = 16; off > 0; off >>= 1) a = fmaxf(a, __shfl_xor_sync(0xffffffffu, a, off));
        if (lane == 0) s_max[w] = a;
        __syncthreads();
        a = s_max[0];
        for (int k = 1; k < warps; ++k) a = fmaxf(a, s_max[k]);
        __syncthreads();  // the next group's reduction reuses s_max
        // Params<Symmetric>(max): scale = (1 << numBits) / (2 * max), 1 for an all-zero group; its
        // store() writes 1 / scale, which dequantize multiplies by.
        const float scale = a == 0.0f ? 1.0f : static_cast<float>(q_range) / (2 * a);
        const float step = 1.0f / scale;
        if (t == 0) steps[g] = step;
        for (int64_t i = t; i < len; i += blockDim.x) {
            const float y = to_half_and_back(x[first + i]);
            const int32_t q = min(max(__float2int_rn(y * scale), q_min), q_max);
            codes[first + i] = q;
            decoded[first + i] = to_half_and_back(static_cast<float>(q) * step);
        }
    }
}

template <class T>
struct DeviceFree {
    void operator()(T* p) const { cudaFree(p); }
};
template <class T>
using DevicePtr = std::unique_ptr<T, DeviceFree<T>>;

template <class T>
Result<DevicePtr<T>> device_array(size_t count) {
    T* p = nullptr;
    QT_CUDA_CHECK(cudaMalloc(&p, std::max<size_t>(count, 1) * sizeof(T)));
    return DevicePtr<T>(p);
}

}  // namespace

Result<FastMathDs> ds_encode_fast_math(int bits, std::span<const float> x, int64_t block) {
    if (bits != 4 && bits != 8)
        return make_error(ErrorCode::kInvalidArgument,
                          "ds_encode_fast_math: bits must be 4 or 8 (DeepSpeed's widths), got " + std::to_string(bits));
    if (block < 1)
        return make_error(ErrorCode::kInvalidArgument,
                          "ds_encode_fast_math: block must be at least 1, got " + std::to_string(block));
    // DeepSpeed's input is half: a value that rounds to binary16 infinity (|x| >= 65520) or a NaN
    // has no fp16 group to quantize (ds-int<b> refuses it too, D3).
    for (size_t i = 0; i < x.size(); ++i)
        if (!(std::fabs(x[i]) < 65520.0f))
            return make_error(ErrorCode::kInvalidArgument,
                              "ds_encode_fast_math: element " + std::to_string(i) + " = " + std::to_string(x[i]) +
                                  " is not finite in binary16 (|x| must be below 65520)");
    const auto n = static_cast<int64_t>(x.size());
    const int64_t groups = (n + block - 1) / block;
    FastMathDs r;
    r.codes.resize(x.size());
    r.decoded.resize(x.size());
    r.steps.resize(static_cast<size_t>(groups));
    if (n == 0) return r;
    auto dx = device_array<float>(x.size());
    auto dc = device_array<int32_t>(x.size());
    auto dd = device_array<float>(x.size());
    auto ds = device_array<float>(r.steps.size());
    if (!dx) return dx.error();
    if (!dc) return dc.error();
    if (!dd) return dd.error();
    if (!ds) return ds.error();
    QT_CUDA_CHECK(cudaMemcpy(dx->get(), x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice));
    // The smallest multiple of a warp covering the group, at most kMaxThreads.
    const int threads = static_cast<int>(std::min<int64_t>(kMaxThreads, (block + 31) / 32 * 32));
    const int ctas = static_cast<int>(std::min<int64_t>(groups, kMaxCtas));
    if (bits == 4)
        ds_fast_math_kernel<4><<<ctas, threads>>>(dx->get(), n, block, dc->get(), ds->get(), dd->get());
    else
        ds_fast_math_kernel<8><<<ctas, threads>>>(dx->get(), n, block, dc->get(), ds->get(), dd->get());
    QT_CUDA_LAUNCH_CHECK("qtransit::ds_fast_math_kernel");
    QT_CUDA_CHECK(cudaMemcpy(r.codes.data(), dc->get(), r.codes.size() * sizeof(int32_t), cudaMemcpyDeviceToHost));
    QT_CUDA_CHECK(cudaMemcpy(r.decoded.data(), dd->get(), r.decoded.size() * sizeof(float), cudaMemcpyDeviceToHost));
    QT_CUDA_CHECK(cudaMemcpy(r.steps.data(), ds->get(), r.steps.size() * sizeof(float), cudaMemcpyDeviceToHost));
    return r;
}

}  // namespace qtransit::kernels::gpu
