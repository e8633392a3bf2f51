// report.md and the terminal summary: verdicts per category, relative RMS error at the largest N
// per format and path, and every failed verdict.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>

#include "qtransit/common/format.hpp"
#include "qtransit/reports/numbers.hpp"
#include "tables.hpp"

namespace qtransit::reports {
namespace detail {

// Text for a file or a terminal: every control character but the line breaks the writer put there
// shown as \xNN (issue 46: an ESC in a --config or --inputs name landed raw in report.md). One pass
// over the whole text, so no field a user names can bring one in.
std::string text_only(const std::string& s) {
    std::string out;
    out.reserve(s.size());
    for (const char c : s) {
        const auto ch = static_cast<unsigned char>(c);
        if ((ch < 0x20 && ch != '\n') || ch == 0x7f) {
            static const char* hex = "0123456789abcdef";
            out += "\\x";
            out += hex[ch >> 4];
            out += hex[ch & 15];
        } else {
            out += c;
        }
    }
    return out;
}

std::string fmt_g(double v, int digits) {
    if (std::isnan(v)) return "n/a";
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    char b[32];
    std::snprintf(b, sizeof b, "%.*g", digits, v);
    return b;
}

// Verdict counts by category, in first-seen order.
Table category_table(const GateResult& r) {
    std::vector<std::string> order;
    std::map<std::string, std::array<int64_t, 3>> n;
    for (const auto& v : r.verdicts) {
        if (!n.count(v.category)) order.push_back(v.category);
        ++n[v.category][static_cast<size_t>(v.status)];
    }
    Table t{{"check", "verdicts", "passed", "failed", "skipped"}, {}};
    for (const auto& c : order) {
        const auto& a = n[c];
        t.rows.push_back({c, std::to_string(a[0] + a[1] + a[2]), std::to_string(a[0]), std::to_string(a[1]), std::to_string(a[2])});
    }
    t.rows.push_back({"all", std::to_string(r.verdicts.size()), std::to_string(r.count(VerdictStatus::kPass)),
                      std::to_string(r.count(VerdictStatus::kFail)), std::to_string(r.count(VerdictStatus::kSkip))});
    return t;
}

// Relative RMS error at each path's largest N, first distribution (normal in the default gate).
Table error_table(const GateResult& r) {
    Table t;
    if (r.dists.empty()) return t;
    const std::string& dist = r.dists.front();
    std::map<std::string, int64_t> nmax;
    for (const auto& x : r.runs)
        if (x.dist == dist) nmax[x.path] = std::max(nmax[x.path], x.ranks);
    t.header.push_back("format \\ path (" + dist + ")");
    // The 16-bit paths have no format to cross with: they are in compare_table.
    std::vector<std::string> paths;
    // (A declared path with its own wire format or type has no run under the gate's formats: left out.)
    auto crosses = [&](const std::string& p) {
        for (const auto& x : r.runs)
            if (x.path == p && std::find(r.formats.begin(), r.formats.end(), x.format) != r.formats.end()) return true;
        return false;
    };
    for (const auto& p : r.paths)
        if (auto k = parse_path(p); k ? !typed_path(*k) : crosses(p)) paths.push_back(p);
    for (const auto& p : paths) t.header.push_back(p + " N=" + std::to_string(nmax[p]));
    for (const auto& f : r.formats) {
        std::vector<std::string> row{f};
        for (const auto& p : paths) {
            std::string cell = "-";
            for (const auto& x : r.runs)
                if (x.path == p && x.format == f && x.dist == dist && x.ranks == nmax[p])
                    cell = fmt_g(x.rel_rms_error) + (x.bound_holds && x.k_mismatches == 0 ? "" : " FAIL");
            row.push_back(cell);
        }
        t.rows.push_back(std::move(row));
    }
    return t;
}

std::vector<std::string> compare_dists(const GateResult& r) {
    std::vector<std::string> d;
    for (const auto& x : r.dists)
        if (x == "normal" || x == "heavy" || x == "outliers" || x == "correlated") d.push_back(x);
    return d.empty() ? r.dists : d;
}

const GateRun* compare_run(const GateResult& r, const CompareRow& row, const std::string& dist, int64_t n) {
    for (const auto& x : r.runs)
        if (x.path == row.path && x.format == row.format && x.divide == row.divide && x.dist == dist && x.ranks == n) return &x;
    return nullptr;
}

std::vector<CompareRow> compare_rows(const GateResult& r) {
    std::vector<CompareRow> want;
    for (const char* f : {"int8", "int4"})
        for (const char* p : {"a2a-rs", "a2a-hier-rs"}) want.push_back({std::string(f) + " " + p, p, f, r.divide});
    // Per-stage lists and rotated formats through the hierarchical all-to-all (issue 17): what
    // int8 inside the node and int4 between nodes, with or without a rotation, buys against int8 and int4.
    for (const auto& f : r.formats) {
        const auto spec = parse_format(f);
        if (f.find(',') != std::string::npos || (spec && spec->rotated()))
            want.push_back({f + " a2a-hier-rs", "a2a-hier-rs", f, r.divide});
    }
    for (const char* t : {"bf16", "fp16"}) {
        const std::string path = std::string(t) + "-ring-rs";
        want.push_back({std::string(t) + " ring reduce-scatter", path, t, r.divide});
        if (r.divide == "none") want.push_back({std::string(t) + " ring reduce-scatter, pre-divided", path, t, "pre"});
    }
    // NCCL's FP8 rings (D41, issue 49): the partial sum stored as FP8 at every hop; pre-divided is ncclAvg.
    for (const char* t : {"fp8-e4m3", "fp8-e5m2"}) {
        const std::string path = std::string("nccl-") + t + "-ring-rs";
        want.push_back({std::string("NCCL ") + t + " ring reduce-scatter", path, t, r.divide});
        if (r.divide == "none") want.push_back({std::string("NCCL ") + t + " ring reduce-scatter, ncclAvg", path, t, "pre"});
    }
    if (!r.formats.empty()) want.push_back({"fp32 ring reduce-scatter", "fp32-ring-rs", r.formats.front(), r.divide});
    // Declared reduce-scatters (D45: gate.paths names them): each beside the built-ins, with its format and division.
    for (const auto& p : r.paths)
        if (!parse_path(p))
            for (const auto& x : r.runs)
                if (x.path == p && x.shape == PathShape::kReduceScatter) {
                    want.push_back({p + " (" + x.format + (x.divide == "none" ? "" : ", divide " + x.divide) + ")", p, x.format, x.divide});
                    break;
                }
    std::vector<CompareRow> out;
    for (const auto& row : want) {
        bool any = false;
        for (const auto& d : compare_dists(r))
            for (int64_t n : r.ranks) any = any || compare_run(r, row, d, n) != nullptr;
        if (any) out.push_back(row);
    }
    return out;
}

Table compare_table(const GateResult& r) {
    Table t;
    const auto rows = compare_rows(r);
    if (rows.size() < 2) return t;
    const auto dists = compare_dists(r);
    t.header.push_back("what");
    for (int64_t n : r.ranks) t.header.push_back("cross-node B/rank N=" + std::to_string(n));
    for (const auto& d : dists)
        for (int64_t n : r.ranks) t.header.push_back(d + " N=" + std::to_string(n));
    for (const auto& row : rows) {
        std::vector<std::string> cells{row.what};
        for (int64_t n : r.ranks) {
            const GateRun* x = nullptr;
            for (const auto& d : dists)
                if (!x) x = compare_run(r, row, d, n);
            cells.push_back(x ? fmt_g(x->cross_node_bytes_per_rank, 4) : "-");
        }
        for (const auto& d : dists)
            for (int64_t n : r.ranks) {
                const GateRun* x = compare_run(r, row, d, n);
                cells.push_back(!x ? "-" : fmt_g(x->rel_rms_error) + (x->bound_holds && x->k_mismatches == 0 ? "" : " FAIL"));
            }
        t.rows.push_back(std::move(cells));
    }
    return t;
}

// The rows' runs at (dist, N) with a finite error, in the rows' order.
std::vector<std::pair<const CompareRow*, const GateRun*>> finite_runs(const GateResult& r, const std::vector<CompareRow>& rows,
                                                                      const std::string& d, int64_t n) {
    std::vector<std::pair<const CompareRow*, const GateRun*>> have;
    for (const auto& row : rows)
        if (const GateRun* x = compare_run(r, row, d, n); x && std::isfinite(x->rel_rms_error)) have.emplace_back(&row, x);
    return have;
}

// "1..383", or "2" when every contribution was quantized as often.
std::string k_text(const GateRun& x) {
    return x.k_min == x.k_max ? std::to_string(x.k_max) : std::to_string(x.k_min) + ".." + std::to_string(x.k_max);
}

std::vector<std::string> compare_notes(const GateResult& r) {
    std::vector<std::string> out;
    const auto rows = compare_rows(r);
    if (rows.size() < 2 || r.ranks.empty()) return out;
    const int64_t n = *std::max_element(r.ranks.begin(), r.ranks.end());
    for (const auto& d : compare_dists(r)) {
        auto have = finite_runs(r, rows, d, n);
        if (have.size() < 2) continue;
        // The rows no other row beats on both counts (fewer or as many cross-node bytes and a smaller
        // error, or fewer bytes and no larger error), from the fewest bytes up; then who beats the rest.
        auto beats = [](const GateRun* a, const GateRun* b) {
            return a->cross_node_bytes_per_rank <= b->cross_node_bytes_per_rank && a->rel_rms_error <= b->rel_rms_error &&
                   (a->cross_node_bytes_per_rank < b->cross_node_bytes_per_rank || a->rel_rms_error < b->rel_rms_error);
        };
        std::vector<std::pair<const CompareRow*, const GateRun*>> front;
        std::string beaten;
        for (const auto& [row, x] : have) {
            const CompareRow* by = nullptr;
            for (const auto& [row2, y] : have)
                if (y != x && beats(y, x) && (!by || y->cross_node_bytes_per_rank < compare_run(r, *by, d, n)->cross_node_bytes_per_rank))
                    by = row2;
            if (!by) front.emplace_back(row, x);
            else beaten += (beaten.empty() ? "" : "; ") + row->what + " by " + by->what;
        }
        std::sort(front.begin(), front.end(), [](const auto& a, const auto& b) {
            return a.second->cross_node_bytes_per_rank < b.second->cross_node_bytes_per_rank;
        });
        std::string line = d + " inputs, N = " + std::to_string(n) + ": from the fewest cross-node bytes up, each at least as accurate as the one before: ";
        for (size_t k = 0; k < front.size(); ++k)
            line += (k ? ", " : "") + front[k].first->what + " (" + fmt_g(front[k].second->cross_node_bytes_per_rank, 4) + " B, " +
                    fmt_g(front[k].second->rel_rms_error) + ")";
        if (!beaten.empty()) line += ". Beaten on both bytes and error: " + beaten;
        out.push_back(line);
    }
    return out;
}

std::vector<CompareRow> collectives_rows(const GateResult& r) {
    std::vector<CompareRow> rows;
    auto add = [&](const CompareRow& row) {
        for (const auto& x : rows)
            if (x.path == row.path && x.format == row.format && x.divide == row.divide) return;
        for (const auto& x : r.runs)
            if (x.path == row.path && x.format == row.format && x.divide == row.divide) {
                rows.push_back(row);
                return;
            }
    };
    add({"qgZ: int4 a2a-hier-rs", "a2a-hier-rs", "int4", r.divide});
    for (const char* p : {"bf16-ring-rs", "bf16-ring-ar"}) add({p, p, "bf16", r.divide});
    for (const auto& p : r.paths) {
        std::string first_format;  // a declared path of the run's --format runs once per gate format: the first one's
        for (const auto& x : r.runs) {
            if (x.path != p || !(x.saturating || !x.schedule.empty())) continue;
            if (!x.schedule.empty() && !first_format.empty() && x.format != first_format) continue;
            if (first_format.empty()) first_format = x.format;
            const bool avg = x.saturating && x.divide == "pre" && !p.ends_with("-avg");  // the gate's pre-divided twin
            // (a declared path's own wire is part of its name: the gate's format only where it runs the run's)
            const bool gate_format = !x.schedule.empty() && std::find(r.formats.begin(), r.formats.end(), x.format) != r.formats.end();
            add({p + (avg ? " (ncclAvg)" : "") + (gate_format ? " (" + x.format + ")" : ""), p, x.format, x.divide});
        }
    }
    return rows;
}

Table collectives_table(const GateResult& r) {
    Table t;
    const auto rows = collectives_rows(r);
    if (rows.size() < 2) return t;
    t.header = {"what", "N", "wire B/rank", "k"};
    for (const auto& d : r.dists) t.header.push_back(d);
    for (const auto& row : rows)
        for (int64_t n : r.ranks) {
            const GateRun* any = nullptr;
            for (const auto& d : r.dists)
                if (!any) any = compare_run(r, row, d, n);
            if (!any) continue;
            std::vector<std::string> cells{row.what, std::to_string(n), fmt_g(any->bytes_per_rank, 4), k_text(*any)};
            for (const auto& d : r.dists) {
                const GateRun* x = compare_run(r, row, d, n);
                std::string cell = "-";
                if (x) {
                    cell = fmt_g(x->rel_rms_error);
                    if (x->saturated_outputs > 0) cell += " (" + std::to_string(x->saturated_outputs) + " saturated)";
                    if (!x->bound_holds || x->k_mismatches != 0) cell += " FAIL";
                } else {
                    for (const auto& f : r.refusals)
                        if (f.format == row.format && f.dist == d) cell = "refused";
                }
                cells.push_back(cell);
            }
            t.rows.push_back(std::move(cells));
        }
    return t;
}

std::vector<std::string> collectives_notes(const GateResult& r) {
    std::vector<std::string> out;
    const auto rows = collectives_rows(r);
    if (rows.size() < 2 || r.ranks.empty()) return out;
    const int64_t n = *std::max_element(r.ranks.begin(), r.ranks.end());
    for (const auto& d : r.dists) {
        auto have = finite_runs(r, rows, d, n);
        if (have.size() < 2) continue;
        std::stable_sort(have.begin(), have.end(), [](const auto& a, const auto& b) { return a.second->rel_rms_error < b.second->rel_rms_error; });
        std::string line = d + " inputs, N = " + std::to_string(n) + ", from the least error up: ";
        for (size_t k = 0; k < have.size(); ++k)
            line += (k ? ", " : "") + have[k].first->what + " " + fmt_g(have[k].second->rel_rms_error) + " (k " + k_text(*have[k].second) + ")";
        out.push_back(line);
    }
    // ncclAvg (D41): 1/N as an FP8 value is exact only for N a power of two (within the format's range).
    for (const auto& row : rows)
        for (int64_t m : r.ranks)
            for (const auto& d : r.dists) {
                const GateRun* x = compare_run(r, row, d, m);
                if (!x || x->mean_factor == 0 || x->mean_factor * static_cast<double>(m) == 1.0) continue;
                const double rel = x->mean_factor * static_cast<double>(m) - 1.0;
                std::string line = row.what + " at N = " + std::to_string(m) + ": ncclAvg's factor is fl8(1/N) = " + fmt_g(x->mean_factor, 4) +
                                   ", " + fmt_g(100 * std::fabs(rel), 3) + "% " + (rel > 0 ? "above" : "below") + " 1/N: every contribution is scaled " +
                                   fmt_g(100 * std::fabs(rel), 3) + "% too " + (rel > 0 ? "large" : "small") +
                                   " before the sum's own roundings; relative error " + fmt_g(x->rel_rms_error) + " on " + d + " inputs";
                // The sum on the same inputs, when the gate ran it: the same path undivided, or its name without -avg.
                const std::string sum_path = row.path.ends_with("-avg") ? row.path.substr(0, row.path.size() - 4) : row.path;
                for (const auto& y : r.runs)
                    if (y.path == sum_path && y.divide == "none" && y.dist == d && y.ranks == m) {
                        line += " against " + fmt_g(y.rel_rms_error) + " for the sum (" + sum_path + ")";
                        break;
                    }
                out.push_back(line);
                break;  // one distribution is enough to name it
            }
    return out;
}

}  // namespace detail

namespace {
using detail::Table;
using detail::category_table;
using detail::error_table;
using detail::fmt_g;

std::string md(const Table& t) {
    std::ostringstream o;
    o << "|";
    for (const auto& h : t.header) o << " " << h << " |";
    o << "\n|";
    for (size_t i = 0; i < t.header.size(); ++i) o << (i ? "---:|" : "---|");
    o << "\n";
    for (const auto& row : t.rows) {
        o << "|";
        for (const auto& c : row) o << " " << c << " |";
        o << "\n";
    }
    return o.str();
}

// A table of its own section: title, a caption, the table, and the notes under it as a list.
void md_section(std::ostringstream& o, const char* title, const char* caption, const Table& t, const std::vector<std::string>& notes) {
    o << "## " << title << "\n\n" << caption << "\n\n" << md(t) << "\n";
    for (const auto& line : notes) o << "- " << line << ".\n";
    o << "\n";
}

std::string text(const Table& t) {
    std::vector<size_t> w(t.header.size(), 0);
    for (size_t i = 0; i < t.header.size(); ++i) w[i] = t.header[i].size();
    for (const auto& row : t.rows)
        for (size_t i = 0; i < row.size() && i < w.size(); ++i) w[i] = std::max(w[i], row[i].size());
    std::ostringstream o;
    auto line = [&](const std::vector<std::string>& cells) {
        for (size_t i = 0; i < cells.size(); ++i) {
            const std::string pad(w[i] - std::min(w[i], cells[i].size()), ' ');
            o << (i ? "  " : "") << (i ? pad + cells[i] : cells[i] + pad);
        }
        o << "\n";
    };
    line(t.header);
    for (const auto& row : t.rows) line(row);
    return o.str();
}

std::string what_ran(const GateResult& r) {
    std::ostringstream o;
    o << r.formats.size() << " formats x " << r.paths.size() << " paths x " << r.dists.size() << " distributions, N =";
    for (size_t i = 0; i < r.ranks.size(); ++i) o << (i ? ", " : " ") << r.ranks[i];
    o << " (" << r.ranks_per_node << " ranks per node), M = " << r.elements << " elements per rank, block " << r.block
      << ", seed " << r.seed << (r.accum == "fp32" ? "" : ", " + r.accum + " accumulation")
          << (r.divide == "none" ? "" : ", the mean (divided by N " + r.divide + ")") << "; " << r.runs.size()
      << " runs, " << fmt_g(r.wall_seconds, 3) << " s";
    return o.str();
}

// `formats validate`'s comparison (FormatComparison), the declared format in bold.
std::string format_comparison_md(const FormatComparison& fc) {
    std::string o = "## Format comparison\n\n" + fc.declared + " (declared) against built-in formats: relative RMS error of the "
                    "reduce-scatter after k = 1 and k = 2 quantizations in transit (at the largest N), and at the largest k, on " +
                    fc.dist + " inputs; wire bits per element at the gate's block.\n\n"
                    "| format | bits/element | error k=1 | error k=2 | largest k | error at largest k | bounds |\n"
                    "|---|---|---|---|---|---|---|\n";
    for (const auto& r : fc.rows)
        o += "| " + (r.format == fc.declared ? "**" + r.format + "**" : r.format) + " | " + g4(r.bits) + " | " + g4_cell(r.k1) + " | " +
             g4_cell(r.k2) + " | " + std::to_string(r.kmax) + " | " + g4_cell(r.kmax_err) + " | " + (r.holds ? "hold" : "FAIL") + " |\n";
    return o + "\n";
}

}  // namespace

std::string to_markdown(const GateResult& r) {
    std::ostringstream o;
    o << "# qtransit " << (r.verify_text.empty() ? "numerics gate" : "verify") << ": " << (r.passed() ? "PASS" : "FAIL") << "\n\n";
    if (r.verify_text.empty()) o << what_ran(r) << ". Config: ";
    else o << "Command: ";  // a verification judged a run's dumps: no formats x paths x distributions ran
    o << r.config_source << ". qtransit " << r.version << ", " << r.started_at << ".\n\n";
    for (const auto& n : r.notes) o << "- " << n << "\n";
    if (!r.notes.empty()) o << "\n";
    if (!r.verify_text.empty()) o << "## Verify\n\n```\n" << r.verify_text << "```\n\n";
    o << "## Verdicts\n\n" << md(category_table(r)) << "\n";
    if (!r.passed()) {
        o << "## Failed verdicts\n\n";
        for (const auto& v : r.verdicts)
            if (v.status == VerdictStatus::kFail)
                o << "- `" << v.name << "`" << (v.checked >= 0 ? " (checked " + std::to_string(v.checked) + ")" : std::string()) << ": "
                  << v.message << "\n";
        o << "\n";
    }
    const Table e = error_table(r);
    if (!e.rows.empty())
        o << "## Relative RMS error at the largest N\n\n" << md(e)
          << "\n(FAIL: a bound or the k ledger check failed in that run.)\n\n";
    if (const Table cmp = detail::compare_table(r); !cmp.rows.empty())
        md_section(o, "Quantized all-to-all against 16-bit rings",
                   "Relative RMS error against the exact sum (the exact mean for a divided row), and cross-node bytes per rank. "
                   "The 16-bit rings' inputs are cast to their type first, as real gradients already are (docs/DECISIONS.md D26); "
                   "pre-divided rows scale every input by 1/N in that type before the reduce, as DeepSpeed does (D27).",
                   cmp, detail::compare_notes(r));
    if (const Table coll = detail::collectives_table(r); !coll.rows.empty())
        md_section(o, "The collectives run now, beside ZeRO++",
                   "Relative RMS error against the exact result (the exact mean for ncclAvg), per distribution; \"saturated\": outputs a "
                   "clamp at the FP8 format's largest value reached (D41); \"refused\": inputs the path's type cannot hold. wire B/rank: "
                   "the busiest rank's payload; k: the fewest..most quantizations on one contribution's way (docs/PATHS.md).",
                   coll, detail::collectives_notes(r));
    // NCCL's FP8 paths (D41): every run in which a sum clamped at the format's largest value.
    bool sat_header = false;
    for (const auto& x : r.runs) {
        if (!x.saturating || x.saturated_outputs == 0) continue;
        if (!sat_header) {
            o << "## Saturated sums\n\n"
                 "A clamp at the FP8 format's largest value: its error is in the a-posteriori bound, and the a-priori bound is "
                 "unbounded there (D41).\n\n";
            sat_header = true;
        }
        o << "- `" << x.path << "` N=" << x.ranks << " on " << x.dist << ": " << x.saturated_outputs << " of " << x.outputs_checked
          << " output values saturated (at most " << x.max_saturations << " clamps on one value's way)\n";
    }
    if (sat_header) o << "\n";
    if (!r.refusals.empty()) {
        o << "## Refused inputs\n\n";
        for (const auto& x : r.refusals) o << "- " << x.format << " on " << x.dist << ": " << x.what << "\n";
        o << "\n";
    }
    int64_t skipped = r.count(VerdictStatus::kSkip);
    if (skipped) {
        o << "## Skipped verdicts\n\n";
        for (const auto& v : r.verdicts)
            if (v.status == VerdictStatus::kSkip) o << "- `" << v.name << "`: " << v.message << "\n";
        o << "\n";
    }
    std::string out = detail::text_only(o.str());
    if (r.format_comparison) out += format_comparison_md(*r.format_comparison);
    return out;
}

std::string summary_text(const GateResult& r) {
    std::ostringstream o;
    o << "qtransit check: " << what_ran(r) << "\n\n" << text(category_table(r)) << "\n";
    const Table e = error_table(r);
    if (!e.rows.empty()) o << "relative RMS error at the largest N:\n" << text(e) << "\n";
    for (const auto& v : r.verdicts)
        if (v.status == VerdictStatus::kFail) o << "FAILED " << v.name << ": " << v.message << "\n";
    o << "gate: " << (r.passed() ? "PASS" : "FAIL") << " (" << r.count(VerdictStatus::kPass) << " passed, "
      << r.count(VerdictStatus::kFail) << " failed, " << r.count(VerdictStatus::kSkip) << " skipped)\n";
    return detail::text_only(o.str());
}

}  // namespace qtransit::reports
