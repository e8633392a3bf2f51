// `qtransit formats validate FILE.toml`: gate::validate_format on a declared format, its reports in
// --report-dir, the properties and the comparison on stdout. Exit 0 when everything promised holds,
// 1 when something fails, 2 for a bad file.
#include <cstdio>
#include <filesystem>
#include <unistd.h>

#include "commands.hpp"
#include "qtransit/common/decl_toml.hpp"
#include "qtransit/gate/validate.hpp"
#include "qtransit/reports/files.hpp"

namespace qtransit::cli {

int run_formats_validate(const ValidateArgs& a) {
    namespace fs = std::filesystem;
    if (!is_declaration_file(a.file)) return fail(a.file + ": formats validate takes a declaration file (FILE.toml)");
    auto f = load_declaration(a.file);
    if (!f) return fail(f.error());
    if (auto st = register_or_find(*f); !st) return fail(a.file + ": " + st.error().message);
    std::error_code ec;
    fs::create_directories(a.report_dir, ec);
    if (ec) return fail(a.report_dir + ": cannot create directory: " + ec.message());

    std::fprintf(stderr, "qtransit formats validate: %s (%s): generic properties ...\n", f->name().c_str(), a.file.c_str());
    gate::ValidateOptions o;
    o.seed = a.seed;
    o.quick = a.quick;
    o.gate.progress = progress_printer(isatty(fileno(stderr)) != 0);
    auto v = gate::validate_format(*f, a.file, o);
    if (!v) return fail(v.error());
    const fs::path dir(a.report_dir);
    if (auto st = reports::write_files(dir, gate::validation_reports(*v)); !st) return fail(st.error());
    std::printf("%s", gate::validation_text(*v).c_str());
    std::printf("report: %s (also report.md, report.json, junit.xml, declaration.toml); %.1f s\n", (dir / "report.html").c_str(),
                v->result.wall_seconds);
    return v->result.passed() ? kExitOk : kExitCheckFailed;
}

}  // namespace qtransit::cli
