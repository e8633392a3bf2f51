#include "qtransit/gate/sweep.hpp"

#include "qtransit/common/text_file.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <mutex>
#include <thread>

#include "qtransit/collectives/mpi.hpp"
#include "qtransit/collectives/paths.hpp"
#include "qtransit/common/path_decl.hpp"
#include "qtransit/kernels/block_math.hpp"
#include "qtransit/kernels/gpu.hpp"

namespace qtransit::gate {
namespace {

// The busiest rank's count (paths are symmetric but for the owner-heavy gathers).
double max_of(const std::vector<int64_t>& v) {
    int64_t m = 0;
    for (int64_t x : v) m = std::max(m, x);
    return static_cast<double>(m);
}

// --backend mpi: this process's stats combined with every other rank's (each checked only the rows
// it holds), the same way PathChecker::merge combines threads, the sums of squares exactly (D34:
// the same bits as one process); the first violation is the lowest rank's. Only the verdicts
// travel, never the tensors. An Error is the mpi job's failure.
Result<reference::PathStats> combine_ranks(const reference::PathChecker& checker) {
    namespace mpi = collectives::mpi;
    const reference::PathStats s = checker.stats();
    // (the sums of squares travel as the accumulators' words below, not as rounded doubles)
    std::vector<double> mine{static_cast<double>(s.outputs_checked), s.max_abs_error, s.max_a_posteriori,
                             s.max_a_priori, s.max_error_to_a_posteriori, s.bound_holds ? 1.0 : 0.0,
                             static_cast<double>(s.violations), static_cast<double>(s.k_min),
                             static_cast<double>(s.k_max), static_cast<double>(s.nonfinite_outputs),
                             static_cast<double>(s.saturated_outputs), static_cast<double>(s.max_saturations)};
    const size_t sums_at = mine.size();
    for (const reference::DoubleAcc* acc : {&checker.exact_sum_sq_error(), &checker.exact_sum_sq_target()}) {
        const std::vector<double> words = acc->to_words();
        mine.insert(mine.end(), words.begin(), words.end());
    }
    const size_t w = mine.size();
    const auto gathered = mpi::allgather(mine);
    if (!gathered) return gathered.error();
    const auto gathered_firsts = mpi::allgather_strings(s.first_violation);
    if (!gathered_firsts) return gathered_firsts.error();
    const std::vector<double>& all = *gathered;
    const std::vector<std::string>& firsts = *gathered_firsts;
    reference::PathStats out;
    reference::DoubleAcc sse, sst;
    bool have_k = false;
    for (int r = 0; r < mpi::size(); ++r) {
        const double* v = all.data() + static_cast<size_t>(r) * w;
        out.outputs_checked += static_cast<int64_t>(v[0]);
        out.max_abs_error = std::max(out.max_abs_error, v[1]);
        sse.add(reference::DoubleAcc::from_words(v + sums_at));
        sst.add(reference::DoubleAcc::from_words(v + sums_at + reference::DoubleAcc::kWords));
        out.max_a_posteriori = std::max(out.max_a_posteriori, v[2]);
        out.max_a_priori = std::max(out.max_a_priori, v[3]);
        out.max_error_to_a_posteriori = std::max(out.max_error_to_a_posteriori, v[4]);
        out.bound_holds = out.bound_holds && v[5] != 0;
        out.violations += static_cast<int64_t>(v[6]);
        if (v[0] > 0) {
            const auto kmin = static_cast<int32_t>(v[7]), kmax = static_cast<int32_t>(v[8]);
            out.k_min = have_k ? std::min(out.k_min, kmin) : kmin;
            out.k_max = have_k ? std::max(out.k_max, kmax) : kmax;
            have_k = true;
        }
        out.nonfinite_outputs += static_cast<int64_t>(v[9]);
        out.saturated_outputs += static_cast<int64_t>(v[10]);
        out.max_saturations = std::max(out.max_saturations, static_cast<int32_t>(v[11]));
        if (out.first_violation.empty()) out.first_violation = firsts[static_cast<size_t>(r)];
    }
    out.sum_sq_error = sse.to_double();
    out.sum_sq_target = sst.to_double();
    return out;
}

}  // namespace


bool one_process_per_rank(collectives::Backend b) {
    return b == collectives::Backend::kMpi || (b == collectives::Backend::kNccl && collectives::mpi::active());
}

// `qtransit simulate`'s checks of --backend before any work ("" when the sweep can run there).
std::string sweep_backend_problem(const SweepSpec& spec, const std::string& name) {
    namespace mpi = collectives::mpi;
    const bool per_rank = one_process_per_rank(spec.backend);
    // What the device transports do not run yet, said before looking for a GPU (D26, D27).
    for (PathKind p : spec.paths)
        if (auto why = collectives::host_only_problem(p, spec.divide, spec.backend); !why.empty()) return why;
    if (spec.codec)
        if (auto why = collectives::codec_backend_problem(spec.backend); !why.empty()) return why;
    // Rotated formats (FORMATS.md section 9) and per-stage lists run on the cpu backend only: the
    // device kernels rotate, but no transport carries a message's sign key or its format yet.
    if (spec.backend != collectives::Backend::kCpu) {
        bool rotated = spec.format.rotated();
        for (const auto& f : spec.stage_formats) rotated = rotated || f.rotated();
        if (rotated)
            return "rotated formats (" + spec.format.name() + ") run with --backend cpu for now, not " + name;
    }
    if (spec.backend == collectives::Backend::kMpi && !mpi::active())
        return "--backend mpi runs under mpirun or srun, one process per rank (" +
                    std::string(mpi::built() ? "MPI is not initialized" : "this build has no MPI") + ")";
    if (per_rank) {
        if (spec.ranks.size() != 1 || spec.ranks[0] != mpi::size())
            return "--backend " + name + " under mpirun runs one process per rank: give --ranks " +
                        std::to_string(mpi::size()) + " (the number of processes mpirun started)";
        // nccl: every process needs a GPU. The ranks compare their answers so that all of them stop
        // (exit 2) when one has none, instead of the others waiting for it in NCCL's set-up.
        std::string mine;
        if (spec.backend == collectives::Backend::kNccl)
            if (const auto q = kernels::gpu::query_devices(); q.devices.empty())
                mine = "no GPU: " + q.note + " (--backend nccl needs one GPU per process)";
        return mpi::first_error(mine);
    } else if (spec.backend != collectives::Backend::kCpu) {
        const auto q = kernels::gpu::query_devices();
        if (q.devices.empty()) return "no GPU: " + q.note + " (--backend " + name + " needs one)";
        if (spec.backend == collectives::Backend::kNccl)
            for (int64_t n : spec.ranks)
                if (n != static_cast<int64_t>(q.devices.size()))
                    return "--backend nccl runs one rank per GPU: --ranks " + std::to_string(n) + " but " +
                                std::to_string(q.devices.size()) + " GPU(s) are visible";
    }
    return "";
}

namespace {
// The inputs in a codec's element type (binary16, bfloat16), widened back exactly.
class CastInputs final : public collectives::Inputs {
public:
    CastInputs(std::unique_ptr<collectives::Inputs> in, kernels::ValueType t) : in_(std::move(in)), t_(t) {}
    std::string name() const override { return in_->name(); }
    void fill(int64_t rank, int64_t first, int64_t len, float* out) const override {
        in_->fill(rank, first, len, out);
        for (int64_t i = 0; i < len; ++i) out[i] = kernels::round_to(t_, out[i]);
    }

private:
    std::unique_ptr<collectives::Inputs> in_;
    kernels::ValueType t_;
};

// A shared table read through the Inputs a group owns.
class TableView final : public collectives::Inputs {
public:
    explicit TableView(const collectives::GeneratedTable& t) : t_(t) {}
    std::string name() const override { return t_.name(); }
    void fill(int64_t rank, int64_t first, int64_t len, float* out) const override { t_.fill(rank, first, len, out); }

private:
    const collectives::GeneratedTable& t_;
};

// Per N, the paths run together on shared inputs, each config validated.
Result<std::vector<std::vector<PathConfig>>> sweep_groups(const SweepSpec& spec) {
    // A group is every path at one N: with no path there is nothing to run and nothing to check,
    // which no caller should ask for (simulate and the gate refuse it first).
    if (spec.paths.empty() || spec.ranks.empty())
        return make_error(ErrorCode::kInvalidArgument, std::string("a sweep with no ") + (spec.paths.empty() ? "path" : "N") +
                                                           " to run checks nothing");
    std::vector<std::vector<PathConfig>> groups;
    for (int64_t n : spec.ranks) {
        std::vector<PathConfig> g;
        for (size_t i = 0; i < spec.paths.size(); ++i) {
            const PathKind p = spec.paths[i];
            PathConfig c;
            c.path = p;
            if (i < spec.labels.size()) c.label = spec.labels[i];
            // What only a declaration sets (its output and input types, a tensor's scale, who keeps a sum): read
            // from the declaration the label names, registered by whoever resolved it.
            if (!c.label.empty())
                if (auto d = find_path_decl(c.label)) apply_declared(*d, c);  // (a tensor's scale: resolved when the group runs)
            c.format = spec.format;
            c.stage_formats = spec.stage_formats;
            c.block = spec.block;
            c.ranks = n;
            c.ranks_per_node = spec.ranks_per_node > 0 ? spec.ranks_per_node : default_ranks_per_node(n);
            c.elements = spec.elements;
            c.accum = spec.accum;
            apply_element_type(c);  // a 16-bit path sums in its own type (D26)
            // --divide applies to the reduce paths; a gather in the same sweep sums nothing (D27).
            c.divide = path_info(p).shape == PathShape::kAllGather ? Divide::kNone : spec.divide;
            c.rotation = spec.rotation;
            c.seed = spec.seed;  // stochastic rounding's key (docs/FORMATS.md section 4)
            c.codec = typed_path(p) ? nullptr : spec.codec;  // nothing to quantize there
            if (c.tensor_scale && one_process_per_rank(spec.backend))
                return make_error(ErrorCode::kInvalidArgument, c.path_name() + ": scales per-tensor run with --backend cpu or device for now (the "
                                                               "amax all-reduce is taken in one process, over every rank's inputs)");
            if (auto st = validate(c); !st) {  // named once: some messages start with the path's name already
                const std::string name = c.path_name();
                const std::string& m = st.error().message;
                return make_error(st.error().code, m.starts_with(name + " ") ? m : name + ": " + m);
            }
            g.push_back(c);
        }
        groups.push_back(std::move(g));
    }
    return groups;
}

// What the run will hold at once, estimated before it starts (issue 15): per thread and path, a
// column's ledger (about 2N quantization events of a block each, values and codes, and their
// contributor lists) and its output rows, the cached inputs of a column, and a --dump array.
Status check_sweep_memory(const SweepSpec& spec, const std::vector<std::vector<PathConfig>>& groups, int threads) {
    double need = 0;
    for (const auto& g : groups) {
        const double n = static_cast<double>(g.front().ranks);
        double bytes = 0;
        for (const auto& c : g) {  // a column lies within a shard (hpz's secondary: within M/G)
            const bool hpz = c.path == PathKind::kHpzAgFp || c.path == PathKind::kHpzAgRequant;
            const double len = static_cast<double>(std::min(c.block, hpz ? c.elements / c.ranks_per_node : c.shard()));
            bytes += (2 * n * (len * 12 + n * 4) + n * len * 16 + n * len * 4) * threads;
        }
        if (spec.dump) bytes += n * static_cast<double>(path_info(g[0].path).shape == PathShape::kReduceScatter ? g[0].shard() : spec.elements) * 4;
        need = std::max(need, bytes);
    }
    return check_memory(need > 9.0e18 ? INT64_MAX : static_cast<int64_t>(need), "this run");
}

// The group's paths that run; reused[k] points at spec.reuse's row for each path k that does not.
Result<std::vector<PathConfig>> paths_to_run(const SweepSpec& spec, const std::vector<PathConfig>& all, std::vector<const RunRow*>& reused) {
    std::vector<PathConfig> g;
    reused.assign(all.size(), nullptr);
    for (size_t k = 0; k < all.size(); ++k) {
        const PathConfig& c = all[k];
        if (spec.reuse && !path_info(c.path).quantized)
            for (const RunRow& r : *spec.reuse) {
                const PathConfig& o = r.config;
                if (o.path != c.path || o.ranks != c.ranks || o.label != c.label) continue;  // (a declared path is another run)
                if (o.ranks_per_node != c.ranks_per_node || o.elements != c.elements || o.block != c.block || o.accum != c.accum ||
                    o.divide != c.divide || o.rotation != c.rotation || o.seed != c.seed || o.codec || o.input != c.input ||
                    o.output != c.output)
                    return make_error(ErrorCode::kInternal,
                                      "internal error: a reused run of " + std::string(path_info(c.path).name) + " was made with other settings");
                reused[k] = &r;
            }
        if (!reused[k]) g.push_back(c);
    }
    return g;
}

// The group's inputs: the file, the shared table, or generated; in a codec's element type.
std::unique_ptr<collectives::Inputs> sweep_inputs(const SweepSpec& spec, int64_t n) {
    std::unique_ptr<collectives::Inputs> inputs;
    if (spec.file) inputs = std::make_unique<collectives::ArrayInputs>(spec.file->data, spec.elements, spec.file_name);
    else if (spec.table && spec.table->ranks() >= n && spec.table->elements() >= spec.elements)
        inputs = std::make_unique<TableView>(*spec.table);
    else inputs = std::make_unique<collectives::GeneratedInputs>(spec.dist, spec.seed);
    if (spec.codec && spec.codec->input_type() != kernels::ValueType::kBinary32)
        inputs = std::make_unique<CastInputs>(std::move(inputs), spec.codec->input_type());
    return inputs;
}

// k for every (holder, contributor) of one column of path c, against the expected table: counted
// into kc (checked, wrong), the first mismatch written once into `first` under `mu`.
void count_k(const PathConfig& c, const ColumnRecord& rec, int64_t n, std::pair<int64_t, int64_t>& kc, std::string& first, std::mutex& mu) {
    // Reduce paths: every rank contributes. Gather paths: the owners of the column's elements do
    // (hpz's columns can straddle two shards); every other rank has k = 0.
    const bool gather = path_info(c.path).shape == PathShape::kAllGather;
    std::vector<bool> owner(static_cast<size_t>(n), !gather);
    if (gather)
        for (int64_t e = 0; e < rec.len; ++e) owner[static_cast<size_t>((rec.first + e) / c.shard())] = true;
    // A row whose ledger signature equals the previous row's has the same k, and (on every path but
    // ring-ag-requant and two-shot-ar-keep, whose tables depend on the holder) the same expected k:
    // the same outcome, counted without recomputing it (the rows of a gather, an all-reduce).
    const bool holder_free = c.path != PathKind::kRingAgRequant && c.path != PathKind::kTwoShotArKeep;
    const OutputRow* prev = nullptr;
    int64_t prev_wrong = 0;
    std::vector<int32_t> got;
    const OutputRow* kof_row = nullptr;  // the row `got` holds contribution_k_of's answer for
    bool kof_others = false;
    // A reduce path's table is the same for every row of the column: made once (O(N)).
    const std::vector<int32_t> want_all = gather ? std::vector<int32_t>{} : expected_ks(c, rec.first);
    for (const auto& row : rec.outputs) {
        if (prev != nullptr && holder_free &&
            ((prev->event_ids == row.event_ids && prev->rounding_ids == row.rounding_ids) || same_ledger_shape(rec, *prev, row))) {
            kc.first += n;
            kc.second += prev_wrong;
            continue;
        }
        const int64_t wrong_before = kc.second;
        // A gather whose events carry its owners only: every other rank's k is 0, as expected, so
        // only the owners' are computed and compared (O(events) per row).
        int64_t lo = 0, hi = n - 1, base = 0;
        bool others = true;
        if (gather && rec.len > 0) {
            lo = (rec.first) / c.shard();
            hi = (rec.first + rec.len - 1) / c.shard();
            // A row whose events extend those `got` was counted for (a chain) adds only its new ones.
            const size_t from = kof_row != nullptr && extends_ledger(*kof_row, row) ? kof_row->event_ids.size() : 0;
            others = kof_others;
            const bool ok = contribution_k_of(rec, row, n, lo, hi, got, others, from);
            kof_row = ok ? &row : nullptr;
            kof_others = others;
            if (ok && !others) {
                base = lo;
                kc.first += n - (hi - lo + 1);  // the non-owners: 0 = 0
            } else {
                others = true;
            }
        }
        if (others) {
            kof_row = nullptr;
            got = contribution_k(rec, row, n);
            lo = 0;
            hi = n - 1;
            base = 0;
        }
        for (int64_t j = lo; j <= hi; ++j) {
            const int32_t want = !gather                         ? (holder_free ? want_all[static_cast<size_t>(j)]
                                                                                : expected_k(c, rec.first, row.rank, j))
                                 : owner[static_cast<size_t>(j)] ? expected_k(c, rec.first, row.rank, j)
                                                                 : 0;
            ++kc.first;
            if (got[static_cast<size_t>(j - base)] == want) continue;
            if (kc.second++ == 0) {
                std::lock_guard<std::mutex> lock(mu);
                if (first.empty())
                    first = "column " + std::to_string(rec.first) + " holder " + std::to_string(row.rank) + " contributor " +
                            std::to_string(j) + ": k " + std::to_string(got[static_cast<size_t>(j - base)]) + ", expected " +
                            std::to_string(want);
            }
        }
        prev_wrong = kc.second - wrong_before;
        prev = &row;
    }
}

// One process per rank: the seconds each process measured for path k of a group, gathered: the
// busiest's checking, the median collective and the checking-to-collective ratios (bench/RESULTS.md).
Status gather_timings(RunRow& r, int64_t n, double group_s, double check_s, double check_cpu, double coll_s, double coll_cpu_s) {
    constexpr size_t w = 5;
    const auto gathered = collectives::mpi::allgather({group_s, check_s, check_cpu, coll_s, coll_cpu_s});
    if (!gathered) return gathered.error();
    const std::vector<double>& t = *gathered;
    std::vector<double> coll, coll_cpu, ratio;
    for (size_t i = 0; i + w <= t.size(); i += w) {
        r.group_seconds = std::max(r.group_seconds, t[i]);
        r.check_seconds = std::max(r.check_seconds, t[i + 1]);
        r.check_cpu_seconds = std::max(r.check_cpu_seconds, t[i + 2]);
        coll.push_back(t[i + 3]);
        coll_cpu.push_back(t[i + 4]);
        ratio.push_back(t[i + 4] > 0 ? t[i + 2] / (t[i + 4] / static_cast<double>(n)) : 0.0);
    }
    auto median = [](std::vector<double> v) {
        std::sort(v.begin(), v.end());
        const size_t h = v.size() / 2;
        return v.empty() ? 0.0 : v.size() % 2 ? v[h] : (v[h - 1] + v[h]) / 2;
    };
    r.collective_seconds = median(coll);
    r.collective_cpu_seconds = median(coll_cpu);
    r.check_to_collective = median(ratio);
    r.check_to_collective_max = ratio.empty() ? 0.0 : *std::max_element(ratio.begin(), ratio.end());
    return Status::Ok();
}

// One group (one N): its paths run over the transport, every column checked by per-thread checkers
// as it is made (and dumped), then one row per path.
class GroupRun {
public:
    GroupRun(const SweepSpec& spec, std::vector<PathConfig> g, int threads)
        : spec_(spec), g_(std::move(g)), n_(g_.front().ranks), threads_(threads), checkers_(g_.size()),
          kcount_(g_.size(), std::vector<std::pair<int64_t, int64_t>>(static_cast<size_t>(threads))), kfirst_(g_.size()),
          on_mpi_(one_process_per_rank(spec.backend)), me_(on_mpi_ ? collectives::mpi::rank() : -1), check_s_(g_.size(), 0.0),
          check_cpu_(g_.size(), 0.0) {
        for (size_t k = 0; k < g_.size(); ++k)
            for (int t = 0; t < threads; ++t) checkers_[k].emplace_back(g_[k]);
        if (spec.dump) {
            dump_cols_ = path_info(g_[0].path).shape == PathShape::kReduceScatter ? g_[0].shard() : spec.elements;
            spec.dump->assign(static_cast<size_t>(n_ * dump_cols_), 0.0f);
            if (spec.dump_shape) *spec.dump_shape = {n_, dump_cols_};
        }
    }
    Result<std::vector<RunRow>> run(const collectives::Inputs& inputs);

private:
    void sink(size_t k, int tid, const ColumnRecord& full);
    // One process per rank: this process's rows of the column (nullptr: it holds none of them).
    const ColumnRecord* own_rows(const ColumnRecord& full);
    Result<RunRow> row(size_t k, const collectives::RunTotals& totals, double group_s);

