// The plain reference schedules (NUMERICS.md section 3, docs/DECISIONS.md D11, D12), written from the
// spec alone. Every rank's input is in memory; each path is simulated one column at a time (D12:
// one quantization block position across the ranks), step by step in the order of the schedule.
//
// Arithmetic. fl32(a + b) is the C++ float addition (IEEE-754 binary32, round to nearest even: the
// project builds with -ffp-contract=off, no fast math, and nothing here changes the rounding mode or
// sets flush-to-zero). fl16(a + b) of two binary16 values is round_to_fp16(fl32(a + b)) (D11; exact
// in binary32 since 24 >= 2 * 11 + 2), and flbf16(a + b) of two bfloat16 values round_to_bf16(fl32(a
// + b)) (D24; 24 >= 2 * 8 + 2). Q and D are reference::quantize (policy `error`) and
// reference::decode (what a receiver does with the codes and the per-block metadata). Every column
// holds at most one block (its len <= block), so each quantize below encodes exactly one block.
//
// Choices made where NUMERICS.md / D11 / D12 leave room:
// 1. Errors. A NaN/inf anywhere in x is refused before anything else: the lowest rank, then the
//    lowest element index ("tensor 'input' rank r element i"), for every path including
//    fp32-ring-rs. A partial (a sum, or a decoded value to be re-encoded) that is not finite when it
//    must be quantized (a binary16 or binary32 overflow mid-schedule) is an ErrorCode::kRangeOverflow
//    naming tensor 'partial', the rank that would encode it and the element. Any other quantize
//    error (asym range overflow, ds binary16 overflow of an input) is returned as quantize words it,
//    from the first place the schedule meets it (columns in increasing `first`, then the schedule's
//    order). An overflow in the last add is not an error: the output is ±inf (D11).
// 2. Ledger. ColumnRecord::events holds one event per (encode, decoding rank), in the order the
//    schedule makes them; rows that received the same decoding share its id (every row of a
//    reduction chain, the G rows of an hpz node). A block encoded once and decoded on several ranks
//    (ring-ag, two-shot-ar's gather, hpz's secondary shard) has one event per decoding rank, equal
//    but for to_rank. Each row's event_ids are sorted by (stage, from_rank, to_rank) (stable).
//    Stages are 0-based: ring hop h (1..N-1) is stage h-1; tree step t is stage t; a2a-rs stage 0;
//    a2a-hier-rs stage 0 (intra-node) and 1 (inter-node); two-shot-ar stage 0 (a2a) and 1 (gather);
//    ring-ag stage 0; ring-ag-requant: the encode at rank c+i is stage i; hpz stage 0 (primary) and
//    1 (secondary re-encode).
// 3. Contributors: ring-rs hop h: range {c+1, h}; a2a-rs and hier stage 0: range {j, 1}; hier stage
//    1: range {n*G, G}; tree: the explicit ascending list of ranks the sent partial holds;
//    two-shot-ar gather: range {0, N}; gather paths: range {owner, 1}; hpz-ag-requant secondary:
//    the ascending list of owners of the shards the column spans (one or more).
// 4. to_rank: ring-ag, ring-ag-requant's owner row, two-shot-ar's gather: the row's rank (the owner
//    included: from == to). hpz (both modes): the primary events' to_rank is the holder of the
//    secondary shard on the row's node, (n, l) (the rank whose decoding the backward weights came
//    from); the secondary event goes from (n, l) to the row's rank.
// 5. hpz columns are the secondary blocks (D12). A secondary block can overlap several primary
//    blocks (when B does not divide S): the row then holds one primary event per overlapping primary
//    block, each with that primary block's full x and codes and column_offset = column first -
//    block first. contribution_k (per row) then counts an owner twice when two of its primary blocks
//    meet one column (S > B, S % B != 0); per element (through column_offset) k is 1 or 2 as the
//    table says. first_block_absmax is max |x| of the
//    binary32 values of the primary block each element was encoded in.
// 6. fp16 and bf16 accumulation (D11, D24) apply to the reduce paths, two-shot-ar's reduction and
//    fp32-ring-rs; the gather paths ignore them. Below, binary16 stands for the type (bfloat16
//    under bf16). A value entering a sum is rounded to binary16 and recorded in
//    term_round_* (|t| before rounding, count 1) when it is an input or a decoded value; a running
//    partial that is already the binary16 result of an add is not rounded or recorded again. The
//    initial ring partial P = X_{c+1} is quantized as it is (binary32): it enters no add until it is
//    decoded. A one-term sum (a2a-rs with N = 1, a hier stage with G = 1) is still rounded; a path
//    that performs no add at all (ring-rs, fp32-ring-rs, tree-rs with N = 1) outputs X_0 unrounded.
//    The output of two-shot-ar is the decoding of the binary16 reduced shard, not rounded again.
// 7. add_abs_sum / add_count of a value include every add upstream of it: the adds that produced a
//    partial that was then quantized and decoded (ring hops, the hier stage-1 sums, the partner's
//    partial in a tree step, two-shot-ar's reduction in every row). The same for term_round_*.
#include "qtransit/reference/paths.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "qtransit/reference/formats.hpp"
#include "qtransit/reference/hadamard.hpp"

