// `qtransit survey`: every format over every input distribution through the production kernel,
// each case checked against the reference bit for bit and against its bound in exact arithmetic,
// plus one requantization of the decoded values (idempotence, NUMERICS 1.1, and its failure for
// ds-int<b>, 1.3). The precursor of the numerics gate: a table on stdout, JSON and Markdown files.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "commands.hpp"
#include "decl_toml.hpp"
#include "qtransit/kernels/inputs.hpp"
#include "qtransit/reports/numbers.hpp"
#include "verify.hpp"

namespace qtransit::cli {

int run_survey(const SurveyArgs& a) {
    std::vector<FormatSpec> formats;
    std::vector<std::string> skipped;  // fixed-block formats a --block other than theirs leaves out
    if (a.formats.empty()) {
        for (const auto& f : all_builtin_formats()) {
            if (f.check_block(a.block).ok()) formats.push_back(f);
            else skipped.push_back(f.name());
        }
    }
    for (const auto& name : a.formats) {
        auto f = resolve_format(name);
        if (!f) return fail(f.error());
        if (auto st = f->check_block(a.block); !st) return fail("--block: " + st.error().message);
        formats.push_back(*f);
    }
    std::vector<kernels::Distribution> dists;
    if (a.distributions.empty()) dists = kernels::all_distributions();
    for (const auto& name : a.distributions) {
        auto d = kernels::parse_distribution(name);
        if (!d) return fail(d.error());
        dists.push_back(*d);
    }
    if (auto st = kernels::validate_block(a.block); !st) return fail(st.error());

    const bool tty = isatty(fileno(stderr));
    nlohmann::json cases = nlohmann::json::array();
    int failures = 0, done = 0;
    const int total = static_cast<int>(formats.size() * dists.size());
    std::vector<float> x(static_cast<size_t>(a.elements));
    std::string table = "| format | dist | max abs error | max error/bound | rel RMS error | kernel = reference | "
                        "bound holds | requantized codes changed |\n|---|---|---|---|---|---|---|---|\n";
    if (!a.json)
        std::printf("%-10s %-12s %13s %11s %11s %9s %7s %10s\n", "format", "dist", "max|err|", "err/bound", "relRMS",
                    "=ref", "bound", "requant");
    for (const auto& f : formats) {
        for (auto d : dists) {
            kernels::generate_span(d, a.seed, 0, 0, x);
            Site site;
            site.tensor = std::string(kernels::to_string(d)) + " input";
            auto c = quantize_and_check(f, x, a.block, Nonfinite::kError, site);
            ++done;
            if (!c) {
                // ds-int<b> refuses inputs beyond binary16 (docs/DECISIONS.md D3): a reported refusal,
                // not a failure of the survey.
                cases.push_back({{"format", f.name()}, {"dist", kernels::to_string(d)}, {"refused", c.error().message}});
                if (!a.json) std::printf("%-10s %-12s refused: %s\n", f.name().c_str(), kernels::to_string(d), c.error().message.c_str());
                table += "| " + f.name() + " | " + kernels::to_string(d) + " | refused: " + c.error().message + " |||||\n";
                continue;
            }
            double se = 0, sx = 0;
            for (size_t i = 0; i < x.size(); ++i) {
                const double e = static_cast<double>(c->decoded[i]) - static_cast<double>(x[i]);
                se += e * e;
                sx += static_cast<double>(x[i]) * x[i];
            }
            const double rel_rms = sx > 0 ? std::sqrt(se / sx) : 0.0;
            // Requantize the decoded values once: same codes is idempotence.
            auto again = kernels::encode(f, c->decoded, a.block);
            int64_t changed = -1;
            if (again) {
                const auto codes2 = kernels::unpack_codes(*again);
                changed = 0;
                for (size_t i = 0; i < codes2.size(); ++i) changed += codes2[i] != c->codes[i];
            }
            const bool ok = c->bounds.holds && c->matches_reference &&
                            (f.kind != FormatKind::kSym || changed == 0);  // int<b> promises idempotence
            failures += !ok;
            cases.push_back({{"format", f.name()}, {"dist", kernels::to_string(d)}, {"elements", a.elements},
                             {"block", a.block}, {"seed", a.seed}, {"max_abs_error", c->bounds.max_error},
                             {"max_error_to_bound", c->bounds.max_error_to_bound}, {"rel_rms_error", rel_rms},
                             {"bound_holds", c->bounds.holds}, {"matches_reference", c->matches_reference},
                             {"reference_mismatch", c->mismatch}, {"requantized_codes_changed", changed},
                             {"wire_bytes", c->encoded.wire_bytes()}, {"pass", ok}});
            char line[512];
            std::snprintf(line, sizeof line, "| %s | %s | %.4g | %.4f | %.4g | %s | %s | %lld |\n", f.name().c_str(),
                          kernels::to_string(d), c->bounds.max_error, c->bounds.max_error_to_bound, rel_rms,
                          c->matches_reference ? "yes" : "NO", c->bounds.holds ? "yes" : "NO", static_cast<long long>(changed));
            table += line;
            if (!a.json)
                std::printf("%-10s %-12s %13.4g %11.4f %11.4g %9s %7s %10lld%s\n", f.name().c_str(), kernels::to_string(d),
                            c->bounds.max_error, c->bounds.max_error_to_bound, rel_rms, c->matches_reference ? "yes" : "NO",
                            c->bounds.holds ? "yes" : "NO", static_cast<long long>(changed), ok ? "" : "   FAIL");
            if (tty && a.json) std::fprintf(stderr, "\r[%d/%d] %s %s   ", done, total, f.name().c_str(), kernels::to_string(d));
        }
    }
    if (tty && a.json) std::fprintf(stderr, "\n");

    nlohmann::json report{{"schema_version", 1}, {"tool", "qtransit survey"}, {"version", QTRANSIT_VERSION},
                          {"elements", a.elements}, {"block", a.block}, {"seed", a.seed},
                          {"cases", cases}, {"failures", failures}, {"skipped_formats", skipped}};
    namespace fs = std::filesystem;
    std::error_code ec;
    fs::create_directories(a.report_dir, ec);
    if (ec) return fail(a.report_dir + ": cannot create directory: " + ec.message());
    const fs::path json_path = fs::path(a.report_dir) / "survey.json", md_path = fs::path(a.report_dir) / "survey.md";
    std::ofstream(json_path) << report.dump(2) << "\n";
    std::ofstream(md_path) << "# qtransit survey\n\n" << a.elements << " elements per case, block " << a.block
                           << ", seed " << a.seed << ". Kernel output compared bit for bit with the reference; every "
                              "element's error compared with its bound in exact arithmetic; the decoded values "
                              "requantized once (int<b> must keep its codes; ds-int<b> need not).\n\n"
                           << table << "\n" << failures << " failing case(s).\n";
    if (a.json) std::printf("%s\n", report.dump(2).c_str());
    else std::printf("%d case(s), %d failing. Report: %s and %s\n", total, failures, json_path.c_str(), md_path.c_str());
    if (!skipped.empty() && !a.json) {
        std::string names;
        for (const auto& n : skipped) names += (names.empty() ? "" : ", ") + n;
        std::printf("not run at block %lld (their blocks are fixed at 32): %s\n", static_cast<long long>(a.block),
                    names.c_str());
    }
    return failures ? kExitCheckFailed : kExitOk;
}

}  // namespace qtransit::cli
