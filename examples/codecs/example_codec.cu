// example_codec.cu: the correct example codec (int8, int4, int4-asym: EXAMPLE_FORMAT 8, 4, 41, as
// in example_codec.c) running on CUDA, for qtransit's plugin ABI (qtransit/codec_plugin.h). Like the
// CPU example it is written from the specification (NUMERICS.md 1.1, 1.2, 1.4; DECISIONS.md D1, D2,
// D5, D8) with no qtransit code but the ABI header, and must give the CPU codec's results bit for bit.
//
// Device: QTRANSIT_DEVICE_CUDA. Every pointer in the args is a device pointer; the work runs on
// args->stream. Encode checks the whole call first (non-finite input, asym range overflow) and has
// to return that verdict, so it waits for that check on the stream; the kernel that writes codes,
// scales and offsets is then queued and encode returns without waiting for it (decode never waits).
//
// Arithmetic: binary32, round to nearest even, written with the IEEE intrinsics (__fdiv_rn,
// __fmul_rn, __fadd_rn, __fsub_rn, rintf) and compiled with --fmad=false --prec-div=true
// --ftz=false, so nothing is fused, divisions are correctly rounded and subnormals are kept.
//
// CUDA runtime: linked STATICALLY (cudart_static), as qtransit's own CUDA targets are, so the
// plugin needs only the driver at run time. Two static runtimes in one process (qtransit's and this
// plugin's) share the driver's primary context of the device, so qtransit's device pointers and its
// cudaStream_t are valid here; this plugin uses the context current on the calling thread.
//
// Build (what CMakeLists.txt does; nvcc links cudart statically by default), on one line:
//   nvcc -arch=sm_90 -shared -Xcompiler -fPIC,-fvisibility=hidden --fmad=false --prec-div=true
//        --prec-sqrt=true --ftz=false -DEXAMPLE_FORMAT=4 -I kernels/include
//        examples/codecs/example_codec.cu -o libqt_codec_example-cuda-int4.so
#include <cuda_runtime.h>

#include <cfloat>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "qtransit/codec_plugin.h"

#ifndef EXAMPLE_FORMAT
#define EXAMPLE_FORMAT 4
#endif

#if EXAMPLE_FORMAT == 8
#define BITS 8
#define ASYM 0
#define FORMAT_NAME "int8"
#elif EXAMPLE_FORMAT == 4
#define BITS 4
#define ASYM 0
#define FORMAT_NAME "int4"
#elif EXAMPLE_FORMAT == 41
#define BITS 4
#define ASYM 1
#define FORMAT_NAME "int4-asym"
#else
#error "EXAMPLE_FORMAT must be 8 (int8), 4 (int4) or 41 (int4-asym)"
#endif

#define CODEC_NAME "example-cuda-" FORMAT_NAME

