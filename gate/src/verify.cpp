#include "qtransit/common/bits.hpp"
#include "qtransit/gate/verify.hpp"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "qtransit/kernels/npy.hpp"
#include "qtransit/reports/files.hpp"
#include "qtransit/reports/numbers.hpp"

namespace qtransit::gate {
namespace {

template <class T>
std::string first_difference(const char* what, std::span<const T> k, std::span<const T> r) {
    if (k.size() != r.size())
        return std::string(what) + ": kernel has " + std::to_string(k.size()) + " entries, reference " +
               std::to_string(r.size());
    for (size_t i = 0; i < k.size(); ++i) {
        bool same;
        if constexpr (std::is_same_v<T, float>) same = same_bits(k[i], r[i]);
        else same = k[i] == r[i];
        if (!same) {
            std::string kv, rv;
            if constexpr (std::is_same_v<T, float>) {
                kv = reports::shortest(k[i]);
                rv = reports::shortest(r[i]);
            } else {
                kv = std::to_string(k[i]);
                rv = std::to_string(r[i]);
            }
            return std::string(what) + "[" + std::to_string(i) + "]: kernel " + kv + ", reference " + rv;
        }
    }
    return {};
}

}  // namespace

Result<CodecCheck> quantize_tensor(const FormatSpec& format, std::span<const float> x, std::span<const int64_t> shape, int64_t block,
                                      Nonfinite policy, const Site& site, uint64_t seed) {
    if (!format.tiled()) return quantize_and_check(format.for_tensor(x), x, block, policy, site, seed);
    auto grid = tile_grid(format, shape, /*pad=*/true);
    if (!grid) return grid.error();
    const std::vector<float> xt = to_tile_order(x, *grid);
    auto c = quantize_and_check(format.for_tensor(x), xt, block, policy, site, seed);
    if (!c) {  // name the element by its place in the tensor, not in tile order
        Error e = c.error();
        const std::string key = "element ";
        if (const size_t at = e.message.find(key); at != std::string::npos) {
            size_t end = at + key.size();
            while (end < e.message.size() && std::isdigit(static_cast<unsigned char>(e.message[end]))) ++end;
            if (end > at + key.size()) {
                const int64_t k = std::stoll(e.message.substr(at + key.size(), end - at - key.size()));
                e.message.replace(at, end - at, key + std::to_string(tensor_index(k, *grid)));
            }
        }
        return e;
    }
    to_tensor_order(*c, *grid);
    if (!c->first_difference.empty()) c->first_difference += " (an index in tile order)";
    return c;
}

void to_tensor_order(CodecCheck& c, const TileGrid& grid) {
    c.codes = from_tile_order<int32_t>(c.codes, grid);
    c.decoded = from_tile_order<float>(c.decoded, grid);
    if (c.first_violation >= 0) c.first_violation = tensor_index(c.first_violation, grid);
    c.grid = grid;
}

Result<CodecCheck> quantize_and_check(const FormatSpec& format, std::span<const float> x, int64_t block,
                                         Nonfinite policy, const Site& site, uint64_t seed) {
    kernels::CodecOptions opt;
    opt.seed = seed;
    opt.policy = policy;
    opt.site = site;
    auto enc = kernels::encode(format, x, block, opt);
    reference::StochasticKey key;
    key.seed = seed;
    auto ref = reference::quantize(format, x, block, policy, site, key);
    if (!enc.ok() || !ref.ok()) {
        // Both must refuse the same input; if only one does, that disagreement is itself the finding.
        if (!enc.ok() && !ref.ok()) return enc.error();
        return make_error(ErrorCode::kInvalidArgument,
                          std::string("kernel and reference disagree on refusing this input: ") +
                              (enc.ok() ? "reference: " + ref.error().message : "kernel: " + enc.error().message));
    }
    CodecCheck c;
    c.conformance = kernels::Conformance::kExact;
    c.elements = static_cast<int64_t>(x.size());
    c.block = block;
    c.shard = c.elements;
    c.encoded = std::move(*enc);
    c.codes = kernels::unpack_codes(c.encoded);
    c.decoded = kernels::decode(c.encoded);

    const reference::Quantized& r = *ref;
    const std::vector<uint8_t> ref_bytes = reference::pack(format, r.codes, block);
    for (std::string d : {first_difference<float>("scale", c.encoded.scales, r.scales),
                          first_difference<float>("offset", c.encoded.offsets, r.offsets),
                          first_difference<uint8_t>("wire byte", c.encoded.codes, ref_bytes),
                          first_difference<int32_t>("code", c.codes, r.codes),
                          first_difference<float>("decoded", c.decoded, r.decoded)}) {
        if (!d.empty() && c.first_difference.empty()) c.first_difference = d;
    }
    c.exact = c.first_difference.empty();

    // The bound is checked on the kernel's own output, with its own scales.
    reference::Quantized mine;
    mine.format = format;
    mine.block = block;
    mine.scales = c.encoded.scales;
    mine.offsets = c.encoded.offsets;
    mine.codes = c.codes;
    mine.decoded = c.decoded;
    mine.sign_seed = seed;  // a rotated format's signs (FORMATS.md section 9)
    mine.sign_first = site.index_base;
    mine.poisoned.resize(c.encoded.scales.size());
    for (size_t j = 0; j < mine.poisoned.size(); ++j) {
        mine.poisoned[j] = c.encoded.scales[j] != c.encoded.scales[j];
        c.poisoned_blocks += mine.poisoned[j];
    }
    const reference::BoundCheck bounds = reference::check_bounds(mine, x);
    c.bound_holds = bounds.holds;
    c.first_violation = bounds.first_violation;
    c.max_abs_error = bounds.max_error;
    c.max_error_to_bound = bounds.max_error_to_bound;
    c.conforms = c.exact && c.bound_holds;
    return c;
}

namespace {

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

Status write_quantize_outputs(const std::string& dir_name, const CodecCheck& c, const std::vector<int64_t>& shape) {
    // The set is written together or not at all (issue 15): every target is checked first, the files
    // go into a temporary directory beside `dir`, then each is renamed into place; a stale
    // offsets.npy of an earlier -asym run into the same directory is removed.
    namespace fs = std::filesystem;
    std::error_code ec;
    fs::create_directories(dir_name, ec);
    if (ec) return make_error(ErrorCode::kIo, dir_name + ": cannot create directory: " + ec.message());
    const fs::path dir(dir_name);
    std::vector<std::string> names{"decoded.npy", "scales.npy", "codes.bin"};
    if (!c.encoded.offsets.empty()) names.push_back("offsets.npy");
    for (const auto& n : {"decoded.npy", "scales.npy", "codes.bin", "offsets.npy"}) {
        const fs::path t = dir / n;
        if (fs::exists(fs::symlink_status(t, ec)) && !fs::is_regular_file(fs::symlink_status(t, ec)))
            return make_error(ErrorCode::kIo, t.string() + ": is not a regular file (a directory?): nothing was written");
    }
    auto made = reports::make_sibling_temp_dir(dir);
    if (!made) return made.error();
    const fs::path tmp = *made;
    auto abandon = [&tmp](Status st) {
        std::error_code ignore;
        fs::remove_all(tmp, ignore);
        return st;
    };
    const std::vector<int64_t> nblocks{static_cast<int64_t>(c.encoded.scales.size())};
    if (auto st = kernels::write_npy((tmp / "decoded.npy").string(), c.decoded, shape); !st) return abandon(st);
    if (auto st = kernels::write_npy((tmp / "scales.npy").string(), c.encoded.scales, nblocks); !st) return abandon(st);
    if (!c.encoded.offsets.empty())
        if (auto st = kernels::write_npy((tmp / "offsets.npy").string(), c.encoded.offsets, nblocks); !st) return abandon(st);
    if (auto st = write_file_atomic(tmp / "codes.bin", c.encoded.codes); !st) return abandon(st);
    for (const auto& n : names) {
        fs::rename(tmp / n, dir / n, ec);
        if (ec) return abandon(make_error(ErrorCode::kIo, (dir / n).string() + ": cannot replace: " + ec.message()));
    }
    if (c.encoded.offsets.empty()) fs::remove(dir / "offsets.npy", ec);  // an earlier -asym run's
    return abandon(Status::Ok());
}

}  // namespace qtransit::gate