namespace qtransit::reference {

namespace {

static_assert(std::numeric_limits<float>::is_iec559, "binary32 arithmetic is required");

// A value on its way through a schedule (one column of one rank), with its ledger.
struct Partial {
    std::vector<float> v;
    std::vector<int32_t> events;  // ids into the column's ColumnRecord::events
    std::vector<double> add_abs;
    std::vector<int32_t> add_n;
    std::vector<double> tr_abs;   // fp16 and bf16 accumulation only
    std::vector<int32_t> tr_n;    // fp16 and bf16 accumulation only
    std::vector<int32_t> holds;   // contributors whose inputs are in v (ascending)
    std::vector<int32_t> rounds;  // the 16-bit paths: ids into ColumnRecord::roundings (D26)
    std::vector<double> sat_ex;   // NCCL's FP8 paths only (D41): what the saturated adds clamped away
    std::vector<int32_t> sat_n;   // and how many adds saturated
    bool low_sum = false;         // v is the result of an add rounded to the accumulation type
    bool started = false;         // accumulate(): the sum has its first term
};

Partial make_partial(int64_t len, Accum ty) {
    Partial p;
    p.v.assign(static_cast<size_t>(len), 0.0f);
    p.add_abs.assign(static_cast<size_t>(len), 0.0);
    p.add_n.assign(static_cast<size_t>(len), 0);
    if (low_precision(ty)) {
        p.tr_abs.assign(static_cast<size_t>(len), 0.0);
        p.tr_n.assign(static_cast<size_t>(len), 0);
    }
    if (saturating(ty)) {
        p.sat_ex.assign(static_cast<size_t>(len), 0.0);
        p.sat_n.assign(static_cast<size_t>(len), 0);
    }
    return p;
}

// dst's value now depends on src's: take src's upstream adds, roundings, events and contributors.
void absorb(Partial& dst, const Partial& src) {
    for (size_t i = 0; i < dst.v.size(); ++i) {
        dst.add_abs[i] += src.add_abs[i];
        dst.add_n[i] += src.add_n[i];
        if (!dst.tr_abs.empty()) {
            dst.tr_abs[i] += src.tr_abs[i];
            dst.tr_n[i] += src.tr_n[i];
        }
        if (!dst.sat_ex.empty()) {
            dst.sat_ex[i] += src.sat_ex[i];
            dst.sat_n[i] += src.sat_n[i];
        }
    }
    dst.events.insert(dst.events.end(), src.events.begin(), src.events.end());
    dst.rounds.insert(dst.rounds.end(), src.rounds.begin(), src.rounds.end());
    dst.holds.insert(dst.holds.end(), src.holds.begin(), src.holds.end());
    std::sort(dst.holds.begin(), dst.holds.end());
    dst.holds.erase(std::unique(dst.holds.begin(), dst.holds.end()), dst.holds.end());
}

// Under fp16 (bf16) accumulation, a term entering a sum is rounded to binary16 (bfloat16),
// recorded when `record`.
float term(Partial& p, size_t i, float t, Accum ty, bool record) {
    if (!low_precision(ty)) return t;
    if (record) {
        p.tr_abs[i] += std::fabs(static_cast<double>(t));
        p.tr_n[i] += 1;
    }
    return round_to_accum(t, ty);
}

// One add of the accumulation, left operand first: fl32(a + b), fl16(a + b), flbf16(a + b) or
// NCCL's FP8 fl8sat(fl16(a + b)); recorded in p, a saturation with what it clamped away (D41):
// |a + b| - max, exact in binary64 (two FP8 values).
float add(Partial& p, size_t i, float a, float b, Accum ty) {
    const float r = round_to_accum(a + b, ty);
    p.add_abs[i] += std::fabs(static_cast<double>(r));
    p.add_n[i] += 1;
    if (saturates_in(a + b, ty)) {
        p.sat_ex[i] += std::fabs(static_cast<double>(a) + static_cast<double>(b)) - saturation_max(ty);
        p.sat_n[i] += 1;
    }
    return r;
}

// acc = acc + t (element-wise, acc the left operand), or acc = t for the first term of the sum.
void accumulate(Partial& acc, std::span<const float> t, Accum ty, bool record_round) {
    for (size_t i = 0; i < acc.v.size(); ++i) {
        const float ti = term(acc, i, t[i], ty, record_round);
        acc.v[i] = acc.started ? add(acc, i, acc.v[i], ti, ty) : ti;
    }
    acc.low_sum = low_precision(ty);  // every value of acc is now of the type under fp16 or bf16
    acc.started = true;
}

struct Encoded {
    int32_t id = 0;  // the event's index in ColumnRecord::events
    std::vector<float> decoded;
};

Contributors range(int64_t first, int64_t count, int64_t n) {
    Contributors c;
    c.first = ((first % n) + n) % n;
    c.count = count;
    return c;
}

Contributors list(std::vector<int32_t> ranks) {
    Contributors c;
    c.count = static_cast<int64_t>(ranks.size());
    if (!ranks.empty()) c.first = ranks.front();
    c.list = std::move(ranks);
    return c;
}

std::string fmt(float v) {
    std::ostringstream os;
    os.precision(9);
    os << v;
    return os.str();
}

// Q then D of one block (the column) of values, sent by `from` to `to`; the event is appended to
// `events`.
Result<Encoded> encode(const PathConfig& c, std::vector<QuantEvent>& events, std::span<const float> v,
                       int32_t stage, int64_t from, int64_t to, Contributors who, const Site& site) {
    if (site.tensor == "partial") {
        for (size_t i = 0; i < v.size(); ++i)
            if (!std::isfinite(v[i]))
                return make_error(ErrorCode::kRangeOverflow,
                                  describe(site, static_cast<int64_t>(i)) + ": value " + fmt(v[i]) +
                                      " is a partial that overflowed (" + to_string(c.accum) +
                                      " accumulation) and must be quantized again; policy 'error' refuses it");
    }
    // Stochastic rounding's key (FORMATS.md section 4): the run's seed, hop = the event's stage; the
    // rank word is the quantizing rank (site.rank, which is `from`) and g = site.index_base + i, the
    // column's first element plus i (this event's column_offset is 0; hpz's forward blocks are
    // encoded at their own first element, and column first - column_offset is exactly that).
    const FormatSpec& f = c.format_of_stage(stage);  // per-stage formats (issue 17)
    auto q = quantize(f, v, c.block, Nonfinite::kError, site, StochasticKey{c.seed, static_cast<uint32_t>(stage)});
    if (!q.ok()) return q.error();
    QuantEvent ev;
    ev.stage = stage;
    ev.format_stage = c.format_stage_of(stage);
    ev.from_rank = from;
    ev.to_rank = to;
    ev.scale = q->scales.at(0);
    ev.offset = f.has_offset() ? q->offsets.at(0) : 0.0f;
    ev.contributors = std::move(who);
    ev.x.assign(v.begin(), v.end());
    ev.codes = q->codes;
    ev.column_offset = 0;
    Encoded e;
    e.id = static_cast<int32_t>(events.size());
    events.push_back(std::move(ev));
    e.decoded = decode(f, q->codes, q->scales, q->offsets, c.block, c.seed, site.index_base);
    return e;
}

// A copy of event `id` of `events`, appended, decoded on `to` instead.
int32_t redirect(std::vector<QuantEvent>& events, int32_t id, int64_t to) {
    QuantEvent ev = events[static_cast<size_t>(id)];
    ev.to_rank = to;
    events.push_back(std::move(ev));
    return static_cast<int32_t>(events.size() - 1);
}

OutputRow to_row(int64_t rank, const Partial& p, const std::vector<QuantEvent>& events) {
    OutputRow row;
    row.rank = rank;
    row.values = p.v;
    row.event_ids = p.events;
    std::stable_sort(row.event_ids.begin(), row.event_ids.end(), [&events](int32_t ia, int32_t ib) {
        const QuantEvent& a = events[static_cast<size_t>(ia)];
        const QuantEvent& b = events[static_cast<size_t>(ib)];
        if (a.stage != b.stage) return a.stage < b.stage;
        if (a.from_rank != b.from_rank) return a.from_rank < b.from_rank;
        return a.to_rank < b.to_rank;
    });
    row.rounding_ids = p.rounds;
    row.add_abs_sum = p.add_abs;
    row.add_count = p.add_n;
    row.term_round_abs_sum = p.tr_abs;
    row.term_round_count = p.tr_n;
    row.saturation_count = p.sat_n;
    row.saturation_excess = p.sat_ex;
    return row;
}

class Runner {
public:
    // x: what the ranks reduce or gather; target: the inputs the exact target sums (x itself, but
    // for --divide pre, whose x is every input divided by N: D27).
    Runner(const PathConfig& c, std::span<const float> x, std::span<const float> target)
        : c_(c), x_(x), t_(target), n_(c.ranks), m_(c.elements), s_(c.shard()), ty_(c.accum) {}

