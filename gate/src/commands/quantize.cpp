// `qtransit quantize`: one .npy tensor through the production kernel (or a codec plugin), checked
// against the reference bit for bit and against the per-element bound in exact arithmetic.
#include <filesystem>
#include <optional>

#include "printf.hpp"
#include "qtransit/common/decl_toml.hpp"
#include "qtransit/gate/boundaries.hpp"
#include "qtransit/gate/codec_check.hpp"
#include "qtransit/gate/commands.hpp"
#include "qtransit/gate/verify.hpp"
#include "qtransit/gate/views.hpp"
#include "qtransit/kernels/codec.hpp"
#include "qtransit/kernels/npy.hpp"

namespace qtransit::gate {
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

// The tensor's shape: the .npy's, or --shape (the same elements read as another shape).
Result<std::vector<int64_t>> tensor_shape(const QuantizeRequest& a, const kernels::NpyArray& arr) {
    if (a.shape.empty()) return arr.shape;
    int64_t n = 1;
    std::string text;
    for (int64_t d : a.shape) {
        n *= d;
        text += (text.empty() ? "" : ",") + std::to_string(d);
    }
    if (n != static_cast<int64_t>(arr.data.size()))
        return make_error(ErrorCode::kInvalidArgument, "--shape " + text + " holds " + std::to_string(n) + " elements, but " + a.in +
                                                           " holds " + std::to_string(arr.data.size()));
    return a.shape;
}

Result<Printed> quantize_by_codec(const QuantizeRequest& a, const QuantizeSetup& s) {
    const kernels::PluginCodec& codec = *s.codec;
    const FormatSpec& format = s.format;
    const kernels::Conformance conf = s.conformance;
    auto arr = kernels::read_npy(a.in);
    if (!arr) return arr.error();
    const int64_t n = static_cast<int64_t>(arr->data.size());
    int64_t shard = a.shard > 0 ? a.shard : n;
    if (n == 0) return make_error(ErrorCode::kBadFile, a.in + ": the tensor has no elements");
    if (n % shard)
        return make_error(ErrorCode::kInvalidArgument,
                          "--shard " + std::to_string(a.shard) + " does not divide the " + std::to_string(n) + " elements");
    auto shape = tensor_shape(a, *arr);
    if (!shape) return shape.error();
    // A tiled format's codec quantizes the tiles as blocks in tile order (docs/PLUGIN.md, "2-D
    // blocks"): the tensor is reordered for it and its codes and decoded values back.
    std::optional<TileGrid> grid;
    std::vector<float> x = arr->data;
    if (format.tiled()) {
        if (a.shard > 0) return make_error(ErrorCode::kInvalidArgument, "--shard is for 1-D blocks; " + format.name() + " quantizes tiles");
        auto g = tile_grid(format, *shape, /*pad=*/true);
        if (!g) return g.error();
        grid = *g;
        x = to_tile_order<float>(x, *grid);
        shard = static_cast<int64_t>(x.size());  // padded to whole tiles
    }
    Site site;
    site.tensor = a.in;
    // A tensor amax (nvfp4) is the tensor's own, as for qtransit's kernel; the boundary inputs below
    // keep the declared one (block-level checks).
    auto r = codec_check(&codec, format.for_tensor(arr->data), x, s.block, shard, site, a.seed, conf);
    if (!r) return r.error();
    CodecCheck c = std::move(*r);
    if (grid && !c.first_difference.empty()) c.first_difference += " (an index in tile order)";
    Printed p;
    if (!c.refusal.empty()) {  // nothing to write or print but the disagreement
        p.complaints.push_back(c.refusal);
        p.passed = false;
        return p;
    }
    // The tensor is the user's; the generated boundary inputs (issue 47) are where the mistakes
    // nobody listed show, which a tensor of normal data almost never reaches. Run once the tensor
    // conforms: its own first difference is the more useful line.
    std::optional<BoundaryFinding> hunt;
    std::vector<BoundaryClass> classes;
    if (c.conforms && !a.no_hunt) {
        classes = tally_boundaries(codec, format, s.block, a.seed);
        hunt = first_finding(classes, conf);
    }
    if (grid) to_tensor_order(c, *grid);
    if (!a.out_dir.empty())
        if (auto st = write_quantize_outputs(a.out_dir, c, *shape); !st) return st.error();
    reports::QuantizedTensor q = quantized_tensor(c.encoded.format, c, *shape, Nonfinite::kError, a.seed);
    q.format = format.name();
    q.codec = codec.name();
    q.codec_description = codec.describe();
    q.conformance = kernels::to_string(conf);
    q.shard = shard;
    q.hunted = c.conforms && !a.no_hunt;
    q.check.boundary_classes = std::move(classes);
    q.hunt_found = hunt.has_value();
    q.hunt_violation = hunt && hunt->violation;
    if (hunt) {
        q.hunt_class = hunt->input_class;
        q.hunt_first = hunt->message;
    }
    p.out = a.json ? to_json(q).dump() + "\n" : to_text(q);
    if (q.hunt_fails()) {
        p.complaints.push_back("codec " + codec.name() + ": " + hunt->message + "; the boundary inputs differ in: " +
                               classes_summary(q.check.boundary_classes));
    } else if (!c.conforms) {
        if (!c.bound_holds)
            p.complaints.push_back("codec " + codec.name() + ": " + c.violation + (c.exact ? "" : "; first difference: ") + c.first_difference);
        else
            p.complaints.push_back("codec " + codec.name() + " " +
                                   (c.admissible_model ? "gives a result no admissible scale and step gives" : "differs from the reference") +
                                   ": " + c.first_difference);
    }
    p.passed = p.complaints.empty();
    return p;
}

}  // namespace

