// The plain reference schedules of every collective path (NUMERICS.md section 3, docs/DECISIONS.md
// D11 and D12): every rank's data in memory, every step of the schedule done one after the other in
// scalar code, every Q and D by reference::quantize / reference::decode. Written from the spec alone,
// independently of collectives/, so that the production schedules can be compared with it bit for
// bit. Slow on purpose (N up to 64, M up to a few thousand).
//
// Choices where the spec left room (see paths.cpp for the full list):
// - a NaN/inf anywhere in `x` is refused first (lowest rank, then lowest element index), for every
//   path including fp32-ring-rs; other errors (asym range overflow, ds binary16 overflow, a partial
//   that became non-finite, e.g. an fp16 overflow that must be re-quantized) are returned by the
//   quantize that meets them, columns in increasing `first`, steps in schedule order;
// - ColumnRecord::events holds one event per (encode, decoding rank); every OutputRow's event_ids
//   are sorted by (stage, from_rank, to_rank); ring hop h is stage h-1;
// - under fp16 accumulation only values entering a sum that are not already the binary16 result of
//   an earlier add (inputs, decoded values) are counted in term_round_*; a one-term sum (a2a-rs with
//   N = 1) is still rounded; a path with no add at all (ring-rs, fp32-ring-rs, tree-rs with N = 1)
//   returns X_0 unrounded.
#pragma once

#include <span>
#include <vector>

#include "qtransit/common/status.hpp"
#include "qtransit/common/transit.hpp"

namespace qtransit::reference {

// x holds every rank's input, row-major [N][M] (x[r * M + i] is element i of rank r). Runs the
// path's schedule plainly and returns one ColumnRecord per column (D12), in increasing `first`.
// Errors: an invalid config (qtransit::validate), x.size() != N * M, a non-finite input, or an error
// of reference::quantize (policy `error`) met along the schedule.
Result<std::vector<ColumnRecord>> run_path_plain(const PathConfig& c, std::span<const float> x);

}  // namespace qtransit::reference