    Result<std::vector<ColumnRecord>> run() {
        std::vector<ColumnRecord> out;
        if (c_.path == PathKind::kHpzAgFp || c_.path == PathKind::kHpzAgRequant) {
            if (auto st = hpz(out); !st.ok()) return st.error();
            return out;
        }
        for (int64_t ch = 0; ch < n_; ++ch) {
            for (int64_t first = ch * s_; first < (ch + 1) * s_; first += c_.block) {
                const int64_t len = std::min(c_.block, (ch + 1) * s_ - first);
                ColumnRecord rec;
                rec.first = first;
                rec.len = len;
                Status st = column(ch, first, len, rec);
                if (!st.ok()) return st.error();
                out.push_back(std::move(rec));
            }
        }
        return out;
    }

private:
    std::span<const float> in(int64_t rank, int64_t first, int64_t len) const {
        return x_.subspan(static_cast<size_t>(rank * m_ + first), static_cast<size_t>(len));
    }
    int64_t mod(int64_t v) const { return ((v % n_) + n_) % n_; }
    static Site input_site(int64_t rank, int64_t first) { return Site{"input", rank, first}; }
    static Site partial_site(int64_t rank, int64_t first) { return Site{"partial", rank, first}; }

    Partial input_partial(int64_t rank, int64_t first, int64_t len) const {
        Partial p = make_partial(len, ty_);
        auto v = in(rank, first, len);
        p.v.assign(v.begin(), v.end());
        p.holds = {static_cast<int32_t>(rank)};
        return p;
    }

