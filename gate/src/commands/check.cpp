// `qtransit check`: the numerics gate. Runs the gate of --config (or the embedded default), writes
// report.json, report.md, junit.xml and report.html into --report-dir, and returns the summary;
// passed when every verdict passes. --backend chooses where the paths run, as for `simulate`.
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>

#include "printf.hpp"
#include "qtransit/collectives/mpi.hpp"
#include "qtransit/common/text_file.hpp"
#include "qtransit/gate/commands.hpp"
#include "qtransit/reports/files.hpp"

namespace qtransit::gate {
namespace {

uint64_t fnv1a(const std::string& s) {
    uint64_t h = 1469598103934665603ull;
    for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
    return h;
}

}  // namespace

Result<GateConfig> CheckRequest::validate(std::shared_ptr<const kernels::PluginCodec> codec_object) const {
    // A codec given here replaces the config's gate.codec, which is then not loaded at all.
    const bool config_codec = !codec_object && codec.empty();
    auto cfg = !config_text.empty() ? parse_gate_config(config_text, config.empty() ? "config" : config, config_codec)
               : config.empty()     ? parse_gate_config("", "default", config_codec)
                                    : load_gate_config(config, config_codec);
    if (!cfg) return cfg.error();
    if (!conformance.empty()) {
        auto k = kernels::parse_conformance(conformance);
        if (!k) return make_error(k.error().code, "--conformance: " + k.error().message);
        cfg->conformance = *k;
    }
    if (codec_object) {
        if (auto st = attach_codec(*cfg, std::move(codec_object)); !st) return make_error(st.error().code, "codec: " + st.error().message);
    } else if (!codec.empty()) {
        if (auto st = attach_codec(*cfg, codec); !st) return make_error(st.error().code, "--codec: " + st.error().message);
    }
    if (quick) {
        auto q = quick_tier(*cfg);
        if (!q) return q.error();
        return std::move(*q);
    }
    return cfg;
}

// Under mpi (and nccl under mpirun) every process runs the gate as one rank: each checks its own
// outputs and sweep.cpp combines the verdicts, so every rank holds the same runs. Only rank 0 reads
// the baseline, writes the reports and says the summary; the verdict is rank 0's, on every rank.
// Every problem found before the runs (a config, a baseline, a rank count, a GPU) is compared across
// the ranks first, so that all of them fail with the same message rather than some waiting for others.
Result<Printed> check(const CheckRequest& a, const std::function<void(const GateProgress&)>& progress) {
    namespace fs = std::filesystem;
    namespace mpi = collectives::mpi;
    auto backend = collectives::parse_backend(a.backend);
    if (!backend) return backend.error();
    if (*backend == collectives::Backend::kMpi && !mpi::active())
        return make_error(ErrorCode::kInvalidArgument, "--backend mpi runs under mpirun or srun, one process per rank (" +
                                                           std::string(mpi::built() ? "MPI is not initialized" : "this build has no MPI") + ")");
    const bool per_rank = one_process_per_rank(*backend);
    const bool speaks = !per_rank || mpi::rank() == 0;
    auto refuse = [](const std::string& problem) { return make_error(ErrorCode::kInvalidArgument, problem); };

    std::string problem;  // this rank's, before anything runs
    auto cfg = a.validate();
    if (!cfg) problem = cfg.error().message;

    std::vector<reports::GateRun> baseline;
    bool have_baseline = false;
    if (problem.empty() && speaks) {
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
    if (problem.empty() && speaks && !a.junit.empty())
        if (auto st = check_writable_file(a.junit, "JUnit report"); !st) problem = st.error().message;
    if (problem.empty() && speaks && !a.junit.empty())
        if (auto st = reports::check_report_target(a.junit, a.report_dir, reports::report_file_names(), "--junit"); !st)
            problem = st.error().message;
    if (problem.empty() && speaks && a.update_baseline)
        if (auto st = check_writable_file(a.baseline, "baseline"); !st) problem = st.error().message;
    if (problem.empty()) problem = backend_problem(*cfg, *backend, a.backend);
    if (problem.empty())
        if (auto st = check_gate_memory(*cfg); !st) problem = st.error().message;
    if (problem.empty() && speaks)
        if (auto st = reports::check_report_dir(a.report_dir, reports::report_file_names()); !st) problem = st.error().message;
    if (per_rank) {
        problem = mpi::first_error(problem);
        if (problem.empty() && !a.config.empty()) {
            // Every rank must run the same gate: its config file's text, as each rank read it.
            std::ifstream f(a.config, std::ios::binary);
            const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
            const auto all = mpi::allgather_strings(std::to_string(fnv1a(text)));
            if (!all) problem = all.error().message;  // the job's failure (the command ends the job)
            for (size_t r = 1; all && r < all->size() && problem.empty(); ++r)
                if ((*all)[r] != (*all)[0])
                    problem = a.config + ": rank " + std::to_string(r) + " read other contents than rank 0 (every rank must "
                              "run the same gate config)";
        }
    }
    if (!problem.empty()) return refuse(problem);

    // From here on the run owns its report directory: locked, and the previous set gone (a run that
    // dies leaves no report to be read as its own).
    std::optional<reports::ReportRun> report_run;
    std::string lock_problem;
    if (speaks) {
        std::vector<fs::path> extra;
        if (!a.junit.empty()) extra.emplace_back(a.junit);
        auto r = reports::ReportRun::begin(a.report_dir, reports::report_file_names(), extra);
        if (!r) lock_problem = r.error().message;
        else report_run.emplace(std::move(*r));
    }
    if (per_rank) lock_problem = mpi::first_error(lock_problem);
    if (!lock_problem.empty()) return refuse(lock_problem);

    GateOptions opt;
    opt.baseline = have_baseline ? &baseline : nullptr;
    opt.baseline_path = have_baseline ? a.baseline : "";
    if (speaks) opt.progress = progress;
    opt.backend = *backend;
    auto res = run_gate(*cfg, opt);
    if (!res) return res.error();

    Printed p;
    p.passed = res->passed();
    std::string written;  // rank 0's failure to write its reports: every rank's error
    if (speaks) {
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
            written = st.error().message;
        } else {
            p.out = reports::summary_text(*res);
            if (a.update_baseline) appendf(p.out, "baseline written: %s\n", a.baseline.c_str());
            appendf(p.out, "report: %s (also report.md, report.json, junit.xml)\n", (dir / "report.html").c_str());
        }
    }
    if (per_rank) {  // rank 0's verdict (and report) is the job's
        int rc = !written.empty() ? 2 : p.passed ? 0 : 1;
        if (auto st = mpi::broadcast(&rc, sizeof rc); !st) return st.error();
        p.passed = rc == 0;
        if (rc == 2 && written.empty()) return refuse("rank 0 could not write the reports");
    }
    if (!written.empty()) return refuse(written);
    return p;
}

}  // namespace qtransit::gate
