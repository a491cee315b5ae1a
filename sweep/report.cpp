#include "sweep/report.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <numeric>
#include <optional>

#include <fmt/format.h>

#include "runner/divergence.hpp"
#include "runner/run.hpp"
#include "sweep/execute.hpp"
#include "sweep/svg.hpp"
#include "sweep/sweep.hpp"
#include "sweep/table.hpp"

namespace dtsim::sweep {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

bool is_result(const json& doc) { return doc.is_object() && doc.contains("per_step") && doc["per_step"].is_object(); }

// A sweep point file that holds its run's result (read_points gives null for a missing one).
bool finished(const json& point) { return point.is_object() && point.contains("result") && is_result(point["result"]); }

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

std::string text_of(const json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

std::string join(const std::vector<std::string>& parts) {
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : ", ") + p;
  return out;
}

bool any_finite(const std::vector<double>& v) {
  return std::any_of(v.begin(), v.end(), [](double x) { return std::isfinite(x); });
}

// The step (1-based) at which the run diverged, if it did.
std::optional<std::size_t> diverged_at(const json& result) {
  const json& step = result.value("diverged_at_step", json());
  if (step.is_number_integer() && step.get<long long>() > 0) return static_cast<std::size_t>(step.get<long long>());
  return std::nullopt;
}

std::string legend_entry(const LabelledResult& run) {
  const auto step = diverged_at(run.result);
  return step ? fmt::format("{} (diverged at step {})", run.label, *step) : run.label;
}

std::string why_no_loss(const json& result) {
  return result.value("timing_only", json()).is_object() ? "no loss (timing-only run)"
                                                          : "no loss (every per-step loss is null)";
}

// Running sums of the per-step values (a missing or null value adds nothing).
std::vector<double> cumulative(const std::vector<double>& per_step, std::size_t steps) {
  std::vector<double> out(steps);
  double sum = 0;
  for (std::size_t s = 0; s < steps; ++s) {
    if (s < per_step.size() && std::isfinite(per_step[s])) sum += per_step[s];
    out[s] = sum;
  }
  return out;
}

double total(const std::vector<double>& per_step) {
  return std::accumulate(per_step.begin(), per_step.end(), 0.0,
                         [](double sum, double v) { return std::isfinite(v) ? sum + v : sum; });
}

// Per-step losses are mini-batch losses: noisy. Curves show their trailing mean over
// `window` steps, of the finite values in it (NaN where it holds none).
std::vector<double> trailing_mean(const std::vector<double>& v, std::size_t window) {
  std::vector<double> out(v.size());
  double sum = 0;
  std::size_t finite = 0;
  for (std::size_t s = 0; s < v.size(); ++s) {
    if (std::isfinite(v[s])) sum += v[s], ++finite;
    if (s >= window && std::isfinite(v[s - window])) sum -= v[s - window], --finite;
    out[s] = finite ? sum / static_cast<double>(finite) : std::nan("");
  }
  return out;
}

// What an 'x' marks, for the chart's notes.
std::string diverged_note(const std::string& what) {
  return fmt::format("x: {} diverged (training loss not finite or over {:g}x its first step's)", what,
                     runner::kDivergenceFactor);
}

bool any_crossed(const Chart& chart) {
  return std::any_of(chart.series.begin(), chart.series.end(), [](const Series& s) { return !s.crossed.empty(); });
}

// The figures drawn so far (not yet written: nothing is written when nothing can be
// drawn) and the runs they leave out.
struct Drawing {
  std::vector<std::pair<std::string, Chart>> figures;  // file name, chart
  std::vector<std::string> left_out;

