// `qtransit bench`: the CPU kernels' encode and decode throughput as a ratio to memcpy of the same
// bytes in the same run, as rows (printed as they are measured) or one JSON object.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace qtransit::reports {

struct ThroughputRow {
    std::string format, op;                    // op: encode, decode
    int threads = 1;
    int64_t block = 0;
    double seconds = 0, memcpy_seconds = 0;
    double ratio_to_memcpy = 0;                // memcpy time / op time: > 1 is faster than memcpy
};
struct BenchReport {
    int64_t input_mib = 0;
    int64_t block = 0;  // asked (0: each format's own)
    int repeats = 0;
    std::vector<ThroughputRow> rows;
};
// The table: its header, a row, and the closing note on what was measured.
std::string bench_header();
std::string to_text(const ThroughputRow& r);
std::string bench_note(const BenchReport& b);
// `qtransit bench --json`'s object.
nlohmann::json to_json(const BenchReport& b);

}  // namespace qtransit::reports
