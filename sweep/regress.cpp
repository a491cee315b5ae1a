#include "sweep/regress.hpp"

#include <cmath>
#include <map>

#include <fmt/format.h>

#include "runner/run.hpp"
#include "runner/scenario.hpp"
#include "sweep/sweep.hpp"
#include "sweep/table.hpp"

namespace dtsim::sweep {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

double to_seconds(double t, const std::string& unit) {
  if (unit == "ns") return t * 1e-9;
  if (unit == "us") return t * 1e-6;
  if (unit == "ms") return t * 1e-3;
  return t;
}

// Benchmark entries by name: the median aggregate when there is one, else the
// (last) iteration entry.
std::map<std::string, json> index_runs(const std::vector<json>& runs) {
  std::map<std::string, json> by_name, medians;
  for (const auto& run : runs) {
    if (!run.contains("benchmarks") || !run["benchmarks"].is_array())
      throw SweepError("benchmark run: expected Google Benchmark JSON with a \"benchmarks\" array");
    for (const auto& b : run["benchmarks"]) {
      const std::string name = b.value("run_name", b.value("name", ""));
      if (b.value("run_type", "iteration") == "aggregate") {
        if (b.value("aggregate_name", "") == "median") medians[name] = b;
      } else if (!b.contains("error_occurred") || !b["error_occurred"].get<bool>()) {
        by_name[name] = b;
      }
    }
  }
  for (auto& [name, b] : medians) by_name[name] = b;
  return by_name;
}

double ratio_of(const json& entry, const std::map<std::string, json>& runs, std::string& why) {
  const std::string name = entry.at("name").get<std::string>();
  auto it = runs.find(name);
  if (it == runs.end()) {
    why = "missing from the run";
    return NAN;
  }
  const json& b = it->second;
  if (entry.contains("counter")) {
    const std::string counter = entry["counter"].get<std::string>();
    if (!b.contains(counter) || !b[counter].is_number()) {
      why = fmt::format("has no counter {}", counter);
      return NAN;
    }
    return b[counter].get<double>();
  }
  if (!entry.contains("reference")) throw SweepError(fmt::format("baseline entry {}: expected \"counter\" or \"reference\"", name));
  const std::string ref = entry["reference"].get<std::string>();
  auto r = runs.find(ref);
  if (r == runs.end()) {
    why = fmt::format("reference {} missing from the run", ref);
    return NAN;
  }
  const double own = to_seconds(b.value("cpu_time", 0.0), b.value("time_unit", "ns"));
  const double other = to_seconds(r->second.value("cpu_time", 0.0), r->second.value("time_unit", "ns"));
  if (!(own > 0)) {
    why = "has no cpu_time";
    return NAN;
  }
  return other / own;
}

std::string relative(double a, double b) {
  if (a == b) return "0";
  return fmt::format("{:.3g}", std::fabs(a - b) / std::max(std::fabs(a), std::fabs(b)));
}

// The figures a simulated baseline holds: where each is in a result, and whether it is
// exact on every machine or a floating-point result of the training math (regress.hpp).
struct SimulatedFigure {
  const char* key;
  const char* pointer;
  bool exact;
};

const std::vector<SimulatedFigure>& simulated_figures() {
  static const std::vector<SimulatedFigure> f{{"step_mean_s", "/step_mean_s", true},
                                              {"n_bits_per_step", "/n_bits_per_step", true},
                                              {"wire_bytes_per_step", "/wire_bytes_per_step", true},
                                              {"calls_per_step", "/calls_per_step", true},
                                              {"final_loss", "/final/train_loss", false}};
  return f;
}

double number_or(const json& doc, const char* key, double fallback) {
  if (!doc.contains(key)) return fallback;
  if (!doc[key].is_number() || !(doc[key].get<double>() >= 0))
    throw SweepError(fmt::format("simulated baseline: \"{}\" must be a number >= 0", key));
  return doc[key].get<double>();
}

json run_scenario(const fs::path& file) {
  try {
    return runner::run_emulated(runner::load_scenario(file)).to_json();
  } catch (const runner::ScenarioError& e) {
    throw SweepError(fmt::format("{}: {}", file.string(), e.what()));
  }
}

}  // namespace

