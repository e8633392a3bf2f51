#pragma once
// Inputs that hunt a format's boundaries (issue 47): derived from the format's definition
// (NUMERICS.md, docs/FORMATS.md) by solving for x, not drawn at random, so that mistakes nobody
// listed (a binary64 quotient, a scale off at its floor, a SIMD loop without its remainder, an index
// in binary32, a write past the output) meet the input that tells them apart from the reference.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "qtransit/common/format.hpp"
#include "qtransit/gate/codec_check.hpp"
#include "qtransit/kernels/plugin.hpp"

namespace qtransit::gate {

// One labelled input: `x` in shards of `shard`, quantized in blocks of `block`.
struct BoundaryCase {
    std::string input_class;  // near-ties, scale-boundaries, lengths, block-sizes, memory, long-tensors
    std::string what;         // the case in words
    std::vector<float> x;
    int64_t block = 0, shard = 0;
};

// The generated inputs the reference quantizes (refusal probes are not among them), for `format`
// and `block` (block-sizes: the spread of block sizes `accepts` takes).
std::vector<BoundaryCase> boundary_cases(const FormatSpec& format, int64_t block, uint64_t seed,
                                         const std::vector<int64_t>& other_blocks);

// What a hunt found first: `message` names the class, the case and the first difference.
struct BoundaryFinding {
    std::string input_class;
    std::string message;
    // past the format's bound too, or a refusal missed, or a write out of bounds: fails `bounded`
    // conformance as well as `exact`
    bool violation = false;
};
// Every class run against the codec (refusal probes and canaries, then boundary_cases' classes, all
// but long-tensors), each with its counts and first difference, in the order they ran.
std::vector<BoundaryClass> tally_boundaries(const kernels::PluginCodec& codec, const FormatSpec& format, int64_t block,
                                            uint64_t seed);
// The first class that differs; nullopt when none does. Under bounded conformance a difference
// within the bound does not stop the search: the first violation, else the first difference.
std::optional<BoundaryFinding> first_finding(const std::vector<BoundaryClass>& classes, kernels::Conformance conformance);
// "near-ties 37 elements in 4 of 12 cases, scale-boundaries 2 elements in 1 of 3 cases" over the
// classes that differ ("" when none does).
std::string classes_summary(const std::vector<BoundaryClass>& classes);

// long-tensors: one call of 2^24 + 2 blocks + 3 elements, compared with the reference on the blocks
// around element 2^24 (where an index held in binary32 first goes wrong) and on the first block.
std::optional<BoundaryFinding> long_call_check(const kernels::PluginCodec& codec, const FormatSpec& format,
                                               int64_t block, uint64_t seed);

}  // namespace qtransit::gate