    const SweepSpec& spec_;
    const std::vector<PathConfig> g_;
    const int64_t n_;
    const int threads_;
    std::vector<std::vector<reference::PathChecker>> checkers_;
    std::vector<std::vector<std::pair<int64_t, int64_t>>> kcount_;  // per path, per thread: (checked, wrong)
    std::vector<std::string> kfirst_;
    int64_t dump_cols_ = 0;
    std::mutex mu_;
    // One process per rank (mpi; nccl under mpirun): this process holds (and checks, and dumps)
    // only its own rank's rows.
    const bool on_mpi_;
    const int64_t me_;
    ColumnRecord own_;
    std::vector<double> check_s_, check_cpu_;
};

const ColumnRecord* GroupRun::own_rows(const ColumnRecord& full) {
    bool any = false;
    for (const auto& row : full.outputs) any = any || row.rank == me_;
    if (!any) return nullptr;  // nothing of this column is held here: nothing to check
    own_.first = full.first;
    own_.len = full.len;
    own_.contribution_rows = full.contribution_rows;
    own_.contributions = full.contributions;
    own_.first_block_absmax = full.first_block_absmax;
    own_.events = full.events;
    own_.roundings = full.roundings;
    own_.outputs.clear();
    for (const auto& row : full.outputs)
        if (row.rank == me_) own_.outputs.push_back(row);
    return &own_;
}

void GroupRun::sink(size_t k, int tid, const ColumnRecord& full) {
    const auto t0 = on_mpi_ ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
    struct Timer {  // the checking time of this column, wall and CPU (one process per rank only)
        bool on;
        std::chrono::steady_clock::time_point t0;
        double c0;
        double& acc;
        double& acc_cpu;
        ~Timer() {
            if (!on) return;
            acc += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            acc_cpu += collectives::thread_cpu_seconds() - c0;
        }
    } timer{on_mpi_, t0, on_mpi_ ? collectives::thread_cpu_seconds() : 0.0, check_s_[k], check_cpu_[k]};
    const ColumnRecord* pick = on_mpi_ ? own_rows(full) : &full;
    if (!pick) return;
    const ColumnRecord& rec = *pick;
    checkers_[k][static_cast<size_t>(tid)].add(rec);
    if (spec_.check_k) count_k(g_[k], rec, n_, kcount_[k][static_cast<size_t>(tid)], kfirst_[k], mu_);
    if (!spec_.dump) return;
    std::lock_guard<std::mutex> lock(mu_);
    const bool rs = path_info(g_[k].path).shape == PathShape::kReduceScatter;
    for (const auto& row : rec.outputs) {
        const int64_t col0 = rs ? rec.first - row.rank * g_[k].shard() : rec.first;
        std::copy(row.values.begin(), row.values.end(), spec_.dump->begin() + static_cast<std::ptrdiff_t>(row.rank * dump_cols_ + col0));
    }
}

Result<RunRow> GroupRun::row(size_t k, const collectives::RunTotals& totals, double group_s) {
    RunRow r;
    r.config = g_[k];
    reference::PathChecker all(g_[k]);
    for (auto& c : checkers_[k]) all.merge(c);
    if (on_mpi_) {
        auto combined = combine_ranks(all);
        if (!combined) return combined.error();
        r.stats = std::move(*combined);
        std::vector<int64_t> kc{r.k_checked, r.k_mismatches};
        for (const auto& [checked, wrong] : kcount_[k]) {
            kc[0] += checked;
            kc[1] += wrong;
        }
        if (auto st = collectives::mpi::allreduce_sum(kc); !st) return st.error();
        kcount_[k].assign(1, {kc[0], kc[1]});
        const auto firsts = collectives::mpi::allgather_strings(kfirst_[k]);
        if (!firsts) return firsts.error();
        for (const auto& f : *firsts)
            if (!f.empty()) {
                kfirst_[k] = f;
                break;
            }
        if (auto st = gather_timings(r, n_, group_s, check_s_[k], check_cpu_[k], totals.seconds[k], totals.cpu_seconds[k]); !st)
            return st.error();
    } else {
        r.stats = all.stats();
    }
    const auto& b = totals.bytes[k];
    r.bytes_per_rank = max_of(b.sent);
    r.cross_node_bytes_per_rank = max_of(b.cross_node);
    r.fp16_path_bytes_per_rank = max_of(b.fp16_equiv);
    r.fp16_ring_rs = static_cast<double>((n_ - 1) * g_[k].shard() * 2);
    // NVLS (D49): the ring's messages model the switch's sum, not its traffic. Each rank's M inputs
    // cross its link once into the switch (multimem.ld_reduce), and its shard's result once out
    // (multimem.st, which the switch copies to every rank): M + M/N values. One NVLink domain:
    // nothing crosses a node unless N ranks span more than one (then every byte does).
    if (!g_[k].label.empty())
        if (auto d = find_path_decl(g_[k].label); d && d->exchange == "nvls") {
            const PathConfig& c = g_[k];
            const Accum t = path_info(c.path).element;  // the values' type where no input or output type is declared
            const int in = accum_type(c.input != Accum::kFp32 ? c.input : t).bytes, out = accum_type(c.output != Accum::kFp32 ? c.output : t).bytes;
            r.bytes_per_rank = static_cast<double>(c.elements * in + c.shard() * out);
            r.cross_node_bytes_per_rank = c.ranks > c.ranks_per_node ? r.bytes_per_rank : 0.0;
        }
    // A tensor's scale (D50): no scale travels with the codes (every rank computed it from the
    // all-reduced amax: FSDP2 keeps it as the gather's metadata), and the amax all-reduce itself is
    // one binary32 through a ring all-reduce, 2 (N - 1) / N x 4 bytes. The transport counted a scale
    // per block of each message; take them back out.
    // NVFP4's tensor amax (D58) is the all-reduced amax too, but its E4M3 block scales do travel with
    // the codes (Transformer Engine gathers codes and scales): only the all-reduce is added.
    if (g_[k].tensor_scale) {
        const PathConfig& c = g_[k];
        const double blocks = static_cast<double>((c.shard() + c.block - 1) / c.block);
        const double was = r.bytes_per_rank;
        const double scales = c.format.takes_tensor_amax() ? 0.0 : blocks * c.format.decl->scale_bytes();
        r.bytes_per_rank = was - static_cast<double>(c.ranks - 1) * scales +
                           8.0 * static_cast<double>(c.ranks - 1) / static_cast<double>(c.ranks);
        if (was > 0) r.cross_node_bytes_per_rank *= r.bytes_per_rank / was;
    }
    for (const auto& [checked, wrong] : kcount_[k]) {
        r.k_checked += checked;
        r.k_mismatches += wrong;
    }
    r.first_k_mismatch = kfirst_[k];
    return r;
}

Result<std::vector<RunRow>> GroupRun::run(const collectives::Inputs& inputs) {
    const auto group_start = std::chrono::steady_clock::now();
    auto totals = collectives::run_paths(g_, inputs, threads_, [this](size_t k, int tid, const ColumnRecord& rec) { sink(k, tid, rec); },
                                         spec_.backend);
    if (!totals) return totals.error();
    const double group_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - group_start).count();
    if (on_mpi_) {  // each process counted what it sent; each holds its own dump row
        for (auto& b : totals->bytes)
            for (std::vector<int64_t>* v : {&b.sent, &b.cross_node, &b.fp16_equiv})
                if (auto st = collectives::mpi::allreduce_sum(*v); !st) return st.error();
        if (spec_.dump) {
            const std::vector<float> mine(spec_.dump->begin() + me_ * dump_cols_, spec_.dump->begin() + (me_ + 1) * dump_cols_);
            auto all = collectives::mpi::gather_rows(mine);
            if (!all) return all.error();
            if (me_ == 0) *spec_.dump = std::move(*all);
        }
    }
    std::vector<RunRow> made;
    for (size_t k = 0; k < g_.size(); ++k) {
        auto r = row(k, *totals, group_s);
        if (!r) return r.error();
        made.push_back(std::move(*r));
    }
    return made;
}

// A fitted exponent of the relative RMS error against N for every path run at two N or more.
std::vector<FitRow> sweep_fits(const SweepSpec& spec, const std::vector<RunRow>& runs) {
    std::vector<FitRow> fits;
    for (size_t i = 0; i < spec.paths.size(); ++i) {
        const PathKind p = spec.paths[i];
        FitRow f{p, i < spec.labels.size() && !spec.labels[i].empty() ? spec.labels[i] : std::string(path_info(p).name), "", 0, {}};
        std::vector<double> ns, errs;
        for (const auto& r : runs) {
            if (r.config.path == p && f.format.empty()) f.format = r.config.format_name();
            const double e = r.stats.rel_rms_error();
            if (r.config.path != p || !(e > 0) || !std::isfinite(e)) continue;
            ns.push_back(static_cast<double>(r.config.ranks));
            errs.push_back(e);
            f.points.emplace_back(r.config.ranks, e);
        }
        if (ns.size() < 2) continue;
        f.exponent = reference::fit_exponent(ns, errs);
        fits.push_back(std::move(f));
    }
    return fits;
}

}  // namespace

