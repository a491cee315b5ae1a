#include "sweep/svg.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <utility>

#include <fmt/format.h>

namespace dtsim::sweep {

namespace {

constexpr double kPlotWidth = 480, kPlotHeight = 354;
constexpr double kLeft = 80, kTop = 44, kBottom = 62;  // margins; the legend sits right of the plot
constexpr double kLineHeight = 18;                     // of a legend line
constexpr double kTickLineHeight = 14;                 // of a wrapped category label
constexpr double kCharWidth = 7.4;                     // of the 12 px sans-serif text, generously
constexpr double kBoldCharWidth = 8.0;
constexpr std::size_t kEntryChars = 40;  // legend entries wrap beyond this many characters
constexpr std::size_t kNoteChars = 46;
constexpr std::size_t kMaxPolyline = 2000;  // longer series are thinned (every k-th point)
constexpr std::size_t kMaxDots = 40;        // series with more points are drawn as lines only

// Colour-blind-safe palette (Okabe-Ito, then Tol's muted); past its end the colours come
// again dashed, then dotted, so that no two series look alike.
const char* const kColors[] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000",
                               "#332288", "#882255", "#44AA99", "#999933", "#AA4499", "#117733", "#661100"};
const char* const kDashes[] = {"", " stroke-dasharray=\"6 3\"", " stroke-dasharray=\"2 3\""};

const char* color_of(std::size_t series) { return kColors[series % std::size(kColors)]; }
const char* dash_of(std::size_t series) { return kDashes[series / std::size(kColors) % std::size(kDashes)]; }

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

// Range of the usable values, padded so a flat series still has a visible axis; with
// `from_zero` (a linear axis of magnitudes) it reaches 0.
std::pair<double, double> range_of(const std::vector<const std::vector<double>*>& sets, bool log, bool from_zero) {
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
  if (from_zero) lo = std::min(lo, 0.0), hi = std::max(hi, 0.0);
  if (hi == lo) {
    if (from_zero) return {0.0, 1.0};  // every value is 0
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

std::string cross_at(double x, double y) {
  return fmt::format("<path class=\"diverged\" d=\"M{:.1f},{:.1f} L{:.1f},{:.1f} M{:.1f},{:.1f} L{:.1f},{:.1f}\" "
                     "fill=\"none\" stroke-width=\"2.2\"/>\n",
                     x - 5, y - 5, x + 5, y + 5, x - 5, y + 5, x + 5, y - 5);
}

// The legend as lines of text: a heading where the group changes, each entry wrapped
// (its first line carries the series' swatch), then the notes.
struct LegendLine {
  enum Kind { Heading, Entry, Continuation, Note } kind;
  std::string text;
  std::size_t series = 0;  // an Entry's
  double gap = 0;          // extra space above it
};

std::vector<LegendLine> legend_lines(const Chart& c) {
  std::vector<LegendLine> lines;
  auto add = [&](LegendLine::Kind kind, const std::string& text, std::size_t width, std::size_t series, double gap) {
    for (auto& part : wrap_text(text, width)) {
      lines.push_back({kind, part, series, gap});
      kind = kind == LegendLine::Entry ? LegendLine::Continuation : kind;
      gap = 0;
    }
  };
  for (std::size_t i = 0; i < c.series.size(); ++i) {
    const auto& s = c.series[i];
    double gap = 0;
    if (i > 0 && s.legend_group != c.series[i - 1].legend_group) gap = 6;  // groups stand apart
    if (!s.legend_group.empty() && (i == 0 || gap > 0)) {
      add(LegendLine::Heading, s.legend_group, kEntryChars, 0, gap);
      gap = 0;
    }
    add(LegendLine::Entry, s.name, kEntryChars, i, gap);
  }
  for (std::size_t k = 0; k < c.notes.size(); ++k)
    add(LegendLine::Note, c.notes[k], kNoteChars, 0, k == 0 && !lines.empty() ? 10.0 : 0.0);
  return lines;
}

double width_of(const LegendLine& line) {
  const auto n = static_cast<double>(line.text.size());
  switch (line.kind) {
    case LegendLine::Heading: return kBoldCharWidth * n;
    case LegendLine::Entry:
    case LegendLine::Continuation: return 24 + kCharWidth * n;
    case LegendLine::Note: return kCharWidth * n;
  }
  return 0;
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

std::vector<std::string> wrap_text(const std::string& text, std::size_t width) {
  std::vector<std::string> lines;
  std::string line;
  for (std::size_t at = 0; at <= text.size();) {
    const std::size_t space = std::min(text.find(' ', at), text.size());
    const std::string word = text.substr(at, space - at);
    if (!line.empty() && line.size() + 1 + word.size() > width) {
      lines.push_back(line);
      line = word;
    } else {
      line += (line.empty() ? "" : " ") + word;
    }
    at = space + 1;
  }
  lines.push_back(line);
  return lines;
}

std::string render_svg(const Chart& c) {
  const bool categorical = !c.x_categories.empty();
  const bool x_log = c.x_log && !categorical;
  const auto legend = legend_lines(c);
  double legend_width = 8 * kCharWidth, legend_height = 0;
  for (const auto& line : legend) legend_width = std::max(legend_width, width_of(line)), legend_height += kLineHeight + line.gap;
  // Category labels wrap to the width of their slot, so that a long one does not run
  // into its neighbours; the x axis label moves down below the lines they take.
  std::vector<std::vector<std::string>> category_lines;
  std::size_t label_lines = 1;
  for (const auto& label : c.x_categories) {
    const double slot = kPlotWidth / static_cast<double>(c.x_categories.size());
    category_lines.push_back(wrap_text(label, std::max<std::size_t>(4, static_cast<std::size_t>(slot / kCharWidth))));
    label_lines = std::max(label_lines, category_lines.back().size());
  }
  const double plot_right = kLeft + kPlotWidth, plot_bottom = kTop + kPlotHeight;
  const double bottom = kBottom + kTickLineHeight * static_cast<double>(label_lines - 1);
  const double width = plot_right + 14 + legend_width + 16;
  const double height = std::max(plot_bottom + bottom, kTop + legend_height + 16);

  std::vector<const std::vector<double>*> xs, ys;
  for (const auto& s : c.series) xs.push_back(&s.x), ys.push_back(&s.y);
  auto [x_lo, x_hi] = categorical ? std::pair{-0.5, static_cast<double>(c.x_categories.size()) - 0.5}
                                  : range_of(xs, x_log, c.x_from_zero);
  auto [y_lo, y_hi] = range_of(ys, c.y_log, c.y_from_zero);
  const Scale sx{x_lo, x_hi, kLeft, plot_right, x_log};
  const Scale sy{y_lo, y_hi, plot_bottom, kTop, c.y_log};

  std::string out = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0:.0f}\" height=\"{1:.0f}\" viewBox=\"0 0 {0:.0f} {1:.0f}\" "
      "font-family=\"Helvetica, Arial, sans-serif\" font-size=\"12\">\n"
      "<rect width=\"{0:.0f}\" height=\"{1:.0f}\" fill=\"white\"/>\n"
      "<text x=\"{2}\" y=\"24\" font-size=\"15\" text-anchor=\"middle\">{3}</text>\n",
      width, height, (kLeft + plot_right) / 2, escape(c.title));

  // Grid and ticks.
  const auto y_ticks = c.y_log ? log_ticks(y_lo, y_hi) : nice_ticks(y_lo, y_hi);
  for (double t : y_ticks) {
    if (t < y_lo - 1e-12 * std::fabs(y_hi - y_lo) || t > y_hi + 1e-12 * std::fabs(y_hi - y_lo)) continue;
    const double y = sy(t);
    out += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#e5e5e5\"/>\n", kLeft, y,
                       plot_right, y);
    out += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n", kLeft - 6, y + 4,
                       escape(tick_label(t)));
  }
  auto x_tick = [&](double x, const std::vector<std::string>& lines) {
    out += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\" stroke=\"#e5e5e5\"/>\n", x, kTop,
                       plot_bottom);
    for (std::size_t i = 0; i < lines.size(); ++i)
      out += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n", x,
                         plot_bottom + 18 + kTickLineHeight * static_cast<double>(i), escape(lines[i]));
  };
  if (categorical) {
    for (std::size_t i = 0; i < c.x_categories.size(); ++i) x_tick(sx(static_cast<double>(i)), category_lines[i]);
  } else {
    for (double t : x_log ? log_ticks(x_lo, x_hi) : nice_ticks(x_lo, x_hi))
      if (t >= x_lo - 1e-12 * std::fabs(x_hi - x_lo) && t <= x_hi + 1e-12 * std::fabs(x_hi - x_lo))
        x_tick(sx(t), {tick_label(t)});
  }
  // Axes and their labels.
  out += fmt::format("<path d=\"M{0:.1f},{1:.1f} V{2:.1f} H{3:.1f}\" fill=\"none\" stroke=\"black\"/>\n", kLeft, kTop,
                     plot_bottom, plot_right);
  out += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n", (kLeft + plot_right) / 2,
                     plot_bottom + bottom - 18, escape(c.x_label + (x_log ? " (log)" : "")));
  out += fmt::format("<text x=\"18\" y=\"{0:.1f}\" text-anchor=\"middle\" transform=\"rotate(-90 18 {0:.1f})\">{1}</text>\n",
                     (kTop + plot_bottom) / 2, escape(c.y_label + (c.y_log ? " (log)" : "")));

  // Series. At a category the series stand side by side, a few pixels apart.
  const double category_width = categorical ? kPlotWidth / static_cast<double>(c.x_categories.size()) : 0;
  const double dodge = c.series.size() > 1 ? std::min(10.0, 0.6 * category_width / static_cast<double>(c.series.size())) : 0;
  for (std::size_t i = 0; i < c.series.size(); ++i) {
    const auto& s = c.series[i];
    const double offset = categorical ? dodge * (static_cast<double>(i) - (static_cast<double>(c.series.size()) - 1) / 2) : 0;
    const std::size_t n = std::min(s.x.size(), s.y.size());
    auto pixel = [&](std::size_t j) -> std::optional<std::pair<double, double>> {
      if (!usable(s.x[j], x_log) || !usable(s.y[j], c.y_log)) return std::nullopt;
      return std::pair{sx(s.x[j]) + offset, sy(s.y[j])};
    };
    auto crossed = [&](std::size_t j) { return std::find(s.crossed.begin(), s.crossed.end(), j) != s.crossed.end(); };
    out += fmt::format("<g stroke=\"{0}\" fill=\"{0}\"><title>{1}</title>\n", color_of(i), escape(s.name));
    if (!categorical) {
      const std::size_t stride = std::max<std::size_t>(1, (n + kMaxPolyline - 1) / kMaxPolyline);
      std::string points;
      std::size_t count = 0;
      for (std::size_t j = 0; j < n; j = (j + 1 < n && j + stride >= n) ? n - 1 : j + stride)
        if (const auto p = pixel(j)) points += fmt::format("{}{:.1f},{:.1f}", count++ ? " " : "", p->first, p->second);
      if (count > 1) out += fmt::format("<polyline fill=\"none\" stroke-width=\"1.8\"{} points=\"{}\"/>\n", dash_of(i), points);
    }
    const bool dots = categorical || n <= kMaxDots;
    for (std::size_t j = 0; j < n; ++j) {
      const auto p = pixel(j);
      if (!p) continue;
      if (crossed(j)) out += cross_at(p->first, p->second);
      else if (dots) out += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3\"/>\n", p->first, p->second);
    }
    out += "</g>\n";
  }

  // Legend and notes.
  const double lx = plot_right + 14;
  double ly = kTop + 8;
  for (const auto& line : legend) {
    ly += line.gap;
    switch (line.kind) {
      case LegendLine::Heading:
        out += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" font-weight=\"bold\">{}</text>\n", lx, ly + 4, escape(line.text));
        break;
      case LegendLine::Entry:
        if (categorical)
          out += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3.5\" fill=\"{}\"/>\n", lx + 9, ly, color_of(line.series));
        else
          out += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"{}\" stroke-width=\"2.5\"{}/>\n",
                             lx, ly, lx + 18, ly, color_of(line.series), dash_of(line.series));
        [[fallthrough]];
      case LegendLine::Continuation:
        out += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\">{}</text>\n", lx + 24, ly + 4, escape(line.text));
        break;
      case LegendLine::Note:
        out += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" fill=\"#555555\">{}</text>\n", lx, ly + 4, escape(line.text));
        break;
    }
    ly += kLineHeight;
  }
  out += "</svg>\n";
  return out;
}

}  // namespace dtsim::sweep
