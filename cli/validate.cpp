// `qtransit formats validate FILE.toml`: gate::validate_format on a declared format, its reports in
// --report-dir, the properties and the comparison on stdout. Exit 0 when everything promised holds,
// 1 when something fails, 2 for a bad file.
#include <cstdio>
#include <filesystem>
#include <unistd.h>

#include "commands.hpp"
#include "qtransit/common/decl_toml.hpp"
#include "qtransit/gate/validate.hpp"
#include "qtransit/kernels/plugin.hpp"
#include "qtransit/reports/files.hpp"

namespace qtransit::cli {

int run_formats_validate(const ValidateArgs& a) {
    namespace fs = std::filesystem;
    std::shared_ptr<const kernels::PluginCodec> codec;
    if (!a.codec.empty()) {
        auto c = kernels::PluginCodec::load(a.codec);
        if (!c) return fail("--codec: " + c.error().message);
        codec = *c;
    }
    if (a.file.empty() && !codec) return fail("formats validate takes a declaration file (FILE.toml), or --codec lib.so");
    Result<FormatSpec> f = codec ? Result<FormatSpec>(codec->format()) : make_error(ErrorCode::kInvalidArgument, "");
    if (!a.file.empty()) {
        if (!is_declaration_file(a.file)) return fail(a.file + ": formats validate takes a declaration file (FILE.toml)");
        f = load_declaration(a.file);
        if (!f) return fail(f.error());
        if (auto st = register_or_find(*f); !st) return fail(a.file + ": " + st.error().message);
        if (codec && !(codec->format() == *f))
            return fail("--codec: the codec " + codec->name() + " implements " + codec->format().name() + ", not " + f->name() + " (" + a.file + ")");
    }
    const std::string file = a.file.empty() ? "codec " + codec->name() : a.file;
    auto report_run = reports::ReportRun::begin(a.report_dir, {"report.json", "report.md", "junit.xml", "report.html", "declaration.toml"});
    if (!report_run) return fail(report_run.error());

    std::fprintf(stderr, "qtransit formats validate: %s (%s): generic properties ...\n", f->name().c_str(), file.c_str());
    gate::ValidateOptions o;
    o.seed = a.seed;
    o.quick = a.quick;
    o.codec = codec;
    o.gate.progress = progress_printer(isatty(fileno(stderr)) != 0);
    auto v = gate::validate_format(*f, file, o);
    if (!v) return fail(v.error());
    const fs::path dir(a.report_dir);
    if (auto st = report_run->commit(gate::validation_reports(*v)); !st) return fail(st.error());
    std::printf("%s", gate::validation_text(*v).c_str());
    std::printf("report: %s (also report.md, report.json, junit.xml, declaration.toml); %.1f s\n", (dir / "report.html").c_str(),
                v->result.wall_seconds);
    return v->result.passed() ? kExitOk : kExitCheckFailed;
}

}  // namespace qtransit::cli
