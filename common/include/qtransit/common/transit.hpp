// The result model of a collective path (NUMERICS.md section 3): what a path computed for one
// *column* (one quantization block position, across every rank that contributes to it) and the
// ledger of quantization events that reached each output. Collectives (and the plain reference
// schedules) produce ColumnRecords; the checker in reference/ consumes them to compute exact errors
// and bounds. Working one column at a time is what lets a simulation of hundreds of ranks hold one
// block column of all ranks in memory instead of every rank's tensor.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "qtransit/common/format.hpp"
#include "qtransit/common/hd.hpp"
#include "qtransit/common/status.hpp"

namespace qtransit {

enum class PathKind : uint8_t {
    kRingRs,         // quantized ring reduce-scatter
    kA2aRs,          // qgZ one hop: all-to-all, sum of decoded contributions
    kA2aHierRs,      // qgZ two hops: intra-node all-to-all with the swizzle, then inter-node
    kTreeRs,         // recursive halving (N a power of two)
    kTwoShotAr,      // all-reduce: a2a-rs, then an all-gather quantized once
    kRingAg,         // qwZ all-gather: quantized once, codes travel unchanged
    kRingAgRequant,  // naive ring all-gather that decodes and re-encodes at every hop
    kHpzAgFp,        // hpZ: forward ring-ag, secondary shard kept unquantized
    kHpzAgRequant,   // hpZ: secondary shard re-encoded before the intra-node gather
    kFp32RingRs,     // unquantized ring reduce-scatter
    // Unquantized 16-bit paths (issue 18, docs/DECISIONS.md D26): what NCCL does in bf16 or fp16.
    // Inputs are cast to the type first; every add is rounded to it; k counts those roundings.
    kBf16RingRs,     // NCCL's ring reduce-scatter in bfloat16
    kFp16RingRs,     // the same in binary16
    kBf16RingAr,     // ring all-reduce: the ring reduce-scatter, then a ring all-gather of the sums
    kFp16RingAr,
    kBf16TreeAr,     // tree all-reduce: a chain inside each node, NCCL's binary tree over nodes, broadcast
    kFp16TreeAr,
    // NCCL's FP8 reductions (ncclFloat8e4m3/e5m2, issue 49, docs/DECISIONS.md D41): the 16-bit paths'
    // schedules with FP8 elements; every add is done in binary16 and stored back in FP8 with
    // saturation, so a partial sum past the format's largest value clamps (counted: OutputRow's
    // saturation ledger).
    kFp8E4m3RingRs,
    kFp8E5m2RingRs,
    kFp8E4m3RingAr,
    kFp8E5m2RingAr,
    kFp8E4m3TreeAr,
    kFp8E5m2TreeAr,
    // two-shot-ar whose owner keeps its unrequantized sum (FlashInfer's quantized_all_reduce, issue
    // 49, docs/DECISIONS.md D46): the chunk's owner holds the a2a sum (k = 1), every other rank the
    // decoded requantization (k = 2), so ranks hold different bits.
    kTwoShotArKeep,
};

enum class PathShape : uint8_t {
    kReduceScatter,  // output: rank c holds chunk c of the sum
    kAllReduce,      // output: every rank holds the whole sum
    kAllGather,      // output: every rank holds every shard (the target is the shards themselves)
};

// "reduce-scatter", "all-reduce", "all-gather": the names the reports use.
const char* to_string(PathShape s);

// The type every add of a sum is rounded to (docs/DECISIONS.md D11, D24): binary32, binary16, or
// bfloat16 (binary32's exponent range with an 8-bit significand); or, for NCCL's FP8 paths only
// (D41), an FP8 type stored with saturation after an add done in binary16: fl8sat(fl16(a + b)).
enum class Accum : uint8_t { kFp32, kFp16, kBf16, kFp8E4m3, kFp8E5m2 };
// The FP8 accumulations saturate: a sum past the largest finite value becomes that value.
QT_HD constexpr bool saturating(Accum a) { return a == Accum::kFp8E4m3 || a == Accum::kFp8E5m2; }

struct PathInfo {
    PathKind kind;
    const char* name;   // command-line name, e.g. "ring-rs", "hpz-ag-fp"
    PathShape shape;
    bool quantized;     // false for fp32-ring-rs and the 16-bit paths
    // The 16-bit paths' element type (their inputs, messages and sums); kFp32 for every other path.
    Accum element = Accum::kFp32;
    // Whether `all` (simulate --path, the gate's paths) names it: every path but NCCL's FP8 ones,
    // whose inputs must fit FP8 (448 for e4m3), which most of the generated distributions do not.
    bool in_all = true;
};

const std::vector<PathInfo>& all_paths();
const PathInfo& path_info(PathKind kind);
Result<PathKind> parse_path(std::string_view name);
std::string known_path_names();
// The 16-bit unquantized paths (bf16-ring-rs ... fp16-tree-ar) and NCCL's FP8 ones: a type of their
// own, which is their accumulation type, and k counting roundings (D26, D41).
inline bool typed_path(PathKind k) { return path_info(k).element != Accum::kFp32; }
// Their schedules: ring reduce-scatter, ring all-reduce, tree all-reduce.
enum class TypedSchedule : uint8_t { kNone, kRingRs, kRingAr, kTreeAr };
TypedSchedule typed_schedule(PathKind k);
// The paths `all` names (PathInfo::in_all), in all_paths() order.
std::vector<PathKind> all_path_kinds();

Result<Accum> parse_accum(std::string_view name);
const char* to_string(Accum a);
// What the bounds need of an accumulation type: its unit roundoff u (2^-24, 2^-11, 2^-8); half its
// subnormal spacing, the most a rounding in the subnormal range moves a value (2^-150, 2^-25,
// 2^-134); the magnitude from which round-to-nearest-even overflows to infinity (the midpoint above
// its largest finite value); and the bytes of one value.
struct AccumType {
    double u, half_subnormal, overflow;
    int bytes;
};
// The FP8 accumulations (D41): fl8sat(fl16(a + b)) of two FP8 values is the correctly rounded
// (saturated) FP8 sum, the binary16 step changing nothing (every finite pair checked in
// typed_paths_test), so u is FP8's own (2^-4 for e4m3, 2^-3 for e5m2) and a sum in the subnormal
// range is exact; half the subnormal spacing is 2^-10 (2^-17); `overflow` is where saturation
// starts: the sum from which rounding would pass the largest finite value (464 = 448 + 16 for
// e4m3, 61440 = 57344 + 4096 for e5m2). One byte.
inline constexpr AccumType accum_type(Accum a) {
    return a == Accum::kFp16       ? AccumType{0x1p-11, 0x1p-25, 65520.0, 2}
           : a == Accum::kBf16     ? AccumType{0x1p-8, 0x1p-134, 0x1p128 * (1 - 0x1p-9), 2}
           : a == Accum::kFp8E4m3  ? AccumType{0x1p-4, 0x1p-10, 464.0, 1}
           : a == Accum::kFp8E5m2  ? AccumType{0x1p-3, 0x1p-17, 61440.0, 1}
                                   : AccumType{0x1p-24, 0x1p-150, 0x1p128 * (1 - 0x1p-25), 4};
}
// The largest finite value of a saturating accumulation (448, 57344); 0 for the others. (Host and
// device: the kernels clamp to it.)
QT_HD constexpr double saturation_max(Accum a) {
    return a == Accum::kFp8E4m3 ? 448.0 : a == Accum::kFp8E5m2 ? 57344.0 : 0.0;
}
// Where the 1/N of a mean goes (issue 18, docs/DECISIONS.md D27): nowhere (the sum), before the
// reduce (every contribution scaled by 1/N in the path's element type, as DeepSpeed pre-divides its
// gradients), or after it (the result scaled). With pre or post the exact target is the exact mean.
enum class Divide : uint8_t { kNone, kPre, kPost };
Result<Divide> parse_divide(std::string_view name);
const char* to_string(Divide d);

// Where a reduce path with a rotated format (FORMATS.md section 9, D28) sums: each hop decodes and
// rotates back, and the sums are of unrotated values; or end to end, every input rotated once, the
// sums taken in the rotated domain (the transform is linear, and every rank's block of a column has
// the same signs), and one inverse rotation at the destination.
enum class Rotation : uint8_t { kEachHop, kEndToEnd };
Result<Rotation> parse_rotation(std::string_view name);
const char* to_string(Rotation r);

// fp16 and bf16 round every term and every sum to their type; fp32 sums in binary32.
QT_HD constexpr bool low_precision(Accum a) { return a != Accum::kFp32; }

// G when none is given: 8 ranks per node (a DGX/HGX node's GPUs) when 8 divides N, else one node.
inline constexpr int64_t kDefaultRanksPerNode = 8;
inline constexpr int64_t default_ranks_per_node(int64_t n) { return n % kDefaultRanksPerNode == 0 ? kDefaultRanksPerNode : n; }

namespace kernels {
class PluginCodec;  // kernels/plugin.hpp: a user's codec, run in place of qtransit's kernels
}

struct PathConfig {
    PathKind path = PathKind::kRingRs;
    FormatSpec format{};
    int64_t block = kDefaultBlock;
    int64_t ranks = 8;           // N
    int64_t ranks_per_node = kDefaultRanksPerNode;  // G (N % G == 0)
    int64_t elements = 0;        // M, per rank (M % N == 0)
    Accum accum = Accum::kFp32;
    // The key of stochastic rounding (docs/FORMATS.md section 4); unused by other formats.
    uint64_t seed = 0;
    // A codec plugin whose encode and decode every Q and D of the path runs (null: qtransit's own
    // kernels). Its format is `format`.
    std::shared_ptr<const kernels::PluginCodec> codec;
    // One format per stage (issue 17), for the paths with two quantizing stages (format_stages):
    // a2a-hier-rs (intra-node, inter-node), two-shot-ar (reduce, gather), hpz-ag-requant (forward
    // gather, secondary re-encode). Empty: `format` for every stage; when set, `format` is its first.
    std::vector<FormatSpec> stage_formats;
    // Where the 1/N of a mean goes (reduce paths only; D27).
    Divide divide = Divide::kNone;
    // A rotated format's sums (D28): end to end on ring-rs, a2a-rs, a2a-hier-rs and tree-rs only.
    Rotation rotation = Rotation::kEachHop;
    // The name of the declared path this run is (common/path_decl.hpp, docs/PATHS.md) when it is not
    // the built-in path's own; empty: path_info(path).name. Tables and reports use path_name().
    std::string label;
    // The type every output value is rounded to at the end (D46), after any rotation back and
    // division: kFp32 leaves the binary32 values as they are; kBf16 or kFp16 rounds each (RNE), as
    // a kernel that writes a bf16 or fp16 tensor does (FlashInfer's bf16 output). Declared paths
    // only (`output` in docs/PATHS.md).
    Accum output = Accum::kFp32;
    // The type every input is of (D47): kBf16 or kFp16 casts each input to it first (RNE; a value
    // it cannot hold is refused), and the exact target sums the cast values, as a kernel that takes
    // a bf16 tensor sees (FlashInfer's, DeepEP's combine). kFp32: the inputs as given. The 16-bit
    // paths cast to their own type already (D26) and take no other. Declared paths only.
    Accum input = Accum::kFp32;
    // scales = "per-tensor" (D50, declared paths only): every block's scale comes from one amax of the
    // whole tensor, every rank's inputs (the all-reduced amax of FSDP2's float8 all-gather), not from
    // the block's own. Only with a scale computed from max(absmax, amax_floor) (the "-mul" scales):
    // collectives::resolve_tensor_scale() takes the amax and raises the format's amax_floor to it,
    // so that every block's max(a, F) is max(tensor amax, F), in the kernels and the reference
    // alike. tensor_amax is that amax once resolved (-1 before: run_paths refuses it).
    bool tensor_scale = false;
    float tensor_amax = -1.0f;
    // two-shot-ar-keep (D46, D52): which rank keeps its unrequantized sum of an element. false: the
    // chunk's owner (element e: e / S). true: FlashInfer's stripes (owner = "flashinfer-stripes",
    // docs/SOURCES.md 4.1a): super-blocks of B N elements, rank o keeping [o B, (o + 1) B) of each,
    // B = 4096 (16384 past 2^25 elements) clamped to [block, M]. The sums themselves are the same
    // (every contribution, in rank order, whoever adds them): only who keeps one changes.
    bool flashinfer_stripes = false;
    // two-shot-ar (D57): the owner's sum starts from +0 (QuickReduce's, docs/SOURCES.md 2.6: an all -0
    // column sums to +0; every other sum is unchanged), not from its first term (start = "zero").
    // two-shot-ar-keep's always does (D46).
    bool sum_from_zero = false;
    int64_t stripe() const {
        const int64_t b = elements <= (int64_t{1} << 25) ? 4096 : 16384;
        return b < block ? block : (b > elements ? elements : b);
    }
    // The rank that keeps its sum of element e (two-shot-ar-keep), the chunk's owner otherwise.
    int64_t keeper(int64_t e) const {
        if (!flashinfer_stripes) return e / shard();
        const int64_t b = stripe();
        return (e % (b * ranks)) / b;
    }
    std::string path_name() const { return label.empty() ? std::string(path_info(path).name) : label; }
    // Whether a value can clamp at an FP8 type's largest finite value on its way: an FP8 add (D41) or
    // an FP8 output type (NVLS's one rounding, D49). Such runs count the outputs a clamp reached.
    bool saturates() const { return saturating(accum) || saturating(output); }

