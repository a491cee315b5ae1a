#include "sweep/table.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include <fmt/format.h>

#include "runner/divergence.hpp"
#include "runner/percentile.hpp"
#include "sweep/sweep.hpp"

namespace dtsim::sweep {

using nlohmann::json;

namespace {

// The number at the first of `pointers` that holds one (null, NaN and absent skipped).
std::optional<double> number_at(const json& doc, std::initializer_list<const char*> pointers) {
  for (const char* p : pointers) {
    const json::json_pointer ptr(p);
    if (!doc.contains(ptr)) continue;
    const json& v = doc.at(ptr);
    if (v.is_number() && std::isfinite(v.get<double>())) return v.get<double>();
  }
  return std::nullopt;
}

std::vector<double> series_at(const json& doc, std::initializer_list<const char*> pointers) {
  for (const char* p : pointers) {
    const json::json_pointer ptr(p);
    if (!doc.contains(ptr) || !doc.at(ptr).is_array()) continue;
    std::vector<double> out;
    for (const auto& v : doc.at(ptr)) out.push_back(v.is_number() ? v.get<double>() : std::nan(""));
    return out;
  }
  return {};
}

double mean(const std::vector<double>& v) {
  return v.empty() ? 0.0 : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

json opt(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }

struct Column {
  const char* key;
  const char* header;
  enum Kind { Time, Count, Loss, Percent } kind;
};

const std::vector<Column>& columns() {
  static const std::vector<Column> c{
      {"step_mean_s", "step mean", Column::Time},
      {"step_p50_s", "step p50", Column::Time},
      {"step_p99_s", "step p99", Column::Time},
      {"compute_s", "compute", Column::Time},
      {"exposed_comm_s", "exposed comm", Column::Time},
      {"n_bits_per_step", "n_bits/step", Column::Count},
      {"wire_bytes_per_step", "wire B/step", Column::Count},
      {"calls_per_step", "calls/step", Column::Count},
      {"final_loss", "final loss", Column::Loss},
      {"best_loss", "best loss", Column::Loss},
      {"accuracy", "accuracy", Column::Percent},
      {"test_accuracy", "test accuracy", Column::Percent},
      {"time_to_target_s", "time to target", Column::Time},
      {"time_to_accuracy_s", "time to accuracy", Column::Time},
      {"step_to_accuracy", "step to accuracy", Column::Count},
      {"diverged_at_step", "diverged at step", Column::Count},
      {"reuse_hit_rate", "reuse hits", Column::Percent},
  };
  return c;
}

std::string cell(const json& v, Column::Kind kind) {
  if (!v.is_number()) return "-";
  const double x = v.get<double>();
  switch (kind) {
    case Column::Time: return human_time(x);
    case Column::Count: return x == std::floor(x) ? fmt::format("{:.0f}", x) : fmt::format("{:.2f}", x);
    case Column::Loss: return fmt::format("{:.6f}", x);
    case Column::Percent: return fmt::format("{:.2f}%", 100.0 * x);
  }
  return "-";
}

// The Markdown table's columns: the accuracy target's two only when the table has one
// (the CSV and JSON keep every column, so scripts see one layout).
bool any_diverged(const json& table) {
  for (const auto& row : table["rows"])
    if (row.value("diverged_at_step", json()).is_number()) return true;
  return false;
}

std::vector<Column> markdown_columns(const json& table) {
  const bool accuracy = table.value("target_accuracy", json()).is_number();
  const bool diverged = any_diverged(table);
  std::vector<Column> out;
  for (const auto& c : columns()) {
    const std::string key = c.key;
    if (!accuracy && (key == "time_to_accuracy_s" || key == "step_to_accuracy")) continue;
    if (!diverged && key == "diverged_at_step") continue;
    out.push_back(c);
  }
  return out;
}

std::string csv_quote(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

}  // namespace

std::string human_time(double s) {
  const double a = std::fabs(s);
  // Differences of equal times (exposed communication when all of it is hidden) come out
  // as +-1e-17 s from rounding: print them as the zero they are.
  if (a < 1e-12) return "0 s";
  if (a >= 1.0) return fmt::format("{:.3f} s", s);
  if (a >= 1e-3) return fmt::format("{:.3f} ms", s * 1e3);
  if (a >= 1e-6) return fmt::format("{:.3f} us", s * 1e6);
  return fmt::format("{:.1f} ns", s * 1e9);
}

double percentile(std::vector<double> values, double p) { return runner::nearest_rank_percentile(std::move(values), p); }

// The first evaluation reaching `target`: its clock and step.
void time_to_accuracy(const json& result, double target, RunFigures& f) {
  if (!result.contains("eval") || !result["eval"].is_array()) return;
  for (const auto& e : result["eval"]) {
    if (!e.is_object()) continue;
    const auto accuracy = number_at(e, {"/test_accuracy", "/train_accuracy"});
    const auto time = number_at(e, {"/time_s"});
    if (accuracy && time && *accuracy >= target) {
      f.time_to_accuracy_s = time;
      if (e.contains("step") && e["step"].is_number_integer()) f.step_to_accuracy = e["step"].get<long long>();
      return;
    }
  }
}

RunFigures figures_of(const json& result, const Targets& targets) {
  RunFigures f;
  f.step_time_s = series_at(result, {"/per_step/time_s"});
  f.n_bits = series_at(result, {"/per_step/n_bits"});
  f.loss = series_at(result, {"/per_step/loss"});
  f.compute_s = series_at(result, {"/per_step/compute_time_s", "/per_step/compute_s", "/compute_time_s"});
  f.step_mean_s = number_at(result, {"/step_mean_s"}).value_or(mean(f.step_time_s));
  f.step_p50_s = percentile(f.step_time_s, 50);
  f.step_p99_s = percentile(f.step_time_s, 99);
  if (!f.compute_s.empty()) {
    f.compute_mean_s = mean(f.compute_s);
    f.exposed_comm_s = f.step_mean_s - *f.compute_mean_s;
  }
  f.n_bits_per_step = number_at(result, {"/n_bits_per_step"}).value_or(mean(f.n_bits));
  f.wire_bytes_per_step = number_at(result, {"/wire_bytes_per_step"}).value_or(0.0);
  f.calls_per_step = number_at(result, {"/calls_per_step"}).value_or(0.0);
  f.final_loss = number_at(result, {"/final/train_loss", "/final/loss", "/final_loss"});
  for (double l : f.loss)
    if (std::isfinite(l) && (!f.best_loss || l < *f.best_loss)) f.best_loss = l;
  f.accuracy = number_at(result, {"/final/train_accuracy", "/final/accuracy", "/final_accuracy"});
  f.test_loss = number_at(result, {"/final/test_loss", "/final_test_loss", "/test/loss"});
  f.test_accuracy = number_at(result, {"/final/test_accuracy", "/final_test_accuracy", "/test/accuracy"});
  if (targets.loss) {
    double t = 0.0;
    for (std::size_t i = 0; i < f.loss.size(); ++i) {
      t += i < f.step_time_s.size() ? f.step_time_s[i] : 0.0;
      if (f.loss[i] <= *targets.loss) {
        f.time_to_target_s = t;
        break;
      }
    }
  }
  if (targets.accuracy) time_to_accuracy(result, *targets.accuracy, f);
  if (result.contains("diverged_at_step") && result["diverged_at_step"].is_number_integer())
    f.diverged_at_step = result["diverged_at_step"].get<long long>();
  // No rate where reuse was off or the run started no scheduled collective (gossip).
  if (result.contains("collective_reuse") && result["collective_reuse"].is_object() &&
      result["collective_reuse"].value("enabled", false) && result["collective_reuse"].value("collectives", 0) > 0)
    f.reuse_hit_rate = number_at(result, {"/collective_reuse/hit_rate"});
  return f;
}

json make_table(const json& manifest, const std::vector<json>& points, const Targets& targets) {
  json axes = json::array();
  for (const auto& a : manifest.value("axes", json::array())) axes.push_back(a.value("name", a.value("path", "")));
  json rows = json::array();
  for (const auto& p : points) {
    if (!p.is_object() || !p.contains("result")) continue;
    const auto f = figures_of(p["result"], targets);
    rows.push_back({{"id", p.value("id", "")},
                    {"label", p.value("label", "")},
                    {"axes", p.value("values", json::array())},
                    {"step_mean_s", f.step_mean_s},
                    {"step_p50_s", f.step_p50_s},
                    {"step_p99_s", f.step_p99_s},
                    {"compute_s", opt(f.compute_mean_s)},
                    {"exposed_comm_s", opt(f.exposed_comm_s)},
                    {"n_bits_per_step", f.n_bits_per_step},
                    {"wire_bytes_per_step", f.wire_bytes_per_step},
                    {"calls_per_step", f.calls_per_step},
                    {"final_loss", opt(f.final_loss)},
                    {"best_loss", opt(f.best_loss)},
                    {"accuracy", opt(f.accuracy)},
                    {"test_loss", opt(f.test_loss)},
                    {"test_accuracy", opt(f.test_accuracy)},
                    {"time_to_target_s", opt(f.time_to_target_s)},
                    {"time_to_accuracy_s", opt(f.time_to_accuracy_s)},
                    {"step_to_accuracy", f.step_to_accuracy ? json(*f.step_to_accuracy) : json(nullptr)},
                    {"diverged_at_step", f.diverged_at_step ? json(*f.diverged_at_step) : json(nullptr)},
                    {"reuse_hit_rate", opt(f.reuse_hit_rate)}});
  }
  return {{"sweep", manifest.value("name", "")},
          {"target_loss", opt(targets.loss)},
          {"target_accuracy", opt(targets.accuracy)},
          {"axes", axes},
          {"rows", rows}};
}

std::string table_markdown(const json& table) {
  std::vector<std::string> header;
  for (const auto& a : table["axes"]) header.push_back(a.get<std::string>());
  for (const auto& c : markdown_columns(table)) {
    if (std::string(c.key) == "time_to_target_s" && table["target_loss"].is_number())
      header.push_back(fmt::format("time to loss {}", format_value(table["target_loss"])));
    else if (std::string(c.key) == "time_to_accuracy_s" && table.value("target_accuracy", json()).is_number())
      header.push_back(fmt::format("time to {}% accuracy", format_value(json(100.0 * table["target_accuracy"].get<double>()))));
    else
      header.push_back(c.header);
  }
  std::vector<std::vector<std::string>> cells;
  for (const auto& row : table["rows"]) {
    std::vector<std::string> r;
    for (const auto& v : row["axes"]) r.push_back(v.is_string() ? v.get<std::string>() : v.dump());
    for (const auto& c : markdown_columns(table)) r.push_back(cell(row.value(c.key, json(nullptr)), c.kind));
    cells.push_back(std::move(r));
  }
  std::vector<std::size_t> width(header.size());
  for (std::size_t i = 0; i < header.size(); ++i) {
    width[i] = header[i].size();
    for (const auto& r : cells) width[i] = std::max(width[i], r[i].size());
  }
  const std::size_t n_axes = table["axes"].size();
  std::string out = "|";
  for (std::size_t i = 0; i < header.size(); ++i) out += fmt::format(" {:<{}} |", header[i], width[i]);
  out += "\n|";
  for (std::size_t i = 0; i < header.size(); ++i)
    out += i < n_axes ? fmt::format("{:-<{}}|", "", width[i] + 2) : fmt::format("{:-<{}}:|", "", width[i] + 1);
  out += "\n";
  for (const auto& r : cells) {
    out += "|";
    for (std::size_t i = 0; i < r.size(); ++i)
      out += i < n_axes ? fmt::format(" {:<{}} |", r[i], width[i]) : fmt::format(" {:>{}} |", r[i], width[i]);
    out += "\n";
  }
  if (any_diverged(table))
    out += fmt::format("\nDiverged (training loss not finite or over {:g}x its first step's): ",
                       runner::kDivergenceFactor);
  bool first = true;
  for (const auto& row : table["rows"])
    if (row.value("diverged_at_step", json()).is_number()) {
      out += fmt::format("{}{} at step {}", first ? "" : "; ", row.value("label", ""), row["diverged_at_step"].dump());
      first = false;
    }
  if (!first) out += ". Their figures after that step are not a converging run's.\n";
  return out;
}

std::string table_csv(const json& table) {
  std::string out = "id";
  auto field = [&out](const std::string& text) {
    out += ',';
    out += text;
  };
  auto label = [](const json& v) { return csv_quote(v.is_string() ? v.get<std::string>() : v.dump()); };
  auto number = [](const json& v) { return v.is_number() ? fmt::format("{}", v.get<double>()) : std::string(); };
  for (const auto& a : table["axes"]) field(label(a));
  for (const auto& c : columns()) field(c.key);
  field("test_loss");
  out += '\n';
  for (const auto& row : table["rows"]) {
    out += csv_quote(row.value("id", ""));
    for (const auto& v : row["axes"]) field(label(v));
    for (const auto& c : columns()) field(number(row.value(c.key, json(nullptr))));
    field(number(row.value("test_loss", json(nullptr))));
    out += '\n';
  }
  return out;
}

}  // namespace dtsim::sweep
