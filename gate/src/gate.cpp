// The numerics gate: every (format, distribution) runs every path at every N through the
// simulation with exact checking (run_sweep, with the k ledger compared to NUMERICS.md section 3),
// every format's kernels are compared with the reference (CPU, and GPU when one answers), and the
// results become named verdicts (bounds, kernel-vs-reference, k, scaling, budget, baseline).
#include "qtransit/gate/gate.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <map>
#include <optional>

#include "qtransit/collectives/mpi.hpp"
#include "qtransit/collectives/paths.hpp"
#include "qtransit/common/bits.hpp"
#include "qtransit/common/text_file.hpp"
#include "qtransit/kernels/block_math.hpp"
#include "qtransit/kernels/gpu.hpp"
#include "qtransit/gate/codec_check.hpp"
#include "qtransit/gate/boundaries.hpp"
#include "qtransit/gate/sweep.hpp"
#include "qtransit/gate/verdicts.hpp"
#include "qtransit/gate/verify.hpp"
#include "qtransit/version.hpp"

namespace qtransit::gate {
namespace {

using reports::GateRun;
using reports::Verdict;

// GPU encode/decode of x against the CPU kernel's (already checked against the reference).
// Where a kernel check's input lies: rank 0's tensor of that name (its seed is the gate's).
Site kernel_site(const std::string& tensor) {
    Site site;
    site.tensor = tensor;
    site.rank = 0;
    return site;
}

// The GPU kernel on the CPU check's shards, with the same keys (shard_options: stochastic rounding
// and random signs draw from the seed, the site and each element's index), against that check's
// codes, scales, offsets and decoded values, bit for bit.
std::string gpu_compare(const FormatSpec& f, std::span<const float> x, int64_t block, const Site& site, uint64_t seed,
                        const CodecCheck& cpu) {
    const int64_t n = static_cast<int64_t>(x.size()), shard = cpu.shard > 0 ? cpu.shard : n;
    std::vector<uint8_t> codes;
    std::vector<float> scales, offsets, decoded;
    for (int64_t s = 0; s * shard < n; ++s) {
        auto enc = kernels::gpu::encode(f, x.subspan(static_cast<size_t>(s * shard), static_cast<size_t>(shard)), block,
                                        shard_options(site, seed, s, shard));
        if (!enc) return "differ: GPU encode failed: " + enc.error().message;
        auto dec = kernels::gpu::decode(*enc);
        if (!dec) return "differ: GPU decode failed: " + dec.error().message;
        codes.insert(codes.end(), enc->codes.begin(), enc->codes.end());
        scales.insert(scales.end(), enc->scales.begin(), enc->scales.end());
        offsets.insert(offsets.end(), enc->offsets.begin(), enc->offsets.end());
        decoded.insert(decoded.end(), dec->begin(), dec->end());
    }
    if (codes != cpu.encoded.codes) return "differ: packed codes";
    if (!same_bits(scales, cpu.encoded.scales)) return "differ: scales";
    if (!same_bits(offsets, cpu.encoded.offsets)) return "differ: offsets";
    if (!same_bits(decoded, cpu.decoded)) return "differ: decoded values";
    return "match";
}

// One kernel check (codec_check.hpp) of `codec` (null: qtransit's kernels) on rank 0's `x`, as the
// report's FormatCheck ("refused" when kernel and reference both refuse it); the check itself goes
// to *kept when given, for the GPU comparison.
reports::FormatCheck kernel_check(const GateConfig& cfg, const FormatSpec& f, const kernels::PluginCodec* codec,
                                  const std::string& label, const std::string& tensor, std::span<const float> x,
                                  int64_t shard, std::optional<CodecCheck>* kept) {
    reports::FormatCheck fc;
    fc.format = f.name();
    fc.dist = label;
    fc.check.elements = static_cast<int64_t>(x.size());
    fc.check.block = cfg.block;
    auto c = codec_check(codec, f, x, cfg.block, shard, kernel_site(tensor), cfg.seed, cfg.conformance);
    if (!c) {
        fc.refused = c.error().message;
        return fc;
    }
    fc.kernel = codec ? codec->name() : "qtransit";
    fc.conformance = kernels::to_string(c->conformance);
    fc.check = static_cast<const reports::QuantizationCheck&>(*c);  // the verdict, not the kernel's output
    if (fc.check.input_class.empty() && !fc.check.first_difference.empty()) fc.check.input_class = label;
    if (kept) *kept = std::move(*c);
    return fc;
}

// What the gate sweeps for one format (the first of a per-stage list) and distribution: its sizes,
// seed, accumulation and division, every k checked.
SweepSpec sweep_of(const GateConfig& cfg, std::vector<PathKind> paths, std::vector<int64_t> ranks, const FormatSpec& f,
                   kernels::Distribution d) {
    SweepSpec spec;
    spec.paths = std::move(paths);
    spec.ranks = std::move(ranks);
    spec.ranks_per_node = cfg.ranks_per_node;
    spec.elements = cfg.elements;
    spec.format = f;
    spec.block = cfg.block;
    spec.dist = d;
    spec.seed = cfg.seed;
    spec.accum = cfg.accum;
    spec.divide = cfg.divide;
    spec.threads = cfg.threads;
    spec.check_k = true;
    return spec;
}

}  // namespace

std::string now_utc() {
    const std::time_t t = std::time(nullptr);
    char b[32];
    std::strftime(b, sizeof b, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
    return b;
}

Status check_gate_memory(const GateConfig& cfg) {
    // The kernel check holds one rank's M inputs and what is derived from them: measured at about
    // 58 bytes an element (M = 2^24: 0.97 GB resident), taken as 64. Said before anything runs; a
    // gate of M = 2^30 was killed by the kernel's out-of-memory killer instead. (Each sweep checks
    // its own columns' need before its first run.)
    return check_memory(cfg.elements > (int64_t{1} << 56) ? INT64_MAX : cfg.elements * 64,
                        "the kernel check of M = " + std::to_string(cfg.elements) + " elements (gate.elements)");
}

namespace {

// What runs for each (format, distribution): every quantized path but tree-rs at the gate's N,
// tree-rs at tree_ranks. The 16-bit paths quantize nothing (D26): they run once per distribution,
// with the first format, one group per type (an fp16 refusal does not take the bf16 runs with it),
// and on the cpu backend when --backend is a device one, which has no 16-bit schedules yet. When
// the gate sums (gate.divide = none) their ring reduce-scatters also run pre-divided, for the
// comparison table (issue 18): with and without DeepSpeed's division.
struct Part {
    std::vector<PathKind> paths;
    bool tree = false, typed = false;
    Divide divide = Divide::kNone;
    std::string type;  // typed: "bf16", "fp16", "fp8-e4m3" or "fp8-e5m2"
    // A declared path (D45): its one path runs under its name with what it fixes; `wire` non-empty:
    // its own formats (one, or one per stage), run once (with the first of gate.formats' turn)
    // instead of once per format.
    std::string label;
    std::optional<Accum> accum;
    std::optional<Rotation> rotation;
    std::vector<FormatSpec> wire;
    bool unquantized = false;  // a declared path of wire none (deepep-bf16-combine): run once, as `wire` is
    bool per_tensor = false;   // a declared path with scales = "per-tensor" (D50)
    // Whether it runs once per distribution (with the first of gate.formats' turn) rather than once per format.
    bool once() const { return typed || !wire.empty() || unquantized; }
};

std::vector<Part> gate_parts(const GateConfig& cfg, bool tree) {
    std::vector<Part> parts;
    Part flat;
    flat.divide = cfg.divide;
    for (auto p : cfg.paths)
        if (!typed_path(p) && p != PathKind::kTreeRs) flat.paths.push_back(p);
    parts.push_back(flat);
    if (tree) {
        Part t;
        t.paths = {PathKind::kTreeRs}, t.tree = true, t.divide = cfg.divide;
        parts.push_back(t);
    }
    for (Accum t : {Accum::kBf16, Accum::kFp16, Accum::kFp8E4m3, Accum::kFp8E5m2}) {
        Part all, pre;
        all.typed = pre.typed = true;
        all.divide = cfg.divide, pre.divide = Divide::kPre;
        all.type = pre.type = to_string(t);
        for (auto p : cfg.paths)
            if (typed_path(p) && path_info(p).element == t) {
                all.paths.push_back(p);
                if (path_info(p).shape == PathShape::kReduceScatter) pre.paths.push_back(p);
            }
        parts.push_back(all);
        if (cfg.divide == Divide::kNone) parts.push_back(pre);  // (for NCCL's FP8 paths: ncclAvg, D41)
    }
    // The declared paths (D45): one part each, with its settings, named by it.
    for (const PathDecl& d : cfg.declared) {
        Part p;
        p.paths = {d.kind}, p.typed = typed_path(d.kind), p.divide = d.divide.value_or(cfg.divide);
        if (p.typed) p.type = to_string(path_info(d.kind).element);
        p.label = d.name;
        p.accum = d.accum;
        p.rotation = d.rotation;
        if (d.fixes_wire())
            for (const auto& w : d.wire) p.wire.push_back(parse_format(w).value());  // checked by the config (validate_keys)
        p.unquantized = d.wire_none();
        p.per_tensor = d.per_tensor();
        parts.push_back(std::move(p));
    }
    return parts;
}

// The result's header: what the gate is (formats, paths, N, M, ...), and its notes.
reports::GateResult gate_header(const GateConfig& cfg, const GateOptions& opt, bool tree) {
    reports::GateResult res;
    res.version = QTRANSIT_VERSION;
    res.config_source = cfg.source;
    res.started_at = now_utc();
    for (const auto& f : cfg.formats) res.formats.push_back(f.name());
    for (const auto& l : cfg.staged) res.formats.push_back(stages_name(l));
    for (auto p : cfg.paths) res.paths.push_back(path_info(p).name);
    for (const auto& d : cfg.declared) res.paths.push_back(d.name);
    for (auto d : cfg.dists) res.dists.push_back(kernels::to_string(d));
    res.ranks = cfg.ranks;
    res.ranks_per_node = cfg.ranks_per_node;
    res.elements = cfg.elements;
    res.block = cfg.block;
    res.seed = cfg.seed;
    res.accum = to_string(cfg.accum);
    res.divide = to_string(cfg.divide);
    res.baseline = opt.baseline_path;
    if (tree) {
        res.tree_ranks = cfg.tree_ranks;
        if (cfg.tree_ranks != cfg.ranks) {
            std::string ns;
            for (auto n : cfg.tree_ranks) ns += (ns.empty() ? "" : ", ") + std::to_string(n);
            res.notes.push_back("tree-rs needs N a power of two: it runs at N = " + ns + " instead of the gate's N.");
        }
    }
    res.gpu_available = cfg.gpu && kernels::gpu::device_available();
    if (opt.backend != collectives::Backend::kCpu) {
        const char* b = collectives::to_string(opt.backend);
        res.notes.push_back(
            one_process_per_rank(opt.backend)
                ? std::string("The paths ran with --backend ") + b + ": one process per rank (" +
                      std::to_string(collectives::mpi::size()) + " processes), each checking its own outputs; the "
                      "verdicts were combined on rank 0. RMS errors are summed in another order than in one process "
                      "(equal to about 1e-15 relative)."
                : std::string("The paths ran with --backend ") + b + ".");
    }
    if (cfg.codec)
        res.notes.push_back("The kernel under test is the codec " + cfg.codec->describe() + ", judged under " +
                            kernels::to_string(cfg.conformance) + " conformance, wherever the gate runs " + cfg.codec->format().name() + ".");
    return res;
}

// One run of the gate: its result filled phase by phase (the kernels and paths per format and
// distribution, the per-stage lists, the verdicts).
class GateRunner {
public:
    GateRunner(const GateConfig& cfg, const GateOptions& opt)
        : cfg_(cfg), opt_(opt), tree_(std::find(cfg.paths.begin(), cfg.paths.end(), PathKind::kTreeRs) != cfg.paths.end()),
          parts_(gate_parts(cfg, tree_)), res_(gate_header(cfg, opt, tree_)), total_(cfg.formats.size() * cfg.dists.size()),
          x_(static_cast<size_t>(cfg.elements)) {
        // Every format reads the same inputs of a distribution: generated once and kept (issue 16),
        // when a table is at most kTableBytes; larger ones are generated again by every run, as before.
        // One process per rank generates only its own rank's, as before.
        constexpr int64_t kTableBytes = int64_t{128} << 20;
        for (int64_t n : cfg.ranks) table_ranks_ = std::max(table_ranks_, n);
        if (tree_)
            for (int64_t n : cfg.tree_ranks) table_ranks_ = std::max(table_ranks_, n);
        keep_tables_ = !one_process_per_rank(opt.backend) &&
                       static_cast<double>(table_ranks_) * static_cast<double>(cfg.elements) * 4 <= static_cast<double>(kTableBytes);
    }

    Status run_formats() {
        for (const auto& f : cfg_.formats) {
            edge_cases(f);
            for (auto d : cfg_.dists)
                if (auto st = run_distribution(f, d); !st) return st;
        }
        return Status::Ok();
    }
    Status run_staged();
    reports::GateResult finish();

private:
    std::shared_ptr<const collectives::GeneratedTable> table_for(kernels::Distribution d) {
        if (!keep_tables_) return nullptr;
        auto& t = tables_[d];
        if (!t) t = std::make_shared<const collectives::GeneratedTable>(d, cfg_.seed, table_ranks_, cfg_.elements);
        return t;
    }
    void edge_cases(const FormatSpec& f);
    Status run_distribution(const FormatSpec& f, kernels::Distribution d);
    // One part's sweep; false when the part ends the distribution (a refusal or a codec's failure).
    Result<bool> run_part(const FormatSpec& f, kernels::Distribution d, const Part& part, const reports::FormatCheck& fc);

    const GateConfig& cfg_;
    const GateOptions& opt_;
    const bool tree_;
    const std::vector<Part> parts_;
    reports::GateResult res_;
    std::vector<Verdict> codec_failures_, staged_skips_;
    std::map<kernels::Distribution, std::shared_ptr<const collectives::GeneratedTable>> tables_;
    int64_t table_ranks_ = 0;
    bool keep_tables_ = false;
    // The paths that quantize nothing (fp32-ring-rs) give the same run whatever the format: run with
    // the first format that runs them on a distribution (without a codec, which casts the inputs),
    // and taken from there by every later format (SweepSpec::reuse). Not with one process per rank,
    // whose runs carry their own timings.
    std::map<kernels::Distribution, std::vector<RunRow>> plain_runs_;
    const size_t total_;
    size_t done_ = 0;
    std::vector<float> x_;
};

// The edge cases (codec_check.hpp), in shards whose length is not a multiple of the block.
void GateRunner::edge_cases(const FormatSpec& f) {
    const kernels::PluginCodec* codec = cfg_.codec_for(f);
    const EdgeTensor e = edge_tensor(f, cfg_.block, cfg_.seed);
    auto fc = kernel_check(cfg_, f, codec, "edge-cases", "edge-case input", e.x, e.shard, nullptr);
    if (fc.refused.empty()) fc.gpu = "not run: the edge cases are checked on the CPU";
    if (codec && cfg_.long_codec_call && fc.refused.empty() && fc.check.first_difference.empty())
        if (auto h = long_call_check(*codec, f, cfg_.block, cfg_.seed)) {
            fc.check.exact = false;
            fc.check.first_difference = h->message;
            fc.check.input_class = h->input_class;
            if (cfg_.conformance == kernels::Conformance::kExact) fc.check.conforms = false;
        }
    res_.format_checks.push_back(fc);
}

// The kernels on rank 0's input, then the paths (`parts_`).
Status GateRunner::run_distribution(const FormatSpec& f, kernels::Distribution d) {
    const kernels::PluginCodec* codec = cfg_.codec_for(f);
    const auto g0 = std::chrono::steady_clock::now();
    const std::string dist = kernels::to_string(d);
    size_t runs_before = res_.runs.size();
    bool refused = false;
    kernels::generate_span(d, cfg_.seed, 0, 0, x_);
    std::optional<CodecCheck> cc;
    const std::string tensor = dist + " input";
    // A tensor amax (nvfp4) is this tensor's own, as the recipe takes it: the edge cases and boundary
    // inputs hold the declared T, so the kernel (a codec) is checked under both.
    auto fc = kernel_check(cfg_, f.for_tensor(x_), codec, dist, tensor, x_, cfg_.elements, &cc);
    if (cc)
        fc.gpu = codec ? "not run: the codec is the kernel under test"
                 : !cfg_.gpu ? "not run: gate.gpu = false"
                 : res_.gpu_available ? gpu_compare(cc->encoded.format, x_, cfg_.block, kernel_site(tensor), cfg_.seed, *cc)
                                      : "not run: no GPU answered";
    res_.format_checks.push_back(fc);
    for (const Part& part : parts_) {
        if (part.paths.empty() || (part.once() && &f != &cfg_.formats.front())) continue;
        auto go_on = run_part(f, d, part, fc);
        if (!go_on) return go_on.error();
        if (!*go_on) {
            refused = true;
            break;
        }
    }
    ++done_;
    if (opt_.progress) {
        GateProgress p;
        p.group = done_ - 1, p.groups = total_, p.format = f.name(), p.dist = dist, p.finished = true;
        p.runs = res_.runs.size() - runs_before;
        p.refused = refused;
        for (size_t i = runs_before; i < res_.runs.size(); ++i) p.holds = p.holds && res_.runs[i].bound_holds && res_.runs[i].k_mismatches == 0;
        p.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - g0).count();
        opt_.progress(p);
    }
    return Status::Ok();
}

Result<bool> GateRunner::run_part(const FormatSpec& f, kernels::Distribution d, const Part& part, const reports::FormatCheck& fc) {
    const kernels::PluginCodec* codec = cfg_.codec_for(f);
    const std::string dist = kernels::to_string(d);
    const bool own_wire = !part.wire.empty();  // a declared path with its own format: not the gate format's (or codec's) run
    SweepSpec spec = sweep_of(cfg_, part.paths, part.tree ? cfg_.tree_ranks : cfg_.ranks, own_wire ? part.wire.front() : f, d);
    spec.divide = part.divide;
    if (part.wire.size() > 1) spec.stage_formats = part.wire;
    if (own_wire) spec.block = wire_block(part.wire, cfg_.block);  // its format's fixed block, if it has one
    if (part.accum) spec.accum = *part.accum;
    if (part.rotation) spec.rotation = *part.rotation;
    if (!part.label.empty()) spec.labels = {part.label};
    spec.table = table_for(d);
    spec.backend = part.typed && (opt_.backend == collectives::Backend::kDevice || opt_.backend == collectives::Backend::kNccl)
                       ? collectives::Backend::kCpu
                       : opt_.backend;
    // A declared path whose own wire format is the codec's (te-nvfp4-ag for an nvfp4 codec, fsdp-float8-ag
    // for a torchao-fp8-e4m3 one) runs the codec too: the path it ships in.
    // (A per-tensor scale through an amax floor is not handed to a codec: such a part keeps the kernels.)
    const bool codecs_wire = own_wire && part.wire.size() == 1 && codec && part.wire.front() == codec->format() &&
                             (!part.per_tensor || codec->format().takes_tensor_amax());
    if (codec && (!part.once() || codecs_wire)) spec.codec = cfg_.codec;
    const bool plain_part = !one_process_per_rank(opt_.backend) && !part.typed && !spec.codec && part.divide == cfg_.divide && part.label.empty();
    if (plain_part && plain_runs_.count(d)) spec.reuse = &plain_runs_[d];
    if (opt_.progress)
        spec.on_group = [&, tree_part = part.tree](size_t i, size_t groups, int64_t n) {
            GateProgress p;
            p.group = done_, p.groups = total_, p.format = f.name(), p.dist = dist;
            p.tree = tree_part, p.n = n, p.step = i, p.steps = groups;
            opt_.progress(p);
        };
    auto sw = run_sweep(spec);
    if (!sw && codec && !part.typed && (sw.error().code == ErrorCode::kCodec || sw.error().code == ErrorCode::kCuda)) {
        if (!fc.refused.empty()) {
            // The kernel check found this input refused by codec and reference alike: the codec
            // refusing it in a path is the specified outcome, reported as the built-in's is.
            res_.refusals.push_back({f.name(), dist, sw.error().message});
        } else {
            // The user's codec failed inside a path: a finding about the codec, not a bad input.
            Verdict v;
            v.name = "codec-call/" + codec->name() + "/" + dist;
            v.category = "codec-call";
            v.status = reports::VerdictStatus::kFail;
            v.message = "a call into the codec failed while running the paths on " + dist + " inputs: " + sw.error().message;
            codec_failures_.push_back(v);
        }
        return false;
    }
    if (!sw) {
        if (sw.error().code == ErrorCode::kRangeOverflow || sw.error().code == ErrorCode::kNonFinite) {
            // ds-int<b> refuses inputs beyond binary16 (docs/DECISIONS.md D3), an fp16 path one fp16
            // cannot hold (D26): reported, not run. A 16-bit refusal leaves the format's runs be.
            res_.refusals.push_back({part.typed ? part.type : spec.format.name(), dist, sw.error().message});
            return part.once();  // a declared path's own refusal leaves the format's runs be
        }
        return sw.error();
    }
    for (const auto& r : sw->runs) res_.runs.push_back(gate_run(r, dist, cfg_.seed));
    if (plain_part && !spec.reuse)
        for (const auto& r : sw->runs)
            if (!path_info(r.config.path).quantized) plain_runs_[d].push_back(r);
    if (part.divide != cfg_.divide && part.label.empty()) return true;  // one fit per (path, format, dist): the gate's own runs'
    for (const auto& fit : sw->fits)
        res_.fits.push_back({fit.name, fit.format, dist, fit.exponent, fit.points});  // its runs' format (gate_run's)
    return true;
}

// The per-stage lists (D25, D28): the gate's paths that have two stages, one format per stage.
Status GateRunner::run_staged() {
    std::vector<PathKind> staged_paths;
    for (auto p : cfg_.paths)
        if (!format_stages(p).empty()) staged_paths.push_back(p);
    if (opt_.backend != collectives::Backend::kCpu) {
        if (cfg_.staged.empty()) return Status::Ok();
        // Only the cpu backend carries a message's own format yet (D25): said, and skipped by name.
        res_.notes.push_back(std::string("Per-stage formats run with --backend cpu only: ") + std::to_string(cfg_.staged.size()) +
                             " list(s) of gate.formats did not run under --backend " + collectives::to_string(opt_.backend) + ".");
        for (const auto& l : cfg_.staged)
            for (auto p : staged_paths)
                for (const char* what : {"bounds/", "k/"}) {
                    Verdict v;
                    v.name = what + stages_name(l) + "/" + path_info(p).name;
                    v.category = std::string(what).substr(0, std::string(what).size() - 1);
                    v.status = reports::VerdictStatus::kSkip;
                    v.message = std::string("not run: per-stage formats run with --backend cpu only, not ") + collectives::to_string(opt_.backend);
                    staged_skips_.push_back(v);
                }
        return Status::Ok();
    }
    for (const auto& l : cfg_.staged) {
        const std::string name = stages_name(l);
        for (auto d : cfg_.dists) {
            const std::string dist = kernels::to_string(d);
            SweepSpec spec = sweep_of(cfg_, staged_paths, cfg_.ranks, l.front(), d);
            spec.stage_formats = l;
            spec.backend = opt_.backend;
            spec.table = table_for(d);
            auto sw = run_sweep(spec);
            if (!sw) {
                if (sw.error().code == ErrorCode::kRangeOverflow || sw.error().code == ErrorCode::kNonFinite) {
                    res_.refusals.push_back({name, dist, sw.error().message});
                    continue;
                }
                return sw.error();
            }
            for (const auto& r : sw->runs) res_.runs.push_back(gate_run(r, dist, cfg_.seed));
            for (const auto& fit : sw->fits) res_.fits.push_back({fit.name, fit.format, dist, fit.exponent, fit.points});
        }
    }
    return Status::Ok();
}

// The verdicts, over everything that ran.
reports::GateResult GateRunner::finish() {
    auto add = [this](std::vector<Verdict> v) { res_.verdicts.insert(res_.verdicts.end(), v.begin(), v.end()); };
    add(kernel_verdicts(cfg_, res_, res_.gpu_available ? "" : kernels::gpu::query_devices().note));
    add(codec_failures_);
    add(bound_and_k_verdicts(cfg_, res_.runs));
    add(staged_skips_);
    add(scaling_verdicts(cfg_, res_));
    add(budget_verdicts(cfg_, res_.runs));
    if (opt_.baseline) add(baseline_verdicts(cfg_, res_.runs, *opt_.baseline));
    fail_what_checked_nothing(res_.verdicts);
    return std::move(res_);
}

}  // namespace

Result<reports::GateResult> run_gate(const GateConfig& cfg, const GateOptions& opt) {
    if (auto st = check_gate_memory(cfg); !st) return st.error();
    const auto t0 = std::chrono::steady_clock::now();
    GateRunner runner(cfg, opt);
    if (auto st = runner.run_formats(); !st) return st.error();
    if (auto st = runner.run_staged(); !st) return st.error();
    reports::GateResult res = runner.finish();
    res.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return res;
}

// What --backend asks of the gate before anything runs ("" when it can run). One process per rank
// (mpi; nccl under mpirun): the gate's N, and tree-rs's, must be the number of processes (docs/
// DECISIONS.md D14: a gate's verdicts are drawn over all its N, so running only some would change
// what they mean). device, nccl in one process: a GPU, and for nccl one per rank.
std::string backend_problem(const GateConfig& cfg, collectives::Backend backend, const std::string& name) {
    namespace mpi = collectives::mpi;
    auto list = [](const std::vector<int64_t>& v) {
        std::string s;
        for (int64_t n : v) s += (s.empty() ? "" : ", ") + std::to_string(n);
        return "[" + s + "]";
    };
    const bool tree = std::find(cfg.paths.begin(), cfg.paths.end(), PathKind::kTreeRs) != cfg.paths.end();
    if (cfg.codec)
        if (auto why = collectives::codec_backend_problem(backend); !why.empty()) return why;
    if (backend != collectives::Backend::kCpu) {  // per-stage lists are left out there, with a note (run_gate)
        for (const auto& f : cfg.formats)
            if (f.rotated()) return "rotated formats (" + f.name() + " in gate.formats) run with --backend cpu for now";
    }
    // The 16-bit paths run on the cpu under a device backend (below); a division does not run there.
    if (auto why = collectives::host_only_problem(PathKind::kA2aRs, cfg.divide, backend,
                                                  "gate.divide = \"" + std::string(to_string(cfg.divide)) + "\"");
        !why.empty())
        return why;
    if (one_process_per_rank(backend)) {
        const int64_t np = mpi::size();
        const std::string started = " but the job has " + std::to_string(np) + " process(es) (mpirun -np)";
        if (cfg.ranks.size() != 1 || cfg.ranks[0] != np)
            return "--backend " + name + " runs the gate at one N, one process per rank: the gate's ranks are " +
                   list(cfg.ranks) + " (" + cfg.source + ")" + started + "; give ranks = [" + std::to_string(np) +
                   "] in the gate config" + (cfg.ranks.size() == 1 ? ", or start " + std::to_string(cfg.ranks[0]) + " processes" : "");
        if (tree && (cfg.tree_ranks.size() != 1 || cfg.tree_ranks[0] != np))
            return "--backend " + name + " runs the gate at one N, one process per rank: tree-rs would run at N = " +
                   list(cfg.tree_ranks) + " (" + (cfg.tree_ranks_derived ? "a power of two" : "tree_ranks") + ")" + started +
                   "; remove tree-rs from paths" + (cfg.tree_ranks_derived ? "" : ", or give tree_ranks = [" + std::to_string(np) + "]");
        if (backend == collectives::Backend::kNccl)
            if (const auto q = kernels::gpu::query_devices(); q.devices.empty())
                return "no GPU: " + q.note + " (--backend nccl needs one GPU per process)";
        return "";
    }
    if (backend == collectives::Backend::kCpu) return "";
    const auto q = kernels::gpu::query_devices();
    if (q.devices.empty()) return "no GPU: " + q.note + " (--backend " + name + " needs one)";
    if (backend == collectives::Backend::kNccl) {
        std::vector<int64_t> all = cfg.ranks;
        if (tree) all.insert(all.end(), cfg.tree_ranks.begin(), cfg.tree_ranks.end());
        for (int64_t n : all)
            if (n != static_cast<int64_t>(q.devices.size()))
                return "--backend nccl runs one rank per GPU: the gate has N = " + std::to_string(n) + " but " +
                       std::to_string(q.devices.size()) + " GPU(s) are visible (give ranks = [" +
                       std::to_string(q.devices.size()) + "], or run under mpirun with one process per GPU)";
    }
    return "";
}

}  // namespace qtransit::gate
