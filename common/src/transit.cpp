#include "qtransit/common/transit.hpp"

#include <algorithm>
#include <bit>

namespace qtransit {

const std::vector<PathInfo>& all_paths() {
    static const std::vector<PathInfo> paths{
        {PathKind::kRingRs, "ring-rs", PathShape::kReduceScatter, true},
        {PathKind::kA2aRs, "a2a-rs", PathShape::kReduceScatter, true},
        {PathKind::kA2aHierRs, "a2a-hier-rs", PathShape::kReduceScatter, true},
        {PathKind::kTreeRs, "tree-rs", PathShape::kReduceScatter, true},
        {PathKind::kTwoShotAr, "two-shot-ar", PathShape::kAllReduce, true},
        {PathKind::kRingAg, "ring-ag", PathShape::kAllGather, true},
        {PathKind::kRingAgRequant, "ring-ag-requant", PathShape::kAllGather, true},
        {PathKind::kHpzAgFp, "hpz-ag-fp", PathShape::kAllGather, true},
        {PathKind::kHpzAgRequant, "hpz-ag-requant", PathShape::kAllGather, true},
        {PathKind::kFp32RingRs, "fp32-ring-rs", PathShape::kReduceScatter, false},
    };
    return paths;
}

const PathInfo& path_info(PathKind kind) {
    for (const auto& p : all_paths())
        if (p.kind == kind) return p;
    return all_paths().front();
}

std::string known_path_names() {
    std::string s;
    for (const auto& p : all_paths()) {
        if (!s.empty()) s += ", ";
        s += p.name;
    }
    return s;
}

Result<PathKind> parse_path(std::string_view name) {
    for (const auto& p : all_paths())
        if (name == p.name) return p.kind;
    return make_error(ErrorCode::kInvalidArgument,
                      "unknown path '" + std::string(name) + "'; known paths: " + known_path_names() + " (or all)");
}

Result<Accum> parse_accum(std::string_view name) {
    if (name == "fp32") return Accum::kFp32;
    if (name == "fp16") return Accum::kFp16;
    if (name == "bf16") return Accum::kBf16;
    return make_error(ErrorCode::kInvalidArgument,
                      "unknown accumulation '" + std::string(name) + "'; known: fp32, fp16, bf16");
}

const char* to_string(Accum a) { return a == Accum::kFp32 ? "fp32" : a == Accum::kFp16 ? "fp16" : "bf16"; }

std::string PathConfig::format_name() const {
    if (stage_formats.empty()) return format.name();
    std::string s;
    for (const auto& f : stage_formats) s += (s.empty() ? "" : ",") + f.name();
    return s;
}

std::vector<std::string> format_stages(PathKind path) {
    switch (path) {
        case PathKind::kA2aHierRs: return {"intra-node", "inter-node"};
        case PathKind::kTwoShotAr: return {"reduce", "gather"};
        case PathKind::kHpzAgRequant: return {"forward gather", "secondary re-encode"};
        default: return {};
    }
}

Status validate(const PathConfig& c) {
    auto bad = [](std::string m) { return Status(make_error(ErrorCode::kInvalidArgument, std::move(m))); };
    if (c.ranks < 1) return bad("--ranks must be at least 1, got " + std::to_string(c.ranks));
    if (c.ranks > kMaxRanks) return bad("N = " + std::to_string(c.ranks) + " ranks is past the limit of 2^16 = 65536");
    if (c.elements > kMaxElements)
        return bad("M = " + std::to_string(c.elements) + " elements per rank is past the limit of 2^30 = 1073741824");
    if (c.ranks_per_node < 1 || c.ranks % c.ranks_per_node != 0)
        return bad("ranks per node G = " + std::to_string(c.ranks_per_node) + " does not divide N = " +
                   std::to_string(c.ranks) + " ranks");
    if (c.elements < 1) return bad("--elements must be at least 1, got " + std::to_string(c.elements));
    if (c.elements % c.ranks != 0)
        return bad("elements per rank M = " + std::to_string(c.elements) + " is not divisible by N = " +
                   std::to_string(c.ranks) + " ranks (the shard size is M / N); try " +
                   std::to_string((c.elements / c.ranks + 1) * c.ranks));
    if (auto st = c.format.check_block(c.block); !st) return st;
    if (!c.stage_formats.empty()) {
        const auto stages = format_stages(c.path);
        const std::string name = path_info(c.path).name;
        if (stages.empty())
            return bad(name + " quantizes with one format; got " + std::to_string(c.stage_formats.size()) +
                       " (a2a-hier-rs, two-shot-ar and hpz-ag-requant take one per stage)");
        if (c.stage_formats.size() != stages.size())
            return bad(name + " takes " + std::to_string(stages.size()) + " formats, one per stage (" + stages[0] + ", then " +
                       stages[1] + "); got " + std::to_string(c.stage_formats.size()));
        if (!(c.stage_formats[0] == c.format)) return bad("internal: the first stage format must be the path's format");
        for (const auto& f : c.stage_formats)
            if (auto st = f.check_block(c.block); !st) return st;
        if (c.codec) return bad("a codec plugin implements one format; per-stage formats run qtransit's own kernels");
    }
    if (c.path == PathKind::kTreeRs && !std::has_single_bit(static_cast<uint64_t>(c.ranks)))
        return bad("tree-rs needs N a power of two, got N = " + std::to_string(c.ranks));
    return Status::Ok();
}

namespace {

// k of each contributor from a set of events that all cover the same elements.
void count_events(const ColumnRecord& column, const std::vector<int32_t>& ids, int64_t ranks, std::vector<int32_t>& k) {
    std::vector<int32_t> diff(static_cast<size_t>(ranks) + 1, 0);  // ring ranges, O(1) each
    for (int32_t id : ids) {
        const auto& c = column.events[static_cast<size_t>(id)].contributors;
        if (!c.list.empty()) {
            for (int32_t r : c.list) ++k[static_cast<size_t>(r)];
            continue;
        }
        int64_t first = c.first % ranks, count = c.count;
        if (count >= ranks) {  // the whole ring, possibly more than once
            for (auto& v : k) v += static_cast<int32_t>(count / ranks);
            count %= ranks;
        }
        const int64_t end = first + count;
        if (end <= ranks) {
            ++diff[static_cast<size_t>(first)];
            --diff[static_cast<size_t>(end)];
        } else {
            ++diff[static_cast<size_t>(first)];
            --diff[static_cast<size_t>(ranks)];
            ++diff[0];
            --diff[static_cast<size_t>(end - ranks)];
        }
    }
    int32_t run = 0;
    for (int64_t r = 0; r < ranks; ++r) {
        run += diff[static_cast<size_t>(r)];
        k[static_cast<size_t>(r)] += run;
    }
}

}  // namespace

bool contribution_k_of(const ColumnRecord& column, const OutputRow& row, int64_t ranks, int64_t lo, int64_t hi,
                       std::vector<int32_t>& k, bool& others) {
    k.assign(static_cast<size_t>(std::max<int64_t>(hi - lo + 1, 0)), 0);
    others = false;
    if (ranks < 1 || lo < 0 || hi >= ranks || lo > hi) return false;
    const int64_t owners = hi - lo + 1;
    for (int32_t id : row.event_ids) {
        if (id < 0 || static_cast<size_t>(id) >= column.events.size()) return false;
        const QuantEvent& e = column.events[static_cast<size_t>(id)];
        if (e.column_offset != 0 || static_cast<int64_t>(e.x.size()) != column.len) return false;
        const auto& c = e.contributors;
        if (!c.list.empty()) {
            for (int32_t r : c.list) {
                if (r >= lo && r <= hi) ++k[static_cast<size_t>(r - lo)];
                else others = true;
            }
            continue;
        }
        // The ring range first, first + 1, ... (count of them, mod N): each owner is in it
        // count / N times, plus once more when within the remainder.
        int64_t first = c.first;
        if (first < 0 || first >= ranks) first = ((first % ranks) + ranks) % ranks;
        const int64_t full = c.count < ranks ? 0 : c.count / ranks, rest = c.count < ranks ? c.count : c.count % ranks;
        int64_t inside = 0;
        for (int64_t j = lo; j <= hi; ++j) {
            int64_t d = j - first;  // in (-N, N)
            if (d < 0) d += ranks;
            const int64_t times = full + (d < rest ? 1 : 0);
            k[static_cast<size_t>(j - lo)] += static_cast<int32_t>(times);
            inside += times;
        }
        if (c.count > inside || (full > 0 && owners < ranks)) others = true;
    }
    return true;
}

bool same_ledger_shape(const ColumnRecord& column, const OutputRow& a, const OutputRow& b) {
    if (a.event_ids.size() != b.event_ids.size()) return false;
    const size_t nev = column.events.size();
    for (size_t p = 0; p < a.event_ids.size(); ++p) {
        const int32_t ia = a.event_ids[p], ib = b.event_ids[p];
        if (ia < 0 || ib < 0 || static_cast<size_t>(ia) >= nev || static_cast<size_t>(ib) >= nev) return false;
        if (ia == ib) continue;
        const QuantEvent& x = column.events[static_cast<size_t>(ia)];
        const QuantEvent& y = column.events[static_cast<size_t>(ib)];
        if (x.column_offset != y.column_offset || x.x.size() != y.x.size() || x.contributors.first != y.contributors.first ||
            x.contributors.count != y.contributors.count || x.contributors.list != y.contributors.list)
            return false;
    }
    return true;
}

std::vector<int32_t> contribution_k(const ColumnRecord& column, const OutputRow& row, int64_t ranks) {
    std::vector<int32_t> k(static_cast<size_t>(ranks), 0);
    bool whole = true;  // every event covers every element of the column (all paths but hpz's straddles)
    for (int32_t id : row.event_ids) {
        const auto& e = column.events[static_cast<size_t>(id)];
        whole = whole && e.column_offset == 0 && static_cast<int64_t>(e.x.size()) == column.len;
    }
    if (whole) {
        count_events(column, row.event_ids, ranks, k);
        return k;
    }
    // Per element: the events that cover element i; a contributor's k is the most events that
    // carried it to any one element (a column can meet two blocks of the same owner, each covering
    // part of it: that owner's values were still quantized once each, not twice).
    std::vector<int32_t> ids, ki(static_cast<size_t>(ranks));
    for (int64_t i = 0; i < column.len; ++i) {
        ids.clear();
        for (int32_t id : row.event_ids) {
            const auto& e = column.events[static_cast<size_t>(id)];
            const int64_t at = i + e.column_offset;
            if (at >= 0 && at < static_cast<int64_t>(e.x.size())) ids.push_back(id);
        }
        std::fill(ki.begin(), ki.end(), 0);
        count_events(column, ids, ranks, ki);
        for (int64_t r = 0; r < ranks; ++r) k[static_cast<size_t>(r)] = std::max(k[static_cast<size_t>(r)], ki[static_cast<size_t>(r)]);
    }
    return k;
}

int32_t expected_k(const PathConfig& c, int64_t first, int64_t holder, int64_t contributor) {
    const int64_t n = c.ranks;
    const int64_t chunk = first / c.shard();  // the chunk (reduce) or shard (gather) of the column
    switch (c.path) {
        case PathKind::kRingRs: {
            const int64_t j = ((contributor - chunk) % n + n) % n;  // contributor = chunk + j
            return j == 0 ? 0 : static_cast<int32_t>(n - j);
        }
        case PathKind::kA2aRs: return 1;
        case PathKind::kA2aHierRs: return 2;
        case PathKind::kTreeRs: return std::popcount(static_cast<uint64_t>(contributor ^ chunk));
        case PathKind::kTwoShotAr: return 2;
        case PathKind::kRingAg: return 1;
        case PathKind::kRingAgRequant: {
            const int64_t h = ((holder - contributor) % n + n) % n;
            return h == 0 ? 1 : static_cast<int32_t>(h);
        }
        case PathKind::kHpzAgFp: return 1;
        case PathKind::kHpzAgRequant: return 2;
        case PathKind::kFp32RingRs: return 0;
    }
    return -1;
}

const char* to_string(PathShape s) {
    switch (s) {
        case PathShape::kReduceScatter: return "reduce-scatter";
        case PathShape::kAllReduce: return "all-reduce";
        case PathShape::kAllGather: return "all-gather";
    }
    return "?";
}

}  // namespace qtransit
