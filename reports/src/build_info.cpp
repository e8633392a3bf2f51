// `qtransit info`'s text and JSON (build_info.hpp).
#include "qtransit/reports/build_info.hpp"

#include "qtransit/common/appendf.hpp"

namespace qtransit::reports {

nlohmann::json to_json(const BuildReport& b) {
    nlohmann::json j;
    j["version"] = b.version;
    j["cpu"] = {{"variant", b.cpu_variant}, {"hardware_threads", b.hardware_threads}};
    j["allocator"] = b.allocator;
    j["cuda"] = {{"compiled", b.cuda}, {"archs", b.cuda_archs}, {"toolkit_version", b.cuda_toolkit_version}, {"kernels", b.kernels}};
    j["nccl"] = {{"linked", b.nccl}, {"version", b.nccl_version}};
    nlohmann::json devs = nlohmann::json::array();
    for (const auto& d : b.gpus)
        devs.push_back({{"index", d.index}, {"name", d.name}, {"compute_capability", std::to_string(d.cc_major) + "." + std::to_string(d.cc_minor)},
                        {"memory_bytes", d.memory_bytes}});
    j["gpus"] = devs;
    j["driver_version"] = b.driver_version;
    if (!b.gpu_note.empty()) j["gpu_note"] = b.gpu_note;
    j["formats"] = b.formats;  // an array, not the comma-joined text of a message
    return j;
}

std::string to_text(const BuildReport& b) {
    std::string o;
    appendf(o, "qtransit %s\n", b.version.c_str());
    appendf(o, "CPU backend   %s, %u hardware threads\n", b.cpu_variant.c_str(), b.hardware_threads);
    appendf(o, "allocator     %s\n", b.allocator.c_str());
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
    if (b.gpus.empty()) {
        appendf(o, "GPUs          none visible (%s)\n", b.gpu_note.c_str());
    } else {
        for (const auto& d : b.gpus)
            appendf(o, "GPU %d         %s, sm_%d%d, %.1f GiB\n", d.index, d.name.c_str(), d.cc_major, d.cc_minor,
                    static_cast<double>(d.memory_bytes) / (1 << 30));
    }
    appendf(o, "formats       %s\n", b.format_names.c_str());
    return o;
}

}  // namespace qtransit::reports