    Status column(int64_t ch, int64_t first, int64_t len, ColumnRecord& rec) {
        const PathShape shape = path_info(c_.path).shape;
        if (shape == PathShape::kAllGather) {
            auto w = in(ch, first, len);
            rec.contributions.assign(w.begin(), w.end());
            rec.contribution_rows = 1;
            float a = 0;
            for (float v : w) a = std::max(a, std::fabs(v));
            rec.first_block_absmax.assign(static_cast<size_t>(len), a);
        } else {
            for (int64_t j = 0; j < n_; ++j) {
                auto v = t_.subspan(static_cast<size_t>(j * m_ + first), static_cast<size_t>(len));
                rec.contributions.insert(rec.contributions.end(), v.begin(), v.end());
            }
            rec.contribution_rows = n_;
        }
        switch (c_.path) {
            case PathKind::kRingRs: return ring(ch, first, len, true, rec);
            case PathKind::kFp32RingRs: return ring(ch, first, len, false, rec);
            case PathKind::kA2aRs: {
                Partial t;
                if (auto st = a2a(ch, first, len, t, rec); !st.ok()) return st;
                rec.outputs.push_back(to_row(ch, t, rec.events));
                return Status::Ok();
            }
            case PathKind::kA2aHierRs: return hier(ch, first, len, rec);
            case PathKind::kTreeRs: return tree(ch, first, len, rec);
            case PathKind::kTwoShotAr:
            case PathKind::kTwoShotArKeep: return two_shot(ch, first, len, rec);
            case PathKind::kRingAg: return ring_ag(ch, first, len, rec);
            case PathKind::kRingAgRequant: return ring_ag_requant(ch, first, len, rec);
            default: break;
        }
        switch (typed_schedule(c_.path)) {
            case TypedSchedule::kRingRs: return ring16(ch, first, len, false, rec);
            case TypedSchedule::kRingAr: return ring16(ch, first, len, true, rec);
            case TypedSchedule::kTreeAr: {
                const Partial s = node_sum(0, first, len, rec);
                for (int64_t r = 0; r < n_; ++r) rec.outputs.push_back(to_row(r, s, rec.events));
                return Status::Ok();
            }
            case TypedSchedule::kNone: break;
        }
        return make_error(ErrorCode::kInvalidArgument, "internal: unhandled path");
    }

    // ring-rs (quantized) and fp32-ring-rs: P starts on rank c+1 as X_{c+1}; hop h = 1..N-1 goes from
    // rank c+h to rank c+h+1, which sets P = D(Q(P)) + X_self (or P + X_self unquantized).
    Status ring(int64_t ch, int64_t first, int64_t len, bool quantized, ColumnRecord& rec) {
        Partial p = input_partial(mod(ch + 1), first, len);
        for (int64_t h = 1; h < n_; ++h) {
            const int64_t from = mod(ch + h), to = mod(ch + h + 1);
            std::vector<float> left;
            bool record_left = true;
            if (quantized) {
                const Site site = h == 1 ? input_site(from, first) : partial_site(from, first);
                auto e = encode(c_, rec.events, p.v, static_cast<int32_t>(h - 1), from, to, range(ch + 1, h, n_),
                                site);
                if (!e.ok()) return e.error();
                p.events.push_back(e->id);
                left = std::move(e->decoded);
            } else {
                left = p.v;
                record_left = !p.low_sum;
            }
            auto self = in(to, first, len);
            for (size_t i = 0; i < p.v.size(); ++i) {
                const float a = term(p, i, left[i], ty_, record_left);
                const float b = term(p, i, self[i], ty_, true);
                p.v[i] = add(p, i, a, b, ty_);
            }
            p.low_sum = low_precision(ty_);
        }
        rec.outputs.push_back(to_row(ch, p, rec.events));
        return Status::Ok();
    }

    // The 16-bit paths (D26). x is of the type already (run_path_plain cast it), so no term is
    // rounded; every add is fl(a + b) in the type, and the ledger's rounding names the contributors
    // its result holds.
    int32_t rounding(ColumnRecord& rec, const Partial& s) const {
        rec.roundings.push_back(list(s.holds));
        return static_cast<int32_t>(rec.roundings.size() - 1);
    }
    void hold(Partial& s, int64_t rank) const {
        s.holds.push_back(static_cast<int32_t>(rank));
        std::sort(s.holds.begin(), s.holds.end());
    }

