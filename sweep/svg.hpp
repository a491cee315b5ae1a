// Charts written as SVG text: axes with "nice" ticks (1, 2, 5 x 10^k; decades on a log
// axis), axis labels, a title, a legend and notes, no external tool.
//
// Numeric x: one polyline per series (markers too when a series has few points).
// Categorical x: markers only, no line, since categories have no order for a line to
// suggest; the series at one category stand side by side. A point can be drawn as an 'x'
// (a run that diverged). The legend is as wide and as tall as its entries need: long
// entries wrap onto further lines, never cut, and the figure grows to hold them.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace dtsim::sweep {

struct Series {
  std::string name;          // its legend entry
  std::vector<double> x, y;  // equal lengths; non-finite points (and <= 0 on a log axis) are skipped
  // What the legend entries of this series and its neighbours list ("topology, model"):
  // said once, as a heading above the first of consecutive series that share it, so that
  // the entries hold values only. Empty: no heading.
  std::string legend_group;
  std::vector<std::size_t> crossed;  // indices of points drawn as an 'x' instead of a dot
};

struct Chart {
  std::string title, x_label, y_label;
  bool x_log = false, y_log = false;
  // Magnitudes (time, bits): a linear axis starts at 0, so that lengths compare as ratios.
  bool x_from_zero = false, y_from_zero = false;
  // When non-empty, x values are indices into these labels (evenly spaced, in order).
  std::vector<std::string> x_categories;
  std::vector<Series> series;
  std::vector<std::string> notes;  // lines under the legend (what an 'x' means)
};

std::string render_svg(const Chart& chart);

// Tick positions covering [lo, hi]: about `target` linear ticks at 1/2/5 x 10^k steps.
std::vector<double> nice_ticks(double lo, double hi, int target = 6);

// `text` broken at spaces into lines of at most `width` characters (a longer word keeps a
// line of its own, whole).
std::vector<std::string> wrap_text(const std::string& text, std::size_t width);

}  // namespace dtsim::sweep
