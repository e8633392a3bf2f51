// `qtransit quantize`: one .npy tensor through the production kernel, checked against the
// reference bit for bit and against the per-element bound in exact arithmetic.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "qtransit/common/decl_toml.hpp"
#include "qtransit/kernels/npy.hpp"
#include "qtransit/reports/numbers.hpp"
#include "qtransit/gate/verify.hpp"

namespace qtransit::cli {
namespace {

nlohmann::json float_array(std::span<const float> v) {
    nlohmann::json a = nlohmann::json::array();
    for (float f : v) {
        if (std::isfinite(f)) a.push_back(reports::json_float(f));
        else a.push_back(nullptr);  // JSON has no NaN: a poisoned block's values print as null
    }
    return a;
}

Status write_file_atomic(const std::filesystem::path& path, const std::vector<uint8_t>& bytes) {
    const auto tmp = path.string() + ".tmp";
    {
        std::ofstream f(tmp, std::ios::binary);
        f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
        if (!f) return make_error(ErrorCode::kIo, tmp + ": cannot write");
    }
    std::error_code ec;
    std::filesystem::rename(tmp, path, ec);
    if (ec) return make_error(ErrorCode::kIo, path.string() + ": " + ec.message());
    return Status::Ok();
}

}  // namespace

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

    if (!a.out_dir.empty()) {
        namespace fs = std::filesystem;
        std::error_code ec;
        fs::create_directories(a.out_dir, ec);
        if (ec) return fail(a.out_dir + ": cannot create directory: " + ec.message());
        const fs::path dir(a.out_dir);
        const std::vector<int64_t> nblocks{static_cast<int64_t>(c.encoded.scales.size())};
        if (auto st = kernels::write_npy((dir / "decoded.npy").string(), c.decoded, arr->shape); !st) return fail(st.error());
        if (auto st = kernels::write_npy((dir / "scales.npy").string(), c.encoded.scales, nblocks); !st)
            return fail(st.error());
        if (!c.encoded.offsets.empty())
            if (auto st = kernels::write_npy((dir / "offsets.npy").string(), c.encoded.offsets, nblocks); !st)
                return fail(st.error());
        if (auto st = write_file_atomic(dir / "codes.bin", c.encoded.codes); !st) return fail(st.error());
    }

    if (a.json) {
        nlohmann::json j;
        j["format"] = format->name();
        if (format->stochastic()) j["seed"] = a.seed;
        j["block"] = a.block;
        j["elements"] = c.encoded.elements;
        j["shape"] = arr->shape;
        j["nonfinite"] = to_string(*policy);
        j["scales"] = float_array(c.encoded.scales);
        if (format->has_offset()) j["offsets"] = float_array(c.encoded.offsets);
        j["codes"] = c.codes;
        j["decoded"] = float_array(c.decoded);
        j["max_abs_error"] = c.bounds.max_error;
        j["max_error_to_bound"] = c.bounds.max_error_to_bound;
        j["bound_holds"] = c.bounds.holds;
        j["wire_bytes"] = wire;
        j["poisoned_blocks"] = c.poisoned_blocks;
        j["matches_reference"] = c.matches_reference;
        if (!c.matches_reference) j["reference_mismatch"] = c.mismatch;
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
