// `qtransit paths` (every built-in path as a declaration), `paths show` (a declaration's TOML) and
// `paths validate` (a user's declarations resolved, then run and checked): docs/PATHS.md.
#include <algorithm>

#include "printf.hpp"
#include "qtransit/common/path_decl.hpp"
#include "qtransit/gate/commands.hpp"
#include "qtransit/reports/catalog.hpp"

namespace qtransit::gate {
Result<Printed> paths(bool json) {
    const auto& all = builtin_path_decls();
    if (all.empty()) return make_error(ErrorCode::kInternal, "the built-in path declarations did not parse");
    return Printed{json ? reports::paths_to_json(all).dump(2) + "\n" : reports::paths_to_text(all), {}, true};
}

Result<Printed> paths_show(const std::string& target) {
    auto ds = resolve_path_arg(target);
    if (!ds) return ds.error();
    Printed p;
    for (size_t i = 0; i < ds->size(); ++i) p.out += (i ? "\n" : "") + path_decl_to_toml((*ds)[i]);
    return p;
}

Result<Printed> paths_validate(const PathsValidateRequest& r) {
    if (!(r.file.size() > 5 && r.file.ends_with(".toml")))
        return make_error(ErrorCode::kInvalidArgument, r.file + ": paths validate takes a declaration file (FILE.toml)");
    auto ds = resolve_path_arg(r.file);
    if (!ds) return ds.error();
    Printed p;
    for (const auto& d : *ds) {
        SimulateRequest s;
        s.paths = {d.name};
        s.ranks = {4, 8};  // powers of two (tree-rs), and two nodes of 4 at N = 8
        s.ranks_per_node = 4;
        s.block = 32;
        if (d.wire_any()) s.format = "int8";
        s.elements = 8 * 32 * 8;
        s.seed = r.seed;
        s.threads = 1;
        // The declaration's wire formats may want another block: their fixed block (wire_block: nvfp4's
        // 16, flashinfer-fp8's 256), else the first of 32, 64, ... they all take.
        if (d.fixes_wire()) {
            std::vector<FormatSpec> wire;
            for (const auto& f : d.wire)
                if (auto fs = parse_format(f)) wire.push_back(*fs);
            std::vector<int64_t> candidates;
            if (const int64_t fixed = wire_block(wire, 0)) candidates.push_back(fixed);
            else
                for (int64_t b = 32; b <= 4096; b *= 2) candidates.push_back(b);
            bool found = false;
            for (int64_t b : candidates)
                if (wire.size() == d.wire.size() &&
                    std::all_of(wire.begin(), wire.end(), [&](const FormatSpec& f) { return f.check_block(b).ok(); })) {
                    s.block = b;
                    s.elements = 8 * b * 8;
                    found = true;
                    break;
                }
            if (!found)
                return make_error(ErrorCode::kInvalidArgument, r.file + ": " + d.name + ": its wire formats (" + d.wire_text() +
                                                                   ") take no block in common, so no run can carry them");
        }
        auto out = simulate(s);
        if (!out) return make_error(out.error().code, d.name + ": " + out.error().message);
        bool holds = true;
        int64_t sat = 0;
        std::string ks;
        for (const auto& run : (*out)->result.runs) {
            holds = holds && run.stats.bound_holds;
            sat += run.stats.saturated_outputs;
            ks += (ks.empty() ? "" : ", ") + std::string("N=") + std::to_string(run.config.ranks) + " k " + std::to_string(run.stats.k_min) +
                  (run.stats.k_min == run.stats.k_max ? "" : ".." + std::to_string(run.stats.k_max));
            if (!run.stats.bound_holds)
                p.complaints.push_back(d.name + " N=" + std::to_string(run.config.ranks) + ": bound violated: " + run.stats.first_violation);
        }
        p.passed = p.passed && holds;
        std::string also = d.add.empty() ? "" : ", add " + d.types_text();
        if (d.divide) also += std::string(", divide ") + to_string(*d.divide);
        if (d.input) also += std::string(", input ") + to_string(*d.input);
        if (d.output) also += std::string(", output ") + to_string(*d.output);
        if (s.block != 32) also += ", block " + std::to_string(s.block);
        appendf(p.out, "%s: %s (%s over %s, wire %s%s%s): %s; bounds %s%s\n", d.name.c_str(), path_info(d.kind).name, d.collective.c_str(),
                d.exchange.c_str(), d.wire_text().c_str(), d.wire_any() ? " (run with int8)" : "", also.c_str(), ks.c_str(), holds ? "hold" : "FAIL", sat ? (" (" + std::to_string(sat) + " outputs saturated)").c_str() : "");
    }
    appendf(p.out, "(%zu declaration%s in %s; each run by simulate at N = 4 and 8, normal inputs, seed %llu)\n", ds->size(),
            ds->size() == 1 ? "" : "s", r.file.c_str(), static_cast<unsigned long long>(r.seed));
    return p;
}

}  // namespace qtransit::gate
