// Format names and their wire layout (NUMERICS.md section 1). This header says *which* format and
// how many bytes it puts on the wire; it holds no arithmetic. The arithmetic lives twice, on purpose:
// once in reference/ (scalar, written from NUMERICS.md) and once in kernels/ (production), and the
// test suite compares the two bit for bit.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "qtransit/common/decl.hpp"
#include "qtransit/common/status.hpp"

namespace qtransit {

enum class FormatKind : uint8_t {
    kSym,   // int<b>: symmetric absmax, restricted range [-qmax, qmax]       (NUMERICS 1.1)
    kAsym,  // int<b>-asym: min/max affine, codes [0, 2^b - 1]                (NUMERICS 1.2)
    kDs,    // ds-int<b>: DeepSpeed-compatible symmetric, codes [-2^(b-1), 2^(b-1) - 1] (1.3)
    kDecl,  // a declared format (docs/FORMATS.md): fp8, MX, nf4, stochastic twins, a user's TOML
    kQr,    // quickreduce-q<b>: QuickReduce's codecs in binary16 arithmetic, codes [0, 2^b - 1] (FORMATS.md 11)
};

struct FormatSpec {
    FormatSpec() = default;
    FormatSpec(FormatKind k, int b) : kind(k), bits(b) {}

    FormatKind kind = FormatKind::kSym;
    int bits = 8;
    // kDs only: ds-int<b>-fm, DeepSpeed's recipe as its op builder compiles it (--use_fast_math,
    // docs/DECISIONS.md D23). The wire layout, the codes and qtransit's own kernels are ds-int<b>'s
    // (the IEEE arithmetic, one of the admissible results); what differs is what a kernel of it may
    // return: any result of an admissible scale and step (reference::ds_admissible), and the wider
    // per-element bound derived in reference/src/formats.cpp.
    bool fast_math = false;
    // kDecl only: the declaration and its name.
    std::shared_ptr<const Decl> decl;
    std::string decl_name;

