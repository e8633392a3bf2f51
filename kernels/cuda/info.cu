// What the CUDA build contains and which GPUs answer now.
#include <cuda_runtime.h>

#include <string>

#include "qtransit/kernels/gpu.hpp"
#if QTRANSIT_HAVE_NCCL
#include <nccl.h>
#endif

namespace qtransit::kernels::gpu {

BuildInfo build_info() {
    BuildInfo b;
    b.cuda = true;
    b.cuda_archs = QTRANSIT_CUDA_ARCHS;
    b.cuda_toolkit_version = CUDART_VERSION;
    b.kernels = {"encode", "encode-swizzled", "reduce-requantize", "decode", "decode-add", "ds-encode-fast-math"};
#if QTRANSIT_HAVE_NCCL
    b.nccl = true;
    int v = 0;
    // The version of the library loaded at run time (the header's NCCL_VERSION_CODE is build time).
    if (ncclGetVersion(&v) == ncclSuccess)
        b.nccl_version = std::to_string(v / 10000) + "." + std::to_string((v / 100) % 100) + "." + std::to_string(v % 100);
    else
        b.nccl_version = "unknown";
#endif
    return b;
}

DeviceQuery query_devices() {
    DeviceQuery q;
    if (cudaDriverGetVersion(&q.driver_version) != cudaSuccess || q.driver_version == 0) {
        q.note = "no CUDA driver is installed on this machine";
        return q;
    }
    int count = 0;
    const cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
        q.note = std::string("no GPU answered: ") + cudaGetErrorString(e);
        return q;
    }
    for (int i = 0; i < count; ++i) {
        cudaDeviceProp p{};
        if (cudaGetDeviceProperties(&p, i) != cudaSuccess) continue;
        q.devices.push_back({i, p.name, p.major, p.minor, static_cast<int64_t>(p.totalGlobalMem)});
    }
    if (q.devices.empty()) q.note = "the CUDA driver reports no GPU";
    return q;
}

bool device_available() { return !query_devices().devices.empty(); }

}  // namespace qtransit::kernels::gpu
