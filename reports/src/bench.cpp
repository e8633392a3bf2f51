// `qtransit bench`'s table and JSON (bench.hpp).
#include "qtransit/reports/bench.hpp"

#include "qtransit/common/appendf.hpp"

namespace qtransit::reports {

std::string bench_header() {
    std::string o;
    appendf(o, "%-18s %-7s %7s %6s %11s %11s %11s\n", "format", "op", "threads", "block", "ms", "memcpy ms", "vs memcpy");
    return o;
}

std::string to_text(const ThroughputRow& r) {
    std::string o;
    appendf(o, "%-18s %-7s %7d %6lld %11.3f %11.3f %11.3f\n", r.format.c_str(), r.op.c_str(), r.threads, static_cast<long long>(r.block),
            r.seconds * 1e3, r.memcpy_seconds * 1e3, r.ratio_to_memcpy);
    return o;
}

std::string bench_note(const BenchReport& b) {
    std::string o;
    appendf(o, "(%lld MiB binary32, %s, median of %d; ratio > 1 is faster than memcpy)\n", static_cast<long long>(b.input_mib),
            b.block > 0 ? ("block " + std::to_string(b.block)).c_str() : "each format's own block (its fixed one, else 32)", b.repeats);
    return o;
}

nlohmann::json to_json(const BenchReport& b) {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& r : b.rows)
        j.push_back({{"format", r.format}, {"op", r.op}, {"threads", r.threads}, {"block", r.block}, {"seconds", r.seconds},
                     {"memcpy_seconds", r.memcpy_seconds}, {"ratio_to_memcpy", r.ratio_to_memcpy}});
    return nlohmann::json{{"input_mib", b.input_mib}, {"block", b.block}, {"repeats", b.repeats},
                          {"note", "ratio_to_memcpy = memcpy time of the same binary32 input bytes / op time, same run, median"},
                          {"rows", j}};
}

}  // namespace qtransit::reports