    std::string name() const;
    // Smallest and largest code.
    int32_t code_min() const;
    int32_t code_max() const;
    // Whether blocks carry an offset `lo` (int<b>-asym, declared offset `min`).
    bool has_offset() const { return kind == FormatKind::kAsym || (kind == FormatKind::kDecl && decl->offset_min); }
    // Bytes of metadata per block: the scale (binary32 for the integer formats; binary16 for
    // quickreduce-q<b>; 4, 2, 1 or 0 for a declared one) plus a binary32 `lo` where there is an offset.
    int metadata_bytes() const;
    int scale_bytes() const;
    // Bytes the codes of one block of `len` elements occupy: packing restarts at every block,
    // an odd INT4 block pads its last nibble, other sub-byte widths pad the last byte.
    int64_t code_bytes(int64_t len) const { return (len * bits + 7) / 8; }
    // Wire bytes of the blocks of a tensor of `elements` values quantized in blocks of `block` (last
    // block short); a tensor's own metadata (tensor_bytes) is not included.
    int64_t wire_bytes(int64_t elements, int64_t block) const;
    // Bytes a quantized tensor carries once, beside its blocks: NVFP4's binary32 tensor amax (4), else 0.
    int tensor_bytes() const;
    // A format whose blocks take the amax of their tensor (scale e4m3-tensor-amax, NVFP4's second level).
    bool takes_tensor_amax() const;
    // For such a format a copy (the same name) whose declared tensor amax is t, a finite binary32 >= 0;
    // *this for every other format.
    FormatSpec with_tensor_amax(float t) const;
    // with_tensor_amax of the largest finite |x| (0 if none), as Transformer Engine's recipe takes it.
    FormatSpec for_tensor(std::span<const float> x) const;
    // 0, or the one block size the format allows (the MX formats: 32).
    int64_t fixed_block() const { return kind == FormatKind::kDecl ? decl->fixed_block : 0; }
    // Block size checks: >= 1, and the format's fixed size if it has one (message names both).
    Status check_block(int64_t block) const;
    bool stochastic() const { return kind == FormatKind::kDecl && decl->rounding == Rounding::kStochastic; }
    // A declared format with transform = "hadamard" (FORMATS.md section 9): each block is rotated first.
    bool rotated() const { return kind == FormatKind::kDecl && decl->rotated(); }
    // A declared format of 2-D blocks (`tile`, FORMATS.md section 8).
    bool tiled() const { return kind == FormatKind::kDecl && decl->tiled(); }
    // A rotated format transforms each block at its own length, which must be a power of two: a
    // tensor's short last block too. Ok for every other format; else an Error naming the length.
    Status check_block_length(int64_t len) const;
    // check_block_length for the last block of a tensor of `elements` values in blocks of `block`.
    Status check_tensor(int64_t elements, int64_t block) const;
    // A rotated format's element type and scale without the rotation: what quantizes values that are
    // rotated already (Rotation::kEndToEnd, D28), under the name "<name>@rotated". Kept for the
    // process's life; *this for a format that does not rotate.
    const FormatSpec& rotation_twin() const;
    friend bool operator==(const FormatSpec& a, const FormatSpec& b) {
        return a.kind == b.kind && a.bits == b.bits && a.fast_math == b.fast_math && a.name() == b.name();
    }
};

// Metadata bytes of one block as they travel (scale then offset), and back. A scale that is not
// representable in the format's scale type is a caller bug (asserted).
void write_metadata(const FormatSpec& f, float scale, float offset, uint8_t* out);
void read_metadata(const FormatSpec& f, const uint8_t* in, float* scale, float* offset);

// A format with a tensor amax (nvfp4) keeps each block's decode factor fl32(fl32(s_b T) fl32(1 / K))
// as its scale; what its implementations store is the E4M3 block scale s_b (docs/PLUGIN.md,
// "Two-level scales"). Both under f's declared T. nvfp4_factor_of: s_b must be a non-negative E4M3
// value (NaN: NaN). nvfp4_block_scale_of: the smallest s_b with that factor (a tiny T can give two
// the same one); NaN for NaN or for a number no s_b gives.
float nvfp4_factor_of(const FormatSpec& f, float sb);
float nvfp4_block_scale_of(const FormatSpec& f, float factor);
// Whether v is a non-negative E4M3 value (E4M3FN: 0 to 448, no NaN), what a block scale s_b is.
bool is_e4m3_scale_value(float v);

// The declaration of a format: every declared format's own, and for int<b> / int<b>-asym the
// declaration that reproduces NUMERICS 1.1 / 1.2. ds-int<b> has none (Error says why).
Result<Decl> declaration_of(const FormatSpec& f);
// A FormatSpec for a declaration (finalize()d) under a name.
FormatSpec make_declared(std::string name, const Decl& d);

// The integer formats of NUMERICS 1.1-1.3 (int<b>, int<b>-asym, ds-int<b>), in listing order.
const std::vector<FormatSpec>& builtin_formats();
// Every built-in format: the integer ones, ds-int4-fm and ds-int8-fm, then fp8-*, the MX family (and -rceil twins), nf4,
// the stochastic twins (-sr) of int<b> and fp8-*, the FP8 casts, FBGEMM's codecs, the rotated int<b>
// and QuickReduce's quickreduce-q4, -q6, -q8.
const std::vector<FormatSpec>& all_builtin_formats();
// Formats declared at run time (a TOML file named by the user); parse_format finds them too.
// Registering a name that is already known is an Error.
Status register_format(const FormatSpec& f);
std::vector<std::string> known_format_list();  // every built-in and registered name, in that order
std::string known_format_names();               // the same, joined with ", " (for messages)
Result<FormatSpec> parse_format(std::string_view name);

// What to do with NaN/inf (and range overflow) in an input block (NUMERICS.md section 4).
enum class Nonfinite : uint8_t { kError, kPropagate };
Result<Nonfinite> parse_nonfinite(std::string_view name);
const char* to_string(Nonfinite policy);

inline constexpr int64_t kDefaultBlock = 32;
// The block a list of formats (one per stage) runs at: the first fixed block among them, else
// `otherwise` (a declared path's own wire in the gate: flashinfer-fp8's 256 whatever gate.block is).
inline int64_t wire_block(const std::vector<FormatSpec>& stages, int64_t otherwise) {
    for (const auto& f : stages)
        if (f.fixed_block() > 0) return f.fixed_block();
    return otherwise;
}
// The sizes qtransit accepts, checked before any work (a size past one is an Error naming it): a
// block, the elements of one rank's tensor, and the ranks of a path. With all three at their limits
// every product the code forms (bytes of a tensor, N x M, codes of a block) fits in int64.
inline constexpr int64_t kMaxBlock = int64_t{1} << 30;
inline constexpr int64_t kMaxElements = int64_t{1} << 30;
inline constexpr int64_t kMaxRanks = int64_t{1} << 16;

}  // namespace qtransit