    // bf16-/fp16-ring-rs: S = X_{ch+1}, then S = fl(S + X_{ch+1+h}) for h = 1..N-1, held by rank ch.
    // -ring-ar: the all-gather copies S to every rank.
    Status ring16(int64_t ch, int64_t first, int64_t len, bool all_reduce, ColumnRecord& rec) {
        Partial s = input_partial(mod(ch + 1), first, len);
        for (int64_t h = 1; h < n_; ++h) {
            const int64_t self = mod(ch + 1 + h);
            auto v = in(self, first, len);
            for (size_t i = 0; i < s.v.size(); ++i) s.v[i] = add(s, i, s.v[i], v[i], ty_);
            hold(s, self);
            s.rounds.push_back(rounding(rec, s));
        }
        if (!all_reduce) {
            rec.outputs.push_back(to_row(ch, s, rec.events));
            return Status::Ok();
        }
        for (int64_t r = 0; r < n_; ++r) rec.outputs.push_back(to_row(r, s, rec.events));
        return Status::Ok();
    }

    // bf16-/fp16-tree-ar: node v's sum. Its chain: S = X_(v,G-1), then S = fl(X_(v,l) + S) for l =
    // G-2 down to 0; then S = fl(S + T_d0), then fl(S + T_d1), T the sums of v's children in NCCL's
    // binary tree (btree_links). Every rank holds the root's sum.
    Partial node_sum(int64_t v, int64_t first, int64_t len, ColumnRecord& rec) const {
        const int64_t g = c_.ranks_per_node;
        Partial s = input_partial(v * g + g - 1, first, len);
        for (int64_t l = g - 2; l >= 0; --l) {
            auto x = in(v * g + l, first, len);
            for (size_t i = 0; i < s.v.size(); ++i) s.v[i] = add(s, i, x[i], s.v[i], ty_);
            hold(s, v * g + l);
            s.rounds.push_back(rounding(rec, s));
        }
        const TreeLinks links = btree_links(c_.nodes(), v);
        for (int64_t child : {links.down0, links.down1}) {
            if (child < 0) continue;
            const Partial t = node_sum(child, first, len, rec);
            for (size_t i = 0; i < s.v.size(); ++i) s.v[i] = add(s, i, s.v[i], t.v[i], ty_);
            absorb(s, t);
            s.rounds.push_back(rounding(rec, s));
        }
        return s;
    }

    // a2a-rs: rank ch sums D(Q(X_0[ch])) + ... + D(Q(X_{N-1}[ch])), left to right.
    Status a2a(int64_t ch, int64_t first, int64_t len, Partial& acc, ColumnRecord& rec) {
        acc = make_partial(len, ty_);
        for (int64_t j = 0; j < n_; ++j) {
            auto e = encode(c_, rec.events, in(j, first, len), 0, j, ch, range(j, 1, n_), input_site(j, first));
            if (!e.ok()) return e.error();
            acc.events.push_back(e->id);
            accumulate(acc, e->decoded, ty_, true);
        }
        return Status::Ok();
    }

    // a2a-hier-rs: for shard p = ch with local index l' = p mod G, on every node n rank (n, l') forms
    // U^(n) = sum_j D(Q(X_{(n,j)}[p])) (stage 0), requantizes it and sends it to rank p (stage 1);
    // rank p sums D(Q(U^(n))) over n = 0..nodes-1.
    Status hier(int64_t ch, int64_t first, int64_t len, ColumnRecord& rec) {
        const int64_t g = c_.ranks_per_node, lp = ch % g;
        Partial acc = make_partial(len, ty_);
        for (int64_t node = 0; node < c_.nodes(); ++node) {
            const int64_t mid = node * g + lp;
            Partial u = make_partial(len, ty_);
            for (int64_t j = 0; j < g; ++j) {
                const int64_t src = node * g + j;
                auto e = encode(c_, rec.events, in(src, first, len), 0, src, mid, range(src, 1, n_),
                                input_site(src, first));
                if (!e.ok()) return e.error();
                u.events.push_back(e->id);
                accumulate(u, e->decoded, ty_, true);
            }
            auto e = encode(c_, rec.events, u.v, 1, mid, ch, range(node * g, g, n_), partial_site(mid, first));
            if (!e.ok()) return e.error();
            absorb(acc, u);
            acc.events.push_back(e->id);
            accumulate(acc, e->decoded, ty_, true);
        }
        rec.outputs.push_back(to_row(ch, acc, rec.events));
        return Status::Ok();
    }

