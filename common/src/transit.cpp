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
        // (not in `all`: FlashInfer's variant, run by its name or its declaration's)
        {PathKind::kTwoShotArKeep, "two-shot-ar-keep", PathShape::kAllReduce, true, Accum::kFp32, false},
        {PathKind::kRingAg, "ring-ag", PathShape::kAllGather, true},
        {PathKind::kRingAgRequant, "ring-ag-requant", PathShape::kAllGather, true},
        {PathKind::kHpzAgFp, "hpz-ag-fp", PathShape::kAllGather, true},
        {PathKind::kHpzAgRequant, "hpz-ag-requant", PathShape::kAllGather, true},
        {PathKind::kFp32RingRs, "fp32-ring-rs", PathShape::kReduceScatter, false},
        {PathKind::kBf16RingRs, "bf16-ring-rs", PathShape::kReduceScatter, false, Accum::kBf16},
        {PathKind::kFp16RingRs, "fp16-ring-rs", PathShape::kReduceScatter, false, Accum::kFp16},
        {PathKind::kBf16RingAr, "bf16-ring-ar", PathShape::kAllReduce, false, Accum::kBf16},
        {PathKind::kFp16RingAr, "fp16-ring-ar", PathShape::kAllReduce, false, Accum::kFp16},
        {PathKind::kBf16TreeAr, "bf16-tree-ar", PathShape::kAllReduce, false, Accum::kBf16},
        {PathKind::kFp16TreeAr, "fp16-tree-ar", PathShape::kAllReduce, false, Accum::kFp16},
        {PathKind::kFp8E4m3RingRs, "nccl-fp8-e4m3-ring-rs", PathShape::kReduceScatter, false, Accum::kFp8E4m3, false},
        {PathKind::kFp8E5m2RingRs, "nccl-fp8-e5m2-ring-rs", PathShape::kReduceScatter, false, Accum::kFp8E5m2, false},
        {PathKind::kFp8E4m3RingAr, "nccl-fp8-e4m3-ring-ar", PathShape::kAllReduce, false, Accum::kFp8E4m3, false},
        {PathKind::kFp8E5m2RingAr, "nccl-fp8-e5m2-ring-ar", PathShape::kAllReduce, false, Accum::kFp8E5m2, false},
        {PathKind::kFp8E4m3TreeAr, "nccl-fp8-e4m3-tree-ar", PathShape::kAllReduce, false, Accum::kFp8E4m3, false},
        {PathKind::kFp8E5m2TreeAr, "nccl-fp8-e5m2-tree-ar", PathShape::kAllReduce, false, Accum::kFp8E5m2, false},
    };
    return paths;
}

std::vector<PathKind> all_path_kinds() {
    std::vector<PathKind> v;
    for (const auto& p : all_paths())
        if (p.in_all) v.push_back(p.kind);
    return v;
}

TypedSchedule typed_schedule(PathKind k) {
    switch (k) {
        case PathKind::kBf16RingRs:
        case PathKind::kFp16RingRs:
        case PathKind::kFp8E4m3RingRs:
        case PathKind::kFp8E5m2RingRs: return TypedSchedule::kRingRs;
        case PathKind::kBf16RingAr:
        case PathKind::kFp16RingAr:
        case PathKind::kFp8E4m3RingAr:
        case PathKind::kFp8E5m2RingAr: return TypedSchedule::kRingAr;
        case PathKind::kBf16TreeAr:
        case PathKind::kFp16TreeAr:
        case PathKind::kFp8E4m3TreeAr:
        case PathKind::kFp8E5m2TreeAr: return TypedSchedule::kTreeAr;
        default: return TypedSchedule::kNone;
    }
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
    return make_error(ErrorCode::kInvalidArgument, "unknown path '" + std::string(name) + "'; known paths: " + known_path_names() +
                                                       " (or all: every one but the nccl-fp8- paths)");
}

Result<Accum> parse_accum(std::string_view name) {
    if (name == "fp32") return Accum::kFp32;
    if (name == "fp16") return Accum::kFp16;
    if (name == "bf16") return Accum::kBf16;
    return make_error(ErrorCode::kInvalidArgument,
                      "unknown accumulation '" + std::string(name) + "'; known: fp32, fp16, bf16");
}

Result<Divide> parse_divide(std::string_view name) {
    if (name == "none") return Divide::kNone;
    if (name == "pre") return Divide::kPre;
    if (name == "post") return Divide::kPost;
    return make_error(ErrorCode::kInvalidArgument, "unknown --divide '" + std::string(name) + "'; known: none, pre, post");
}

