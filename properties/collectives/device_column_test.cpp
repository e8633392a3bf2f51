// Column's device branches on the CPU (D63): every built-in path run column by column through a
// transport that answers device_ops() with a host stand-in for the device (HostDevice below: the
// DeviceOps contract of device.hpp, each step done by the CPU kernels and block_math.hpp's adds, a
// message's payload held by the rank it lies with) against the same column on SimTransport. Equal
// bit for bit: every output value, every ledger entry (events' values, codes, scales; rows' event
// ids, add and rounding sums), the byte counts. What this checks is Column's own logic on a device
// transport (the codec chosen once, holders, raw staging, the device add's ledger), which otherwise
// runs only on a GPU; the CUDA kernels themselves are gpu_collectives_test's.
#include <gtest/gtest.h>

#include <deque>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "qtransit/collectives/device.hpp"
#include "qtransit/collectives/paths.hpp"
#include "qtransit/collectives/transport.hpp"
#include "qtransit/common/bits.hpp"
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

}  // namespace
