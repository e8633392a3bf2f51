// `qtransit formats` (the table of every built-in format) and `qtransit formats show` (a format's
// TOML declaration). `qtransit formats validate` is validate.cpp.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "qtransit/common/decl_toml.hpp"
#include "qtransit/kernels/codec.hpp"

namespace qtransit::cli {
namespace {

// The element type in a few characters: "int s", "int u", "int s f6", "e4m3", "table 16".
std::string element_of(const FormatSpec& f) {
    if (f.kind == FormatKind::kDs) return "int s (fp16)";
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
    if (f.kind != FormatKind::kDecl) return f.kind == FormatKind::kAsym ? "fp32-absmax+min" : "fp32-absmax";
    return std::string(to_string(f.decl->scale)) + (f.decl->offset_min ? "+min" : "");
}

std::string rounding_of(const FormatSpec& f) {
    if (f.kind != FormatKind::kDecl) return "nearest-even";
    return to_string(f.decl->rounding);
}

}  // namespace

int run_formats(const FormatsArgs& a) {
    if (auto st = kernels::validate_block(a.block); !st) return fail(st.error());
    nlohmann::json rows = nlohmann::json::array();
    if (!a.json)
        std::printf("%-18s %4s %-12s %-19s %-13s %5s %11s %8s %10s %9s\n", "format", "bits", "element", "scale", "rounding",
                    "block", "codes", "meta/blk", "wire B/blk", "bits/elem");
    for (const auto& f : all_builtin_formats()) {
        const int64_t block = f.fixed_block() ? f.fixed_block() : a.block;
        const int64_t wire = f.wire_bytes(block, block);
        const double per = 8.0 * static_cast<double>(wire) / static_cast<double>(block);
        const std::string codes = "[" + std::to_string(f.code_min()) + "," + std::to_string(f.code_max()) + "]";
        if (a.json) {
            rows.push_back({{"format", f.name()}, {"bits_per_element", f.bits}, {"element", element_of(f)},
                            {"scale", scale_of(f)}, {"rounding", rounding_of(f)}, {"fixed_block", f.fixed_block()},
                            {"code_min", f.code_min()}, {"code_max", f.code_max()}, {"metadata_bytes_per_block", f.metadata_bytes()},
                            {"wire_bytes_per_block", wire}, {"block", block}, {"wire_bits_per_element", per},
                            {"wire_bytes_per_element", static_cast<double>(wire) / static_cast<double>(block)}});
        } else {
            std::printf("%-18s %4d %-12s %-19s %-13s %5s %11s %8d %10lld %9.3f\n", f.name().c_str(), f.bits,
                        element_of(f).c_str(), scale_of(f).c_str(), rounding_of(f).c_str(),
                        f.fixed_block() ? std::to_string(f.fixed_block()).c_str() : "any", codes.c_str(), f.metadata_bytes(),
                        static_cast<long long>(wire), per);
        }
    }
    if (a.json) {
        std::printf("%s\n", nlohmann::json{{"block", a.block}, {"formats", rows}}.dump(2).c_str());
    } else {
        std::printf("(wire bytes at block %lld, or the format's fixed block; metadata: the scale (4, 2 or 1 bytes), plus a "
                    "binary32 lo for an offset (+min); ds-int<b> stores its step.\n `qtransit formats show NAME` prints a "
                    "declaration; a .toml file declares a new format: docs/FORMATS.md section 8)\n",
                    static_cast<long long>(a.block));
    }
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
