// `qtransit info`: the version, the build's features (the CPU variant the loader picked, CUDA archs
// and kernels, NCCL) and the GPUs visible now, as text or one JSON object (Python's info() too).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace qtransit::reports {

struct BuildReport {
    std::string version, cpu_variant, allocator;
    unsigned hardware_threads = 0;
    bool cuda = false;                 // the CUDA backend was compiled
    std::string cuda_archs;            // e.g. "90"
    int cuda_toolkit_version = 0;      // e.g. 13000
    std::vector<std::string> kernels;  // the CUDA kernels compiled in
    bool nccl = false;
    std::string nccl_version;
    struct Gpu {
        int index = 0;
        std::string name;
        int cc_major = 0, cc_minor = 0;
        int64_t memory_bytes = 0;
    };
    std::vector<Gpu> gpus;
    int driver_version = 0;            // 0: no driver answered
    std::string gpu_note;              // why there are none, when there are none
    std::vector<std::string> formats;  // every format name known
    std::string format_names;          // the same, as the text shows them
};
nlohmann::json to_json(const BuildReport& b);
std::string to_text(const BuildReport& b);

}  // namespace qtransit::reports
