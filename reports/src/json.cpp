// report.json (schema in docs/REPORT.md) and reading a previous one's runs back for a baseline.
#include <cmath>

#include "qtransit/reports/gate_result.hpp"
#include "check_json.hpp"
#include "tables.hpp"

namespace qtransit::reports {
namespace {

// JSON has no inf or NaN: such a number is null.
nlohmann::json num(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }

}  // namespace

const char* to_string(VerdictStatus s) {
    switch (s) {
        case VerdictStatus::kPass: return "pass";
        case VerdictStatus::kFail: return "fail";
        case VerdictStatus::kSkip: return "skip";
    }
    return "?";
}

int64_t GateResult::count(VerdictStatus s) const {
    int64_t c = 0;
    for (const auto& v : verdicts) c += v.status == s;
    return c;
}

std::string GateRun::key() const {
    return path + "/" + format + "/" + dist + "/N=" + std::to_string(ranks) + "/G=" + std::to_string(ranks_per_node) +
           "/M=" + std::to_string(elements) + "/B=" + std::to_string(block) + "/seed=" + std::to_string(seed) +
           (divide == "none" ? "" : "/divide=" + divide);
}

nlohmann::json to_json(const GateRun& x) {
    nlohmann::json j{{"path", x.path},
                     {"format", x.format},
                     {"dist", x.dist},
                     {"divide", x.divide},
                     {"shape", to_string(x.shape)},
                     {"quantized", x.quantized},
                     {"ranks", x.ranks},
                     {"ranks_per_node", x.ranks_per_node},
                     {"elements", x.elements},
                     {"block", x.block},
                     {"seed", x.seed},
                     {"k_min", x.k_min},
                     {"k_max", x.k_max},
                     {"k_checked", x.k_checked},
                     {"k_mismatches", x.k_mismatches},
                     {"max_abs_error", num(x.max_abs_error)},
                     {"rms_error", num(x.rms_error)},
                     {"rel_rms_error", num(x.rel_rms_error)},
                     {"max_a_posteriori", num(x.max_a_posteriori)},
                     {"max_a_priori", num(x.max_a_priori)},
                     {"max_error_to_a_posteriori", num(x.max_error_to_a_posteriori)},
                     {"bound_holds", x.bound_holds},
                     {"violations", x.violations},
                     {"nonfinite_outputs", x.nonfinite_outputs},
                     {"outputs_checked", x.outputs_checked},
                     {"bytes_per_rank", x.bytes_per_rank},
                     {"cross_node_bytes_per_rank", x.cross_node_bytes_per_rank},
                     {"fp16_bytes_per_rank", x.fp16_bytes_per_rank},
                     {"fp16_ring_rs_bytes_per_rank", x.fp16_ring_rs_bytes_per_rank},
                     {"wire_bits_per_element", x.wire_bits_per_element()}};
    if (!x.schedule.empty()) j["schedule"] = x.schedule;  // a declared path (D43)
    j["accum"] = x.accum;
    j["rotation"] = x.rotation;
    if (!x.input.empty()) j["input"] = x.input;     // a declared input type (D47)
    if (!x.output.empty()) j["output"] = x.output;  // a declared output type (D46)
    if (x.per_tensor) {                             // D50: one scale for the tensor
        j["scales"] = "per-tensor";
        j["tensor_amax"] = num(x.tensor_amax);
    }
    if (!x.first_violation.empty()) j["first_violation"] = x.first_violation;
    if (!x.first_k_mismatch.empty()) j["first_k_mismatch"] = x.first_k_mismatch;
    if (x.saturating) {  // NCCL's FP8 paths (D41)
        j["saturated_outputs"] = x.saturated_outputs;
        j["max_saturations"] = x.max_saturations;
        if (x.mean_factor != 0) j["mean_factor"] = x.mean_factor;
    }
    return j;
}

nlohmann::json to_json(const GateFit& f) {
    nlohmann::json pts = nlohmann::json::array();
    for (const auto& [n, e] : f.points) pts.push_back({{"ranks", n}, {"rel_rms_error", num(e)}});
    return {{"path", f.path}, {"format", f.format}, {"dist", f.dist}, {"exponent", num(f.exponent)}, {"points", pts}};
}

nlohmann::json to_json(const GateResult& r) {
    nlohmann::json runs = nlohmann::json::array();
    for (const auto& x : r.runs) runs.push_back(to_json(x));
    nlohmann::json refusals = nlohmann::json::array();
    for (const auto& x : r.refusals) refusals.push_back({{"format", x.format}, {"dist", x.dist}, {"what", x.what}});
    nlohmann::json fits = nlohmann::json::array();
    for (const auto& f : r.fits) fits.push_back(to_json(f));
    nlohmann::json checks = nlohmann::json::array();
    for (const auto& fc : r.format_checks) {
        const QuantizationCheck& c = fc.check;
        nlohmann::json j{{"format", fc.format}, {"dist", fc.dist}, {"elements", c.elements}, {"block", c.block}};
        if (!fc.refused.empty()) {
            j["refused"] = fc.refused;
        } else {
            j["cpu_matches_reference"] = c.exact;
            if (!c.first_difference.empty()) j["cpu_mismatch"] = c.first_difference;
            if (!c.input_class.empty()) j["input_class"] = c.input_class;
            if (!c.boundary_classes.empty()) {
                nlohmann::json bc = nlohmann::json::array();
                for (const auto& b : c.boundary_classes) {
                    nlohmann::json e{{"input_class", b.input_class}, {"cases", b.cases}, {"differing_cases", b.differing_cases},
                                     {"differing_elements", b.differing_elements}, {"violation", b.violation}};
                    if (!b.first.empty()) e["first_difference"] = b.first;
                    if (!b.differing_what.empty()) e["differing"] = b.differing_what;
                    if (b.elements) e["elements"] = b.elements;
                    if (const int64_t explained = b.convention_elements()) e["convention_elements"] = explained;
                    bc.push_back(e);
                }
                j["boundary_classes"] = bc;
            }
            if (!c.conventions.empty()) {
                nlohmann::json cm = nlohmann::json::array();
                for (const auto& k : c.conventions)
                    cm.push_back({{"convention", k.convention}, {"rule", k.rule}, {"blocks", k.blocks}, {"elements", k.elements}, {"first", k.first}});
                j["convention_mismatches"] = cm;
            }
            j["bound_holds"] = c.bound_holds;
            j["max_error_to_bound"] = num(c.max_error_to_bound);
            j["gpu"] = fc.gpu;
            j["kernel"] = fc.kernel;
            j["conformance"] = fc.conformance;
            j["shard"] = c.shard;
            j["conforms"] = c.conforms;
            detail::put_difference_counts(j, c);
            if (!c.violation.empty()) j["violation"] = c.violation;
        }
        checks.push_back(std::move(j));
    }
    nlohmann::json verdicts = nlohmann::json::array();
    for (const auto& v : r.verdicts) {
        nlohmann::json j{{"name", v.name}, {"category", v.category}, {"status", to_string(v.status)}, {"message", v.message}};
        if (v.value) j["value"] = num(*v.value);
        if (v.limit) j["limit"] = num(*v.limit);
        if (v.checked >= 0) j["checked"] = v.checked;
        verdicts.push_back(std::move(j));
    }
    nlohmann::json out{{"schema_version", r.schema_version},
            {"tool", r.verify.is_null() ? "qtransit check" : "qtransit verify"},
            {"version", r.version},
            {"config", r.config_source},
            {"started_at", r.started_at},
            {"wall_seconds", r.wall_seconds},
            {"gate",
             {{"formats", r.formats},
              {"paths", r.paths},
              {"distributions", r.dists},
              {"ranks", r.ranks},
              {"tree_ranks", r.tree_ranks},
              {"ranks_per_node", r.ranks_per_node},
              {"elements", r.elements},
              {"block", r.block},
              {"seed", r.seed},
              {"accum", r.accum},
              {"divide", r.divide}}},
            {"gpu_available", r.gpu_available},
            {"baseline", r.baseline},
            {"notes", r.notes},
            {"summary",
             {{"verdicts", r.verdicts.size()},
              {"passed", r.count(VerdictStatus::kPass)},
              {"failed", r.count(VerdictStatus::kFail)},
              {"skipped", r.count(VerdictStatus::kSkip)},
              {"runs", r.runs.size()},
              {"pass", r.passed()}}},
            {"runs", runs},
            {"refusals", refusals},
            {"fits", fits},
            {"format_checks", checks},
            {"verdicts", verdicts}};
    if (!r.verify.is_null()) out["verify"] = r.verify;
    if (const auto& fc = r.format_comparison) {
        nlohmann::json rows = nlohmann::json::array();
        for (const auto& x : fc->rows)
            rows.push_back({{"format", x.format}, {"declared", x.format == fc->declared}, {"wire_bits_per_element", x.bits},
                            {"rel_rms_error_k1", num(x.k1)}, {"rel_rms_error_k2", num(x.k2)}, {"largest_k", x.kmax},
                            {"rel_rms_error_largest_k", num(x.kmax_err)}, {"bounds_hold", x.holds}});
        out["format_comparison"] = {{"declared", fc->declared}, {"file", fc->file}, {"dist", fc->dist}, {"formats", rows}};
    }
    // Issue 18's comparison table (tables.hpp), one entry per row, distribution and N that ran.
    nlohmann::json cmp = nlohmann::json::array();
    for (const auto& row : detail::compare_rows(r))
        for (const auto& d : detail::compare_dists(r))
            for (int64_t n : r.ranks)
                if (const GateRun* x = detail::compare_run(r, row, d, n))
                    cmp.push_back({{"what", row.what}, {"path", row.path}, {"format", row.format}, {"divide", row.divide},
                                   {"dist", d}, {"ranks", n}, {"rel_rms_error", num(x->rel_rms_error)},
                                   {"cross_node_bytes_per_rank", x->cross_node_bytes_per_rank}});
    if (detail::compare_rows(r).size() >= 2) out["comparison"] = cmp;
    return out;
}

Result<std::vector<GateRun>> runs_from_json(const nlohmann::json& j) {
    auto bad = [](const std::string& what) { return make_error(ErrorCode::kBadFile, what); };
    if (!j.is_object()) return bad("not a JSON object");
    if (!j.contains("schema_version") || !j["schema_version"].is_number_integer())
        return bad("no integer \"schema_version\" (not a qtransit check report.json?)");
    if (j["schema_version"].get<int>() != kSchemaVersion)
        return bad("schema_version " + std::to_string(j["schema_version"].get<int>()) + ", this qtransit reads " +
                   std::to_string(kSchemaVersion));
    if (!j.contains("runs") || !j["runs"].is_array()) return bad("no \"runs\" array");
    std::vector<GateRun> out;
    size_t i = 0;
    for (const auto& x : j["runs"]) {
        const std::string at = "runs[" + std::to_string(i++) + "]";
        if (!x.is_object()) return bad(at + ": not an object");
        GateRun r;
        auto str = [&](const char* k, std::string& dst) -> bool {
            if (!x.contains(k) || !x[k].is_string()) return false;
            dst = x[k].get<std::string>();
            return true;
        };
        auto integer = [&](const char* k, auto& dst) -> bool {
            if (!x.contains(k) || !x[k].is_number_integer()) return false;
            dst = x[k].get<std::decay_t<decltype(dst)>>();
            return true;
        };
        // Metrics may be null (non-finite): read as NaN, which never compares worse.
        auto metric = [&](const char* k, double& dst) -> bool {
            if (!x.contains(k)) return false;
            if (x[k].is_null()) { dst = std::nan(""); return true; }
            if (!x[k].is_number()) return false;
            dst = x[k].get<double>();
            return true;
        };
        for (auto [k, d] : {std::pair<const char*, std::string*>{"path", &r.path}, {"format", &r.format}, {"dist", &r.dist}})
            if (!str(k, *d)) return bad(at + ": \"" + k + "\" missing or not a string");
        if (!integer("ranks", r.ranks) || !integer("ranks_per_node", r.ranks_per_node) || !integer("elements", r.elements) ||
            !integer("block", r.block) || !integer("seed", r.seed))
            return bad(at + ": ranks, ranks_per_node, elements, block and seed must be integers");
        if (!metric("max_abs_error", r.max_abs_error) || !metric("rel_rms_error", r.rel_rms_error) ||
            !metric("max_error_to_a_posteriori", r.max_error_to_a_posteriori))
            return bad(at + ": max_abs_error, rel_rms_error and max_error_to_a_posteriori must be numbers");
        metric("rms_error", r.rms_error);
        metric("max_a_posteriori", r.max_a_posteriori);
        str("divide", r.divide);  // absent in reports before D27: none
        out.push_back(std::move(r));
    }
    return out;
}

}  // namespace qtransit::reports
