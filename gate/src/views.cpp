// The commands' models (views.hpp), shared by the CLI and the Python module.
#include "qtransit/gate/views.hpp"

#include "qtransit/common/decl_toml.hpp"
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

Result<reports::FormatTable> format_table(int64_t block) {
    if (auto st = kernels::validate_block(block); !st) return st.error();
    reports::FormatTable t;
    t.block = block;
    for (const auto& f : all_builtin_formats()) {
        reports::FormatRow r;
        r.format = f.name();
        r.bits = f.bits;
        r.element = element_of(f);
        r.scale = scale_of(f);
        r.rounding = rounding_of(f);
        r.fixed_block = f.fixed_block();
        r.code_min = f.code_min();
        r.code_max = f.code_max();
        r.metadata_bytes = f.metadata_bytes();
        r.block = wire_block({f}, block);  // its fixed block, else the one asked
        r.wire_bytes = f.wire_bytes(r.block, r.block);
        t.rows.push_back(std::move(r));
    }
    return t;
}

reports::QuantizedTensor quantized_tensor(const FormatSpec& format, const CodecCheck& c, const std::vector<int64_t>& shape,
                                          Nonfinite policy, uint64_t seed) {
    reports::QuantizedTensor q;
    q.format = format.name();
    q.stochastic = format.stochastic();
    q.seed = seed;
    q.block = c.encoded.block;
    q.elements = c.encoded.elements;
    q.tensor_elements = 1;
    for (int64_t d : shape) q.tensor_elements *= d;
    q.shape = shape;
    q.nonfinite = to_string(policy);
    q.scales = c.encoded.scales;
    q.has_offsets = format.has_offset();
    q.offsets = c.encoded.offsets;
    q.takes_tensor_amax = c.encoded.format.takes_tensor_amax();
    if (q.takes_tensor_amax) {
        q.tensor_amax = c.encoded.format.decl->tensor_amax;
        for (float s : c.encoded.scales) {
            uint8_t byte = 0;
            if (s == s) write_metadata(c.encoded.format, s, 0.0f, &byte);
            q.e4m3_scale_bytes.push_back(s == s ? byte : -1);
        }
    }
    q.codes = c.codes;
    q.decoded = c.decoded;
    q.wire_bytes = c.encoded.wire_bytes();
    q.grid = c.grid;
    q.check = static_cast<const reports::QuantizationCheck&>(c);
    return q;
}

reports::VerifiedQuantization verified_quantization(const FormatSpec& format, int64_t block, const CodecCheck& c, const RunQuantization& run,
                                                    kernels::Conformance conformance, const QuantizeSources& names) {
    reports::VerifiedQuantization v;
    v.format = format.name();
    v.block = block;
    v.blocks = static_cast<int64_t>(c.encoded.scales.size());
    v.format_has_offset = format.has_offset();
    v.conformance = kernels::to_string(conformance);
    v.codes_given = run.has_wire || run.has_codes;
    v.scales_given = run.has_scales;
    v.offsets_given = run.has_offsets;
    v.decoded_name = names.decoded;
    v.codes_name = names.codes;
    v.scales_name = names.scales;
    v.offsets_name = names.offsets;
    v.check = static_cast<const reports::QuantizationCheck&>(c);
    return v;
}

reports::GateResult verify_quantize_report(const std::string& command, double seconds, const reports::VerifiedQuantization& v,
                                           nlohmann::json json, const std::string& text) {
    const reports::QuantizationCheck& c = v.check;
    reports::GateResult rep = verify_model(command, seconds, v.format, std::move(json), text);
    rep.elements = c.elements;
    rep.block = v.block;
    for (auto conf_k : {kernels::Conformance::kExact, kernels::Conformance::kBounded}) {
        reports::Verdict verdict;
        const std::string name = kernels::to_string(conf_k);
        verdict.name = "verify/quantize/" + v.format + "/" + name;
        verdict.category = "verify";
        verdict.checked = c.elements;
        const bool holds = conf_k == kernels::Conformance::kExact ? c.exact : c.bound_holds;
        const std::string detail = conf_k == kernels::Conformance::kExact ? c.first_difference : c.violation;
        if (name != v.conformance) {
            verdict.status = reports::VerdictStatus::kSkip;
            verdict.message = std::string("not asked: ") + (holds ? "holds" : "does not hold; first: " + detail);
            verdict.checked = -1;
        } else {
            verdict.status = holds ? reports::VerdictStatus::kPass : reports::VerdictStatus::kFail;
            verdict.message = holds ? "holds over " + std::to_string(c.elements) + " elements" : detail;
        }
        rep.verdicts.push_back(verdict);
    }
    return rep;
}

reports::GateResult verify_collective_report(const std::string& command, double seconds, const CollectiveVerification& total) {
    const reports::VerifiedCollective shown = verified_collective(total);
    const auto& spec = total.spec;
    const std::string pname = spec.config.path_name();  // a declared path's name (D45)
    reports::GateResult r = verify_model(command, seconds, spec.config.format.name(), reports::to_json(shown), reports::to_text(shown));
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
