// `verify quantize`'s JSON object and text (quantization_check.hpp).
#include "qtransit/reports/quantization_check.hpp"

#include <cstdio>

#include "qtransit/reports/numbers.hpp"

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

}  // namespace qtransit::reports
