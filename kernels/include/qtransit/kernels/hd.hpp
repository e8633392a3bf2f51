// One definition of the arithmetic for the CPU and CUDA backends (CUTLASS_HOST_DEVICE's habit).
#pragma once

#if defined(__CUDACC__)
#define QT_HD __host__ __device__ __forceinline__
#define QT_DEVICE_CODE 1
#else
#define QT_HD inline
#define QT_DEVICE_CODE 0
#endif
