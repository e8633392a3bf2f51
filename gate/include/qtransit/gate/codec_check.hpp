// A kernel (qtransit's own, or a user's codec plugin) against the reference, over a tensor whose
// blocks restart at every shard: every scale, offset, wire byte, code and decoded value compared
// bit for bit, the first difference named (element, block, both values, both codes), and every
// element's error compared in exact arithmetic with the format's bound for its block, computed from
// the reference's block statistics (so a kernel cannot widen its own bound by a wrong scale).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "qtransit/common/format.hpp"
#include "qtransit/kernels/codec.hpp"
#include "qtransit/kernels/plugin.hpp"
#include "qtransit/common/tiles.hpp"
#include "qtransit/reference/formats.hpp"
#include "qtransit/reports/gate_result.hpp"

namespace qtransit::gate {

// Differences a declared convention explains (docs/FORMATS.md section 10), tallied by convention:
// the report's own struct, so that the check's tallies go into report.json as they are.
using ConventionTally = reports::QuantizationCheck::Convention;
// Adds `from`'s counts to `into`'s (by convention; the first example kept).
void add_tallies(std::vector<ConventionTally>& into, const std::vector<ConventionTally>& from);
// One block explained by the conventions of `applied` (bits of reference::ConventionBit): counted
// under each, with `elements` differing elements and `example` as its first example.
void tally_applied(std::vector<ConventionTally>& into, const Decl& d, uint32_t applied, int64_t elements, const std::string& example);
// "divide_floor = 1.1754944e-38 in 4 blocks (32 differing elements); nonfinite = poison in ..." ("" for none).
std::string tallies_summary(const std::vector<ConventionTally>& t);

// One input class of the generated boundary inputs (boundaries.hpp) run against a codec.
using BoundaryClass = reports::QuantizationCheck::BoundaryClass;

// One quantization checked (reports::QuantizationCheck: the comparison, the bound, the classes),
// with the kernel's own output. codec_check and run_check fill every field; quantize_and_check
// (verify.hpp) the comparison's verdict: exact and first_difference, the bound (checked on the
// kernel's own scales), max_abs_error and poisoned_blocks, not the tallies or the histogram.
struct CodecCheck : reports::QuantizationCheck {
    kernels::Conformance conformance = kernels::Conformance::kExact;
    // The kernel's output in qtransit's layout (blocks of every shard in order).
    kernels::EncodedTensor encoded;
    std::vector<int32_t> codes;     // unpacked
    std::vector<float> decoded;
    TileGrid grid;  // a tiled format's tensor (quantize_tensor, to_tensor_order), else zeros
};

// One quantization done elsewhere (`qtransit verify quantize`): what the run wrote. decoded is
// required; what was not given is not compared (the reference's own stands in for it).
struct RunQuantization {
    std::vector<float> decoded;
    bool has_wire = false, has_codes = false, has_scales = false, has_offsets = false;
    std::vector<uint8_t> wire_codes;  // packed wire codes in qtransit's layout (`quantize --out`'s codes.bin)
    std::vector<int32_t> codes;       // one code per element
    std::vector<float> scales, offsets;
};
// The run's quantization of x against the reference (blocks restart every `shard` elements; 0: the
// whole tensor), as codec_check judges a kernel's. An Error for a bad input: the reference refuses x
// (a NaN names its index), a count that does not fit the format, block and shard, a code that is not
// one of the format's.
Result<CodecCheck> run_check(const FormatSpec& format, std::span<const float> x, int64_t block, int64_t shard,
                             const RunQuantization& run, kernels::Conformance conformance);
// A tiled format (FORMATS.md section 8): x, the run's decoded values and its integer codes, given in the
// tensor's row-major order of `shape`, put in tile order, as run_check takes them (the scales and a wire
// are in tile order already). Nothing to do for another format; an Error for a shape the tile does not
// divide, or a shard (blocks are tiles).
Status tile_order_run(const FormatSpec& format, std::span<const int64_t> shape, int64_t shard, std::vector<float>& x,
                      RunQuantization& run);

// What a kernel check encodes shard s (of `shard` elements) with: the check's seed, and its site
// with the index of the shard's first element (stochastic rounding's and random signs' key).
// codec_check's own kernel run and the gate's GPU comparison take the same.
kernels::CodecOptions shard_options(const Site& site, uint64_t seed, int64_t s, int64_t shard);

// `codec` null: qtransit's own CPU kernels. x is cast to the codec's input type first (the
// reference quantizes the cast values); decoded values are compared with the reference's rounded to
// the codec's output type. An Error only when kernel and reference both refuse the input (then it
// is a bad input, and the Error is the reference's); a refusal by one of them only is a difference.
// On the edge-case tensor a codec also meets refusal_probe(): a probe block it encodes is a
// difference (not exact, no bound, named in first_difference and violation).
Result<CodecCheck> codec_check(const kernels::PluginCodec* codec, const FormatSpec& format, std::span<const float> x,
                               int64_t block, int64_t shard, const Site& site, uint64_t seed,
                               kernels::Conformance conformance);

// The codec against the inputs the reference refuses (NUMERICS section 4, PLUGIN.md "Non-finite
// input"): one block of `block` elements for each of NaN, +inf and -inf, and, where the format has a
// range limit (int<b>-asym, ds-int<b>, declarations that refuse one), a block whose range overflows,
// each cast to the codec's input type first. The codec must refuse every one. "" when it did;
// otherwise the first block it encoded, in words, naming the offending element. codec_check runs it
// on the edge-case tensor (x and shard exactly as edge_tensor() gives them for the block and seed),
// so the gate, `formats validate` and conforms() check it once per format.
// A format with a nonfinite convention declared (FORMATS.md section 10): a probe block the codec
// encodes and decodes as the convention says (poison: NaN throughout; propagate: the non-finite
// inputs non-finite) is the convention, tallied into *tallies when given.
std::string refusal_probe(const kernels::PluginCodec& codec, const FormatSpec& format, int64_t block, uint64_t seed,
                          std::vector<ConventionTally>* tallies = nullptr);

// Whether the codec's output for a call of x (one shard, blocks of `block`) that the reference
// refuses is what the format's declared conventions give (nonfinite = "poison" or "propagate"):
// decodes it and compares every block. On success adds to *tallies (when given).
bool refusal_as_declared(const kernels::PluginCodec& codec, const FormatSpec& format, std::span<const float> x, int64_t block,
                         std::span<const uint8_t> codes, std::span<const float> scales, std::span<const float> offsets,
                         std::vector<ConventionTally>* tallies);

// The edge cases every kernel check adds to its random inputs, for `format` and `block`: exact
// ties (on power-of-two and on non-power-of-two scales), subnormal blocks (a negative absmax, scales
// that lose bits), subnormals under a normal absmax, ±0 and constant blocks, the largest magnitude
// last, one-signed short blocks, FLT_MAX where the format takes it. Shards of `shard_length()`
// elements, which is not a multiple of the block (for block >= 2), so short blocks restart at
// every shard. Blocks the reference refuses are left out.
struct EdgeTensor {
    std::vector<float> x;
    int64_t shard = 0;
    // x[boundary_from..] are whole shards of code boundaries (code_boundaries.hpp: the last float of each
    // code and the first of the next, in blocks anchored to awkward scales); -1 when the format has
    // none (rotated, stochastic, blocks under 2).
    int64_t boundary_from = -1;
};
// The input class of element i of an edge tensor, for messages: "code-boundaries" or "edge-tensor".
std::string edge_input_class(const EdgeTensor& e, int64_t i);
EdgeTensor edge_tensor(const FormatSpec& format, int64_t block, uint64_t seed);

}  // namespace qtransit::gate
