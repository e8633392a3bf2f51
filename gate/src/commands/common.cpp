// What several commands share: --codec with --format, per-rank file names, who speaks.
#include "qtransit/collectives/mpi.hpp"
#include "qtransit/common/decl_toml.hpp"
#include "qtransit/gate/commands.hpp"

namespace qtransit::gate {
namespace {
constexpr std::string_view kRankField = "{rank}";
}  // namespace

bool has_rank_field(const std::string& pattern) { return pattern.find(kRankField) != std::string::npos; }

std::string rank_file(const std::string& pattern, int64_t rank) {
    std::string out = pattern;
    for (size_t at = 0; (at = out.find(kRankField, at)) != std::string::npos;) {
        const std::string r = std::to_string(rank);
        out.replace(at, kRankField.size(), r);
        at += r.size();
    }
    return out;
}

bool speaker(const std::string& backend) {
    auto b = collectives::parse_backend(backend);
    return !(b && one_process_per_rank(*b)) || collectives::mpi::rank() == 0;
}

Result<CodecAndFormat> codec_and_format(const std::string& codec_path, const std::string& format, const std::string& rounding) {
    std::shared_ptr<const kernels::PluginCodec> codec;
    if (!codec_path.empty()) {
        auto c = kernels::PluginCodec::load(codec_path);
        if (!c) return make_error(c.error().code, "--codec: " + c.error().message);
        codec = *c;
    }
    return codec_and_format(std::move(codec), format, rounding);
}

Result<CodecAndFormat> codec_and_format(std::shared_ptr<const kernels::PluginCodec> codec, const std::string& format,
                                        const std::string& rounding) {
    CodecAndFormat r;
    r.codec = std::move(codec);
    if (format.empty() && !r.codec) return make_error(ErrorCode::kInvalidArgument, "--format or --codec is required");
    if (r.codec) {
        if (rounding != "nearest")
            return make_error(ErrorCode::kInvalidArgument, "--rounding is for qtransit's kernels; a codec's rounding is its format's");
        if (!format.empty()) {
            auto named = resolve_format(format);
            if (!named) return named.error();
            if (!(*named == r.codec->format()))
                return make_error(ErrorCode::kInvalidArgument, "--format " + named->name() + " but the codec " + r.codec->name() +
                                                                   " implements " + r.codec->format().name());
        }
        r.format = r.codec->format();
        return r;
    }
    auto named = resolve_format(format);
    if (!named) return named.error();
    auto f = apply_rounding(*named, rounding);
    if (!f) return f.error();
    r.format = *f;
    return r;
}

}  // namespace qtransit::gate
