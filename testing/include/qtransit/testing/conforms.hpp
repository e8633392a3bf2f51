// A codec plugin checked from a user's own test suite: conforms() runs the gate's kernel check (every
// scale, offset, wire byte, code and decoded value against qtransit's reference; every element's
// error against the format's bound in exact arithmetic) and returns a verdict that names the first
// difference. With blocks.hpp's generators it makes a RapidCheck property in a few lines:
//
//   auto codec = qtransit::kernels::PluginCodec::load("libmy_codec.so");
//   rc::check([&](void) {
//       const auto c = *qtransit::testing::tensor_case();
//       RC_ASSERT(qtransit::testing::conforms(**codec, c.x, {.block = c.block}));
//   });
#pragma once

#include <cstdint>
#include <ostream>
#include <span>
#include <string>

#include <vector>

#include "qtransit/gate/boundaries.hpp"
#include "qtransit/kernels/plugin.hpp"

namespace qtransit::testing {

struct ConformOptions {
    int64_t block = 32;
    int64_t shard = 0;  // blocks restart every `shard` elements (0: the whole input)
    kernels::Conformance conformance = kernels::Conformance::kExact;
    uint64_t seed = 1;  // stochastic rounding's key; the generated inputs' seed
    // A format with a tensor amax (nvfp4): the T the codec is handed and the reference quantizes
    // under; < 0: x's own largest finite |x|, as the recipe takes it (the edge cases: the declared T).
    float tensor_amax = -1.0f;
};

struct Conformity {
    bool ok = false;
    std::string message;           // one line: what was checked, and the first difference when not ok
    std::string first_difference;  // element, block, both values, both codes ("" when exact)
    int64_t elements = 0, differing_elements = 0, max_ulps = 0;
    bool exact = false, bound_holds = false;
    bool refused = false;          // codec and reference both refused the input (a conforming outcome)
    explicit operator bool() const { return ok; }
};
std::ostream& operator<<(std::ostream& os, const Conformity& c);  // the message (gtest, RapidCheck)

// The codec on `x` (its format is the codec's).
Conformity conforms(const kernels::PluginCodec& codec, std::span<const float> x, const ConformOptions& options = {});
// The codec on the gate's inputs: 4096 elements of each distribution (normal, uniform, heavy,
// outliers, mixed-scale, correlated), the edge cases, and the inputs generated at the format's
// boundaries (gate/boundaries.hpp: near-ties, scale boundaries, lengths, block sizes, canaries
// after every output buffer), at options.block. The message names the input class that found the
// first difference.
Conformity conforms(const kernels::PluginCodec& codec, const ConformOptions& options = {});

// The generated boundary inputs one by one, each with its class and a sentence saying what it is,
// for a suite that wants them as its own cases (rc::gen::elementOf(boundary_inputs(...)), or a
// parameterized test): `x` in shards of `shard`, blocks of `block`. Derived from the codec's
// format; the block-sizes class uses the blocks of {1, 2, 3, 31, 33, 64, 65, 100, 128, 4096} the
// codec accepts.
std::vector<gate::BoundaryCase> boundary_inputs(const kernels::PluginCodec& codec, int64_t block, uint64_t seed = 1);

}  // namespace qtransit::testing
