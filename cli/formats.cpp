// `qtransit formats` (the table of every built-in format) and `qtransit formats show` (a format's
// TOML declaration). `qtransit formats validate` is validate.cpp.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "qtransit/common/decl_toml.hpp"
#include "qtransit/gate/views.hpp"

namespace qtransit::cli {
int run_formats(const FormatsArgs& a) {
    auto table = gate::formats_json(a.block);
    if (!table) return fail(table.error());
    if (a.json) {
        std::printf("%s\n", table->dump(2).c_str());
        return kExitOk;
    }
    std::printf("%-18s %4s %-12s %-19s %-13s %5s %11s %8s %10s %9s\n", "format", "bits", "element", "scale", "rounding", "block",
                "codes", "meta/blk", "wire B/blk", "bits/elem");
    for (const auto& row : (*table)["formats"]) {
        const int64_t fixed = row["fixed_block"].get<int64_t>();
        const std::string codes = "[" + std::to_string(row["code_min"].get<int64_t>()) + "," + std::to_string(row["code_max"].get<int64_t>()) + "]";
        std::printf("%-18s %4d %-12s %-19s %-13s %5s %11s %8d %10lld %9.3f\n", row["format"].get<std::string>().c_str(),
                    row["bits_per_element"].get<int>(), row["element"].get<std::string>().c_str(), row["scale"].get<std::string>().c_str(),
                    row["rounding"].get<std::string>().c_str(), fixed ? std::to_string(fixed).c_str() : "any", codes.c_str(),
                    row["metadata_bytes_per_block"].get<int>(), static_cast<long long>(row["wire_bytes_per_block"].get<int64_t>()),
                    row["wire_bits_per_element"].get<double>());
    }
    std::printf("(wire bytes at block %lld, or the format's fixed block; metadata: the scale (4, 2 or 1 bytes), plus a "
                "binary32 lo for an offset (+min); ds-int<b> stores its step.\n `qtransit formats show NAME` prints a "
                "declaration; a .toml file declares a new format: docs/FORMATS.md section 8)\n",
                static_cast<long long>(a.block));
    return kExitOk;
}

int run_formats_show(const std::string& target) {
    auto f = resolve_format(target);
    if (!f) return fail(f.error());
    auto text = declaration_to_toml(*f);
    if (!text) return fail(text.error());
    std::printf("%s", text->c_str());
    return kExitOk;
}

}  // namespace qtransit::cli
