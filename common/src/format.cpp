#include "qtransit/common/format.hpp"

#include <string>

namespace qtransit {

std::string describe(const Site& site, int64_t local_index) {
    std::string s = "tensor '" + site.tensor + "'";
    if (site.rank >= 0) s += " rank " + std::to_string(site.rank);
    s += " element " + std::to_string(site.index_base + local_index);
    return s;
}

std::string FormatSpec::name() const {
    const std::string b = std::to_string(bits);
    switch (kind) {
        case FormatKind::kSym: return "int" + b;
        case FormatKind::kAsym: return "int" + b + "-asym";
        case FormatKind::kDs: return "ds-int" + b;
    }
    return "?";
}

int32_t FormatSpec::code_min() const {
    switch (kind) {
        case FormatKind::kSym: return -((1 << (bits - 1)) - 1);
        case FormatKind::kAsym: return 0;
        case FormatKind::kDs: return -(1 << (bits - 1));
    }
    return 0;
}

int32_t FormatSpec::code_max() const {
    switch (kind) {
        case FormatKind::kSym: return (1 << (bits - 1)) - 1;
        case FormatKind::kAsym: return (1 << bits) - 1;
        case FormatKind::kDs: return (1 << (bits - 1)) - 1;
    }
    return 0;
}

int64_t FormatSpec::wire_bytes(int64_t elements, int64_t block) const {
    if (elements <= 0 || block <= 0) return 0;
    const int64_t full = elements / block, tail = elements % block;
    int64_t bytes = full * (code_bytes(block) + metadata_bytes());
    if (tail) bytes += code_bytes(tail) + metadata_bytes();
    return bytes;
}

const std::vector<FormatSpec>& builtin_formats() {
    static const std::vector<FormatSpec> all = [] {
        std::vector<FormatSpec> v;
        for (int b = 2; b <= 8; ++b) v.push_back({FormatKind::kSym, b});
        for (int b = 2; b <= 8; ++b) v.push_back({FormatKind::kAsym, b});
        v.push_back({FormatKind::kDs, 4});
        v.push_back({FormatKind::kDs, 8});
        return v;
    }();
    return all;
}

std::string known_format_names() {
    std::string s;
    for (const auto& f : builtin_formats()) {
        if (!s.empty()) s += ", ";
        s += f.name();
    }
    return s;
}

Result<FormatSpec> parse_format(std::string_view name) {
    for (const auto& f : builtin_formats())
        if (f.name() == name) return f;
    return make_error(ErrorCode::kInvalidArgument,
                      "unknown format '" + std::string(name) + "'; known formats: " + known_format_names());
}

Result<Nonfinite> parse_nonfinite(std::string_view name) {
    if (name == "error") return Nonfinite::kError;
    if (name == "propagate") return Nonfinite::kPropagate;
    return make_error(ErrorCode::kInvalidArgument,
                      "unknown non-finite policy '" + std::string(name) + "'; known policies: error, propagate");
}

const char* to_string(Nonfinite policy) { return policy == Nonfinite::kError ? "error" : "propagate"; }

}  // namespace qtransit
