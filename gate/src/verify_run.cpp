#include "qtransit/common/bits.hpp"
#include "qtransit/gate/verify_run.hpp"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>

#include "qtransit/collectives/mpi.hpp"
#include "qtransit/collectives/paths.hpp"
#include "qtransit/collectives/transport.hpp"
#include "qtransit/common/shortest.hpp"
#include "qtransit/kernels/fp16.hpp"
#include "qtransit/reference/checker.hpp"
#include "qtransit/reference/formats.hpp"
#include "qtransit/reference/superacc.hpp"

namespace qtransit::gate {
namespace {

using reference::SuperAcc;

constexpr double kU32 = 0x1p-24, kU16 = 0x1p-11;
constexpr double kInf = std::numeric_limits<double>::infinity();
// Every tolerance below is a double rounded to nearest a few times; this factor makes it an upper
// bound of the exact real quantity it stands for (far more than the 2^-53 per operation it covers).
constexpr double kUp = 1 + 0x1p-40;

bool is_gather(PathKind k) { return path_info(k).shape == PathShape::kAllGather; }
bool is_rs(PathKind k) { return path_info(k).shape == PathShape::kReduceScatter; }
bool is_hpz(PathKind k) { return k == PathKind::kHpzAgFp || k == PathKind::kHpzAgRequant; }
bool is_ring(PathKind k) {
    return k == PathKind::kRingRs || k == PathKind::kFp32RingRs || k == PathKind::kRingAg || k == PathKind::kRingAgRequant;
}
bool same_events_path(PathKind k) {
    return k == PathKind::kA2aRs || k == PathKind::kTwoShotAr || k == PathKind::kTwoShotArKeep || k == PathKind::kFp32RingRs || is_gather(k);
}

int64_t ordered(float f) {
    const int32_t b = std::bit_cast<int32_t>(f);
    return b < 0 ? -static_cast<int64_t>(b & 0x7FFFFFFF) : static_cast<int64_t>(b);
}
std::string show(double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.9g", v);
    return buf;
}
// gamma_n = n u / (1 - n u), the bound of n adds in any order relative to the sum of |terms|.
double gamma(int64_t n, double u) { return n <= 0 ? 0.0 : (static_cast<double>(n) * u) / (1 - static_cast<double>(n) * u) * kUp; }

// The ring's positions: pi[p] is the rank at position p, pos[r] the position of rank r.
struct Ring {
    std::vector<int64_t> pi, pos;
    explicit Ring(const CollectiveVerifySpec& s) {
        const int64_t n = s.config.ranks;
        pi.resize(static_cast<size_t>(n));
        for (int64_t p = 0; p < n; ++p) pi[static_cast<size_t>(p)] = s.ring_order.empty() ? p : s.ring_order[static_cast<size_t>(p)];
        pos.resize(static_cast<size_t>(n));
        for (int64_t p = 0; p < n; ++p) pos[static_cast<size_t>(pi[static_cast<size_t>(p)])] = p;
    }
};

// qtransit's schedule on the ring: position p plays rank pi[p], and the relabelled tensor's chunk q is
// the original chunk pi[q], so that position p ends holding the chunk of rank pi[p] (docs/DECISIONS.md
// D21). Reads the chunk's tensors; a read outside them is an internal error.
class ChunkInputs final : public collectives::Inputs {
public:
    ChunkInputs(const ChunkTensors& t, const Ring& ring, int64_t shard, bool permute)
        : t_(t), ring_(ring), s_(shard), permute_(permute) {}
    void fill(int64_t rank, int64_t first, int64_t len, float* out) const override {
        for (int64_t i = 0; i < len; ++i) {
            int64_t r = rank, e = first + i;
            if (permute_) {
                const int64_t q = e / s_;
                r = ring_.pi[static_cast<size_t>(rank)];
                e = ring_.pi[static_cast<size_t>(q)] * s_ + (e - q * s_);
            }
            if (e < t_.in_lo || e >= t_.in_hi || r < 0 || r >= t_.ranks) {
                outside_ = true;
                out[i] = 0;
                continue;
            }
            out[i] = t_.input(r, e);
        }
    }
    std::string name() const override { return "the inputs"; }
    bool outside() const { return outside_; }

private:
    const ChunkTensors& t_;
    const Ring& ring_;
    int64_t s_;
    bool permute_;
    mutable bool outside_ = false;
};

// The unit roundoff of the dtype the outputs were stored in (0: binary32, no extra rounding), or of
// the path's declared output type (D46) when that is coarser.
double out_u(const CollectiveVerifySpec& s) {
    const double declared = s.config.output != Accum::kFp32 ? accum_type(s.config.output).u : 0.0;
    switch (s.output_dtype) {
        case OutputDtype::kFp16: return std::max(kU16, declared);
        case OutputDtype::kBf16: return std::max(0x1p-8, declared);
        default: return declared;
    }
}
float round_out(const CollectiveVerifySpec& s, float v) {
    switch (s.output_dtype) {
        case OutputDtype::kFp16: return reference::round_to_fp16(v);
        case OutputDtype::kBf16: return kernels::round_bf16(v);  // RNE on 8 significant bits
        default: return v;
    }
}

struct Recorder {
    TierOutcome& t;
    void check() { ++t.checked; }
    void fail(int64_t pos, int64_t rank, const std::string& what) {
        ++t.violations;
        t.holds = false;
        if (t.first_pos < 0 || pos < t.first_pos || (pos == t.first_pos && rank < t.first_rank)) {
            t.first_pos = pos;
            t.first_rank = rank;
            t.first = what;
        }
    }
};

// Where an output is, in words: "shard 3 (rank 3), element 17 (tensor index 401)" for a
// reduce-scatter, "rank 5, shard 3, element 17 (tensor index 401)" otherwise.
std::string where(const PathConfig& c, int64_t rank, int64_t pos) {
    const int64_t s = c.shard(), ch = pos / s, el = pos - ch * s;
    if (is_rs(c.path))
        return "shard " + std::to_string(ch) + " (rank " + std::to_string(rank) + "), element " + std::to_string(el) +
               " (tensor index " + std::to_string(pos) + ")";
    return "rank " + std::to_string(rank) + ", shard " + std::to_string(ch) + ", element " + std::to_string(el) +
           " (tensor index " + std::to_string(pos) + ")";
}

// value - target as a SuperAcc, the target being sum (or, for a mean, sum / N: then N value - sum,
// exact since N value is a double with at most 24 + 31 significant bits).
SuperAcc deviation(const SuperAcc& target, float v, double scale) {
    SuperAcc e = target;
    e.negate();
    if (scale == 1) e.add(v);
    else e.add(static_cast<double>(v) * scale);
    return e;
}

}  // namespace

const char* to_string(Tier t) {
    switch (t) {
        case Tier::kExact: return "exact";
        case Tier::kSameEvents: return "same-events";
        case Tier::kBounded: return "bounded";
    }
    return "?";
}

Result<Tier> parse_tier(std::string_view name) {
    if (name == "exact") return Tier::kExact;
    if (name == "same-events") return Tier::kSameEvents;
    if (name == "bounded") return Tier::kBounded;
    return make_error(ErrorCode::kInvalidArgument,
                      "unknown conformance '" + printable(std::string(name)) + "' (known: exact, same-events, bounded)");
}

std::string tier_problem(const CollectiveVerifySpec& s, Tier t) {
    const char* name = path_info(s.config.path).name;
    const bool stochastic = s.config.format.stochastic();
    if (t == Tier::kBounded) return {};
    if (stochastic)
        return std::string(s.config.format.name()) + " rounds stochastically: a run draws its own random numbers, so neither its bits "
                                                      "nor its events can be qtransit's";
    if (t == Tier::kExact) return {};
    if (!same_events_path(s.config.path))
        return std::string(name) + " requantizes partial sums, so its quantization events depend on the order of its adds";
    if (s.mean && !is_rs(s.config.path) && s.config.path != PathKind::kTwoShotAr && s.config.path != PathKind::kTwoShotArKeep)
        return std::string("--target mean on ") + name;
    return {};
}

Tier default_tier(const CollectiveVerifySpec& s) {
    return tier_problem(s, Tier::kSameEvents).empty() ? Tier::kSameEvents : Tier::kBounded;
}

Status check_spec(const CollectiveVerifySpec& s) {
    const PathConfig& c = s.config;
    if (typed_path(c.path)) {  // before validate(): its accumulation message would not be the point here
        // A 16-bit ring reduce-scatter is fp32-ring-rs summed in its type; the all-reduces (their
        // dumps hold [N, M]) and NCCL's FP8 paths (an accumulation --accum does not take) are not.
        const Accum e = path_info(c.path).element;
        const bool as_fp32_ring = typed_schedule(c.path) == TypedSchedule::kRingRs && (e == Accum::kBf16 || e == Accum::kFp16);
        const std::string how = as_fp32_ring ? std::string("; a ") + to_string(e) + " ring reduce-scatter's dump is judged as --path fp32-ring-rs --accum " +
                                                   to_string(e) + " (docs/DECISIONS.md D24)"
                                             : " (simulate and check bound it)";
        return make_error(ErrorCode::kInvalidArgument,
                          std::string("verify collective does not judge ") + c.path_name() +
                              (c.label.empty() ? std::string() : std::string(" (") + path_info(c.path).name + "'s schedule)") + " yet" + how);
    }
    if (c.saturates())  // D49: its tolerances take no clamp's excess and no FP8 subnormal spacing yet
        return make_error(ErrorCode::kInvalidArgument, "verify collective does not judge " + c.path_name() + "'s output type " +
                                                           to_string(c.output) + " yet (an FP8 output clamps; simulate and check bound it)");
    if (c.format.rotated() || (c.stage_formats.size() > 1 && c.stage_formats[1].rotated()))
        return make_error(ErrorCode::kInvalidArgument,
                          "verify collective does not judge rotated formats (" + c.format_name() + ") yet: their events need "
                          "the run's sign key, which a dump does not carry (docs/DECISIONS.md D28)");
    if (auto st = validate(s.config); !st) return st;
    if (s.config.codec) return make_error(ErrorCode::kInvalidArgument, "verify judges a run's outputs: it takes no codec");
    if (s.mean && is_gather(c.path))
        return make_error(ErrorCode::kInvalidArgument, std::string("--target mean: ") + path_info(c.path).name +
                                                           " gathers shards; a mean is for reduce paths");
    if (!s.ring_order.empty()) {
        if (!is_ring(c.path))
            return make_error(ErrorCode::kInvalidArgument, std::string("--ring-order: ") + path_info(c.path).name +
                                                               " has no ring (ring paths: ring-rs, fp32-ring-rs, ring-ag, ring-ag-requant)");
        if (static_cast<int64_t>(s.ring_order.size()) != c.ranks)
            return make_error(ErrorCode::kInvalidArgument, "--ring-order lists " + std::to_string(s.ring_order.size()) +
                                                               " ranks but the run has " + std::to_string(c.ranks));
        std::vector<uint8_t> seen(static_cast<size_t>(c.ranks), 0);
        for (size_t p = 0; p < s.ring_order.size(); ++p) {
            const int64_t r = s.ring_order[p];
            if (r < 0 || r >= c.ranks)
                return make_error(ErrorCode::kInvalidArgument, "--ring-order: position " + std::to_string(p) + " is rank " +
                                                                   std::to_string(r) + ", outside 0.." + std::to_string(c.ranks - 1));
            if (seen[static_cast<size_t>(r)]++)
                return make_error(ErrorCode::kInvalidArgument, "--ring-order: rank " + std::to_string(r) + " appears twice");
        }
    }
    if (s.asked) {
        const std::string why = tier_problem(s, *s.asked);
        if (!why.empty())
            return make_error(ErrorCode::kInvalidArgument,
                              std::string("--conformance ") + to_string(*s.asked) + " cannot judge this run: " + why);
    }
    return Status::Ok();
}

ChunkTensors chunk_layout(const PathConfig& c, int64_t chunk) {
    ChunkTensors t;
    t.chunk = chunk;
    t.ranks = c.ranks;
    const int64_t s = c.shard();
    if (is_hpz(c.path)) {  // secondary blocks straddle chunks: the whole tensors
        t.in_lo = 0;
        t.in_hi = c.elements;
    } else {
        t.in_lo = chunk * s;
        t.in_hi = (chunk + 1) * s;
    }
    if (is_rs(c.path)) {
        t.out_ranks = {chunk};
        t.out_lo = 0;
        t.out_hi = s;
    } else {
        for (int64_t r = 0; r < c.ranks; ++r) t.out_ranks.push_back(r);
        t.out_lo = t.in_lo;
        t.out_hi = t.in_hi;
    }
    return t;
}

double CollectiveVerification::rel_rms() const { return sum_sq_target > 0 ? std::sqrt(sum_sq_error / sum_sq_target) : 0.0; }
double CollectiveVerification::sim_rel_rms() const { return sum_sq_target > 0 ? std::sqrt(sim_sum_sq_error / sum_sq_target) : 0.0; }
double CollectiveVerification::bias() const { return outputs > 0 ? sum_error / static_cast<double>(outputs) : 0.0; }
double CollectiveVerification::sim_bias() const { return outputs > 0 ? sim_sum_error / static_cast<double>(outputs) : 0.0; }

std::optional<Tier> CollectiveVerification::strongest() const {
    for (const auto& t : tiers)
        if (t.not_applicable.empty() && t.holds && t.checked > 0) return t.tier;
    return std::nullopt;
}

bool CollectiveVerification::holds() const {
    const TierOutcome& t = tiers[static_cast<size_t>(asked)];
    return t.holds && t.checked > 0 && (!same_bits_applies || same_bits);
}

void CollectiveVerification::round_sums() {
    sum_sq_error = exact_sum_sq_error.to_double();
    sum_error = exact_sum_error.to_double();
    sum_sq_target = exact_sum_sq_target.to_double();
    sim_sum_sq_error = exact_sim_sum_sq_error.to_double();
    sim_sum_error = exact_sim_sum_error.to_double();
}

void CollectiveVerification::merge(const CollectiveVerification& o) {
    for (size_t k = 0; k < tiers.size(); ++k) {
        TierOutcome& a = tiers[k];
        const TierOutcome& b = o.tiers[k];
        a.checked += b.checked;
        a.violations += b.violations;
        a.holds = a.holds && b.holds;
        a.max_ratio = std::max(a.max_ratio, b.max_ratio);
        if (b.first_pos >= 0 && (a.first_pos < 0 || b.first_pos < a.first_pos || (b.first_pos == a.first_pos && b.first_rank < a.first_rank))) {
            a.first_pos = b.first_pos;
            a.first_rank = b.first_rank;
            a.first = b.first;
        }
    }
    same_bits = same_bits && o.same_bits;
    same_bits_checked += o.same_bits_checked;
    if (o.same_bits_pos >= 0 && (same_bits_pos < 0 || o.same_bits_pos < same_bits_pos)) {
        same_bits_pos = o.same_bits_pos;
        same_bits_first = o.same_bits_first;
    }
    outputs += o.outputs;
    max_abs_error = std::max(max_abs_error, o.max_abs_error);
    exact_sum_sq_error.add(o.exact_sum_sq_error);
    exact_sum_error.add(o.exact_sum_error);
    exact_sum_sq_target.add(o.exact_sum_sq_target);
    sim_max_abs_error = std::max(sim_max_abs_error, o.sim_max_abs_error);
    exact_sim_sum_sq_error.add(o.exact_sim_sum_sq_error);
    exact_sim_sum_error.add(o.exact_sim_sum_error);
    round_sums();
    differing_from_schedule += o.differing_from_schedule;
    if (o.have_k) {
        k_min = have_k ? std::min(k_min, o.k_min) : o.k_min;
        k_max = have_k ? std::max(k_max, o.k_max) : o.k_max;
        have_k = true;
    }
}

CollectiveVerification empty_verification(const CollectiveVerifySpec& spec) {
    CollectiveVerification v;
    v.spec = spec;
    v.asked = spec.asked ? *spec.asked : default_tier(spec);
    for (size_t k = 0; k < 3; ++k) {
        v.tiers[k].tier = static_cast<Tier>(k);
        v.tiers[k].not_applicable = tier_problem(spec, static_cast<Tier>(k));
    }
    // ring-ag-requant is the exception by design: rank c+h holds shard c after h encodes (it shows
    // the drift of re-encoding), so ranks differ wherever the format is not idempotent.
    // (two-shot-ar-keep's owner holds its own sum, the others its requantization: D46)
    v.same_bits_applies = !is_rs(spec.config.path) && spec.config.path != PathKind::kRingAgRequant &&
                          spec.config.path != PathKind::kTwoShotArKeep;
    return v;
}

namespace {

// The a-priori bound of an element of a reduce path's column, summing (the target is the sum), for
// the row held at relabelled position `holder`; absmax per relabelled rank. Without a ring order a
// ring's order is the worst: the holder adds its own contribution last (every ring does), and the
// others come in decreasing absmax, which maximizes every prefix sum of the chain, and the bound is
// non-decreasing in each prefix sum (D21).
double reduce_bound(const CollectiveVerifySpec& s, int64_t first, int64_t holder, std::vector<double> a) {
    const PathConfig& c = s.config;
    const int64_t n = c.ranks;
    if ((c.path == PathKind::kRingRs || c.path == PathKind::kFp32RingRs) && s.ring_order.empty() && n > 1) {
        std::vector<double> others;
        for (int64_t r = 0; r < n; ++r)
            if (r != holder) others.push_back(a[static_cast<size_t>(r)]);
        std::sort(others.begin(), others.end(), std::greater<>());
        std::vector<double> w(static_cast<size_t>(n));
        w[static_cast<size_t>(holder)] = a[static_cast<size_t>(holder)];
        for (int64_t h = 0; h + 1 < n; ++h) w[static_cast<size_t>((holder + 1 + h) % n)] = others[static_cast<size_t>(h)];
        a = std::move(w);
    }
    return reference::a_priori_bound(c, first, holder, a);
}

}  // namespace

namespace {

// Same-events: the exact sum of the same decoded contributions (a2a-rs, two-shot-ar), or of the
// inputs (fp32-ring-rs), per element, and its tolerance, times N for a mean.
struct SameEvents {
    std::vector<SuperAcc> sum;
    std::vector<double> tol;
};

// One chunk of a run, judged column by column against qtransit's schedule on the same inputs: the
// three tiers per output element, k from the schedule's ledger, same bits across the ranks.
class ChunkVerifier {
public:
    ChunkVerifier(const CollectiveVerifySpec& spec, const ChunkTensors& t)
        : spec_(spec), c_(spec.config), t_(t), n_(c_.ranks), s_(c_.shard()), v_(empty_verification(spec)), ring_(spec),
          permute_(!spec.ring_order.empty()), rs_(is_rs(c_.path)), gather_(is_gather(c_.path)), hpz_(is_hpz(c_.path)),
          p_(ring_.pos[static_cast<size_t>(t.chunk)]), scale_(spec.mean ? static_cast<double>(n_) : 1.0),
          inv_n_(static_cast<float>(1.0 / static_cast<double>(n_))), uo_(out_u(spec)),
          div_u_(spec.mean ? 2 * kU32 + kU32 * kU32 : 0.0), u_acc_(accum_type(c_.accum).u), inputs_(t, ring_, s_, permute_),
          transport_(n_, c_.ranks_per_node, c_.format), exact_{v_.tiers[0]}, same_{v_.tiers[1]}, bounded_{v_.tiers[2]},
          do_same_(v_.tiers[1].not_applicable.empty()), do_exact_(v_.tiers[0].not_applicable.empty()) {}

