// What the device tests share: the CUDA transport's (gpu_collectives_test) and the host
// stand-in's (device_column_test), each run against SimTransport on the same configurations.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "qtransit/common/bits.hpp"
#include "qtransit/common/format.hpp"
#include "qtransit/common/transit.hpp"

namespace qtransit::testing {

// A path at N ranks, G per node, block 32 and S = 80 elements per rank's chunk: two full blocks and
// a short one per chunk, so hpz's forward blocks straddle its secondary ones.
inline PathConfig device_test_config(PathKind p, const char* format, Accum accum, int64_t n, int64_t g) {
    PathConfig c;
    c.path = p;
    c.format = *parse_format(format);
    c.accum = accum;
    c.ranks = n;
    c.ranks_per_node = g;
    c.block = 32;
    c.elements = n * 80;
    return c;
}

// Two runs of one column (one ColumnRecord each) equal bit for bit: the exact target's inputs, every
// output row (values, event ids, add and rounding sums) and every quantization event (values, codes,
// scale, offset). Fatal failures: the caller returns on HasFatalFailure().
inline void expect_same_record(const ColumnRecord& s, const ColumnRecord& d, const std::string& at) {
    ASSERT_EQ(s.len, d.len) << at;
    ASSERT_TRUE(same_bits(s.contributions, d.contributions)) << at;
    ASSERT_TRUE(same_bits(s.first_block_absmax, d.first_block_absmax)) << at;
    ASSERT_EQ(s.outputs.size(), d.outputs.size()) << at;
    for (size_t k = 0; k < s.outputs.size(); ++k) {
        const auto &a = s.outputs[k], &b = d.outputs[k];
        ASSERT_EQ(a.rank, b.rank) << at << " row " << k;
        ASSERT_TRUE(same_bits(a.values, b.values)) << at << " row " << k;
        ASSERT_EQ(a.event_ids, b.event_ids) << at << " row " << k;
        ASSERT_TRUE(same_bits(a.add_abs_sum, b.add_abs_sum)) << at << " row " << k;
        ASSERT_EQ(a.add_count, b.add_count) << at << " row " << k;
        ASSERT_TRUE(same_bits(a.term_round_abs_sum, b.term_round_abs_sum)) << at << " row " << k;
        ASSERT_EQ(a.term_round_count, b.term_round_count) << at << " row " << k;
    }
    ASSERT_EQ(s.events.size(), d.events.size()) << at;
    for (size_t k = 0; k < s.events.size(); ++k) {
        const auto &a = s.events[k], &b = d.events[k];
        ASSERT_EQ(a.stage, b.stage) << at << " event " << k;
        ASSERT_EQ(a.from_rank, b.from_rank) << at << " event " << k;
        ASSERT_EQ(a.to_rank, b.to_rank) << at << " event " << k;
        ASSERT_TRUE(same_bits(a.scale, b.scale)) << at << " event " << k;
        ASSERT_TRUE(same_bits(a.offset, b.offset)) << at << " event " << k;
        ASSERT_TRUE(same_bits(a.x, b.x)) << at << " event " << k;
        ASSERT_EQ(a.codes, b.codes) << at << " event " << k;
        ASSERT_EQ(a.column_offset, b.column_offset) << at << " event " << k;
    }
}

}  // namespace qtransit::testing
