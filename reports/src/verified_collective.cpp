// `verify collective`'s JSON object and text (verified_collective.hpp).
#include "qtransit/reports/verified_collective.hpp"

#include <cmath>
#include <cstdio>

#include "qtransit/common/appendf.hpp"

namespace qtransit::reports {

nlohmann::json to_json(const VerifiedCollective& v) {
    nlohmann::json tiers = nlohmann::json::array();
    for (const auto& t : v.tiers) {
        nlohmann::json j{{"tier", t.tier}, {"applicable", t.not_applicable.empty()}};
        if (!t.not_applicable.empty()) j["why_not"] = t.not_applicable;
        j["holds"] = t.holds;
        j["checked"] = t.checked;
        j["violations"] = t.violations;
        j["max_ratio"] = std::isfinite(t.max_ratio) ? nlohmann::json(t.max_ratio) : nlohmann::json(nullptr);
        j["first_violation"] = t.first;
        j["first_pos"] = t.first_pos;
        j["first_rank"] = t.first_rank;
        tiers.push_back(j);
    }
    auto error = [](const VerifiedCollective::Error& e) {
        return nlohmann::json{{"max_abs_error", e.max_abs}, {"rel_rms_error", e.rel_rms}, {"mean_error", e.mean},
                              {"sum_sq_error", e.sum_sq}, {"sum_error", e.sum}};
    };
    nlohmann::json out{
        {"path", v.path},
        {"format", v.format},
        {"ranks", v.ranks},
        {"ranks_per_node", v.ranks_per_node},
        {"elements", v.elements},
        {"block", v.block},
        {"accum", v.accum},
        {"target", v.mean ? "mean" : "sum"},
        {"ring_order", v.ring_order},
        {"asked", v.asked},
        {"holds", v.holds},
        {"strongest", v.strongest.empty() ? nlohmann::json(nullptr) : nlohmann::json(v.strongest)},
        {"tiers", tiers},
        {"same_bits", {{"applies", v.same_bits_applies}, {"holds", v.same_bits}, {"checked", v.same_bits_checked},
                       {"first_difference", v.same_bits_first}, {"first_pos", v.same_bits_pos}}},
        {"outputs", v.outputs},
        {"differing_from_schedule", v.differing_from_schedule},
        {"k_min", v.k_min},
        {"k_max", v.k_max},
        {"have_k", v.have_k},
        {"run", error(v.run)},
        {"simulation", error(v.simulation)},
        {"sum_sq_target", v.sum_sq_target},
    };
    if (v.declared) out["schedule"] = v.schedule;  // a declared path (D45)
    return out;
}

std::string to_text(const VerifiedCollective& v) {
    std::string out = "verify " + v.schedule + " N=" + std::to_string(v.ranks) + " G=" + std::to_string(v.ranks_per_node) + " " +
                      v.format + " block " + std::to_string(v.block) + ", " + std::to_string(v.elements) + " elements per rank, " +
                      v.accum + " accumulation, target " + (v.mean ? "mean" : "sum") + ": " + std::to_string(v.outputs) + " outputs\n";
    for (const auto& t : v.tiers) {
        appendf(out, "  %-12s ", t.tier.c_str());
        if (!t.not_applicable.empty()) {
            out += "n/a (" + t.not_applicable + ")\n";
            continue;
        }
        if (t.holds) {
            out += "holds over " + std::to_string(t.checked) + " outputs";
            if (t.exact) out += "\n";
            else appendf(out, " (largest |deviation| / tolerance %.9g)\n", t.max_ratio);
        } else {
            out += "FAILS at " + std::to_string(t.violations) + " of " + std::to_string(t.checked) + " outputs; first: " + t.first + "\n";
        }
    }
    if (v.same_bits_applies)
        out += std::string("  same bits    ") +
               (v.same_bits ? "every rank holds the same bits (" + std::to_string(v.same_bits_checked) + " compared)\n"
                            : "FAILS: " + v.same_bits_first + "\n");
    appendf(out,
            "  error        run: max |err| %.4g, relative RMS %.4g, mean %.4g; qtransit's schedule on the same inputs: max |err| %.4g, "
            "relative RMS %.4g, mean %.4g; %lld outputs differ from it; k %d..%d\n",
            v.run.max_abs, v.run.rel_rms, v.run.mean, v.simulation.max_abs, v.simulation.rel_rms, v.simulation.mean,
            static_cast<long long>(v.differing_from_schedule), v.k_min, v.k_max);
    out += "strongest tier met: " + (v.strongest.empty() ? std::string("none") : v.strongest) + "\n";
    out += "asked: " + v.asked + (v.asked_default ? " (the default)" : "") + ": " + (v.holds ? "holds" : "FAILS") + "\n";
    return out;
}

}  // namespace qtransit::reports