const char* to_string(Divide d) { return d == Divide::kNone ? "none" : d == Divide::kPre ? "pre" : "post"; }

Result<Rotation> parse_rotation(std::string_view name) {
    if (name == "each-hop") return Rotation::kEachHop;
    if (name == "end-to-end") return Rotation::kEndToEnd;
    return make_error(ErrorCode::kInvalidArgument, "unknown --rotation '" + std::string(name) + "'; known: each-hop, end-to-end");
}

const char* to_string(Rotation r) { return r == Rotation::kEachHop ? "each-hop" : "end-to-end"; }

const char* to_string(Accum a) {
    switch (a) {
        case Accum::kFp32: return "fp32";
        case Accum::kFp16: return "fp16";
        case Accum::kBf16: return "bf16";
        case Accum::kFp8E4m3: return "fp8-e4m3";
        case Accum::kFp8E5m2: return "fp8-e5m2";
    }
    return "?";
}

std::string PathConfig::format_name() const {
    if (typed_path(path)) return to_string(path_info(path).element);
    // A declared unquantized path (DeepEP's combine, D47) carries no format: its wire is "none". (The
    // built-in fp32-ring-rs keeps the run's format, the one the gate compares it beside.)
    if (!path_info(path).quantized && !label.empty()) return "none";
    if (stage_formats.empty()) return format.name();
    std::string s;
    for (const auto& f : stage_formats) s += (s.empty() ? "" : ",") + f.name();
    return s;
}

