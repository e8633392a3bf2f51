// `quantize`'s and `verify quantize`'s JSON objects and texts (quantization_check.hpp).
#include "qtransit/reports/quantization_check.hpp"

#include <cmath>
#include <cstdio>

#include "qtransit/common/appendf.hpp"

#include "qtransit/reports/numbers.hpp"
#include "check_json.hpp"

namespace qtransit::reports {

const std::vector<std::string>& QuantizationCheck::ulp_buckets() {
    static const std::vector<std::string> names{"0", "1", "2", "3-4", "5-16", "17-256", ">256", "non-finite"};
    return names;
}

nlohmann::json to_json(const VerifiedQuantization& v) {
    const QuantizationCheck& c = v.check;
    nlohmann::json j{{"format", v.format},
                     {"block", v.block},
                     {"shard", c.shard},
                     {"elements", c.elements},
                     {"blocks", v.blocks},
                     {"conformance", v.conformance},
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
                     {"compared", {{"codes", v.codes_given}, {"scales", v.scales_given}, {"offsets", v.offsets_given}}}};
    const auto& buckets = QuantizationCheck::ulp_buckets();
    for (size_t b = 0; b < c.ulp_histogram.size() && b < buckets.size(); ++b) j["ulp_histogram"][buckets[b]] = c.ulp_histogram[b];
    return j;
}

std::string to_text(const VerifiedQuantization& v) {
    const QuantizationCheck& c = v.check;
    const auto& buckets = QuantizationCheck::ulp_buckets();
    std::string hist;
    for (size_t b = 0; b < c.ulp_histogram.size() && b < buckets.size(); ++b)
        if (c.ulp_histogram[b]) hist += (hist.empty() ? "" : ", ") + buckets[b] + ": " + std::to_string(c.ulp_histogram[b]);
    auto given = [](bool g, const std::string& f) { return g ? f : std::string("not given"); };
    std::string text;
    char line[1024];
    std::snprintf(line, sizeof line, "verify quantize %s, block %lld, blocks restart every %lld elements: %lld elements in %lld blocks\n",
                  v.format.c_str(), static_cast<long long>(v.block), static_cast<long long>(c.shard), static_cast<long long>(c.elements),
                  static_cast<long long>(v.blocks));
    text += line;
    text += "  compared     decoded " + v.decoded_name + "; codes " + given(v.codes_given, v.codes_name) + "; scales " +
            given(v.scales_given, v.scales_name) + (v.format_has_offset ? "; offsets " + given(v.offsets_given, v.offsets_name) : "") + "\n";
    text += std::string("  exact        ") +
            (c.exact ? "every given value equals the reference's bit for bit\n"
                     : "DIFFERS: " + std::to_string(c.differing_elements) + " elements (code or decoded value), " +
                           std::to_string(c.differing_scale_blocks) + " blocks' metadata; first: " + c.first_difference + "\n");
    std::snprintf(line, sizeof line, "  bound        %s (largest |error| / bound %.6g, exact arithmetic, the reference's block statistics)\n",
                  c.bound_holds ? "holds for every element" : "FAILS", c.max_error_to_bound);
    text += line;
    if (!c.bound_holds) text += "               first: " + c.violation + "\n";
    text += "  ulps         decoded against the reference's: " + hist + "\n";
    if (c.worst_element >= 0) {
        std::snprintf(line, sizeof line, "  worst        element %lld (input %s, decoded %s): |error| %.9g, bound %.9g, ratio %.6g\n",
                      static_cast<long long>(c.worst_element), shortest(c.worst_input).c_str(), shortest(c.worst_decoded).c_str(),
                      c.worst_error, c.worst_bound, c.worst_ratio);
        text += line;
    }
    text += "conformance " + v.conformance + ": " + (c.conforms ? "holds" : "FAILS") + "\n";
    return text;
}

namespace {

nlohmann::json float_array(std::span<const float> v) {
    nlohmann::json a = nlohmann::json::array();
    for (float f : v) {
        if (std::isfinite(f)) a.push_back(json_float(f));
        else a.push_back(nullptr);  // JSON has no NaN: a poisoned block's values print as null
    }
    return a;
}

// The generated boundary inputs of a codec's run: the first finding and every class's counts.
nlohmann::json boundary_inputs_json(const QuantizedTensor& q) {
    nlohmann::json h;
    h["conforms"] = !q.hunt_fails();
    h["input_class"] = q.hunt_found ? nlohmann::json(q.hunt_class) : nlohmann::json(nullptr);
    h["first_difference"] = q.hunt_found ? nlohmann::json(q.hunt_first) : nlohmann::json(nullptr);
    h["within_bound"] = !q.hunt_found || !q.hunt_violation;
    nlohmann::json per = nlohmann::json::array();
    for (const auto& k : q.check.boundary_classes)
        per.push_back({{"input_class", k.input_class}, {"cases", k.cases}, {"differing_cases", k.differing_cases},
                       {"differing_elements", k.differing_elements}, {"violation", k.violation}});
    h["classes"] = per;
    return h;
}

}  // namespace

nlohmann::json to_json(const QuantizedTensor& q) {
    const QuantizationCheck& c = q.check;
    nlohmann::json j;
    j["format"] = q.format;
    if (q.stochastic) j["seed"] = q.seed;
    j["block"] = q.block;
    j["elements"] = q.elements;
    j["shape"] = q.shape;
    j["nonfinite"] = q.nonfinite;
    j["scales"] = float_array(q.scales);
    if (q.takes_tensor_amax) {
        // NVFP4: the tensor amax the blocks took, and each block's E4M3 scale s_b (the wire's byte; the
        // scales above are what a block's codes decode by, fl32(fl32(s_b T) fl32(1 / (448 A)))).
        j["tensor_amax"] = json_float(q.tensor_amax);
        nlohmann::json sb = nlohmann::json::array();
        for (int b : q.e4m3_scale_bytes) sb.push_back(b < 0 ? nlohmann::json(nullptr) : nlohmann::json(b));
        j["e4m3_scale_bytes"] = sb;
    }
    if (q.has_offsets) j["offsets"] = float_array(q.offsets);
    j["codes"] = std::vector<int32_t>(q.codes.begin(), q.codes.end());
    j["decoded"] = float_array(q.decoded);
    j["max_abs_error"] = c.max_abs_error;
    j["max_error_to_bound"] = c.max_error_to_bound;
    j["bound_holds"] = c.bound_holds;
    if (!c.bound_holds) j["first_violation"] = c.first_violation;
    j["wire_bytes"] = q.wire_bytes;
    if (q.grid.padded())  // a tiled format over a tensor padded to whole tiles: the wire holds the padding
        j["padded_shape"] = std::vector<int64_t>{q.grid.padded_rows, q.grid.padded_cols};
    j["poisoned_blocks"] = c.poisoned_blocks;
    j["matches_reference"] = c.exact;
    if (!c.exact) j["reference_mismatch"] = c.first_difference;
    if (q.codec.empty()) return j;
    j["codec"] = q.codec;
    j["conformance"] = q.conformance;
    j["shard"] = q.shard;
    detail::put_difference_counts(j, c);
    if (c.admissible_model) {  // D23: exact conformance is "admissible"; the differing_ counts are against IEEE
        j["admissible"] = c.exact;
        j["inadmissible_elements"] = c.inadmissible_elements;
        j["inadmissible_steps"] = c.inadmissible_steps;
    }
    j["conforms"] = c.conforms && !q.hunt_fails();
    if (q.hunted) j["boundary_inputs"] = boundary_inputs_json(q);
    return j;
}

std::string to_text(const QuantizedTensor& q) {
    const QuantizationCheck& c = q.check;
    std::string o;
    if (!q.codec.empty()) {
        appendf(o, "codec             %s\n", q.codec_description.c_str());
        appendf(o, "format            %s (block %lld, blocks restart every %lld elements)\n", q.format.c_str(),
                static_cast<long long>(q.block), static_cast<long long>(q.shard));
        appendf(o, "elements          %lld in %zu blocks\n", static_cast<long long>(q.tensor_elements), q.scales.size());
        appendf(o, "max error/bound   %.6f (%s, exact arithmetic, the reference's block statistics)\n", c.max_error_to_bound,
                c.bound_holds ? "bound holds" : "BOUND VIOLATED");
        if (c.admissible_model)
            appendf(o, "admissible        %s\n", c.exact ? "yes: every element is a result of an admissible scale and step (D23)"
                                                     : c.first_difference.c_str());
        else
            appendf(o, "codec = reference %s\n", c.exact ? "yes, bit for bit" : c.first_difference.c_str());
        appendf(o, "%s %lld elements (%lld in the %lld blocks whose scale differs), largest %lld ulp\n",
                c.admissible_model ? "differs from IEEE" : "differing        ", static_cast<long long>(c.differing_elements),
                static_cast<long long>(c.elements_in_differing_blocks), static_cast<long long>(c.differing_scale_blocks),
                static_cast<long long>(c.max_ulps));
        appendf(o, "conformance       %s: %s\n", q.conformance.c_str(), c.conforms ? "conforms" : "DOES NOT CONFORM");
        if (q.hunted)
            appendf(o, "boundary inputs   %s\n", !q.hunt_found  ? "conform: codec = reference bit for bit on every generated input"
                                             : q.hunt_fails() ? "DO NOT CONFORM (below)"
                                                            : "conform within the bound; they differ in bits (bounded conformance)");
        return o;
    }
    appendf(o, "format            %s (block %lld, policy %s)\n", q.format.c_str(), static_cast<long long>(q.block), q.nonfinite.c_str());
    if (q.grid.tile_rows > 0) {
        appendf(o, "tiles             %lld x %lld over [%lld, %lld] (the blocks, the scales and the wire in tile order)\n",
                static_cast<long long>(q.grid.tile_rows), static_cast<long long>(q.grid.tile_cols), static_cast<long long>(q.grid.rows),
                static_cast<long long>(q.grid.cols));
        if (q.grid.padded())
            appendf(o, "padded            to [%lld, %lld] with zeros, as DeepGEMM and TE pad (the wire holds the padding)\n",
                    static_cast<long long>(q.grid.padded_rows), static_cast<long long>(q.grid.padded_cols));
    }
    appendf(o, "elements          %lld in %zu blocks (%lld poisoned)\n", static_cast<long long>(q.elements), q.scales.size(),
            static_cast<long long>(c.poisoned_blocks));
    appendf(o, "wire bytes        %lld (%.3f bits/element; binary32 input %lld bytes)\n", static_cast<long long>(q.wire_bytes),
            q.elements ? 8.0 * static_cast<double>(q.wire_bytes) / static_cast<double>(q.elements) : 0.0,
            static_cast<long long>(4 * q.elements));
    if (q.takes_tensor_amax)
        appendf(o, "tensor amax       %s (the tensor's largest |x|: every block's E4M3 scale is under it)\n", shortest(q.tensor_amax).c_str());
    appendf(o, "max |error|       %s\n", shortest(c.max_abs_error).c_str());
    appendf(o, "max error/bound   %.6f (%s, exact arithmetic)\n", c.max_error_to_bound, c.bound_holds ? "bound holds" : "BOUND VIOLATED");
    appendf(o, "kernel = reference %s\n", c.exact ? "yes, bit for bit" : c.first_difference.c_str());
    if (!q.out_dir.empty()) appendf(o, "written to        %s\n", q.out_dir.c_str());
    return o;
}

}  // namespace qtransit::reports
