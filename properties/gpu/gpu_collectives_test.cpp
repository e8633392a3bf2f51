// Every collective path on the `device` transport (N ranks on one GPU, the CUDA kernels, messages
// copied between the ranks' device buffers) against `sim` (the CPU kernels), bit for bit: every
// output value, every ledger entry (events' values, codes, scales; rows' event ids, add and
// rounding sums) and the byte counts. The fp32 (and fp16) sums are done in the same order on both
// (the schedules are shared, paths.cpp), each add is block_math.hpp's accum_add on both, and the
// kernels are built without FMA contraction, so bit-exact is the expectation with no exception.
// Each backend's output tensor is poisoned before its run and every element is checked written.
// Without a GPU every test reports itself skipped with the reason (ctest label `gpu`).
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "qtransit/common/bits.hpp"
#include "qtransit/collectives/device.hpp"
#include "qtransit/collectives/paths.hpp"
#include "qtransit/kernels/gpu.hpp"
#include "collectives/device_compare.hpp"

namespace qt = qtransit;
namespace col = qt::collectives;

namespace {

#define SKIP_WITHOUT_GPU()                                                          \
    do {                                                                            \
        const auto q_ = qt::kernels::gpu::query_devices();                          \
        if (q_.devices.empty()) GTEST_SKIP() << "no GPU: " << q_.note;              \
    } while (0)

constexpr uint32_t kPoison = 0x7fa5a5a5u;  // a NaN no kernel produces

using qtransit::same_bits;
using qtransit::testing::expect_same_record;
using qtransit::testing::device_test_config;

struct Run {
    std::map<int64_t, qt::ColumnRecord> columns;  // by first element
    std::vector<float> out;                       // [N, width], poisoned first
    std::vector<uint8_t> written;
    col::ByteCounts bytes;
};

Run run(const qt::PathConfig& c, col::Backend backend, std::string& error) {
    Run r;
    const bool rs = qt::path_info(c.path).shape == qt::PathShape::kReduceScatter;
    const int64_t width = rs ? c.shard() : c.elements;
    float poison;
    std::memcpy(&poison, &kPoison, sizeof poison);
    r.out.assign(static_cast<size_t>(c.ranks * width), poison);
    r.written.assign(r.out.size(), 0);
    col::GeneratedInputs in(qt::kernels::Distribution::kNormal, 7);
    auto totals = col::run_paths({c}, in, 1, [&](size_t, int, const qt::ColumnRecord& rec) {
        r.columns[rec.first] = rec;
        for (const auto& row : rec.outputs) {
            const int64_t c0 = rs ? rec.first - row.rank * c.shard() : rec.first;
            for (size_t i = 0; i < row.values.size(); ++i) {
                const size_t at = static_cast<size_t>(row.rank * width + c0) + i;
                r.out[at] = row.values[i];
                r.written[at] = 1;
            }
        }
    }, backend);
    if (!totals) error = totals.error().message;
    else r.bytes = totals->bytes[0];
    return r;
}

std::string name_of(const qt::PathConfig& c) {
    return std::string(qt::path_info(c.path).name) + " " + c.format.name() + " " + qt::to_string(c.accum) + " N=" +
           std::to_string(c.ranks) + " G=" + std::to_string(c.ranks_per_node);
}

void expect_same(const qt::PathConfig& c) {
    const std::string what = name_of(c);
    std::string e_sim, e_dev;
    const Run sim = run(c, col::Backend::kCpu, e_sim);
    const Run dev = run(c, col::Backend::kDevice, e_dev);
    ASSERT_EQ(e_sim, "") << what;
    ASSERT_EQ(e_dev, "") << what;
    // Every element of both output tensors written, and the tensors equal bit for bit.
    for (size_t i = 0; i < dev.out.size(); ++i) {
        ASSERT_TRUE(dev.written[i]) << what << ": device left element " << i << " unwritten";
        ASSERT_TRUE(sim.written[i]) << what << ": sim left element " << i << " unwritten";
        uint32_t b;
        std::memcpy(&b, &dev.out[i], sizeof b);
        ASSERT_NE(b, kPoison) << what << ": element " << i << " still holds the poison";
    }
    ASSERT_TRUE(same_bits(sim.out, dev.out)) << what << ": outputs differ";
    EXPECT_EQ(sim.bytes.sent, dev.bytes.sent) << what;
    EXPECT_EQ(sim.bytes.cross_node, dev.bytes.cross_node) << what;
    EXPECT_EQ(sim.bytes.fp16_equiv, dev.bytes.fp16_equiv) << what;
    // The ledger, column by column.
    ASSERT_EQ(sim.columns.size(), dev.columns.size()) << what;
    for (const auto& [first, s] : sim.columns) {
        const auto& d = dev.columns.at(first);
        const std::string at = what + " column " + std::to_string(first);
        expect_same_record(s, d, at);
        if (::testing::Test::HasFatalFailure()) return;
    }
}

void every_path(const char* format, qt::Accum accum, int64_t n, int64_t g) {
    for (const auto& info : qt::all_paths()) {
        if (qt::typed_path(info.kind)) continue;  // the 16-bit paths run on the cpu backend only (D26)
        const qt::PathConfig c = device_test_config(info.kind, format, accum, n, g);
        if (!qt::validate(c)) continue;  // a combination the path does not take
        SCOPED_TRACE(name_of(c));
        expect_same(c);
        if (::testing::Test::HasFatalFailure()) return;
    }
}

TEST(GpuCollectives, EveryPathOnDeviceEqualsSimFp32) {
    SKIP_WITHOUT_GPU();
    for (const char* f : {"int4", "int8", "int4-asym", "ds-int4"}) {
        every_path(f, qt::Accum::kFp32, 16, 4);
        if (HasFatalFailure()) return;
    }
}

TEST(GpuCollectives, EveryPathOnDeviceEqualsSimFp16) {
    SKIP_WITHOUT_GPU();
    for (const char* f : {"int4", "int8", "int4-asym", "ds-int4"}) {
        every_path(f, qt::Accum::kFp16, 16, 4);
        if (HasFatalFailure()) return;
    }
}

TEST(GpuCollectives, EveryPathOnDeviceEqualsSimBf16) {
    SKIP_WITHOUT_GPU();
    for (const char* f : {"int4", "int8"}) {
        every_path(f, qt::Accum::kBf16, 16, 4);
        if (HasFatalFailure()) return;
    }
}

TEST(GpuCollectives, SmallerTopologies) {
    SKIP_WITHOUT_GPU();
    every_path("int4", qt::Accum::kFp32, 8, 8);  // one node
    if (HasFatalFailure()) return;
    every_path("ds-int4", qt::Accum::kFp16, 4, 2);
    if (HasFatalFailure()) return;
    every_path("int8", qt::Accum::kFp32, 2, 1);  // one rank per node: every message crosses nodes
}

// A device transport refuses cleanly where it cannot run (this test runs everywhere).
TEST(GpuCollectives, NcclNeedsOneGpuPerRank) {
    const auto q = qt::kernels::gpu::query_devices();
    auto t = col::make_nccl_transport(static_cast<int64_t>(q.devices.size()) + 1, 1, *qt::parse_format("int8"), 32);
    ASSERT_FALSE(t.ok());
    EXPECT_FALSE(t.error().message.empty());
}

}  // namespace
