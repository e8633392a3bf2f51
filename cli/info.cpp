// `qtransit info` (`qtransit formats` is formats.cpp).
#include <cstdio>
#include <nlohmann/json.hpp>
#include <thread>

#include "qtransit/version.hpp"
#include "commands.hpp"
#include "qtransit/common/format.hpp"
#include "qtransit/kernels/codec.hpp"
#include "qtransit/kernels/gpu.hpp"

#if QTRANSIT_HAVE_MIMALLOC
#include <mimalloc.h>
#endif

namespace qtransit::cli {
namespace {

// Which of the CPU backend's compiled variants the loader picks on this machine (codec.cpp builds
// its hot loops for x86-64-v4, x86-64-v3 and baseline x86-64 and chooses at load time).
std::string cpu_variant() {
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("x86-64-v4")) return "x86-64-v4 (AVX-512)";
    if (__builtin_cpu_supports("x86-64-v3")) return "x86-64-v3 (AVX2)";
    return "x86-64 baseline (SSE2)";
#else
    return "generic";
#endif
}

// The allocator the command runs on (CMakeLists.txt: mimalloc when the build found it).
std::string allocator() {
#if QTRANSIT_HAVE_MIMALLOC
    const int v = mi_version();
    return "mimalloc " + std::to_string(v / 100) + "." + std::to_string(v / 10 % 10) + "." + std::to_string(v % 10);
#else
    return "the C library's malloc";
#endif
}

}  // namespace

int run_info(bool json) {
    const auto b = kernels::gpu::build_info();
    const auto q = kernels::gpu::query_devices();
    if (json) {
        nlohmann::json j;
        j["version"] = QTRANSIT_VERSION;
        j["cpu"] = {{"variant", cpu_variant()}, {"hardware_threads", std::thread::hardware_concurrency()}};
        j["allocator"] = allocator();
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
        std::printf("%s\n", j.dump(2).c_str());
        return kExitOk;
    }
    std::printf("qtransit %s\n", QTRANSIT_VERSION);
    std::printf("CPU backend   %s, %u hardware threads\n", cpu_variant().c_str(), std::thread::hardware_concurrency());
    std::printf("allocator     %s\n", allocator().c_str());
    if (b.cuda) {
        std::printf("CUDA backend  compiled for sm_%s (toolkit %d.%d), no FMA contraction, IEEE div/sqrt (but ds-encode-fast-math: --use_fast_math, D23)\n",
                    b.cuda_archs.c_str(), b.cuda_toolkit_version / 1000, (b.cuda_toolkit_version % 1000) / 10);
        std::string ks;
        for (const auto& k : b.kernels) ks += (ks.empty() ? "" : ", ") + k;
        std::printf("CUDA kernels  %s\n", ks.c_str());
    } else {
        std::printf("CUDA backend  not compiled\n");
    }
    std::printf("NCCL          %s\n", b.nccl ? ("linked, library version " + b.nccl_version).c_str() : "not linked");
    if (q.devices.empty()) {
        std::printf("GPUs          none visible (%s)\n", q.note.c_str());
    } else {
        for (const auto& d : q.devices)
            std::printf("GPU %d         %s, sm_%d%d, %.1f GiB\n", d.index, d.name.c_str(), d.cc_major, d.cc_minor,
                        static_cast<double>(d.memory_bytes) / (1 << 30));
    }
    std::printf("formats       %s\n", known_format_names().c_str());
    return kExitOk;
}

}  // namespace qtransit::cli