std::vector<std::string> format_stages(PathKind path) {
    switch (path) {
        case PathKind::kA2aHierRs: return {"intra-node", "inter-node"};
        case PathKind::kTwoShotAr:
        case PathKind::kTwoShotArKeep: return {"reduce", "gather"};
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
    if (c.divide != Divide::kNone && path_info(c.path).shape == PathShape::kAllGather)
        return bad(std::string(path_info(c.path).name) + " gathers shards and sums nothing: --divide " + to_string(c.divide) +
                   " is for the reduce paths");
    // (Every output type is allowed: binary32 as it is, bf16, fp16, or an FP8 type with saturation, D49.)
    if (c.output != Accum::kFp32 && c.divide == Divide::kPost)  // (the division's bound is taken of the value it rounds)
        return bad(std::string("output ") + to_string(c.output) + " with --divide post is not modeled: divide before the sum (pre) "
                   "or leave the output binary32");
    // A 16-bit path casts its inputs to its own type already (D26); an FP8 input type narrower than it
    // (every FP8 value is a binary16 and a bfloat16 one) is the one it may take: NVLS's FP8 tensors
    // summed in binary16 (D49).
    if (c.input != Accum::kFp32 && typed_path(c.path) &&
        !(saturating(c.input) && !saturating(path_info(c.path).element)))
        return bad(std::string("input ") + to_string(c.input) + ": " + path_info(c.path).name + " casts its inputs to " +
                   to_string(path_info(c.path).element) + ", its element type, already");
    if (typed_path(c.path)) {  // D26: no quantization, the path's own type
        const std::string name = path_info(c.path).name;
        const Accum t = path_info(c.path).element;
        if (c.accum != t)
            return bad(name + " sums in " + to_string(t) + ", its element type, not " + to_string(c.accum) +
                       ": the path sets its accumulation (leave --accum out, or give " + to_string(t) + ")");
        if (c.codec) return bad(name + " does not quantize: a codec plugin has nothing to run there");
        if (saturating(t) && c.divide == Divide::kPost)
            return bad("--divide post is not what NCCL's FP8 ring and tree do: ncclAvg multiplies every input by 1/N rounded to FP8 "
                       "before the sum (--divide pre, D41)");
        if (!c.stage_formats.empty()) return bad(name + " does not quantize: it takes no per-stage formats");
        if (c.block < 1) return bad("block must be at least 1, got " + std::to_string(c.block));
        if (c.block > kMaxBlock) return bad("block " + std::to_string(c.block) + " is past the limit of 2^30");
        return Status::Ok();
    }
    if (saturating(c.accum))
        return bad(std::string("accumulation ") + to_string(c.accum) + " is the element type of NCCL's FP8 paths (nccl-fp8-" +
                   (c.accum == Accum::kFp8E4m3 ? "e4m3" : "e5m2") + "-ring-rs, ...), not of " + path_info(c.path).name);
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
    if (c.tensor_scale) {  // D50: one amax for the tensor, through the format's amax floor
        const std::string name = c.path_name();
        if (c.path != PathKind::kRingAg)
            return bad("scales per-tensor: " + std::string(path_info(c.path).name) +
                       " is not modeled with a tensor's scale (only a gather that quantizes once, ring-ag: a partial sum "
                       "requantized on the way would need an amax all-reduce per hop)");
        if (c.codec && !c.format.takes_tensor_amax())
            return bad("scales per-tensor: a codec plugin computes its own scales (only a tensor amax, nvfp4's T, is handed to it)");
        if (c.format.kind != FormatKind::kDecl || !(takes_amax_floor(c.format.decl->scale) || c.format.takes_tensor_amax()))
            return bad("scales per-tensor needs a scale computed from max(absmax, amax_floor) (fp32-amax-mul, fp32-amax-mul-rcp, "
                       "fp32-amax-mul-inv, e8m0-rceil-mul, pow2-rceil-mul: torchao-fp8-e4m3, flashinfer-fp8, fp8-e4m3-1x128, ...) or "
                       "a tensor amax (e4m3-tensor-amax: nvfp4); " +
                       c.format_name() + " takes each block's own absmax");
        if (c.input != Accum::kFp32)
            return bad("scales per-tensor with input " + std::string(to_string(c.input)) + " is not modeled: the amax is taken of the "
                       "inputs as given");
    }
    if (c.flashinfer_stripes) {  // D52
        if (c.path != PathKind::kTwoShotArKeep)
            return bad(std::string("owner flashinfer-stripes: ") + path_info(c.path).name + " keeps no sum (two-shot-ar-keep's owner does)");
        if (c.stripe() % c.block != 0)
            return bad("owner flashinfer-stripes: the stripe of " + std::to_string(c.stripe()) + " elements (FlashInfer's B for M = " +
                       std::to_string(c.elements) + ") is not a multiple of the block " + std::to_string(c.block) +
                       " (FlashInfer requires it: its stripes hold whole scale groups)");
    }
    if (c.path == PathKind::kTreeRs && !std::has_single_bit(static_cast<uint64_t>(c.ranks)))
        return bad("tree-rs needs N a power of two, got N = " + std::to_string(c.ranks));
    if (c.rotation == Rotation::kEndToEnd) {  // D28
        const std::string name = path_info(c.path).name;
        if (c.path != PathKind::kRingRs && c.path != PathKind::kA2aRs && c.path != PathKind::kA2aHierRs && c.path != PathKind::kTreeRs)
            return bad("--rotation end-to-end sums in the rotated domain on the quantized reduce-scatters (ring-rs, a2a-rs, "
                       "a2a-hier-rs, tree-rs), not on " + name);
        const FormatSpec& second = c.stage_formats.size() > 1 ? c.stage_formats[1] : c.format;
        if (!c.format.rotated() || !second.rotated())
            return bad("--rotation end-to-end needs a rotated format in every stage (e.g. int4-rht), got " + c.format_name());
        if (c.format.decl->random_signs != second.decl->random_signs)
            return bad("--rotation end-to-end needs the same rotation in every stage: " + c.format_name() +
                       " has random signs in one stage only");
        if (c.divide != Divide::kNone) return bad("--rotation end-to-end does not take --divide yet");
    }
    // A rotated format's blocks must each be a power of two long (FORMATS.md section 9): a column is
    // a block of a shard (hpz's secondary blocks: of M / G elements), the last one short.
    const bool hpz = c.path == PathKind::kHpzAgFp || c.path == PathKind::kHpzAgRequant;
    for (const FormatSpec* f : {&c.format, c.stage_formats.size() > 1 ? &c.stage_formats[1] : &c.format}) {
        if (!f->rotated()) continue;
        if (c.codec) return bad("a codec plugin implements its own format; " + f->name() + " runs qtransit's own kernels");
        if (auto st = f->check_tensor(c.shard(), c.block); !st) return bad("the shard M / N: " + st.error().message);
        if (hpz)
            if (auto st = f->check_tensor(c.elements / c.ranks_per_node, c.block); !st)
                return bad("the secondary shard M / G: " + st.error().message);
    }
    return Status::Ok();
}

namespace {

// k of each contributor from a set of events (or roundings) that all cover the same elements;
// who(id) is the contributors of one. A listed rank outside [0, ranks) counts nothing (a ledger a
// caller built by hand may hold one; the checker reports its event as malformed).
template <class Who>
void count_contributors(const std::vector<int32_t>& ids, int64_t ranks, std::vector<int32_t>& k, Who who) {
    std::vector<int32_t> diff(static_cast<size_t>(ranks) + 1, 0);
    RingRangeCounter ring(ranks, k.data(), diff.data());
    for (int32_t id : ids) {
        const Contributors& c = who(id);
        if (!c.list.empty()) {
            for (int32_t r : c.list)
                if (r >= 0 && r < ranks) ++k[static_cast<size_t>(r)];
            continue;
        }
        ring.add(c.first, c.count);
    }
    ring.finish();
}

void count_events(const ColumnRecord& column, const std::vector<int32_t>& ids, int64_t ranks, std::vector<int32_t>& k) {
    count_contributors(ids, ranks, k, [&](int32_t id) -> const Contributors& { return column.events[static_cast<size_t>(id)].contributors; });
}

// The roundings of a 16-bit path's row (D26); an id out of range counts nothing (the checker reports
// the malformed ledger by its k against the table).
void count_roundings(const ColumnRecord& column, const OutputRow& row, int64_t ranks, std::vector<int32_t>& k) {
    std::vector<int32_t> ids;
    ids.reserve(row.rounding_ids.size());
    for (int32_t id : row.rounding_ids)
        if (id >= 0 && static_cast<size_t>(id) < column.roundings.size()) ids.push_back(id);
    count_contributors(ids, ranks, k, [&](int32_t id) -> const Contributors& { return column.roundings[static_cast<size_t>(id)]; });
}

}  // namespace

bool contribution_k_of(const ColumnRecord& column, const OutputRow& row, int64_t ranks, int64_t lo, int64_t hi,
                       std::vector<int32_t>& k, bool& others, size_t from) {
    if (from == 0 || from > row.event_ids.size() || static_cast<int64_t>(k.size()) != std::max<int64_t>(hi - lo + 1, 0)) {
        from = 0;
        k.assign(static_cast<size_t>(std::max<int64_t>(hi - lo + 1, 0)), 0);
        others = false;
    }
    if (ranks < 1 || lo < 0 || hi >= ranks || lo > hi || !row.rounding_ids.empty()) return false;
    const int64_t owners = hi - lo + 1;
    for (size_t p = from; p < row.event_ids.size(); ++p) {
        const int32_t id = row.event_ids[p];
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

bool extends_ledger(const OutputRow& a, const OutputRow& b) {
    return a.rounding_ids.empty() && b.rounding_ids.empty() && a.event_ids.size() <= b.event_ids.size() &&
           std::equal(a.event_ids.begin(), a.event_ids.end(), b.event_ids.begin());
}

bool same_ledger_shape(const ColumnRecord& column, const OutputRow& a, const OutputRow& b) {
    if (a.event_ids.size() != b.event_ids.size() || a.rounding_ids != b.rounding_ids) return false;
    const size_t nev = column.events.size();
    if (a.event_ids == b.event_ids) {  // the same events (the rows of a gather or an all-reduce): one memcmp, then the ids' range
        return event_ids_in_range(a.event_ids, nev);
    }
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
    if (!row.rounding_ids.empty()) count_roundings(column, row, ranks, k);
    // Counted as if every event covered every element of the column (all paths but hpz's straddles),
    // in the same pass that finds out whether they do: one pass over the events, not two.
    // From the first event that does not, none is counted (nothing the per-element count below would
    // not read).
    static const Contributors kNone;
    bool whole = true;
    count_contributors(row.event_ids, ranks, k, [&](int32_t id) -> const Contributors& {
        if (!whole) return kNone;
        const QuantEvent& e = column.events[static_cast<size_t>(id)];
        whole = e.column_offset == 0 && static_cast<int64_t>(e.x.size()) == column.len;
        return whole ? e.contributors : kNone;
    });
    if (whole) return k;
    // Not so: counted again, per element.
    std::fill(k.begin(), k.end(), 0);
    if (!row.rounding_ids.empty()) count_roundings(column, row, ranks, k);
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
        case PathKind::kTwoShotArKeep: return holder == c.keeper(first) ? 1 : 2;
        case PathKind::kRingAg: return 1;
        case PathKind::kRingAgRequant: {
            const int64_t h = ((holder - contributor) % n + n) % n;
            return h == 0 ? 1 : static_cast<int32_t>(h);
        }
        case PathKind::kHpzAgFp: return 1;
        case PathKind::kHpzAgRequant: return 2;
        case PathKind::kFp32RingRs: return 0;
        case PathKind::kBf16RingRs:
        case PathKind::kFp16RingRs:
        case PathKind::kBf16RingAr:
        case PathKind::kFp16RingAr:
        case PathKind::kFp8E4m3RingRs:
        case PathKind::kFp8E5m2RingRs:
        case PathKind::kFp8E4m3RingAr:
        case PathKind::kFp8E5m2RingAr: {
            // The ring of ring-rs without Q: P starts as X_{c+1}, and hop h adds X_{c+1+h}: X_{c+1} and
            // X_{c+2} are in all N - 1 adds, X_{c+j} (j = 3..N, j = N being c) in N - j + 1.
            if (n < 2) return 0;
            const int64_t j = ((contributor - chunk) % n + n) % n;
            if (j == 1) return static_cast<int32_t>(n - 1);
            return static_cast<int32_t>(n - (j == 0 ? n : j) + 1);
        }
        case PathKind::kBf16TreeAr:
        case PathKind::kFp16TreeAr:
        case PathKind::kFp8E4m3TreeAr:
        case PathKind::kFp8E5m2TreeAr: {
            if (contributor < 0 || contributor >= n) return -1;
            return expected_ks(c, first)[static_cast<size_t>(contributor)];
        }
    }
    return -1;
}

TreeLinks btree_links(int64_t nodes, int64_t node) {
    TreeLinks t;
    if (nodes < 1 || node < 0 || node >= nodes) return t;
    int64_t bit = 1;
    for (; bit < nodes; bit <<= 1)
        if (bit & node) break;
    if (node == 0) {  // the root: one child, the largest power of two below `nodes`
        if (nodes > 1) t.down0 = bit >> 1;
        return t;
    }
    // node = x..x b 1 0..0 (bit its lowest set bit): its parent is x..x 1 0 0..0, or x..x 0 0 0..0
    // when that is past the last node; its children are node -+ bit/2, the upper one moved down to
    // the first power of two that stays within the nodes.
    t.up = (node ^ bit) | (bit << 1);
    if (t.up >= nodes) t.up = node ^ bit;
    int64_t low = bit >> 1;
    if (low > 0) t.down0 = node - low;
    while (low > 0 && node + low >= nodes) low >>= 1;
    if (low > 0) t.down1 = node + low;
    return t;
}

std::vector<int32_t> expected_ks(const PathConfig& c, int64_t first) {
    const int64_t n = c.ranks;
    std::vector<int32_t> k(static_cast<size_t>(std::max<int64_t>(n, 0)), 0);
    if (n < 1) return k;
    if (typed_schedule(c.path) != TypedSchedule::kTreeAr) {
        for (int64_t j = 0; j < n; ++j) k[static_cast<size_t>(j)] = expected_k(c, first, 0, j);
        return k;
    }
    // The chain inside a node of G ranks: local G-1's value starts it and local l (< G-1) adds its
    // own, so local G-1 and G-2 are in G-1 adds and local l < G-1 in l + 1. At local 0 the node's
    // sum then adds child d0's sum, then child d1's: the chain's values are in as many adds as the
    // node has children, d0's too, d1's in one. Up the tree, a node's values take the adds of every
    // ancestor it reaches them through.
    const int64_t g = std::max<int64_t>(c.ranks_per_node, 1), nodes = n / g;
    std::vector<int32_t> kids(static_cast<size_t>(nodes), 0), above(static_cast<size_t>(nodes), 0);
    std::vector<TreeLinks> links(static_cast<size_t>(nodes));
    for (int64_t v = 0; v < nodes; ++v) {
        links[static_cast<size_t>(v)] = btree_links(nodes, v);
        kids[static_cast<size_t>(v)] = (links[static_cast<size_t>(v)].down0 >= 0) + (links[static_cast<size_t>(v)].down1 >= 0);
    }
    for (int64_t v = 0; v < nodes; ++v) {
        int32_t extra = kids[static_cast<size_t>(v)];
        for (int64_t m = v; links[static_cast<size_t>(m)].up >= 0; m = links[static_cast<size_t>(m)].up) {
            const int64_t p = links[static_cast<size_t>(m)].up;
            extra += m == links[static_cast<size_t>(p)].down0 ? kids[static_cast<size_t>(p)] : 1;
        }
        above[static_cast<size_t>(v)] = extra;
    }
    for (int64_t r = 0; r < n; ++r) {
        const int64_t v = r / g, l = r % g;
        const int32_t chain = g < 2 ? 0 : static_cast<int32_t>(l == g - 1 ? g - 1 : l + 1);
        k[static_cast<size_t>(r)] = chain + above[static_cast<size_t>(v)];
    }
    return k;
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
