// Declared paths (docs/PATHS.md): the TOML grammar, its resolution to a modeled schedule, the
// built-in declarations and the registry --path reads.
#include "qtransit/common/path_decl.hpp"

#include <algorithm>
#include <cstdio>
#include <mutex>

#include "qtransit/common/decl_toml.hpp"
#include "qtransit/common/text_file.hpp"
#include "toml_table.hpp"

namespace qtransit {
namespace {

std::string join(const std::vector<std::string>& v, const char* sep = ", ") {
    std::string s;
    for (const auto& x : v) s += (s.empty() ? "" : sep) + x;
    return s;
}

// One schedule qtransit models, as a declaration sees it. `quantized`: its wire carries a format's
// codes (wire = a format or "any"); else values travel in the stored type. `types`: the (add, stored)
// pairs an unquantized schedule takes, each with its kind.
struct Shape {
    const char* collective;
    const char* exchange;
    bool quantized;
    const char* requantize;  // quantized: once | each-hop | each-stage | each-stage-except-owner; unquantized: ""
    std::vector<std::tuple<const char*, const char*, PathKind>> types;  // unquantized: (add, stored, kind)
    PathKind kind = PathKind::kRingRs;                                    // quantized
    // The one taken when `requantize` is left out and several are modeled (two-shot: each-stage,
    // as before the owner's variant was).
    bool preferred = false;
};

// One of kTypes' names (checked by get_one_of first) as its Accum.
Accum type_of(const std::string& s) {
    for (Accum a : {Accum::kFp32, Accum::kBf16, Accum::kFp16, Accum::kFp8E4m3, Accum::kFp8E5m2})
        if (s == to_string(a)) return a;
    return Accum::kFp32;
}

const std::vector<Shape>& shapes() {
    static const std::vector<Shape> s{
        {"reduce-scatter", "ring", true, "each-hop", {}, PathKind::kRingRs},
        {"reduce-scatter", "all-to-all", true, "once", {}, PathKind::kA2aRs},
        {"reduce-scatter", "all-to-all-hierarchical", true, "each-stage", {}, PathKind::kA2aHierRs},
        {"reduce-scatter", "recursive-halving", true, "each-hop", {}, PathKind::kTreeRs},
        {"all-reduce", "two-shot", true, "each-stage", {}, PathKind::kTwoShotAr, true},
        // FlashInfer's quantized_all_reduce (D46): the owner keeps its sum, the others decode its requantization.
        {"all-reduce", "two-shot", true, "each-stage-except-owner", {}, PathKind::kTwoShotArKeep},
        {"all-gather", "ring", true, "once", {}, PathKind::kRingAg},
        {"all-gather", "ring", true, "each-hop", {}, PathKind::kRingAgRequant},
        {"all-gather", "hpz", true, "once", {}, PathKind::kHpzAgFp},
        {"all-gather", "hpz", true, "each-stage", {}, PathKind::kHpzAgRequant},
        // A MoE dispatch (DeepEP): each token's codes go, once and unchanged, to the ranks of its
        // experts. Every copy a rank receives is decode(encode(x)) of its owner's block, as in ring-ag,
        // which runs it (every rank receives every token: a superset of a top-k routing, each copy the
        // same values and bounds).
        {"dispatch", "all-to-all", true, "once", {}, PathKind::kRingAg},
        // A MoE combine (DeepEP, D47): each token's expert outputs come back to its rank and are summed
        // there in binary32 over the top-k slots. fp32-ring-rs computes such a sum (with weights of 1,
        // every rank an expert of every token, the ring's order as the slots'): unquantized, binary32.
        {"combine", "all-to-all", false, "", {{"fp32", "fp32", PathKind::kFp32RingRs}}},
        {"reduce-scatter", "ring", false, "",
         {{"fp32", "fp32", PathKind::kFp32RingRs},
          {"bf16", "bf16", PathKind::kBf16RingRs},
          {"fp16", "fp16", PathKind::kFp16RingRs},
          {"fp16", "fp8-e4m3", PathKind::kFp8E4m3RingRs},
          {"fp16", "fp8-e5m2", PathKind::kFp8E5m2RingRs}}},
        {"all-reduce", "ring", false, "",
         {{"bf16", "bf16", PathKind::kBf16RingAr},
          {"fp16", "fp16", PathKind::kFp16RingAr},
          {"fp16", "fp8-e4m3", PathKind::kFp8E4m3RingAr},
          {"fp16", "fp8-e5m2", PathKind::kFp8E5m2RingAr}}},
        // NVLS (D49): every rank's value summed inside the NVLink switch (multimem.ld_reduce) in the
        // add type, the result stored to every rank. Modeled by the ring all-reduce of that type: the
        // same sum of N terms each rounded to the type, in the ring's order (the switch's is not
        // documented), the same bits on every rank. NCCL's FP8 over NVLS: binary16 inside the switch,
        // with the FP8 input and output types of the declaration.
        {"all-reduce", "nvls", false, "", {{"bf16", "bf16", PathKind::kBf16RingAr}, {"fp16", "fp16", PathKind::kFp16RingAr}}},
        {"all-reduce", "tree", false, "",
         {{"bf16", "bf16", PathKind::kBf16TreeAr},
          {"fp16", "fp16", PathKind::kFp16TreeAr},
          {"fp16", "fp8-e4m3", PathKind::kFp8E4m3TreeAr},
          {"fp16", "fp8-e5m2", PathKind::kFp8E5m2TreeAr}}},
    };
    return s;
}

const std::vector<std::string> kCollectives{"reduce-scatter", "all-reduce", "all-gather", "dispatch", "combine"};
const std::vector<std::string> kExchanges{"ring", "tree", "recursive-halving", "all-to-all", "all-to-all-hierarchical", "two-shot", "hpz", "nvls"};
const std::vector<std::string> kTypes{"fp32", "bf16", "fp16", "fp8-e4m3", "fp8-e5m2"};
const std::vector<std::string> kRequantize{"once", "each-hop", "each-stage", "each-stage-except-owner"};
const std::vector<std::string> kOutputs{"fp32", "bf16", "fp16", "fp8-e4m3", "fp8-e5m2"};
const std::vector<std::string> kKeys{"name",   "source",     "collective", "exchange", "wire",   "add",   "stored",
                                     "input",  "requantize", "divide",     "rotation", "scales", "output", "owner",
                                     "start"};

// "a reduce-scatter", "an all-reduce".
std::string a_(const std::string& collective) { return (collective.starts_with("all") ? "an " : "a ") + collective; }

// What a declaration names each schedule by, for the messages that list the choices.
std::string describe(const Shape& s) {
    if (s.quantized) return "exchange = \"" + std::string(s.exchange) + "\" with a wire format, requantize = \"" + s.requantize + "\"";
    std::vector<std::string> t;
    for (const auto& [add, stored, kind] : s.types) t.push_back(std::string(add) + "/" + stored);
    return "exchange = \"" + std::string(s.exchange) + "\" with wire = \"none\", add/stored " + join(t, ", ");
}

using Ctx = detail::TomlCtx;
using detail::get_str;

Result<std::string> get_one_of(const Ctx& c, const toml::node& n, const std::string& key, const std::vector<std::string>& known) {
    auto s = get_str(c, n, key);
    if (!s) return s.error();
    if (std::find(known.begin(), known.end(), *s) == known.end())
        return c.err(n.source(), key, "unknown value '" + *s + "' (known: " + join(known) + ")");
    return *s;
}

bool valid_name(const std::string& s) {
    if (s.empty() || s.size() > 64 || !(s[0] >= 'a' && s[0] <= 'z')) return false;
    for (char ch : s)
        if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-' || ch == '.' || ch == '_')) return false;
    return !s.ends_with(".toml") && s != "all";
}

// One [[path]] table, resolved.
Result<PathDecl> decl_from_table(const toml::table& t, const Ctx& c) {
    const toml::source_region& at = t.source();
    for (const auto& [k, v] : t)
        if (std::find(kKeys.begin(), kKeys.end(), std::string(k.str())) == kKeys.end())
            return c.err(v.source(), std::string(k.str()), "unknown key (known: " + join(kKeys) + ")");
    PathDecl d;
    auto req = [&](const char* key) -> const toml::node* { return t.get(key); };
    const toml::node* n = req("name");
    if (!n) return c.err(at, "name", "missing (the name --path gives it)");
    auto name = get_str(c, *n, "name");
    if (!name) return name.error();
    if (!valid_name(*name))
        return c.err(n->source(), "name", "'" + *name + "': 1-64 characters of a-z 0-9 - . _, starting with a letter (not 'all', not ending in .toml)");
    d.name = *name;
    if (const toml::node* s = req("source")) {
        auto v = get_str(c, *s, "source");
        if (!v) return v.error();
        d.source = *v;
    }
    for (const auto& [key, field, known] : {std::tuple{"collective", &d.collective, &kCollectives},
                                            std::tuple{"exchange", &d.exchange, &kExchanges}}) {
        const toml::node* v = req(key);
        if (!v) return c.err(at, key, std::string("missing (one of: ") + join(*known) + ")");
        auto s = get_one_of(c, *v, key, *known);
        if (!s) return s.error();
        *field = *s;
    }
    // wire: "none", "any", a format, or a list of formats (one per stage).
    const toml::node* w = req("wire");
    if (!w) return c.err(at, "wire", "missing: \"none\" (values travel unquantized), \"any\" (the run's --format), a format, or [stage1, stage2]");
    if (w->is_string()) {
        d.wire = {w->as_string()->get()};
    } else if (const toml::array* arr = w->as_array()) {
        for (const auto& e : *arr) {
            auto s = get_str(c, e, "wire");
            if (!s) return s.error();
            d.wire.push_back(*s);
        }
        if (d.wire.empty() || d.wire.size() > 2) return c.err(w->source(), "wire", "a list of one format per quantizing stage (1 or 2), got " + std::to_string(d.wire.size()));
    } else {
        return c.err(w->source(), "wire", std::string("expected a string or a list of strings, got ") + detail::type_name(*w));
    }
    const bool quantized = !d.wire_none();
    if (d.wire.size() > 1)
        for (const auto& f : d.wire)
            if (f == "none" || f == "any") return c.err(w->source(), "wire", "'" + f + "' stands alone, not in a list of stage formats");
    if (d.fixes_wire())
        for (const auto& f : d.wire)
            if (auto r = resolve_format(f); !r) return c.err(w->source(), "wire", r.error().message);
    for (const auto& [key, field] : {std::pair{"add", &d.add}, std::pair{"stored", &d.stored}}) {
        if (const toml::node* v = req(key)) {
            auto s = get_one_of(c, *v, key, kTypes);
            if (!s) return s.error();
            *field = *s;
        }
    }
    if (const toml::node* v = req("requantize")) {
        auto s = get_one_of(c, *v, "requantize", kRequantize);
        if (!s) return s.error();
        d.requantize = *s;
    }
    if (const toml::node* v = req("owner")) {  // D52: who keeps its sum on two-shot-ar-keep
        auto s = get_one_of(c, *v, "owner", {"chunk", "flashinfer-stripes"});
        if (!s) return s.error();
        d.owner = *s;
    }
    if (const toml::node* v = req("start")) {  // D57: where two-shot-ar's sum starts
        auto s = get_one_of(c, *v, "start", {"first", "zero"});
        if (!s) return s.error();
        d.start = *s;
    }
    d.scales = "per-block";
    if (const toml::node* v = req("scales")) {
        auto s = get_one_of(c, *v, "scales", {"per-block", "per-tensor"});
        if (!s) return s.error();
        d.scales = *s;
    }

    // The schedule: (collective, exchange, quantized) and then requantize or the types.
    std::vector<const Shape*> same;  // the schedules with this collective and exchange
    for (const auto& s : shapes())
        if (d.collective == s.collective && d.exchange == s.exchange) same.push_back(&s);
    auto choices = [&] {
        std::vector<std::string> v;
        for (const Shape* s : same) v.push_back(describe(*s));
        return v;
    };
    if (same.empty()) {
        std::vector<std::string> ex;
        for (const auto& s : shapes())
            if (d.collective == s.collective && std::find(ex.begin(), ex.end(), s.exchange) == ex.end()) ex.push_back(s.exchange);
        return c.err(req("exchange")->source(), "exchange",
                     a_(d.collective) + " over exchange = \"" + d.exchange + "\" is not a schedule qtransit models (for " + a_(d.collective) +
                         ": " + join(ex) + ")");
    }
    const Shape* pick = nullptr;
    if (quantized) {
        std::vector<const Shape*> q;
        for (const Shape* s : same)
            if (s->quantized) q.push_back(s);
        if (q.empty())
            return c.err(w->source(), "wire",
                         a_(d.collective) + " over exchange = \"" + d.exchange + "\" is modeled unquantized only (" + join(choices(), "; ") +
                             "): a wire format here has no schedule");
        if (d.requantize.empty()) {
            for (const Shape* s : q)
                if (s->preferred) pick = s;
            if (!pick && q.size() > 1) {
                std::vector<std::string> r;
                for (const Shape* s : q) r.push_back(s->requantize);
                return c.err(at, "requantize", "missing: " + a_(d.collective) + " over " + d.exchange + " is modeled with requantize = " + join(r, " or "));
            }
            if (!pick) pick = q[0];
            d.requantize = pick->requantize;
        } else {
            for (const Shape* s : q)
                if (d.requantize == s->requantize) pick = s;
            if (!pick) {
                std::vector<std::string> r;
                for (const Shape* s : q) r.push_back(s->requantize);
                return c.err(req("requantize")->source(), "requantize",
                             "\"" + d.requantize + "\": a quantized " + d.collective + " over " + d.exchange + " is modeled with requantize = " + join(r, " or "));
            }
        }
        d.kind = pick->kind;
        // The types: one add type, the partial sums stored in it (PathConfig::accum); a gather adds nothing.
        if (path_info(d.kind).shape == PathShape::kAllGather) {
            if (!d.add.empty() || !d.stored.empty())
                return c.err(req(d.add.empty() ? "stored" : "add")->source(), d.add.empty() ? "stored" : "add",
                             "an all-gather adds nothing: leave add and stored out");
        } else {
            if (!d.add.empty() && !d.stored.empty() && d.add != d.stored)
                return c.err(req("stored")->source(), "stored",
                             "a quantized path's partial sums are stored in the type they are added in (add = \"" + d.add + "\", stored = \"" + d.stored + "\")");
            const std::string& ty = d.add.empty() ? d.stored : d.add;
            if (ty.starts_with("fp8"))
                return c.err(req(d.add.empty() ? "stored" : "add")->source(), d.add.empty() ? "stored" : "add",
                             "FP8 sums with a quantized wire are not modeled: NCCL's FP8 paths carry FP8 values (wire = \"none\", add = \"fp16\", "
                             "stored = \"" + ty + "\")");
            if (!ty.empty()) {
                auto a = parse_accum(ty);
                if (!a) return a.error();
                d.accum = *a;
                d.add = d.stored = ty;
            }
        }
        const auto stages = format_stages(d.kind);
        if (d.wire.size() == 2 && stages.empty())
            return c.err(w->source(), "wire", std::string(path_info(d.kind).name) + " quantizes in one stage: give one format");
    } else {
        if (!d.requantize.empty())
            return c.err(req("requantize")->source(), "requantize", "nothing is quantized (wire = \"none\"): every add is rounded to `stored`; leave it out");
        for (const Shape* s : same)
            if (!s->quantized) pick = s;
        if (!pick)
            return c.err(w->source(), "wire",
                         a_(d.collective) + " over " + d.exchange + " is modeled with a wire format only (" + join(choices(), "; ") + ")");
        if (d.stored.empty()) return c.err(at, "stored", "missing: the type values travel and partial sums are kept in (wire = \"none\")");
        if (d.add.empty()) d.add = d.stored.starts_with("fp8") ? "fp16" : d.stored;
        bool found = false;
        for (const auto& [add, stored, kind] : pick->types)
            if (d.add == add && d.stored == stored) found = true, d.kind = kind;
        if (!found) {
            std::string why;
            if (d.stored.starts_with("fp8"))
                why = d.add == "fp32" ? " (an FP8 sum added in binary32, as NCCL's symmetric kernels do, is not modeled)"
                                      : " (NCCL adds FP8 values in binary16: add = \"fp16\")";
            else if (d.add != d.stored)
                why = " (an unquantized partial sum is stored in the type it is added in)";
            return c.err(req("stored")->source(), "stored",
                         "add = \"" + d.add + "\", stored = \"" + d.stored + "\" over " + d.exchange + ": not modeled" + why + "; modeled: " +
                             describe(*pick));
        }
        d.accum = path_info(d.kind).element;
    }
    if (const toml::node* v = req("divide")) {
        auto s = get_str(c, *v, "divide");
        if (!s) return s.error();
        auto div = parse_divide(*s);
        if (!div) return c.err(v->source(), "divide", div.error().message);
        d.divide = *div;
    }
    if (const toml::node* v = req("rotation")) {
        auto s = get_str(c, *v, "rotation");
        if (!s) return s.error();
        auto r = parse_rotation(*s);
        if (!r) return c.err(v->source(), "rotation", r.error().message);
        d.rotation = *r;
    }
    if (const toml::node* v = req("output")) {
        auto s = get_one_of(c, *v, "output", kOutputs);
        if (!s) return s.error();
        d.output = type_of(*s);
    }
    if (const toml::node* v = req("input")) {
        auto s = get_one_of(c, *v, "input", kOutputs);
        if (!s) return s.error();
        d.input = type_of(*s);
    }
    // What PathConfig's own rules say of the settings (divide on a gather, post with FP8, end-to-end
    // on a path that does not sum rotated values), on a configuration that satisfies the rest.
    PathConfig pc;
    pc.path = d.kind;
    pc.ranks = 8;
    pc.ranks_per_node = 8;
    pc.block = 32;
    pc.elements = 8 * 32;
    if (d.accum) pc.accum = *d.accum;
    apply_element_type(pc);
    if (d.divide) pc.divide = *d.divide;
    if (d.rotation) pc.rotation = *d.rotation;
    if (!d.owner.empty() && d.kind != PathKind::kTwoShotArKeep)
        return c.err(req("owner")->source(), "owner", "only a two-shot all-reduce whose owner keeps its sum (requantize = "
                                                      "\"each-stage-except-owner\") has an owner to choose");
    if (!d.start.empty() && d.kind != PathKind::kTwoShotAr)
        return c.err(req("start")->source(), "start", "only a two-shot all-reduce that requantizes each stage (two-shot-ar) "
                                                      "chooses where its sum starts: two-shot-ar-keep's starts from +0 (D46), "
                                                      "every other path's from its first term");
    apply_declared(d, pc);
    if (d.fixes_wire()) {
        auto f = resolve_format(d.wire[0]);
        if (!f) return f.error();
        pc.format = *f;
        if (d.wire.size() == 2) {
            auto g = resolve_format(d.wire[1]);
            if (!g) return g.error();
            pc.stage_formats = {*f, *g};
        }
        // A block every stage's format takes (a fixed-block format's own; else 32, or the first
        // power of two a format accepts).
        pc.block = f->fixed_block() > 0 ? f->fixed_block() : 32;
        for (int64_t b = pc.block; b <= 4096; b *= 2)
            if (f->check_block(b) && (pc.stage_formats.empty() || pc.stage_formats[1].check_block(b))) {
                pc.block = b;
                break;
            }
        pc.elements = 8 * pc.block;
    } else if (quantized && pc.rotation == Rotation::kEndToEnd) {
        pc.format = FormatSpec{};  // checked against the run's format when it runs
        pc.rotation = Rotation::kEachHop;
    }
    if (pc.tensor_scale && !d.fixes_wire()) {  // the run's format is checked when it runs; the schedule now
        if (!quantized) return c.err(req("scales")->source(), "scales", "\"per-tensor\" scales a quantized wire; this path has none");
        auto f = resolve_format("flashinfer-fp8");  // a format that takes a tensor's scale, standing in for the run's
        if (!f) return f.error();
        pc.format = *f;
        pc.block = f->fixed_block();
        pc.elements = 8 * pc.block;
    }
    if (auto st = validate(pc); !st) {
        const std::string& m = st.error().message;
        const char* key = m.starts_with("output ")                  ? "output"
                          : m.starts_with("scales ")                  ? "scales"
                          : m.starts_with("owner ")                   ? "owner"
                          : m.starts_with("input ")                   ? "input"
                          : m.find("--divide") != std::string::npos   ? "divide"
                          : m.find("--rotation") != std::string::npos ? "rotation"
                                                                      : "wire";
        const toml::node* kn = req(key);
        return c.err(kn ? kn->source() : at, key, m);
    }
    return d;
}

// The built-in declarations' text: one per built-in path, then the declaration-only variants.
std::string builtin_text() {
    struct B {
        const char* name;
        const char* body;
    };
    static const B kBuiltins[] = {
        {"ring-rs", "collective = \"reduce-scatter\"\nexchange = \"ring\"\nwire = \"any\"\nrequantize = \"each-hop\"\n"
                    "source = \"DeepSpeed ZeRO's ring reduce-scatter with a quantized wire (NUMERICS.md section 3)\"\n"},
        {"a2a-rs", "collective = \"reduce-scatter\"\nexchange = \"all-to-all\"\nwire = \"any\"\nrequantize = \"once\"\n"
                   "source = \"ZeRO++ qgZ, one hop (NUMERICS.md section 3)\"\n"},
        {"a2a-hier-rs", "collective = \"reduce-scatter\"\nexchange = \"all-to-all-hierarchical\"\nwire = \"any\"\nrequantize = \"each-stage\"\n"
                        "source = \"ZeRO++ qgZ, intra-node then inter-node all-to-all (NUMERICS.md section 3)\"\n"},
        {"tree-rs", "collective = \"reduce-scatter\"\nexchange = \"recursive-halving\"\nwire = \"any\"\nrequantize = \"each-hop\"\n"
                    "source = \"recursive halving, N a power of two (NUMERICS.md section 3)\"\n"},
        {"two-shot-ar", "collective = \"all-reduce\"\nexchange = \"two-shot\"\nwire = \"any\"\nrequantize = \"each-stage\"\n"
                        "source = \"a2a-rs, then an all-gather quantized once (NUMERICS.md section 3)\"\n"},
        {"two-shot-ar-keep", "collective = \"all-reduce\"\nexchange = \"two-shot\"\nwire = \"any\"\nrequantize = \"each-stage-except-owner\"\n"
                             "source = \"two-shot-ar whose owner keeps its sum unrequantized, as FlashInfer's quantized_all_reduce (D46)\"\n"},
        {"ring-ag", "collective = \"all-gather\"\nexchange = \"ring\"\nwire = \"any\"\nrequantize = \"once\"\n"
                    "source = \"ZeRO++ qwZ: codes travel unchanged (NUMERICS.md section 3)\"\n"},
        {"ring-ag-requant", "collective = \"all-gather\"\nexchange = \"ring\"\nwire = \"any\"\nrequantize = \"each-hop\"\n"
                            "source = \"a naive ring all-gather that decodes and re-encodes at every hop (NUMERICS.md section 3)\"\n"},
        {"hpz-ag-fp", "collective = \"all-gather\"\nexchange = \"hpz\"\nwire = \"any\"\nrequantize = \"once\"\n"
                      "source = \"ZeRO++ hpZ: the secondary shard kept unquantized (NUMERICS.md section 3)\"\n"},
        {"hpz-ag-requant", "collective = \"all-gather\"\nexchange = \"hpz\"\nwire = \"any\"\nrequantize = \"each-stage\"\n"
                           "source = \"ZeRO++ hpZ: the secondary shard re-encoded (NUMERICS.md section 3)\"\n"},
        {"fp32-ring-rs", "collective = \"reduce-scatter\"\nexchange = \"ring\"\nwire = \"none\"\nadd = \"fp32\"\nstored = \"fp32\"\n"
                         "source = \"an unquantized binary32 ring reduce-scatter\"\n"},
        {"bf16-ring-rs", "collective = \"reduce-scatter\"\nexchange = \"ring\"\nwire = \"none\"\nadd = \"bf16\"\nstored = \"bf16\"\n"
                         "source = \"NCCL ring reduce-scatter in bfloat16 (docs/DECISIONS.md D26)\"\n"},
        {"fp16-ring-rs", "collective = \"reduce-scatter\"\nexchange = \"ring\"\nwire = \"none\"\nadd = \"fp16\"\nstored = \"fp16\"\n"
                         "source = \"NCCL ring reduce-scatter in binary16 (D26)\"\n"},
        {"bf16-ring-ar", "collective = \"all-reduce\"\nexchange = \"ring\"\nwire = \"none\"\nadd = \"bf16\"\nstored = \"bf16\"\n"
                         "source = \"NCCL ring all-reduce in bfloat16 (D26)\"\n"},
        {"fp16-ring-ar", "collective = \"all-reduce\"\nexchange = \"ring\"\nwire = \"none\"\nadd = \"fp16\"\nstored = \"fp16\"\n"
                         "source = \"NCCL ring all-reduce in binary16 (D26)\"\n"},
        {"bf16-tree-ar", "collective = \"all-reduce\"\nexchange = \"tree\"\nwire = \"none\"\nadd = \"bf16\"\nstored = \"bf16\"\n"
                         "source = \"NCCL tree all-reduce in bfloat16 (D26)\"\n"},
        {"fp16-tree-ar", "collective = \"all-reduce\"\nexchange = \"tree\"\nwire = \"none\"\nadd = \"fp16\"\nstored = \"fp16\"\n"
                         "source = \"NCCL tree all-reduce in binary16 (D26)\"\n"},
    };
    std::string t;
    for (const auto& b : kBuiltins) t += "[[path]]\nname = \"" + std::string(b.name) + "\"\n" + b.body + "\n";
    // NCCL's FP8 reductions (D41; NVIDIA/nccl 5067397c, docs/SOURCES.md section 1), with and without ncclAvg.
    for (const char* ty : {"e4m3", "e5m2"})
        for (const auto& [sched, coll, ex] : {std::tuple{"ring-rs", "reduce-scatter", "ring"}, std::tuple{"ring-ar", "all-reduce", "ring"},
                                              std::tuple{"tree-ar", "all-reduce", "tree"}})
            for (bool avg : {false, true}) {
                const std::string name = std::string("nccl-fp8-") + ty + "-" + sched + (avg ? "-avg" : "");
                t += "[[path]]\nname = \"" + name + "\"\ncollective = \"" + coll + "\"\nexchange = \"" + ex +
                     "\"\nwire = \"none\"\nadd = \"fp16\"\nstored = \"fp8-" + ty + "\"\n" + (avg ? "divide = \"pre\"\n" : "") +
                     "source = \"NCCL >= 2.24 ncclFloat8" + ty + (avg ? ", ncclAvg (the inputs times fl8(1/N) in binary16)" : "") +
                     ": __hadd in binary16, stored back with __NV_SATFINITE (src/device/reduce_kernel.h, NVIDIA/nccl 5067397c)\"\n\n";
            }
    // NCCL's FP8 over NVLS (D49; docs/SOURCES.md section 1): the symmetric kernels (NCCL >= 2.27.3, compute
    // capability >= 10.0) sum FP8 with multimem.ld_reduce...acc::f16 in binary16 inside the switch and
    // round once to FP8. Not on Hopper: NCCL has no FP8 NVLS for sm_90. ncclAvg there is not modeled.
    for (const char* ty : {"e4m3", "e5m2"})
        t += std::string("[[path]]\nname = \"nccl-fp8-") + ty + "-nvls-ar\"\ncollective = \"all-reduce\"\nexchange = \"nvls\"\n"
             "wire = \"none\"\nadd = \"fp16\"\nstored = \"fp16\"\ninput = \"fp8-" + ty + "\"\noutput = \"fp8-" + ty + "\"\n"
             "source = \"NCCL >= 2.27.3 symmetric kernels, compute capability >= 10.0, ncclFloat8" + ty + " over NVLS: "
             "multimem.ld_reduce.add.acc::f16 sums in binary16 in the switch, one rounding to FP8 (src/device/reduce_kernel.h 1121-1124 "
             "and 1291-1297, src/sym_kernels.cc 557-561, NVIDIA/nccl 5067397c); the switch's order modeled as the ring's\"\n\n";
    // DeepEP's low-latency dispatch (deepseek-ai/DeepEP dd758ca, csrc/kernels/legacy/internode_ll.cu 212-247; docs/SOURCES.md
    // section 3): bf16 tokens cast once to E4M3 per 128 values, without and with round_scale.
    for (const auto& [suffix, wire, what] : {std::tuple{"", "fp8-e4m3-1x128", "binary32 scales amax fl32(1/448)"},
                                             std::tuple{"-pow2", "fp8-e4m3-1x128-pow2", "round_scale: power-of-two binary32 scales"},
                                             std::tuple{"-ue8m0", "fp8-e4m3-1x128-ue8m0", "round_scale and use_ue8m0: UE8M0 scales"}})
        t += std::string("[[path]]\nname = \"deepep-fp8-dispatch") + suffix + "\"\ncollective = \"dispatch\"\nexchange = \"all-to-all\"\nwire = \"" +
             wire + "\"\nrequantize = \"once\"\nsource = \"DeepEP low-latency dispatch, " + what +
             ", one quantization, blocks of 128 (csrc/kernels/legacy/internode_ll.cu, deepseek-ai/DeepEP dd758ca)\"\n\n";
    // DeepEP's low-latency combine (deepseek-ai/DeepEP dd758ca, csrc/kernels/legacy/internode_ll.cu 1073-1125; docs/SOURCES.md
    // section 3, D47): bf16 expert outputs, a binary32 sum over the top-k slots, one rounding to bf16.
    t += "[[path]]\nname = \"deepep-bf16-combine\"\ncollective = \"combine\"\nexchange = \"all-to-all\"\nwire = \"none\"\n"
         "add = \"fp32\"\nstored = \"fp32\"\ninput = \"bf16\"\noutput = \"bf16\"\n"
         "source = \"DeepEP low-latency combine (csrc/kernels/legacy/internode_ll.cu 1073-1125, deepseek-ai/DeepEP dd758ca): bf16 "
         "expert outputs summed in binary32, rounded to bf16 once; top-k weights of 1, the slots in the ring's order\"\n\n";
    // FSDP2's float8 all-gather with torchao (pytorch/ao torchao/float8/fsdp_utils.py 0a4b91d4,
    // float8_utils.py 00141f40, float8_tensor.py 0a45ccd1; D50): each rank casts its shard of the
    // weight to E4M3 with one scale, 448 / the all-reduced amax, and the codes are gathered as they are.
    t += "[[path]]\nname = \"fsdp-float8-ag\"\ncollective = \"all-gather\"\nexchange = \"ring\"\nwire = \"torchao-fp8-e4m3\"\n"
         "requantize = \"once\"\nscales = \"per-tensor\"\n"
         "source = \"FSDP2 with torchao float8 all-gather (WeightWithDynamicFloat8CastTensor.fsdp_pre_all_gather, torchao/float8/fsdp_utils.py "
         "0a4b91d4; amax_to_scale, float8_utils.py 00141f40): one E4M3 scale per tensor, 448 / max(all-reduced amax, 1e-12)\"\n\n";
    // Transformer Engine's NVFP4 all-gather (NVIDIA/TransformerEngine d0067d0,
    // transformer_engine/pytorch/distributed.py _all_gather_nvfp4 L1332-1470; the amax all-reduce with MAX,
    // csrc/quantizer.cpp NVFP4Quantizer::quantize_impl L2508-2537; D58): each rank quantizes its shard
    // under the all-reduced amax, and the codes and the E4M3 block scales are gathered as they are.
    t += "[[path]]\nname = \"te-nvfp4-ag\"\ncollective = \"all-gather\"\nexchange = \"ring\"\nwire = \"nvfp4\"\n"
         "requantize = \"once\"\nscales = \"per-tensor\"\n"
         "source = \"Transformer Engine NVFP4 all-gather (_all_gather_nvfp4, transformer_engine/pytorch/distributed.py d0067d0; amax "
         "all-reduced with MAX in NVFP4Quantizer::quantize_impl): codes and E4M3 block scales gathered, one tensor amax\"\n\n";
    // FlashInfer's FP8 all-reduce (flashinfer-ai/flashinfer fb28d72, quantized_all_reduce's
    // _fp8_blockscale_2shot_kernel; docs/SOURCES.md section 4.1a, D46): bf16 in and out, E4M3 per 256
    // values, the sum in binary32 in rank order; the owner's stripe is not requantized.
    t += "[[path]]\nname = \"flashinfer-fp8-2shot\"\ncollective = \"all-reduce\"\nexchange = \"two-shot\"\nwire = \"flashinfer-fp8\"\n"
         "requantize = \"each-stage-except-owner\"\nadd = \"fp32\"\ninput = \"bf16\"\noutput = \"bf16\"\nowner = \"flashinfer-stripes\"\n"
         "source = \"FlashInfer quantized_all_reduce (_fp8_blockscale_2shot_kernel, flashinfer-ai/flashinfer fb28d72): the owner keeps "
         "its binary32 sum, the others decode its requantization, outputs in bf16; blocks of 256; stripes of 4096 (16384 past 2^25)\"\n\n";
    // QuickReduce's quantized two-shot all-reduce (vLLM's and SGLang's quick all-reduce on ROCm;
    // docs/SOURCES.md section 2, D57): every rank quantizes every segment (its own too), the owner
    // decodes and sums them in binary16 in rank order from +0, requantizes the sum, and every rank
    // (the owner too) decodes it; binary16 in and out (bf16 cast to fp16: vLLM's default).
    for (int b : {4, 6, 8}) {
        const std::string n = std::to_string(b);
        t += "[[path]]\nname = \"quickreduce-int" + n + "\"\ncollective = \"all-reduce\"\nexchange = \"two-shot\"\nwire = \"quickreduce-q" + n +
             "\"\nrequantize = \"each-stage\"\nadd = \"fp16\"\nstored = \"fp16\"\ninput = \"fp16\"\noutput = \"fp16\"\nstart = \"zero\"\n"
             "source = \"QuickReduce AllReduceTwoshot with CodecQ" + n + ", fp16 (vllm-project/vllm csrc/quickreduce/quick_reduce_impl.cuh "
             "0bf6342): every segment quantized, the owner's fp16 sum from +0 in rank order requantized and decoded by every rank; "
             "groups of 32 (QuickReduce's interleave is a permutation); its FP16_OVFL saturation of the sum not modeled\"\n\n";
    }
    return t;
}

struct Registry {
    std::mutex mu;
    std::vector<PathDecl> user;
};
Registry& registry() {
    static Registry r;
    return r;
}

bool same_decl(const PathDecl& a, const PathDecl& b) {
    return a.name == b.name && a.kind == b.kind && a.accum == b.accum && a.divide == b.divide && a.rotation == b.rotation && a.wire == b.wire &&
           a.output == b.output && a.input == b.input && a.scales == b.scales && a.owner == b.owner && a.start == b.start;
}

}  // namespace

Result<std::vector<PathDecl>> parse_path_decls(const std::string& text, const std::string& source) {
    auto t = detail::parse_toml(text, source);
    if (!t) return t.error();
    Ctx top{source, ""};
    for (const auto& [k, v] : *t)
        if (k.str() != "path")
            return top.err(v.source(), std::string(k.str()), "unknown key: a path declaration file holds [[path]] tables only");
    const toml::node* p = t->get("path");
    if (!p) return make_error(ErrorCode::kInvalidArgument, source + ": no [[path]] table (docs/PATHS.md)");
    const toml::array* arr = p->as_array();
    if (!arr || !arr->is_array_of_tables())
        return top.err(p->source(), "path", "expected [[path]] tables (an array of tables)");
    std::vector<PathDecl> out;
    for (size_t i = 0; i < arr->size(); ++i) {
        Ctx c{source, "path[" + std::to_string(i) + "]."};
        const toml::table& tb = *arr->get(i)->as_table();
        auto d = decl_from_table(tb, c);
        if (!d) return d.error();
        for (const auto& e : out)
            if (e.name == d->name) return c.err(tb.get("name")->source(), "name", "'" + d->name + "' is declared twice in this file");
        out.push_back(std::move(*d));
    }
    return out;
}

Result<std::vector<PathDecl>> load_path_decls(const std::string& file) {
    auto text = read_text_file(file, kMaxConfigBytes, "path declaration file");
    if (!text) return text.error();
    return parse_path_decls(*text, file);
}

std::string path_decl_to_toml(const PathDecl& d) {
    // A TOML basic string: quotes and backslashes escaped, and every control character (a source may
    // hold a tab or a carriage return, written as \t or \r) as \uXXXX, which TOML takes raw nowhere.
    auto q = [](const std::string& s) {
        std::string o = "\"";
        for (char ch : s) {
            const unsigned char u = static_cast<unsigned char>(ch);
            if (ch == '"' || ch == '\\') {
                o += '\\';
                o += ch;
            } else if (u < 0x20 || u == 0x7f) {
                char buf[8];
                std::snprintf(buf, sizeof buf, "\\u%04X", u);
                o += buf;
            } else {
                o += ch;
            }
        }
        return o + "\"";
    };
    std::string t = "[[path]]\nname = " + q(d.name) + "\n";
    if (!d.source.empty()) t += "source = " + q(d.source) + "\n";
    t += "collective = " + q(d.collective) + "\nexchange = " + q(d.exchange) + "\n";
    if (d.wire.size() == 1) t += "wire = " + q(d.wire[0]) + "\n";
    else t += "wire = [" + q(d.wire[0]) + ", " + q(d.wire[1]) + "]\n";
    if (!d.requantize.empty()) t += "requantize = " + q(d.requantize) + "\n";
    if (!d.add.empty()) t += "add = " + q(d.add) + "\n";
    if (!d.stored.empty()) t += "stored = " + q(d.stored) + "\n";
    if (d.divide) t += "divide = " + q(to_string(*d.divide)) + "\n";
    if (d.rotation) t += "rotation = " + q(to_string(*d.rotation)) + "\n";
    if (d.input) t += "input = " + q(to_string(*d.input)) + "\n";
    if (d.output) t += "output = " + q(to_string(*d.output)) + "\n";
    if (d.per_tensor()) t += "scales = " + q(d.scales) + "\n";
    if (!d.owner.empty()) t += "owner = " + q(d.owner) + "\n";
    if (!d.start.empty()) t += "start = " + q(d.start) + "\n";
    return t;
}

void apply_declared(const PathDecl& d, PathConfig& c) {
    if (d.output) c.output = *d.output;
    if (d.input) c.input = *d.input;
    c.tensor_scale = d.per_tensor();
    c.flashinfer_stripes = d.flashinfer_stripes();
    c.sum_from_zero = d.start == "zero";
}

const std::vector<PathDecl>& builtin_path_decls() {
    static const std::vector<PathDecl> b = [] {
        auto r = parse_path_decls(builtin_text(), "<built-in paths>");
        // The text is ours; a mistake in it is a bug that every test of paths catches.
        return r ? std::move(*r) : std::vector<PathDecl>{};
    }();
    return b;
}

std::string known_path_decl_names() {
    std::vector<std::string> v;
    for (const auto& d : builtin_path_decls()) v.push_back(d.name);
    std::lock_guard lock(registry().mu);
    for (const auto& d : registry().user) v.push_back(d.name);
    return join(v);
}

Result<PathDecl> find_path_decl(std::string_view name) {
    for (const auto& d : builtin_path_decls())
        if (d.name == name) return d;
    {
        std::lock_guard lock(registry().mu);
        for (const auto& d : registry().user)
            if (d.name == name) return d;
    }
    return make_error(ErrorCode::kInvalidArgument, "unknown path '" + printable(name) + "' (known: " + known_path_decl_names() +
                                                       "; or a declaration FILE.toml, docs/PATHS.md)");
}

Status register_path_decl(const PathDecl& d) {
    for (const auto& b : builtin_path_decls())
        if (b.name == d.name) {
            if (same_decl(b, d)) return Status::Ok();
            return make_error(ErrorCode::kInvalidArgument, "path '" + d.name + "' is a built-in path; give the declaration another name");
        }
    std::lock_guard lock(registry().mu);
    for (const auto& u : registry().user)
        if (u.name == d.name) {
            if (same_decl(u, d)) return Status::Ok();
            return make_error(ErrorCode::kInvalidArgument, "path '" + d.name + "' is already declared differently; give this one another name");
        }
    registry().user.push_back(d);
    return Status::Ok();
}

Result<std::vector<PathDecl>> resolve_path_arg(std::string_view arg) {
    if (!(arg.size() > 5 && arg.ends_with(".toml"))) {
        auto d = find_path_decl(arg);
        if (!d) return d.error();
        return std::vector<PathDecl>{*d};
    }
    auto v = load_path_decls(std::string(arg));
    if (!v) return v.error();
    for (const auto& d : *v)
        if (auto st = register_path_decl(d); !st) return make_error(st.error().code, std::string(arg) + ": " + st.error().message);
    return v;
}

}  // namespace qtransit
