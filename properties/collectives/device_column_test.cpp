// Column's device branches on the CPU (D63): every built-in path run column by column through a
// transport that answers device_ops() with a host stand-in for the device (HostDevice below: the
// DeviceOps contract of device.hpp, each step done by the CPU kernels and block_math.hpp's adds, a
// message's payload held by the rank it lies with) against the same column on SimTransport. Equal
// bit for bit: every output value, every ledger entry (events' values, codes, scales; rows' event
// ids, add and rounding sums), the byte counts. What this checks is Column's own logic on a device
// transport (the codec chosen once, holders, raw staging, the device add's ledger), which otherwise
// runs only on a GPU; the CUDA kernels themselves are gpu_collectives_test's.
#include <gtest/gtest.h>

#include <cmath>
#include <deque>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "qtransit/collectives/device.hpp"
#include "qtransit/collectives/paths.hpp"
#include "qtransit/collectives/transport.hpp"
#include "qtransit/common/bits.hpp"
#include "qtransit/common/decl.hpp"
#include "qtransit/kernels/block_math.hpp"
#include "qtransit/kernels/codec.hpp"
#include "collectives/device_compare.hpp"

namespace qt = qtransit;
namespace col = qt::collectives;

namespace {

using qtransit::testing::expect_same_record;
using qtransit::testing::device_test_config;

// N ranks whose "device buffers" are on the host: a message's payload is the codes and metadata
// (or raw values) it carries, held by m.dev_rank, which a delivery moves to the receiver.
class HostDevice final : public col::Transport, public col::DeviceOps {
public:
    HostDevice(int64_t ranks, int64_t per_node, qt::FormatSpec format) : Transport(ranks, per_node, format), format_(format) {}

    col::DeviceOps* device_ops() override { return this; }
    col::Message recv(int64_t to, int64_t from) override {
        auto& q = box_[{to, from}];
        if (q.empty()) throw col::TransportFailure{qt::make_error(qt::ErrorCode::kInternal, "nothing sent")};
        col::Message m = std::move(q.front());
        q.pop_front();
        return m;
    }
    bool idle() const {
        for (const auto& [k, q] : box_)
            if (!q.empty()) return false;
        return true;
    }

    qt::Status encode(int64_t rank, const float* x, int64_t n, const qt::kernels::CodecOptions& options, col::Message& m) override {
        m.codes.resize(static_cast<size_t>(format_.code_bytes(n)));
        if (auto st = qt::kernels::encode_block(format_, x, n, m.codes.data(), &m.scale, &m.offset, options); !st) return st;
        if (!format_.has_offset()) m.offset = 0.0f;
        hold(rank, m);
        ++encodes;
        return qt::Status::Ok();
    }
    qt::Status stage_raw(int64_t rank, col::Message& m) override {
        hold(rank, m);
        ++staged;
        return qt::Status::Ok();
    }
    qt::Status decode(const col::Message& m, float* out) override {
        if (!m.dev || m.dev_rank < 0) return qt::make_error(qt::ErrorCode::kInternal, "a message with no device payload");
        if (m.quantized) qt::kernels::decode_block(format_, m.codes.data(), m.len, m.scale, m.offset, out);
        else std::copy(m.raw.begin(), m.raw.end(), out);
        ++decodes;
        return qt::Status::Ok();
    }
    qt::Status round_first(int64_t, float* v, int64_t n, qt::Accum accum) override {
        for (int64_t i = 0; i < n; ++i) v[i] = qt::kernels::accum_first(v[i], accum);
        return qt::Status::Ok();
    }
    qt::Status add(int64_t, float* acc, float* term, int64_t n, qt::Accum accum) override {
        for (int64_t i = 0; i < n; ++i) {
            const float t = term[i];
            acc[i] = qt::kernels::accum_add(acc[i], t, accum);
            if (qt::low_precision(accum)) term[i] = qt::kernels::accum_first(t, accum);
        }
        ++adds;
        return qt::Status::Ok();
    }

