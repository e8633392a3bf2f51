// `qtransit simulate`: run collective paths on the in-process transport (or over MPI, NCCL, a GPU),
// check every output element exactly (error, a-posteriori and a-priori bounds), and report per run,
// with a fitted exponent of the relative RMS error against N for every path run at several N.
#include <algorithm>
#include <cstring>

#include "printf.hpp"
#include "qtransit/collectives/mpi.hpp"
#include "qtransit/common/decl_toml.hpp"
#include "qtransit/common/path_decl.hpp"
#include "qtransit/common/text_file.hpp"
#include "qtransit/gate/commands.hpp"
#include "qtransit/gate/verdicts.hpp"
#include "qtransit/kernels/tensor_file.hpp"

namespace qtransit::gate {
namespace {

namespace mpi = collectives::mpi;

// --in: one [N, M] file, or one file per rank ([M] or [1, M]) named with {rank}. One process reads
// them all; under one process per rank each process reads its own rank's file and the rows are
// exchanged (every process computes the whole schedule, mpi.hpp). The result is [N, M].
Result<kernels::NpyArray> read_inputs(const std::string& in, const std::vector<int64_t>& ranks, bool per_process) {
    if (!has_rank_field(in)) return kernels::read_tensor(in);
    if (ranks.size() > 1) return make_error(ErrorCode::kInvalidArgument, "--in with {rank} takes one N (--ranks N)");
    const int64_t n = !ranks.empty() ? ranks[0] : (per_process ? mpi::size() : 0);
    if (n < 1) return make_error(ErrorCode::kInvalidArgument, "--in with {rank} (one file per rank) needs --ranks N");
    auto one = [&](int64_t r) -> Result<kernels::NpyArray> {
        const std::string f = rank_file(in, r);
        auto x = kernels::read_tensor(f);
        if (!x) return x.error();
        if (!(x->shape.size() == 1 || (x->shape.size() == 2 && x->shape[0] == 1)))
            return make_error(ErrorCode::kBadFile, f + ": a per-rank input holds that rank's M elements, [M] or [1, M]; this one has " +
                                                       std::to_string(x->shape.size()) + " dimensions");
        return x;
    };
    kernels::NpyArray all;
    if (!per_process) {
        for (int64_t r = 0; r < n; ++r) {
            auto x = one(r);
            if (!x) return x.error();
            const int64_t m = x->shape.back();
            if (r == 0) all.shape = {n, m};
            else if (m != all.shape[1])
                return make_error(ErrorCode::kBadFile, rank_file(in, r) + ": " + std::to_string(m) + " elements, but " + rank_file(in, 0) +
                                                           " has " + std::to_string(all.shape[1]));
            all.data.insert(all.data.end(), x->data.begin(), x->data.end());
        }
        return all;
    }
    if (n != mpi::size())
        return make_error(ErrorCode::kInvalidArgument, "--in with {rank} under mpirun: one file per process, but --ranks is " +
                                                           std::to_string(n) + " and mpirun started " + std::to_string(mpi::size()));
    auto mine = one(mpi::rank());
    const std::string problem = mpi::first_error(mine ? std::string() : mine.error().message);
    if (!problem.empty()) return make_error(ErrorCode::kBadFile, problem);
    auto ms = mpi::allgather({static_cast<double>(mine->shape.back())});
    if (!ms) return ms.error();
    for (int64_t r = 1; r < n; ++r)
        if ((*ms)[static_cast<size_t>(r)] != (*ms)[0])
            return make_error(ErrorCode::kBadFile, rank_file(in, r) + ": " + std::to_string(static_cast<int64_t>((*ms)[static_cast<size_t>(r)])) +
                                                       " elements, but " + rank_file(in, 0) + " has " + std::to_string(static_cast<int64_t>((*ms)[0])));
    const int64_t m = static_cast<int64_t>((*ms)[0]);
    if (auto st = check_memory(n * m * 12, "every rank's input on this process"); !st) return st.error();
    auto rows = mpi::allgather(std::vector<double>(mine->data.begin(), mine->data.end()));  // binary32 in binary64: exact
    if (!rows) return rows.error();
    all.shape = {n, m};
    all.data.assign(rows->begin(), rows->end());
    return all;
}

// A user's mistake, said before any work: never of kind kCodec (which the command reports as a
// finding, exit 1), whatever the Error it came from.
Error refusal(const Error& e) { return Error{e.code == ErrorCode::kCodec ? ErrorCode::kInvalidArgument : e.code, e.message}; }
Error refusal(const std::string& message) { return make_error(ErrorCode::kInvalidArgument, message); }

// Declared paths (docs/PATHS.md): a --path that is not a built-in path's name is a declaration
// (built-in, such as nccl-fp8-e4m3-ring-ar-avg, or registered) or a FILE.toml of them (every one runs).
// Each becomes its schedule's name, *labels its own (or "" for a built-in under its own name); what
// a declaration fixes (add type, division, rotation, wire formats) becomes the run's option, for every
// path of the call, as if given on the command line. Two declarations fixing one option differently,
// or an option given otherwise on the command line, is refused before any work.
Result<SimulateRequest> with_declared_paths(const SimulateRequest& r, std::vector<std::string>* labels) {
    SimulateRequest a = r;
    a.paths.clear();
    labels->clear();
    struct Fixed {
        std::string value, by;
    };
    Fixed accum, divide, rotation, format;
    std::string problem;
    auto fix = [&](Fixed& f, const std::string& v, const std::string& who, const char* what) {
        if (f.by.empty()) f = {v, who};
        else if (f.value != v && problem.empty())
            problem = "declared paths " + f.by + " and " + who + " differ in " + what + " (" + f.value + ", " + v + "): run them in separate calls";
    };
    for (const auto& name : r.paths) {
        if (name == "all" || parse_path(name)) {
            a.paths.push_back(name);
            labels->push_back("");
            continue;
        }
        auto ds = resolve_path_arg(name);
        if (!ds) return refusal("--path: " + ds.error().message);
        for (const auto& d : *ds) {
            a.paths.push_back(path_info(d.kind).name);
            labels->push_back(d.is_builtin_kind() ? "" : d.name);
            if (d.accum && !typed_path(d.kind)) fix(accum, to_string(*d.accum), d.name, "add (--accum)");
            if (d.divide) fix(divide, to_string(*d.divide), d.name, "divide (--divide)");
            if (d.rotation) fix(rotation, to_string(*d.rotation), d.name, "rotation (--rotation)");
            if (d.fixes_wire()) fix(format, d.wire_text(), d.name, "wire (--format)");
        }
    }
    if (!problem.empty()) return refusal(problem);
    for (const auto& [f, opt, flag, dflt] : {std::tuple{&accum, &a.accum, "--accum", "fp32"}, std::tuple{&divide, &a.divide, "--divide", "none"},
                                            std::tuple{&rotation, &a.rotation, "--rotation", "each-hop"}, std::tuple{&format, &a.format, "--format", ""}}) {
        if (f->by.empty()) continue;
        if (*opt != dflt && *opt != f->value)
            return refusal(std::string(flag) + " " + *opt + " contradicts the declared path " + f->by + ", which fixes it to " + f->value +
                           " (leave " + flag + " out)");
        *opt = f->value;
    }
    return a;
}

}  // namespace

Result<SimulatePlan> SimulateRequest::validate() const {
    std::vector<std::string> labels;
    auto declared = with_declared_paths(*this, &labels);
    if (!declared) return declared.error();
    SimulateRequest a = *declared;
    // (the command line requires --path; a caller of the library may pass none)
    if (a.paths.empty()) return refusal("--path: no path given (name one or more, or all; `qtransit paths` lists them)");
    SweepSpec spec;
    for (size_t i = 0; i < a.paths.size(); ++i) {
        const auto& name = a.paths[i];
        if (name == "all") {
            for (PathKind p : all_path_kinds()) spec.paths.push_back(p), spec.labels.push_back("");
            continue;
        }
        auto p = parse_path(name);
        if (!p) return refusal(p.error());
        spec.paths.push_back(*p);
        spec.labels.push_back(labels[i]);
    }
    // A path or an N twice would run twice, and a fit over the same N twice divides by zero.
    auto shown = [&](size_t i) { return spec.labels[i].empty() ? std::string(path_info(spec.paths[i]).name) : spec.labels[i]; };
    for (size_t i = 0; i < spec.paths.size(); ++i)
        for (size_t j = 0; j < i; ++j)
            if (spec.paths[i] == spec.paths[j])
                return refusal("--path " + shown(i) + (shown(i) == shown(j) ? std::string(" is named twice") : " and " + shown(j) + " are the same schedule (" + path_info(spec.paths[i]).name + "): name one") +
                               (std::find(a.paths.begin(), a.paths.end(), "all") != a.paths.end() ? " (all already has it)" : ""));
    for (size_t i = 0; i < a.ranks.size(); ++i)
        for (size_t j = 0; j < i; ++j)
            if (a.ranks[i] == a.ranks[j]) return refusal("--ranks " + std::to_string(a.ranks[i]) + " is given twice");
    const bool has_codec = !a.codec.empty() || a.codec_object;
    // --format A,B: one format per stage (issue 17) for a2a-hier-rs, two-shot-ar and hpz-ag-requant.
    std::vector<FormatSpec> stage_formats;
    if (a.format.find(',') != std::string::npos) {
        if (has_codec) return refusal("--format with one format per stage runs qtransit's kernels; a --codec implements one format");
        for (size_t from = 0, at = 0; at != std::string::npos; from = at + 1) {
            at = a.format.find(',', from);
            const std::string one = a.format.substr(from, at == std::string::npos ? std::string::npos : at - from);
            if (one.empty()) return refusal("--format " + a.format + ": an empty format name in the list");
            auto f = codec_and_format("", one, a.rounding);
            if (!f) return refusal(f.error());
            stage_formats.push_back(f->format);
        }
    }
    CodecAndFormat cf;
    // The 16-bit paths quantize nothing: with only those, --format may be left out (D26).
    const bool only_typed = !spec.paths.empty() && std::all_of(spec.paths.begin(), spec.paths.end(), [](PathKind p) { return typed_path(p); });
    if (has_codec && !spec.paths.empty() &&
        std::none_of(spec.paths.begin(), spec.paths.end(), [](PathKind p) { return path_info(p).quantized; }))
        return refusal("--codec: no --path given quantizes (fp32-ring-rs and the bf16-/fp16- paths sum unquantized values): "
                       "the codec would never run; name a quantized path");
    // Nor with only unquantized ones (fp32-ring-rs, DeepEP's combine: D47).
    const bool only_unquantized =
        !spec.paths.empty() && std::none_of(spec.paths.begin(), spec.paths.end(), [](PathKind p) { return path_info(p).quantized; });
    if (only_unquantized && a.format.empty() && !has_codec) {
        cf.format = FormatSpec{FormatKind::kSym, 8};  // unused by those paths; their rows say bf16, fp16, none (or int8: fp32-ring-rs)
    } else if (stage_formats.empty()) {
        auto r = a.codec_object ? codec_and_format(a.codec_object, a.format, a.rounding) : codec_and_format(a.codec, a.format, a.rounding);
        if (!r) return refusal(r.error());
        cf = std::move(*r);
    } else {
        cf.format = stage_formats[0];
    }
    const auto& codec = cf.codec;
    const FormatSpec& format = cf.format;
    // --block left out (0): the fixed block of the first stage format that has one (a declared wire's
    // too, flashinfer-fp8's 256; "int8,fp8-e4m3-1x128" runs at 128), else 32: wire_block, as the gate
    // and verify collective take it. (No format named and no codec object: 32.)
    if (a.block == 0)
        a.block = a.format.empty() && !a.codec_object ? kDefaultBlock
                                                      : wire_block(stage_formats.empty() ? std::vector<FormatSpec>{format} : stage_formats,
                                                                   kDefaultBlock);
    for (const auto& f : stage_formats)
        if (auto st = f.check_block(a.block); !st) return refusal("--block: " + st.error().message);
    if (codec) {
        if (auto st = codec->check_block(a.block); !st) return refusal("--block: " + st.error().message);
        spec.codec = codec;
    }
    if (auto st = format.check_block(a.block); !st) return refusal("--block: " + st.error().message);
    auto accum = parse_accum(a.accum);
    if (!accum) return refusal(accum.error());
    // A 16-bit path sums in its own type (D26); --accum applies to the others, and contradicting a
    // path named on the command line is a mistake said before any work.
    // (Over the paths named: under --path all, --accum applies to the paths it can, as --divide does.)
    if (*accum != Accum::kFp32)
        for (const auto& name : a.paths)
            if (auto p = parse_path(name); p && typed_path(*p) && path_info(*p).element != *accum)
                return refusal("--accum " + a.accum + " contradicts --path " + name + ", which sums in " +
                            to_string(path_info(*p).element) + ", its element type (leave --accum out)");
    auto divide = parse_divide(a.divide);
    if (!divide) return refusal(divide.error());
    if (*divide != Divide::kNone)
        for (const auto& name : a.paths)
            if (auto p = parse_path(name); p && path_info(*p).shape == PathShape::kAllGather)
                return refusal("--divide " + a.divide + ": --path " + name + " gathers shards and sums nothing (--divide is for the reduce paths)");
    spec.divide = *divide;
    auto rotation = parse_rotation(a.rotation);
    if (!rotation) return refusal(rotation.error());
    spec.rotation = *rotation;
    auto dist = kernels::parse_distribution(a.dist);
    if (!dist) return refusal(dist.error());
    spec.format = format;
    spec.stage_formats = stage_formats;
    spec.accum = *accum;
    spec.dist = *dist;
    spec.seed = a.seed;
    spec.block = a.block;
    spec.ranks_per_node = a.ranks_per_node;
    spec.threads = a.threads;
    spec.ranks = a.ranks;
    // Every output's k (how many times each contribution was quantized) against NUMERICS.md section
    // 3, as the gate checks it: runs[].k_checked counts the pairs (it said 0 before: nothing checked).
    spec.check_k = true;
    auto backend = collectives::parse_backend(a.backend);
    if (!backend) return refusal(backend.error());
    spec.backend = *backend;
    if (const auto problem = sweep_backend_problem(spec, a.backend); !problem.empty()) return refusal(problem);

    return SimulatePlan{std::move(spec), format, codec, only_typed};
}

Result<std::unique_ptr<SimulateOutcome>> simulate(const SimulateRequest& a, const kernels::NpyArray* inputs,
                                                  const std::function<void(size_t, size_t, int64_t)>& on_group) {
    auto out = std::make_unique<SimulateOutcome>();
    auto plan = a.validate();
    if (!plan) return plan.error();
    SweepSpec& spec = plan->spec;
    const FormatSpec& format = plan->format;
    const auto& codec = plan->codec;
    const bool only_typed = plan->only_typed;
    const bool per_rank = one_process_per_rank(spec.backend);  // mpi; nccl under mpirun

    kernels::NpyArray file;
    if (!a.in.empty() || inputs) {
        if (!inputs) {
            auto arr = read_inputs(a.in, spec.ranks, per_rank);
            if (!arr) return refusal(arr.error());
            file = std::move(*arr);
        }
        const kernels::NpyArray& in = inputs ? *inputs : file;
        if (in.shape.size() != 2)
            return refusal(a.in + ": expected a 2-d array [N, M] (one row per rank), got " +
                        std::to_string(in.shape.size()) + " dimensions");
        if (spec.ranks.empty()) spec.ranks = {in.shape[0]};
        if (spec.ranks.size() != 1 || spec.ranks[0] != in.shape[0])
            return refusal(a.in + ": has " + std::to_string(in.shape[0]) + " rows but --ranks asks for " +
                        std::to_string(spec.ranks[0]) + (spec.ranks.size() > 1 ? " (and more): --in takes one N" : ""));
        if (a.elements != 0 && a.elements != in.shape[1])
            return refusal(a.in + ": has " + std::to_string(in.shape[1]) + " elements per rank but --elements is " +
                        std::to_string(a.elements));
        spec.file = &in;
        spec.file_name = a.in;
    }
    if (spec.ranks.empty()) return refusal("--ranks is required (or --in with a [N, M] array)");
    spec.elements = a.elements != 0 ? a.elements : (spec.file ? spec.file->shape[1] : 0);
    if (spec.elements == 0) return refusal("--elements is required (elements per rank)");
    if (!a.dump.empty() || a.keep_outputs) {
        if (spec.paths.size() != 1 || spec.ranks.size() != 1)
            return refusal(a.dump.empty() ? "the outputs are kept for one run: give exactly one path and one N"
                                          : "--dump writes one run: give exactly one --path and one --ranks");
        // Where the dump goes, before the run (it was found after it).
        if (!a.dump.empty())
            if (auto st = check_writable_file(a.dump, "dump (--dump)"); !st) return refusal(st.error());
        spec.dump = &out->dump;
        spec.dump_shape = &out->dump_shape;
    }
    spec.on_group = on_group;
    auto result = run_sweep(spec);
    if (!result) return result.error();
    out->result = std::move(*result);
    out->format = format;
    out->codec = codec;
    out->accum = spec.accum;
    out->divide = spec.divide;
    out->rotation = spec.rotation;
    out->only_typed = only_typed;
    out->elements = spec.elements;
    out->dist_name = a.in.empty() && !inputs ? a.dist : "file:" + a.in;
    // Under mpi (and nccl under mpirun) only rank 0 writes (every rank holds the same outputs).
    if (!a.dump.empty() && speaker(a.backend))
        if (auto st = kernels::write_npy(a.dump, out->dump, out->dump_shape); !st) return refusal(st.error());
    return out;
}

nlohmann::json SimulateOutcome::json(uint64_t seed) const {
    nlohmann::json runs = nlohmann::json::array(), fits = nlohmann::json::array();
    for (const auto& r : result.runs) runs.push_back(reports::to_json(gate_run(r, dist_name, seed)));
    for (const auto& f : result.fits) fits.push_back(reports::to_json(reports::GateFit{f.name, f.format, dist_name, f.exponent, f.points}));
    return nlohmann::json{{"runs", runs}, {"fits", fits}};
}


Printed SimulateOutcome::printed(const SimulateRequest& a) const {
    Printed p;
    std::string& o = p.out;
    for (const auto& r : result.runs) {
        p.passed = p.passed && r.stats.bound_holds;
        if (!r.stats.bound_holds)
            p.complaints.push_back(r.config.path_name() + " N=" + std::to_string(r.config.ranks) +
                                   ": bound violated: " + r.stats.first_violation);
        if (r.k_mismatches > 0) {
            p.passed = false;
            p.complaints.push_back(r.config.path_name() + " N=" + std::to_string(r.config.ranks) + ": " +
                                   k_mismatch_text(r.k_mismatches, r.first_k_mismatch));
        }
    }
    if (a.json) {
        o = json(a.seed).dump(2) + "\n";
        return p;
    }
    int w = 16;  // the path column: as wide as the longest name (nccl-fp8-e4m3-ring-rs)
    for (const auto& r : result.runs) w = std::max(w, static_cast<int>(r.config.path_name().size()));
    appendf(o, "%-*s %5s %3s %5s %11s %11s %11s %11s %6s %12s %12s %12s\n", w, "path", "N", "G", "k", "max|err|", "relRMS", "max a_post",
            "max a_prio", "bound", "bytes/rank", "cross-node", "fp16 RS");
    for (const auto& r : result.runs) {
        const auto& s = r.stats;
        const std::string k = std::to_string(s.k_min) + (s.k_min == s.k_max ? "" : ".." + std::to_string(s.k_max));
        appendf(o, "%-*s %5lld %3lld %5s %11.4g %11.4g %11.4g %11.4g %6s %12.0f %12.0f %12.0f\n", w, r.config.path_name().c_str(),
                static_cast<long long>(r.config.ranks), static_cast<long long>(r.config.ranks_per_node), k.c_str(), s.max_abs_error,
                s.rel_rms_error(), s.max_a_posteriori, s.max_a_priori, s.bound_holds ? "holds" : "FAILS", r.bytes_per_rank,
                r.cross_node_bytes_per_rank, r.fp16_ring_rs);
    }
    // NCCL's FP8 paths (D41): a clamp at the format's largest value is named, never folded silently.
    for (const auto& r : result.runs)
        if (r.stats.saturated_outputs > 0)
            appendf(o, "%s N=%lld: %lld of %lld output values saturated (at most %d clamps on one value's way): "
                    "the a-posteriori bound includes what each clamp removed; the a-priori bound is unbounded\n",
                    r.config.path_name().c_str(), static_cast<long long>(r.config.ranks), static_cast<long long>(r.stats.saturated_outputs),
                    static_cast<long long>(r.stats.outputs_checked), r.stats.max_saturations);
    for (const auto& f : result.fits) appendf(o, "fit %-16s relative RMS error ~ N^%.3f\n", f.name.c_str(), f.exponent);
    if (codec) appendf(o, "(every Q and D by the codec %s)\n", codec->describe().c_str());
    // The format and accumulation of the quantized paths; the 16-bit ones carry their own (D26).
    std::string fmt_name = only_typed ? "unquantized" : format.name();
    bool any_typed = false, any_fp8 = false;
    for (const auto& r : result.runs) {
        if (typed_path(r.config.path)) any_typed = true;
        else fmt_name = r.config.format_name();
        any_fp8 = any_fp8 || r.config.saturates();
    }
    std::string accum_text = std::string(to_string(accum)) + " accumulation";
    if (only_typed) {
        accum_text = "inputs cast to the path's type, every add rounded to it";
        if (any_fp8) accum_text += " (FP8: added in binary16, stored back with saturation)";
    } else if (any_typed) accum_text += " (the bf16-/fp16- paths: their own type, inputs cast to it)";
    if (divide != Divide::kNone && only_typed && any_fp8)
        accum_text += ", the mean: every input times 1/N rounded to FP8 before the reduce (ncclAvg)";
    else if (divide != Divide::kNone)
        accum_text += std::string(", the mean: divided by N ") + (divide == Divide::kPre ? "before the reduce" : "after it");
    if (rotation == Rotation::kEndToEnd) accum_text += ", summed in the rotated domain (one rotation back at the destination)";
    appendf(o, "(%s, block %lld, %lld elements per rank, %s inputs, %s; bytes: busiest rank's payload)\n", fmt_name.c_str(),
            static_cast<long long>(result.runs.empty() ? a.block : result.runs.front().config.block), static_cast<long long>(elements),
            dist_name.c_str(), accum_text.c_str());
    return p;
}

// Issue 7's benchmark: what checking costs each rank next to the collective (bench/RESULTS.md).
// `pass`: every path of the group in one pass; `schedule`: this path's columns in a process (median
// over the processes), which computes every rank's arithmetic, so a rank's share is schedule / N;
// the ratio: median and largest over the ranks.
std::string SimulateOutcome::costs(const SimulateRequest& a) const {
    std::string o;
    for (const auto& r : result.runs)
        appendf(o,
                "qtransit: %s N=%lld %s: busiest rank checking %.4f s (cpu %.4f s); schedule %.4f s (cpu %.4f s), "
                "per rank %.4f s (cpu %.5f s); checking / rank's collective (cpu) median %.3f, max %.3f; "
                "whole pass %.4f s\n",
                a.backend.c_str(), static_cast<long long>(r.config.ranks), r.config.path_name().c_str(), r.check_seconds,
                r.check_cpu_seconds, r.collective_seconds, r.collective_cpu_seconds, r.collective_seconds / static_cast<double>(r.config.ranks),
                r.collective_cpu_seconds / static_cast<double>(r.config.ranks), r.check_to_collective, r.check_to_collective_max,
                r.group_seconds);
    return o;
}

}  // namespace qtransit::gate