    int64_t shard() const { return elements / ranks; }  // S = M / N
    int64_t nodes() const { return ranks / ranks_per_node; }
    // Which stage format a quantization event of the given stage (QuantEvent::stage) uses: stage 0
    // the first, every later stage the second; 0 when the path has one format (validate() allows
    // stage_formats empty or of two). QuantEvent::format_stage records it.
    int32_t format_stage_of(int32_t stage) const { return !stage_formats.empty() && stage > 0 ? 1 : 0; }
    const FormatSpec& format_of_stage(int32_t stage) const {
        return stage_formats.empty() ? format : stage_formats[static_cast<size_t>(format_stage_of(stage))];
    }
    // "int8,int4" for per-stage formats, "bf16" or "fp16" for the 16-bit paths (their wire
    // format), "none" for a declared unquantized path (D47), else the format's name.
    std::string format_name() const;
};

// The type a division by N is rounded to (D27): the path's element type, binary32 for every path
// but the 16-bit ones. x / N is the binary32 quotient, then rounded to that type, as torch divides
// a bf16 or fp16 tensor.
inline Accum division_type(const PathConfig& c) { return path_info(c.path).element; }

// A 16-bit path sums in its own type: `accum` becomes it (D26). Every other path is unchanged.
// validate() refuses a 16-bit path whose accum is another type.
inline void apply_element_type(PathConfig& c) {
    if (typed_path(c.path)) c.accum = path_info(c.path).element;
}

// The names of a path's quantizing stages when it takes one format per stage (two for a2a-hier-rs,
// two-shot-ar and hpz-ag-requant), else empty.
std::vector<std::string> format_stages(PathKind path);

// Every constraint of section 3 with a message that names it: M % N, N % G, tree-rs with N a power
// of two, block >= 1, ranks >= 1.
Status validate(const PathConfig& c);

// ---- the ledger -----------------------------------------------------------------------------------
// Which ranks' contributions a quantized block carried: a ring range (first, first+1, ... mod N) or
// an explicit list.
struct Contributors {
    int64_t first = 0, count = 0;  // used when list is empty: ranks (first + i) mod N, i < count
    std::vector<int32_t> list;     // used when not empty
};

// One quantization event that reached an output: the block of values `x` (len of them) was encoded
// with `scale` (and `offset` for asym) and decoded on `to_rank`; `codes` are the codes it got.
struct QuantEvent {
    int32_t stage = 0;              // hop or stage number within the path (0-based)
    // Which of PathConfig::stage_formats encoded it (0 when the path has one format): the event's
    // format is config.format_of_stage(stage), and this records which that was.
    int32_t format_stage = 0;
    int64_t from_rank = 0, to_rank = 0;
    float scale = 0, offset = 0;
    Contributors contributors;
    std::vector<float> x;           // the values of the whole quantized block
    std::vector<int32_t> codes;     // their codes
    // Column element i was quantized as x[i + column_offset]. It is 0, and x has the column's len
    // values, for every path but hpz-ag, whose forward blocks can straddle a secondary block (when
    // B does not divide S): then an event's block may start before the column (offset > 0) or
    // after it (offset < 0), and only the elements it covers carry it.
    int64_t column_offset = 0;
};

// What one rank holds for one column, and how it got there.
struct OutputRow {
    int64_t rank = 0;
    std::vector<float> values;           // len values
    // Every quantization event that reached these values, as indices into ColumnRecord::events
    // (rows share events: every row of an all-reduce carries the same reduction events, and the
    // rows of ring-ag-requant share a chain, so storing them once keeps a column O(N) in memory).
    std::vector<int32_t> event_ids;
    // The floating-point adds that produced each value: the sum of |result| over the adds, and how
    // many there were (the a-posteriori bound adds u/(1-u) |result| per binary32 add, or the
    // binary16 or bfloat16 equivalent under fp16 or bf16 accumulation).
    std::vector<double> add_abs_sum;     // len
    std::vector<int32_t> add_count;      // len
    // fp16 and bf16 accumulation only (docs/DECISIONS.md D11, D24): every term is rounded to the
    // type before it is added; the sum of |term| over those roundings and their count.
    std::vector<double> term_round_abs_sum;  // len (empty under fp32)
    std::vector<int32_t> term_round_count;   // len (empty under fp32)
    // The 16-bit paths only (D26): the roundings that reached these values, as indices into
    // ColumnRecord::roundings. Each is one add, rounded to the type, and names the contributors
    // its result held; k of a contributor counts them. Empty for every other path.
    std::vector<int32_t> rounding_ids;
    // NCCL's FP8 paths only (D41): the adds that saturated on the way to each value (their FP8
    // result clamped to the largest finite value) and the sum of what each clamp removed, |v| - max
    // with v the add's exact sum; the a-posteriori bound adds that sum. Empty for every other path.
    std::vector<int32_t> saturation_count;  // len
    std::vector<double> saturation_excess;  // len
};

struct ColumnRecord {
    int64_t first = 0;  // position of the column's first element in the M-element tensor
    int64_t len = 0;    // elements in the column (the block size, or less for a short block)
    // The exact target of every output value is the sum over the rows of `contributions` (reduce
    // paths: row j is rank j's input X_j[first, first+len), N rows) or its single row (gather
    // paths: the gathered tensor W[first, first+len)).
    std::vector<float> contributions;    // rows * len, row-major
    int64_t contribution_rows = 0;
    // For gather paths: the absmax of the block each element was first quantized in (hpz's
    // secondary blocks straddle primary blocks); empty for reduce paths, whose first quantization
    // blocks are the rows of `contributions` themselves.
    std::vector<float> first_block_absmax;
    // What the ranks hold. A reduce-scatter has one row (the owner of the chunk); an all-reduce or
    // all-gather has one row per rank (row r is rank r).
    std::vector<OutputRow> outputs;
    std::vector<QuantEvent> events;      // every quantization event of the column
    // The 16-bit paths (D26): every rounded add of the column, by the contributors its result holds.
    std::vector<Contributors> roundings;
    // Rotation::kEndToEnd ran (D28): every event's x and codes are in the rotated domain, quantized
    // by the stage format without its rotation (rotation_twin), and each output row was rotated back
    // once; the contributions stay the unrotated inputs.
    bool rotated_sum = false;
};

// Whether every id indexes one of `events` events (no check reads past them). Branch-free: it vectorizes.
inline bool event_ids_in_range(const std::vector<int32_t>& ids, size_t events) {
    bool bad = false;
    for (int32_t id : ids) bad |= static_cast<uint64_t>(static_cast<int64_t>(id)) >= events;
    return !bad;
}

// contribution_k's count of ring ranges (Contributors without a list: ranks first, first + 1, ...,
// count of them, mod N) into k (N entries, which it adds to), O(1) a range but for one of N or more:
// a range of one rank is counted where it lands, the others through diff (N + 1 entries, zeros,
// the caller's), whose prefix sums finish() adds to k. A first outside 0..N-1 is taken mod N; a
// negative count counts nothing (PathChecker reports such an event as malformed). PathChecker
// counts from its own copy of the events' ranges with it.
class RingRangeCounter {
public:
    RingRangeCounter(int64_t ranks, int32_t* k, int32_t* diff) : ranks_(ranks), k_(k), dp_(diff) {}
    // (inlined, and no call in it: the counter's state then stays in registers; through memory
    // each ++same_ was a store and a reload, 7 cycles an event in ring-rs's count)
    [[gnu::always_inline]] void add(int64_t first, int64_t count) {
        // One rank (every event of a2a-rs and the first hop of a ring), counted where it lands.
        if (count == 1 && static_cast<uint64_t>(first) < static_cast<uint64_t>(ranks_)) {
            ++k_[first];
            return;
        }
        // The next hop of a ring from the same first (at_, when it is one: not -1), within the ring:
        // what the general case below does, with its tests taken in one.
        if (first == at_ && first >= 0 && count > 1 && count < ranks_ - first) {
            ++same_;
            --dp_[first + count];
            return;
        }
        if (ranks_ < 1 || count < 0) return;
        // (% only when needed: a 64-bit division per event was a tenth of a 384-rank column's check)
        if (first < 0 || first >= ranks_) first = (first % ranks_ + ranks_) % ranks_;
        if (count >= ranks_) {  // the whole ring, possibly more than once
            for (int64_t r = 0; r < ranks_; ++r) k_[r] += static_cast<int32_t>(count / ranks_);
            count %= ranks_;
        }
        if (count == 1) {  // (after whole turns, or a first taken mod N)
            ++k_[first];
            return;
        }
        if (count == 0) return;
        // ++diff[first], counted in same_ while first repeats (a ring's hops all start at one rank:
        // a ++ of one entry, event after event, is a chain of stores and reloads), stored when it changes.
        if (first != at_) {
            if (at_ >= 0) dp_[at_] += same_;
            at_ = first;
            same_ = 0;
        }
        ++same_;
        const int64_t end = first + count;
        if (end <= ranks_) {
            --dp_[end];
        } else {  // it wraps: first..N-1, then 0..end-N-1
            --dp_[ranks_];
            ++dp_[0];
            --dp_[end - ranks_];
        }
    }
    // diff's prefix sums into k, after the last range (none when no range needed diff).
    void finish() {
        if (at_ < 0) return;
        dp_[at_] += same_;
        at_ = -1;
        int32_t run = 0;
        for (int64_t r = 0; r < ranks_; ++r) {
            run += dp_[r];
            k_[r] += run;
        }
    }

private:
    int64_t ranks_;
    int32_t* k_;
    int32_t* dp_;
    int64_t at_ = -1;   // the first whose ++ are pending (-1: diff untouched, or its sums added)
    int32_t same_ = 0;  // how many
};

// k of each contributor (0..N-1) for one output row: how many quantization events carried it (and,
// on the 16-bit paths, how many roundings: their rows have rounding_ids and no events).
std::vector<int32_t> contribution_k(const ColumnRecord& column, const OutputRow& row, int64_t ranks);
// contribution_k for the contributors lo..hi only (a gather's owners): k[j - lo], and whether some
// event carries a contributor outside lo..hi (then the others' k is not all 0). O(events); false
// when it cannot answer that way (an event that covers only part of the column, an id out of
// range): then use contribution_k.
// With from > 0, k and others hold the answer (true) for row's first `from` event ids already (a
// previous row whose ids are a prefix of this row's: ring-ag-requant's chain), and only the events
// after them are counted onto it, O(new events).
bool contribution_k_of(const ColumnRecord& column, const OutputRow& row, int64_t ranks, int64_t lo, int64_t hi,
                       std::vector<int32_t>& k, bool& others, size_t from = 0);
// Whether b's event ids start with all of a's (a's k is then a part of b's): O(a's events), a memcmp.
bool extends_ledger(const OutputRow& a, const OutputRow& b);
// Whether two rows of a column have the same k by construction: their events, position by position,
// are the same event or carry the same contributors over the same elements (what contribution_k
// reads). False when an event id is out of range. O(events), and cheap for shared events.
bool same_ledger_shape(const ColumnRecord& column, const OutputRow& a, const OutputRow& b);

// The table of NUMERICS.md section 3: k of contributor j for output held by `holder` of column
// starting at `first` (for the gather paths, the contributor is the shard's owner; for the 16-bit
// paths, the number of rounded adds its value went through). Used by the properties to check the
// ledgers, and by the 16-bit paths' a-priori bounds.
int32_t expected_k(const PathConfig& c, int64_t first, int64_t holder, int64_t contributor);
// expected_k of every contributor (0..N-1) for the column starting at `first`, as held by rank 0
// (the same for every holder but on ring-ag-requant and two-shot-ar-keep): O(N), where
// expected_k one contributor at a time would cost O(N) each for the tree.
std::vector<int32_t> expected_ks(const PathConfig& c, int64_t first);

// The tree of bf16-tree-ar and fp16-tree-ar (D26): node n's parent and children in NCCL's binary
// tree over `nodes` nodes (root 0; -1 where there is none). Inside each node the ranks form a
// chain, local G-1 -> ... -> local 0, and local 0 is the node's place in the tree.
struct TreeLinks {
    int64_t up = -1, down0 = -1, down1 = -1;
};
TreeLinks btree_links(int64_t nodes, int64_t node);

}  // namespace qtransit
