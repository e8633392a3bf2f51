// A minimal single-column simulation of a2a-rs and ring-rs (NUMERICS.md section 3, D11), written
// for the checker's tests only, from the spec and reference::quantize: it builds the ColumnRecord
// (outputs and ledger) that a correct path would produce, so the checker can be tested on it.
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>
#include <vector>

#include "qtransit/common/transit.hpp"
#include "qtransit/reference/formats.hpp"

namespace qtransit::testing {

// x[j] is rank j's block in the column (all of length len). Returns nullopt if a quantization is
// refused (e.g. a ds partial that overflows binary16).
inline std::optional<ColumnRecord> simulate_column(const PathConfig& cfg, int64_t first,
                                                   const std::vector<std::vector<float>>& x) {
    const int64_t n = cfg.ranks;
    const int64_t len = static_cast<int64_t>(x.at(0).size());
    const int64_t c = first / cfg.shard();
    const bool low = low_precision(cfg.accum);  // fp16 or bf16: terms and sums rounded to the type
    ColumnRecord col;
    col.first = first;
    col.len = len;
    col.contribution_rows = n;
    for (const auto& row : x) col.contributions.insert(col.contributions.end(), row.begin(), row.end());
    OutputRow out;
    out.rank = c;
    out.add_abs_sum.assign(len, 0.0);
    out.add_count.assign(len, 0);
    if (low) {
        out.term_round_abs_sum.assign(len, 0.0);
        out.term_round_count.assign(len, 0);
    }
    auto term = [&](float t, int64_t i) {  // D11, D24: every term entering a sum is rounded to the type
        if (!low) return t;
        out.term_round_abs_sum[i] += std::fabs(static_cast<double>(t));
        ++out.term_round_count[i];
        return reference::round_to_accum(t, cfg.accum);
    };
    auto add = [&](float a, float b, int64_t i) {
        float r = a + b;  // binary32, round to nearest even (no FMA: -ffp-contract=off)
        if (low) r = reference::round_to_accum(r, cfg.accum);
        out.add_abs_sum[i] += std::fabs(static_cast<double>(r));
        ++out.add_count[i];
        return r;
    };
    auto quant = [&](const std::vector<float>& p, int64_t from, int64_t to, int32_t stage, Contributors who)
        -> std::optional<std::vector<float>> {
        auto q = reference::quantize(cfg.format, p, len);
        if (!q.ok()) return std::nullopt;
        QuantEvent ev;
        ev.stage = stage;
        ev.from_rank = from;
        ev.to_rank = to;
        ev.scale = q.value().scales[0];
        if (!q.value().offsets.empty()) ev.offset = q.value().offsets[0];
        ev.contributors = std::move(who);
        ev.x = p;
        ev.codes = q.value().codes;
        out.event_ids.push_back(static_cast<int32_t>(col.events.size()));
        col.events.push_back(std::move(ev));
        return q.value().decoded;
    };
    std::vector<float> p(len);
    if (cfg.path == PathKind::kRingRs) {
        const int64_t start = (c + 1) % n;
        for (int64_t i = 0; i < len; ++i) p[i] = term(x[start][i], i);
        for (int64_t h = 1; h < n; ++h) {
            const int64_t from = (c + h) % n, to = (c + h + 1) % n;
            Contributors who;
            who.first = start;
            who.count = h;
            auto d = quant(p, from, to, static_cast<int32_t>(h - 1), who);
            if (!d) return std::nullopt;
            for (int64_t i = 0; i < len; ++i) p[i] = add(term((*d)[i], i), term(x[to][i], i), i);
        }
    } else {  // a2a-rs
        for (int64_t j = 0; j < n; ++j) {
            Contributors who;
            who.first = j;
            who.count = 1;
            auto d = quant(x[j], j, c, 0, who);
            if (!d) return std::nullopt;
            for (int64_t i = 0; i < len; ++i) p[i] = j == 0 ? term((*d)[i], i) : add(p[i], term((*d)[i], i), i);
        }
    }
    out.values = p;
    col.outputs.push_back(std::move(out));
    return col;
}

}  // namespace qtransit::testing
