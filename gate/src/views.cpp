// The commands' JSON objects and report models (views.hpp), shared by the CLI and the Python module.
#include "qtransit/gate/views.hpp"

#include <cstdio>

#include "qtransit/common/decl_toml.hpp"
#include "qtransit/common/shortest.hpp"
#include "qtransit/gate/gate.hpp"
#include "qtransit/kernels/codec.hpp"
#include "qtransit/version.hpp"

namespace qtransit::gate {
namespace {

// The element type in a few characters: "int s", "int u", "int s f6", "e4m3", "table 16".
std::string element_of(const FormatSpec& f) {
    if (f.kind == FormatKind::kDs) return "int s (fp16)";
    if (f.kind == FormatKind::kQr) return "int u (fp16)";
    auto d = declaration_of(f);
    if (!d) return "?";
    switch (d->elem) {
        case ElemType::kInt:
            return std::string("int ") + (d->is_signed ? "s" : "u") + (d->full_range ? " full" : "") +
                   (d->fraction_bits ? " f" + std::to_string(d->fraction_bits) : "");
        case ElemType::kFloat: return "e" + std::to_string(d->exp_bits) + "m" + std::to_string(d->man_bits);
        case ElemType::kTable: return "table " + std::to_string(d->table_size);
    }
    return "?";
}

std::string scale_of(const FormatSpec& f) {
    if (f.kind == FormatKind::kDs) return f.fast_math ? "fp32 step, fast" : "fp32 step";
    if (f.kind == FormatKind::kQr) return "fp16 signed extreme";
    if (f.kind != FormatKind::kDecl) return f.kind == FormatKind::kAsym ? "fp32-absmax+min" : "fp32-absmax";
    return std::string(to_string(f.decl->scale)) + (f.decl->offset_min ? "+min" : "");
}

std::string rounding_of(const FormatSpec& f) {
    if (f.kind != FormatKind::kDecl) return "nearest-even";
    return to_string(f.decl->rounding);
}

const char* const kUlpBuckets[] = {"0", "1", "2", "3-4", "5-16", "17-256", ">256", "non-finite"};

reports::GateResult verify_model(const std::string& command, double seconds, const std::string& format, nlohmann::json json,
                                 const std::string& text) {
    reports::GateResult r;
    r.version = QTRANSIT_VERSION;
    r.started_at = now_utc();
    r.config_source = command;
    r.wall_seconds = seconds;
    r.formats = {format};
    r.verify = std::move(json);
    r.verify_text = text;
    return r;
}

}  // namespace

Result<nlohmann::json> formats_json(int64_t block) {
    if (auto st = kernels::validate_block(block); !st) return st.error();
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& f : all_builtin_formats()) {
        const int64_t b = f.fixed_block() ? f.fixed_block() : block;
        const int64_t wire = f.wire_bytes(b, b);
        rows.push_back({{"format", f.name()}, {"bits_per_element", f.bits}, {"element", element_of(f)},
                        {"scale", scale_of(f)}, {"rounding", rounding_of(f)}, {"fixed_block", f.fixed_block()},
                        {"code_min", f.code_min()}, {"code_max", f.code_max()}, {"metadata_bytes_per_block", f.metadata_bytes()},
                        {"wire_bytes_per_block", wire}, {"block", b},
                        {"wire_bits_per_element", 8.0 * static_cast<double>(wire) / static_cast<double>(b)},
                        {"wire_bytes_per_element", static_cast<double>(wire) / static_cast<double>(b)}});
    }
    return nlohmann::json{{"block", block}, {"formats", rows}};
}

nlohmann::json verify_quantize_json(const FormatSpec& format, int64_t block, const CodecCheck& c, const RunQuantization& run,
                                    kernels::Conformance conformance) {
    nlohmann::json j{{"format", format.name()},
                     {"block", block},
                     {"shard", c.shard},
                     {"elements", c.elements},
                     {"blocks", c.encoded.scales.size()},
                     {"conformance", kernels::to_string(conformance)},
                     {"conforms", c.conforms},
                     {"exact", c.exact},
                     {"first_difference", c.first_difference},
                     {"differing_elements", c.differing_elements},
                     {"differing_scale_blocks", c.differing_scale_blocks},
                     {"max_ulps", c.max_ulps},
                     {"ulp_histogram", nlohmann::json::object()},
                     {"bound_holds", c.bound_holds},
                     {"first_violation", c.violation},
                     {"max_error_to_bound", c.max_error_to_bound},
                     {"worst_element", c.worst_element},
                     {"worst_error", c.worst_error},
                     {"worst_bound", c.worst_bound},
                     {"compared", {{"codes", run.has_wire || run.has_codes}, {"scales", run.has_scales}, {"offsets", run.has_offsets}}}};
    for (size_t b = 0; b < c.ulp_histogram.size() && b < std::size(kUlpBuckets); ++b) j["ulp_histogram"][kUlpBuckets[b]] = c.ulp_histogram[b];
    return j;
}

