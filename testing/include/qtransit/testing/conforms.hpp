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

#include "qtransit/kernels/plugin.hpp"

namespace qtransit::testing {

struct ConformOptions {
    int64_t block = 32;
    int64_t shard = 0;  // blocks restart every `shard` elements (0: the whole input)
    kernels::Conformance conformance = kernels::Conformance::kExact;
    uint64_t seed = 1;  // stochastic rounding's key; the generated inputs' seed
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
// outliers, mixed-scale, correlated) and the edge cases, at options.block.
Conformity conforms(const kernels::PluginCodec& codec, const ConformOptions& options = {});

}  // namespace qtransit::testing
