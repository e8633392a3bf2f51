// `qtransit formats` (the table of every built-in format), `formats show` (a format's TOML
// declaration) and `formats validate` (validate_format on a declared format, its reports).
#include <algorithm>
#include <filesystem>

#include "printf.hpp"
#include "qtransit/common/decl_toml.hpp"
#include "qtransit/gate/commands.hpp"
#include "qtransit/gate/validate.hpp"
#include "qtransit/gate/views.hpp"
#include "qtransit/reports/files.hpp"

namespace qtransit::gate {

Result<Printed> formats(const FormatsRequest& a) {
    auto table = format_table(a.block);
    if (!table) return table.error();
    return Printed{a.json ? to_json(*table).dump(2) + "\n" : to_text(*table), {}, true};
}

Result<Printed> formats_show(const std::string& target) {
    auto f = resolve_format(target);
    if (!f) return f.error();
    auto text = declaration_to_toml(*f);
    if (!text) return text.error();
    return Printed{*text, {}, true};
}

Result<FormatsValidateRequest::Setup> FormatsValidateRequest::validate() const {
    auto refuse = [](const std::string& m) { return make_error(ErrorCode::kInvalidArgument, m); };
    Setup s;
    if (!codec.empty()) {
        auto c = kernels::PluginCodec::load(codec);
        if (!c) return make_error(c.error().code, "--codec: " + c.error().message);
        s.codec = *c;
    }
    if (file.empty() && !s.codec) return refuse("formats validate takes a declaration file (FILE.toml), or --codec lib.so");
    if (!file.empty()) {
        if (!is_declaration_file(file)) return refuse(file + ": formats validate takes a declaration file (FILE.toml)");
        auto f = load_declaration(file);
        if (!f) return f.error();
        if (auto st = register_or_find(*f); !st) return make_error(st.error().code, file + ": " + st.error().message);
        if (s.codec && !(s.codec->format() == *f))
            return refuse("--codec: the codec " + s.codec->name() + " implements " + s.codec->format().name() + ", not " + f->name() + " (" +
                          file + ")");
        s.format = *f;
    } else {
        s.format = s.codec->format();
    }
    s.source = file.empty() ? "codec " + s.codec->name() : file;
    return s;
}

Result<FormatValidation> validate_declared(const FormatsValidateRequest& a, const FormatsValidateRequest::Setup& s,
                                          const std::function<void(const GateProgress&)>& progress) {
    ValidateOptions o;
    o.seed = a.seed;
    o.quick = a.quick;
    o.codec = s.codec;
    o.gate.progress = progress;
    return validate_format(s.format, s.source, o);
}

Result<Printed> formats_validate(const FormatsValidateRequest& a, const Emit& note, const std::function<void(const GateProgress&)>& progress) {
    auto s = a.validate();
    if (!s) return s.error();
    auto report_run = reports::ReportRun::begin(a.report_dir, {"report.json", "report.md", "junit.xml", "report.html", "declaration.toml"});
    if (!report_run) return report_run.error();
    if (note) note("qtransit formats validate: " + s->format.name() + " (" + s->source + "): generic properties ...\n");
    auto v = validate_declared(a, *s, progress);
    if (!v) return v.error();
    if (auto st = report_run->commit(validation_reports(*v)); !st) return st.error();
    Printed p;
    p.out = validation_text(*v);
    appendf(p.out, "report: %s (also report.md, report.json, junit.xml, declaration.toml); %.1f s\n",
            (std::filesystem::path(a.report_dir) / "report.html").c_str(), v->result.wall_seconds);
    p.passed = v->result.passed();
    return p;
}

}  // namespace qtransit::gate
