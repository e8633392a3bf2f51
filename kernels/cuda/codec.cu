// CUDA backend of the quantizer: the same block arithmetic as the CPU backend (block_math.hpp),
// one thread per quantization block for encode (any block size, no size limit: grid-stride loops
// cover any number of blocks) and one thread per element for decode. Issue #4 tunes these for
// bandwidth; this file keeps them correct for every size first.
#include <cuda_runtime.h>

#include <algorithm>
#include <vector>

#include "check.hpp"
#include "qtransit/kernels/block_math.hpp"
#include "qtransit/kernels/gpu.hpp"

namespace qtransit::kernels::gpu {
namespace {

__device__ void pack_one(Kind kind, int bits, uint8_t* out, int64_t i, int32_t q) {
    // Each thread owns its block's bytes, so plain read-modify-writes are race-free.
    if (bits == 8) {
        out[i] = static_cast<uint8_t>(q);
    } else if (bits == 4) {
        const bool high = (kind == Kind::kDs) ? !(i & 1) : (i & 1);
        const uint8_t nib = static_cast<uint8_t>(q & 0xF);
        out[i >> 1] = static_cast<uint8_t>(high ? (out[i >> 1] | (nib << 4)) : (out[i >> 1] | nib));
    } else {
        const int64_t bit = i * bits;
        const uint32_t v = (static_cast<uint32_t>(q) & ((1u << bits) - 1u)) << (bit & 7);
        out[bit >> 3] = static_cast<uint8_t>(out[bit >> 3] | (v & 0xFFu));
        if ((bit & 7) + bits > 8) out[(bit >> 3) + 1] = static_cast<uint8_t>(out[(bit >> 3) + 1] | (v >> 8));
    }
}

__global__ void encode_kernel(Kind kind, int bits, const float* __restrict__ x, int64_t n, int64_t block,
                              int64_t block_bytes, uint8_t* __restrict__ codes, float* __restrict__ scales,
                              float* __restrict__ offsets, bool error_policy, unsigned long long* first_bad) {
    const int64_t blocks = (n + block - 1) / block;
    for (int64_t j = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; j < blocks;
         j += int64_t{gridDim.x} * blockDim.x) {
        const int64_t first = j * block, len = min(block, n - first);
        const float* xb = x + first;
        uint8_t* out = codes + j * block_bytes;
        const int64_t nbytes = (len * bits + 7) / 8;
        for (int64_t b = 0; b < nbytes; ++b) out[b] = 0;
        uint32_t amax = 0, kmin = 0xffffffffu, kmax = 0;
        for (int64_t i = 0; i < len; ++i) {
            const uint32_t u = f32_bits(xb[i]);
            amax = max(amax, u & 0x7fffffffu);
            const uint32_t k = order_key(xb[i]);
            kmin = min(kmin, k);
            kmax = max(kmax, k);
        }
        bool poisoned = amax >= kInfBits;
        float scale = 0.0f, lo = 0.0f, a16 = 0.0f;
        if (!poisoned) {
            if (kind == Kind::kSym) {
                scale = sym_scale(bits_f32(amax), bits);
            } else if (kind == Kind::kAsym) {
                lo = from_order_key(kmin);
                scale = asym_scale(lo, from_order_key(kmax), bits);
                poisoned = f32_bits(scale) == kInfBits;
            } else {
                a16 = ds_absmax(bits_f32(amax));
                poisoned = f32_bits(a16) == kInfBits;
                scale = poisoned ? 0.0f : ds_step(a16, bits);
            }
        }
        if (poisoned) {
            if (error_policy) atomicMin(first_bad, static_cast<unsigned long long>(j));
            scales[j] = bits_f32(kQuietNanBits);
            if (kind == Kind::kAsym) offsets[j] = bits_f32(kQuietNanBits);
            continue;
        }
        scales[j] = scale;
        if (kind == Kind::kAsym) offsets[j] = lo;
        if (kind == Kind::kDs ? a16 == 0.0f : scale == 0.0f) continue;  // codes stay 0
        const int32_t qmax = sym_qmax(bits), levels = asym_levels(bits);
        const float dsc = kind == Kind::kDs ? ds_scale(a16, bits) : 0.0f;
        const int32_t cmin = -(1 << (bits - 1)), cmax = (1 << (bits - 1)) - 1;
        for (int64_t i = 0; i < len; ++i) {
            int32_t q;
            if (kind == Kind::kSym) q = sym_code(xb[i], scale, qmax);
            else if (kind == Kind::kAsym) q = asym_code(xb[i], lo, scale, levels);
            else q = ds_code(xb[i], dsc, cmin, cmax);
            pack_one(kind, bits, out, i, q);
        }
    }
}

__global__ void decode_kernel(Kind kind, int bits, int64_t block, int64_t block_bytes, const uint8_t* __restrict__ codes,
                              const float* __restrict__ scales, const float* __restrict__ offsets,
                              float* __restrict__ out, int64_t n) {
    for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
        const int64_t j = i / block;
        const int32_t q = unpack_one(kind, bits, codes + j * block_bytes, i - j * block);
        out[i] = decode_one(kind, q, scales[j], kind == Kind::kAsym ? offsets[j] : 0.0f);
    }
}

int grid_for(int64_t work, int threads) {
    // Grid-stride loops: enough blocks to fill an H200 many times over, never a silent no-launch.
    return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>((work + threads - 1) / threads, 65535 * 8)));
}

}  // namespace

