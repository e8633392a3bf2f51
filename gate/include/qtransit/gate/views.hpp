// What the commands print and write, as data: the table of `formats`, the models of `quantize`
// and `verify quantize` (reports/ writes their JSON and text) and the report models of `verify quantize` and
// `verify collective`, built once here for the qtransit command and the Python module (python/), so
// that the two give the same numbers for the same run.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qtransit/common/format.hpp"
#include "qtransit/gate/codec_check.hpp"
#include "qtransit/gate/verify_run.hpp"
#include "qtransit/kernels/plugin.hpp"
#include "qtransit/reports/catalog.hpp"
#include "qtransit/reports/gate_result.hpp"
#include "qtransit/reports/quantization_check.hpp"

namespace qtransit::gate {

// `qtransit formats`' table (reports::to_json(const FormatTable&), to_text): every built-in format at
// `block` (a fixed-block format at its own). An Error for a block outside the kernels' range.
Result<reports::FormatTable> format_table(int64_t block);

// A quantize_tensor() result (or a codec's check, to_tensor_order'ed) as the model `qtransit quantize`
// and Python's quantize print from (reports::to_json(const QuantizedTensor&), reports::to_text): its
// arrays are views of c's, so c outlives it. policy: the non-finite policy it ran under; seed: a
// stochastic format's key.
reports::QuantizedTensor quantized_tensor(const FormatSpec& format, const CodecCheck& c, const std::vector<int64_t>& shape,
                                          Nonfinite policy, uint64_t seed);

// What a `verify quantize` compared, by the names it shows (files for the command, arguments for
// Python); a name is used only where the run gave that part.
struct QuantizeSources {
    std::string decoded, codes, scales, offsets;
};
// A run_check() result as the model its JSON, text and report are written from
// (reports::to_json(const VerifiedQuantization&), reports::to_text).
reports::VerifiedQuantization verified_quantization(const FormatSpec& format, int64_t block, const CodecCheck& c, const RunQuantization& run,
                                                    kernels::Conformance conformance, const QuantizeSources& names);
// The report model `verify quantize --report-dir` writes: the JSON and text of v, and one verdict per
// conformance (the one asked judged, the other reported as a skip).
reports::GateResult verify_quantize_report(const std::string& command, double seconds, const reports::VerifiedQuantization& v,
                                           nlohmann::json json, const std::string& text);
// The report model `verify collective --report-dir` writes: to_json(v), summary_text(v), one verdict
// per tier (the asked one judged, the others skips) and same-bits where it applies.
reports::GateResult verify_collective_report(const std::string& command, double seconds, const CollectiveVerification& v);

}  // namespace qtransit::gate
