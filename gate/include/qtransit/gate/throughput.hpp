// The CPU backend's encode and decode throughput as a ratio to memcpy of the same input bytes, both
// measured in the same run (absolute times on shared machines mean little): `qtransit bench`.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "qtransit/common/format.hpp"
#include "qtransit/reports/bench.hpp"

namespace qtransit::gate {

struct ThroughputSpec {
    std::vector<FormatSpec> formats;
    int64_t mib = 64;                          // binary32 input size
    int64_t block = kDefaultBlock;             // 0: each format's own fixed block (nvfp4's 16, a tile's area), else 32
    int64_t block_for(const FormatSpec& f) const { return block > 0 ? block : f.fixed_block() ? f.fixed_block() : kDefaultBlock; }
    int repeats = 7;                           // median of
    int threads = 0;                           // the multi-thread rows' threads (0: every hardware thread)
};

using reports::ThroughputRow;  // a row: format, op, threads, block, times, ratio (reports/bench.hpp)

// One thread, then all: every format's encode and decode. on_row sees each row as it is measured.
Result<std::vector<ThroughputRow>> measure_throughput(const ThroughputSpec& spec,
                                                      const std::function<void(const ThroughputRow&)>& on_row = {});

}  // namespace qtransit::gate