    Result<CollectiveVerification> run() {
        // The chunk's columns in the relabelled run.
        const int64_t total = collectives::column_count(c_);
        for (int64_t k = 0; k < total; ++k) {
            const auto col = collectives::column_at(c_, k);
            if (std::clamp<int64_t>(col.first / s_, 0, n_ - 1) != p_) continue;
            if (auto st = column(col.first, col.second); !st) return st.error();
        }
        v_.round_sums();
        return std::move(v_);
    }

private:
    Status column(int64_t first, int64_t len);
    Result<SameEvents> same_events(int64_t len) const;
    void note_k(const OutputRow& row, int64_t first, int64_t len);
    double row_bound(int64_t first, int64_t holder, const std::vector<double>& absmax) const;
    void check_element(const OutputRow& row, int64_t rank, size_t i, int64_t first, int64_t pos, float got, const SuperAcc& target,
                       double target_d, const SameEvents& ev, double col_bound, double gather_amax, const std::vector<double>& absmax);
    void check_same_bits(size_t ulen, const std::function<int64_t(int64_t)>& tensor_pos);

    const CollectiveVerifySpec& spec_;
    const PathConfig& c_;
    const ChunkTensors& t_;
    const int64_t n_, s_;
    CollectiveVerification v_;
    const Ring ring_;
    const bool permute_, rs_, gather_, hpz_;
    const int64_t p_;            // the chunk's position in the relabelled run
    const double scale_;         // deviations are measured times N for a mean
    const float inv_n_;          // NUMERICS 3: fl32(1/N), once at the end
    const double uo_;            // the outputs' dtype's unit roundoff (0: binary32)
    const double div_u_;         // a division by N, or a multiply by fl32(1/N)
    const double u_acc_;
    ChunkInputs inputs_;
    collectives::SimTransport transport_;
    ColumnRecord rec_;
    Recorder exact_, same_, bounded_;
    const bool do_same_, do_exact_;
};

Result<SameEvents> ChunkVerifier::same_events(int64_t len) const {
    const size_t ulen = static_cast<size_t>(len);
    SameEvents ev;
    ev.sum.assign(ulen, SuperAcc());
    std::vector<double> abs_sum(ulen, 0.0);
    const bool low = low_precision(c_.accum);
    for (int64_t r = 0; r < n_; ++r) {
        std::span<const float> x(rec_.contributions.data() + static_cast<size_t>(r) * ulen, ulen);
        std::vector<float> d(x.begin(), x.end());
        if (c_.path != PathKind::kFp32RingRs) {
            auto q = reference::quantize(c_.format, x, len);
            if (!q) return q.error();
            d = q->decoded;
        }
        // Under fp16 (bf16) accumulation every term is rounded to binary16 (bfloat16) first (D11,
        // D24), except the lone input of an add-free fp32-ring-rs with N = 1.
        if (low && !(c_.path == PathKind::kFp32RingRs && n_ == 1))
            for (float& e : d) e = reference::round_to_accum(e, c_.accum);
        for (size_t i = 0; i < ulen; ++i) {
            ev.sum[i].add(d[i]);
            abs_sum[i] += std::fabs(static_cast<double>(d[i]));
        }
    }
    ev.tol.resize(ulen);
    const double g = gamma(n_ - 1, u_acc_);
    double amax_r = 0;  // two-shot-ar: a bound of the absmax of the reduced block before its gather
    for (size_t i = 0; i < ulen; ++i) {
        ev.tol[i] = g * abs_sum[i] * (1 + static_cast<double>(n_) * 0x1p-52) * kUp;
        amax_r = std::max(amax_r, (std::fabs(ev.sum[i].to_double()) * (1 + 0x1p-52) + ev.tol[i]) * kUp);
    }
    for (size_t i = 0; i < ulen; ++i) {
        const double sabs = std::fabs(ev.sum[i].to_double()) * (1 + 0x1p-52);
        double tol = ev.tol[i];
        if (c_.path == PathKind::kTwoShotAr || c_.path == PathKind::kTwoShotArKeep) {
            // The reduced block R (|R_i| <= |S_i| + tol_i) is quantized once more for the gather: one
            // event within e(absmax R); for a mean, R may be divided before it (then the event is on
            // R / N) or after. (two-shot-ar-keep's owner holds R itself: the same tolerance covers it,
            // and whichever rank a run made the owner, D46.)
            double q = reference::event_bound_of_absmax(c_.format, amax_r);
            if (spec_.mean)
                q = std::max(q, static_cast<double>(n_) *
                                    reference::event_bound_of_absmax(c_.format, amax_r * (1 + 3 * kU32) / static_cast<double>(n_)));
            tol = (tol + q * kUp) * kUp;
        }
        if (spec_.mean) tol = (tol + div_u_ * (sabs + tol)) * kUp;
        if (uo_ > 0) tol = (tol + uo_ * (sabs + tol) * (1 + div_u_)) * kUp;  // the final store in the outputs' dtype
        ev.tol[i] = tol;
    }
    return ev;
}

// k from qtransit's ledger, for the contributors this row's elements depend on.
void ChunkVerifier::note_k(const OutputRow& row, int64_t first, int64_t len) {
    const auto ks = contribution_k(rec_, row, n_);
    int64_t lo = 0, hi = n_ - 1;
    if (gather_) {
        lo = std::clamp<int64_t>(first / s_, 0, n_ - 1);
        hi = std::clamp<int64_t>((first + len - 1) / s_, 0, n_ - 1);
    }
    for (int64_t j = lo; j <= hi; ++j) {
        const int32_t k = ks[static_cast<size_t>(j)];
        v_.k_min = v_.have_k ? std::min(v_.k_min, k) : k;
        v_.k_max = v_.have_k ? std::max(v_.k_max, k) : k;
        v_.have_k = true;
    }
}

// The bounded tier's bound for a reduce path's row (per column), times N for a mean.
double ChunkVerifier::row_bound(int64_t first, int64_t holder, const std::vector<double>& absmax) const {
    const double b = reduce_bound(spec_, first, holder, absmax);
    if (!spec_.mean) return b;
    // The division by N at any stage (D21): the part before it, divided; the part after it on
    // inputs of at most (a_j (1 + 3u) + b) / N; the division's own rounding.
    std::vector<double> ah(absmax), ap(absmax);
    double asum = 0;
    for (double& a : ah) a *= 1 + 3 * kU32;
    const double bh = reduce_bound(spec_, first, holder, ah);
    for (size_t j = 0; j < ap.size(); ++j) {
        ap[j] = (ah[j] + bh) / static_cast<double>(n_) * kUp;
        asum += ah[j];
    }
    const double bp = reduce_bound(spec_, first, holder, ap);
    return (bh + static_cast<double>(n_) * bp + div_u_ * (asum + bh)) * kUp;  // times N
}

// One output element: the error statistics and the three tiers.
void ChunkVerifier::check_element(const OutputRow& row, int64_t rank, size_t i, int64_t first, int64_t pos, float got, const SuperAcc& target,
                                  double target_d, const SameEvents& ev, double col_bound, double gather_amax,
                                  const std::vector<double>& absmax) {
    float sim = row.values[i];
    if (spec_.mean) sim = sim * inv_n_;
    sim = round_out(spec_, sim);
    ++v_.outputs;
    // Where and what, for a failure's message only: built when one fails, not per element.
    auto at = [&] { return where(c_, rank, pos); };

    // Error statistics against the exact target.
    const SuperAcc dev = deviation(target, got, scale_);
    const SuperAcc sdev = deviation(target, sim, scale_);
    const double tgt = target_d / scale_;
    v_.exact_sum_sq_target.add(tgt * tgt);
    if (std::isfinite(got)) {
        const double e = dev.to_double() / scale_;
        v_.max_abs_error = std::max(v_.max_abs_error, std::fabs(e));
        v_.exact_sum_sq_error.add(e * e);
        v_.exact_sum_error.add(e);
    }
    if (std::isfinite(sim)) {
        const double e = sdev.to_double() / scale_;
        v_.sim_max_abs_error = std::max(v_.sim_max_abs_error, std::fabs(e));
        v_.exact_sim_sum_sq_error.add(e * e);
        v_.exact_sim_sum_error.add(e);
    }
    const bool finite = std::isfinite(got);
    auto value = [&] { return "value " + shortest(got); };

    // Tier 1: exact.
    const bool equal = same_bits(got, sim);
    if (!equal) ++v_.differing_from_schedule;
    if (do_exact_) {
        exact_.check();
        if (!equal) {
            const int64_t ulps = finite && std::isfinite(sim) ? std::llabs(ordered(got) - ordered(sim)) : -1;
            if (ulps >= 0) v_.tiers[0].max_ratio = std::max(v_.tiers[0].max_ratio, static_cast<double>(ulps));
            exact_.fail(pos, rank,
                        at() + ": " + value() + ", qtransit's schedule " + shortest(sim) +
                            (ulps >= 0 ? " (" + std::to_string(ulps) + " ulp" + (ulps == 1 ? "" : "s") + " apart, difference " +
                                             show(static_cast<double>(got) - static_cast<double>(sim)) + ")"
                                       : ""));
        }
    }
    // Tier 2: same events.
    if (do_same_) {
        same_.check();
        if (gather_) {
            if (!equal)
                same_.fail(pos, rank,
                           at() + ": " + value() + ", but the gathered value is " + shortest(sim) +
                               " (a gather adds nothing: the same events give the same bits)");
        } else {
            const SuperAcc d = deviation(ev.sum[i], got, scale_);
            const double tol = ev.tol[i];
            const bool ok = finite && d.compare_abs(tol) <= 0;
            const double dd = std::fabs(d.to_double());
            if (finite) v_.tiers[1].max_ratio = std::max(v_.tiers[1].max_ratio, tol > 0 ? dd / tol : (dd > 0 ? kInf : 0.0));
            // The exact target is what the run was asked for: the sum, or the mean (sum / N).
            if (!ok)
                same_.fail(pos, rank,
                           at() + ": " + value() + ", but the exact " + (spec_.mean ? "mean" : "sum") +
                               " of the same decoded contributions is " + show(ev.sum[i].to_double() / scale_) +
                               (finite ? ": |difference| " + show(dd / scale_) + " > tolerance " + show(tol / scale_)
                                       : ": a non-finite output (" + shortest(got) + ") is never within tolerance " + show(tol / scale_)));
        }
    }
    // Tier 3: bounded.
    bounded_.check();
    double b = col_bound;
    if (gather_) {
        const double ai = rec_.first_block_absmax.empty() ? absmax[0] : std::fabs(static_cast<double>(rec_.first_block_absmax[i]));
        int64_t holder = row.rank;
        if (c_.path == PathKind::kRingAgRequant && spec_.ring_order.empty())
            holder = (std::clamp<int64_t>(first / s_, 0, n_ - 1) + n_ - 1) % n_;  // the longest chain
        b = reference::a_priori_bound(c_, first, holder, std::vector<double>{ai, gather_amax});
    }
    if (uo_ > 0) b = (b + uo_ * (std::fabs(target_d) * (1 + 0x1p-52) + b) * (1 + div_u_)) * kUp;
    const bool ok = finite && dev.compare_abs(b) <= 0;
    const double dd = std::fabs(dev.to_double());
    if (finite) v_.tiers[2].max_ratio = std::max(v_.tiers[2].max_ratio, b > 0 ? dd / b : (dd > 0 ? kInf : 0.0));
    if (!ok)
        bounded_.fail(pos, rank,
                      at() + ": " + value() + ", target " + show(tgt) +
                          (finite ? ": |error| " + show(dd / scale_) + " > the path's a-priori bound " + show(b / scale_)
                                  : ": a non-finite output (" + shortest(got) + ") is never within the path's a-priori bound " +
                                        show(b / scale_)));
}

// Every rank the same bits (all-reduce, all-gather).
void ChunkVerifier::check_same_bits(size_t ulen, const std::function<int64_t(int64_t)>& tensor_pos) {
    for (size_t i = 0; i < ulen; ++i) {
        const int64_t pos = tensor_pos(static_cast<int64_t>(i));
        const float ref = t_.output(0, pos);
        for (int64_t r = 1; r < n_; ++r) {
            ++v_.same_bits_checked;
            const float got = t_.output(r, pos);
            if (same_bits(got, ref)) continue;
            v_.same_bits = false;
            if (v_.same_bits_pos < 0 || pos < v_.same_bits_pos) {
                v_.same_bits_pos = pos;
                v_.same_bits_first = "tensor index " + std::to_string(pos) + " (shard " + std::to_string(pos / s_) + "): rank " +
                                     std::to_string(r) + " holds " + shortest(got) + ", rank 0 " + shortest(ref);
            }
            break;
        }
    }
}

Status ChunkVerifier::column(int64_t first, int64_t len) {
    if (auto st = collectives::run_column(c_, inputs_, transport_, first, len, rec_); !st) return st.error();
    if (inputs_.outside())
        return make_error(ErrorCode::kInternal, "verify: the schedule read inputs outside chunk " + std::to_string(t_.chunk) + "'s");
    const size_t ulen = static_cast<size_t>(len);
    // Original tensor position of element i of this column: the relabelled chunk p is chunk t.chunk.
    const int64_t off = first - p_ * s_;  // within the chunk (hpz: may pass its end)
    auto tensor_pos = [&](int64_t i) { return hpz_ ? first + i : t_.chunk * s_ + off + i; };

    // Exact targets and the absmax of every contribution row (relabelled rank order).
    std::vector<SuperAcc> target(ulen);
    std::vector<double> absmax(static_cast<size_t>(rec_.contribution_rows), 0.0);
    for (int64_t r = 0; r < rec_.contribution_rows; ++r)
        for (size_t i = 0; i < ulen; ++i) {
            const float x = rec_.contributions[static_cast<size_t>(r) * ulen + i];
            target[i].add(x);
            absmax[static_cast<size_t>(r)] = std::max(absmax[static_cast<size_t>(r)], static_cast<double>(std::fabs(x)));
        }
    std::vector<double> target_d(ulen);
    for (size_t i = 0; i < ulen; ++i) target_d[i] = target[i].to_double();
    SameEvents ev;
    if (do_same_ && !gather_) {
        auto e = same_events(len);
        if (!e) return e.error();
        ev = std::move(*e);
    }
    for (const OutputRow& row : rec_.outputs) {
        const int64_t rank = ring_.pi[static_cast<size_t>(row.rank)];  // original rank
        const int64_t oi = rs_ ? 0 : rank;                             // index in out_ranks
        if (rs_ && rank != t_.chunk)
            return make_error(ErrorCode::kInternal, "verify: a reduce-scatter row of chunk " + std::to_string(t_.chunk) +
                                                        " is held by rank " + std::to_string(rank));
        note_k(row, first, len);
        // The bounded tier's bound for this row: per column for reduce paths, per element for gathers.
        const double col_bound = gather_ ? 0.0 : row_bound(first, row.rank, absmax);
        double gather_amax = 0;
        if (gather_)
            for (float a : rec_.first_block_absmax) gather_amax = std::max(gather_amax, static_cast<double>(std::fabs(a)));
        for (size_t i = 0; i < ulen; ++i) {
            const int64_t pos = tensor_pos(static_cast<int64_t>(i));
            const int64_t opos = rs_ ? off + static_cast<int64_t>(i) : pos;  // position in the output row
            check_element(row, rank, i, first, pos, t_.output(oi, opos), target[i], target_d[i], ev, col_bound, gather_amax, absmax);
        }
    }
    if (v_.same_bits_applies) check_same_bits(ulen, tensor_pos);
    return Status::Ok();
}

}  // namespace

Result<CollectiveVerification> verify_chunk(const CollectiveVerifySpec& spec, const ChunkTensors& t) { return ChunkVerifier(spec, t).run(); }

namespace {
// Every rank's own inputs as the chunks one process read hold them (chunk c: rank c's over
// [in_lo, in_hi); 0 elsewhere), for collectives::tensor_amax, which reads rank r's shard.
class OwnShards final : public collectives::Inputs {
public:
    explicit OwnShards(std::span<const ChunkTensors> chunks) : chunks_(chunks) {}
    void fill(int64_t rank, int64_t first, int64_t len, float* out) const override {
        const ChunkTensors* t = nullptr;
        for (const auto& c : chunks_)
            if (c.chunk == rank) t = &c;
        for (int64_t i = 0; i < len; ++i) {
            const int64_t e = first + i;
            out[i] = t && e >= t->in_lo && e < t->in_hi ? t->input(rank, e) : 0.0f;
        }
    }

private:
    std::span<const ChunkTensors> chunks_;
};
}  // namespace

Result<CollectiveVerification> verify_chunks(const CollectiveVerifySpec& spec, std::span<const ChunkTensors> chunks) {
    if (spec.config.tensor_scale && !(spec.config.tensor_amax >= 0)) {
        // D50: the tensor's scale from the dumped inputs, every owner's shard (the chunks of one process
        // hold every rank's: a tensor's scale is refused under mpi, where they do not).
        if (chunks.size() != static_cast<size_t>(spec.config.ranks))
            return make_error(ErrorCode::kInvalidArgument, spec.config.path_name() + ": scales per-tensor need every rank's inputs in one "
                                                           "process (--backend cpu)");
        CollectiveVerifySpec resolved = spec;
        if (auto st = collectives::resolve_tensor_scale(resolved.config, OwnShards(chunks)); !st) return st.error();
        return verify_chunks(resolved, chunks);
    }
    CollectiveVerification total = empty_verification(spec);
    std::vector<std::optional<Result<CollectiveVerification>>> results(chunks.size());
    std::atomic<size_t> next{0};
    auto work = [&] {
        for (size_t i; (i = next.fetch_add(1)) < chunks.size();) results[i] = verify_chunk(spec, chunks[i]);
    };
    const size_t threads = std::clamp<size_t>(std::thread::hardware_concurrency(), 1, std::max<size_t>(chunks.size(), 1));
    std::vector<std::thread> pool;
    for (size_t k = 1; k < threads; ++k) pool.emplace_back(work);
    work();
    for (auto& th : pool) th.join();
    // In chunk order: the first error is the lowest chunk's, as one thread would meet it.
    for (auto& r : results) {
        if (!*r) return r->error();
        total.merge(**r);
    }
    return total;
}

Result<CollectiveVerification> verify_arrays(const CollectiveVerifySpec& spec, std::span<const float> inputs,
                                             std::span<const float> outputs) {
    if (auto st = check_spec(spec); !st) return st.error();
    const PathConfig& c = spec.config;
    const int64_t n = c.ranks, m = c.elements;
    const int64_t out_cols = is_rs(c.path) ? c.shard() : m;
    if (static_cast<int64_t>(inputs.size()) != n * m)
        return make_error(ErrorCode::kInvalidArgument, "inputs: " + std::to_string(inputs.size()) + " values, want N x M = " +
                                                           std::to_string(n) + " x " + std::to_string(m));
    if (static_cast<int64_t>(outputs.size()) != n * out_cols)
        return make_error(ErrorCode::kInvalidArgument, "outputs: " + std::to_string(outputs.size()) + " values, want " +
                                                           std::to_string(n) + " x " + std::to_string(out_cols));
    std::vector<ChunkTensors> chunks;
    for (int64_t ch = 0; ch < n; ++ch) {
        ChunkTensors t = chunk_layout(c, ch);
        t.in = inputs.data() + t.in_lo;
        t.in_stride = m;
        t.out = outputs.data() + (is_rs(c.path) ? ch * out_cols : t.out_lo);
        t.out_stride = out_cols;
        chunks.push_back(t);
    }
    return verify_chunks(spec, chunks);
}

namespace {
// The five exact sums, in this order, as exact_sums' arrays of words (V: const or not).
template <class V>
auto exact_sums(V& v) {
    return std::array{&v.exact_sum_sq_error, &v.exact_sum_error, &v.exact_sum_sq_target, &v.exact_sim_sum_sq_error,
                      &v.exact_sim_sum_error};
}
}  // namespace

reports::VerifiedCollective verified_collective(const CollectiveVerification& v) {
    const auto& c = v.spec.config;
    reports::VerifiedCollective r;
    r.path = c.path_name();
    r.schedule = path_info(c.path).name;
    r.declared = !c.label.empty();
    r.format = c.format.name();
    r.accum = to_string(c.accum);
    r.ranks = c.ranks;
    r.ranks_per_node = c.ranks_per_node;
    r.elements = c.elements;
    r.block = c.block;
    r.mean = v.spec.mean;
    r.ring_order = v.spec.ring_order;
    r.asked = to_string(v.asked);
    r.asked_default = !v.spec.asked;
    r.holds = v.holds();
    if (const auto st = v.strongest()) r.strongest = to_string(*st);
    for (const auto& t : v.tiers)
        r.tiers.push_back({to_string(t.tier), t.tier == Tier::kExact, t.not_applicable, t.holds, t.checked, t.violations, t.max_ratio, t.first,
                           t.first_pos, t.first_rank});
    r.same_bits_applies = v.same_bits_applies;
    r.same_bits = v.same_bits;
    r.same_bits_checked = v.same_bits_checked;
    r.same_bits_pos = v.same_bits_pos;
    r.same_bits_first = v.same_bits_first;
    r.outputs = v.outputs;
    r.differing_from_schedule = v.differing_from_schedule;
    r.k_min = v.k_min;
    r.k_max = v.k_max;
    r.have_k = v.have_k;
    r.run = {v.max_abs_error, v.rel_rms(), v.bias(), v.sum_sq_error, v.sum_error};
    r.simulation = {v.sim_max_abs_error, v.sim_rel_rms(), v.sim_bias(), v.sim_sum_sq_error, v.sim_sum_error};
    r.sum_sq_target = v.sum_sq_target;
    return r;
}

nlohmann::json exchange_json(const CollectiveVerification& v) {
    nlohmann::json out = reports::to_json(verified_collective(v));
    nlohmann::json sums = nlohmann::json::array();
    for (const reference::DoubleAcc* a : exact_sums(v)) sums.push_back(a->to_words());
    out["exact_sums"] = sums;
    return out;
}

Result<CollectiveVerification> verification_from_json(const nlohmann::json& j, const CollectiveVerifySpec& spec) {
    try {
        CollectiveVerification v = empty_verification(spec);
        const auto& tiers = j.at("tiers");
        for (size_t k = 0; k < 3; ++k) {
            const auto& t = tiers.at(k);
            TierOutcome& o = v.tiers[k];
            o.holds = t.at("holds").get<bool>();
            o.checked = t.at("checked").get<int64_t>();
            o.violations = t.at("violations").get<int64_t>();
            o.max_ratio = t.at("max_ratio").is_null() ? kInf : t.at("max_ratio").get<double>();
            o.first = t.at("first_violation").get<std::string>();
            o.first_pos = t.at("first_pos").get<int64_t>();
            o.first_rank = t.at("first_rank").get<int64_t>();
        }
        const auto& sb = j.at("same_bits");
        v.same_bits = sb.at("holds").get<bool>();
        v.same_bits_checked = sb.at("checked").get<int64_t>();
        v.same_bits_first = sb.at("first_difference").get<std::string>();
        v.same_bits_pos = sb.at("first_pos").get<int64_t>();
        v.outputs = j.at("outputs").get<int64_t>();
        v.differing_from_schedule = j.at("differing_from_schedule").get<int64_t>();
        v.k_min = j.at("k_min").get<int32_t>();
        v.k_max = j.at("k_max").get<int32_t>();
        v.have_k = j.at("have_k").get<bool>();
        v.max_abs_error = j.at("run").at("max_abs_error").get<double>();
        v.sim_max_abs_error = j.at("simulation").at("max_abs_error").get<double>();
        const auto& sums = j.at("exact_sums");
        const auto accs = exact_sums(v);
        if (sums.size() != accs.size())
            return make_error(ErrorCode::kInternal, "verify: a rank's partial result has " + std::to_string(sums.size()) +
                                                        " exact sums, want " + std::to_string(accs.size()));
        for (size_t k = 0; k < accs.size(); ++k) {
            const auto words = sums.at(k).get<std::vector<double>>();
            if (words.size() != reference::DoubleAcc::kWords)
                return make_error(ErrorCode::kInternal, "verify: a rank's partial result has an exact sum of " +
                                                            std::to_string(words.size()) + " words, want " +
                                                            std::to_string(reference::DoubleAcc::kWords));
            *accs[k] = reference::DoubleAcc::from_words(words.data());
        }
        v.round_sums();
        return v;
    } catch (const nlohmann::json::exception& e) {
        return make_error(ErrorCode::kInternal, std::string("verify: a rank's partial result is malformed: ") + e.what());
    }
}

Result<CollectiveVerification> combine_over_ranks(const CollectiveVerification& mine) {
    namespace mpi = collectives::mpi;
    auto all = mpi::allgather_strings(exchange_json(mine).dump());
    if (!all) return all.error();
    CollectiveVerification total = empty_verification(mine.spec);
    for (const auto& text : *all) {
        nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
        if (j.is_discarded()) return make_error(ErrorCode::kInternal, "verify: a rank's partial result does not parse");
        auto v = verification_from_json(j, mine.spec);
        if (!v) return v.error();
        total.merge(*v);
    }
    return total;
}

}  // namespace qtransit::gate
