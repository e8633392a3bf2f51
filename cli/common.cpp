#include <cstdio>

#include "commands.hpp"
#include "qtransit/common/decl_toml.hpp"
#include "qtransit/collectives/mpi.hpp"

namespace qtransit::cli {

int fail(const Error& e) { return fail(e.message); }

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

int fail(const std::string& message) {
    // An mpi job whose ranks fell out of step (mpi.hpp: job_failure) ends here, whatever error that
    // surfaced as: every process of the job, with the failure's own one line.
    if (const Error* e = collectives::mpi::job_failure()) collectives::mpi::abort_job(e->message);
    std::fprintf(stderr, "qtransit: %s\n", one_line(message).c_str());
    return kExitUsage;
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

std::function<void(const gate::GateProgress&)> progress_printer(bool tty) {
    return [tty](const gate::GateProgress& p) {
        if (tty && !p.finished) {
            std::fprintf(stderr, "\r[%zu/%zu] %-10s %-12s %s N=%-4lld (%zu/%zu)   ", p.group + 1, p.groups, p.format.c_str(),
                         p.dist.c_str(), p.tree ? "tree-rs" : "paths", static_cast<long long>(p.n), p.step + 1, p.steps);
        } else if (!tty && p.finished) {
            std::fprintf(stderr, "qtransit check: [%zu/%zu] %s %s: %s, %.1f s\n", p.group + 1, p.groups, p.format.c_str(), p.dist.c_str(),
                         p.refused ? "input refused (binary16 range)"
                                   : (std::to_string(p.runs) + " runs, " + (p.holds ? "bounds and k hold" : "FAILURES")).c_str(),
                         p.seconds);
        } else if (tty && p.finished && p.group + 1 == p.groups) {
            std::fprintf(stderr, "\r%100s\r", "");
        }
        std::fflush(stderr);
    };
}

}  // namespace qtransit::cli
