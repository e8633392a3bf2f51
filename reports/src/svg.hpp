// A small SVG plot writer for the HTML report: scatter/line series on linear or log axes (decade
// ticks), axis labels with units, a legend, and a tooltip (<title>) per point. No script.
#pragma once

#include <string>
#include <vector>

namespace qtransit::reports::svg {

struct Point {
    double x = 0, y = 0;
    std::string tip;  // shown on hover (SVG <title>)
};

struct Series {
    std::string name;
    std::vector<Point> points;
    bool line = true;     // join the points in the order given
    bool markers = true;
    int marker = 0;       // 0 circle, 1 square, 2 triangle, 3 diamond
    int color = -1;       // index into the palette; -1: the series' index
    bool legend_marker = false;  // draw the marker in the legend even without markers
    // A series with an empty name has no legend row.
};

struct VLine {
    double x = 0;
    std::string label;
};

struct Plot {
    std::string id, title, xlabel, ylabel;
    bool logx = false, logy = false;
    std::vector<Series> series;
    std::vector<VLine> vlines;
    int width = 760, height = 460;
};

std::string render(const Plot& p);
const char* palette(int i);

}  // namespace qtransit::reports::svg
