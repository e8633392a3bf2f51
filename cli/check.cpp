// `qtransit check`: the numerics gate. Runs the gate of --config (or the embedded default), writes
// report.json, report.md, junit.xml and report.html into --report-dir, prints the summary, and
// exits 0 when every verdict passes, 1 when one fails, 2 for a bad invocation or config. --backend
// chooses where the paths run, as for `simulate`.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "commands.hpp"
#include "gate.hpp"
#include "qtransit/collectives/mpi.hpp"
#include "qtransit/kernels/gpu.hpp"
#include "sweep.hpp"

namespace qtransit::cli {
namespace {

uint64_t fnv1a(const std::string& s) {
    uint64_t h = 1469598103934665603ull;
    for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
    return h;
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

}  // namespace

// Under mpi (and nccl under mpirun) every process runs the gate as one rank: each checks its own
// outputs and sweep.cpp combines the verdicts, so every rank holds the same runs. Only rank 0 reads
// the baseline, writes the reports and prints; the exit code is rank 0's, on every rank. Every
// problem found before the runs (a config, a baseline, a rank count, a GPU) is compared across the
// ranks first, so that all of them exit 2 with the same message rather than some waiting for others.
int run_check(const CheckArgs& a) {
    namespace fs = std::filesystem;
    namespace mpi = collectives::mpi;
    auto backend = collectives::parse_backend(a.backend);
    if (!backend) return fail(backend.error());
    if (*backend == collectives::Backend::kMpi && !mpi::active())
        return fail("--backend mpi runs under mpirun or srun, one process per rank (" +
                    std::string(mpi::built() ? "MPI is not initialized" : "this build has no MPI") + ")");
    const bool per_rank = one_process_per_rank(*backend);
    const bool speaker = !per_rank || mpi::rank() == 0;

    std::string problem;  // this rank's, before anything runs
    auto cfg = a.config.empty() ? parse_gate_config("", "default") : load_gate_config(a.config);
    if (!cfg) problem = cfg.error().message;

    std::vector<reports::GateRun> baseline;
    bool have_baseline = false;
    if (problem.empty() && speaker) {
        if (!a.baseline.empty()) {
            std::ifstream f(a.baseline, std::ios::binary);
            if (!f) {
                if (!a.update_baseline) problem = a.baseline + ": baseline not found (run with --update-baseline to create it)";
            } else {
                nlohmann::json j;
                try {
                    j = nlohmann::json::parse(f);
                    auto runs = reports::runs_from_json(j);
                    if (!runs) problem = a.baseline + ": " + runs.error().message;
                    else baseline = std::move(*runs), have_baseline = true;
                } catch (const nlohmann::json::exception& e) {
                    problem = a.baseline + ": not valid JSON: " + e.what();
                }
            }
        } else if (a.update_baseline) {
            problem = "--update-baseline needs --baseline FILE (where to write it)";
        }
    }
    if (problem.empty()) problem = backend_problem(*cfg, *backend, a.backend);
    if (problem.empty() && speaker) {
        std::error_code ec;
        fs::create_directories(a.report_dir, ec);
        if (ec) problem = a.report_dir + ": cannot create directory: " + ec.message();
    }
    if (per_rank) {
        problem = mpi::first_error(problem);
        if (problem.empty() && !a.config.empty()) {
            // Every rank must run the same gate: its config file's text, as each rank read it.
            std::ifstream f(a.config, std::ios::binary);
            const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
            const auto all = mpi::allgather_strings(std::to_string(fnv1a(text)));
            for (size_t r = 1; r < all.size() && problem.empty(); ++r)
                if (all[r] != all[0])
                    problem = a.config + ": rank " + std::to_string(r) + " read other contents than rank 0 (every rank must "
                              "run the same gate config)";
        }
        if (!problem.empty()) return speaker ? fail(problem) : kExitUsage;
    } else if (!problem.empty()) {
        return fail(problem);
    }

    GateOptions opt;
    opt.baseline = have_baseline ? &baseline : nullptr;
    opt.baseline_path = have_baseline ? a.baseline : "";
    opt.progress = speaker;
    opt.progress_tty = speaker && isatty(fileno(stderr)) != 0;
    opt.backend = *backend;
    auto res = run_gate(*cfg, opt);
    if (!res) return fail(res.error());

    int rc = res->passed() ? kExitOk : kExitCheckFailed;
    if (speaker) {
        const fs::path dir(a.report_dir);
        const std::string json = reports::to_json(*res).dump(2) + "\n", junit = reports::to_junit(*res);
        std::string wrote;
        for (const auto& [name, text] : std::vector<std::pair<std::string, std::string>>{
                 {"report.json", json}, {"report.md", reports::to_markdown(*res)}, {"junit.xml", junit}, {"report.html", reports::to_html(*res)}})
            if (auto st = write_file(dir / name, text); !st && wrote.empty()) wrote = st.error().message;
        if (wrote.empty() && !a.junit.empty())
            if (auto st = write_file(a.junit, junit); !st) wrote = st.error().message;
        if (wrote.empty() && a.update_baseline)
            if (auto st = write_file(a.baseline, json); !st) wrote = st.error().message;
        if (!wrote.empty()) {
            rc = fail(wrote);
        } else {
            std::printf("%s", reports::summary_text(*res).c_str());
            if (a.update_baseline) std::printf("baseline written: %s\n", a.baseline.c_str());
            std::printf("report: %s (also report.md, report.json, junit.xml)\n", (dir / "report.html").c_str());
            std::fflush(stdout);
        }
    }
    if (per_rank) mpi::broadcast(&rc, sizeof rc);  // rank 0's verdict (and report) is the job's
    return rc;
}

}  // namespace qtransit::cli