    int64_t encodes = 0, decodes = 0, staged = 0, adds = 0;

protected:
    void deliver(int64_t from, int64_t to, col::Message&& m) override {
        if (from != to && !m.dev) throw col::TransportFailure{qt::make_error(qt::ErrorCode::kInternal, "sent with no device payload")};
        m.dev_rank = static_cast<int32_t>(to);
        box_[{to, from}].push_back(std::move(m));
    }

private:
    void hold(int64_t rank, col::Message& m) {
        m.dev = &payload_tag_;
        m.dev_rank = static_cast<int32_t>(rank);
    }
    qt::FormatSpec format_;
    std::map<std::pair<int64_t, int64_t>, std::deque<col::Message>> box_;
    char payload_tag_ = 0;
};

// Every column of c on both transports; returns the device's step counts through `dev`.
void expect_same(const qt::PathConfig& c, HostDevice& dev) {
    const std::string what = std::string(qt::path_info(c.path).name) + " " + c.format.name() + " " + qt::to_string(c.accum);
    col::GeneratedInputs in(qt::kernels::Distribution::kNormal, 7);
    col::SimTransport sim(c.ranks, c.ranks_per_node, c.format);
    qt::ColumnRecord a, b;
    const int64_t columns = col::column_count(c);
    ASSERT_GT(columns, 0) << what;
    for (int64_t i = 0; i < columns; ++i) {
        const auto [first, len] = col::column_at(c, i);
        ASSERT_TRUE(col::run_column(c, in, sim, first, len, a)) << what;
        const auto st = col::run_column(c, in, dev, first, len, b);
        ASSERT_TRUE(st) << what << ": " << st.error().message;
        expect_same_record(a, b, what + " column " + std::to_string(first));
        if (::testing::Test::HasFatalFailure()) return;
    }
    EXPECT_TRUE(dev.idle()) << what << ": a message was sent and never received";
    EXPECT_EQ(sim.bytes().sent, dev.bytes().sent) << what;
    EXPECT_EQ(sim.bytes().cross_node, dev.bytes().cross_node) << what;
    EXPECT_EQ(sim.bytes().fp16_equiv, dev.bytes().fp16_equiv) << what;
}

TEST(DeviceColumn, EveryPathThroughTheDeviceBranchesEqualsSim) {
    int64_t paths = 0, raw_paths = 0, encodes = 0, adds = 0;
    for (const char* f : {"int8", "int4-asym"})
        for (qt::Accum accum : {qt::Accum::kFp32, qt::Accum::kFp16, qt::Accum::kBf16})
            for (const auto& info : qt::all_paths()) {
                if (qt::typed_path(info.kind)) continue;  // the 16-bit and FP8 paths run on the cpu backend only (D26)
                const qt::PathConfig c = device_test_config(info.kind, f, accum, 16, 4);
                if (!qt::validate(c)) continue;
                if (!col::host_only_problem(c.path, c.divide, col::Backend::kDevice).empty()) continue;
                HostDevice dev(c.ranks, c.ranks_per_node, c.format);
                expect_same(c, dev);
                if (HasFatalFailure()) return;
                ++paths;
                raw_paths += dev.staged > 0;
                encodes += dev.encodes;
                adds += dev.adds;
                EXPECT_GT(dev.decodes, 0) << info.name;  // the device decoded what the path delivered
            }
    // The device branches ran: encodes and decodes on every path, adds on the reduce paths, raw
    // staging on fp32-ring-rs and hpz-ag-fp's full-precision shard.
    RecordProperty("runs", static_cast<int>(paths));
    EXPECT_EQ(paths, 66);  // 11 paths x 2 formats x 3 accumulation types
    EXPECT_GE(raw_paths, 2 * 2 * 3);
    EXPECT_GT(encodes, 0);
    EXPECT_GT(adds, 0);
}

// A device encode leaves its lowest refused block in a flag word (gpu::encode_device_queued) that the
// transport copies back with the codes; refusal_of_flag turns it into the Error the CPU encode gives
// for the same tensor, message for message: a NaN, an infinity, an fp16 overflow (ds-int4), a range
// overflow (int4-asym), and a declared format that cannot mark a poisoned block under propagate.
TEST(DeviceRefusal, TheFlagGivesTheErrorTheCpuEncodeGives) {
    qt::Decl d = *qt::parse_format("mxfp4")->decl;  // fp4 elements with scale none: no NaN code
    d.scale = qt::ScaleType::kNone;
    d.fixed_block = 0;
    ASSERT_TRUE(qt::finalize(d).ok());
    const qt::FormatSpec noscale = qt::make_declared("test-fp4-noscale", d);
    struct Case {
        qt::FormatSpec format;
        qt::Nonfinite policy;
        float bad, other;  // at 45 (block 1 of 32), and at 46
    };
    const std::vector<Case> cases = {
        {*qt::parse_format("int8"), qt::Nonfinite::kError, NAN, 1.0f},
        {*qt::parse_format("mxfp4"), qt::Nonfinite::kError, -INFINITY, 1.0f},
        {*qt::parse_format("ds-int4"), qt::Nonfinite::kError, 70000.0f, 1.0f},
        {*qt::parse_format("int4-asym"), qt::Nonfinite::kError, 3.0e38f, -3.0e38f},
        {noscale, qt::Nonfinite::kPropagate, NAN, 1.0f},
    };
    for (const Case& k : cases) {
        const std::string what = k.format.name() + " " + qt::to_string(k.policy);
        std::vector<float> x(96);
        for (size_t i = 0; i < x.size(); ++i) x[i] = 0.25f * static_cast<float>(static_cast<int>(i % 7) - 3);
        x[45] = k.bad;
        x[46] = k.other;
        qt::kernels::CodecOptions opt;
        opt.policy = k.policy;
        opt.site.rank = 3;
        opt.site.index_base = 64;
        const auto cpu = qt::kernels::encode(k.format, x, 32, opt);
        ASSERT_FALSE(cpu.ok()) << what;
        const qt::Status dev = qt::kernels::refusal_of_flag(k.format, 1, x.data(), 96, 32, opt);
        ASSERT_FALSE(dev.ok()) << what;
        EXPECT_EQ(dev.error().message, cpu.error().message) << what;
        EXPECT_EQ(dev.error().code, cpu.error().code) << what;
        EXPECT_TRUE(qt::kernels::refusal_of_flag(k.format, ~uint64_t{0}, x.data(), 96, 32, opt).ok()) << what;
        // A flag past the last block is the transport's bug, never a user's block.
        const qt::Status past = qt::kernels::refusal_of_flag(k.format, 3, x.data(), 96, 32, opt);
        ASSERT_FALSE(past.ok()) << what;
        EXPECT_EQ(past.error().code, qt::ErrorCode::kInternal) << what;
    }
}

// A rank's device buffer: the codes, the metadata words and the flag of a slot do not overlap, one
// copy of flag_at + 8 bytes brings all three back, a message carries codes and metadata only, and
// the sizes are those the transport allocates (every rank alike).
TEST(DeviceBuffer, SlotHoldsCodesMetadataAndFlagApart) {
    for (const char* name : {"int8", "int4", "int4-asym", "mxfp4", "nvfp4", "fp8-e4m3", "ds-int4"})
        for (int64_t block : {1, 16, 32, 33, 4096}) {
            const qt::FormatSpec f = *qt::parse_format(name);
            if (!f.check_block(block)) continue;
            const std::string what = std::string(name) + " block " + std::to_string(block);
            for (int64_t n : {2, 384}) {
                const auto l = col::DeviceBufferLayout::of(n, f, block);
                EXPECT_GE(l.meta_at, static_cast<size_t>(f.code_bytes(block))) << what;
                EXPECT_EQ(l.meta_at % 16, 0u) << what;
                EXPECT_GE(static_cast<int64_t>(l.meta_at + 2 * sizeof(float)), static_cast<int64_t>(l.meta_at) + f.metadata_bytes()) << what;
                EXPECT_EQ(l.flag_at, l.meta_at + 2 * sizeof(float)) << what;
                EXPECT_EQ(l.flag_at % 8, 0u) << what;
                EXPECT_LE(l.flag_at + 8, l.slot_bytes) << what;
                EXPECT_GE(l.slot_bytes, static_cast<size_t>(block) * sizeof(float)) << what;  // a raw message
                EXPECT_EQ(l.slot_bytes % 256, 0u) << what;
                EXPECT_GE(l.scratch_bytes, 2 * static_cast<size_t>(block) * sizeof(float)) << what;
                EXPECT_EQ(l.message_bytes(), l.flag_at) << what;
                EXPECT_EQ(l.slots, 2 * n + 16) << what;
                EXPECT_EQ(l.rank_bytes() % 256, 0u) << what;  // the ranks of one GPU share one allocation
                EXPECT_EQ(col::device_transport_bytes(n, f, block), static_cast<int64_t>(l.rank_bytes()) * n) << what;
            }
        }
    // int8 in blocks of 4096 for 384 ranks: 4,096 code bytes, so a slot of 16 KiB (the raw values),
    // 784 of them and 32 KiB of scratch a rank: 12.3 MiB a rank, 4.6 GiB for the transport.
    const auto big = col::DeviceBufferLayout::of(384, *qt::parse_format("int8"), 4096);
    EXPECT_EQ(big.slot_bytes, 16384u);
    EXPECT_EQ(big.rank_bytes(), 32768u + 784u * 16384u);
}

// The device backend's threads: what was asked, as many as fit in half the GPU, at least one.
TEST(DeviceBuffer, ThreadsFitInHalfTheDevice) {
    constexpr int64_t GiB = int64_t{1} << 30;
    EXPECT_EQ(col::device_thread_count(16, GiB, 140 * GiB), 16);
    EXPECT_EQ(col::device_thread_count(16, 10 * GiB, 140 * GiB), 7);
    EXPECT_EQ(col::device_thread_count(16, 70 * GiB, 140 * GiB), 1);
    EXPECT_EQ(col::device_thread_count(16, 200 * GiB, 140 * GiB), 1);  // one thread tries; cudaMalloc says why not
    EXPECT_EQ(col::device_thread_count(0, GiB, 140 * GiB), 1);
    EXPECT_EQ(col::device_thread_count(4, 0, 140 * GiB), 4);
    // A group of gpu-check's small gate (N = 16, blocks of 32, a dozen paths) on an H200: every thread.
    const int64_t per = 12 * col::device_transport_bytes(16, *qt::parse_format("int8"), 32);
    EXPECT_EQ(col::device_thread_count(16, per, 140 * GiB), 16);
}

}  // namespace
