// `qtransit quantize`: one .npy tensor through the production kernel, checked against the
// reference bit for bit and against the per-element bound in exact arithmetic.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "commands.hpp"
#include "qtransit/common/decl_toml.hpp"
#include "qtransit/kernels/codec.hpp"
#include "qtransit/kernels/npy.hpp"
#include "qtransit/reports/numbers.hpp"
#include "qtransit/gate/boundaries.hpp"
#include "qtransit/gate/codec_check.hpp"
#include "qtransit/gate/verify.hpp"
#include "qtransit/kernels/plugin.hpp"

namespace qtransit::cli {

namespace {

// --out names a directory that is there or can be made: checked before any work, so that a file in
// its place is not found after the kernel ran.
Status check_out_dir(const std::string& out) {
    namespace fs = std::filesystem;
    if (out.empty()) return Status::Ok();
    std::error_code ec;
    fs::path p(out);
    if (fs::exists(p, ec) && !fs::is_directory(p, ec))
        return make_error(ErrorCode::kInvalidArgument, "--out " + printable(out) + ": not a directory (it is a file); name a directory");
    // The nearest part of the path that exists must be a directory, where the rest can be made.
    for (fs::path q = p.parent_path(); !q.empty(); q = q.parent_path()) {
        if (fs::exists(q, ec)) {
            if (!fs::is_directory(q, ec))
                return make_error(ErrorCode::kInvalidArgument,
                                  "--out " + printable(out) + ": " + printable(q.string()) + " is not a directory, so the directory cannot be made");
            break;
        }
        if (q == q.parent_path()) break;
    }
    return Status::Ok();
}

int run_quantize_codec(const QuantizeArgs& a, const kernels::PluginCodec& codec, const FormatSpec& format) {
    auto conf = kernels::parse_conformance(a.conformance);
    if (!conf) return fail("--conformance: " + conf.error().message);
    if (a.nonfinite != "error")
        return fail("--nonfinite " + a.nonfinite + ": a codec plugin refuses non-finite input (docs/PLUGIN.md); the policy is for qtransit's kernels");
    if (auto st = codec.check_block(a.block); !st) return fail("--block: " + st.error().message);
    if (auto st = check_out_dir(a.out_dir); !st) return fail(st.error());
    auto arr = kernels::read_npy(a.in);
    if (!arr) return fail(arr.error());
    const int64_t n = static_cast<int64_t>(arr->data.size());
    const int64_t shard = a.shard > 0 ? a.shard : n;
    if (n == 0) return fail(a.in + ": the tensor has no elements");
    if (n % shard) return fail("--shard " + std::to_string(a.shard) + " does not divide the " + std::to_string(n) + " elements");
    Site site;
    site.tensor = a.in;
    auto r = gate::codec_check(&codec, format, arr->data, a.block, shard, site, a.seed, *conf);
    if (!r) return fail(r.error());
    const gate::CodecCheck& c = *r;
    if (!c.refusal.empty()) {  // nothing to write or print but the disagreement
        std::fprintf(stderr, "qtransit: %s\n", c.refusal.c_str());
        return kExitCheckFailed;
    }
    // The tensor is the user's; the generated boundary inputs (issue 47) are where the mistakes
    // nobody listed show, which a tensor of normal data almost never reaches. Run once the tensor
    // conforms: its own first difference is the more useful line.
    std::optional<gate::BoundaryFinding> hunt;
    std::vector<gate::BoundaryClass> classes;
    bool hunt_fails = false;
    if (c.conforms && !a.no_hunt) {
        classes = gate::tally_boundaries(codec, format, a.block, a.seed);
        hunt = gate::first_finding(classes, *conf);
        hunt_fails = hunt && (*conf == kernels::Conformance::kExact || hunt->violation);
    }
    const gate::QuantizeCheck q = gate::to_quantize_check(c, arr->data);
    if (!a.out_dir.empty())
        if (auto st = gate::write_quantize_outputs(a.out_dir, q, arr->shape); !st) return fail(st.error());
    if (a.json) {
        auto j = gate::quantize_json(format, q, arr->shape, Nonfinite::kError, a.seed);
        j["codec"] = codec.name();
        j["conformance"] = kernels::to_string(*conf);
        j["shard"] = shard;
        j["differing_elements"] = c.differing_elements;
        j["differing_scale_blocks"] = c.differing_scale_blocks;
        j["elements_in_differing_blocks"] = c.elements_in_differing_blocks;
        j["max_ulps"] = c.max_ulps;
        if (c.admissible_model) {  // D23: exact conformance is "admissible"; the differing_ counts are against IEEE
            j["admissible"] = c.exact;
            j["inadmissible_elements"] = c.inadmissible_elements;
            j["inadmissible_steps"] = c.inadmissible_steps;
        }
        j["conforms"] = c.conforms;
        if (c.conforms && !a.no_hunt) {
            nlohmann::json h;
            h["conforms"] = !hunt_fails;
            h["input_class"] = hunt ? nlohmann::json(hunt->input_class) : nlohmann::json(nullptr);
            h["first_difference"] = hunt ? nlohmann::json(hunt->message) : nlohmann::json(nullptr);
            h["within_bound"] = !hunt || !hunt->violation;
            nlohmann::json per = nlohmann::json::array();
            for (const auto& k : classes)
                per.push_back({{"input_class", k.input_class}, {"cases", k.cases}, {"differing_cases", k.differing_cases},
                               {"differing_elements", k.differing_elements}, {"violation", k.violation}});
            h["classes"] = per;
            j["boundary_inputs"] = h;
            j["conforms"] = !hunt_fails;
        }
        std::printf("%s\n", j.dump().c_str());
    } else {
        std::printf("codec             %s\n", codec.describe().c_str());
        std::printf("format            %s (block %lld, blocks restart every %lld elements)\n", format.name().c_str(),
                    static_cast<long long>(a.block), static_cast<long long>(shard));
        std::printf("elements          %lld in %zu blocks\n", static_cast<long long>(n), c.encoded.scales.size());
        std::printf("max error/bound   %.6f (%s, exact arithmetic, the reference's block statistics)\n", c.max_error_to_bound,
                    c.bound_holds ? "bound holds" : "BOUND VIOLATED");
        if (c.admissible_model)
            std::printf("admissible        %s\n", c.exact ? "yes: every element is a result of an admissible scale and step (D23)"
                                                         : c.first_difference.c_str());
        else
            std::printf("codec = reference %s\n", c.exact ? "yes, bit for bit" : c.first_difference.c_str());
        std::printf("%s %lld elements (%lld in the %lld blocks whose scale differs), largest %lld ulp\n",
                    c.admissible_model ? "differs from IEEE" : "differing        ",
                    static_cast<long long>(c.differing_elements), static_cast<long long>(c.elements_in_differing_blocks),
                    static_cast<long long>(c.differing_scale_blocks), static_cast<long long>(c.max_ulps));
        std::printf("conformance       %s: %s\n", kernels::to_string(*conf), c.conforms ? "conforms" : "DOES NOT CONFORM");
        if (c.conforms && !a.no_hunt)
            std::printf("boundary inputs   %s\n", !hunt              ? "conform: codec = reference bit for bit on every generated input"
                                                   : hunt_fails       ? "DO NOT CONFORM (below)"
                                                                      : "conform within the bound; they differ in bits (bounded conformance)");
    }
    if (hunt_fails) {
        std::fprintf(stderr, "qtransit: codec %s: %s; the boundary inputs differ in: %s\n", codec.name().c_str(), hunt->message.c_str(),
                     gate::classes_summary(classes).c_str());
        return kExitCheckFailed;
    }
    if (!c.conforms) {
        if (!c.bound_holds)
            std::fprintf(stderr, "qtransit: codec %s: %s%s%s\n", codec.name().c_str(), c.violation.c_str(),
                         c.exact ? "" : "; first difference: ", c.first_difference.c_str());
        else
            std::fprintf(stderr, "qtransit: codec %s %s: %s\n", codec.name().c_str(),
                         c.admissible_model ? "gives a result no admissible scale and step gives" : "differs from the reference",
                         c.first_difference.c_str());
        return kExitCheckFailed;
    }
    return kExitOk;
}

}  // namespace

Result<QuantizeSetup> quantize_setup(const QuantizeArgs& a) {
    if (!a.codec.empty()) return make_error(ErrorCode::kInvalidArgument, "quantize_setup is for qtransit's kernels (no --codec)");
    auto cf = codec_and_format("", a.format, a.rounding);
    if (!cf) return cf.error();
    if (a.shard != 0) return make_error(ErrorCode::kInvalidArgument, "--shard is for --codec (qtransit's kernel quantizes the tensor as one shard)");
    if (auto st = cf->format.check_block(a.block); !st) return make_error(st.error().code, "--block: " + st.error().message);
    auto policy = parse_nonfinite(a.nonfinite);
    if (!policy) return policy.error();
    if (auto st = kernels::validate_block(a.block); !st) return st.error();
    // --conformance is the codec's tier; qtransit's kernel is always checked bit for bit.
    auto conf = kernels::parse_conformance(a.conformance);
    if (!conf) return make_error(ErrorCode::kInvalidArgument, "--conformance: " + conf.error().message);
    if (*conf != kernels::Conformance::kExact)
        return make_error(ErrorCode::kInvalidArgument, "--conformance " + a.conformance +
                                                           " is for --codec (qtransit's kernel is checked bit for bit)");
    if (auto st = check_out_dir(a.out_dir); !st) return st.error();
    return QuantizeSetup{cf->format, *policy};
}

int run_quantize(const QuantizeArgs& a) {
    auto cf = codec_and_format(a.codec, a.format, a.rounding);
    if (!cf) return fail(cf.error());
    const auto& codec = cf->codec;
    const FormatSpec& format = cf->format;
    if (codec) return run_quantize_codec(a, *codec, format);
    auto setup = quantize_setup(a);
    if (!setup) return fail(setup.error());
    const auto* policy = &setup->policy;
    auto arr = kernels::read_npy(a.in);
    if (!arr) return fail(arr.error());
    if (arr->data.empty()) return fail(a.in + ": the tensor has no elements");

    Site site;
    site.tensor = a.in;
    auto check = gate::quantize_and_check(format, arr->data, a.block, *policy, site, a.seed);
    if (!check) return fail(check.error());
    const gate::QuantizeCheck& c = *check;
    const int64_t wire = c.encoded.wire_bytes();

    if (!a.out_dir.empty())
        if (auto st = gate::write_quantize_outputs(a.out_dir, c, arr->shape); !st) return fail(st.error());

    if (a.json) {
        const auto j = gate::quantize_json(format, c, arr->shape, *policy, a.seed);
        std::printf("%s\n", j.dump().c_str());
    } else {
        std::printf("format            %s (block %lld, policy %s)\n", format.name().c_str(),
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
