// `qtransit check`: the numerics gate. Runs the gate of --config (or the embedded default), writes
// report.json, report.md, junit.xml and report.html into --report-dir, prints the summary, and
// exits 0 when every verdict passes, 1 when one fails, 2 for a bad invocation or config.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "commands.hpp"
#include "gate.hpp"

namespace qtransit::cli {
namespace {

Status write_file(const std::filesystem::path& p, const std::string& text) {
    std::ofstream f(p, std::ios::binary | std::ios::trunc);
    f << text;
    f.close();
    if (!f) return make_error(ErrorCode::kIo, p.string() + ": cannot write");
    return {};
}

}  // namespace

int run_check(const CheckArgs& a) {
    namespace fs = std::filesystem;
    auto cfg = a.config.empty() ? parse_gate_config("", "default") : load_gate_config(a.config);
    if (!cfg) return fail(cfg.error());

    std::vector<reports::GateRun> baseline;
    bool have_baseline = false;
    if (!a.baseline.empty()) {
        std::ifstream f(a.baseline, std::ios::binary);
        if (!f) {
            if (!a.update_baseline)
                return fail(a.baseline + ": baseline not found (run with --update-baseline to create it)");
        } else {
            nlohmann::json j;
            try {
                j = nlohmann::json::parse(f);
            } catch (const nlohmann::json::exception& e) {
                return fail(a.baseline + ": not valid JSON: " + e.what());
            }
            auto runs = reports::runs_from_json(j);
            if (!runs) return fail(a.baseline + ": " + runs.error().message);
            baseline = std::move(*runs);
            have_baseline = true;
        }
    } else if (a.update_baseline) {
        return fail("--update-baseline needs --baseline FILE (where to write it)");
    }

    std::error_code ec;
    fs::create_directories(a.report_dir, ec);
    if (ec) return fail(a.report_dir + ": cannot create directory: " + ec.message());

    GateOptions opt;
    opt.baseline = have_baseline ? &baseline : nullptr;
    opt.baseline_path = have_baseline ? a.baseline : "";
    opt.progress_tty = isatty(fileno(stderr)) != 0;
    auto res = run_gate(*cfg, opt);
    if (!res) return fail(res.error());

    const fs::path dir(a.report_dir);
    const std::string json = reports::to_json(*res).dump(2) + "\n", junit = reports::to_junit(*res);
    for (const auto& [name, text] : std::vector<std::pair<std::string, std::string>>{
             {"report.json", json}, {"report.md", reports::to_markdown(*res)}, {"junit.xml", junit}, {"report.html", reports::to_html(*res)}})
        if (auto st = write_file(dir / name, text); !st) return fail(st.error());
    if (!a.junit.empty())
        if (auto st = write_file(a.junit, junit); !st) return fail(st.error());
    if (a.update_baseline) {
        if (auto st = write_file(a.baseline, json); !st) return fail(st.error());
    }

    std::printf("%s", reports::summary_text(*res).c_str());
    if (a.update_baseline) std::printf("baseline written: %s\n", a.baseline.c_str());
    std::printf("report: %s (also report.md, report.json, junit.xml)\n", (dir / "report.html").c_str());
    return res->passed() ? kExitOk : kExitCheckFailed;
}

}  // namespace qtransit::cli