std::string verify_quantize_text(const FormatSpec& format, int64_t block, const CodecCheck& c, const RunQuantization& run,
                                 std::span<const float> x, kernels::Conformance conformance, const QuantizeSources& names) {
    std::string hist;
    for (size_t b = 0; b < c.ulp_histogram.size() && b < std::size(kUlpBuckets); ++b)
        if (c.ulp_histogram[b]) hist += std::string(hist.empty() ? "" : ", ") + kUlpBuckets[b] + ": " + std::to_string(c.ulp_histogram[b]);
    auto given = [](bool g, const std::string& f) { return g ? f : std::string("not given"); };
    std::string text;
    char line[1024];
    std::snprintf(line, sizeof line, "verify quantize %s, block %lld, blocks restart every %lld elements: %lld elements in %zu blocks\n",
                  format.name().c_str(), static_cast<long long>(block), static_cast<long long>(c.shard), static_cast<long long>(c.elements),
                  c.encoded.scales.size());
    text += line;
    text += "  compared     decoded " + names.decoded + "; codes " + given(run.has_wire || run.has_codes, names.codes) + "; scales " +
            given(run.has_scales, names.scales) + (format.has_offset() ? "; offsets " + given(run.has_offsets, names.offsets) : "") + "\n";
    text += std::string("  exact        ") +
            (c.exact ? "every given value equals the reference's bit for bit\n"
                     : "DIFFERS: " + std::to_string(c.differing_elements) + " elements (code or decoded value), " +
                           std::to_string(c.differing_scale_blocks) + " blocks' metadata; first: " + c.first_difference + "\n");
    std::snprintf(line, sizeof line, "  bound        %s (largest |error| / bound %.6g, exact arithmetic, the reference's block statistics)\n",
                  c.bound_holds ? "holds for every element" : "FAILS", c.max_error_to_bound);
    text += line;
    if (!c.bound_holds) text += "               first: " + c.violation + "\n";
    text += "  ulps         decoded against the reference's: " + hist + "\n";
    if (c.worst_element >= 0 && static_cast<size_t>(c.worst_element) < x.size() && static_cast<size_t>(c.worst_element) < c.decoded.size()) {
        std::snprintf(line, sizeof line, "  worst        element %lld (input %s, decoded %s): |error| %.9g, bound %.9g, ratio %.6g\n",
                      static_cast<long long>(c.worst_element), shortest(x[static_cast<size_t>(c.worst_element)]).c_str(),
                      shortest(c.decoded[static_cast<size_t>(c.worst_element)]).c_str(), c.worst_error, c.worst_bound, c.worst_ratio);
        text += line;
    }
    text += std::string("conformance ") + kernels::to_string(conformance) + ": " + (c.conforms ? "holds" : "FAILS") + "\n";
    return text;
}

reports::GateResult verify_quantize_report(const std::string& command, double seconds, const FormatSpec& format, int64_t block,
                                           const CodecCheck& c, kernels::Conformance conformance, nlohmann::json json,
                                           const std::string& text) {
    reports::GateResult rep = verify_model(command, seconds, format.name(), std::move(json), text);
    rep.elements = c.elements;
    rep.block = block;
    for (auto conf_k : {kernels::Conformance::kExact, kernels::Conformance::kBounded}) {
        reports::Verdict v;
        v.name = "verify/quantize/" + format.name() + "/" + kernels::to_string(conf_k);
        v.category = "verify";
        v.checked = c.elements;
        const bool holds = conf_k == kernels::Conformance::kExact ? c.exact : c.bound_holds;
        const std::string detail = conf_k == kernels::Conformance::kExact ? c.first_difference : c.violation;
        if (conf_k != conformance) {
            v.status = reports::VerdictStatus::kSkip;
            v.message = std::string("not asked: ") + (holds ? "holds" : "does not hold; first: " + detail);
            v.checked = -1;
        } else {
            v.status = holds ? reports::VerdictStatus::kPass : reports::VerdictStatus::kFail;
            v.message = holds ? "holds over " + std::to_string(c.elements) + " elements" : detail;
        }
        rep.verdicts.push_back(v);
    }
    return rep;
}

reports::GateResult verify_collective_report(const std::string& command, double seconds, const CollectiveVerification& total) {
    const auto& spec = total.spec;
    const std::string pname = spec.config.path_name();  // a declared path's name (D45)
    reports::GateResult r = verify_model(command, seconds, spec.config.format.name(), to_json(total), summary_text(total));
    r.paths = {pname};
    r.ranks = {spec.config.ranks};
    r.ranks_per_node = spec.config.ranks_per_node;
    r.elements = spec.config.elements;
    r.block = spec.config.block;
    const std::string base = std::string("verify/") + pname + "/";
    for (const auto& t : total.tiers) {
        reports::Verdict v;
        v.name = base + to_string(t.tier);
        v.category = "verify";
        v.checked = t.not_applicable.empty() ? t.checked : -1;
        if (!t.not_applicable.empty()) {
            v.status = reports::VerdictStatus::kSkip;
            v.message = "not applicable: " + t.not_applicable;
        } else if (t.tier != total.asked) {
            // Tiers not asked for are reported, not judged: a run may differ from qtransit's
            // schedule (another order of adds) and still meet the tier asked.
            v.status = reports::VerdictStatus::kSkip;
            v.message = std::string("not asked (") + to_string(total.asked) + " was): " + (t.holds ? "holds" : "does not hold; first: " + t.first);
        } else {
            v.status = t.holds && t.checked > 0 ? reports::VerdictStatus::kPass : reports::VerdictStatus::kFail;
            v.message = t.holds ? "holds over " + std::to_string(t.checked) + " outputs" : t.first;
        }
        r.verdicts.push_back(v);
    }
    if (total.same_bits_applies) {
        reports::Verdict v;
        v.name = base + "same-bits";
        v.category = "verify";
        v.checked = total.same_bits_checked;
        v.status = total.same_bits && total.same_bits_checked > 0 ? reports::VerdictStatus::kPass : reports::VerdictStatus::kFail;
        v.message = total.same_bits ? "every rank holds the same bits" : total.same_bits_first;
        r.verdicts.push_back(v);
    }
    return r;
}

}  // namespace qtransit::gate
