#include "sweep/report.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <set>

#include <fmt/format.h>

#include "sweep/execute.hpp"
#include "sweep/svg.hpp"
#include "sweep/sweep.hpp"
#include "sweep/table.hpp"

namespace dtsim::sweep {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

bool is_result(const json& doc) { return doc.is_object() && doc.contains("per_step") && doc["per_step"].is_object(); }

// Seconds -> the unit that keeps the largest value readable.
std::pair<double, std::string> time_unit(double max_seconds) {
  if (max_seconds >= 1.0) return {1.0, "s"};
  if (max_seconds >= 1e-3) return {1e3, "ms"};
  if (max_seconds >= 1e-6) return {1e6, "us"};
  return {1e9, "ns"};
}

std::string file_safe(const std::string& s) {
  std::string out;
  for (char c : s) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.') ? c : '_';
  return out;
}

void write_file(const fs::path& file, const std::string& text) { write_atomic(file, text); }

}  // namespace

// A sweep point's legend: the values of the axes that vary ("name=value, ..."; the value
// alone when only one axis varies), without the fixed ones a point label also lists.
static std::string legend_of(const json& point, const json& manifest) {
  const json& axes = manifest.value("axes", json::array());
  const json& values = point.value("values", json::array());
  std::vector<std::string> parts;
  std::vector<std::string> names;
  for (std::size_t k = 0; k < axes.size() && k < values.size(); ++k) {
    if (axes[k].value("values", json::array()).size() < 2) continue;
    names.push_back(axes[k].value("name", axes[k].value("path", "")));
    parts.push_back(values[k].is_string() ? values[k].get<std::string>() : values[k].dump());
  }
  if (parts.empty()) return point.value("label", point.value("id", ""));
  if (parts.size() == 1) return parts[0];
  std::string out;
  for (std::size_t i = 0; i < parts.size(); ++i) out += (i ? ", " : "") + names[i] + "=" + parts[i];
  return out;
}

std::vector<LabelledResult> read_runs(const fs::path& input) {
  std::vector<LabelledResult> runs;
  if (fs::is_directory(input)) {
    const json manifest = read_manifest(input);
    for (const auto& p : read_points(input, manifest))
      if (!p.is_null()) runs.push_back({legend_of(p, manifest), p["result"]});
    return runs;
  }
  std::ifstream in(input);
  if (!in) throw SweepError(fmt::format("{}: cannot read", input.string()));
  json doc;
  try {
    doc = json::parse(in);
  } catch (const json::parse_error&) {
    throw SweepError(fmt::format("{}: not JSON", input.string()));
  }
  if (doc.is_object() && doc.contains("result") && is_result(doc["result"]))
    runs.push_back({doc.value("label", input.stem().string()), doc["result"]});
  else if (is_result(doc))
    runs.push_back({doc.contains("scenario") ? doc["scenario"].value("name", input.stem().string()) : input.stem().string(), doc});
  else
    throw SweepError(fmt::format("{}: not a result file, a sweep point file or a sweep output directory", input.string()));
  return runs;
}