  void leave_out(const std::string& figure, const std::string& run, const std::string& why) {
    left_out.push_back(fmt::format("{}: left out {}: {}", figure, run, why));
  }
};

struct Run {
  const LabelledResult& in;
  RunFigures figures;
};

// Simulated step time at every step: timing-only runs have it too.
void draw_step_times(const std::vector<Run>& runs, Drawing& drawing) {
  const std::string figure = "step_time_vs_step.svg";
  double max_step = 0;
  for (const auto& r : runs)
    for (double t : r.figures.step_time_s)
      if (std::isfinite(t)) max_step = std::max(max_step, t);
  const auto [scale, unit] = time_unit(max_step);
  Chart chart{.title = "Step time against step", .x_label = "step", .y_label = fmt::format("simulated step time ({})", unit)};
  chart.y_from_zero = true;
  for (const auto& r : runs) {
    const auto& times = r.figures.step_time_s;
    if (!any_finite(times)) {
      drawing.leave_out(figure, r.in.run_name, "no step times");
      continue;
    }
    Series s{.name = legend_entry(r.in), .legend_group = r.in.legend_group};
    for (std::size_t i = 0; i < times.size(); ++i) s.x.push_back(static_cast<double>(i + 1)), s.y.push_back(times[i] * scale);
    if (const auto step = diverged_at(r.in.result); step && *step <= times.size()) s.crossed.push_back(*step - 1);
    chart.series.push_back(std::move(s));
  }
  if (any_crossed(chart)) chart.notes.push_back(diverged_note("the step at which a run"));
  if (!chart.series.empty()) drawing.figures.emplace_back(figure, std::move(chart));
}

// Loss against simulated time and against cumulative bits, for runs with a finite loss.
void draw_losses(const std::vector<Run>& runs, Drawing& drawing) {
  const std::string by_time_file = "loss_vs_time.svg", by_bits_file = "loss_vs_bits.svg";
  std::vector<const Run*> drawn;
  for (const auto& r : runs) {
    if (any_finite(r.figures.loss)) {
      drawn.push_back(&r);
    } else {
      drawing.leave_out(by_time_file, r.in.run_name, why_no_loss(r.in.result));
      drawing.leave_out(by_bits_file, r.in.run_name, why_no_loss(r.in.result));
    }
  }
  double max_time = 0, min_bits = INFINITY, max_bits = 0;
  std::size_t longest = 1;
  for (const auto* r : drawn) {
    const auto& f = r->figures;
    const double time = total(f.step_time_s), bits = total(f.n_bits);
    max_time = std::max(max_time, time);
    if (bits > 0) min_bits = std::min(min_bits, bits), max_bits = std::max(max_bits, bits);
    longest = std::max(longest, f.loss.size());
  }
  const auto [scale, unit] = time_unit(max_time);
  const std::size_t window = std::max<std::size_t>(1, longest / 40);
  const std::string y_label = window > 1 ? fmt::format("training loss (rank mean, mean of {} steps)", window)
                                         : "training loss (rank mean, per step)";
  Chart by_time{.title = "Loss against simulated time", .x_label = fmt::format("simulated time ({})", unit),
                .y_label = y_label};
  Chart by_bits{.title = "Loss against bits sent", .x_label = "cumulative n_bits per rank", .y_label = y_label};
  by_time.x_from_zero = by_bits.x_from_zero = true;
  by_bits.x_log = max_bits > 0 && max_bits / min_bits >= 100;
  for (const auto* r : drawn) {
    const auto& f = r->figures;
    const std::size_t steps = f.loss.size();
    const auto time = cumulative(f.step_time_s, steps), bits = cumulative(f.n_bits, steps);
    const auto loss = trailing_mean(f.loss, window);
    // A diverged run's curve stops before its divergence step (the losses from there on
    // are not finite or far above the start, off any useful scale) and ends in an 'x' at
    // that step.
    const auto diverged = diverged_at(r->in.result);
    const std::size_t end = diverged ? std::min(*diverged - 1, steps) : steps;
    Series by_t{.name = legend_entry(r->in), .legend_group = r->in.legend_group};
    for (std::size_t s = 0; s < end; ++s) by_t.x.push_back(time[s] * scale), by_t.y.push_back(loss[s]);
    Series by_b = by_t;
    by_b.x.assign(bits.begin(), bits.begin() + static_cast<std::ptrdiff_t>(end));
    if (diverged && *diverged <= steps) {
      const auto last = std::find_if(by_t.y.rbegin(), by_t.y.rend(), [](double l) { return std::isfinite(l); });
      if (last == by_t.y.rend()) {
        const auto why = fmt::format("no finite loss before it diverged at step {}", *diverged);
        drawing.leave_out(by_time_file, r->in.run_name, why);
        drawing.leave_out(by_bits_file, r->in.run_name, why);
        continue;
      }
      const double y = *last;
      by_t.crossed.push_back(by_t.x.size()), by_b.crossed.push_back(by_b.x.size());
      by_t.x.push_back(time[*diverged - 1] * scale), by_t.y.push_back(y);
      by_b.x.push_back(bits[*diverged - 1]), by_b.y.push_back(y);
    }
    by_time.series.push_back(std::move(by_t));
    by_bits.series.push_back(std::move(by_b));
  }
  for (auto* chart : {&by_time, &by_bits})
    if (any_crossed(*chart)) chart->notes.push_back(diverged_note("where a run") + "; its curve stops there");
  if (by_time.series.empty()) return;
  drawing.figures.emplace_back(by_time_file, std::move(by_time));
  drawing.figures.emplace_back(by_bits_file, std::move(by_bits));
}

// Test accuracy at each evaluation against simulated time, when some run was evaluated
// on a test set; the others are then left out by name.
void draw_accuracy(const std::vector<Run>& runs, Drawing& drawing) {
  const std::string figure = "accuracy_vs_time.svg";
  double max_time = 0;
  for (const auto& r : runs)
    for (const auto& e : r.in.result.value("eval", json::array()))
      if (e.is_object() && e.value("time_s", json()).is_number()) max_time = std::max(max_time, e["time_s"].get<double>());
  const auto [scale, unit] = time_unit(max_time);
  Chart chart{.title = "Test accuracy against simulated time", .x_label = fmt::format("simulated time ({})", unit),
              .y_label = "test accuracy of the rank-averaged model (%)"};
  chart.x_from_zero = true;
  std::vector<const Run*> without;
  for (const auto& r : runs) {
    Series curve{.name = legend_entry(r.in), .legend_group = r.in.legend_group};
    for (const auto& e : r.in.result.value("eval", json::array())) {
      if (!e.is_object()) continue;
      const auto& a = e.value("test_accuracy", json());
      const auto& t = e.value("time_s", json());
      if (!a.is_number() || !t.is_number()) continue;
      curve.x.push_back(t.get<double>() * scale);
      curve.y.push_back(100.0 * a.get<double>());
    }
    if (curve.x.empty()) without.push_back(&r);
    else chart.series.push_back(std::move(curve));
  }
  if (chart.series.empty()) return;  // no run has a test set: the figure is not one to expect
  for (const auto* r : without) drawing.leave_out(figure, r->in.run_name, "no test-set evaluations");
  drawing.figures.emplace_back(figure, std::move(chart));
}

// Which axes take more than one value among the points present (a directory can hold
// part of a sweep): only those name runs and series.
std::vector<bool> varying_axes(const json& axes, const std::vector<json>& points) {
  std::vector<bool> varies(axes.size(), false);
  for (std::size_t j = 0; j < axes.size(); ++j) {
    const json* first = nullptr;
    for (const auto& p : points) {
      if (!finished(p) || !p.contains("values") || j >= p["values"].size()) continue;
      if (!first) first = &p["values"][j];
      else if (p["values"][j] != *first) varies[j] = true;
    }
  }
  return varies;
}

std::string axis_name(const json& axis) { return axis.value("name", axis.value("path", "")); }

// The values (as labels) and names of the axes that vary, but axis `skip`.
std::pair<std::vector<std::string>, std::vector<std::string>> varying_parts(const json& axes, const std::vector<bool>& varies,
                                                                            const json& point, std::size_t skip) {
  std::vector<std::string> values, names;
  const json& vals = point.value("values", json::array());
  for (std::size_t j = 0; j < axes.size() && j < vals.size(); ++j)
    if (j != skip && varies[j]) values.push_back(text_of(vals[j])), names.push_back(axis_name(axes[j]));
  return {values, names};
}

// A sweep's runs, named by the values of the axes that vary (their names as the legend's
// heading); a sweep in which nothing varies names its point by its label.
std::vector<LabelledResult> runs_of_sweep(const json& manifest, const std::vector<json>& points) {
  const json& axes = manifest.value("axes", json::array());
  const auto varies = varying_axes(axes, points);
  std::vector<LabelledResult> runs;
  for (const auto& p : points) {
    if (!finished(p)) continue;
    const auto [values, names] = varying_parts(axes, varies, p, axes.size());
    const std::string own = p.value("label", p.value("id", ""));
    runs.push_back({values.empty() ? own : join(values), join(names), own, p["result"]});
  }
  return runs;
}

// Mean step time against one axis of a sweep: one series per combination of the other
// axes that vary.
void draw_axis(const json& manifest, const std::vector<json>& points, std::size_t k, const std::string& file,
               const std::string& run_prefix, Drawing& drawing) {
  const json& axes = manifest["axes"];
  const json& axis = axes[k];
  const json& values = axis.value("values", json::array());
  const json& labels = axis.value("labels", json::array());
  bool numeric = values.size() == labels.size(), positive = true;
  double lo = INFINITY, hi = 0;  // of the positive values
  for (const auto& v : values) {
    numeric = numeric && v.is_number();
    if (!v.is_number()) continue;
    positive = positive && v.get<double>() > 0;
    if (v.get<double>() > 0) lo = std::min(lo, v.get<double>()), hi = std::max(hi, v.get<double>());
  }
  // Values spanning decades: a log axis, or categories when 0 (or less) is among them.
  const bool decades = hi > 0 && hi / lo >= 100;
  if (numeric && decades && !positive) numeric = false;

  const auto varies = varying_axes(axes, points);
  const std::string sweep_name = manifest.value("name", "sweep");
  std::map<std::string, Series> series;
  std::vector<std::string> order;
  std::string heading;
  double max_step = 0;
  for (const auto& p : points) {
    if (!finished(p)) continue;
    const std::string run_name = run_prefix + p.value("label", p.value("id", ""));
    const auto f = figures_of(p["result"], {});
    if (!any_finite(f.step_time_s)) {
      drawing.leave_out(file, run_name, "no step times");
      continue;
    }
    const json& vals = p.value("values", json::array());
    std::size_t vi = 0;
    while (k < vals.size() && vi < labels.size() && labels[vi] != vals[k]) ++vi;
    if (k >= vals.size() || vi == labels.size()) {
      drawing.leave_out(file, run_name, fmt::format("its {} is not among the sweep's values", axis_name(axis)));
      continue;
    }
    const auto [others, names] = varying_parts(axes, varies, p, k);
    const std::string key = others.empty() ? sweep_name : join(others);
    heading = join(names);
    if (!series.count(key)) order.push_back(key), series[key].name = key;
    auto& s = series[key];
    if (diverged_at(p["result"])) s.crossed.push_back(s.x.size());
    s.x.push_back(numeric ? values[vi].get<double>() : static_cast<double>(vi));
    s.y.push_back(f.step_mean_s);
    max_step = std::max(max_step, f.step_mean_s);
  }
  if (order.empty()) return;
  const auto [scale, unit] = time_unit(max_step);
  Chart chart{.title = fmt::format("{}: step time against {}", sweep_name, axis_name(axis)),
              .x_label = axis_name(axis),
              .y_label = fmt::format("mean step time ({})", unit)};
  chart.y_from_zero = true;
  chart.x_log = numeric && decades;
  if (!numeric)
    for (const auto& l : labels) chart.x_categories.push_back(text_of(l));
  for (const auto& key : order) {
    const auto& s = series[key];
    // Sorted by x, so that a line joins neighbouring values.
    std::vector<std::size_t> idx(s.x.size());
    std::iota(idx.begin(), idx.end(), 0);
    std::sort(idx.begin(), idx.end(), [&](auto a, auto b) { return s.x[a] < s.x[b]; });
    Series sorted{.name = s.name, .legend_group = heading};
    for (auto i : idx) {
      if (std::find(s.crossed.begin(), s.crossed.end(), i) != s.crossed.end()) sorted.crossed.push_back(sorted.x.size());
      sorted.x.push_back(s.x[i]), sorted.y.push_back(s.y[i] * scale);
    }
    chart.series.push_back(std::move(sorted));
  }
  if (any_crossed(chart)) chart.notes.push_back(diverged_note("a run that"));
  drawing.figures.emplace_back(file, std::move(chart));
}

struct SweepInput {
  fs::path dir;
  json manifest;
  std::vector<json> points;
};

}  // namespace