CheckOutcome check_benchmarks(const json& baseline, const std::vector<json>& runs) {
  if (!baseline.contains("benchmarks") || !baseline["benchmarks"].is_array())
    throw SweepError("benchmark baseline: expected a \"benchmarks\" array");
  const double margin = baseline.value("margin", 0.25);
  const auto by_name = index_runs(runs);
  CheckOutcome out;
  out.table = fmt::format("| benchmark | judged by | baseline | now | change | |\n|---|---|---:|---:|---:|---|\n");
  for (const auto& entry : baseline["benchmarks"]) {
    const std::string name = entry.at("name").get<std::string>();
    const double base = entry.at("ratio").get<double>();
    std::string why;
    const double now = ratio_of(entry, by_name, why);
    const std::string judge = entry.contains("counter") ? entry["counter"].get<std::string>()
                                                        : "time vs " + entry.value("reference", "");
    const double allowed = entry.value("margin", margin);  // an entry may widen (or narrow) the file's margin
    const bool bad = !std::isfinite(now) || now < base * (1.0 - allowed);
    if (bad) {
      out.ok = false;
      out.failures.push_back(why.empty() ? fmt::format("{}: {} ratio {:.4g}, baseline {:.4g} ({:+.1f}%, limit -{:.0f}%)", name,
                                                       judge, now, base, 100.0 * (now / base - 1.0), 100.0 * margin)
                                         : fmt::format("{}: {}", name, why));
    }
    out.table += fmt::format("| {} | {} | {:.4g} | {} | {} | {} |\n", name, judge, base,
                             std::isfinite(now) ? fmt::format("{:.4g}", now) : "-",
                             std::isfinite(now) ? fmt::format("{:+.1f}%", 100.0 * (now / base - 1.0)) : "-",
                             bad ? "**SLOWER**" : "ok");
  }
  return out;
}

json refresh_benchmarks(const json& baseline, const std::vector<json>& runs) {
  json out = baseline;
  const auto by_name = index_runs(runs);
  for (auto& entry : out["benchmarks"]) {
    std::string why;
    const double now = ratio_of(entry, by_name, why);
    if (!std::isfinite(now)) throw SweepError(fmt::format("{}: {}", entry.at("name").get<std::string>(), why));
    entry["ratio"] = now;
  }
  return out;
}

CheckOutcome check_simulated(const json& baseline, const fs::path& dir) {
  if (!baseline.contains("scenarios") || !baseline["scenarios"].is_array())
    throw SweepError("simulated baseline: expected a \"scenarios\" array");
  if (baseline.contains("tolerance"))
    throw SweepError("simulated baseline: \"tolerance\" is gone: exact figures must match exactly, "
                     "floating-point ones within \"float_tolerance\" (sweep/regress.hpp)");
  const double float_tolerance = number_or(baseline, "float_tolerance", 1e-6);
  CheckOutcome out;
  out.table = "| scenario | figure | baseline | now | rel. diff | allowed | |\n|---|---|---:|---:|---:|---:|---|\n";
  for (const auto& entry : baseline["scenarios"]) {
    const std::string file = entry.at("file").get<std::string>();
    const json result = run_scenario(dir / file);
    const double loss_tolerance = number_or(entry, "final_loss_tolerance", float_tolerance);
    for (const auto& figure : simulated_figures()) {
      if (!entry.contains(figure.key)) continue;
      const double base = entry[figure.key].get<double>();
      const json::json_pointer ptr(figure.pointer);
      const double now = result.contains(ptr) && result.at(ptr).is_number() ? result.at(ptr).get<double>() : NAN;
      const double allowed = figure.exact ? 0.0 : loss_tolerance;
      const double diff = std::fabs(now - base) / std::max({std::fabs(base), std::fabs(now), 1e-300});
      const bool bad = figure.exact ? !(now == base) : !(diff <= allowed);
      if (bad) {
        out.ok = false;
        out.failures.push_back(
            figure.exact ? fmt::format("{}: {} is {} (baseline {}, relative difference {:.3g}; an exact figure)", file,
                                       figure.key, format_value(now), format_value(base), diff)
                         : fmt::format("{}: {} is {} (baseline {}, relative difference {:.3g} > {:g})", file, figure.key,
                                       format_value(now), format_value(base), diff, allowed));
      }
      out.table += fmt::format("| {} | {} | {} | {} | {} | {} | {} |\n", file, figure.key, format_value(base),
                               format_value(now), relative(base, now), figure.exact ? "exact" : fmt::format("{:g}", allowed),
                               bad ? "**CHANGED**" : "ok");
    }
  }
  return out;
}

json refresh_simulated(const json& baseline, const fs::path& dir) {
  json out = baseline;
  for (auto& entry : out["scenarios"]) {
    const json result = run_scenario(dir / entry.at("file").get<std::string>());
    for (const auto& figure : simulated_figures()) entry[figure.key] = result.at(json::json_pointer(figure.pointer));
  }
  return out;
}

}  // namespace dtsim::sweep