namespace {

#if ASYM
constexpr int kQmin = 0;
constexpr int kQmax = (1 << BITS) - 1;
#else
constexpr int kQmin = -((1 << (BITS - 1)) - 1);
constexpr int kQmax = (1 << (BITS - 1)) - 1;
#endif
constexpr float kLevels = static_cast<float>(ASYM ? (1 << BITS) - 1 : (1 << (BITS - 1)) - 1);
constexpr float kMinScale = 0x1p-149f;
constexpr int kThreads = 256;
constexpr unsigned long long kNone = ~0ull;

void set_err(char* err, size_t err_len, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
void set_err(char* err, size_t err_len, const char* fmt, ...) {
    if (err == nullptr || err_len == 0) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, err_len, fmt, ap);
    va_end(ap);
}

// The block layout of a call: blocks of B restarting at every shard S; block j's first element,
// length and first code byte.
struct Layout {
    int64_t n, B, S;
    int64_t per_shard;   // blocks per shard
    int64_t last_len;    // the last block of a shard
    int64_t block_bytes; // code bytes of a full block
    int64_t shard_bytes;
    int64_t blocks;
};

__host__ __device__ inline int64_t code_bytes(int64_t len) { return (len * BITS + 7) / 8; }

Layout make_layout(int64_t n, int64_t B, int64_t S) {
    Layout g;
    g.n = n;
    g.B = B;
    g.S = S;
    g.per_shard = (S + B - 1) / B;
    g.last_len = S - (g.per_shard - 1) * B;
    g.block_bytes = code_bytes(B);
    g.shard_bytes = (g.per_shard - 1) * g.block_bytes + code_bytes(g.last_len);
    g.blocks = (n / S) * g.per_shard;
    return g;
}

__device__ inline void block_geometry(const Layout& g, int64_t j, int64_t& start, int64_t& len, int64_t& byte) {
    const int64_t sh = j / g.per_shard, m = j % g.per_shard;
    start = sh * g.S + m * g.B;
    len = m == g.per_shard - 1 ? g.last_len : g.B;
    byte = sh * g.shard_bytes + m * g.block_bytes;
}

#if ASYM
// Order keys: a monotone map of finite binary32 values to unsigned integers under IEEE totalOrder
// (so -0 < +0, as D2 asks of lo and hi), which makes min/max reductions exact and order-free.
__device__ inline uint32_t order_key(float v) {
    const uint32_t u = __float_as_uint(v);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
__device__ inline float from_order_key(uint32_t k) {
    return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}
#endif

__device__ inline float sat(float v) { return fminf(fmaxf(v, -FLT_MAX), FLT_MAX); }  // D1

struct Check {                       // what encode's first pass found
    unsigned long long nonfinite;    // lowest index of a non-finite element (kNone: none)
    unsigned long long overflow;     // first element of the lowest block whose range overflows
};

template <typename Op>
__device__ inline uint32_t block_reduce(uint32_t v, uint32_t* shared, Op op) {
    for (int off = 16; off > 0; off >>= 1) v = op(v, __shfl_down_sync(0xffffffffu, v, off));
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < (int)(blockDim.x >> 5) ? shared[lane] : shared[0];
        for (int off = 16; off > 0; off >>= 1) v = op(v, __shfl_down_sync(0xffffffffu, v, off));
    }
    __syncthreads();
    return v;  // valid in thread 0
}
struct MaxOp {
    __device__ uint32_t operator()(uint32_t a, uint32_t b) const { return a > b ? a : b; }
};
#if ASYM
struct MinOp {
    __device__ uint32_t operator()(uint32_t a, uint32_t b) const { return a < b ? a : b; }
};
#endif

// Pass 1: per block, the non-finite check and the statistics: params[j] = {s, lo}; for an asym
// range overflow params[j] = {hi, lo} and check->overflow names the block's first element.
__global__ void stats_kernel(const float* __restrict__ x, Layout g, float2* __restrict__ params, Check* check) {
    __shared__ uint32_t red[kThreads / 32];
    for (int64_t j = blockIdx.x; j < g.blocks; j += gridDim.x) {
        int64_t start, len, byte;
        block_geometry(g, j, start, len, byte);
        bool bad = false;
        uint32_t kmax = 0;  // asym: the largest order key; sym: the bits of the largest |x|
#if ASYM
        uint32_t kmin = 0xffffffffu;
#endif
        for (int64_t i = threadIdx.x; i < len; i += blockDim.x) {
            const float v = x[start + i];
            if (!isfinite(v)) {
                if (!bad) atomicMin(&check->nonfinite, (unsigned long long)(start + i));
                bad = true;
                continue;
            }
#if ASYM
            const uint32_t k = order_key(v);
            kmin = k < kmin ? k : kmin;
            kmax = k > kmax ? k : kmax;
#else
            const uint32_t a = __float_as_uint(v) & 0x7fffffffu;  // |v|: monotone in its bits
            kmax = a > kmax ? a : kmax;
#endif
        }
        const bool any_bad = __syncthreads_or(bad);
        kmax = block_reduce(kmax, red, MaxOp());
#if ASYM
        kmin = block_reduce(kmin, red, MinOp());
#endif
        if (threadIdx.x == 0 && !any_bad) {  // a block with a non-finite value has no range (D8)
#if ASYM
            const float lo = from_order_key(kmin), hi = from_order_key(kmax);
            float s = 0.0f;
            if (hi != lo) {
                const float r = __fsub_rn(hi, lo);
                if (isinf(r)) {
                    atomicMin(&check->overflow, (unsigned long long)start);
                    params[j] = make_float2(hi, lo);
                    continue;
                }
                s = fmaxf(__fdiv_rn(r, kLevels), kMinScale);
            }
            params[j] = make_float2(s, lo);
#else
            const float a = __uint_as_float(kmax);
            const float s = a == 0.0f ? 0.0f : fmaxf(__fdiv_rn(a, kLevels), kMinScale);
            params[j] = make_float2(s, 0.0f);
#endif
        }
    }
}

__device__ inline int quantize(float v, float s, float lo) {
#if ASYM
    const float t = rintf(__fdiv_rn(__fsub_rn(v, lo), s));
#else
    (void)lo;
    const float t = rintf(__fdiv_rn(v, s));
#endif
    return static_cast<int>(fminf(fmaxf(t, (float)kQmin), (float)kQmax));
}

// Pass 2: codes (one byte per thread: two 4-bit codes, element 2k in the low nibble), scales,
// offsets.
__global__ void write_kernel(const float* __restrict__ x, Layout g, const float2* __restrict__ params,
                             uint8_t* __restrict__ codes, float* __restrict__ scales, float* __restrict__ offsets) {
    for (int64_t j = blockIdx.x; j < g.blocks; j += gridDim.x) {
        int64_t start, len, byte;
        block_geometry(g, j, start, len, byte);
        const float2 p = params[j];
        const float s = p.x, lo = p.y;
        if (threadIdx.x == 0) {
            scales[j] = s;
#if ASYM
            offsets[j] = lo;
#else
            (void)offsets;
#endif
        }
        const int64_t nb = code_bytes(len);
        for (int64_t k = threadIdx.x; k < nb; k += blockDim.x) {
            unsigned out = 0;
            if (s != 0.0f) {
#if BITS == 8
                out = static_cast<unsigned>(quantize(x[start + k], s, lo)) & 0xffu;
#else
                const int64_t i = 2 * k;
                out = static_cast<unsigned>(quantize(x[start + i], s, lo)) & 0xfu;
                if (i + 1 < len) out |= (static_cast<unsigned>(quantize(x[start + i + 1], s, lo)) & 0xfu) << 4;
#endif
            }
            codes[byte + k] = static_cast<uint8_t>(out);
        }
    }
}

__device__ inline int code_at(const uint8_t* codes, int64_t byte, int64_t i) {
#if BITS == 8
#if ASYM
    return codes[byte + i];
#else
    return static_cast<int8_t>(codes[byte + i]);
#endif
#else
    const unsigned b = codes[byte + i / 2];
    const unsigned nib = (i & 1) ? (b >> 4) : (b & 0xfu);
#if ASYM
    return static_cast<int>(nib);
#else
    return static_cast<int>(nib ^ 8u) - 8;  // two's complement nibble
#endif
#endif
}

__global__ void decode_kernel(const uint8_t* __restrict__ codes, const float* __restrict__ scales,
                              const float* __restrict__ offsets, Layout g, float* __restrict__ out) {
    for (int64_t j = blockIdx.x; j < g.blocks; j += gridDim.x) {
        int64_t start, len, byte;
        block_geometry(g, j, start, len, byte);
        const float s = scales[j];
#if ASYM
        const float lo = offsets[j];
#else
        (void)offsets;
#endif
        for (int64_t i = threadIdx.x; i < len; i += blockDim.x) {
            const int q = code_at(codes, byte, i);
#if ASYM
            out[start + i] = s == 0.0f ? lo : sat(__fadd_rn(sat(__fmul_rn(static_cast<float>(q), s)), lo));
#else
            out[start + i] = sat(__fmul_rn(static_cast<float>(q), s));
#endif
        }
    }
}

unsigned grid_for(int64_t blocks) { return static_cast<unsigned>(blocks < 65535 * 16 ? blocks : 65535 * 16); }

int check_shape(int64_t n, int64_t B, int64_t S, char* err, size_t err_len) {
    if (n < 0 || B < 1 || S < 1 || n % S != 0) {
        set_err(err, err_len, CODEC_NAME ": bad shape (elements %lld, block %lld, shard %lld): need block >= 1, shard >= 1, elements %% shard == 0",
                (long long)n, (long long)B, (long long)S);
        return 1;
    }
    return 0;
}

int cuda_fail(cudaError_t e, const char* what, char* err, size_t err_len) {
    set_err(err, err_len, CODEC_NAME ": %s: %s", what, cudaGetErrorString(e));
    return 4;
}

int example_encode(void*, const qtransit_encode_args* args, char* err, size_t err_len) {
    if (args == nullptr) return set_err(err, err_len, CODEC_NAME ": encode args is NULL"), 1;
    if (args->struct_size < sizeof(qtransit_encode_args))
        return set_err(err, err_len, CODEC_NAME ": encode args struct_size too small"), 1;
    const int64_t n = args->elements;
    if (n == 0) return 0;
    if (check_shape(n, args->block, args->shard, err, err_len)) return 1;
    if (args->x == nullptr || args->codes == nullptr || args->scales == nullptr || (ASYM && args->offsets == nullptr))
        return set_err(err, err_len, CODEC_NAME ": encode: x, codes, scales%s is NULL", ASYM ? " or offsets" : ""), 1;
    const Layout g = make_layout(n, args->block, args->shard);
    cudaStream_t stream = static_cast<cudaStream_t>(args->stream);
    const float* x = static_cast<const float*>(args->x);

    // Scratch: the per-block parameters and the check, stream-ordered.
    void* scratch = nullptr;
    const size_t params_bytes = sizeof(float2) * static_cast<size_t>(g.blocks);
    cudaError_t e = cudaMallocAsync(&scratch, params_bytes + sizeof(Check), stream);
    if (e != cudaSuccess) return cuda_fail(e, "cudaMallocAsync", err, err_len);
    float2* params = static_cast<float2*>(scratch);
    Check* check = reinterpret_cast<Check*>(static_cast<char*>(scratch) + params_bytes);  // float2-aligned
    Check host{kNone, kNone};
    int rc = 0;
    e = cudaMemsetAsync(check, 0xff, sizeof(Check), stream);
    if (e == cudaSuccess) {
        stats_kernel<<<grid_for(g.blocks), kThreads, 0, stream>>>(x, g, params, check);
        e = cudaGetLastError();
    }
    if (e == cudaSuccess) e = cudaMemcpyAsync(&host, check, sizeof host, cudaMemcpyDeviceToHost, stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
    if (e != cudaSuccess) {
        rc = cuda_fail(e, "the check pass", err, err_len);
    } else if (host.nonfinite != kNone && host.nonfinite < host.overflow) {
        // D5/D8: the lowest offending element; a non-finite one here.
        float v = 0;
        cudaMemcpy(&v, x + host.nonfinite, sizeof v, cudaMemcpyDeviceToHost);
        set_err(err, err_len, CODEC_NAME ": non-finite input at element %lld (%g)",
                static_cast<long long>(args->index_base + static_cast<int64_t>(host.nonfinite)), static_cast<double>(v));
        rc = 2;
    } else if (host.overflow != kNone) {
        const int64_t at = static_cast<int64_t>(host.overflow);
        const int64_t j = at / g.S * g.per_shard + (at % g.S) / g.B;
        float2 p{0, 0};
        cudaMemcpy(&p, params + j, sizeof p, cudaMemcpyDeviceToHost);
        set_err(err, err_len, CODEC_NAME ": range overflow in block %lld (element %lld): hi - lo overflows binary32 (lo %g, hi %g)",
                static_cast<long long>(j), static_cast<long long>(args->index_base + at), static_cast<double>(p.y),
                static_cast<double>(p.x));
        rc = 3;
    } else {
        write_kernel<<<grid_for(g.blocks), kThreads, 0, stream>>>(x, g, params, args->codes, args->scales, args->offsets);
        e = cudaGetLastError();
        if (e != cudaSuccess) rc = cuda_fail(e, "write kernel launch", err, err_len);
    }
    const cudaError_t f = cudaFreeAsync(scratch, stream);
    if (rc == 0 && f != cudaSuccess) rc = cuda_fail(f, "cudaFreeAsync", err, err_len);
    return rc;
}

int example_decode(void*, const qtransit_decode_args* args, char* err, size_t err_len) {
    if (args == nullptr) return set_err(err, err_len, CODEC_NAME ": decode args is NULL"), 1;
    if (args->struct_size < sizeof(qtransit_decode_args))
        return set_err(err, err_len, CODEC_NAME ": decode args struct_size too small"), 1;
    const int64_t n = args->elements;
    if (n == 0) return 0;
    if (check_shape(n, args->block, args->shard, err, err_len)) return 1;
    if (args->codes == nullptr || args->scales == nullptr || args->out == nullptr || (ASYM && args->offsets == nullptr))
        return set_err(err, err_len, CODEC_NAME ": decode: codes, scales, out%s is NULL", ASYM ? " or offsets" : ""), 1;
    const Layout g = make_layout(n, args->block, args->shard);
    cudaStream_t stream = static_cast<cudaStream_t>(args->stream);
    decode_kernel<<<grid_for(g.blocks), kThreads, 0, stream>>>(args->codes, args->scales, args->offsets, g,
                                                                static_cast<float*>(args->out));
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return cuda_fail(e, "decode kernel launch", err, err_len);
    return 0;
}

const qtransit_codec_v1_t g_codec = {
    QTRANSIT_CODEC_ABI_VERSION,
    sizeof(qtransit_codec_v1_t),
    CODEC_NAME,
    FORMAT_NAME,
    nullptr,                   // format_toml: a built-in format
    QTRANSIT_DEVICE_CUDA,
    QTRANSIT_PACKING_FORMAT,
    QTRANSIT_BINARY32,
    QTRANSIT_BINARY32,
    QTRANSIT_SCALES_IN_ORDER,
    0,                         // scale_row_blocks
    1, 0, 1,                   // block_min, block_max (no limit), block_multiple
    1,                         // thread_safe: every call has its own scratch; nothing global
    nullptr,                   // state
    example_encode,
    example_decode,
    nullptr,                   // reduce_requantize
};

}  // namespace

extern "C" const qtransit_codec_v1_t* qtransit_codec_v1(char* err, size_t err_len) {
    (void)err;
    (void)err_len;
    return &g_codec;
}
