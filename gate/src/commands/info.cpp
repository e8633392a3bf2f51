// `qtransit info`: version, build features (CPU variant, CUDA archs, NCCL), GPUs visible now.
#include <thread>

#include "printf.hpp"
#include "qtransit/common/cpu.hpp"
#include "qtransit/common/format.hpp"
#include "qtransit/gate/commands.hpp"
#include "qtransit/kernels/codec.hpp"
#include "qtransit/kernels/gpu.hpp"
#include "qtransit/reports/build_info.hpp"
#include "qtransit/version.hpp"

namespace qtransit::gate {
namespace {

// Which of the CPU backend's compiled variants the loader picks on this machine (codec.cpp builds
// its hot loops for x86-64-v4, x86-64-v3 and baseline x86-64 and chooses at load time).
std::string cpu_variant() {
#if defined(__x86_64__) && !defined(__clang__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("x86-64-v4")) return "x86-64-v4 (AVX-512)";
    if (__builtin_cpu_supports("x86-64-v3")) return "x86-64-v3 (AVX2)";
    return "x86-64 baseline (SSE2)";
#elif defined(__x86_64__)
    // clang (the fuzz build) has no x86-64-vN names for __builtin_cpu_supports: the levels' features.
    __builtin_cpu_init();
    if (cpu_avx512() && __builtin_cpu_supports("avx512cd")) return "x86-64-v4 (AVX-512)";
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("bmi2")) return "x86-64-v3 (AVX2)";
    return "x86-64 baseline (SSE2)";
#else
    return "generic";
#endif
}

}  // namespace

Printed info(const InfoRequest& r) {
    const auto b = kernels::gpu::build_info();
    const auto q = kernels::gpu::query_devices();
    reports::BuildReport m;
    m.version = QTRANSIT_VERSION;
    m.cpu_variant = cpu_variant();
    m.hardware_threads = std::thread::hardware_concurrency();
    m.allocator = r.allocator;
    m.cuda = b.cuda;
    m.cuda_archs = b.cuda_archs;
    m.cuda_toolkit_version = b.cuda_toolkit_version;
    m.kernels = b.kernels;
    m.nccl = b.nccl;
    m.nccl_version = b.nccl_version;
    for (const auto& d : q.devices) m.gpus.push_back({d.index, d.name, d.cc_major, d.cc_minor, d.memory_bytes});
    m.driver_version = q.driver_version;
    m.gpu_note = q.note;
    m.formats = known_format_list();
    m.format_names = known_format_names();
    return Printed{r.json ? reports::to_json(m).dump(2) + "\n" : reports::to_text(m), {}, true};
}

}  // namespace qtransit::gate