    // tree-rs: at step t (d = N / 2^(t+1)) every rank r whose range still holds chunk ch and whose
    // bit d differs from ch's sends Q(partial) to r XOR d, which sets partial = own + D(Q(other)).
    Status tree(int64_t ch, int64_t first, int64_t len, ColumnRecord& rec) {
        std::vector<Partial> part;
        std::vector<bool> active(static_cast<size_t>(n_), true);
        for (int64_t r = 0; r < n_; ++r) part.push_back(input_partial(r, first, len));
        int32_t stage = 0;
        for (int64_t d = n_ / 2; d >= 1; d /= 2, ++stage) {
            for (int64_t r = 0; r < n_; ++r) {
                if (!active[static_cast<size_t>(r)] || (r & d) == (ch & d)) continue;
                const int64_t p = r ^ d;
                Partial& snd = part[static_cast<size_t>(r)];
                Partial& own = part[static_cast<size_t>(p)];
                const Site site = stage == 0 ? input_site(r, first) : partial_site(r, first);
                auto e = encode(c_, rec.events, snd.v, stage, r, p, list(snd.holds), site);
                if (!e.ok()) return e.error();
                const bool record_own = !own.low_sum;
                for (size_t i = 0; i < own.v.size(); ++i) {
                    const float a = term(own, i, own.v[i], ty_, record_own);
                    const float b = term(own, i, e->decoded[i], ty_, true);
                    own.v[i] = add(own, i, a, b, ty_);
                }
                own.low_sum = low_precision(ty_);
                absorb(own, snd);
                own.events.push_back(e->id);
                active[static_cast<size_t>(r)] = false;
            }
        }
        rec.outputs.push_back(to_row(ch, part[static_cast<size_t>(ch)], rec.events));
        return Status::Ok();
    }

    // two-shot-ar: a2a-rs onto rank ch, which quantizes the reduced shard once; every rank decodes it.
    // two-shot-ar-keep (D46, FlashInfer): rank ch holds its sum itself, started from +0 as FlashInfer
    // starts it (an all -0 sum is +0), and every other rank decodes its quantization. A two-shot-ar
    // declared with start = "zero" (QuickReduce's, D57) starts its sum from +0 too.
    Status two_shot(int64_t ch, int64_t first, int64_t len, ColumnRecord& rec) {
        Partial t;
        if (auto st = a2a(ch, first, len, t, rec); !st.ok()) return st;
        const bool keep = c_.path == PathKind::kTwoShotArKeep;
        if (keep || c_.sum_from_zero)
            for (float& v : t.v) v = v + 0.0f;
        const int64_t to = keep ? mod(ch + 1) : 0;  // the first rank that decodes it
        auto e = encode(c_, rec.events, t.v, 1, ch, to, range(0, n_, n_), partial_site(ch, first));
        if (!e.ok()) return e.error();
        const int64_t keeper = keep ? c_.keeper(first) : -1;  // the chunk's owner, or FlashInfer's stripe's (D52)
        for (int64_t r = 0; r < n_; ++r) {
            if (r == keeper) {
                rec.outputs.push_back(to_row(r, t, rec.events));
                continue;
            }
            Partial row = t;
            row.v = e->decoded;
            row.events.push_back(r == to ? e->id : redirect(rec.events, e->id, r));
            rec.outputs.push_back(to_row(r, row, rec.events));
        }
        return Status::Ok();
    }

    Partial gather_row(int64_t len, std::vector<float> values, std::vector<int32_t> events) const {
        Partial p = make_partial(len, Accum::kFp32);
        p.v = std::move(values);
        p.events = std::move(events);
        return p;
    }

    // ring-ag: rank ch encodes its shard's block once; every rank (the owner too) decodes it.
    Status ring_ag(int64_t ch, int64_t first, int64_t len, ColumnRecord& rec) {
        auto e = encode(c_, rec.events, in(ch, first, len), 0, ch, 0, range(ch, 1, n_), input_site(ch, first));
        if (!e.ok()) return e.error();
        for (int64_t r = 0; r < n_; ++r) {
            const int32_t id = r == 0 ? e->id : redirect(rec.events, e->id, r);
            rec.outputs.push_back(to_row(r, gather_row(len, e->decoded, {id}), rec.events));
        }
        return Status::Ok();
    }

    // ring-ag-requant: V_1 = D(Q(W_c)) leaves rank c; rank c+h holds V_h, V_h = D(Q(V_{h-1})) re-encoded
    // by rank c+h-1; the owner holds V_1.
    Status ring_ag_requant(int64_t ch, int64_t first, int64_t len, ColumnRecord& rec) {
        std::vector<OutputRow> rows(static_cast<size_t>(n_));
        auto e = encode(c_, rec.events, in(ch, first, len), 0, ch, mod(ch + 1), range(ch, 1, n_),
                        input_site(ch, first));
        if (!e.ok()) return e.error();
        const int32_t own = n_ == 1 ? e->id : redirect(rec.events, e->id, ch);
        rows[static_cast<size_t>(ch)] = to_row(ch, gather_row(len, e->decoded, {own}), rec.events);
        std::vector<int32_t> chain{e->id};
        std::vector<float> v = e->decoded;
        for (int64_t h = 1; h < n_; ++h) {
            const int64_t holder = mod(ch + h);
            if (h > 1) {
                const int64_t from = mod(ch + h - 1);
                auto e2 = encode(c_, rec.events, v, static_cast<int32_t>(h - 1), from, holder, range(ch, 1, n_),
                                 partial_site(from, first));
                if (!e2.ok()) return e2.error();
                chain.push_back(e2->id);
                v = std::move(e2->decoded);
            }
            rows[static_cast<size_t>(holder)] = to_row(holder, gather_row(len, v, chain), rec.events);
        }
        rec.outputs = std::move(rows);
        return Status::Ok();
    }