std::vector<fs::path> write_report(const std::vector<fs::path>& inputs, const fs::path& out_dir) {
  if (inputs.empty()) throw SweepError("report: expected at least one result file or sweep directory");
  std::vector<LabelledResult> runs;
  std::vector<std::pair<fs::path, json>> sweeps;
  for (const auto& input : inputs) {
    auto r = read_runs(input);
    if (fs::is_directory(input)) {
      sweeps.emplace_back(input, read_manifest(input));
      if (inputs.size() > 1)
        for (auto& run : r) run.label = sweeps.back().second.value("name", input.filename().string()) + ": " + run.label;
    }
    runs.insert(runs.end(), std::make_move_iterator(r.begin()), std::make_move_iterator(r.end()));
  }
  if (runs.empty()) throw SweepError("report: the inputs hold no finished runs");
  fs::create_directories(out_dir);
  std::vector<fs::path> written;

  // Loss against simulated time and against cumulative bits.
  std::vector<RunFigures> figures;
  double max_time = 0, min_bits = INFINITY, max_bits = 0;
  for (const auto& r : runs) {
    figures.push_back(figures_of(r.result, {}));
    const auto& f = figures.back();
    double t = 0, b = 0;
    for (double s : f.step_time_s) t += s;
    for (double s : f.n_bits) b += s;
    max_time = std::max(max_time, t);
    if (b > 0) min_bits = std::min(min_bits, b), max_bits = std::max(max_bits, b);
  }
  const auto [scale, unit] = time_unit(max_time);
  // Per-step losses are mini-batch losses: noisy. The curves show their trailing mean
  // over `window` steps (1/40 of the longest run).
  std::size_t longest = 1;
  for (const auto& f : figures) longest = std::max(longest, f.loss.size());
  const std::size_t window = std::max<std::size_t>(1, longest / 40);
  const std::string y_label = window > 1 ? fmt::format("training loss (rank mean, mean of {} steps)", window)
                                         : "training loss (rank mean, per step)";
  Chart by_time{.title = "Loss against simulated time", .x_label = fmt::format("simulated time ({})", unit),
                .y_label = y_label};
  Chart by_bits{.title = "Loss against bits sent", .x_label = "cumulative n_bits per rank", .y_label = y_label};
  by_bits.x_log = max_bits > 0 && max_bits / min_bits >= 100;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const auto& f = figures[i];
    // Timing-only results have no losses (null): no curve for them.
    if (std::none_of(f.loss.begin(), f.loss.end(), [](double l) { return std::isfinite(l); })) continue;
    Series time{runs[i].label, {}, {}}, bits{runs[i].label, {}, {}};
    double t = 0, b = 0, sum = 0;
    for (std::size_t s = 0; s < f.loss.size(); ++s) {
      t += s < f.step_time_s.size() ? f.step_time_s[s] : 0.0;
      b += s < f.n_bits.size() ? f.n_bits[s] : 0.0;
      sum += f.loss[s];
      if (s >= window) sum -= f.loss[s - window];
      const double smooth = sum / static_cast<double>(std::min(s + 1, window));
      time.x.push_back(t * scale);
      time.y.push_back(smooth);
      bits.x.push_back(b);
      bits.y.push_back(smooth);
    }
    by_time.series.push_back(std::move(time));
    by_bits.series.push_back(std::move(bits));
  }
  for (const auto& [name, chart] : {std::pair{"loss_vs_time.svg", &by_time}, std::pair{"loss_vs_bits.svg", &by_bits}}) {
    if (chart->series.empty()) break;  // no run has losses
    write_file(out_dir / name, render_svg(*chart));
    written.push_back(out_dir / name);
  }

  // Test accuracy at each evaluation against simulated time (runs with a test set).
  Chart accuracy{.title = "Test accuracy against simulated time", .x_label = fmt::format("simulated time ({})", unit),
                 .y_label = "test accuracy of the rank-averaged model (%)"};
  for (const auto& r : runs) {
    if (!r.result.contains("eval") || !r.result["eval"].is_array()) continue;
    Series curve{r.label, {}, {}};
    for (const auto& e : r.result["eval"]) {
      const auto& a = e.value("test_accuracy", json());
      const auto& t = e.value("time_s", json());
      if (!a.is_number() || !t.is_number()) continue;
      curve.x.push_back(t.get<double>() * scale);
      curve.y.push_back(100.0 * a.get<double>());
    }
    if (!curve.x.empty()) accuracy.series.push_back(std::move(curve));
  }
  if (!accuracy.series.empty()) {
    write_file(out_dir / "accuracy_vs_time.svg", render_svg(accuracy));
    written.push_back(out_dir / "accuracy_vs_time.svg");
  }

  // Step time against each axis of each sweep.
  for (const auto& [dir, manifest] : sweeps) {
    const auto axes = manifest.value("axes", json::array());
    const auto points = read_points(dir, manifest);
    const std::string prefix = sweeps.size() > 1 ? file_safe(manifest.value("name", dir.filename().string())) + "." : "";
    for (std::size_t k = 0; k < axes.size(); ++k) {
      const auto& axis = axes[k];
      const auto& values = axis["values"];
      const auto& labels = axis["labels"];
      bool numeric = true, positive = true;
      double lo = INFINITY, hi = 0;  // of the positive values
      for (const auto& v : values) {
        numeric = numeric && v.is_number();
        if (v.is_number()) {
          positive = positive && v.get<double>() > 0;
          if (v.get<double>() > 0) lo = std::min(lo, v.get<double>()), hi = std::max(hi, v.get<double>());
        }
      }
      // Values spanning decades: a log axis, or categories when 0 (or less) is among them.
      const bool decades = hi > 0 && hi / lo >= 100;
      if (numeric && decades && !positive) numeric = false;
      // Series: one per combination of the other axes' labels; an axis with one value among
      // the points present (a directory holding part of a sweep) names no series.
      std::vector<bool> varies(axes.size(), false);
      for (std::size_t j = 0; j < axes.size(); ++j) {
        const json* first = nullptr;
        for (const auto& p : points) {
          if (p.is_null()) continue;
          if (!first) first = &p["values"][j];
          else if (p["values"][j] != *first) varies[j] = true;
        }
      }
      std::map<std::string, Series> series;
      std::vector<std::string> order;
      double max_step = 0;
      for (std::size_t i = 0; i < points.size(); ++i) {
        if (points[i].is_null()) continue;
        const auto& p = points[i];
        const auto& vals = p["values"];
        std::string key;
        for (std::size_t j = 0; j < axes.size(); ++j)
          if (j != k && varies[j])
            key += fmt::format("{}{}={}", key.empty() ? "" : ", ", axes[j].value("name", ""), vals[j].get<std::string>());
        if (key.empty()) key = manifest.value("name", "sweep");
        if (!series.count(key)) order.push_back(key), series[key].name = key;
        std::size_t vi = 0;
        while (vi < labels.size() && labels[vi] != vals[k]) ++vi;
        if (vi == labels.size()) continue;
        const double step = figures_of(p["result"], {}).step_mean_s;
        max_step = std::max(max_step, step);
        series[key].x.push_back(numeric ? values[vi].get<double>() : static_cast<double>(vi));
        series[key].y.push_back(step);
      }
      const auto [s_scale, s_unit] = time_unit(max_step);
      Chart chart{.title = fmt::format("{}: step time against {}", manifest.value("name", "sweep"), axis.value("name", "")),
                  .x_label = axis.value("name", axis.value("path", "")),
                  .y_label = fmt::format("mean step time ({})", s_unit)};
      chart.x_log = numeric && decades;
      if (!numeric)
        for (const auto& l : labels) chart.x_categories.push_back(l.get<std::string>());
      for (const auto& key : order) {
        auto s = series[key];
        // Sort by x so a line joins neighbouring values.
        std::vector<std::size_t> idx(s.x.size());
        for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = i;
        std::sort(idx.begin(), idx.end(), [&](auto a, auto b) { return s.x[a] < s.x[b]; });
        Series sorted{s.name, {}, {}};
        for (auto i : idx) sorted.x.push_back(s.x[i]), sorted.y.push_back(s.y[i] * s_scale);
        chart.series.push_back(std::move(sorted));
      }
      const fs::path file = out_dir / (prefix + "step_time_vs_" + file_safe(axis.value("name", "axis")) + ".svg");
      write_file(file, render_svg(chart));
      written.push_back(file);
    }
  }
  return written;
}

}  // namespace dtsim::sweep