std::vector<LabelledResult> read_runs(const fs::path& input) {
  if (fs::is_directory(input)) {
    const json manifest = read_manifest(input);
    return runs_of_sweep(manifest, read_points(input, manifest));
  }
  std::ifstream in(input);
  if (!in) throw SweepError(fmt::format("{}: cannot read", input.string()));
  json doc;
  try {
    doc = json::parse(in);
  } catch (const json::parse_error&) {
    throw SweepError(fmt::format("{}: not JSON", input.string()));
  }
  std::string label;
  if (doc.is_object() && doc.contains("result") && is_result(doc["result"])) {
    label = text_of(doc.value("label", json(input.stem().string())));
    doc = doc["result"];
  } else if (is_result(doc)) {
    label = doc.contains("scenario") && doc["scenario"].is_object() ? text_of(doc["scenario"].value("name", json(input.stem().string())))
                                                                     : input.stem().string();
  } else {
    throw SweepError(fmt::format("{}: not a result file, a sweep point file or a sweep output directory", input.string()));
  }
  return {{label, "", label, std::move(doc)}};
}

Report write_report(const std::vector<fs::path>& inputs, const fs::path& out_dir) {
  if (inputs.empty()) throw SweepError("report: expected at least one result file or sweep directory");
  const bool several_sweeps = std::count_if(inputs.begin(), inputs.end(), [](const fs::path& p) { return fs::is_directory(p); }) > 1;
  std::vector<LabelledResult> results;
  std::vector<SweepInput> sweeps;
  std::vector<std::pair<std::size_t, fs::path>> from_files;  // index in results, the file
  std::map<std::string, int> file_labels;                     // how many result files have each label
  for (const auto& input : inputs) {
    if (!fs::is_directory(input)) {
      for (auto& run : read_runs(input)) {
        ++file_labels[run.label];
        from_files.emplace_back(results.size(), input);
        results.push_back(std::move(run));
      }
      continue;
    }
    SweepInput sweep{input, read_manifest(input), {}};
    sweep.points = read_points(input, sweep.manifest);
    for (auto& run : runs_of_sweep(sweep.manifest, sweep.points)) {
      // Among several sweeps a run says which sweep it comes from.
      if (several_sweeps) {
        const std::string name = sweep.manifest.value("name", input.filename().string());
        run.legend_group = run.legend_group.empty() ? name : name + ": " + run.legend_group;
        run.run_name = name + ": " + run.run_name;
      }
      results.push_back(std::move(run));
    }
    sweeps.push_back(std::move(sweep));
  }
  if (results.empty()) throw SweepError("report: the inputs hold no finished runs");
  // Result files of one scenario (a full and a timing-only run) are told apart by file.
  for (const auto& [i, file] : from_files)
    if (file_labels[results[i].label] > 1) results[i].run_name = results[i].label += " (" + file.string() + ")";

  std::vector<Run> runs;
  for (const auto& r : results) runs.push_back({r, figures_of(r.result, {})});
  Drawing drawing;
  draw_step_times(runs, drawing);
  draw_losses(runs, drawing);
  draw_accuracy(runs, drawing);
  for (const auto& s : sweeps) {
    const std::string name = s.manifest.value("name", s.dir.filename().string());
    const std::string prefix = sweeps.size() > 1 ? file_safe(name) + "." : "";
    const std::string run_prefix = several_sweeps ? name + ": " : "";
    const json& axes = s.manifest.value("axes", json::array());
    for (std::size_t k = 0; k < axes.size(); ++k)
      draw_axis(s.manifest, s.points, k, prefix + "step_time_vs_" + file_safe(axis_name(axes[k])) + ".svg", run_prefix,
                drawing);
  }
  if (drawing.figures.empty())
    throw SweepError(runs.size() == 1
                         ? fmt::format("report: nothing to draw: {} has no step times, losses or evaluations", runs[0].in.run_name)
                         : fmt::format("report: nothing to draw: none of the {} runs has step times, losses or evaluations",
                                       runs.size()));

  fs::create_directories(out_dir);
  Report report;
  for (const auto& [name, chart] : drawing.figures) {
    write_atomic(out_dir / name, render_svg(chart));
    report.written.push_back(out_dir / name);
  }
  report.left_out = std::move(drawing.left_out);
  return report;
}

}  // namespace dtsim::sweep
