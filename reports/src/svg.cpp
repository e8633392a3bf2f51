#include "svg.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "qtransit/reports/gate_result.hpp"

namespace qtransit::reports::svg {
namespace {

constexpr double kLeft = 78, kRight = 190, kTop = 34, kBottom = 58;  // margins: legend on the right

std::string num(double v) {
    char b[32];
    std::snprintf(b, sizeof b, "%.2f", v);
    return b;
}

std::string tick_label(double v) {
    char b[32];
    const double a = std::fabs(v);
    if (v == 0) return "0";
    if (a >= 1e5 || a < 1e-3) {
        const int e = static_cast<int>(std::lround(std::log10(a)));
        if (std::fabs(a - std::pow(10.0, e)) < 1e-9 * a) {
            std::snprintf(b, sizeof b, "%s1e%d", v < 0 ? "-" : "", e);
            return b;
        }
        std::snprintf(b, sizeof b, "%.1e", v);
        return b;
    }
    std::snprintf(b, sizeof b, "%g", v);
    return b;
}

struct Axis {
    bool log = false;
    double lo = 0, hi = 1;  // in axis units (log10 for a log axis)
    std::vector<std::pair<double, bool>> ticks;  // value (data units), labelled

    double to_unit(double v) const { return log ? std::log10(v) : v; }
    bool usable(double v) const { return std::isfinite(v) && (!log || v > 0); }
};

Axis make_axis(bool log, std::vector<double> vals) {
    Axis a;
    a.log = log;
    std::vector<double> u;
    for (double v : vals)
        if (a.usable(v)) u.push_back(a.to_unit(v));
    double lo = u.empty() ? 0 : *std::min_element(u.begin(), u.end());
    double hi = u.empty() ? 1 : *std::max_element(u.begin(), u.end());
    if (log) {
        lo = std::floor(lo - 0.02);  // keep points off the frame
        hi = std::ceil(hi + 0.02);
        if (hi <= lo) hi = lo + 1;
        a.lo = lo;
        a.hi = hi;
        const int decades = static_cast<int>(hi - lo);
        const int every = decades > 8 ? 2 : 1;
        for (int e = static_cast<int>(lo); e <= static_cast<int>(hi); ++e) {
            a.ticks.emplace_back(std::pow(10.0, e), (e - static_cast<int>(lo)) % every == 0);
            if (decades <= 2 && e < static_cast<int>(hi))
                for (double m : {2.0, 5.0}) a.ticks.emplace_back(m * std::pow(10.0, e), true);
        }
        return a;
    }
    if (hi <= lo) {
        hi = lo + 1;
        lo -= 1;
    }
    if (lo > 0 && lo < 0.3 * hi) lo = 0;  // start at 0 when that costs little
    const double raw = (hi - lo) / 6;
    const double mag = std::pow(10.0, std::floor(std::log10(raw)));
    double step = mag;
    for (double m : {1.0, 2.0, 5.0, 10.0})
        if (m * mag >= raw) {
            step = m * mag;
            break;
        }
    a.lo = std::floor(lo / step) * step;
    a.hi = std::ceil(hi / step) * step;
    for (double t = a.lo; t <= a.hi + step * 1e-6; t += step) a.ticks.emplace_back(std::fabs(t) < step * 1e-9 ? 0 : t, true);
    return a;
}

void marker(std::ostringstream& o, int kind, double x, double y, const char* color) {
    const double r = 4.5;
    switch (kind % 4) {
        case 0: o << "<circle cx=\"" << num(x) << "\" cy=\"" << num(y) << "\" r=\"" << r << "\" fill=\"" << color << "\"/>"; break;
        case 1:
            o << "<rect x=\"" << num(x - r) << "\" y=\"" << num(y - r) << "\" width=\"" << 2 * r << "\" height=\"" << 2 * r
              << "\" fill=\"" << color << "\"/>";
            break;
        case 2:
            o << "<polygon points=\"" << num(x) << "," << num(y - r - 1) << " " << num(x - r - 1) << "," << num(y + r) << " "
              << num(x + r + 1) << "," << num(y + r) << "\" fill=\"" << color << "\"/>";
            break;
        default:
            o << "<polygon points=\"" << num(x) << "," << num(y - r - 1) << " " << num(x - r - 1) << "," << num(y) << " "
              << num(x) << "," << num(y + r + 1) << " " << num(x + r + 1) << "," << num(y) << "\" fill=\"" << color << "\"/>";
    }
}

}  // namespace

const char* palette(int i) {
    static const char* colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                   "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"};
    return colors[((i % 10) + 10) % 10];
}