Status encode_device(const FormatSpec& format, const float* d_x, int64_t n, int64_t block, uint8_t* d_codes,
                     float* d_scales, float* d_offsets, const CodecOptions& options, void* stream_ptr) {
    if (auto st = validate_block(block); !st) return st;
    if (n == 0) return Status::Ok();
    auto stream = static_cast<cudaStream_t>(stream_ptr);
    const bool error_policy = options.policy == Nonfinite::kError;
    unsigned long long* d_bad = nullptr;
    QT_CUDA_CHECK(cudaMallocAsync(&d_bad, sizeof(unsigned long long), stream));
    QT_CUDA_CHECK(cudaMemsetAsync(d_bad, 0xff, sizeof(unsigned long long), stream));
    const int64_t blocks = (n + block - 1) / block;
    constexpr int kThreads = 128;
    encode_kernel<<<grid_for(blocks, kThreads), kThreads, 0, stream>>>(
        kind_of(format), format.bits, d_x, n, block, format.code_bytes(block), d_codes, d_scales, d_offsets,
        error_policy, d_bad);
    QT_CUDA_LAUNCH_CHECK("qtransit::encode_kernel");
    unsigned long long bad = 0;
    QT_CUDA_CHECK(cudaMemcpyAsync(&bad, d_bad, sizeof bad, cudaMemcpyDeviceToHost, stream));
    QT_CUDA_CHECK(cudaFreeAsync(d_bad, stream));
    QT_CUDA_CHECK(cudaStreamSynchronize(stream));
    if (error_policy && bad != ~0ull) {
        const int64_t first = static_cast<int64_t>(bad) * block, len = std::min(block, n - first);
        std::vector<float> values(static_cast<size_t>(len));
        QT_CUDA_CHECK(cudaMemcpy(values.data(), d_x + first, sizeof(float) * values.size(), cudaMemcpyDeviceToHost));
        return describe_block_error(format, values.data(), len, first, options.site);
    }
    return Status::Ok();
}

Status decode_device(const FormatSpec& format, int64_t block, const uint8_t* d_codes, const float* d_scales,
                     const float* d_offsets, float* d_out, int64_t n, void* stream_ptr) {
    if (auto st = validate_block(block); !st) return st;
    if (n == 0) return Status::Ok();
    constexpr int kThreads = 256;
    decode_kernel<<<grid_for(n, kThreads), kThreads, 0, static_cast<cudaStream_t>(stream_ptr)>>>(
        kind_of(format), format.bits, block, format.code_bytes(block), d_codes, d_scales, d_offsets, d_out, n);
    QT_CUDA_LAUNCH_CHECK("qtransit::decode_kernel");
    return Status::Ok();
}

namespace {
// Device buffers freed on every path out.
template <class T>
struct DeviceBuffer {
    T* ptr = nullptr;
    ~DeviceBuffer() { if (ptr) cudaFree(ptr); }
    Status alloc(size_t count) {
        QT_CUDA_CHECK(cudaMalloc(&ptr, std::max<size_t>(count, 1) * sizeof(T)));
        return Status::Ok();
    }
};
}  // namespace

Result<EncodedTensor> encode(const FormatSpec& format, std::span<const float> x, int64_t block,
                             const CodecOptions& options) {
    if (auto st = validate_block(block); !st) return st.error();
    EncodedTensor t = sized_encoded(format, static_cast<int64_t>(x.size()), block);
    DeviceBuffer<float> dx, ds, doff;
    DeviceBuffer<uint8_t> dc;
    if (auto st = dx.alloc(x.size()); !st) return st.error();
    if (auto st = dc.alloc(t.codes.size()); !st) return st.error();
    if (auto st = ds.alloc(t.scales.size()); !st) return st.error();
    if (auto st = doff.alloc(t.offsets.size()); !st) return st.error();
    QT_CUDA_CHECK(cudaMemcpy(dx.ptr, x.data(), x.size_bytes(), cudaMemcpyHostToDevice));
    if (auto st = encode_device(format, dx.ptr, t.elements, block, dc.ptr, ds.ptr, doff.ptr, options); !st)
        return st.error();
    QT_CUDA_CHECK(cudaMemcpy(t.codes.data(), dc.ptr, t.codes.size(), cudaMemcpyDeviceToHost));
    QT_CUDA_CHECK(cudaMemcpy(t.scales.data(), ds.ptr, t.scales.size() * sizeof(float), cudaMemcpyDeviceToHost));
    QT_CUDA_CHECK(cudaMemcpy(t.offsets.data(), doff.ptr, t.offsets.size() * sizeof(float), cudaMemcpyDeviceToHost));
    return t;
}

Result<std::vector<float>> decode(const EncodedTensor& t) {
    std::vector<float> out(static_cast<size_t>(t.elements));
    DeviceBuffer<float> ds, doff, dout;
    DeviceBuffer<uint8_t> dc;
    if (auto st = dc.alloc(t.codes.size()); !st) return st.error();
    if (auto st = ds.alloc(t.scales.size()); !st) return st.error();
    if (auto st = doff.alloc(t.offsets.size()); !st) return st.error();
    if (auto st = dout.alloc(out.size()); !st) return st.error();
    QT_CUDA_CHECK(cudaMemcpy(dc.ptr, t.codes.data(), t.codes.size(), cudaMemcpyHostToDevice));
    QT_CUDA_CHECK(cudaMemcpy(ds.ptr, t.scales.data(), t.scales.size() * sizeof(float), cudaMemcpyHostToDevice));
    QT_CUDA_CHECK(cudaMemcpy(doff.ptr, t.offsets.data(), t.offsets.size() * sizeof(float), cudaMemcpyHostToDevice));
    if (auto st = decode_device(t.format, t.block, dc.ptr, ds.ptr, doff.ptr, dout.ptr, t.elements); !st)
        return st.error();
    QT_CUDA_CHECK(cudaMemcpy(out.data(), dout.ptr, out.size() * sizeof(float), cudaMemcpyDeviceToHost));
    return out;
}

}  // namespace qtransit::kernels::gpu
