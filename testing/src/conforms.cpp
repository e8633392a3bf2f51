#include "qtransit/testing/conforms.hpp"

#include <vector>

#include "qtransit/gate/codec_check.hpp"
#include "qtransit/kernels/inputs.hpp"

namespace qtransit::testing {

std::ostream& operator<<(std::ostream& os, const Conformity& c) { return os << c.message; }

Conformity conforms(const kernels::PluginCodec& codec, std::span<const float> x, const ConformOptions& o) {
    Conformity r;
    r.elements = static_cast<int64_t>(x.size());
    Site site;
    site.tensor = "conforms() input";
    const FormatSpec f = o.tensor_amax >= 0 ? codec.format().with_tensor_amax(o.tensor_amax) : codec.format().for_tensor(x);
    auto c = gate::codec_check(&codec, f, x, o.block, o.shard > 0 ? o.shard : r.elements, site, o.seed, o.conformance);
    if (!c) {
        // Both refusing a non-finite or out-of-range input is the format's specified outcome; any
        // other Error (no elements, a shard that does not divide them) checked nothing: not a pass.
        const bool both_refuse = c.error().code == ErrorCode::kNonFinite || c.error().code == ErrorCode::kRangeOverflow;
        r.refused = both_refuse;
        r.ok = both_refuse;
        r.message = both_refuse ? "codec " + codec.name() + " and the reference both refuse this input: " + c.error().message
                                : "nothing was checked: " + c.error().message;
        return r;
    }
    r.exact = c->exact;
    r.bound_holds = c->bound_holds;
    r.ok = c->conforms;
    r.first_difference = c->first_difference;
    r.differing_elements = c->differing_elements;
    r.max_ulps = c->max_ulps;
    r.message = "codec " + codec.name() + " (" + codec.format().name() + ", block " + std::to_string(o.block) + ", " +
                kernels::to_string(o.conformance) + ") on " + std::to_string(r.elements) + " elements: " +
                (c->exact ? std::string("equals the reference bit for bit")
                          : std::to_string(c->differing_elements) + " differ, largest " + std::to_string(c->max_ulps) +
                                " ulp; first difference: " + c->first_difference) +
                (c->bound_holds ? "" : "; an element exceeds the format's bound");
    return r;
}

Conformity conforms(const kernels::PluginCodec& codec, const ConformOptions& o) {
    using D = kernels::Distribution;
    Conformity total;
    total.ok = total.exact = total.bound_holds = true;
    std::vector<float> x(4096);
    auto fold = [&](const Conformity& c, const std::string& what) {
        total.elements += c.elements;
        total.differing_elements += c.differing_elements;
        total.max_ulps = std::max(total.max_ulps, c.max_ulps);
        total.exact = total.exact && (c.exact || c.refused);
        total.bound_holds = total.bound_holds && (c.bound_holds || c.refused);
        if (total.ok && !c.ok) {
            total.ok = false;
            total.first_difference = c.first_difference;
            total.message = what + ": " + c.message;
        }
    };
    for (D d : {D::kNormal, D::kUniform, D::kHeavy, D::kOutliers, D::kMixedScale, D::kCorrelated}) {
        kernels::generate_span(d, o.seed, 0, 0, x);
        fold(conforms(codec, x, o), kernels::to_string(d));
    }
    const gate::EdgeTensor e = gate::edge_tensor(codec.format(), o.block, o.seed);
    ConformOptions eo = o;
    eo.shard = e.shard;
    if (codec.format().takes_tensor_amax()) eo.tensor_amax = codec.format().decl->tensor_amax;  // the boundaries' T
    fold(conforms(codec, e.x, eo), "edge cases and boundary inputs");  // codec_check hunts on the edge tensor
    if (total.ok)
        total.message = "codec " + codec.name() + " conforms (" + kernels::to_string(o.conformance) + ") on " +
                        std::to_string(total.elements) + " elements of six distributions and the edge cases, and on the generated boundary inputs" +
                        (total.exact ? ", bit for bit" : "; " + std::to_string(total.differing_elements) + " differ in bits");
    return total;
}

std::vector<gate::BoundaryCase> boundary_inputs(const kernels::PluginCodec& codec, int64_t block, uint64_t seed) {
    std::vector<int64_t> others;
    for (int64_t b : std::initializer_list<int64_t>{1, 2, 3, 31, 33, 64, 65, 100, 128, 4096})
        if (b != block && codec.check_block(b)) others.push_back(b);
    return gate::boundary_cases(codec.format(), block, seed, others);
}

}  // namespace qtransit::testing