    // hpz-ag-fp / hpz-ag-requant: forward ring-ag gives F; columns are the secondary blocks
    // [l M/G + b B, ...), restarting at every l M/G.
    Status hpz(std::vector<ColumnRecord>& out) {
        struct Primary {
            int64_t owner, first;
            QuantEvent ev;
            float absmax;
        };
        std::vector<Primary> prim;
        std::vector<float> f(static_cast<size_t>(m_)), w(static_cast<size_t>(m_));
        std::vector<size_t> block_of(static_cast<size_t>(m_));
        for (int64_t ch = 0; ch < n_; ++ch) {
            for (int64_t first = ch * s_; first < (ch + 1) * s_; first += c_.block) {
                const int64_t len = std::min(c_.block, (ch + 1) * s_ - first);
                auto xs = in(ch, first, len);
                std::vector<QuantEvent> one;
                auto e = encode(c_, one, xs, 0, ch, ch, range(ch, 1, n_), input_site(ch, first));
                if (!e.ok()) return e.error();
                float a = 0;
                for (float v : xs) a = std::max(a, std::fabs(v));
                for (int64_t i = 0; i < len; ++i) {
                    f[static_cast<size_t>(first + i)] = e->decoded[static_cast<size_t>(i)];
                    w[static_cast<size_t>(first + i)] = xs[static_cast<size_t>(i)];
                    block_of[static_cast<size_t>(first + i)] = prim.size();
                }
                prim.push_back({ch, first, std::move(one.front()), a});
            }
        }
        const bool requant = c_.path == PathKind::kHpzAgRequant;
        const int64_t g = c_.ranks_per_node, sec = m_ / g;
        for (int64_t l = 0; l < g; ++l) {
            for (int64_t first = l * sec; first < (l + 1) * sec; first += c_.block) {
                const int64_t len = std::min(c_.block, (l + 1) * sec - first);
                ColumnRecord rec;
                rec.first = first;
                rec.len = len;
                rec.contributions.assign(w.begin() + first, w.begin() + first + len);
                rec.contribution_rows = 1;
                std::vector<size_t> blocks;
                std::vector<int32_t> owners;
                for (int64_t i = first; i < first + len; ++i) {
                    const size_t b = block_of[static_cast<size_t>(i)];
                    rec.first_block_absmax.push_back(prim[b].absmax);
                    if (blocks.empty() || blocks.back() != b) blocks.push_back(b);
                    const auto o = static_cast<int32_t>(prim[b].owner);
                    if (owners.empty() || owners.back() != o) owners.push_back(o);
                }
                const std::span<const float> fcol(f.data() + first, static_cast<size_t>(len));
                for (int64_t node = 0; node < c_.nodes(); ++node) {
                    const int64_t holder = node * g + l;
                    std::vector<int32_t> primary;
                    for (size_t b : blocks) {  // the forward events, as decoded by the holder
                        QuantEvent ev = prim[b].ev;
                        ev.to_rank = holder;
                        ev.column_offset = first - prim[b].first;
                        primary.push_back(static_cast<int32_t>(rec.events.size()));
                        rec.events.push_back(std::move(ev));
                    }
                    std::vector<float> values(fcol.begin(), fcol.end());
                    int32_t secondary = -1;
                    if (requant) {  // each node's holder re-encodes its own copy of the secondary shard
                        auto e = encode(c_, rec.events, fcol, 1, holder, node * g, list(owners),
                                        Site{"secondary", holder, first});
                        if (!e.ok()) return e.error();
                        values = std::move(e->decoded);
                        secondary = e->id;
                    }
                    for (int64_t lr = 0; lr < g; ++lr) {
                        const int64_t r = node * g + lr;
                        std::vector<int32_t> events = primary;
                        if (requant) events.push_back(lr == 0 ? secondary : redirect(rec.events, secondary, r));
                        rec.outputs.push_back(to_row(r, gather_row(len, values, std::move(events)), rec.events));
                    }
                }
                out.push_back(std::move(rec));
            }
        }
        return Status::Ok();
    }

