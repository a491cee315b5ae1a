#include "sweep/svg.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

namespace dtsim::sweep {

namespace {

constexpr double kPlotWidth = 480, kHeight = 460;
constexpr double kLeft = 80, kTop = 44, kBottom = 62;  // margins; the legend sits right of the plot
constexpr std::size_t kMaxLegendChars = 44;
constexpr double kCharWidth = 7.4;  // of the 12 px sans-serif legend text, generously
constexpr std::size_t kMaxLegend = 14;
constexpr std::size_t kMaxPolyline = 2000;  // longer series are thinned (every k-th point)

// Colour-blind-safe palette (Okabe-Ito, then Tol's muted).
const char* const kColors[] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000",
                               "#332288", "#882255", "#44AA99", "#999933", "#AA4499", "#117733", "#661100"};

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string tick_label(double v) {
  if (v == 0) return "0";
  const double a = std::fabs(v);
  if (a >= 1e5 || a < 1e-3) {
    const int e = static_cast<int>(std::floor(std::log10(a)));
    const double m = v / std::pow(10.0, e);
    return std::fabs(m - 1.0) < 1e-9 ? fmt::format("1e{}", e) : fmt::format("{:g}e{}", std::round(m * 100) / 100, e);
  }
  return fmt::format("{:g}", std::round(v * 1e9) / 1e9);
}

struct Scale {
  double lo, hi, p0, p1;  // data range -> pixel range
  bool log;
  double operator()(double v) const {
    const double a = log ? std::log10(lo) : lo, b = log ? std::log10(hi) : hi, x = log ? std::log10(v) : v;
    return b == a ? (p0 + p1) / 2 : p0 + (x - a) / (b - a) * (p1 - p0);
  }
};

bool usable(double v, bool log) { return std::isfinite(v) && (!log || v > 0); }

// Range of the usable values, padded so a flat series still has a visible axis.
std::pair<double, double> range_of(const std::vector<const std::vector<double>*>& sets, bool log) {
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (const auto* s : sets)
    for (double v : *s)
      if (usable(v, log)) lo = std::min(lo, v), hi = std::max(hi, v);
  if (!std::isfinite(lo)) return log ? std::pair{1.0, 10.0} : std::pair{0.0, 1.0};
  if (log) {
    lo = std::pow(10.0, std::floor(std::log10(lo)));
    hi = std::pow(10.0, std::ceil(std::log10(hi)));
    if (hi <= lo) hi = lo * 10;
    return {lo, hi};
  }
  if (hi == lo) {
    const double pad = lo == 0 ? 1.0 : std::fabs(lo) * 0.1;
    return {lo - pad, hi + pad};
  }
  const auto ticks = nice_ticks(lo, hi);
  return {std::min(lo, ticks.front()), std::max(hi, ticks.back())};
}

std::vector<double> log_ticks(double lo, double hi) {
  std::vector<double> t;
  for (double v = lo; v <= hi * (1 + 1e-9); v *= 10) t.push_back(v);
  return t;
}

}  // namespace

std::vector<double> nice_ticks(double lo, double hi, int target) {
  if (!(hi > lo)) return {lo};
  const double raw = (hi - lo) / std::max(1, target - 1);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * mag >= raw) {
      step = m * mag;
      break;
    }
  std::vector<double> t;
  const double first = std::floor(lo / step), last = std::ceil(hi / step);
  for (double i = first; i <= last; ++i) t.push_back(i * step);
  return t;
}

