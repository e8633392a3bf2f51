// report.html: one self-contained file (inline CSS and SVG, no script, no network): the summary,
// the plots, the verdict table. Every plot is an <svg class="plot" id="plot-..."> of 760x460 px.
#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <sstream>

#include "qtransit/reports/numbers.hpp"
#include "svg.hpp"
#include "tables.hpp"

namespace qtransit::reports {
namespace {

// Format families: a plot holds one or two families so that it keeps a handful of series.
std::string family_of(const std::string& f) {
    if (f.rfind("ds-", 0) == 0) return "ds";
    if (f.rfind("int", 0) == 0 && f.size() > 5 && f.compare(f.size() - 5, 5, "-asym") == 0 &&
        f.find_first_not_of("0123456789", 3) == f.size() - 5)
        return "asym";
    if (f.rfind("int", 0) == 0 && f.size() > 3 && f.find_first_not_of("0123456789", 3) == std::string::npos) return "sym";
    return "declared";  // fp8, MX, nf4, stochastic twins, a user's declaration
}
int marker_of(const std::string& f) {
    const std::string fam = family_of(f);
    return fam == "sym" || fam == "declared" ? 0 : fam == "asym" ? 1 : 2;
}

struct Facet {
    std::string id, label;
    std::vector<std::string> formats;
};
// int<b> alone; int<b>-asym with ds-int<b>; the declared formats (fp8, MX, nf4, -sr, a user's).
std::vector<Facet> facets(const std::vector<std::string>& formats) {
    Facet sym{"sym", "int<b> (symmetric)", {}}, other{"asym-ds", "int<b>-asym and ds-int<b>", {}},
        decl{"declared", "declared formats (fp8, MX, nf4, stochastic, user)", {}};
    for (const auto& f : formats) {
        const std::string fam = family_of(f);
        (fam == "sym" ? sym : fam == "declared" ? decl : other).formats.push_back(f);
    }
    std::vector<Facet> out;
    if (!sym.formats.empty()) out.push_back(sym);
    if (!other.formats.empty()) out.push_back(other);
    if (!decl.formats.empty()) out.push_back(decl);
    return out;
}

std::string id_safe(std::string s) {
    for (char& c : s)
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-') c = '-';
    return s;
}

std::string table_html(const detail::Table& t) {
    std::ostringstream o;
    o << "<table><thead><tr>";
    for (const auto& h : t.header) o << "<th>" << xml_escape(h) << "</th>";
    o << "</tr></thead><tbody>";
    for (const auto& row : t.rows) {
        o << "<tr>";
        for (size_t i = 0; i < row.size(); ++i) {
            const bool bad = row[i].find("FAIL") != std::string::npos;
            o << "<td" << (i ? " class=\"num\"" : "") << (bad ? " style=\"color:#b00020;font-weight:bold\"" : "") << ">"
              << xml_escape(row[i]) << "</td>";
        }
        o << "</tr>";
    }
    o << "</tbody></table>\n";
    return o.str();
}

// A table of its own section: title, a caption (HTML already), the table, and the notes under it.
void html_section(std::ostringstream& o, const char* title, const char* caption, const detail::Table& t,
                  const std::vector<std::string>& notes) {
    o << "<h2>" << title << "</h2>\n<p class=\"caption\">" << caption << "</p>\n" << table_html(t) << "<ul>";
    for (const auto& line : notes) o << "<li>" << xml_escape(line) << ".</li>";
    o << "</ul>\n";
}

// `formats validate`'s comparison (FormatComparison), the declared format in bold.
std::string format_comparison_html(const FormatComparison& fc) {
    std::string o = "<h2 id=\"format-comparison\">Format comparison</h2>\n<p class=\"caption\">" + xml_escape(fc.declared) +
                    " (declared, bold) against built-in formats: relative RMS error of the reduce-scatter after k = 1 and k = 2 "
                    "quantizations in transit (largest N), and at the largest k, on " + xml_escape(fc.dist) +
                    " inputs; wire bits per element at the gate's block.</p>\n<table><thead><tr><th>format</th><th>bits/element</th>"
                    "<th>error k=1</th><th>error k=2</th><th>largest k</th><th>error at largest k</th><th>bounds</th></tr></thead><tbody>";
    for (const auto& r : fc.rows) {
        const std::string name = xml_escape(r.format);
        o += "<tr><td>" + (r.format == fc.declared ? "<b>" + name + "</b>" : name) + "</td><td class=\"num\">" + g4(r.bits) +
             "</td><td class=\"num\">" + g4_cell(r.k1) + "</td><td class=\"num\">" + g4_cell(r.k2) + "</td><td class=\"num\">" +
             std::to_string(r.kmax) + "</td><td class=\"num\">" + g4_cell(r.kmax_err) + "</td><td>" + (r.holds ? "hold" : "FAIL") + "</td></tr>";
    }
    return o + "</tbody></table>\n";
}

std::string tip(const GateRun& x) {
    return x.path + ", " + x.format + ", N=" + std::to_string(x.ranks) + ", k<=" + std::to_string(x.k_max) +
           ": relative RMS error " + detail::fmt_g(x.rel_rms_error, 4) + ", " + detail::fmt_g(x.wire_bits_per_element(), 4) +
           " bits/element on the wire";
}

}  // namespace

std::string to_html(const GateResult& r) {
    const std::string dist = r.dists.empty() ? "" : r.dists.front();
    std::vector<std::pair<std::string, std::string>> plots;  // (section, svg)

    // ---- error against k ---------------------------------------------------------------------
    for (const auto& fc : facets(r.formats)) {
        svg::Plot p;
        p.id = "plot-k-" + fc.id;
        p.title = "Error against k, " + fc.label + " (" + dist + " inputs)";
        p.xlabel = "k: times a contribution was quantized in transit (largest in the run, from the ledger)";
        p.ylabel = "relative RMS error (dimensionless)";
        p.logx = p.logy = true;
        int color = 0;
        for (const auto& f : fc.formats) {
            std::map<int32_t, std::vector<double>> by_k;
            svg::Series pts{"", {}, false, true, marker_of(f), color};  // unnamed: no legend row
            for (const auto& x : r.runs) {
                if (x.format != f || x.dist != dist || !x.quantized || x.shape == PathShape::kAllGather || x.k_max <= 0) continue;
                pts.points.push_back({static_cast<double>(x.k_max), x.rel_rms_error, tip(x)});
                if (x.rel_rms_error > 0) by_k[x.k_max].push_back(std::log(x.rel_rms_error));
            }
            svg::Series chain{f, {}, true, false, marker_of(f), color};
            chain.legend_marker = true;
            for (const auto& [k, v] : by_k) {
                double m = 0;
                for (double e : v) m += e;
                chain.points.push_back({static_cast<double>(k), std::exp(m / static_cast<double>(v.size())), ""});
            }
            ++color;
            if (pts.points.empty()) continue;
            p.series.push_back(std::move(chain));
            p.series.push_back(std::move(pts));
        }
        plots.emplace_back("k", svg::render(p));
    }

    // ---- relative error against N, per path ---------------------------------------------------
    for (const auto& path : r.paths) {
        for (const auto& fc : facets(r.formats)) {
            svg::Plot p;
            p.id = "plot-n-" + id_safe(path) + "-" + fc.id;
            p.title = path + ": relative error against N, " + fc.label + " (" + dist + ")";
            p.xlabel = "N: ranks (log scale)";
            p.ylabel = "relative RMS error (dimensionless, log scale)";
            p.logx = p.logy = true;
            int color = 0;
            for (const auto& f : fc.formats) {
                svg::Series s{f, {}, true, true, marker_of(f), color++};
                for (const auto& x : r.runs)
                    if (x.path == path && x.format == f && x.dist == dist) s.points.push_back({static_cast<double>(x.ranks), x.rel_rms_error, tip(x)});
                std::sort(s.points.begin(), s.points.end(), [](const svg::Point& a, const svg::Point& b) { return a.x < b.x; });
                for (const auto& fit : r.fits)
                    if (fit.path == path && fit.format == f && fit.dist == dist)
                        s.name += " (slope " + detail::fmt_g(fit.exponent, 2) + ")";
                if (!s.points.empty()) p.series.push_back(std::move(s));
            }
            if (!p.series.empty()) plots.emplace_back("n", svg::render(p));
        }
    }

    // ---- bytes against error -----------------------------------------------------------------
    for (int cross = 0; cross < 2; ++cross) {
        svg::Plot p;
        p.id = cross ? "plot-bytes-cross-node" : "plot-bytes";
        p.title = std::string(cross ? "Cross-node bytes" : "Bytes") + " against error, every path and format (" + dist +
                  ", largest N)";
        p.xlabel = std::string(cross ? "cross-node payload" : "payload") +
                   " of the busiest rank, bits per element of its tensor (log scale)";
        p.ylabel = "relative RMS error (dimensionless, log scale)";
        p.logx = p.logy = true;
        std::map<std::string, int64_t> nmax;
        for (const auto& x : r.runs)
            if (x.dist == dist) nmax[x.path] = std::max(nmax[x.path], x.ranks);
        double fp16 = 0;
        int color = 0;
        for (const auto& path : r.paths) {
            svg::Series s{path + " (N=" + std::to_string(nmax[path]) + ")", {}, false, true, 0, color++};
            for (const auto& x : r.runs) {
                if (x.path != path || x.dist != dist || x.ranks != nmax[path]) continue;
                const double bytes = cross ? x.cross_node_bytes_per_rank : x.bytes_per_rank;
                s.points.push_back({bytes * 8.0 / static_cast<double>(x.elements), x.rel_rms_error, tip(x)});
                s.marker = 0;
                if (x.ranks == r.ranks.back() || fp16 == 0)
                    fp16 = x.fp16_ring_rs_bytes_per_rank * 8.0 / static_cast<double>(x.elements);
            }
            if (!s.points.empty()) p.series.push_back(std::move(s));
        }
        if (fp16 > 0) p.vlines.push_back({fp16, "fp16 ring RS (ZeRO)"});
        plots.emplace_back("bytes", svg::render(p));
    }

    // ---- the page --------------------------------------------------------------------------------
    std::ostringstream o;
    o << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
      << "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
      << "<title>qtransit check: " << (r.passed() ? "PASS" : "FAIL") << "</title>\n<style>\n"
      << "body{font-family:sans-serif;font-size:15px;margin:24px;color:#222;max-width:1600px}\n"
      << "h1{font-size:24px} h2{font-size:19px;margin-top:32px} .pass{color:#1b7f3b} .fail{color:#b00020}\n"
      << "table{border-collapse:collapse;margin:8px 0} td,th{border:1px solid #ccc;padding:3px 8px;font-size:13px}\n"
      << "th{background:#f2f2f2} td.num{text-align:right;font-variant-numeric:tabular-nums}\n"
      << ".plots{display:flex;flex-wrap:wrap;gap:16px} .plots svg{border:1px solid #ddd}\n"
      << "p.caption{max-width:1540px}\n</style></head><body>\n";
    o << "<h1>qtransit numerics gate: <span class=\"" << (r.passed() ? "pass\">PASS" : "fail\">FAIL") << "</span></h1>\n";
    if (!r.verify_text.empty()) {
        o << "<p>Command: " << xml_escape(r.config_source);
    } else {
        o << "<p>" << r.formats.size() << " formats, " << r.paths.size() << " paths, " << r.dists.size()
          << " distributions, N =";
        for (auto n : r.ranks) o << " " << n;
        o << " (" << r.ranks_per_node << " ranks per node), " << r.elements << " elements per rank, block " << r.block
          << ", seed " << r.seed << (r.accum == "fp32" ? "" : ", " + r.accum + " accumulation")
          << (r.divide == "none" ? "" : ", the mean (divided by N " + r.divide + ")") << "; " << r.runs.size()
          << " runs in " << detail::fmt_g(r.wall_seconds, 3)
          << " s. Config: " << xml_escape(r.config_source);
    }
    o << ". qtransit " << xml_escape(r.version) << ", "
      << xml_escape(r.started_at) << ".</p>\n";
    if (!r.notes.empty()) {
        o << "<ul>";
        for (const auto& n : r.notes) o << "<li>" << xml_escape(n) << "</li>";
        o << "</ul>\n";
    }
    if (!r.verify_text.empty()) o << "<h2>Verify</h2>\n<pre>" << xml_escape(r.verify_text) << "</pre>\n";
    o << "<h2>Verdicts</h2>\n" << table_html(detail::category_table(r));
    if (!r.passed()) {
        o << "<h3 class=\"fail\">Failed verdicts</h3><ul>";
        for (const auto& v : r.verdicts)
            if (v.status == VerdictStatus::kFail) o << "<li><code>" << xml_escape(v.name) << "</code>: " << xml_escape(v.message) << "</li>";
        o << "</ul>\n";
    }
    o << "<h2>Relative RMS error at the largest N</h2>\n" << table_html(detail::error_table(r));
    if (const auto cmp = detail::compare_table(r); !cmp.rows.empty())
        html_section(o, "Quantized all-to-all against 16-bit rings",
                     "Relative RMS error against the exact sum (the exact mean for a divided row), and cross-node bytes per rank. The "
                     "16-bit rings' inputs are cast to their type first (docs/DECISIONS.md D26); pre-divided rows scale every input by 1/N "
                     "in that type, as DeepSpeed does (D27).",
                     cmp, detail::compare_notes(r));
    if (const auto coll = detail::collectives_table(r); !coll.rows.empty())
        html_section(o, "The collectives run now, beside ZeRO++",
                     "Relative RMS error against the exact result (the exact mean for ncclAvg), per distribution; &quot;saturated&quot;: "
                     "outputs a clamp at the FP8 format's largest value reached (D41); &quot;refused&quot;: inputs the path's type cannot "
                     "hold. wire B/rank: the busiest rank's payload; k: the fewest..most quantizations on one contribution's way.",
                     coll, detail::collectives_notes(r));
    o << "<h2>Error against k</h2>\n<p class=\"caption\">Every reduce-scatter and all-reduce run on " << xml_escape(dist)
      << " inputs: x is the largest k in the run (read from the ledger: ring-rs at N gives N-1, a2a-rs 1, a2a-hier-rs and "
         "two-shot-ar 2, tree-rs log2 N), y its relative RMS error; the line joins the geometric mean per k. Hover a "
         "point for its path and N. The gathers are left out: their error does not depend on k for idempotent formats.</p>\n"
      << "<div class=\"plots\">";
    for (const auto& [sec, s] : plots)
        if (sec == "k") o << s;
    o << "</div>\n<h2>Relative error against N</h2>\n<p class=\"caption\">Per path, on log-log axes; the legend gives the "
         "least-squares slope of log error on log N (the scaling exponent).</p>\n<div class=\"plots\">";
    for (const auto& [sec, s] : plots)
        if (sec == "n") o << s;
    o << "</div>\n<h2>Communication bytes against error</h2>\n<p class=\"caption\">One point per format for every path at "
         "its largest N: the busiest rank's payload (codes and metadata) in bits per element of its tensor, against the "
         "relative RMS error. Circles; hover a point for its format. The dashed line is a binary16 ring reduce-scatter, "
         "ZeRO's baseline. ZeRO++'s trade: a2a-hier-rs sends few bytes across nodes for a small error.</p>\n"
      << "<div class=\"plots\">";
    for (const auto& [sec, s] : plots)
        if (sec == "bytes") o << s;
    o << "</div>\n<h2>Every verdict</h2>\n<table><thead><tr><th>verdict</th><th>status</th><th>checked</th><th>detail</th></tr></thead><tbody>";
    for (int pass = 0; pass < 2; ++pass)  // failures first
        for (const auto& v : r.verdicts) {
            if ((v.status == VerdictStatus::kFail) != (pass == 0)) continue;
            o << "<tr><td><code>" << xml_escape(v.name) << "</code></td><td class=\""
              << (v.status == VerdictStatus::kFail ? "fail" : v.status == VerdictStatus::kPass ? "pass" : "") << "\">"
              << to_string(v.status) << "</td><td class=\"num\">" << (v.checked >= 0 ? std::to_string(v.checked) : std::string("-"))
              << "</td><td>" << xml_escape(v.message) << "</td></tr>\n";
        }
    o << "</tbody></table>\n";
    if (r.format_comparison) o << format_comparison_html(*r.format_comparison);
    o << "</body></html>\n";
    return o.str();
}

}  // namespace qtransit::reports
