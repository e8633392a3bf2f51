// One definition of the arithmetic for the CPU and CUDA backends (CUTLASS_HOST_DEVICE's habit). In
// common because it is shared below kernels: Philox (philox.hpp) is __host__ __device__ too, and
// the reference uses Philox without including anything of kernels.
#pragma once

#if defined(__CUDACC__)
#define QT_HD __host__ __device__ __forceinline__
#define QT_DEVICE_CODE 1
#else
#define QT_HD inline
#define QT_DEVICE_CODE 0
#endif
