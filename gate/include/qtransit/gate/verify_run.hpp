// Verifying a run computed elsewhere (issue 14): what a framework's collective produced (DeepSpeed's
// qgZ, an NCCL reduce-scatter, a user's kernel), judged against the path's semantics in exact
// arithmetic, in three tiers, strongest first:
//   exact        the outputs equal qtransit's own schedule of the path, bit for bit;
//   same-events  for paths whose quantization events do not depend on the order of the adds
//                (a2a-rs, two-shot-ar, the gathers, fp32-ring-rs): every output equals the exact
//                sum of the same decoded contributions within a rigorous tolerance for any order
//                of binary32 (binary16) adds (docs/DECISIONS.md D21);
//   bounded      the path's a-priori bound for the element from the input block statistics (a ring
//                run's order is the worst unless given).
// The work is split by chunk (the S = M/N elements rank c owns in a reduce-scatter): each chunk is
// checked from the inputs' chunk of every rank and what the ranks hold there, so that one process per
// rank checks a run that no process holds whole (verify_chunks_mpi).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "qtransit/common/status.hpp"
#include "qtransit/common/transit.hpp"
#include "qtransit/reference/superacc.hpp"
#include "qtransit/reports/verified_collective.hpp"

namespace qtransit::gate {

enum class Tier : uint8_t { kExact = 0, kSameEvents = 1, kBounded = 2 };
const char* to_string(Tier t);
Result<Tier> parse_tier(std::string_view name);  // exact, same-events, bounded

// The dtype a run stored its outputs in: binary32 (read as is), or binary16 / bfloat16, whose final
// rounding the same-events and bounded tiers allow for (and the exact tier applies to the schedule).
enum class OutputDtype : uint8_t { kFp32, kFp16, kBf16 };

struct CollectiveVerifySpec {
    PathConfig config;                // path, format, block, N, G, M, accum
    bool mean = false;                // the target is the exact sum times 1/N
    std::vector<int64_t> ring_order;  // the ring as data flows (each rank sends to the next); empty: none given
    std::optional<Tier> asked;        // empty: same-events where the path allows it, else bounded
    OutputDtype output_dtype = OutputDtype::kFp32;
};

// Whether the tier can judge this run, and why not ("" when it can).
std::string tier_problem(const CollectiveVerifySpec& spec, Tier t);
// The tier judged when none is asked for.
Tier default_tier(const CollectiveVerifySpec& spec);
// Every option's constraint, before any work: the config (validate), the ring order (a permutation of
// 0..N-1, on a ring path), the asked tier applicable, --target mean with a codec-free path.
Status check_spec(const CollectiveVerifySpec& spec);

// What the ranks hold for one chunk c, and the inputs it depends on (views: the caller owns the data).
struct ChunkTensors {
    int64_t chunk = 0, ranks = 0;
    // Every rank's inputs over elements [in_lo, in_hi) of its M: rank r's element e is
    // in[r * in_stride + (e - in_lo)].
    int64_t in_lo = 0, in_hi = 0;
    const float* in = nullptr;
    int64_t in_stride = 0;
    // What each rank in out_ranks holds over [out_lo, out_hi): for a reduce-scatter, out_ranks is {c}
    // and the range is its S outputs [0, S); otherwise every rank, over tensor elements. The k-th
    // rank's element e is out[k * out_stride + (e - out_lo)].
    std::vector<int64_t> out_ranks;
    int64_t out_lo = 0, out_hi = 0;
    const float* out = nullptr;
    int64_t out_stride = 0;

