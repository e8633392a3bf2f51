// `qtransit check`: the numerics gate. Runs the gate of --config (or the embedded default), writes
// report.json, report.md, junit.xml and report.html into --report-dir, prints the summary, and
// exits 0 when every verdict passes, 1 when one fails, 2 for a bad invocation or config. --backend
// chooses where the paths run, as for `simulate`.
#include <optional>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <unistd.h>

#include "commands.hpp"
#include "qtransit/collectives/mpi.hpp"
#include "qtransit/common/text_file.hpp"
#include "qtransit/gate/gate.hpp"
#include "qtransit/gate/sweep.hpp"
#include "qtransit/reports/files.hpp"

namespace qtransit::cli {
namespace {

uint64_t fnv1a(const std::string& s) {
    uint64_t h = 1469598103934665603ull;
    for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
    return h;
}

}  // namespace

// Under mpi (and nccl under mpirun) every process runs the gate as one rank: each checks its own
// outputs and sweep.cpp combines the verdicts, so every rank holds the same runs. Only rank 0 reads
// the baseline, writes the reports and prints; the exit code is rank 0's, on every rank. Every
// problem found before the runs (a config, a baseline, a rank count, a GPU) is compared across the
// ranks first, so that all of them exit 2 with the same message rather than some waiting for others.
Result<gate::GateConfig> check_config(const CheckArgs& a, std::shared_ptr<const kernels::PluginCodec> codec) {
    // A codec given here replaces the config's gate.codec, which is then not loaded at all.
    const bool config_codec = !codec && a.codec.empty();
    auto cfg = !a.config_text.empty() ? gate::parse_gate_config(a.config_text, a.config.empty() ? "config" : a.config, config_codec)
               : a.config.empty()     ? gate::parse_gate_config("", "default", config_codec)
                                      : gate::load_gate_config(a.config, config_codec);
    if (!cfg) return cfg.error();
    if (!a.conformance.empty()) {
        auto k = kernels::parse_conformance(a.conformance);
        if (!k) return make_error(k.error().code, "--conformance: " + k.error().message);
        cfg->conformance = *k;
    }
    if (codec) {
        if (auto st = gate::attach_codec(*cfg, std::move(codec)); !st) return make_error(st.error().code, "codec: " + st.error().message);
    } else if (!a.codec.empty()) {
        if (auto st = gate::attach_codec(*cfg, a.codec); !st) return make_error(st.error().code, "--codec: " + st.error().message);
    }
    if (a.quick) {
        auto q = gate::quick_tier(*cfg);
        if (!q) return q.error();
        return std::move(*q);
    }
    return cfg;
}

int run_check(const CheckArgs& a) {
    namespace fs = std::filesystem;
    namespace mpi = collectives::mpi;
    auto backend = collectives::parse_backend(a.backend);
    if (!backend) return fail(backend.error());
    if (*backend == collectives::Backend::kMpi && !mpi::active())
        return fail("--backend mpi runs under mpirun or srun, one process per rank (" +
                    std::string(mpi::built() ? "MPI is not initialized" : "this build has no MPI") + ")");
    const bool per_rank = gate::one_process_per_rank(*backend);
    const bool speaker = !per_rank || mpi::rank() == 0;

    std::string problem;  // this rank's, before anything runs
    auto cfg = check_config(a);
    if (!cfg) problem = cfg.error().message;

    std::vector<reports::GateRun> baseline;
    bool have_baseline = false;
    if (problem.empty() && speaker) {
        if (!a.baseline.empty()) {
            if (!a.update_baseline || fs::exists(a.baseline)) {
                auto runs = reports::load_baseline(a.baseline);
                if (!runs) problem = runs.error().message;
                else baseline = std::move(*runs), have_baseline = true;
            }
        } else if (a.update_baseline) {
            problem = "--update-baseline needs --baseline FILE (where to write it)";
        }
    }
    // Where the results go is checked now, not after minutes of work.
    if (problem.empty() && speaker && !a.junit.empty())
        if (auto st = check_writable_file(a.junit, "JUnit report"); !st) problem = st.error().message;
    if (problem.empty() && speaker && !a.junit.empty())
        if (auto st = reports::check_report_target(a.junit, a.report_dir, reports::report_file_names(), "--junit"); !st)
            problem = st.error().message;
    if (problem.empty() && speaker && a.update_baseline)
        if (auto st = check_writable_file(a.baseline, "baseline"); !st) problem = st.error().message;
    if (problem.empty()) problem = gate::backend_problem(*cfg, *backend, a.backend);
    if (problem.empty())
        if (auto st = gate::check_gate_memory(*cfg); !st) problem = st.error().message;
    if (problem.empty() && speaker)
        if (auto st = reports::check_report_dir(a.report_dir, reports::report_file_names()); !st) problem = st.error().message;
    if (per_rank) {
        problem = mpi::first_error(problem);
        if (problem.empty() && !a.config.empty()) {
            // Every rank must run the same gate: its config file's text, as each rank read it.
            std::ifstream f(a.config, std::ios::binary);
            const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
            const auto all = mpi::allgather_strings(std::to_string(fnv1a(text)));
            if (!all) problem = all.error().message;  // the job's failure (fail() ends the job)
            for (size_t r = 1; all && r < all->size() && problem.empty(); ++r)
                if ((*all)[r] != (*all)[0])
                    problem = a.config + ": rank " + std::to_string(r) + " read other contents than rank 0 (every rank must "
                              "run the same gate config)";
        }
        if (!problem.empty()) return speaker ? fail(problem) : kExitUsage;
    } else if (!problem.empty()) {
        return fail(problem);
    }

    // From here on the run owns its report directory: locked, and the previous set gone (a run that
    // dies leaves no report to be read as its own).
    std::optional<reports::ReportRun> report_run;
    std::string lock_problem;
    if (speaker) {
        std::vector<fs::path> extra;
        if (!a.junit.empty()) extra.emplace_back(a.junit);
        auto r = reports::ReportRun::begin(a.report_dir, reports::report_file_names(), extra);
        if (!r) lock_problem = r.error().message;
        else report_run.emplace(std::move(*r));
    }
    if (per_rank) lock_problem = mpi::first_error(lock_problem);
    if (!lock_problem.empty()) return speaker ? fail(lock_problem) : kExitUsage;

    gate::GateOptions opt;
    opt.baseline = have_baseline ? &baseline : nullptr;
    opt.baseline_path = have_baseline ? a.baseline : "";
    if (speaker) opt.progress = progress_printer(isatty(fileno(stderr)) != 0);
    opt.backend = *backend;
    auto res = gate::run_gate(*cfg, opt);
    if (!res) return fail(res.error());

    int rc = res->passed() ? kExitOk : kExitCheckFailed;
    if (speaker) {
        const fs::path dir(a.report_dir);
        const auto files = reports::report_files(*res);
        std::vector<std::pair<fs::path, std::string>> extra;
        for (const auto& [name, text] : files)
            if (name == "junit.xml" && !a.junit.empty()) extra.emplace_back(a.junit, text);
        auto st = report_run->commit(files, extra);
        if (st && a.update_baseline)
            for (const auto& [name, text] : files)
                if (name == "report.json") st = reports::write_file(a.baseline, text);
        if (!st) {
            rc = fail(st.error());
        } else {
            std::printf("%s", reports::summary_text(*res).c_str());
            if (a.update_baseline) std::printf("baseline written: %s\n", a.baseline.c_str());
            std::printf("report: %s (also report.md, report.json, junit.xml)\n", (dir / "report.html").c_str());
            std::fflush(stdout);
        }
    }
    if (per_rank)  // rank 0's verdict (and report) is the job's
        if (auto st = mpi::broadcast(&rc, sizeof rc); !st) return fail(st.error());
    return rc;
}

}  // namespace qtransit::cli
