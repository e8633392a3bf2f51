#include "qtransit/version.hpp"
#include "qtransit/gate/survey.hpp"

#include <cmath>
#include <cstdio>

#include "qtransit/gate/verify.hpp"
#include "qtransit/kernels/codec.hpp"

namespace qtransit::gate {

Result<SurveyResult> run_survey(const SurveySpec& spec) {
    if (auto st = kernels::validate_block(spec.block); !st) return st.error();
    SurveyResult out{QTRANSIT_VERSION, spec.elements, spec.block, spec.seed, {}, 0, spec.skipped_formats};
    int done = 0;
    const int total = static_cast<int>(spec.formats.size() * spec.dists.size());
    std::vector<float> x(static_cast<size_t>(spec.elements));
    for (const auto& f : spec.formats) {
        for (auto d : spec.dists) {
            kernels::generate_span(d, spec.seed, 0, 0, x);
            Site site;
            site.tensor = std::string(kernels::to_string(d)) + " input";
            SurveyCase sc;
            sc.format = f.name();
            sc.dist = kernels::to_string(d);
            const int64_t block = spec.block_for(f);
            sc.block = block;
            std::vector<int64_t> shape{static_cast<int64_t>(x.size())};
            if (f.tiled()) {  // a 2-D tensor of the tile's width (padded to whole tiles where need be)
                const int64_t cols = f.decl->tile_cols, n = static_cast<int64_t>(x.size());
                shape = n % cols == 0 ? std::vector<int64_t>{n / cols, cols} : std::vector<int64_t>{1, n};
            }
            auto c = quantize_tensor(f, x, shape, block, Nonfinite::kError, site);
            ++done;
            if (!c) {
                // ds-int<b> refuses inputs beyond binary16 (docs/DECISIONS.md D3): a reported refusal,
                // not a failure of the survey.
                sc.refused = c.error().message;
            } else {
                double se = 0, sx = 0;
                for (size_t i = 0; i < x.size(); ++i) {
                    const double e = static_cast<double>(c->decoded[i]) - static_cast<double>(x[i]);
                    se += e * e;
                    sx += static_cast<double>(x[i]) * x[i];
                }
                sc.rel_rms_error = sx > 0 ? std::sqrt(se / sx) : 0.0;
                // Requantize the decoded values once: same codes is idempotence.
                // (NVFP4: under the decoded tensor's own amax, as a second quantize would take it.)
                // (A tiled format: as a tensor of the same shape, so that the codes come back in its order.)
                if (f.tiled()) {
                    if (auto again = quantize_tensor(f, c->decoded, shape, block, Nonfinite::kError, site)) {
                        sc.requantized_codes_changed = 0;
                        for (size_t i = 0; i < again->codes.size(); ++i) sc.requantized_codes_changed += again->codes[i] != c->codes[i];
                    }
                } else if (auto again = kernels::encode(f.for_tensor(c->decoded), c->decoded, block)) {
                    const auto codes2 = kernels::unpack_codes(*again);
                    sc.requantized_codes_changed = 0;
                    for (size_t i = 0; i < codes2.size(); ++i) sc.requantized_codes_changed += codes2[i] != c->codes[i];
                }
                sc.check = static_cast<const reports::QuantizationCheck&>(*c);  // the verdict, not the kernel's output
                sc.wire_bytes = c->encoded.wire_bytes();
                sc.pass = c->bound_holds && c->exact &&
                          (f.kind != FormatKind::kSym || sc.requantized_codes_changed == 0);  // int<b> promises idempotence
                out.failures += !sc.pass;
            }
            out.cases.push_back(sc);
            if (spec.on_case) spec.on_case(done, total, out.cases.back());
        }
    }
    return out;
}

}  // namespace qtransit::gate
