// QT_CUDA_CHECK: every CUDA runtime return code becomes a Status naming the call and the place.
// Public, for every TU that calls the CUDA runtime (kernels/cuda, collectives' device transports, a
// user's own launchers). It needs <cuda_runtime.h>: in a build without CUDA (QTRANSIT_HAVE_CUDA=0,
// and not compiled by nvcc) it declares nothing, so that it still compiles alone there, as every
// public header must (cmake/install.cmake's header check).
#pragma once

#if defined(__CUDACC__) || QTRANSIT_HAVE_CUDA

#include <cuda_runtime.h>

#include <string>

#include "qtransit/common/status.hpp"

namespace qtransit::kernels::gpu {

inline Status cuda_status(cudaError_t e, const char* what, const char* file, int line) {
    if (e == cudaSuccess) return Status::Ok();
    return make_error(ErrorCode::kCuda, std::string(what) + " failed: " + cudaGetErrorName(e) + " (" +
                                            cudaGetErrorString(e) + ") at " + file + ":" + std::to_string(line));
}

}  // namespace qtransit::kernels::gpu

#define QT_CUDA_CHECK(call)                                                                          \
    do {                                                                                             \
        if (auto qt_st_ = ::qtransit::kernels::gpu::cuda_status((call), #call, __FILE__, __LINE__); \
            !qt_st_)                                                                                 \
            return qt_st_.error();                                                                   \
    } while (0)

// After a launch: a configuration error shows up in cudaGetLastError, named after the kernel.
#define QT_CUDA_LAUNCH_CHECK(kernel_name)                                                                     \
    do {                                                                                                      \
        if (auto qt_st_ = ::qtransit::kernels::gpu::cuda_status(cudaGetLastError(), (std::string("launch of ") + (kernel_name)).c_str(), \
                                                                __FILE__, __LINE__);                          \
            !qt_st_)                                                                                          \
            return qt_st_.error();                                                                            \
    } while (0)

#endif  // defined(__CUDACC__) || QTRANSIT_HAVE_CUDA
