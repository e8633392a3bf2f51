// `qtransit bench`: measure_throughput, as a table or JSON.
#include "printf.hpp"
#include "qtransit/common/decl_toml.hpp"
#include "qtransit/gate/commands.hpp"
#include "qtransit/gate/throughput.hpp"
#include "qtransit/kernels/codec.hpp"
#include "qtransit/reports/bench.hpp"

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
    if (!a.json) say(reports::bench_header());
    auto rows = measure_throughput(spec, [&](const ThroughputRow& r) {
        if (!a.json) say(reports::to_text(r));
    });
    if (!rows) return rows.error();
    const reports::BenchReport report{a.mib, a.block, a.repeats, std::move(*rows)};
    say(a.json ? reports::to_json(report).dump(2) + "\n" : reports::bench_note(report));
    return p;
}

}  // namespace qtransit::gate