std::string render(const Plot& p) {
    std::vector<double> xs, ys;
    for (const auto& s : p.series)
        for (const auto& pt : s.points) {
            xs.push_back(pt.x);
            ys.push_back(pt.y);
        }
    for (const auto& v : p.vlines) xs.push_back(v.x);
    const Axis ax = make_axis(p.logx, xs), ay = make_axis(p.logy, ys);
    const double w = p.width, h = p.height, pw = w - kLeft - kRight, ph = h - kTop - kBottom;
    auto px = [&](double v) { return kLeft + (ax.to_unit(v) - ax.lo) / (ax.hi - ax.lo) * pw; };
    auto py = [&](double v) { return kTop + ph - (ay.to_unit(v) - ay.lo) / (ay.hi - ay.lo) * ph; };

    std::ostringstream o;
    o << "<svg xmlns=\"http://www.w3.org/2000/svg\" id=\"" << xml_escape(p.id) << "\" class=\"plot\" width=\"" << p.width
      << "\" height=\"" << p.height << "\" viewBox=\"0 0 " << p.width << " " << p.height
      << "\" font-family=\"sans-serif\" font-size=\"12\" role=\"img\" aria-label=\"" << xml_escape(p.title) << "\">\n";
    o << "<rect x=\"0\" y=\"0\" width=\"" << p.width << "\" height=\"" << p.height << "\" fill=\"#ffffff\"/>\n";
    o << "<text x=\"" << num(kLeft + pw / 2) << "\" y=\"20\" text-anchor=\"middle\" font-size=\"14\" font-weight=\"bold\">"
      << xml_escape(p.title) << "</text>\n";
    // Grid and ticks.
    o << "<g stroke=\"#e3e3e3\" stroke-width=\"1\">\n";
    for (const auto& [t, lab] : ax.ticks) o << "<line x1=\"" << num(px(t)) << "\" y1=\"" << kTop << "\" x2=\"" << num(px(t)) << "\" y2=\"" << num(kTop + ph) << "\"/>";
    for (const auto& [t, lab] : ay.ticks) o << "<line x1=\"" << kLeft << "\" y1=\"" << num(py(t)) << "\" x2=\"" << num(kLeft + pw) << "\" y2=\"" << num(py(t)) << "\"/>";
    o << "\n</g>\n<g fill=\"#333333\">\n";
    for (const auto& [t, lab] : ax.ticks)
        if (lab) o << "<text x=\"" << num(px(t)) << "\" y=\"" << num(kTop + ph + 17) << "\" text-anchor=\"middle\">" << tick_label(t) << "</text>";
    for (const auto& [t, lab] : ay.ticks)
        if (lab) o << "<text x=\"" << num(kLeft - 6) << "\" y=\"" << num(py(t) + 4) << "\" text-anchor=\"end\">" << tick_label(t) << "</text>";
    o << "\n</g>\n";
    o << "<rect x=\"" << kLeft << "\" y=\"" << kTop << "\" width=\"" << num(pw) << "\" height=\"" << num(ph)
      << "\" fill=\"none\" stroke=\"#333333\"/>\n";
    o << "<text x=\"" << num(kLeft + pw / 2) << "\" y=\"" << num(h - 14) << "\" text-anchor=\"middle\" font-size=\"13\">"
      << xml_escape(p.xlabel) << "</text>\n";
    o << "<text transform=\"translate(18," << num(kTop + ph / 2) << ") rotate(-90)\" text-anchor=\"middle\" font-size=\"13\">"
      << xml_escape(p.ylabel) << "</text>\n";
    // Reference lines.
    for (const auto& v : p.vlines) {
        if (!ax.usable(v.x)) continue;
        o << "<line x1=\"" << num(px(v.x)) << "\" y1=\"" << kTop << "\" x2=\"" << num(px(v.x)) << "\" y2=\"" << num(kTop + ph)
          << "\" stroke=\"#555555\" stroke-dasharray=\"6,4\"/><text x=\"" << num(px(v.x) - 4) << "\" y=\"" << kTop + 14
          << "\" text-anchor=\"end\" fill=\"#555555\">" << xml_escape(v.label) << "</text>\n";
    }
    // Series.
    for (size_t si = 0; si < p.series.size(); ++si) {
        const auto& s = p.series[si];
        const char* color = palette(s.color >= 0 ? s.color : static_cast<int>(si));
        o << "<g class=\"series\" data-name=\"" << xml_escape(s.name) << "\">";
        if (s.line) {
            std::string d;
            for (const auto& pt : s.points)
                if (ax.usable(pt.x) && ay.usable(pt.y)) d += (d.empty() ? "M" : " L") + num(px(pt.x)) + "," + num(py(pt.y));
            if (!d.empty()) o << "<path d=\"" << d << "\" fill=\"none\" stroke=\"" << color << "\" stroke-width=\"2\"/>";
        }
        if (s.markers)
            for (const auto& pt : s.points) {
                if (!ax.usable(pt.x) || !ay.usable(pt.y)) continue;
                o << "<g>";
                if (!pt.tip.empty()) o << "<title>" << xml_escape(pt.tip) << "</title>";
                marker(o, s.marker, px(pt.x), py(pt.y), color);
                o << "</g>";
            }
        o << "</g>\n";
    }
    // Legend.
    const double lx = kLeft + pw + 14;
    int row = 0;
    for (size_t si = 0; si < p.series.size(); ++si) {
        const auto& s = p.series[si];
        if (s.name.empty()) continue;
        const char* color = palette(s.color >= 0 ? s.color : static_cast<int>(si));
        const double ly = kTop + 8 + 19.0 * row++;
        if (s.line) o << "<line x1=\"" << num(lx) << "\" y1=\"" << num(ly) << "\" x2=\"" << num(lx + 24) << "\" y2=\"" << num(ly) << "\" stroke=\"" << color << "\" stroke-width=\"2\"/>";
        if (s.markers || s.legend_marker) marker(o, s.marker, lx + 12, ly, color);
        o << "<text x=\"" << num(lx + 30) << "\" y=\"" << num(ly + 4) << "\">" << xml_escape(s.name) << "</text>\n";
    }
    o << "</svg>\n";
    return o.str();
}

}  // namespace qtransit::reports::svg