Result<SweepResult> run_sweep(const SweepSpec& spec) {
    auto groups = sweep_groups(spec);
    if (!groups) return groups.error();
    // nccl and mpi run on one thread; `device` on as many as fit in the GPU's memory (run_paths).
    const bool one_thread = spec.backend == collectives::Backend::kNccl || spec.backend == collectives::Backend::kMpi;
    const int threads = one_thread ? 1
                                   : (spec.threads > 0 ? spec.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
    if (auto st = check_sweep_memory(spec, *groups, threads); !st) return st.error();
    if (spec.reuse && (spec.codec || spec.dump))
        return make_error(ErrorCode::kInternal, "internal error: a sweep with a codec or a dump reuses no runs");
    SweepResult out;
    for (size_t gi = 0; gi < groups->size(); ++gi) {
        const auto& all = (*groups)[gi];
        const int64_t n = all.front().ranks;
        if (spec.on_group) spec.on_group(gi, groups->size(), n);
        std::vector<const RunRow*> reused;
        auto g = paths_to_run(spec, all, reused);  // the others' rows come from spec.reuse
        if (!g) return g.error();
        std::vector<RunRow> made;
        if (!g->empty()) {
            const auto inputs = sweep_inputs(spec, n);
            for (auto& c : *g)  // D50: a tensor's scale from every rank's inputs, for the run and its checker alike
                if (auto st = collectives::resolve_tensor_scale(c, *inputs); !st) return st.error();
            auto rows = GroupRun(spec, std::move(*g), threads).run(*inputs);
            if (!rows) return rows.error();
            made = std::move(*rows);
        }
        for (size_t k = 0, next = 0; k < all.size(); ++k) {  // in the group's path order, reused or made
            if (reused[k]) {
                out.runs.push_back(*reused[k]);
                out.runs.back().config = all[k];
            } else {
                out.runs.push_back(std::move(made[next++]));
            }
        }
    }
    out.fits = sweep_fits(spec, out.runs);
    return out;
}

reports::GateRun gate_run(const RunRow& r, const std::string& dist, uint64_t seed) {
    reports::GateRun x;
    const auto& s = r.stats;
    const PathConfig& c = r.config;
    x.path = c.path_name();  // a declared path's name (D43), the schedule beside it
    if (!c.label.empty()) x.schedule = path_info(c.path).name;
    x.shape = path_info(c.path).shape;
    x.quantized = path_info(c.path).quantized;
    x.format = c.format_name();  // "bf16" or "fp16" for the 16-bit paths (D26)
    x.dist = dist;
    x.divide = to_string(c.divide);
    x.accum = to_string(c.accum);
    x.rotation = c.format.rotated() ? to_string(c.rotation) : "none";
    if (c.input != Accum::kFp32) x.input = to_string(c.input);     // D47
    if (c.output != Accum::kFp32) x.output = to_string(c.output);  // D46
    x.per_tensor = c.tensor_scale;                                  // D50
    x.tensor_amax = c.tensor_scale ? c.tensor_amax : 0.0;
    x.ranks = c.ranks;
    x.ranks_per_node = c.ranks_per_node;
    x.elements = c.elements;
    x.block = c.block;
    x.seed = seed;
    x.k_min = s.k_min;
    x.k_max = s.k_max;
    x.k_checked = r.k_checked;
    x.k_mismatches = r.k_mismatches;
    x.first_k_mismatch = r.first_k_mismatch;
    x.max_abs_error = s.max_abs_error;
    x.rms_error = s.outputs_checked ? std::sqrt(s.sum_sq_error / static_cast<double>(s.outputs_checked)) : 0.0;
    x.rel_rms_error = s.rel_rms_error();
    x.max_a_posteriori = s.max_a_posteriori;
    x.max_a_priori = s.max_a_priori;
    x.max_error_to_a_posteriori = s.max_error_to_a_posteriori;
    x.bound_holds = s.bound_holds;
    x.violations = s.violations;
    x.nonfinite_outputs = s.nonfinite_outputs;
    x.saturating = c.saturates();
    x.saturated_outputs = s.saturated_outputs;
    x.max_saturations = s.max_saturations;
    if (saturating(c.accum) && c.divide == Divide::kPre)  // ncclAvg's factor, an FP8 value (D41)
        x.mean_factor = kernels::nccl_avg_factor(static_cast<float>(c.ranks), c.accum);
    x.outputs_checked = s.outputs_checked;
    x.first_violation = s.first_violation;
    x.bytes_per_rank = r.bytes_per_rank;
    x.cross_node_bytes_per_rank = r.cross_node_bytes_per_rank;
    x.fp16_bytes_per_rank = r.fp16_path_bytes_per_rank;
    x.fp16_ring_rs_bytes_per_rank = r.fp16_ring_rs;
    return x;
}

}  // namespace qtransit::gate
