// `qtransit quantize`: one .npy tensor through the production kernel, checked against the
// reference bit for bit and against the per-element bound in exact arithmetic.
#include <cstdio>

#include "commands.hpp"
#include "qtransit/common/decl_toml.hpp"
#include "qtransit/kernels/codec.hpp"
#include "qtransit/kernels/npy.hpp"
#include "qtransit/reports/numbers.hpp"
#include "qtransit/gate/verify.hpp"

namespace qtransit::cli {

int run_quantize(const QuantizeArgs& a) {
    auto named = resolve_format(a.format);
    if (!named) return fail(named.error());
    auto format = apply_rounding(*named, a.rounding);
    if (!format) return fail(format.error());
    if (auto st = format->check_block(a.block); !st) return fail("--block: " + st.error().message);
    auto policy = parse_nonfinite(a.nonfinite);
    if (!policy) return fail(policy.error());
    if (auto st = kernels::validate_block(a.block); !st) return fail(st.error());
    auto arr = kernels::read_npy(a.in);
    if (!arr) return fail(arr.error());

    Site site;
    site.tensor = a.in;
    auto check = gate::quantize_and_check(*format, arr->data, a.block, *policy, site, a.seed);
    if (!check) return fail(check.error());
    const gate::QuantizeCheck& c = *check;
    const int64_t wire = c.encoded.wire_bytes();

    if (!a.out_dir.empty())
        if (auto st = gate::write_quantize_outputs(a.out_dir, c, arr->shape); !st) return fail(st.error());

    if (a.json) {
        const auto j = gate::quantize_json(*format, c, arr->shape, *policy, a.seed);
        std::printf("%s\n", j.dump().c_str());
    } else {
        std::printf("format            %s (block %lld, policy %s)\n", format->name().c_str(),
                    static_cast<long long>(a.block), to_string(*policy));
        std::printf("elements          %lld in %zu blocks (%lld poisoned)\n", static_cast<long long>(c.encoded.elements),
                    c.encoded.scales.size(), static_cast<long long>(c.poisoned_blocks));
        std::printf("wire bytes        %lld (%.3f bits/element; binary32 input %lld bytes)\n",
                    static_cast<long long>(wire),
                    c.encoded.elements ? 8.0 * static_cast<double>(wire) / static_cast<double>(c.encoded.elements) : 0.0,
                    static_cast<long long>(4 * c.encoded.elements));
        std::printf("max |error|       %s\n", reports::shortest(c.bounds.max_error).c_str());
        std::printf("max error/bound   %.6f (%s, exact arithmetic)\n", c.bounds.max_error_to_bound,
                    c.bounds.holds ? "bound holds" : "BOUND VIOLATED");
        std::printf("kernel = reference %s\n", c.matches_reference ? "yes, bit for bit" : c.mismatch.c_str());
        if (!a.out_dir.empty()) std::printf("written to        %s\n", a.out_dir.c_str());
    }
    if (!c.bounds.holds) {
        std::fprintf(stderr, "qtransit: error bound violated at element %lld\n",
                     static_cast<long long>(c.bounds.first_violation));
        return kExitCheckFailed;
    }
    if (!c.matches_reference) {
        std::fprintf(stderr, "qtransit: kernel and reference differ: %s\n", c.mismatch.c_str());
        return kExitCheckFailed;
    }
    return kExitOk;
}

}  // namespace qtransit::cli
