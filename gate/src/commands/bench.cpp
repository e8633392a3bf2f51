// `qtransit bench`: measure_throughput, as a table or JSON.
#include "printf.hpp"
#include "qtransit/common/decl_toml.hpp"
#include "qtransit/gate/commands.hpp"
#include "qtransit/gate/throughput.hpp"
#include "qtransit/kernels/codec.hpp"

namespace qtransit::gate {

Result<ThroughputSpec> BenchRequest::validate() const {
    if (block < 0)
        return make_error(ErrorCode::kInvalidArgument, "--block must be a positive integer (0: each format's own), got " + std::to_string(block));
    if (block > 0)
        if (auto st = kernels::validate_block(block); !st) return st.error();
    ThroughputSpec spec;
    spec.mib = mib, spec.block = block, spec.repeats = repeats, spec.threads = threads;
    for (const auto& name : formats) {
        auto f = resolve_format(name);
        if (!f) return f.error();
        if (auto st = f->check_block(spec.block_for(*f)); !st) return make_error(st.error().code, "--block: " + st.error().message);
        spec.formats.push_back(*f);
    }
    return spec;
}

Result<Printed> bench(const BenchRequest& a, const Emit& emit) {
    auto valid = a.validate();
    if (!valid) return valid.error();
    const ThroughputSpec& spec = *valid;
    Printed p;
    const Say say(emit, p.out);
    if (!a.json) say.f("%-18s %-7s %7s %6s %11s %11s %11s\n", "format", "op", "threads", "block", "ms", "memcpy ms", "vs memcpy");
    auto rows = measure_throughput(spec, [&](const ThroughputRow& r) {
        if (!a.json)
            say.f("%-18s %-7s %7d %6lld %11.3f %11.3f %11.3f\n", r.format.c_str(), r.op.c_str(), r.threads, static_cast<long long>(r.block),
                  r.seconds * 1e3, r.memcpy_seconds * 1e3, r.ratio_to_memcpy);
    });
    if (!rows) return rows.error();
    if (a.json) {
        nlohmann::json j = nlohmann::json::array();
        for (const auto& r : *rows)
            j.push_back({{"format", r.format}, {"op", r.op}, {"threads", r.threads}, {"block", r.block}, {"seconds", r.seconds},
                         {"memcpy_seconds", r.memcpy_seconds}, {"ratio_to_memcpy", r.ratio_to_memcpy}});
        say(nlohmann::json{{"input_mib", a.mib}, {"block", a.block}, {"repeats", a.repeats},
                           {"note", "ratio_to_memcpy = memcpy time of the same binary32 input bytes / op time, same run, median"},
                           {"rows", j}}
                .dump(2) +
            "\n");
    } else {
        say.f("(%lld MiB binary32, %s, median of %d; ratio > 1 is faster than memcpy)\n", static_cast<long long>(a.mib),
              a.block > 0 ? ("block " + std::to_string(a.block)).c_str() : "each format's own block (its fixed one, else 32)", a.repeats);
    }
    return p;
}

}  // namespace qtransit::gate
