// Format declarations in TOML: parse (every key checked, every mistake named), print (the inverse),
// and the CLI's format arguments (names or .toml files), with the stochastic twins of --rounding.
#include "qtransit/common/decl_toml.hpp"

#include "qtransit/common/shortest.hpp"
#include "qtransit/common/text_file.hpp"
#include "toml_table.hpp"

#include <bit>
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <mutex>
#include <sstream>
#include <vector>

namespace qtransit {
namespace detail {

const char* type_name(const toml::node& n) {
    switch (n.type()) {
        case toml::node_type::string: return "a string";
        case toml::node_type::integer: return "an integer";
        case toml::node_type::floating_point: return "a float";
        case toml::node_type::boolean: return "a boolean";
        case toml::node_type::array: return "an array";
        case toml::node_type::table: return "a table";
        default: return "a date or time";
    }
}

Error TomlCtx::err(const toml::source_region& at, const std::string& key, const std::string& what) const {
    std::string where = source;
    if (at.begin.line > 0) where += ":" + std::to_string(at.begin.line) + ":" + std::to_string(at.begin.column);
    return make_error(ErrorCode::kInvalidArgument, where + ": " + printable(prefix + key) + ": " + printable(what, 2000));
}

Result<std::string> get_str(const TomlCtx& c, const toml::node& n, const std::string& key) {
    if (!n.is_string()) return c.err(n.source(), key, std::string("expected a string, got ") + type_name(n));
    return n.as_string()->get();
}

}  // namespace detail

using detail::get_str;
using detail::type_name;
using Ctx = detail::TomlCtx;

namespace {

std::string join(const std::vector<std::string>& v) {
    std::string s;
    for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
    return s;
}
Result<bool> get_bool(const Ctx& c, const toml::node& n, const std::string& key) {
    if (!n.is_boolean()) return c.err(n.source(), key, std::string("expected true or false, got ") + type_name(n));
    return n.as_boolean()->get();
}
// An integer in [lo, hi] (the range is part of the message).
Result<int32_t> get_int(const Ctx& c, const toml::node& n, const std::string& key, int64_t lo, int64_t hi) {
    if (!n.is_integer()) return c.err(n.source(), key, std::string("expected an integer, got ") + type_name(n));
    const int64_t v = n.as_integer()->get();
    if (v < lo || v > hi)
        return c.err(n.source(), key, "must be " + std::to_string(lo) + ".." + std::to_string(hi) + ", got " + std::to_string(v));
    return static_cast<int32_t>(v);
}

// One of `names` (the index of the match).
template <class E>
Result<E> get_enum(const Ctx& c, const toml::node& n, const std::string& key, const std::vector<std::pair<std::string, E>>& names) {
    auto s = get_str(c, n, key);
    if (!s) return s.error();
    std::vector<std::string> known;
    for (const auto& [name, e] : names) {
        if (name == *s) return e;
        known.push_back(name);
    }
    return c.err(n.source(), key, "unknown value '" + *s + "' (known: " + join(known) + ")");
}

const std::vector<std::pair<std::string, ScaleType>> kScales{{"fp32-absmax", ScaleType::kFp32Absmax},
                                                             {"fp16-absmax", ScaleType::kFp16Absmax},
                                                             {"e8m0-floor", ScaleType::kE8m0Floor},
                                                             {"e8m0-rceil", ScaleType::kE8m0Rceil},
                                                             {"e8m0-even", ScaleType::kE8m0Even},
                                                             {"e8m0-ceil", ScaleType::kE8m0Ceil},
                                                             {"e8m0-fbgemm-even", ScaleType::kE8m0FbgemmEven},
                                                             {"fp32-amax-mul", ScaleType::kFp32AmaxMul},
                                                             {"fp32-amax-mul-rcp", ScaleType::kFp32AmaxMulRcp},
                                                             {"fp32-amax-mul-inv", ScaleType::kFp32AmaxMulInv},
                                                             {"e8m0-rceil-mul", ScaleType::kE8m0RceilMul},
                                                             {"pow2-rceil-mul", ScaleType::kPow2RceilMul},
                                                             {"fp32-eps-mul", ScaleType::kFp32EpsMul},
                                                             {"e4m3-tensor-amax", ScaleType::kE4m3TensorAmax},
                                                             {"none", ScaleType::kNone}};
const std::vector<std::pair<std::string, bool>> kOffsets{{"none", false}, {"min", true}};
const std::vector<std::pair<std::string, bool>> kDecodes{{"mul-add", false}, {"fma", true}};
const std::vector<std::pair<std::string, Rounding>> kRoundings{{"nearest-even", Rounding::kNearestEven},
                                                               {"nearest-away", Rounding::kNearestAway},
                                                               {"nearest-down", Rounding::kNearestDown},
                                                               {"toward-zero", Rounding::kTowardZero},
                                                               {"stochastic", Rounding::kStochastic}};
const std::vector<std::pair<std::string, Packing>> kPackings{{"lsb-first", Packing::kLsbFirst}, {"msb-first", Packing::kMsbFirst}};
const std::vector<std::pair<std::string, Transform>> kTransforms{{"none", Transform::kNone}, {"hadamard", Transform::kHadamard}};
const std::vector<std::pair<std::string, bool>> kSigns{{"none", false}, {"random", true}};
const std::vector<std::pair<std::string, ElemType>> kElems{{"int", ElemType::kInt}, {"float", ElemType::kFloat}, {"table", ElemType::kTable}};
const std::vector<std::pair<std::string, FloatSpecial>> kSpecials{{"ieee", FloatSpecial::kIeee},
                                                                  {"nan-only", FloatSpecial::kNanOnly},
                                                                  {"none", FloatSpecial::kNone}};
const std::vector<std::pair<std::string, bool>> kRanges{{"restricted", false}, {"full", true}};

const std::vector<std::string> kTopKeys{"name", "like", "block", "tile", "scale", "amax_floor", "amax_eps", "tensor_amax", "offset", "decode", "rounding", "packing", "transform", "signs", "element",
                                        "conventions"};
const std::vector<std::string> kConventionKeys{"nonfinite", "scale_floor", "scale_subnormals", "divide_floor", "divide_floor_by",
                                               "zero_scale", "overflow", "element_subnormals", "decode_overflow", "zero_sign"};
const std::map<ElemType, std::vector<std::string>> kElemKeys{
    {ElemType::kInt, {"type", "bits", "signed", "range", "fraction_bits"}},
    {ElemType::kFloat, {"type", "exponent_bits", "mantissa_bits", "bias", "special"}},
    {ElemType::kTable, {"type", "values"}}};

bool valid_name(const std::string& s) {
    if (s.empty() || s.size() > 64 || !(s[0] >= 'a' && s[0] <= 'z')) return false;
    for (char ch : s)
        if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-' || ch == '.' || ch == '_')) return false;
    return !s.ends_with(".toml");
}

bool is_builtin_name(const std::string& s) {
    for (const auto& f : all_builtin_formats())
        if (f.name() == s) return true;
    return false;
}

// The key a finalize() message names ("element.bits: must be ..." -> "element.bits").
std::string key_of(const std::string& message) {
    const auto p = message.find(": ");
    return p == std::string::npos ? std::string() : message.substr(0, p);
}

Result<float> table_value(const Ctx& c, const toml::node& n, const std::string& key) {
    double v;
    if (n.is_integer()) v = static_cast<double>(n.as_integer()->get());
    else if (n.is_floating_point()) v = n.as_floating_point()->get();
    else return c.err(n.source(), key, std::string("expected a number, got ") + type_name(n));
    // Values round to the nearest binary32 (documented: values are binary32). FLT_MAX's shortest
    // spelling, 3.4028235e38, lies above FLT_MAX but below FLT_MAX + 2^103 (half its ulp), so it rounds
    // to FLT_MAX; at or past that midpoint a value rounds to infinity.
    constexpr double kTop = static_cast<double>(std::numeric_limits<float>::max()) + 0x1p103;
    if (!std::isfinite(v) || std::fabs(v) >= kTop)
        return c.err(n.source(), key, "is not a finite binary32 value (it rounds to infinity)");
    if (std::fabs(v) > static_cast<double>(std::numeric_limits<float>::max()))
        v = std::copysign(static_cast<double>(std::numeric_limits<float>::max()), v);
    const float f = static_cast<float>(v);
    if (v != 0 && f == 0) return c.err(n.source(), key, "underflows binary32 (rounds to 0)");
    return f;
}

// A positive binary32 value given as a TOML number ("2^-126" is written 1.1754944e-38).
Result<float> positive_value(const Ctx& c, const toml::node& n, const std::string& key) {
    auto v = table_value(c, n, key);
    if (!v) return v.error();
    if (!(*v > 0)) return c.err(n.source(), key, "must be positive, got " + shortest(*v));
    return *v;
}

// The [conventions] table (FORMATS.md section 10) into d.conventions.
Status read_conventions(const Ctx& c, const toml::node& node, Conventions& cv) {
    if (!node.is_table()) return c.err(node.source(), "conventions", std::string("expected a table ([conventions]), got ") + type_name(node));
    for (auto&& [k, node_v] : *node.as_table()) {
        const std::string s(k.str()), key = "conventions." + s;
        const toml::node& v = node_v;  // a plain reference: a lambda may not capture a structured binding (clang)
        auto pick = [&](const std::vector<std::pair<std::string, bool>>& names, bool& out) -> Status {
            auto b = get_enum(c, v, key, names);
            if (!b) return b.error();
            out = *b;
            return Status::Ok();
        };
        Status st;
        if (s == "nonfinite") {
            auto r = get_enum(c, v, key, std::vector<std::pair<std::string, NonfiniteRule>>{{"refuse", NonfiniteRule::kRefuse},
                                                                                            {"poison", NonfiniteRule::kPoison},
                                                                                            {"propagate", NonfiniteRule::kPropagate},
                                                                                            {"saturate", NonfiniteRule::kSaturate}});
            if (!r) return r.error();
            cv.nonfinite = *r;
        } else if (s == "scale_floor") {
            if (v.is_string()) {
                auto r = get_enum(c, v, key, std::vector<std::pair<std::string, ScaleFloorRule>>{{"format", ScaleFloorRule::kFormat},
                                                                                                 {"none", ScaleFloorRule::kNone}});
                if (!r) return r.error();
                cv.scale_floor = *r;
            } else {
                auto f = positive_value(c, v, key);
                if (!f) return f.error();
                cv.scale_floor = ScaleFloorRule::kValue;
                cv.scale_floor_value = *f;
            }
        } else if (s == "scale_subnormals") {
            st = pick({{"keep", false}, {"flush", true}}, cv.flush_scale_subnormals);
        } else if (s == "divide_floor") {
            auto f = positive_value(c, v, key);
            if (!f) return f.error();
            cv.divide_floor = *f;
        } else if (s == "divide_floor_by") {
            auto f = positive_value(c, v, key);
            if (!f) return f.error();
            cv.divide_floor_by = *f;
        } else if (s == "zero_scale") {
            st = pick({{"zeros", false}, {"ieee", true}}, cv.zero_scale_ieee);
        } else if (s == "overflow") {
            st = pick({{"saturate", false}, {"nonfinite", true}}, cv.overflow_nonfinite);
        } else if (s == "decode_overflow") {
            st = pick({{"saturate", false}, {"inf", true}}, cv.decode_overflow_inf);
        } else if (s == "element_subnormals") {
            st = pick({{"keep", false}, {"flush", true}}, cv.flush_element_subnormals);
        } else if (s == "zero_sign") {
            st = pick({{"format", false}, {"any", true}}, cv.zero_sign_any);
        } else {
            return c.err(k.source(), key, "unknown convention (known: " + join(kConventionKeys) + ")");
        }
        if (!st) return st;
    }
    return Status::Ok();
}

}  // namespace

namespace detail {

// finalize() and the declared format; a mistake finalize names is pointed at its key's line.
Result<FormatSpec> finalized(const Ctx& c, const toml::table& t, const toml::table* e, const toml::node* element,
                             const std::string& name, Decl& d) {
    if (auto st = finalize(d); !st) {
        const std::string key = key_of(st.error().message);
        const toml::node* at = nullptr;
        if (key.rfind("element.", 0) == 0 && e) at = e->get(key.substr(8));
        else if (key.rfind("conventions.", 0) == 0 && t.get("conventions") && t.get("conventions")->is_table())
            at = t.get("conventions")->as_table()->get(key.substr(12));
        else if (!key.empty()) at = t.get(key);
        if (!at && key.rfind("element", 0) == 0) at = element;
        if (!at && key.rfind("conventions", 0) == 0) at = t.get("conventions");
        if (!at && (key == "amax_floor" || key == "amax_eps")) at = t.get("scale");  // the floor it is missing is the scale's
        return c.err(at ? at->source() : t.source(), key.empty() ? "element" : key,
                     key.empty() ? st.error().message : st.error().message.substr(key.size() + 2));
    }
    return make_declared(name, d);
}

Result<FormatSpec> declaration_from_table(const toml::table& t, const std::string& source, const std::string& prefix) {
    const Ctx c{source, prefix};
    Decl d;
    std::string name;
    const toml::node* element = nullptr;
    // `like`: start from another format's declaration (a built-in, or one declared before), so that a
    // library's conventions are declared without restating the format; the other keys override it.
    bool liked = false, have_amax_floor = false, have_amax_eps = false, have_tensor_amax = false, have_tile = false, have_block = false;
    if (const toml::node* like = t.get("like")) {
        auto s = get_str(c, *like, "like");
        if (!s) return s.error();
        auto base = parse_format(*s);
        if (!base) return c.err(like->source(), "like", base.error().message);
        auto bd = declaration_of(*base);
        if (!bd) return c.err(like->source(), "like", bd.error().message);
        d = *bd;
        liked = true;
    }
    for (auto&& [k, v] : t) {
        const std::string key(k.str());
        if (key == "like") {
            continue;
        } else if (key == "conventions") {
            if (auto st = read_conventions(c, v, d.conventions); !st) return st.error();
        } else if (key == "name") {
            auto s = get_str(c, v, key);
            if (!s) return s.error();
            if (!valid_name(*s))
                return c.err(v.source(), key, "'" + *s + "' is not a format name: 1..64 characters, lowercase letters, digits, "
                                              "'-', '.' and '_', starting with a letter, not ending in .toml");
            if (is_builtin_name(*s))
                return c.err(v.source(), key, "'" + *s + "' is a built-in format; a declaration needs a name of its own");
            name = *s;
        } else if (key == "block") {
            auto b = get_int(c, v, key, 1, 1 << 20);
            if (!b) return b.error();
            d.fixed_block = *b;
            have_block = true;
        } else if (key == "tile") {
            const toml::array* a = v.as_array();
            if (!a || a->size() != 2)
                return c.err(v.source(), key, "expected [rows, cols], two positive integers (e.g. tile = [128, 128])");
            int32_t rc[2] = {0, 0};
            for (size_t i = 0; i < 2; ++i) {
                const auto* n = (*a)[i].as_integer();
                if (!n || n->get() < 1 || n->get() > (1 << 20))
                    return c.err(v.source(), key, "expected [rows, cols], two integers 1..2^20 (e.g. tile = [128, 128])");
                rc[i] = static_cast<int32_t>(n->get());
            }
            d.tile_rows = rc[0];
            d.tile_cols = rc[1];
            have_tile = true;
        } else if (key == "scale") {
            auto s = get_enum(c, v, key, kScales);
            if (!s) return s.error();
            d.scale = *s;
        } else if (key == "amax_floor") {
            auto f = table_value(c, v, key);
            if (!f) return f.error();
            d.amax_floor = *f;
            have_amax_floor = true;
        } else if (key == "amax_eps") {
            auto f = table_value(c, v, key);
            if (!f) return f.error();
            d.amax_eps = *f;
            have_amax_eps = true;
        } else if (key == "tensor_amax") {
            auto f = table_value(c, v, key);
            if (!f) return f.error();
            if (!(*f >= 0) || !std::isfinite(*f))
                return c.err(v.source(), key, "must be a finite number >= 0 (the amax of the tensor the blocks belong to)");
            d.tensor_amax = *f;
            have_tensor_amax = true;
        } else if (key == "offset") {
            auto s = get_enum(c, v, key, kOffsets);
            if (!s) return s.error();
            d.offset_min = *s;
        } else if (key == "decode") {
            auto s = get_enum(c, v, key, kDecodes);
            if (!s) return s.error();
            d.decode_fma = *s;
        } else if (key == "rounding") {
            auto s = get_enum(c, v, key, kRoundings);
            if (!s) return s.error();
            d.rounding = *s;
        } else if (key == "packing") {
            auto s = get_enum(c, v, key, kPackings);
            if (!s) return s.error();
            d.packing = *s;
        } else if (key == "transform") {
            auto s = get_enum(c, v, key, kTransforms);
            if (!s) return s.error();
            d.transform = *s;
        } else if (key == "signs") {
            auto s = get_enum(c, v, key, kSigns);
            if (!s) return s.error();
            d.random_signs = *s;
        } else if (key == "element") {
            if (!v.is_table()) return c.err(v.source(), key, std::string("expected a table ([element]), got ") + type_name(v));
            element = &v;
        } else {
            return c.err(k.source(), key, "unknown key (known: " + join(kTopKeys) + ")");
        }
    }
    if (name.empty()) return c.err(t.source(), "name", "is required (the format's name, e.g. name = \"my-fp6\")");
    // A liked format's floor goes with its scale: another scale that takes none drops it.
    if (liked && !have_amax_floor && !takes_amax_floor(d.scale)) d.amax_floor = 0;
    if (liked && !have_amax_eps && d.scale != ScaleType::kFp32EpsMul) d.amax_eps = 0;
    // A tile of its own sets the block (its area) unless a block is declared beside it (then they must agree);
    // a block of its own on a liked tiled format drops the tile.
    if (have_tile && !have_block) d.fixed_block = 0;
    if (liked && have_block && !have_tile) d.tile_rows = d.tile_cols = 0;
    // The liked tensor amax goes with its scale and element (its default is 448 A): another scale, or
    // an [element] of its own, takes the default again unless it declares one.
    if (liked && !have_tensor_amax && (element || d.scale != ScaleType::kE4m3TensorAmax)) d.tensor_amax = -1;
    if (!element && !liked) return c.err(t.source(), "element", "is required (an [element] table with its type, or like = \"<format>\")");
    if (!element) return finalized(c, t, nullptr, nullptr, name, d);
    // An [element] replaces the liked format's element whole.
    const Decl fresh;
    d.is_signed = fresh.is_signed;
    d.full_range = fresh.full_range;
    d.fraction_bits = fresh.fraction_bits;
    d.exp_bits = fresh.exp_bits;
    d.man_bits = fresh.man_bits;
    d.bias = fresh.bias;
    d.special = fresh.special;
    d.table_size = 0;

    const toml::table& e = *element->as_table();
    const toml::node* type = e.get("type");
    if (!type) return c.err(e.source(), "element.type", "is required (known: int, float, table)");
    auto et = get_enum(c, *type, "element.type", kElems);
    if (!et) return et.error();
    d.elem = *et;
    const auto& allowed = kElemKeys.at(d.elem);
    bool have_bits = false, have_e = false, have_m = false, have_bias = false, have_values = false;
    for (auto&& [k, v] : e) {
        const std::string s(k.str()), key = "element." + s;
        if (std::find(allowed.begin(), allowed.end(), s) == allowed.end()) {
            bool elsewhere = false;
            for (const auto& [other, keys] : kElemKeys)
                elsewhere = elsewhere || std::find(keys.begin(), keys.end(), s) != keys.end();
            return c.err(k.source(), key, std::string(elsewhere ? "does not belong to" : "unknown key for") +
                                              (d.elem == ElemType::kInt ? " an " : " a ") + to_string(d.elem) + " element (its keys: " + join(allowed) + ")");
        }
        if (s == "type") continue;
        if (s == "bits") {
            auto b = get_int(c, v, key, 2, 8);
            if (!b) return b.error();
            d.bits = *b;
            have_bits = true;
        } else if (s == "signed") {
            auto b = get_bool(c, v, key);
            if (!b) return b.error();
            d.is_signed = *b;
        } else if (s == "range") {
            auto r = get_enum(c, v, key, kRanges);
            if (!r) return r.error();
            d.full_range = *r;
        } else if (s == "fraction_bits") {
            auto f = get_int(c, v, key, 0, 16);
            if (!f) return f.error();
            d.fraction_bits = *f;
        } else if (s == "exponent_bits" || s == "mantissa_bits") {
            auto b = get_int(c, v, key, s == "exponent_bits" ? 1 : 0, 7);
            if (!b) return b.error();
            (s == "exponent_bits" ? d.exp_bits : d.man_bits) = *b;
            (s == "exponent_bits" ? have_e : have_m) = true;
        } else if (s == "bias") {
            auto b = get_int(c, v, key, -1000, 1000);
            if (!b) return b.error();
            d.bias = *b;
            have_bias = true;
        } else if (s == "special") {
            auto sp = get_enum(c, v, key, kSpecials);
            if (!sp) return sp.error();
            d.special = *sp;
        } else if (s == "values") {
            if (!v.is_array()) return c.err(v.source(), key, std::string("expected an array of numbers, got ") + type_name(v));
            const auto& a = *v.as_array();
            if (a.size() > static_cast<size_t>(kMaxTable))
                return c.err(v.source(), key, "has " + std::to_string(a.size()) + " values; at most " + std::to_string(kMaxTable));
            d.table_size = static_cast<int32_t>(a.size());
            for (size_t i = 0; i < a.size(); ++i) {
                auto x = table_value(c, a[i], key + "[" + std::to_string(i) + "]");
                if (!x) return x.error();
                d.table[i] = *x;
            }
            have_values = true;
        }
    }
    switch (d.elem) {
        case ElemType::kInt:
            if (!have_bits) return c.err(e.source(), "element.bits", "is required for an int element (2..8)");
            break;
        case ElemType::kFloat:
            if (!have_e) return c.err(e.source(), "element.exponent_bits", "is required for a float element");
            if (!have_m) return c.err(e.source(), "element.mantissa_bits", "is required for a float element");
            if (!have_bias) d.bias = (1 << (d.exp_bits - 1)) - 1;
            break;
        case ElemType::kTable:
            if (!have_values) return c.err(e.source(), "element.values", "is required for a table element");
            break;
    }
    return finalized(c, t, &e, element, name, d);
}
}  // namespace detail

namespace detail {

namespace {
// Exactly the code points for which toml++ 3.3's is_non_ascii_horizontal_whitespace (its generated
// table: 0x3FA-wide children from U+00A0, bit mask 0x7FFFFFFFFFFFF75E, children 5 and 7 handled by
// its switch) falls through to TOML_UNREACHABLE: children 0, 11 and 63 but U+00A0, U+3000, U+FEFF.
bool toml_cannot_read(uint32_t c) {
    if (c < 0xA0 || c > 0xFEFF) return false;
    const uint64_t child = (static_cast<uint64_t>(c) - 0xA0) / 0x3FA;
    if ((uint64_t{1} << child) & 0x7FFFFFFFFFFFF75Eull) return false;
    if (c == 0xA0 || c == 0x3000 || c == 0xFEFF) return false;
    return child != 5 && child != 7;
}
}  // namespace

Result<toml::table> parse_toml(const std::string& text, const std::string& source) {
    // toml++ 3.3's whitespace test reaches __builtin_unreachable for these code points, wherever its
    // parser happens to test one (found by decl_fuzz; the tokenizer tests characters inside values
    // too), so they are refused before it sees the text.
    int64_t line = 1, col = 0;
    for (size_t i = 0; i < text.size(); ++i) {
        const unsigned char c = static_cast<unsigned char>(text[i]);
        ++col;
        if (c == '\n') {
            ++line, col = 0;
            continue;
        }
        if (c < 0x80) continue;
        uint32_t cp = 0;
        size_t n = 0;
        if ((c & 0xE0) == 0xC0) cp = c & 0x1F, n = 1;
        else if ((c & 0xF0) == 0xE0) cp = c & 0x0F, n = 2;
        else if ((c & 0xF8) == 0xF0) cp = c & 0x07, n = 3;
        else continue;  // a stray continuation byte: toml++ reports invalid UTF-8
        for (size_t k = 1; k <= n && i + k < text.size(); ++k) cp = (cp << 6) | (static_cast<unsigned char>(text[i + k]) & 0x3F);
        if (toml_cannot_read(cp)) {
            char u[16];
            std::snprintf(u, sizeof u, "U+%04X", cp);
            return make_error(ErrorCode::kInvalidArgument,
                              source + ":" + std::to_string(line) + ":" + std::to_string(col) + ": the character " + u +
                                  " cannot be read safely by this build's TOML library (toml++ 3.3); in a string, write it as \\u" +
                                  std::string(u + 2));
        }
        i += n;
    }
    try {
        return toml::parse(text, source);
    } catch (const toml::parse_error& e) {
        // toml++ quotes the offending character raw, a newline included: escaped for one line.
        return make_error(ErrorCode::kInvalidArgument, source + ":" + std::to_string(e.source().begin.line) + ":" +
                                                           std::to_string(e.source().begin.column) + ": TOML syntax error: " +
                                                           printable(e.description(), 300));
    }
}

}  // namespace detail

Result<FormatSpec> parse_declaration(const std::string& text, const std::string& source) {
    auto t = detail::parse_toml(text, source);
    if (!t) return t.error();
    return detail::declaration_from_table(*t, source, "");
}

Result<FormatSpec> load_declaration(const std::string& path) {
    auto text = read_text_file(path, kMaxConfigBytes, "declaration file");
    if (!text) return text.error();
    return parse_declaration(*text, path);
}

namespace {

// shortest() as a TOML float: a zero keeps its sign and every value its ".", "e" or "E".
std::string toml_float(float v) {
    if (v == 0) return std::signbit(v) ? "-0.0" : "0.0";
    std::string s = shortest(v);
    // TOML: "1e+30" is a float, "3" an integer (both parse back to the same binary32); keep integers
    // as floats for readability.
    if (s.find_first_of(".eE") == std::string::npos) s += ".0";
    return s;
}

}  // namespace

Result<std::string> declaration_to_toml(const FormatSpec& f) {
    auto decl = declaration_of(f);
    if (!decl) return decl.error();
    const Decl& d = *decl;
    std::ostringstream o;
    std::string conventions_text;
    o << "# " << f.name() << ": a format declaration (docs/FORMATS.md section 8)\n";
    o << "name = \"" << f.name() << "\"\n";
    if (d.tiled()) o << "tile = [" << d.tile_rows << ", " << d.tile_cols << "]\n";
    else if (d.fixed_block) o << "block = " << d.fixed_block << "\n";
    o << "scale = \"" << to_string(d.scale) << "\"\n";
    if (d.amax_floor != 0) o << "amax_floor = " << toml_float(d.amax_floor) << "\n";
    if (d.amax_eps != 0) o << "amax_eps = " << toml_float(d.amax_eps) << "\n";
    if (d.scale == ScaleType::kE4m3TensorAmax) o << "tensor_amax = " << toml_float(d.tensor_amax) << "\n";
    o << "offset = \"" << (d.offset_min ? "min" : "none") << "\"\n";
    if (d.decode_fma) o << "decode = \"fma\"\n";
    o << "rounding = \"" << to_string(d.rounding) << "\"\n";
    o << "packing = \"" << to_string(d.packing) << "\"\n";
    if (d.rotated())
        o << "transform = \"" << to_string(d.transform) << "\"\nsigns = \"" << (d.random_signs ? "random" : "none") << "\"\n";
    const Conventions& cv = d.conventions;
    if (cv.declared()) {  // only what differs from the format's rules (section 10)
        std::ostringstream k;
        if (cv.nonfinite != NonfiniteRule::kRefuse)
            k << "nonfinite = \"" << to_string(cv.nonfinite) << "\"\n";
        if (cv.scale_floor == ScaleFloorRule::kNone) k << "scale_floor = \"none\"\n";
        if (cv.scale_floor == ScaleFloorRule::kValue) k << "scale_floor = " << toml_float(cv.scale_floor_value) << "\n";
        if (cv.flush_scale_subnormals) k << "scale_subnormals = \"flush\"\n";
        if (cv.divide_floor > 0) k << "divide_floor = " << toml_float(cv.divide_floor) << "\n";
        if (cv.divide_floor_by > 0) k << "divide_floor_by = " << toml_float(cv.divide_floor_by) << "\n";
        if (cv.zero_scale_ieee) k << "zero_scale = \"ieee\"\n";
        if (cv.overflow_nonfinite) k << "overflow = \"nonfinite\"\n";
        if (cv.flush_element_subnormals) k << "element_subnormals = \"flush\"\n";
        if (cv.decode_overflow_inf) k << "decode_overflow = \"inf\"\n";
        if (cv.zero_sign_any) k << "zero_sign = \"any\"\n";
        conventions_text = k.str();
    }
    o << "\n[element]\n";
    o << "type = \"" << to_string(d.elem) << "\"\n";
    switch (d.elem) {
        case ElemType::kInt:
            o << "bits = " << d.bits << "\nsigned = " << (d.is_signed ? "true" : "false") << "\n";
            if (d.is_signed) o << "range = \"" << (d.full_range ? "full" : "restricted") << "\"\n";
            o << "fraction_bits = " << d.fraction_bits << "\n";
            break;
        case ElemType::kFloat:
            o << "exponent_bits = " << d.exp_bits << "\nmantissa_bits = " << d.man_bits << "\nbias = " << d.bias
              << "\nspecial = \"" << to_string(d.special) << "\"\n";
            break;
        case ElemType::kTable:
            o << "values = [";
            for (int i = 0; i < d.table_size; ++i) o << (i % 4 == 0 ? "\n    " : " ") << toml_float(d.table[i]) << ",";
            o << "\n]\n";
            break;
    }
    if (!conventions_text.empty()) o << "\n[conventions]\n" << conventions_text;
    return o.str();
}

bool same_declaration(const Decl& a, const Decl& b) {
    if (a.elem != b.elem || a.scale != b.scale || a.offset_min != b.offset_min || a.rounding != b.rounding ||
        a.packing != b.packing || a.fixed_block != b.fixed_block || a.tile_rows != b.tile_rows || a.tile_cols != b.tile_cols ||
        a.bits != b.bits || a.transform != b.transform ||
        a.random_signs != b.random_signs || !(a.conventions == b.conventions) ||
        std::bit_cast<uint32_t>(a.amax_floor) != std::bit_cast<uint32_t>(b.amax_floor) ||
        std::bit_cast<uint32_t>(a.amax_eps) != std::bit_cast<uint32_t>(b.amax_eps) || a.decode_fma != b.decode_fma ||
        std::bit_cast<uint32_t>(a.tensor_amax) != std::bit_cast<uint32_t>(b.tensor_amax))
        return false;
    switch (a.elem) {
        case ElemType::kInt:
            return a.is_signed == b.is_signed && (!a.is_signed || a.full_range == b.full_range) && a.fraction_bits == b.fraction_bits;
        case ElemType::kFloat:
            return a.exp_bits == b.exp_bits && a.man_bits == b.man_bits && a.bias == b.bias && a.special == b.special;
        case ElemType::kTable:
            return a.table_size == b.table_size &&
                   std::memcmp(a.table, b.table, sizeof(float) * static_cast<size_t>(a.table_size)) == 0;
    }
    return false;
}

Status register_or_find(const FormatSpec& f) {
    static std::mutex mu;
    std::lock_guard lock(mu);
    if (auto known = parse_format(f.name()); known) {
        if (known->kind == FormatKind::kDecl && f.kind == FormatKind::kDecl && same_declaration(*known->decl, *f.decl))
            return Status::Ok();
        return make_error(ErrorCode::kInvalidArgument, "format '" + f.name() + "' is already defined by another declaration; "
                                                       "give this one another name");
    }
    return register_format(f);
}

Result<FormatSpec> resolve_format(std::string_view arg) {
    if (!is_declaration_file(arg)) return parse_format(arg);
    auto f = load_declaration(std::string(arg));
    if (!f) return f.error();
    if (auto st = register_or_find(*f); !st) return make_error(st.error().code, std::string(arg) + ": " + st.error().message);
    return *f;
}

Result<FormatSpec> stochastic_twin(const FormatSpec& f) {
    if (f.stochastic()) return f;
    const std::string supported =
        "--rounding stochastic needs a format with a stochastic twin: int2..int8 (int<b>-sr), fp8-e4m3, fp8-e5m2 "
        "(fp8-*-sr), or a declared int or float format (a .toml file; its twin is NAME-sr)";
    if (f.kind == FormatKind::kSym) return parse_format(f.name() + "-sr");
    if (f.kind != FormatKind::kDecl) return make_error(ErrorCode::kInvalidArgument, f.name() + " has no stochastic rounding: " + supported);
    if (is_builtin_name(f.name())) {
        if (auto twin = parse_format(f.name() + "-sr"); twin && twin->stochastic()) return *twin;
        return make_error(ErrorCode::kInvalidArgument, f.name() + " has no stochastic rounding: " + supported);
    }
    if (f.decl->elem == ElemType::kTable)
        return make_error(ErrorCode::kInvalidArgument, f.name() + " is a table format, which rounds to nearest only "
                                                       "(docs/FORMATS.md section 4): " + supported);
    Decl d = *f.decl;
    d.rounding = Rounding::kStochastic;
    if (auto st = finalize(d); !st) return make_error(ErrorCode::kInvalidArgument, f.name() + "-sr: " + st.error().message);
    FormatSpec twin = make_declared(f.name() + "-sr", d);
    if (auto st = register_or_find(twin); !st) return st.error();
    return twin;
}

Result<FormatSpec> apply_rounding(const FormatSpec& f, std::string_view rounding) {
    if (rounding == "nearest") return f;
    if (rounding == "stochastic") return stochastic_twin(f);
    return make_error(ErrorCode::kInvalidArgument, "unknown --rounding '" + std::string(rounding) + "' (known: nearest, stochastic)");
}

}  // namespace qtransit
