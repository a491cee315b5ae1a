// Line charts written as SVG text: axes with "nice" ticks (1, 2, 5 x 10^k; decades on a
// log axis), axis labels, a title, a legend, one polyline per series (markers when a
// series has few points), or categories along x. No external tool.
#pragma once

#include <string>
#include <vector>

namespace dtsim::sweep {

struct Series {
  std::string name;
  std::vector<double> x, y;  // equal lengths; non-finite points (and <= 0 on a log axis) are skipped
};

struct Chart {
  std::string title, x_label, y_label;
  bool x_log = false, y_log = false;
  // When non-empty, x values are indices into these labels (evenly spaced, in order).
  std::vector<std::string> x_categories;
  std::vector<Series> series;
};

std::string render_svg(const Chart& chart);

// Tick positions covering [lo, hi]: about `target` linear ticks at 1/2/5 x 10^k steps.
std::vector<double> nice_ticks(double lo, double hi, int target = 6);

}  // namespace dtsim::sweep
