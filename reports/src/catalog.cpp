// The formats' and paths' tables (catalog.hpp).
#include "qtransit/reports/catalog.hpp"

#include <algorithm>

#include "qtransit/common/appendf.hpp"

namespace qtransit::reports {
namespace {

nlohmann::json text_or_null(const std::string& s) { return s.empty() ? nlohmann::json() : nlohmann::json(s); }

}  // namespace

nlohmann::json to_json(const FormatTable& t) {
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& r : t.rows)
        rows.push_back({{"format", r.format}, {"bits_per_element", r.bits}, {"element", r.element},
                        {"scale", r.scale}, {"rounding", r.rounding}, {"fixed_block", r.fixed_block},
                        {"code_min", r.code_min}, {"code_max", r.code_max}, {"metadata_bytes_per_block", r.metadata_bytes},
                        {"wire_bytes_per_block", r.wire_bytes}, {"block", r.block},
                        {"wire_bits_per_element", 8.0 * static_cast<double>(r.wire_bytes) / static_cast<double>(r.block)},
                        {"wire_bytes_per_element", static_cast<double>(r.wire_bytes) / static_cast<double>(r.block)}});
    return nlohmann::json{{"block", t.block}, {"formats", rows}};
}

std::string to_text(const FormatTable& t) {
    std::string o;
    // The name column fits the longest name (fbgemm-int8-rowwise, a user's declaration), the others are fixed.
    int w = 18;
    for (const auto& r : t.rows) w = std::max(w, static_cast<int>(r.format.size()));
    appendf(o, "%-*s %4s %-12s %-19s %-13s %5s %11s %8s %10s %9s\n", w, "format", "bits", "element", "scale", "rounding", "block", "codes",
            "meta/blk", "wire B/blk", "bits/elem");
    for (const auto& r : t.rows) {
        const std::string codes = "[" + std::to_string(r.code_min) + "," + std::to_string(r.code_max) + "]";
        appendf(o, "%-*s %4d %-12s %-19s %-13s %5s %11s %8d %10lld %9.3f\n", w, r.format.c_str(), r.bits, r.element.c_str(),
                r.scale.c_str(), r.rounding.c_str(), r.fixed_block ? std::to_string(r.fixed_block).c_str() : "any", codes.c_str(),
                r.metadata_bytes, static_cast<long long>(r.wire_bytes), 8.0 * static_cast<double>(r.wire_bytes) / static_cast<double>(r.block));
    }
    appendf(o,
            "(wire bytes at block %lld, or the format's fixed block; metadata: the scale (4, 2 or 1 bytes), plus a "
            "binary32 lo for an offset (+min); ds-int<b> stores its step.\n `qtransit formats show NAME` prints a "
            "declaration; a .toml file declares a new format: docs/FORMATS.md section 8)\n",
            static_cast<long long>(t.block));
    return o;
}

nlohmann::json paths_to_json(const std::vector<PathDecl>& paths) {
    nlohmann::json arr = nlohmann::json::array();
    for (const auto& d : paths)
        arr.push_back({{"name", d.name},
                       {"schedule", path_info(d.kind).name},
                       {"collective", d.collective},
                       {"exchange", d.exchange},
                       {"wire", d.wire},
                       {"requantize", text_or_null(d.requantize)},
                       {"add", text_or_null(d.add)},
                       {"stored", text_or_null(d.stored)},
                       {"divide", d.divide ? nlohmann::json(to_string(*d.divide)) : nlohmann::json()},
                       {"rotation", d.rotation ? nlohmann::json(to_string(*d.rotation)) : nlohmann::json()},
                       {"input", d.input ? nlohmann::json(to_string(*d.input)) : nlohmann::json()},
                       {"output", d.output ? nlohmann::json(to_string(*d.output)) : nlohmann::json()},
                       {"saturates", saturating(path_info(d.kind).element) || (d.output && saturating(*d.output))},
                       {"source", d.source}});
    return nlohmann::json{{"paths", arr}};
}

std::string paths_to_text(const std::vector<PathDecl>& paths) {
    std::string o;
    size_t w = 4, ww = 4, rw = 10;
    for (const auto& d : paths) {
        w = std::max(w, d.name.size());
        ww = std::max(ww, d.wire_text().size());
        rw = std::max(rw, d.requantize.size());
    }
    const int iw = static_cast<int>(w), iww = static_cast<int>(ww), irw = static_cast<int>(rw);
    appendf(o, "%-*s %-14s %-24s %-*s %-*s %-13s %-6s %s\n", iw, "path", "collective", "exchange", iww, "wire", irw, "requantize",
            "add/stored", "divide", "input/output");
    for (const auto& d : paths)
        appendf(o, "%-*s %-14s %-24s %-*s %-*s %-13s %-6s %s\n", iw, d.name.c_str(), d.collective.c_str(), d.exchange.c_str(), iww,
                d.wire_text().c_str(), irw, d.requantize.empty() ? "-" : d.requantize.c_str(), d.types_text().c_str(),
                d.divide ? to_string(*d.divide) : path_info(d.kind).shape == PathShape::kAllGather ? "-" : "run's",
                (std::string(d.input ? to_string(*d.input) : "-") + "/" + (d.output ? to_string(*d.output) : "-")).c_str());
    appendf(o,
            "(wire any: the run's --format; none: values travel in the stored type, every add rounded to it; run's: the "
            "run's --accum or --divide;\n input/output: the type the inputs are cast to first and the outputs rounded to last, - for "
            "binary32 as it is.\n "
            "`qtransit paths show NAME` prints a declaration; a .toml file of [[path]] tables declares new ones: docs/PATHS.md)\n");
    return o;
}

}  // namespace qtransit::reports
