// `qtransit info`: version, build features (CPU variant, CUDA archs, NCCL), GPUs visible now.
#include <thread>

#include "printf.hpp"
#include "qtransit/common/cpu.hpp"
#include "qtransit/common/format.hpp"
#include "qtransit/gate/commands.hpp"
#include "qtransit/kernels/codec.hpp"
#include "qtransit/kernels/gpu.hpp"
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
    const bool json = r.json;
    Printed p;
    std::string& o = p.out;
    const auto b = kernels::gpu::build_info();
    const auto q = kernels::gpu::query_devices();
    if (json) {
        nlohmann::json j;
        j["version"] = QTRANSIT_VERSION;
        j["cpu"] = {{"variant", cpu_variant()}, {"hardware_threads", std::thread::hardware_concurrency()}};
        j["allocator"] = r.allocator;
        j["cuda"] = {{"compiled", b.cuda}, {"archs", b.cuda_archs}, {"toolkit_version", b.cuda_toolkit_version},
                     {"kernels", b.kernels}};
        j["nccl"] = {{"linked", b.nccl}, {"version", b.nccl_version}};
        nlohmann::json devs = nlohmann::json::array();
        for (const auto& d : q.devices)
            devs.push_back({{"index", d.index}, {"name", d.name}, {"compute_capability", std::to_string(d.cc_major) + "." + std::to_string(d.cc_minor)}, {"memory_bytes", d.memory_bytes}});
        j["gpus"] = devs;
        j["driver_version"] = q.driver_version;
        if (!q.note.empty()) j["gpu_note"] = q.note;
        j["formats"] = known_format_list();  // an array, not the comma-joined text of a message
        o = j.dump(2) + "\n";
        return p;
    }
    appendf(o, "qtransit %s\n", QTRANSIT_VERSION);
    appendf(o, "CPU backend   %s, %u hardware threads\n", cpu_variant().c_str(), std::thread::hardware_concurrency());
    appendf(o, "allocator     %s\n", r.allocator.c_str());
    if (b.cuda) {
        appendf(o, "CUDA backend  compiled for sm_%s (toolkit %d.%d), no FMA contraction, IEEE div/sqrt (but ds-encode-fast-math: --use_fast_math, D23)\n",
                    b.cuda_archs.c_str(), b.cuda_toolkit_version / 1000, (b.cuda_toolkit_version % 1000) / 10);
        std::string ks;
        for (const auto& k : b.kernels) ks += (ks.empty() ? "" : ", ") + k;
        appendf(o, "CUDA kernels  %s\n", ks.c_str());
    } else {
        appendf(o, "CUDA backend  not compiled\n");
    }
    appendf(o, "NCCL          %s\n", b.nccl ? ("linked, library version " + b.nccl_version).c_str() : "not linked");
    if (q.devices.empty()) {
        appendf(o, "GPUs          none visible (%s)\n", q.note.c_str());
    } else {
        for (const auto& d : q.devices)
            appendf(o, "GPU %d         %s, sm_%d%d, %.1f GiB\n", d.index, d.name.c_str(), d.cc_major, d.cc_minor,
                        static_cast<double>(d.memory_bytes) / (1 << 30));
    }
    appendf(o, "formats       %s\n", known_format_names().c_str());
    return p;
}

}  // namespace qtransit::gate
