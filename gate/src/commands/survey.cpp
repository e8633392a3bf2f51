// `qtransit survey`: run_survey over the formats and distributions asked for; a table (or the
// JSON), survey.json and survey.md in the report directory.
#include <algorithm>
#include <filesystem>

#include "printf.hpp"
#include "qtransit/common/decl_toml.hpp"
#include "qtransit/gate/commands.hpp"
#include "qtransit/gate/survey.hpp"
#include "qtransit/kernels/codec.hpp"
#include "qtransit/reports/files.hpp"

namespace qtransit::gate {

Result<SurveySpec> SurveyRequest::validate() const {
    auto refuse = [](const std::string& m) { return make_error(ErrorCode::kInvalidArgument, m); };
    if (elements < 1 || elements > kMaxElements)
        return refuse("--elements " + std::to_string(elements) + ": between 1 and 2^30 = 1073741824 elements per case");
    if (block < 0) return refuse("--block must be a positive integer (0: 32, and a fixed-block format its own), got " + std::to_string(block));
    SurveySpec spec;
    spec.elements = elements;
    spec.own_blocks = block == 0;
    spec.block = block == 0 ? kDefaultBlock : block;
    spec.seed = seed;
    if (formats.empty())
        for (const auto& f : all_builtin_formats()) {
            if (spec.own_blocks || f.check_block(block).ok()) spec.formats.push_back(f);
            else spec.skipped_formats.push_back(f.name());
        }
    for (const auto& name : formats) {
        auto f = resolve_format(name);
        if (!f) return f.error();
        if (auto st = f->check_block(spec.block_for(*f)); !st)
            return make_error(st.error().code, "--block: " + st.error().message);
        if (std::find(spec.formats.begin(), spec.formats.end(), *f) != spec.formats.end()) return refuse("--format " + f->name() + " is named twice");
        spec.formats.push_back(*f);
    }
    if (distributions.empty()) spec.dists = kernels::all_distributions();
    for (const auto& name : distributions) {
        auto d = kernels::parse_distribution(name);
        if (!d) return d.error();
        if (std::find(spec.dists.begin(), spec.dists.end(), *d) != spec.dists.end()) return refuse("--dist " + name + " is named twice");
        spec.dists.push_back(*d);
    }
    if (auto st = kernels::validate_block(spec.block); !st) return st.error();
    return spec;
}

Result<Printed> survey(const SurveyRequest& a, const Emit& emit, const std::function<void(int, int, const std::string&)>& progress) {
    auto valid = a.validate();
    if (!valid) return valid.error();
    SurveySpec& spec = *valid;
    namespace fs = std::filesystem;
    auto report_run = reports::ReportRun::begin(a.report_dir, {"survey.json", "survey.md"});
    if (!report_run) return report_run.error();

    Printed p;
    const Say say(emit, p.out);
    if (!a.json)
        say.f("%-10s %-12s %13s %11s %11s %9s %7s %10s\n", "format", "dist", "max|err|", "err/bound", "relRMS", "=ref", "bound", "requant");
    spec.on_case = [&](int done, int total, const SurveyCase& c) {
        if (a.json) {
            if (progress) progress(done, total, c.format + " " + c.dist);
        } else if (!c.refused.empty()) {
            say.f("%-10s %-12s refused: %s\n", c.format.c_str(), c.dist.c_str(), c.refused.c_str());
        } else {
            say.f("%-10s %-12s %13.4g %11.4f %11.4g %9s %7s %10lld%s\n", c.format.c_str(), c.dist.c_str(), c.check.max_abs_error,
                  c.check.max_error_to_bound, c.rel_rms_error, c.check.exact ? "yes" : "NO", c.check.bound_holds ? "yes" : "NO",
                  static_cast<long long>(c.requantized_codes_changed), c.pass ? "" : "   FAIL");
        }
    };
    auto res = run_survey(spec);
    if (!res) return res.error();
    if (a.json && progress) progress(0, 0, "");

    const auto report = reports::to_json(*res);
    const fs::path json_path = fs::path(a.report_dir) / "survey.json", md_path = fs::path(a.report_dir) / "survey.md";
    if (auto st = report_run->commit({{"survey.json", report.dump(2) + "\n"}, {"survey.md", reports::to_markdown(*res)}}); !st)
        return st.error();
    if (a.json) say(report.dump(2) + "\n");
    else say.f("%zu case(s), %d failing. Report: %s and %s\n", res->cases.size(), res->failures, json_path.c_str(), md_path.c_str());
    if (!spec.skipped_formats.empty() && !a.json) {
        std::string names;
        for (const auto& n : spec.skipped_formats) {
            auto f = parse_format(n);
            names += (names.empty() ? "" : ", ") + n + (f && f->fixed_block() ? " (" + std::to_string(f->fixed_block()) + ")" : "");
        }
        say.f("not run at block %lld (their fixed blocks in brackets; leave --block out to run each at its own): %s\n",
              static_cast<long long>(a.block), names.c_str());
    }
    p.passed = res->failures == 0;
    return p;
}

}  // namespace qtransit::gate