    float input(int64_t rank, int64_t e) const { return in[rank * in_stride + (e - in_lo)]; }
    float output(int64_t k, int64_t e) const { return out[k * out_stride + (e - out_lo)]; }
};
// The ranges chunk c needs (filled in: chunk, in_lo, in_hi, out_ranks, out_lo, out_hi; no data).
ChunkTensors chunk_layout(const PathConfig& c, int64_t chunk);

struct TierOutcome {
    Tier tier = Tier::kExact;
    std::string not_applicable;  // why this tier cannot judge this run ("" when it can)
    bool holds = true;
    int64_t checked = 0, violations = 0;
    double max_ratio = 0;        // max |deviation| / tolerance (exact: max |output - schedule| in ulps)
    std::string first;           // the first violation, in words
    int64_t first_pos = -1, first_rank = -1;  // where it is (chunk-major), for merging
};

struct CollectiveVerification {
    CollectiveVerifySpec spec;
    Tier asked = Tier::kSameEvents;  // the tier judged (spec.asked or default_tier)
    std::array<TierOutcome, 3> tiers;
    // After an all-reduce or all-gather every rank must hold the same bits (whatever the tier; not
    // ring-ag-requant, whose ranks hold a shard after different numbers of encodes).
    bool same_bits_applies = false, same_bits = true;
    int64_t same_bits_checked = 0;
    std::string same_bits_first;
    int64_t same_bits_pos = -1;
    // Error against the exact target, of the run's outputs and of qtransit's schedule on the same inputs.
    // The sums are the exact sums of their per-element terms (a binary64 square or error each),
    // correctly rounded: the exact_* accumulators hold them, merge() adds those, and round_sums()
    // sets the doubles. So they have the same bits however the chunks are shared among threads or
    // mpi processes, and in whatever order the partial results are merged (as D34 for the gate).
    int64_t outputs = 0;
    double max_abs_error = 0, sum_sq_error = 0, sum_error = 0, sum_sq_target = 0;
    double sim_max_abs_error = 0, sim_sum_sq_error = 0, sim_sum_error = 0;
    reference::DoubleAcc exact_sum_sq_error, exact_sum_error, exact_sum_sq_target, exact_sim_sum_sq_error,
        exact_sim_sum_error;
    void round_sums();
    int64_t differing_from_schedule = 0;
    int32_t k_min = 0, k_max = 0;  // of qtransit's schedule (its ledger)
    bool have_k = false;

    double rel_rms() const;
    double sim_rel_rms() const;
    double bias() const;      // mean error of the run's outputs
    double sim_bias() const;
    std::optional<Tier> strongest() const;  // the strongest tier that holds (none when none does)
    bool holds() const;  // the asked tier, and same bits where that applies

    void merge(const CollectiveVerification& o);
};

// A verification of nothing yet (what merge() adds chunks' results to).
CollectiveVerification empty_verification(const CollectiveVerifySpec& spec);

// One chunk: qtransit's schedule of the chunk's columns on the same inputs (in process), then every
// tier. An Error for a bad input (a non-finite input, a value the format refuses), never for a
// violation.
Result<CollectiveVerification> verify_chunk(const CollectiveVerifySpec& spec, const ChunkTensors& t);

// The given chunks on every hardware thread, merged (the lowest chunk's Error first).
Result<CollectiveVerification> verify_chunks(const CollectiveVerifySpec& spec, std::span<const ChunkTensors> chunks);

// Every chunk of a run whose tensors are in memory: inputs [N, M], outputs [N, S] (reduce-scatter)
// or [N, M], row r = rank r.
Result<CollectiveVerification> verify_arrays(const CollectiveVerifySpec& spec, std::span<const float> inputs,
                                             std::span<const float> outputs);

// What a verification shows (reports::to_json(const VerifiedCollective&), to_text): the command's and
// Python's JSON and text, report.json's `verify`.
reports::VerifiedCollective verified_collective(const CollectiveVerification& v);
// The per-process partial results as JSON and back (what one process per rank exchanges): the
// verification's JSON and, under key exact_sums, each exact accumulator's words
// (DoubleAcc::to_words), which verification_from_json needs.
nlohmann::json exchange_json(const CollectiveVerification& v);
Result<CollectiveVerification> verification_from_json(const nlohmann::json& j, const CollectiveVerifySpec& spec);
// Combined over the processes of an mpi job (every process gets the same result).
Result<CollectiveVerification> combine_over_ranks(const CollectiveVerification& mine);

}  // namespace qtransit::gate
