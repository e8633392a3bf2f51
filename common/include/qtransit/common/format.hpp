// Format names and their wire layout (NUMERICS.md section 1). This header says *which* format and
// how many bytes it puts on the wire; it holds no arithmetic. The arithmetic lives twice, on purpose:
// once in reference/ (scalar, written from NUMERICS.md) and once in kernels/ (production), and the
// test suite compares the two bit for bit.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "qtransit/common/status.hpp"

namespace qtransit {

enum class FormatKind : uint8_t {
    kSym,   // int<b>: symmetric absmax, restricted range [-qmax, qmax]       (NUMERICS 1.1)
    kAsym,  // int<b>-asym: min/max affine, codes [0, 2^b - 1]                (NUMERICS 1.2)
    kDs,    // ds-int<b>: DeepSpeed-compatible symmetric, codes [-2^(b-1), 2^(b-1) - 1] (1.3)
};

struct FormatSpec {
    FormatKind kind = FormatKind::kSym;
    int bits = 8;

    std::string name() const;
    // Smallest and largest code.
    int32_t code_min() const;
    int32_t code_max() const;
    // Bytes of metadata per block: one binary32 scale (or step), plus binary32 `lo` for asym.
    int metadata_bytes() const { return kind == FormatKind::kAsym ? 8 : 4; }
    // Bytes the codes of one block of `len` elements occupy: packing restarts at every block,
    // an odd INT4 block pads its last nibble, other sub-byte widths pad the last byte.
    int64_t code_bytes(int64_t len) const { return (len * bits + 7) / 8; }
    // Wire bytes of a tensor of `elements` values quantized in blocks of `block` (last block short).
    int64_t wire_bytes(int64_t elements, int64_t block) const;
    friend bool operator==(const FormatSpec&, const FormatSpec&) = default;
};

// Every built-in format, in the order `qtransit formats` lists them.
const std::vector<FormatSpec>& builtin_formats();
std::string known_format_names();  // "int2, int3, ..., ds-int8"
Result<FormatSpec> parse_format(std::string_view name);

// What to do with NaN/inf (and range overflow) in an input block (NUMERICS.md section 4).
enum class Nonfinite : uint8_t { kError, kPropagate };
Result<Nonfinite> parse_nonfinite(std::string_view name);
const char* to_string(Nonfinite policy);

inline constexpr int64_t kDefaultBlock = 32;

}  // namespace qtransit
