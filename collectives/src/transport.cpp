#include "qtransit/collectives/transport.hpp"

#include <algorithm>

#include "qtransit/collectives/device.hpp"

namespace qtransit::collectives {

const char* to_string(Backend b) {
    switch (b) {
        case Backend::kCpu: return "cpu";
        case Backend::kDevice: return "device";
        case Backend::kNccl: return "nccl";
        case Backend::kMpi: return "mpi";
    }
    return "?";
}

std::string known_backend_names() { return "cpu, device, nccl, mpi"; }

Result<Backend> parse_backend(const std::string& name) {
    for (Backend b : {Backend::kCpu, Backend::kDevice, Backend::kNccl, Backend::kMpi})
        if (name == to_string(b)) return b;
    return make_error(ErrorCode::kInvalidArgument,
                      "unknown backend '" + name + "' (known backends: " + known_backend_names() + ")");
}

namespace {
constexpr size_t align_up(size_t v, size_t a) { return (v + a - 1) / a * a; }
}  // namespace

DeviceBufferLayout DeviceBufferLayout::of(int64_t ranks, const FormatSpec& format, int64_t max_len) {
    DeviceBufferLayout l;
    const auto len = static_cast<size_t>(std::max<int64_t>(max_len, 1));
    l.meta_at = align_up(static_cast<size_t>(format.code_bytes(static_cast<int64_t>(len))), 16);
    l.flag_at = l.meta_at + 2 * sizeof(float);
    l.slot_bytes = align_up(std::max(l.flag_at + sizeof(uint64_t), len * sizeof(float)), 256);
    l.scratch_bytes = align_up(2 * len * sizeof(float), 256);
    // a2a's N received plus its own, the gathers' ring, hpz's forward blocks: twice N plus a margin
    // covers every schedule of paths.cpp.
    l.slots = 2 * ranks + 16;
    return l;
}

int64_t device_transport_bytes(int64_t ranks, const FormatSpec& format, int64_t max_len) {
    const double b = static_cast<double>(DeviceBufferLayout::of(ranks, format, max_len).rank_bytes()) * static_cast<double>(ranks);
    return b > 9.0e18 ? INT64_MAX : static_cast<int64_t>(b);
}

int device_thread_count(int wanted, int64_t bytes_per_thread, int64_t device_bytes) {
    const int64_t w = std::max(wanted, 1);
    if (bytes_per_thread <= 0) return static_cast<int>(w);
    return static_cast<int>(std::clamp<int64_t>(device_bytes / 2 / bytes_per_thread, 1, w));
}

int64_t wire_bytes(const FormatSpec& format, const Message& m) {
    if (!m.quantized) return m.len * m.raw_bytes_per_element;
    const FormatSpec& f = m.format ? *m.format : format;
    return f.code_bytes(m.len) + f.metadata_bytes();
}

void ByteCounts::resize(int64_t ranks) {
    sent.assign(static_cast<size_t>(ranks), 0);
    cross_node.assign(static_cast<size_t>(ranks), 0);
    fp16_equiv.assign(static_cast<size_t>(ranks), 0);
}

void ByteCounts::merge(const ByteCounts& o) {
    if (sent.size() < o.sent.size()) {
        sent.resize(o.sent.size());
        cross_node.resize(o.sent.size());
        fp16_equiv.resize(o.sent.size());
    }
    for (size_t r = 0; r < o.sent.size(); ++r) {
        sent[r] += o.sent[r];
        cross_node[r] += o.cross_node[r];
        fp16_equiv[r] += o.fp16_equiv[r];
    }
}

std::vector<int64_t> Transport::node_group(int64_t n) const {
    std::vector<int64_t> g;
    for (int64_t l = 0; l < per_node_; ++l) g.push_back(rank_of(n, l));
    return g;
}

std::vector<int64_t> Transport::local_group(int64_t l) const {
    std::vector<int64_t> g;
    for (int64_t n = 0; n < nodes(); ++n) g.push_back(rank_of(n, l));
    return g;
}

void Transport::send(int64_t from, int64_t to, Message&& m) {
    if (from == to || !counts(from)) {  // a rank's own share (a2a's own chunk) is a local copy: nothing
        deliver(from, to, std::move(m));  // on the wire (mpi: another process counts this send)
        return;
    }
    const int64_t b = wire_bytes(format_, m);
    bytes_.sent[static_cast<size_t>(from)] += b;
    if (node_of(from) != node_of(to)) bytes_.cross_node[static_cast<size_t>(from)] += b;
    bytes_.fp16_equiv[static_cast<size_t>(from)] += 2 * m.len;
    deliver(from, to, std::move(m));
}

SimTransport::SimTransport(int64_t ranks, int64_t ranks_per_node, FormatSpec format)
    : Transport(ranks, ranks_per_node, format), box_(static_cast<size_t>(ranks)) {}

void SimTransport::deliver(int64_t from, int64_t to, Message&& m) {
    box_[static_cast<size_t>(to)].q.emplace_back(from, std::move(m));
}

Message SimTransport::recv(int64_t to, int64_t from) {
    Box& box = box_[static_cast<size_t>(to)];
    for (size_t i = box.head; i < box.q.size(); ++i) {
        if (box.q[i].first != from) continue;
        Message m = std::move(box.q[i].second);
        box.q[i].first = -1;  // taken
        while (box.head < box.q.size() && box.q[box.head].first == -1) ++box.head;
        if (box.head == box.q.size()) {
            box.q.clear();
            box.head = 0;
        }
        return m;
    }
    // A schedule that receives what nobody sent is a bug in this program, not a user error.
    throw TransportFailure{make_error(ErrorCode::kInternal, "internal error: rank " + std::to_string(to) +
                                                                " waits for a message from rank " + std::to_string(from) +
                                                                " that was never sent")};
}

bool SimTransport::idle() const {
    for (const auto& b : box_)
        if (!b.q.empty()) return false;
    return true;
}

}  // namespace qtransit::collectives