    const PathConfig& c_;
    std::span<const float> x_, t_;
    int64_t n_, m_, s_;
    Accum ty_;
};

// --divide (D27): x / N rounded to the path's element type, from the binary32 quotient.
float divided(float v, const PathConfig& c) { return divide_to(v, c.ranks, division_type(c)); }

// Runs the schedule on x (the inputs, or for --divide pre each divided by N) against the exact
// target's inputs `target`; --divide post scales every output value by 1/N.
Result<std::vector<ColumnRecord>> run_divided(const PathConfig& c, std::span<const float> target) {
    if (c.rotation == Rotation::kEndToEnd) {
        // D28: every rank's block of every column rotated once, the column's signs keyed by (seed,
        // column first) on every rank; the schedule quantizes the rotated values with each stage
        // format's element type and scale alone (rotation_twin) and sums in the rotated domain;
        // every output row is rotated back once. The targets stay the unrotated inputs.
        const bool signs = c.format.decl->random_signs;
        std::vector<float> rot(target.begin(), target.end());
        const int64_t s = c.shard();
        for (int64_t r = 0; r < c.ranks; ++r)
            for (int64_t first = 0; first < c.elements; first += std::min(c.block, s - first % s)) {
                const int64_t len = std::min(c.block, s - first % s);
                std::span<float> v(rot.data() + r * c.elements + first, static_cast<size_t>(len));
                rotate_forward(v, signs, c.seed, first);
                if (auto st = check_rotation_limit(v, Site{"input", r, first}, 0, c.format.name()); !st) return st.error();
            }
        PathConfig q = c;
        q.rotation = Rotation::kEachHop;
        q.format = c.format.rotation_twin();
        for (auto& f : q.stage_formats) f = f.rotation_twin();
        auto out = Runner(q, rot, target).run();
        if (!out.ok()) return out;
        for (auto& rec : *out) {
            rec.rotated_sum = true;
            for (auto& row : rec.outputs) rotate_inverse(row.values, signs, c.seed, rec.first);
        }
        return out;
    }
    std::vector<float> pre;
    if (c.divide == Divide::kPre) {
        pre.assign(target.begin(), target.end());
        for (float& v : pre) v = divided(v, c);
    }
    auto out = Runner(c, c.divide == Divide::kPre ? std::span<const float>(pre) : target, target).run();
    if (out.ok() && c.divide == Divide::kPost)
        for (auto& rec : *out)
            for (auto& row : rec.outputs)
                for (float& v : row.values) v = divided(v, c);
    return out;
}

// D46: every output value rounded to the declared output type, last (after the rotation back and the
// division).
Result<std::vector<ColumnRecord>> run_output(const PathConfig& c, std::span<const float> target) {
    auto out = run_divided(c, target);
    if (out.ok() && c.output != Accum::kFp32)
        for (auto& rec : *out)
            for (auto& row : rec.outputs) {
                const size_t n = row.values.size();
                if (saturating(c.output)) {  // D49: an FP8 output's clamp is an event, counted as an add's (D41)
                    if (row.saturation_count.size() != n) row.saturation_count.assign(n, 0);
                    if (row.saturation_excess.size() != n) row.saturation_excess.assign(n, 0.0);
                }
                for (size_t i = 0; i < n; ++i) {
                    const float v = row.values[i];
                    if (!std::isfinite(v)) continue;  // stays non-finite: the checker's failure, never a clamp
                    if (cast_saturates(v, c.output)) {
                        row.saturation_excess[i] += std::fabs(static_cast<double>(v)) - saturation_max(c.output);
                        ++row.saturation_count[i];
                    }
                    row.values[i] = cast_to_type(v, c.output);
                }
            }
    return out;
}

}  // namespace

Result<std::vector<ColumnRecord>> run_path_plain(const PathConfig& c, std::span<const float> x) {
    if (Status st = validate(c); !st.ok()) return st.error();
    if (static_cast<int64_t>(x.size()) != c.ranks * c.elements)
        return make_error(ErrorCode::kInvalidArgument,
                          "input holds " + std::to_string(x.size()) + " values, expected N * M = " +
                              std::to_string(c.ranks) + " * " + std::to_string(c.elements) + " = " +
                              std::to_string(c.ranks * c.elements));
    for (int64_t r = 0; r < c.ranks; ++r)
        for (int64_t i = 0; i < c.elements; ++i) {
            const float v = x[static_cast<size_t>(r * c.elements + i)];
            if (!std::isfinite(v))
                return make_error(ErrorCode::kNonFinite,
                                  describe(Site{"input", r, 0}, i) + ": value " + fmt(v) +
                                      " is not finite (policy 'error' refuses NaN and inf)");
        }
    if (typed_path(c.path) || c.input != Accum::kFp32) {
        // D26: the inputs are of the path's type; D47: of its declared input type. Cast, refusing
        // what it cannot hold.
        const bool typed = typed_path(c.path);
        const Accum type = c.input != Accum::kFp32 ? c.input : c.accum;  // D49: an FP8 input on a 16-bit path
        std::vector<float> cast(x.begin(), x.end());
        for (size_t j = 0; j < cast.size(); ++j) {
            const float r = cast_to_type(cast[j], type);  // FP8: one rounding from binary32 (D49)
            if (!std::isfinite(r) || cast_saturates(cast[j], type)) {
                const int64_t rank = static_cast<int64_t>(j) / c.elements, i = static_cast<int64_t>(j) % c.elements;
                return make_error(ErrorCode::kRangeOverflow, describe(Site{"input", rank, 0}, i) + ": value " + fmt(cast[j]) +
                                                                 " overflows " + to_string(type) +
                                                                 (typed && c.input == Accum::kFp32 ? ", the element type of " : ", the input type of ") +
                                                                 c.path_name() + " (its inputs are cast to it first)");
            }
            cast[j] = r;
        }
        return run_output(c, cast);
    }
    return run_output(c, x);
}

}  // namespace qtransit::reference