Result<QuantizeSetup> QuantizeRequest::validate() const {
    auto cf = codec_and_format(codec, format, rounding);
    if (!cf) return cf.error();
    QuantizeSetup s{cf->format, Nonfinite::kError, cf->codec, kernels::Conformance::kExact};
    if (this->block < 0) return make_error(ErrorCode::kInvalidArgument, "--block must be a positive integer (0: the format's own), got " +
                                                                         std::to_string(this->block));
    const int64_t block = this->block > 0 ? this->block : (s.format.fixed_block() ? s.format.fixed_block() : kDefaultBlock);
    s.block = block;
    for (int64_t d : shape)
        if (d < 0) return make_error(ErrorCode::kInvalidArgument, "--shape: dimensions must be >= 0, got " + std::to_string(d));
    auto conf = kernels::parse_conformance(conformance);
    if (s.codec) {
        if (!conf) return make_error(ErrorCode::kInvalidArgument, "--conformance: " + conf.error().message);
        s.conformance = *conf;
        if (nonfinite != "error")
            return make_error(ErrorCode::kInvalidArgument, "--nonfinite " + nonfinite +
                                                               ": a codec plugin refuses non-finite input (docs/PLUGIN.md); the policy is for "
                                                               "qtransit's kernels");
        if (auto st = s.codec->check_block(block); !st) return make_error(st.error().code, "--block: " + st.error().message);
        if (auto st = check_out_dir(out_dir); !st) return st.error();
        return s;
    }
    if (shard != 0) return make_error(ErrorCode::kInvalidArgument, "--shard is for --codec (qtransit's kernel quantizes the tensor as one shard)");
    if (auto st = s.format.check_block(block); !st) return make_error(st.error().code, "--block: " + st.error().message);
    auto policy = parse_nonfinite(nonfinite);
    if (!policy) return policy.error();
    s.policy = *policy;
    if (auto st = kernels::validate_block(block); !st) return st.error();
    // --conformance is the codec's tier; qtransit's kernel is always checked bit for bit.
    if (!conf) return make_error(ErrorCode::kInvalidArgument, "--conformance: " + conf.error().message);
    if (*conf != kernels::Conformance::kExact)
        return make_error(ErrorCode::kInvalidArgument, "--conformance " + conformance + " is for --codec (qtransit's kernel is checked bit for bit)");
    if (auto st = check_out_dir(out_dir); !st) return st.error();
    return s;
}

Result<Printed> quantize(const QuantizeRequest& a) {
    auto setup = a.validate();
    if (!setup) return setup.error();
    if (setup->codec) return quantize_by_codec(a, *setup);
    const FormatSpec& format = setup->format;
    const Nonfinite policy = setup->policy;
    const int64_t block = setup->block;
    auto arr = kernels::read_npy(a.in);
    if (!arr) return arr.error();
    if (arr->data.empty()) return make_error(ErrorCode::kBadFile, a.in + ": the tensor has no elements");
    auto shape_read = tensor_shape(a, *arr);
    if (!shape_read) return shape_read.error();
    const std::vector<int64_t> shape = *shape_read;

    Site site;
    site.tensor = a.in;
    auto check = quantize_tensor(format, arr->data, shape, block, policy, site, a.seed);
    if (!check) return check.error();
    const CodecCheck& c = *check;
    if (!a.out_dir.empty())
        if (auto st = write_quantize_outputs(a.out_dir, c, shape); !st) return st.error();

    Printed p;
    reports::QuantizedTensor q = quantized_tensor(format, c, shape, policy, a.seed);
    q.out_dir = a.out_dir;
    p.out = a.json ? to_json(q).dump() + "\n" : to_text(q);
    if (!c.bound_holds)
        p.complaints.push_back("error bound violated at element " + std::to_string(c.first_violation));
    else if (!c.exact)
        p.complaints.push_back("kernel and reference differ: " + c.first_difference);
    p.passed = p.complaints.empty();
    return p;
}

}  // namespace qtransit::gate
