// GPU benchmark (issue 4): effective bandwidth (bytes read + bytes written) of encode, decode and
// the fused dequantize-reduce-requantize on 1 GiB of binary32 for int8 and int4 (block 32), each
// as a ratio to a device-to-device copy kernel timed in the same run with CUDA events (median of
// many). Every timed output is then checked bit for bit against the CPU backend, so a fast wrong
// kernel cannot pass. Goals: 0.85 of copy for encode and decode, 0.80 for the fused kernel.
//
//   gpu_bench [--mib M] [--repeats R] [--out FILE]   the benchmark (table last; FILE: full rows)
//   gpu_bench --small                                one small run of every kernel, checked
//                                                    against the CPU (for compute-sanitizer)
// Needs only the kernels library: no Boost, GTest or RapidCheck. Without a GPU it says so and
// exits 0.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "qtransit/kernels/codec.hpp"
#include "qtransit/kernels/fused.hpp"
#include "qtransit/kernels/gpu.hpp"
#include "qtransit/kernels/inputs.hpp"

namespace qt = qtransit;
namespace qk = qtransit::kernels;
namespace gpu = qtransit::kernels::gpu;

namespace {

#define CK(call)                                                                                       \
    do {                                                                                               \
        cudaError_t e_ = (call);                                                                       \
        if (e_ != cudaSuccess) {                                                                       \
            std::fprintf(stderr, "%s failed: %s at %s:%d\n", #call, cudaGetErrorString(e_), __FILE__, __LINE__); \
            std::exit(1);                                                                              \
        }                                                                                              \
    } while (0)
#define OK(expr)                                                                                       \
    do {                                                                                               \
        auto st_ = (expr);                                                                             \
        if (!st_.ok()) {                                                                               \
            std::fprintf(stderr, "%s: %s\n", #expr, st_.error().message.c_str());                     \
            std::exit(1);                                                                              \
        }                                                                                              \
    } while (0)

// The copy baseline: 16-byte loads and stores, grid-stride.
__global__ void copy_kernel(const float4* __restrict__ in, float4* __restrict__ out, int64_t n4) {
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n4;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x)
        out[i] = in[i];
}

template <class T>
T* dalloc(size_t count) {
    T* p = nullptr;
    CK(cudaMalloc(&p, std::max<size_t>(count, 1) * sizeof(T)));
    return p;
}

void generate(std::vector<float>& x, uint64_t seed) {
    const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
    std::vector<std::thread> pool;
    const size_t per = (x.size() + threads - 1) / threads;
    for (unsigned t = 0; t < threads; ++t) {
        const size_t a = std::min(x.size(), t * per), b = std::min(x.size(), a + per);
        if (a >= b) break;
        pool.emplace_back([&x, a, b, seed] {
            qk::generate_span(qk::Distribution::kNormal, seed, 0, a, std::span<float>(x.data() + a, b - a));
        });
    }
    for (auto& th : pool) th.join();
}

// Median time in ms of `repeats` runs of fn, each between two events, after two warm-up runs.
template <class Fn>
double median_ms(int repeats, Fn&& fn) {
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    fn();
    fn();
    CK(cudaDeviceSynchronize());
    std::vector<float> ms;
    for (int r = 0; r < repeats; ++r) {
        CK(cudaEventRecord(a));
        fn();
        CK(cudaEventRecord(b));
        CK(cudaEventSynchronize(b));
        float t = 0;
        CK(cudaEventElapsedTime(&t, a, b));
        ms.push_back(t);
    }
    CK(cudaEventDestroy(a));
    CK(cudaEventDestroy(b));
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
}

struct DevTensor {
    uint8_t* codes = nullptr;
    float* scales = nullptr;
    float* offsets = nullptr;
    qk::EncodedSizes sz;
    DevTensor(const qt::FormatSpec& f, int64_t n, int64_t block) : sz(qk::encoded_sizes(f, n, block)) {
        codes = dalloc<uint8_t>(static_cast<size_t>(sz.code_bytes));
        scales = dalloc<float>(static_cast<size_t>(sz.blocks));
        offsets = dalloc<float>(static_cast<size_t>(sz.offsets));
        CK(cudaMemset(codes, 0xff, static_cast<size_t>(std::max<int64_t>(sz.code_bytes, 1))));  // poison
        CK(cudaMemset(scales, 0xff, static_cast<size_t>(std::max<int64_t>(sz.blocks, 1)) * 4));
    }
    ~DevTensor() {
        cudaFree(codes);
        cudaFree(scales);
        cudaFree(offsets);
    }
    int64_t bytes() const { return sz.code_bytes + 4 * sz.blocks + 4 * sz.offsets; }
    gpu::DeviceEncoded view() const { return {codes, scales, offsets}; }
    gpu::DeviceEncodedOut out() { return {codes, scales, offsets}; }
    qk::EncodedTensor host(const qt::FormatSpec& f, int64_t n, int64_t block) const {
        auto t = qk::sized_encoded(f, n, block);
        CK(cudaMemcpy(t.codes.data(), codes, t.codes.size(), cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(t.scales.data(), scales, t.scales.size() * 4, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(t.offsets.data(), offsets, t.offsets.size() * 4, cudaMemcpyDeviceToHost));
        return t;
    }
};

bool same(const qk::EncodedTensor& a, const qk::EncodedTensor& b) {
    return a.codes == b.codes && std::memcmp(a.scales.data(), b.scales.data(), a.scales.size() * 4) == 0 &&
           std::memcmp(a.offsets.data(), b.offsets.data(), a.offsets.size() * 4) == 0;
}
bool same(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}

std::vector<float> from_device(const float* d, int64_t n) {
    std::vector<float> v(static_cast<size_t>(n));
    CK(cudaMemcpy(v.data(), d, v.size() * 4, cudaMemcpyDeviceToHost));
    return v;
}

// One small run of every kernel, each checked against the CPU. Returns the number of mismatches.
int small_runs() {
    int bad = 0;
    auto report = [&](const char* what, bool ok) {
        std::printf("  %-44s %s\n", what, ok ? "= cpu" : "DIFFERS");
        bad += ok ? 0 : 1;
    };
    for (const char* name : {"int8", "int4", "int3", "int6-asym", "ds-int4"}) {
        const auto f = *qt::parse_format(name);
        std::printf("%s\n", name);
        for (int64_t block : {int64_t{32}, int64_t{100}, int64_t{1} << 14}) {  // 2^14: one CTA per block
            const int64_t n = 3 * block + 17;
            std::vector<float> x(static_cast<size_t>(n));
            generate(x, 11 + static_cast<uint64_t>(block));
            float* dx = dalloc<float>(x.size());
            CK(cudaMemcpy(dx, x.data(), x.size() * 4, cudaMemcpyHostToDevice));
            DevTensor dt(f, n, block);
            OK(gpu::encode_device(f, dx, n, block, dt.codes, dt.scales, dt.offsets, {}));
            const auto cpu = *qk::encode(f, x, block);
            report(("encode block " + std::to_string(block)).c_str(), same(cpu, dt.host(f, n, block)));
            float* dout = dalloc<float>(x.size());
            OK(gpu::decode_device(f, block, dt.codes, dt.scales, dt.offsets, dout, n));
            report(("decode block " + std::to_string(block)).c_str(), same(qk::decode(cpu), from_device(dout, n)));
            OK(gpu::decode_add_device(f, block, dt.view(), dx, dout, n, qt::Accum::kFp32));
            std::vector<float> want(x.size());
            OK(qk::decode_add(cpu, x, qt::Accum::kFp32, want));
            report(("decode-add block " + std::to_string(block)).c_str(), same(want, from_device(dout, n)));
            // Fused over 3 inputs (the same tensor thrice is enough for memcheck; the gpu tests vary it).
            std::vector<gpu::DeviceEncoded> ins{dt.view(), dt.view(), dt.view()};
            DevTensor fused(f, n, block);
            qk::CodecOptions prop;
            prop.policy = qt::Nonfinite::kPropagate;
            OK(gpu::reduce_requantize_device(f, block, ins, n, qt::Accum::kFp16, fused.out(), prop));
            std::vector<qk::EncodedTensor> hin{cpu, cpu, cpu};
            report(("fused reduce-requantize fp16 block " + std::to_string(block)).c_str(),
                   same(*qk::reduce_requantize(hin, qt::Accum::kFp16, prop), fused.host(f, n, block)));
            CK(cudaFree(dout));
            CK(cudaFree(dx));
        }
        // Swizzled stage 1: N = 8, G = 4, S = 100.
        const int64_t N = 8, G = 4, S = 100, B = 32, M = N * S;
        std::vector<float> x(static_cast<size_t>(M));
        generate(x, 5);
        const auto lay = *qk::swizzle_layout(f, M, N, G, B);
        std::vector<uint8_t> c(static_cast<size_t>(lay.total_code_bytes()));
        std::vector<float> s(static_cast<size_t>(lay.total_blocks())), o(static_cast<size_t>(lay.total_offsets()));
        OK(qk::encode_swizzled_into(f, lay, x, B, c, s, o));
        float* dx = dalloc<float>(x.size());
        CK(cudaMemcpy(dx, x.data(), x.size() * 4, cudaMemcpyHostToDevice));
        uint8_t* dc = dalloc<uint8_t>(c.size());
        float* ds = dalloc<float>(s.size());
        float* dof = dalloc<float>(o.size());
        OK(gpu::encode_swizzled_device(f, lay, dx, B, {dc, ds, dof}, {}));
        std::vector<uint8_t> c2(c.size());
        std::vector<float> s2(s.size());
        CK(cudaMemcpy(c2.data(), dc, c2.size(), cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(s2.data(), ds, s2.size() * 4, cudaMemcpyDeviceToHost));
        report("swizzled stage-1 encode", c == c2 && std::memcmp(s.data(), s2.data(), s.size() * 4) == 0);
        CK(cudaFree(dx));
        CK(cudaFree(dc));
        CK(cudaFree(ds));
        CK(cudaFree(dof));
    }
    return bad;
}

struct Row {
    std::string kernel, format;
    double mib = 0, ms = 0, gbs = 0, ratio = 0, goal = 0;
    bool equal = true;
};

}  // namespace

int main(int argc, char** argv) {
    int64_t mib = 1024;
    int repeats = 30;
    bool small = false, info = false;
    std::string out_file;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--small") small = true;
        else if (a == "--info") info = true;
        else if (a == "--mib" && i + 1 < argc) mib = std::stoll(argv[++i]);
        else if (a == "--repeats" && i + 1 < argc) repeats = std::stoi(argv[++i]);
        else if (a == "--out" && i + 1 < argc) out_file = argv[++i];
        else {
            std::fprintf(stderr, "usage: gpu_bench [--info] [--small] [--mib M] [--repeats R] [--out FILE]\n");
            return 2;
        }
    }
    const auto q = gpu::query_devices();
    if (q.devices.empty()) {
        std::printf("no GPU: %s\n", q.note.c_str());
        return 0;
    }
    std::printf("device %s (sm_%d%d, %.0f GiB)\n", q.devices[0].name.c_str(), q.devices[0].cc_major,
                q.devices[0].cc_minor, static_cast<double>(q.devices[0].memory_bytes) / (1 << 30));
    if (info) return 0;
    if (small) {
        const int bad = small_runs();
        std::printf("small runs: %d mismatch(es)\n", bad);
        return bad ? 1 : 0;
    }

    const int64_t n = mib * (int64_t{1} << 20) / 4, block = 32, G = 8;
    std::vector<float> x(static_cast<size_t>(n));
    generate(x, 20261201);
    float* dx = dalloc<float>(x.size());
    float* dy = dalloc<float>(x.size());
    CK(cudaMemcpy(dx, x.data(), x.size() * 4, cudaMemcpyHostToDevice));
    std::vector<Row> rows;

    const int64_t n4 = n / 4;
    const double copy_ms = median_ms(repeats, [&] {
        copy_kernel<<<static_cast<int>(std::min<int64_t>((n4 + 255) / 256, 132 * 64)), 256>>>(
            reinterpret_cast<const float4*>(dx), reinterpret_cast<float4*>(dy), n4);
    });
    CK(cudaGetLastError());
    const double copy_bytes = 2.0 * static_cast<double>(n) * 4;
    const double copy_gbs = copy_bytes / copy_ms / 1e6;
    rows.push_back({"copy", "binary32", copy_bytes / (1 << 20), copy_ms, copy_gbs, 1.0, 0, true});
    auto add = [&](const char* k, const std::string& f, double bytes, double ms, double goal, bool eq) {
        const double gbs = bytes / ms / 1e6;
        rows.push_back({k, f, bytes / (1 << 20), ms, gbs, gbs / copy_gbs, goal, eq});
    };

    for (const char* name : {"int8", "int4"}) {
        const auto f = *qt::parse_format(name);
        DevTensor dt(f, n, block);
        const double enc_ms = median_ms(repeats, [&] {
            (void)gpu::encode_device(f, dx, n, block, dt.codes, dt.scales, dt.offsets, {});
        });
        const auto cpu = *qk::encode(f, x, block);
        add("encode", name, static_cast<double>(n) * 4 + static_cast<double>(dt.bytes()), enc_ms, 0.85,
            same(cpu, dt.host(f, n, block)));
        CK(cudaMemset(dy, 0xff, x.size() * 4));
        const double dec_ms = median_ms(repeats, [&] {
            (void)gpu::decode_device(f, block, dt.codes, dt.scales, dt.offsets, dy, n);
        });
        add("decode", name, static_cast<double>(dt.bytes()) + static_cast<double>(n) * 4, dec_ms, 0.85,
            same(qk::decode(cpu), from_device(dy, n)));
        // Fused: G = 8 encoded inputs of n / G elements each (1 GiB of binary32 across them), one
        // requantized output of n / G elements.
        const int64_t m = n / G;
        std::vector<std::unique_ptr<DevTensor>> ins;
        std::vector<gpu::DeviceEncoded> views;
        std::vector<qk::EncodedTensor> hin;
        double in_bytes = 0;
        for (int64_t g = 0; g < G; ++g) {
            ins.push_back(std::make_unique<DevTensor>(f, m, block));
            OK(gpu::encode_device(f, dx + g * m, m, block, ins.back()->codes, ins.back()->scales, ins.back()->offsets, {}));
            views.push_back(ins.back()->view());
            hin.push_back(ins.back()->host(f, m, block));
            in_bytes += static_cast<double>(ins.back()->bytes());
        }
        DevTensor fused(f, m, block);
        const double fused_ms = median_ms(repeats, [&] {
            (void)gpu::reduce_requantize_device(f, block, views, m, qt::Accum::kFp32, fused.out(), {});
        });
        const auto want = qk::reduce_requantize(hin, qt::Accum::kFp32);
        add("fused", name, in_bytes + static_cast<double>(fused.bytes()), fused_ms, 0.80,
            want.ok() && same(*want, fused.host(f, m, block)));
    }
    CK(cudaGetLastError());

    std::string table = "kernel   format        MiB moved    median ms      GB/s   x copy   goal   =cpu\n";
    char line[256];
    for (const auto& r : rows) {
        std::snprintf(line, sizeof line, "%-8s %-10s %12.1f %12.4f %9.1f %8.3f %6s %6s\n", r.kernel.c_str(),
                      r.format.c_str(), r.mib, r.ms, r.gbs, r.ratio,
                      r.goal > 0 ? (r.ratio >= r.goal ? "met" : "MISSED") : "-", r.equal ? "yes" : "NO");
        table += line;
    }
    if (!out_file.empty()) {
        std::ofstream o(out_file);
        o << "device " << q.devices[0].name << ", " << mib << " MiB binary32, block " << block << ", fused G = " << G
          << ", median of " << repeats << "\n" << table;
    }
    std::printf("%s", table.c_str());
    bool all_equal = true;
    for (const auto& r : rows) all_equal = all_equal && r.equal;
    return all_equal ? 0 : 1;
}
