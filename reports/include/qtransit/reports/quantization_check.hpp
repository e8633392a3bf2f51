// One quantization checked against the reference: the one struct every command that checks a
// quantization fills (issue 48, D65). Plain data: the gate's kernel check extends it with the
// kernel's own output (gate::CodecCheck), report.json's format_checks[] hold it with their labels
// (FormatCheck), and the writers read it from here.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qtransit/common/tiles.hpp"

namespace qtransit::reports {

struct QuantizationCheck {
    // Differences a declared convention explains (docs/FORMATS.md section 10): blocks where the codec
    // wrote exactly what the library's declared rule gives, not the format's. Reported apart; not a
    // failure. convention: its TOML key; rule: the declared value; the blocks it explained and the
    // differing elements in them; the first such block, in words.
    struct Convention {
        std::string convention, rule;
        int64_t blocks = 0, elements = 0;
        std::string first;
    };
    // One input class of the generated boundary inputs (gate/boundaries.hpp) run against a codec: how
    // many cases it holds, how many differed from the reference and in how many elements, and the first.
    struct BoundaryClass {
        std::string input_class;
        int64_t cases = 0, differing_cases = 0, differing_elements = 0;
        bool violation = false;                   // past the bound, a refusal missed, a write out of bounds
        std::string first;                        // the first differing case, in words ("" when none differs)
        std::vector<std::string> differing_what;  // what each differing case is (its sentence), the first 8
        int64_t elements = 0;                     // elements compared, over every case
        std::vector<Convention> conventions;      // differences the declared conventions explain
        int64_t convention_elements() const {
            int64_t n = 0;
            for (const auto& c : conventions) n += c.elements;
            return n;
        }
    };

    int64_t elements = 0, block = 0, shard = 0;  // blocks restart every `shard` elements
    bool exact = false;             // every scale, offset, wire byte, code and decoded value equal
                                    // (ds-int<b>-fm: every element one of the admissible results, D23)
    std::string first_difference;   // "" when exact
    int64_t first_differing = -1;   // the element of first_difference, when it is one
    // the input class that found it: a boundary class (gate/boundaries.hpp) or "edge-tensor" on the
    // edge-case tensor, "" otherwise (the caller's input)
    std::string input_class;
    // Every class of the generated boundary inputs, when they ran (a codec on the edge tensor), in
    // the order they ran: a verdict names each class that differs, not only the first (issue 52).
    std::vector<BoundaryClass> boundary_classes;
    // Differences explained by the format's declared conventions, by convention: over this check's
    // own input, the refusal probe's and the boundary classes' (each class keeps its own as well).
    std::vector<Convention> conventions;
    // ds-int<b>-fm only (then exact means admissible, and the differing_ counts below compare with
    // the IEEE arithmetic, which is one admissible result among several)
    bool admissible_model = false;
    int64_t inadmissible_elements = 0, inadmissible_steps = 0;
    int64_t differing_elements = 0;            // code or decoded value differs
    int64_t differing_scale_blocks = 0;        // blocks whose scale (or offset) differs
    int64_t elements_in_differing_blocks = 0;  // of differing_elements, those in such blocks
    int64_t max_ulps = 0;           // largest |decoded - reference| in units in the last place
    bool bound_holds = true;        // every element within the format's bound
    int64_t first_violation = -1;
    std::string violation;          // the first element past its bound, in words
    std::string refusal;            // one side refused what the other quantized (then nothing else is set)
    double max_error_to_bound = 0;
    double max_abs_error = 0;       // largest |x - decoded| over the finite decoded values
    int64_t poisoned_blocks = 0;    // blocks a non-finite policy poisoned (NaN scale)
    bool conforms = false;          // exact, or (bounded conformance) bound_holds
    // Decoded values against the reference's, in units in the last place: 0, 1, 2, 3-4, 5-16,
    // 17-256, more, and a non-finite value where the other is not (or another NaN).
    std::vector<int64_t> ulp_histogram;
    // The element with the largest |x - decoded| / E(x) (-1: none finite; run_check only).
    int64_t worst_element = -1;
    double worst_ratio = 0, worst_error = 0, worst_bound = 0;
    float worst_input = 0, worst_decoded = 0;  // its input and decoded value (when worst_element >= 0)
    // The histogram's buckets by name ("0", "1", "2", "3-4", "5-16", "17-256", ">256", "non-finite").
    static const std::vector<std::string>& ulp_buckets();
};

// One `verify quantize` (a quantization done elsewhere, from its files or Python's arrays): what was
// compared, under what, and the check. `qtransit verify quantize` and Python's verify_quantize print
// and report it through the two writers below.
struct VerifiedQuantization {
    std::string format;
    int64_t block = 0, blocks = 0;
    bool format_has_offset = false;
    std::string conformance;  // asked: "exact" or "bounded"
    // What the run gave besides its decoded values (the reference's own stands in for the rest), and
    // the names the text shows for each: files for the command, arguments for Python.
    bool codes_given = false, scales_given = false, offsets_given = false;
    std::string decoded_name, codes_name, scales_name, offsets_name;
    QuantizationCheck check;
};
// `qtransit verify quantize --json`'s object (docs/REPORT.md).
nlohmann::json to_json(const VerifiedQuantization& v);
// Its text: what was compared, exact, the bound, the ulps, the worst element, the verdict.
std::string to_text(const VerifiedQuantization& v);

// One `qtransit quantize` (and Python's quantize): a tensor quantized by qtransit's kernel or by a
// codec plugin, and its check against the reference. The arrays are views of the caller's check.
struct QuantizedTensor {
    std::string format;
    bool stochastic = false;  // the seed is shown for a stochastic format only
    uint64_t seed = 0;
    int64_t block = 0;
    int64_t elements = 0;         // quantized (a tiled format's padding included)
    int64_t tensor_elements = 0;  // the input's
    std::vector<int64_t> shape;
    std::string nonfinite;        // the policy
    std::span<const float> scales;
    bool has_offsets = false;     // an -asym format (offsets: its per-block minimums)
    std::span<const float> offsets;
    // NVFP4 (D58): the tensor amax the blocks took and each block's E4M3 scale byte s_b (-1: a poisoned block)
    bool takes_tensor_amax = false;
    float tensor_amax = 0;
    std::vector<int> e4m3_scale_bytes;
    std::span<const int32_t> codes;  // in the tensor's order
    std::span<const float> decoded;
    int64_t wire_bytes = 0;
    TileGrid grid;                // a tiled format's (tile_rows 0: not tiled)
    std::string out_dir;          // where --out wrote the files ("" none)
    QuantizationCheck check;      // its boundary_classes: a codec's generated inputs, when they ran
    // A codec plugin's run (codec "" for qtransit's kernel): the conformance asked, where its blocks
    // restart, and whether the generated boundary inputs ran and what they found first.
    std::string codec, codec_description, conformance;
    int64_t shard = 0;
    bool hunted = false, hunt_found = false, hunt_violation = false;
    std::string hunt_class, hunt_first;
    // The boundary inputs fail the conformance asked: any difference under exact, one past the bound under bounded.
    bool hunt_fails() const { return hunt_found && (conformance == "exact" || hunt_violation); }
};
// `qtransit quantize --json`'s object (README "The command"): every binary32 shortest, NaN (a poisoned
// block) as null; a codec's run adds its conformance, counts and boundary inputs.
nlohmann::json to_json(const QuantizedTensor& q);
// Its text: the format, the blocks, the wire, the error against the bound, the verdict.
std::string to_text(const QuantizedTensor& q);

}  // namespace qtransit::reports