std::string render_svg(const Chart& c) {
  std::size_t longest = 8;
  for (const auto& s : c.series) longest = std::max(longest, std::min(kMaxLegendChars, s.name.size()));
  const double right_margin = 56 + kCharWidth * static_cast<double>(longest);
  const double width = kLeft + kPlotWidth + right_margin;
  const bool categorical = !c.x_categories.empty();
  std::vector<const std::vector<double>*> xs, ys;
  for (const auto& s : c.series) xs.push_back(&s.x), ys.push_back(&s.y);
  auto [x_lo, x_hi] = categorical ? std::pair{-0.5, static_cast<double>(c.x_categories.size()) - 0.5}
                                  : range_of(xs, c.x_log);
  auto [y_lo, y_hi] = range_of(ys, c.y_log);
  const Scale sx{x_lo, x_hi, kLeft, width - right_margin, c.x_log && !categorical};
  const Scale sy{y_lo, y_hi, kHeight - kBottom, kTop, c.y_log};

  std::string out = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0:.0f}\" height=\"{1:.0f}\" viewBox=\"0 0 {0:.0f} {1:.0f}\" "
      "font-family=\"Helvetica, Arial, sans-serif\" font-size=\"12\">\n"
      "<rect width=\"{0:.0f}\" height=\"{1:.0f}\" fill=\"white\"/>\n"
      "<text x=\"{2}\" y=\"24\" font-size=\"15\" text-anchor=\"middle\">{3}</text>\n",
      width, kHeight, (kLeft + width - right_margin) / 2, escape(c.title));

  // Grid and ticks.
  const auto y_ticks = c.y_log ? log_ticks(y_lo, y_hi) : nice_ticks(y_lo, y_hi);
  for (double t : y_ticks) {
    if (t < y_lo - 1e-12 * std::fabs(y_hi - y_lo) || t > y_hi + 1e-12 * std::fabs(y_hi - y_lo)) continue;
    const double y = sy(t);
    out += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#e5e5e5\"/>\n", kLeft, y,
                       width - right_margin, y);
    out += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n", kLeft - 6, y + 4,
                       escape(tick_label(t)));
  }
  if (categorical) {
    for (std::size_t i = 0; i < c.x_categories.size(); ++i) {
      const double x = sx(static_cast<double>(i));
      out += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\" stroke=\"#e5e5e5\"/>\n", x, kTop,
                         kHeight - kBottom);
      out += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n", x, kHeight - kBottom + 18,
                         escape(c.x_categories[i]));
    }
  } else {
    const auto x_ticks = c.x_log ? log_ticks(x_lo, x_hi) : nice_ticks(x_lo, x_hi);
    for (double t : x_ticks) {
      if (t < x_lo - 1e-12 * std::fabs(x_hi - x_lo) || t > x_hi + 1e-12 * std::fabs(x_hi - x_lo)) continue;
      const double x = sx(t);
      out += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\" stroke=\"#e5e5e5\"/>\n", x, kTop,
                         kHeight - kBottom);
      out += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n", x, kHeight - kBottom + 18,
                         escape(tick_label(t)));
    }
  }
  // Axes and their labels.
  out += fmt::format("<path d=\"M{0:.1f},{1:.1f} V{2:.1f} H{3:.1f}\" fill=\"none\" stroke=\"black\"/>\n", kLeft, kTop,
                     kHeight - kBottom, width - right_margin);
  out += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n", (kLeft + width - right_margin) / 2,
                     kHeight - 18, escape(c.x_label + (c.x_log && !categorical ? " (log)" : "")));
  out += fmt::format("<text x=\"18\" y=\"{0:.1f}\" text-anchor=\"middle\" transform=\"rotate(-90 18 {0:.1f})\">{1}</text>\n",
                     (kTop + kHeight - kBottom) / 2, escape(c.y_label + (c.y_log ? " (log)" : "")));

  // Series.
  for (std::size_t i = 0; i < c.series.size(); ++i) {
    const auto& s = c.series[i];
    const char* color = kColors[i % std::size(kColors)];
    const std::size_t n = std::min(s.x.size(), s.y.size());
    const std::size_t stride = std::max<std::size_t>(1, (n + kMaxPolyline - 1) / kMaxPolyline);
    std::vector<std::pair<double, double>> pixels;
    for (std::size_t j = 0; j < n; j = (j + 1 < n && j + stride >= n) ? n - 1 : j + stride)
      if (usable(s.x[j], c.x_log && !categorical) && usable(s.y[j], c.y_log)) pixels.emplace_back(sx(s.x[j]), sy(s.y[j]));
    out += fmt::format("<g stroke=\"{}\" fill=\"{}\"><title>{}</title>\n", color, color, escape(s.name));
    if (pixels.size() > 1) {
      out += "<polyline fill=\"none\" stroke-width=\"1.8\" points=\"";
      for (std::size_t j = 0; j < pixels.size(); ++j)
        out += fmt::format("{}{:.1f},{:.1f}", j ? " " : "", pixels[j].first, pixels[j].second);
      out += "\"/>\n";
    }
    if (pixels.size() <= 40)
      for (const auto& [px, py] : pixels) out += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3\"/>\n", px, py);
    out += "</g>\n";
  }

  // Legend.
  const double lx = width - right_margin + 14;
  for (std::size_t i = 0; i < c.series.size() && i < kMaxLegend; ++i) {
    const double ly = kTop + 8 + 18.0 * static_cast<double>(i);
    std::string name = c.series[i].name;
    if (name.size() > kMaxLegendChars) name = name.substr(0, kMaxLegendChars - 1) + "~";
    out += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"{}\" stroke-width=\"2.5\"/>\n",
                       lx, ly, lx + 18, ly, kColors[i % std::size(kColors)]);
    out += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\">{}</text>\n", lx + 24, ly + 4, escape(name));
  }
  if (c.series.size() > kMaxLegend)
    out += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\">... {} more</text>\n", lx, kTop + 8 + 18.0 * kMaxLegend + 4,
                       c.series.size() - kMaxLegend);
  out += "</svg>\n";
  return out;
}

}  // namespace dtsim::sweep
