// The gate's TOML configuration: the embedded default, and a user's file applied on top of it.
// Every error names the file, the line and the key (toml++ keeps source positions).
#include <algorithm>
#include <bit>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <set>
#include <sstream>

#include <toml++/toml.h>  // TOML_EXCEPTIONS=1 and compiled mode: qt_toml (CMakeLists.txt)

#include "qtransit/common/decl_toml.hpp"
#include "qtransit/common/text_file.hpp"
#include "qtransit/gate/gate.hpp"
#include "qtransit/gate/sweep.hpp"
#include "toml_table.hpp"

namespace qtransit::gate {

using detail::declaration_from_table;
using detail::type_name;


namespace {

struct Ctx {
    std::string source;
    // A format name, or a declaration file (.toml) relative to the config file's directory.
    Result<FormatSpec> format(const std::string& name) const {
        if (!is_declaration_file(name) || source == "default gate") return resolve_format(name);
        const std::filesystem::path p(name);
        return resolve_format(p.is_absolute() ? name : (std::filesystem::path(source).parent_path() / p).string());
    }
    Error err(const toml::source_region& at, const std::string& key, const std::string& what) const {
        // Keys and values are the user's text: escaped to one line, as the declarations' messages are.
        return make_error(ErrorCode::kInvalidArgument,
                          source + ":" + std::to_string(at.begin.line) + ": " + printable(key) + ": " + printable(what, 2000));
    }
};

// Where each key of the effective config was set (line 0 in the default).
struct Lines {
    std::map<std::string, toml::source_region> at;
    std::string fallback = "default gate";  // whose value a key not in `at` is
    std::string source_of(const std::string& k, const Ctx& user) const { return at.count(k) ? user.source : "default gate"; }
};

Status want(const Ctx& c, const toml::node& n, toml::node_type t, const std::string& key, const std::string& what) {
    if (n.type() == t) return {};
    return c.err(n.source(), key, "expected " + what + ", got " + type_name(n));
}

Result<int64_t> get_int(const Ctx& c, const toml::node& n, const std::string& key) {
    if (auto st = want(c, n, toml::node_type::integer, key, "an integer"); !st) return st.error();
    return n.as_integer()->get();
}
Result<double> get_num(const Ctx& c, const toml::node& n, const std::string& key) {
    if (n.is_integer()) return static_cast<double>(n.as_integer()->get());
    if (auto st = want(c, n, toml::node_type::floating_point, key, "a number"); !st) return st.error();
    const double v = n.as_floating_point()->get();
    if (!std::isfinite(v)) return c.err(n.source(), key, "must be a finite number, got " + std::to_string(v));
    return v;
}

// A list that names the same thing twice (ranks = [4, 4], a path twice) is a config error: the runs
// would repeat and the fits over N would divide by zero.
template <class T, class Name>
Status no_duplicates(const Ctx& c, const toml::node& n, const std::string& key, const std::vector<T>& v, Name name) {
    for (size_t i = 0; i < v.size(); ++i)
        for (size_t j = 0; j < i; ++j)
            if (v[i] == v[j]) return c.err(n.source(), key, name(v[i]) + " is listed twice");
    return {};
}
Result<std::string> get_str(const Ctx& c, const toml::node& n, const std::string& key) {
    if (auto st = want(c, n, toml::node_type::string, key, "a string"); !st) return st.error();
    return n.as_string()->get();
}
Result<bool> get_bool(const Ctx& c, const toml::node& n, const std::string& key) {
    if (auto st = want(c, n, toml::node_type::boolean, key, "a boolean"); !st) return st.error();
    return n.as_boolean()->get();
}
Result<std::vector<std::string>> get_strs(const Ctx& c, const toml::node& n, const std::string& key) {
    if (auto st = want(c, n, toml::node_type::array, key, "an array of strings"); !st) return st.error();
    std::vector<std::string> out;
    size_t i = 0;
    for (const auto& e : *n.as_array()) {
        auto s = get_str(c, e, key + "[" + std::to_string(i++) + "]");
        if (!s) return s.error();
        out.push_back(*s);
    }
    if (out.empty()) return c.err(n.source(), key, "is empty");
    return out;
}
Result<std::vector<int64_t>> get_ints(const Ctx& c, const toml::node& n, const std::string& key) {
    if (auto st = want(c, n, toml::node_type::array, key, "an array of integers"); !st) return st.error();
    std::vector<int64_t> out;
    size_t i = 0;
    for (const auto& e : *n.as_array()) {
        auto s = get_int(c, e, key + "[" + std::to_string(i++) + "]");
        if (!s) return s.error();
        out.push_back(*s);
    }
    if (out.empty()) return c.err(n.source(), key, "is empty");
    return out;
}

// A per-stage list "A,B" (D25): two formats that take the gate's block. Error naming `key`.
Result<std::vector<FormatSpec>> stage_list_of(const Ctx& c, const toml::node& n, const std::string& key, const std::string& s) {
    std::vector<FormatSpec> out;
    size_t start = 0;
    while (true) {
        const size_t comma = s.find(',', start);
        const std::string one = s.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        if (one.empty() || one == "all")
            return c.err(n.source(), key, "'" + s + "': a per-stage list names one format per stage, e.g. \"int8,int4\"");
        auto f = c.format(one);
        if (!f) return c.err(n.source(), key, f.error().message);
        out.push_back(*f);
        if (comma == std::string::npos) break;
        start = comma + 1;
    }
    if (out.size() != 2)
        return c.err(n.source(), key, "'" + s + "' names " + std::to_string(out.size()) + " formats; the paths with stages "
                                      "(a2a-hier-rs, two-shot-ar, hpz-ag-requant) take two");
    return out;
}

// Format names; "all" is every integer format. An entry "A,B" is a per-stage list: kept in *staged
// where the key takes them (gate.formats), else an Error.
Result<std::vector<FormatSpec>> formats_of(const Ctx& c, const toml::node& n, const std::string& key,
                                           std::vector<std::vector<FormatSpec>>* staged = nullptr) {
    auto names = get_strs(c, n, key);
    if (!names) return names.error();
    std::vector<FormatSpec> out;
    for (const auto& s : *names) {
        if (s == "all") {
            for (const auto& f : builtin_formats()) out.push_back(f);
            continue;
        }
        if (s.find(',') != std::string::npos) {
            if (!staged)
                return c.err(n.source(), key, "'" + s + "': per-stage lists are for gate.formats, [[budget]] format and "
                                              "[[scaling]] formats; name single formats here");
            auto l = stage_list_of(c, n, key, s);
            if (!l) return l.error();
            staged->push_back(*l);
            continue;
        }
        auto f = c.format(s);
        if (!f) return c.err(n.source(), key, f.error().message);
        out.push_back(*f);
    }
    return out;
}
// A string read with `parse` (a Result-returning parser: parse_path, parse_accum, ...), its
// failure said at the key's line.
template <class Parse>
auto parsed_of(const Ctx& c, const toml::node& n, const std::string& key, Parse parse) -> decltype(parse(std::string())) {
    auto s = get_str(c, n, key);
    if (!s) return s.error();
    auto x = parse(*s);
    if (!x) return c.err(n.source(), key, x.error().message);
    return x;
}
Result<std::vector<kernels::Distribution>> dists_of(const Ctx& c, const toml::node& n, const std::string& key) {
    auto names = get_strs(c, n, key);
    if (!names) return names.error();
    std::vector<kernels::Distribution> out;
    for (const auto& s : *names) {
        auto d = kernels::parse_distribution(s);
        if (!d) return c.err(n.source(), key, d.error().message);
        out.push_back(*d);
    }
    return out;
}


Status unknown(const Ctx& c, const toml::key& k, const std::string& prefix, const std::vector<std::string>& known) {
    std::string list;
    for (const auto& s : known) list += (list.empty() ? "" : ", ") + s;
    return c.err(k.source(), prefix + std::string(k.str()), "unknown key (known: " + list + ")");
}

// [[format]]: declarations (docs/FORMATS.md section 8) registered before anything names them.
Status apply_formats(const Ctx& c, const toml::table& doc) {
    if (const toml::node* fmts = doc.get("format")) {
        if (auto st = want(c, *fmts, toml::node_type::array, "format", "an array of tables ([[format]])"); !st) return st;
        size_t idx = 0;
        for (const auto& e : *fmts->as_array()) {
            const std::string at = "format[" + std::to_string(idx++) + "]";
            if (auto st = want(c, e, toml::node_type::table, at, "a table"); !st) return st;
            auto f = declaration_from_table(*e.as_table(), c.source, at + ".");
            if (!f) return f.error();
            if (auto st = register_or_find(*f); !st) return c.err(e.source(), at + ".name", st.error().message);
        }
    }
    return {};
}

// One key of [gate] (`name` is "gate.<key>").
Status apply_gate_key(const Ctx& c, const toml::key& gk, const toml::node& gv, const std::string& name, GateConfig& cfg) {
    const std::string g(gk.str());
    if (g == "formats") {
        std::vector<std::vector<FormatSpec>> staged;
        auto f = formats_of(c, gv, name, &staged);
        if (!f) return f.error();
        if (auto st = no_duplicates(c, gv, name, *f, [](const FormatSpec& x) { return x.name(); }); !st) return st;
        if (auto st = no_duplicates(c, gv, name, staged, [](const std::vector<FormatSpec>& x) { return stages_name(x); }); !st)
            return st;
        cfg.formats = *f;
        cfg.staged = std::move(staged);
    } else if (g == "paths") {
        auto names = get_strs(c, gv, name);
        if (!names) return names.error();
        cfg.paths.clear();
        cfg.declared.clear();
        for (const auto& s : *names) {
            if (s == "all") {
                for (PathKind p : all_path_kinds()) cfg.paths.push_back(p);
                continue;
            }
            if (auto p = parse_path(s)) {
                cfg.paths.push_back(*p);
                continue;
            }
            // A declared path (docs/PATHS.md): a declaration-only built-in, or a .toml file of them
            // (relative to the config file's directory), each registered so --path can name it too.
            std::string arg = s;
            if (s.ends_with(".toml") && c.source != "default gate" && std::filesystem::path(s).is_relative())
                arg = (std::filesystem::path(c.source).parent_path() / s).string();
            auto ds = resolve_path_arg(arg);
            if (!ds) return c.err(gv.source(), name, ds.error().message);
            for (const PathDecl& d : *ds) {
                if (d.is_builtin_kind()) {
                    cfg.paths.push_back(d.kind);
                    continue;
                }
                if (d.kind == PathKind::kTreeRs)
                    return c.err(gv.source(), name, "the declared path " + d.name + " is tree-rs, which the gate runs at gate.tree_ranks: "
                                                    "declared tree paths are not run by the gate yet (qtransit simulate --path runs it)");
                for (const auto& e : cfg.declared)
                    if (e.name == d.name) return c.err(gv.source(), name, "'" + d.name + "' is listed twice: each path once");
                cfg.declared.push_back(d);
            }
        }
        if (auto st = no_duplicates(c, gv, name, cfg.paths, [](PathKind x) { return std::string(path_info(x).name); }); !st)
            return st;
    } else if (g == "distributions") {
        auto d = dists_of(c, gv, name);
        if (!d) return d.error();
        if (auto st = no_duplicates(c, gv, name, *d, [](kernels::Distribution x) { return std::string(kernels::to_string(x)); }); !st)
            return st;
        cfg.dists = *d;
    } else if (g == "ranks" || g == "tree_ranks") {
        auto r = get_ints(c, gv, name);
        if (!r) return r.error();
        for (int64_t n : *r)
            if (n < 1 || n > kMaxRanks)
                return c.err(gv.source(), name, "N = " + std::to_string(n) + " is not a number of ranks (1..65536)");
        if (auto st = no_duplicates(c, gv, name, *r, [](int64_t x) { return "N = " + std::to_string(x); }); !st) return st;
        if (g == "ranks") {
            cfg.ranks = *r;
        } else {
            cfg.tree_ranks = *r;
            cfg.tree_ranks_derived = false;
        }
    } else if (g == "ranks_per_node" || g == "elements" || g == "block" || g == "seed" || g == "threads") {
        auto i = get_int(c, gv, name);
        if (!i) return i.error();
        const int64_t lo = g == "ranks_per_node" || g == "seed" || g == "threads" ? 0 : 1;
        if (*i < lo) return c.err(gv.source(), name, "must be >= " + std::to_string(lo) + ", got " + std::to_string(*i));
        if (g == "elements" && *i > kMaxElements) return c.err(gv.source(), name, "at most 2^30 elements per rank");
        if (g == "block" && *i > kMaxBlock) return c.err(gv.source(), name, "at most 2^30 elements per block");
        if (g == "threads" && *i > 4096) return c.err(gv.source(), name, "at most 4096 threads, got " + std::to_string(*i));
        if (g == "ranks_per_node") cfg.ranks_per_node = *i;
        else if (g == "elements") cfg.elements = *i;
        else if (g == "block") cfg.block = *i;
        else if (g == "seed") cfg.seed = static_cast<uint64_t>(*i);
        else cfg.threads = static_cast<int>(*i);
    } else if (g == "gpu" || g == "long_codec_call") {
        auto b = get_bool(c, gv, name);
        if (!b) return b.error();
        (g == "gpu" ? cfg.gpu : cfg.long_codec_call) = *b;
    } else if (g == "codec") {
        auto p = get_str(c, gv, name);
        if (!p) return p.error();
        if (p->empty()) return c.err(gv.source(), name, "is empty: give the path of a codec plugin (.so)");
        // Relative to the config file, as a user moving the pair together expects.
        std::filesystem::path lib(*p);
        if (lib.is_relative() && c.source != "default gate")
            lib = std::filesystem::path(c.source).parent_path() / lib;
        cfg.codec_path = lib.string();
    } else if (g == "accum") {
        auto a = parsed_of(c, gv, name, [](const std::string& v) { return parse_accum(v); });
        if (!a) return a.error();
        cfg.accum = *a;
    } else if (g == "divide") {
        auto d = parsed_of(c, gv, name, [](const std::string& v) { return parse_divide(v); });
        if (!d) return d.error();
        cfg.divide = *d;
    } else if (g == "conformance") {
        auto k = parsed_of(c, gv, name, [](const std::string& v) { return kernels::parse_conformance(v); });
        if (!k) return k.error();
        cfg.conformance = *k;
    } else {
        return unknown(c, gk, "gate.", {"formats", "paths", "distributions", "ranks", "tree_ranks", "ranks_per_node",
                                        "elements", "block", "seed", "accum", "divide", "threads", "gpu", "long_codec_call", "codec",
                                        "conformance"});
    }
    return {};
}

// [baseline]: margin and metrics.
Status apply_baseline(const Ctx& c, const toml::node& v, GateConfig& cfg) {
    if (auto st = want(c, v, toml::node_type::table, "baseline", "a table"); !st) return st;
    for (auto&& [bk, bv] : *v.as_table()) {
        const std::string b(bk.str()), name = "baseline." + b;
        if (b == "margin") {
            auto m = get_num(c, bv, name);
            if (!m) return m.error();
            if (!(*m >= 0)) return c.err(bv.source(), name, "must be >= 0 (0.10: 10% worse allowed)");
            cfg.baseline_margin = *m;
        } else if (b == "metrics") {
            auto m = get_strs(c, bv, name);
            if (!m) return m.error();
            cfg.baseline_metrics.clear();
            for (const auto& s : *m) {
                auto x = parse_metric(s);
                if (!x) return c.err(bv.source(), name, x.error().message);
                cfg.baseline_metrics.push_back(*x);
            }
        } else {
            return unknown(c, bk, "baseline.", {"margin", "metrics"});
        }
    }
    return {};
}

// One [[scaling]] entry (`at` is "scaling[i]", e its node).
Result<ScalingRule> scaling_rule_of(const Ctx& c, const std::string& at, const toml::node& e) {
    const auto& t = *e.as_table();
    ScalingRule r;
    bool have_path = false;
    for (auto&& [sk, sv] : t) {
        const std::string s(sk.str()), name = at + "." + s;
        if (s == "path") {
            // A built-in path, or a declared one that gate.paths names (resolved by validate_keys).
            auto x = get_str(c, sv, name);
            if (!x) return x.error();
            if (auto p = parse_path(*x)) r.path = *p;
            else r.label = *x;
            have_path = true;
        } else if (s == "formats") {
            auto f = formats_of(c, sv, name, &r.staged);
            if (!f) return f.error();
            r.formats = *f;
        } else if (s == "distributions") {
            auto d = dists_of(c, sv, name);
            if (!d) return d.error();
            r.dists = *d;
        } else if (s == "min" || s == "max") {
            auto x = get_num(c, sv, name);
            if (!x) return x.error();
            (s == "min" ? r.min : r.max) = *x;
        } else if (s == "why") {
            auto w = get_str(c, sv, name);
            if (!w) return w.error();
            r.why = *w;
        } else {
            return unknown(c, sk, at + ".", {"path", "formats", "distributions", "min", "max", "why"}).error();
        }
    }
    if (!have_path) return c.err(e.source(), at + ".path", "is required");
    if (r.min > r.max) return c.err(e.source(), at + ".min", "is greater than max");
    if (!r.label.empty() && !r.staged.empty())
        return c.err(e.source(), at + ".formats", "per-stage lists are for the built-in paths with stages; a declared path runs its own wire "
                                                  "or each of gate.formats");
    if (r.label.empty() && !r.staged.empty() && format_stages(r.path).empty())
        return c.err(e.source(), at + ".formats", std::string("path ") + path_info(r.path).name + " has one stage; " +
                                                     stages_name(r.staged.front()) +
                                                     " runs on a2a-hier-rs, two-shot-ar and hpz-ag-requant");
    return r;
}

// One [[budget]] entry (`at` is "budget[i]", e its node).
Result<Budget> budget_of(const Ctx& c, const std::string& at, const toml::node& e, Lines& lines) {
    const auto& t = *e.as_table();
    Budget b;
    bool have_path = false, have_format = false, have_max = false, have_name = false;
    for (auto&& [sk, sv] : t) {
        const std::string s(sk.str()), name = at + "." + s;
        if (s == "name") {
            auto x = get_str(c, sv, name);
            if (!x) return x.error();
            // A name is printed on the summary's lines and in every report: a control
            // character could forge a line ("\nPASS") or drive the terminal.
            for (unsigned char ch : *x)
                if (ch < 0x20 || ch == 0x7F)
                    return c.err(sv.source(), name, "has a control character (code " + std::to_string(ch) +
                                                        "): a budget's name is printed in the reports");
            if (x->empty()) return c.err(sv.source(), name, "is empty");
            b.name = *x;
            have_name = true;
        } else if (s == "path") {
            // A built-in path, or a declared one that gate.paths names (checked by validate_keys, once
            // every declaration is known).
            auto x = get_str(c, sv, name);
            if (!x) return x.error();
            if (auto p = parse_path(*x)) b.path = *p;
            else b.label = *x;
            lines.at[name] = sv.source();
            have_path = true;
        } else if (s == "format") {
            auto x = get_str(c, sv, name);
            if (!x) return x.error();
            if (x->find(',') != std::string::npos) {  // a per-stage list (D25)
                auto l = stage_list_of(c, sv, name, *x);
                if (!l) return l.error();
                b.stages = *l;
                b.format = l->front();
            } else {
                auto f = c.format(*x);
                if (!f) return c.err(sv.source(), name, f.error().message);
                b.format = *f;
            }
            have_format = true;
        } else if (s == "dist") {
            auto x = get_str(c, sv, name);
            if (!x) return x.error();
            if (auto d = kernels::parse_distribution(*x); !d) return c.err(sv.source(), name, d.error().message);
            b.dist = *x;
        } else if (s == "ranks") {
            auto x = get_int(c, sv, name);
            if (!x) return x.error();
            b.ranks = *x;
            lines.at[name] = sv.source();
        } else if (s == "metric") {
            auto m = parsed_of(c, sv, name, [](const std::string& v) { return parse_metric(v); });
            if (!m) return m.error();
            b.metric = *m;
        } else if (s == "max") {
            auto x = get_num(c, sv, name);
            if (!x) return x.error();
            b.max = *x;
            have_max = true;
        } else {
            return unknown(c, sk, at + ".", {"name", "path", "format", "dist", "ranks", "metric", "max"}).error();
        }
    }
    // (A declared path with a wire of its own, or none, needs no format: validate_keys knows it.)
    for (auto [have, what] : {std::pair{have_path, "path"}, {have_format || !b.label.empty(), "format"}, {have_max, "max"}})
        if (!have) return c.err(e.source(), at + "." + what, "is required");
    b.format_given = have_format;
    if (!have_name)
        b.name = b.path_name() + "-" + (b.label.empty() || have_format ? b.format_name() + "-" : std::string()) +
                 (b.dist.empty() ? "" : b.dist + "-") + to_string(b.metric);
    return b;
}

// Applies one parsed document to cfg. `lines` records where the size keys were set.
Status apply(const Ctx& c, const toml::table& doc, GateConfig& cfg, Lines& lines) {
    if (auto st = apply_formats(c, doc); !st) return st;
    for (auto&& [k, v] : doc) {
        const std::string key(k.str());
        if (key == "format") continue;
        if (key == "gate") {
            if (auto st = want(c, v, toml::node_type::table, "gate", "a table"); !st) return st;
            for (auto&& [gk, gv] : *v.as_table()) {
                const std::string name = "gate." + std::string(gk.str());
                lines.at[name] = gv.source();
                if (auto st = apply_gate_key(c, gk, gv, name, cfg); !st) return st;
            }
        } else if (key == "baseline") {
            if (auto st = apply_baseline(c, v, cfg); !st) return st;
        } else if (key == "scaling" || key == "budget") {
            if (auto st = want(c, v, toml::node_type::array, key, "an array of tables ([[" + key + "]])"); !st) return st;
            if (key == "scaling") cfg.scaling.clear();
            else cfg.budgets.clear();
            size_t idx = 0;
            for (const auto& e : *v.as_array()) {
                const std::string at = key + "[" + std::to_string(idx++) + "]";
                if (auto st = want(c, e, toml::node_type::table, at, "a table"); !st) return st;
                lines.at[at] = e.source();  // so that a later check of this entry names its file and line
                if (key == "scaling") {
                    auto r = scaling_rule_of(c, at, e);
                    if (!r) return r.error();
                    cfg.scaling.push_back(std::move(*r));
                } else {
                    auto b = budget_of(c, at, e, lines);
                    if (!b) return b.error();
                    cfg.budgets.push_back(std::move(*b));
                }
            }
        } else {
            return unknown(c, k, "", {"gate", "baseline", "scaling", "budget", "format"});
        }
    }
    return {};
}

// An Error about key k: "<file>:<line>: k: what" when lines knows k's line, else "<fallback>: k: what".
Error key_error(const Ctx& user, const Lines& lines, const std::string& k, const std::string& what) {
    auto it = lines.at.find(k);
    return it != lines.at.end() ? user.err(it->second, k, what) : make_error(ErrorCode::kInvalidArgument, lines.fallback + ": " + k + ": " + what);
}

// Whether the gate runs the distribution named `dist` ("": every one), and the per-stage list `l`.
bool runs_dist(const GateConfig& cfg, const std::string& dist) {
    return dist.empty() || std::any_of(cfg.dists.begin(), cfg.dists.end(), [&](auto d) { return dist == kernels::to_string(d); });
}
bool runs_stages(const GateConfig& cfg, const std::vector<FormatSpec>& l) {
    return std::any_of(cfg.staged.begin(), cfg.staged.end(), [&](const auto& g) { return stages_name(g) == stages_name(l); });
}

// A declared path a budget or a scaling rule names: one gate.paths names, or null and *why says which
// ones it does name.
const PathDecl* declared_named(const GateConfig& cfg, const std::string& label, std::string* why) {
    for (const auto& x : cfg.declared)
        if (x.name == label) return &x;
    std::string names;
    for (const auto& x : cfg.declared) names += (names.empty() ? "" : ", ") + x.name;
    *why = "path " + label + " is neither a built-in path nor a declared path gate.paths names" +
           (names.empty() ? std::string(" (it names none)") : " (it names " + names + ")");
    return nullptr;
}
// The format a declared path's runs carry when it fixes one: its own wire, "none", or its 16-bit type;
// "" for a wire of "any" (each of gate.formats).
std::string own_run_format(const PathDecl& d) {
    return typed_path(d.kind) ? std::string(to_string(path_info(d.kind).element))
           : d.fixes_wire()   ? d.wire_text()
           : d.wire_none()    ? std::string("none")
                              : std::string();
}

// The constraints between keys: M divisible by every N, G dividing every N, tree-rs at powers of
// two, budgets that name what the gate runs.
Status validate_keys(const Ctx& user, GateConfig& cfg, const Lines& lines) {
    auto err = [&](const std::string& k, const std::string& what) { return key_error(user, lines, k, what); };
    const bool tree = std::find(cfg.paths.begin(), cfg.paths.end(), PathKind::kTreeRs) != cfg.paths.end();
    if (cfg.tree_ranks_derived) {
        cfg.tree_ranks.clear();
        for (int64_t n : cfg.ranks) {
            const int64_t p = std::bit_floor(static_cast<uint64_t>(n));
            if (std::find(cfg.tree_ranks.begin(), cfg.tree_ranks.end(), p) == cfg.tree_ranks.end()) cfg.tree_ranks.push_back(p);
        }
    }
    auto check_ns = [&](const std::vector<int64_t>& ns, const std::string& key, bool pow2) -> Status {
        const std::string nk = lines.at.count(key) ? key : lines.at.count("gate.elements") ? "gate.elements" : key;
        for (int64_t n : ns) {
            if (cfg.elements % n != 0) {
                // Which M would do: the multiples of every N's least common multiple nearest to M
                // (issue 52: "must be divisible by 384" did not say what to write instead).
                int64_t l = 1;
                for (const auto* v : {&cfg.ranks, &cfg.tree_ranks})
                    if (v != &cfg.tree_ranks || tree)
                        for (int64_t m : *v)
                            if (m > 0 && l <= (int64_t{1} << 30)) l = std::lcm(l, m);
                std::string hint;
                if (l <= (int64_t{1} << 30)) {
                    const int64_t below = cfg.elements / l * l, above = below + l;
                    hint = "; every N of this gate divides the multiples of " + std::to_string(l) + ": try " +
                           (below > 0 ? std::to_string(below) + " or " : std::string()) + std::to_string(above);
                }
                return err(nk, "M = gate.elements = " + std::to_string(cfg.elements) + " is not divisible by N = " +
                                   std::to_string(n) + " (from " + key + "): every N must divide M" + hint);
            }
            const int64_t g = cfg.ranks_per_node > 0 ? cfg.ranks_per_node : default_ranks_per_node(n);
            if (n % g != 0)
                return err(lines.at.count("gate.ranks_per_node") ? "gate.ranks_per_node" : key,
                           "G = " + std::to_string(g) + " ranks per node does not divide N = " + std::to_string(n) + " (from " + key + ")" +
                               (lines.at.count("gate.ranks_per_node")
                                    ? ""
                                    : "; gate.ranks_per_node is " + std::to_string(g) +
                                          " by default: set it to a divisor of every N, or 0 (8 where 8 divides N, else N)"));
            if (pow2 && !std::has_single_bit(static_cast<uint64_t>(n)))
                return err(key, "tree-rs needs N a power of two, got " + std::to_string(n));
        }
        return {};
    };
    // A block a format refuses (the MX formats' fixed 32), found before anything runs.
    // gate.block left out: 32, or the listed formats' one fixed block (parse_gate_config).
    const std::string block_hint =
        lines.at.count("gate.block") ? "" : " (gate.block is " + std::to_string(cfg.block) + " by default; formats of different fixed blocks need a gate each)";
    for (const auto& f : cfg.formats)
        if (auto st = f.check_block(cfg.block); !st)
            return err(lines.at.count("gate.block") ? "gate.block" : "gate.formats", st.error().message + block_hint);
    for (const auto& l : cfg.staged) {
        for (const auto& f : l)
            if (auto st = f.check_block(cfg.block); !st)
                return err(lines.at.count("gate.block") ? "gate.block" : "gate.formats", stages_name(l) + ": " + st.error().message + block_hint);
        bool runs = false;
        for (auto p : cfg.paths) runs = runs || !format_stages(p).empty();
        if (!runs)
            return err("gate.formats", stages_name(l) + " is one format per stage, and none of gate.paths has stages "
                                       "(a2a-hier-rs, two-shot-ar, hpz-ag-requant)");
    }
    // A declared path's own wire formats run at their fixed block when they have one (flashinfer-fp8:
    // 256, the 1x128 formats: 128), else at the gate's block (wire_block).
    for (const auto& d : cfg.declared)
        if (d.fixes_wire()) {
            std::vector<FormatSpec> wire;
            for (const auto& w : d.wire) {
                auto f = parse_format(w);
                if (!f) return err("gate.paths", d.name + ": " + f.error().message);
                wire.push_back(*f);
            }
            const int64_t b = wire_block(wire, cfg.block);
            for (const auto& f : wire)
                if (auto st = f.check_block(b); !st)
                    return err(b == cfg.block && lines.at.count("gate.block") ? "gate.block" : "gate.paths",
                               d.name + "'s wire: " + st.error().message);
        }
    if (cfg.ranks.empty()) return err("gate.ranks", "is empty");
    if (auto st = check_ns(cfg.ranks, "gate.ranks", false); !st) return st;
    if (tree)
        if (auto st = check_ns(cfg.tree_ranks, "gate.tree_ranks", true); !st) return st;
    for (size_t i = 0; i < cfg.budgets.size(); ++i) {
        auto& b = cfg.budgets[i];
        const std::string k = "budget[" + std::to_string(i) + "]";
        for (size_t j = 0; j < i; ++j)
            if (cfg.budgets[j].name == b.name)
                return err(k, "its name '" + b.name + "' is budget[" + std::to_string(j) + "]'s too: each verdict needs a name of its own "
                              "(give one with name = \"...\")");
        if (!b.label.empty()) {  // a declared path: one gate.paths names, whose runs carry its name
            std::string why;
            const PathDecl* d = declared_named(cfg, b.label, &why);
            if (!d) return err(lines.at.count(k + ".path") ? k + ".path" : k, why);
            b.path = d->kind;
            // The format its runs carry: its own wire, none, or its 16-bit type; else the gate's format given.
            const std::string own = own_run_format(*d);
            if (!own.empty()) {
                if (b.format_given && b.format_name() != own)
                    return err(k, "path " + b.label + " runs with its own wire " + own + ", not format " + b.format_name() +
                                      " (leave format out)");
                b.run_format = own;
                continue;  // (its N are the gate's; its runs' format is its own)
            }
            if (!b.format_given)
                return err(k + ".format", "is required: path " + b.label + " runs with each of gate.formats (its wire is \"any\")");
        }
        if (b.label.empty() && std::find(cfg.paths.begin(), cfg.paths.end(), b.path) == cfg.paths.end())
            return err(k, std::string("path ") + path_info(b.path).name + " is not in gate.paths");
        // A 16-bit path's runs carry their type (bf16, fp16), not a format: a budget there matched no
        // run and failed as if its input had been refused.
        if (typed_path(b.path))
            return err(k, std::string("path ") + path_info(b.path).name + " quantizes nothing (a 16-bit path, D26): its runs carry no format, "
                              "so a budget on format " + (b.stages.empty() ? b.format.name() : stages_name(b.stages)) + " there would match no run");
        if (b.stages.empty() && std::find(cfg.formats.begin(), cfg.formats.end(), b.format) == cfg.formats.end())
            return err(k, "format " + b.format.name() + " is not in gate.formats");
        if (!b.stages.empty()) {
            if (!runs_stages(cfg, b.stages)) return err(k, "format " + stages_name(b.stages) + " is not in gate.formats");
            if (format_stages(b.path).empty())
                return err(k, std::string("path ") + path_info(b.path).name + " has one stage; " + stages_name(b.stages) +
                                  " runs on a2a-hier-rs, two-shot-ar and hpz-ag-requant");
        }
        if (!runs_dist(cfg, b.dist)) return err(k, "dist " + b.dist + " is not in gate.distributions");
        if (b.ranks != 0) {
            const auto& ns = b.path == PathKind::kTreeRs ? cfg.tree_ranks : cfg.ranks;
            if (std::find(ns.begin(), ns.end(), b.ranks) == ns.end())
                return err(lines.at.count(k + ".ranks") ? k + ".ranks" : k,
                           "N = " + std::to_string(b.ranks) + " is not one the gate runs " + b.path_name() + " at");
        }
    }
    // A scaling rule naming a declared path: one gate.paths names; its schedule, and the format its runs
    // carry when the declaration fixes one (a rule's formats must then be that one, or left out).
    for (size_t i = 0; i < cfg.scaling.size(); ++i) {
        auto& r = cfg.scaling[i];
        const std::string k = "scaling[" + std::to_string(i) + "]";
        if (r.label.empty() && typed_path(r.path)) {  // a 16-bit or FP8 path's runs carry its type, fitted under it
            r.run_format = to_string(path_info(r.path).element);
            if (!r.formats.empty() || !r.staged.empty())
                return err(k, std::string("path ") + path_info(r.path).name + " quantizes nothing: its runs carry its type " + r.run_format +
                                  " (leave formats out)");
        }
        if (r.label.empty()) continue;
        std::string why;
        const PathDecl* d = declared_named(cfg, r.label, &why);
        if (!d) return err(k, why);
        r.path = d->kind;
        r.run_format = own_run_format(*d);
        if (!r.run_format.empty())
            for (const auto& f : r.formats)
                if (f.name() != r.run_format)
                    return err(k, "path " + r.label + " runs with its own wire " + r.run_format + ", not format " + f.name() + " (leave formats out)");
    }
    // A declared path's budget with a wire of its own skipped the format checks above: its dist and N.
    for (size_t i = 0; i < cfg.budgets.size(); ++i) {
        const auto& b = cfg.budgets[i];
        if (b.label.empty()) continue;
        const std::string k = "budget[" + std::to_string(i) + "]";
        if (!runs_dist(cfg, b.dist)) return err(k, "dist " + b.dist + " is not in gate.distributions");
        if (b.ranks != 0 && std::find(cfg.ranks.begin(), cfg.ranks.end(), b.ranks) == cfg.ranks.end())
            return err(lines.at.count(k + ".ranks") ? k + ".ranks" : k,
                       "N = " + std::to_string(b.ranks) + " is not one the gate runs " + b.path_name() + " at");
    }
    return {};
}

Result<toml::table> parse_doc(const std::string& text, const std::string& source) { return detail::parse_toml(text, source); }

}  // namespace

const char* to_string(Metric m) {
    switch (m) {
        case Metric::kRelRmsError: return "rel_rms_error";
        case Metric::kMaxAbsError: return "max_abs_error";
        case Metric::kRmsError: return "rms_error";
        case Metric::kMaxErrorToAPosteriori: return "max_error_to_a_posteriori";
    }
    return "?";
}

Result<Metric> parse_metric(std::string_view name) {
    for (auto m : {Metric::kRelRmsError, Metric::kMaxAbsError, Metric::kRmsError, Metric::kMaxErrorToAPosteriori})
        if (name == to_string(m)) return m;
    return make_error(ErrorCode::kInvalidArgument, "unknown metric '" + std::string(name) +
                                                       "' (rel_rms_error, max_abs_error, rms_error, max_error_to_a_posteriori)");
}

double metric_of(const reports::GateRun& r, Metric m) {
    switch (m) {
        case Metric::kRelRmsError: return r.rel_rms_error;
        case Metric::kMaxAbsError: return r.max_abs_error;
        case Metric::kRmsError: return r.rms_error;
        case Metric::kMaxErrorToAPosteriori: return r.max_error_to_a_posteriori;
    }
    return NAN;
}

std::string Budget::format_name() const {
    return !run_format.empty() ? run_format : stages.empty() ? format.name() : stages_name(stages);
}

std::string stages_name(const std::vector<FormatSpec>& stages) {
    std::string s;
    for (const auto& f : stages) s += (s.empty() ? "" : ",") + f.name();
    return s;
}

Status validate(GateConfig& cfg) {
    const std::string src = cfg.source.empty() ? "gate config" : cfg.source;
    auto err = [&](const std::string& key, const std::string& what) {
        return make_error(ErrorCode::kInvalidArgument, src + ": " + key + ": " + what);
    };
    if (cfg.formats.empty()) return err("gate.formats", "is empty (it needs a single format; per-stage lists run beside them)");
    if (cfg.paths.empty() && cfg.declared.empty()) return err("gate.paths", "is empty");
    if (cfg.dists.empty()) return err("gate.distributions", "is empty");
    for (const auto* ns : {&cfg.ranks, &cfg.tree_ranks})
        for (int64_t n : *ns)
            if (n < 1) return err(ns == &cfg.ranks ? "gate.ranks" : "gate.tree_ranks", "N = " + std::to_string(n) + " is not a number of ranks (>= 1)");
    if (cfg.elements < 1 || cfg.elements > (int64_t{1} << 30))
        return err("gate.elements", "must be in 1..2^30, got " + std::to_string(cfg.elements));
    if (cfg.block < 1) return err("gate.block", "must be >= 1, got " + std::to_string(cfg.block));
    if (cfg.ranks_per_node < 0) return err("gate.ranks_per_node", "must be >= 0, got " + std::to_string(cfg.ranks_per_node));
    if (cfg.threads < 0) return err("gate.threads", "must be >= 0, got " + std::to_string(cfg.threads));
    if (!(cfg.baseline_margin >= 0)) return err("baseline.margin", "must be >= 0 (0.10: 10% worse allowed)");
    for (const auto& f : cfg.formats)
        if (auto st = f.check_block(cfg.block); !st) return err("gate.block", st.error().message);
    for (const auto& l : cfg.staged)
        for (const auto& f : l)
            if (auto st = f.check_block(cfg.block); !st) return err("gate.block", stages_name(l) + ": " + st.error().message);
    for (size_t i = 0; i < cfg.scaling.size(); ++i)
        if (!(cfg.scaling[i].min <= cfg.scaling[i].max))
            return err("scaling[" + std::to_string(i) + "]", "min " + std::to_string(cfg.scaling[i].min) + " is above max " +
                                                               std::to_string(cfg.scaling[i].max));
    Lines none;
    none.fallback = src;
    return validate_keys(Ctx{src}, cfg, none);
}

namespace {
// The user's [[scaling]] rules (when the file has any) must name what the gate runs, as budgets must:
// a rule on a path, format or distribution the gate never runs would check nothing, silently.
// The distinct N the gate runs `path` at (tree-rs at gate.tree_ranks, derived by validate_keys).
std::vector<int64_t> ns_of(const GateConfig& cfg, PathKind path) {
    std::vector<int64_t> ns = path == PathKind::kTreeRs ? cfg.tree_ranks : cfg.ranks;
    std::sort(ns.begin(), ns.end());
    ns.erase(std::unique(ns.begin(), ns.end()), ns.end());
    return ns;
}

Status check_user_scaling(const Ctx& user, const GateConfig& cfg, const Lines& lines) {
    for (size_t i = 0; i < cfg.scaling.size(); ++i) {
        const auto& r = cfg.scaling[i];
        const std::string k = "scaling[" + std::to_string(i) + "]";
        auto err = [&](const std::string& what) { return key_error(user, lines, k, what); };
        if (r.label.empty() && std::find(cfg.paths.begin(), cfg.paths.end(), r.path) == cfg.paths.end())
            return err(std::string("path ") + path_info(r.path).name + " is not in gate.paths");
        // An exponent is fitted over N: at one N the rule could only ever be skipped, and a gate of
        // skips passes (issue 46).
        if (const auto ns = r.label.empty() ? ns_of(cfg, r.path) : ns_of(cfg, PathKind::kRingRs); ns.size() < 2)  // a declared path: the gate's N
            return err("path " + r.path_name() + " runs at " + (ns.empty() ? "no N" : "one N (" + std::to_string(ns[0]) + ")") +
                       " in this gate: a scaling exponent is fitted over two or more; add an N to gate." +
                       (r.path == PathKind::kTreeRs ? "tree_ranks" : "ranks") + ", or remove the rule");
        for (const auto& f : r.formats)
            if (std::find(cfg.formats.begin(), cfg.formats.end(), f) == cfg.formats.end())
                return err("format " + f.name() + " is not in gate.formats");
        for (const auto& l : r.staged)
            if (!runs_stages(cfg, l)) return err("format " + stages_name(l) + " is not in gate.formats");
        for (auto d : r.dists)
            if (std::find(cfg.dists.begin(), cfg.dists.end(), d) == cfg.dists.end())
                return err(std::string("distribution ") + kernels::to_string(d) + " is not in gate.distributions");
    }
    return {};
}
}  // namespace

Result<GateConfig> parse_gate_config(const std::string& toml, const std::string& source, bool load_codec) {
    GateConfig cfg;
    Lines none, lines;
    const Ctx def{"default gate"}, user{source};
    auto d = parse_doc(default_gate_toml(), "default gate");
    if (!d) return d.error();
    if (auto st = apply(def, *d, cfg, none); !st) return st.error();
    bool u_has_scaling = false;
    if (source != "default") {
        auto u = parse_doc(toml, source);
        if (!u) return u.error();
        if (auto st = apply(user, *u, cfg, lines); !st) return st.error();
        cfg.source = source;
        cfg.block_given = static_cast<bool>(u->at_path("gate.block"));
        // gate.block left out, and the user's formats have a fixed block (nvfp4's 16, flashinfer-fp8's
        // 256): that block, where every listed format takes it, as simulate and quantize take the
        // format's own (D59's "block default", D66). Formats of different fixed blocks are still refused
        // (validate_keys), saying that the block was the default.
        if (!cfg.block_given && u->at_path("gate.formats")) {
            std::vector<FormatSpec> listed = cfg.formats;
            for (const auto& l : cfg.staged) listed.insert(listed.end(), l.begin(), l.end());
            // (a second, different fixed block refuses the first)
            const int64_t fixed = wire_block(listed, 0);
            if (fixed && std::all_of(listed.begin(), listed.end(), [&](const FormatSpec& f) { return f.check_block(fixed).ok(); }))
                cfg.block = fixed;
        }
        u_has_scaling = u->contains("scaling");
        // The default gate's formats, where the user's gate.block is one a fixed-block format (the MX
        // formats: 32) cannot take, are left out rather than refused: the user did not list them
        // (issue 52: a codec under test at block 64 was refused for mxfp8-e4m3). A format the user
        // lists is still checked against the block, and refused with its line.
        if (!u->at_path("gate.formats")) {
            auto wrong_block = [&](const FormatSpec& f) { return !f.check_block(cfg.block).ok(); };
            std::erase_if(cfg.formats, wrong_block);
            std::erase_if(cfg.staged, [&](const std::vector<FormatSpec>& l) { return std::any_of(l.begin(), l.end(), wrong_block); });
            if (!u_has_scaling) {
                // A rule that named only such formats has nothing left to apply to.
                std::erase_if(cfg.scaling, [&](ScalingRule& r) {
                    const bool named = !r.formats.empty();
                    std::erase_if(r.formats, wrong_block);
                    return named && r.formats.empty() && r.staged.empty();
                });
            }
        }
        // The default gate's rules on declared paths (NCCL's FP8 NVLS, FlashInfer's, DeepEP's, FSDP2's
        // float8) apply where the user's gate.paths names them too; elsewhere they have nothing to fit.
        if (!u_has_scaling)
            std::erase_if(cfg.scaling, [&](const ScalingRule& r) {
                return !r.label.empty() &&
                       std::none_of(cfg.declared.begin(), cfg.declared.end(), [&](const PathDecl& d) { return d.name == r.label; });
            });
        // The default gate's budgets bound what the default gate runs: where the user's gate runs
        // another path, format or distribution, they do not apply (and are no error of the user's).
        if (!u->contains("budget"))
            std::erase_if(cfg.budgets, [&](const Budget& b) {
                return std::find(cfg.paths.begin(), cfg.paths.end(), b.path) == cfg.paths.end() ||
                       std::find(cfg.formats.begin(), cfg.formats.end(), b.format) == cfg.formats.end() || !runs_dist(cfg, b.dist);
            });
    }
    if (auto st = validate_keys(user, cfg, lines); !st) return st.error();
    if (source != "default" && u_has_scaling)
        if (auto st = check_user_scaling(user, cfg, lines); !st) return st.error();
    // The default gate's rules where the user's gate runs a path at one N cannot fit there: they do
    // not apply (as its budgets do not), rather than stand as skips.
    if (source != "default" && !u_has_scaling)
        std::erase_if(cfg.scaling, [&](const ScalingRule& r) {
            return r.label.empty() ? ns_of(cfg, r.path).size() < 2 || std::find(cfg.paths.begin(), cfg.paths.end(), r.path) == cfg.paths.end()
                                   : cfg.ranks.size() < 2 ||
                                     std::find_if(cfg.declared.begin(), cfg.declared.end(), [&](const PathDecl& d) { return d.name == r.label; }) ==
                                         cfg.declared.end();
        });
    if (!load_codec) {
        cfg.codec_path.clear();
    } else if (!cfg.codec_path.empty()) {
        const std::string lib = cfg.codec_path;
        if (auto st = attach_codec(cfg, lib); !st) {
            auto it = lines.at.find("gate.codec");
            if (it == lines.at.end()) return st.error();
            return user.err(it->second, "gate.codec", st.error().message);
        }
    }
    return cfg;
}

Result<GateConfig> quick_tier(const GateConfig& full) {
    GateConfig q = full;
    q.long_codec_call = false;  // seconds of work: the default gate's
    auto two_smallest = [](std::vector<int64_t> v) {
        std::sort(v.begin(), v.end());
        v.erase(std::unique(v.begin(), v.end()), v.end());
        if (v.size() > 2) v.resize(2);
        return v;
    };
    q.ranks = two_smallest(full.ranks);
    q.tree_ranks = two_smallest(full.tree_ranks);
    q.tree_ranks_derived = false;
    int64_t l = 1;
    for (const auto* v : {&q.ranks, &q.tree_ranks})
        for (int64_t n : *v) l = std::lcm(l, n);
    q.elements = l * full.block;
    if (q.dists.size() > 2) q.dists.resize(2);
    // A budget on a distribution or an N the quick tier does not run has nothing to bound there.
    std::erase_if(q.budgets, [&](const Budget& b) {
        const auto& ns = b.path == PathKind::kTreeRs ? q.tree_ranks : q.ranks;
        return !runs_dist(q, b.dist) || (b.ranks != 0 && std::find(ns.begin(), ns.end(), b.ranks) == ns.end());
    });
    q.source = full.source + " (quick tier)";
    if (auto st = validate(q); !st) return make_error(st.error().code, "--quick: " + st.error().message);
    return q;
}

Status attach_codec(GateConfig& cfg, const std::string& path) {
    auto codec = kernels::PluginCodec::load(path);
    if (!codec) return codec.error();
    return attach_codec(cfg, *codec);
}

Status attach_codec(GateConfig& cfg, std::shared_ptr<const kernels::PluginCodec> codec) {
    if (!codec) return make_error(ErrorCode::kInvalidArgument, "attach_codec: no codec");
    const FormatSpec f = codec->format();
    const bool own_block = f.fixed_block() && !cfg.block_given && cfg.block != f.fixed_block();
    if (own_block) cfg.block = f.fixed_block();
    if (auto st = codec->check_block(cfg.block); !st) return st;
    cfg.formats = {f};
    cfg.staged.clear();  // a codec implements one format: no per-stage lists
    std::erase_if(cfg.budgets, [&](const Budget& b) { return !b.stages.empty() || !(b.format == f); });
    cfg.codec_path = codec->path();
    cfg.codec = std::move(codec);
    if (own_block) return validate(cfg);  // the checks that involve the block, again
    return Status::Ok();
}

Result<GateConfig> load_gate_config(const std::string& path, bool load_codec) {
    auto text = read_text_file(path, kMaxConfigBytes, "config file");
    if (!text) return text.error();
    return parse_gate_config(*text, path, load_codec);
}

}  // namespace qtransit::gate
