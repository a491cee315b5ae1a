#include "sweep/sweep.hpp"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>

namespace dtsim::sweep {

namespace fs = std::filesystem;
using nlohmann::json;

std::string format_value(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_integer()) return v.dump();
  if (v.is_number_float()) {
    const double x = v.get<double>();
    if (!std::isfinite(x)) return v.dump();
    if (x == std::floor(x) && std::fabs(x) < 1e6) return fmt::format("{:.0f}", x);  // 2080.0 -> 2080
    // The shortest %g form that reads back as the same double, exponent without padding.
    std::string s;
    for (int precision = 1; precision <= 17; ++precision) {
      s = fmt::format("{:.{}g}", x, precision);
      if (std::strtod(s.c_str(), nullptr) == x) break;
    }
    if (auto e = s.find('e'); e != std::string::npos) {
      std::string mantissa = s.substr(0, e), exponent = s.substr(e + 1);
      const bool negative = !exponent.empty() && exponent[0] == '-';
      if (!exponent.empty() && (exponent[0] == '+' || exponent[0] == '-')) exponent.erase(0, 1);
      while (exponent.size() > 1 && exponent[0] == '0') exponent.erase(0, 1);
      s = mantissa + "e" + (negative ? "-" : "") + exponent;
    }
    return s;
  }
  return v.dump();
}

std::vector<std::string> pointer_tokens(const std::string& pointer) {
  if (pointer.empty() || pointer[0] != '/')
    throw SweepError(fmt::format("\"{}\" is not a JSON Pointer (expected /field/subfield)", pointer));
  std::vector<std::string> tokens;
  std::string token;
  for (std::size_t i = 1; i <= pointer.size(); ++i) {
    if (i == pointer.size() || pointer[i] == '/') {
      tokens.push_back(token);
      token.clear();
    } else if (pointer[i] == '~') {
      if (i + 1 < pointer.size() && (pointer[i + 1] == '0' || pointer[i + 1] == '1')) {
        token += pointer[i + 1] == '0' ? '~' : '/';
        ++i;
      } else {
        throw SweepError(fmt::format("\"{}\" is not a JSON Pointer (~ must be followed by 0 or 1)", pointer));
      }
    } else {
      token += pointer[i];
    }
  }
  return tokens;
}

std::string hash_hex(const std::string& text) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : text) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return fmt::format("{:016x}", h);
}

namespace {

std::optional<std::size_t> array_index(const std::string& token) {
  if (token.empty() || token.size() > 9 || (token.size() > 1 && token[0] == '0')) return std::nullopt;
  for (char c : token)
    if (c < '0' || c > '9') return std::nullopt;
  return static_cast<std::size_t>(std::stoul(token));
}

// The value at `tokens` in `doc`, or nullptr.
const json* find_path(const json& doc, const std::vector<std::string>& tokens) {
  const json* at = &doc;
  for (const auto& t : tokens) {
    if (at->is_object()) {
      auto it = at->find(t);
      if (it == at->end()) return nullptr;
      at = &*it;
    } else if (at->is_array()) {
      auto i = array_index(t);
      if (!i || *i >= at->size()) return nullptr;
      at = &(*at)[*i];
    } else {
      return nullptr;
    }
  }
  return at;
}

// Puts `value` at `tokens`, creating missing objects on the way; false when the path
// runs through a scalar or past the end of an array.
bool set_path(json& doc, const std::vector<std::string>& tokens, const json& value) {
  json* at = &doc;
  for (std::size_t k = 0; k < tokens.size(); ++k) {
    const auto& t = tokens[k];
    const bool last = k + 1 == tokens.size();
    if (at->is_object()) {
      if (last) {
        (*at)[t] = value;
        return true;
      }
      if (!at->contains(t)) (*at)[t] = json::object();
      at = &(*at)[t];
    } else if (at->is_array()) {
      auto i = array_index(t);
      if (!i || *i >= at->size()) return false;
      if (last) {
        (*at)[*i] = value;
        return true;
      }
      at = &(*at)[*i];
    } else {
      return false;
    }
  }
  doc = value;  // the empty pointer "" is the whole document (pointer_tokens never yields it)
  return true;
}

std::string slug(const std::string& text) {
  std::string s;
  for (char c : text) {
    const bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                      c == '-' || c == '+' || c == '=';
    if (keep) s += c;
    else if (!s.empty() && s.back() != '_') s += '_';
  }
  while (!s.empty() && s.back() == '_') s.pop_back();
  if (s.size() > 80) s.resize(80);
  return s.empty() ? "point" : s;
}

json read_json_file(const fs::path& file, const std::string& what) {
  if (const auto why = config::not_a_regular_file(file))
    throw SweepError(fmt::format("{} {} {}", what, config::one_line(file.string()), *why));
  std::ifstream in(file);
  if (!in) throw SweepError(fmt::format("cannot read {} {}", what, file.string()));
  std::stringstream text;
  text << in.rdbuf();
  try {
    return config::parse_json_text(text.str());
  } catch (const config::JsonTextError& e) {
    throw SweepError(fmt::format("{} {}: invalid JSON: {}", what, file.string(), e.reason()));
  }
}

bool is_unknown_field(const runner::ScenarioError& e) { return e.kind() == config::ErrorKind::unknown_field; }

bool is_prefix(const std::string& prefix, const std::string& path) {
  return path == prefix || (path.size() > prefix.size() && path.compare(0, prefix.size(), prefix) == 0 &&
                            path[prefix.size()] == '/');
}

}  // namespace

json Sweep::manifest() const {
  json axes_json = json::array();
  for (const auto& a : axes) axes_json.push_back({{"path", a.path}, {"name", a.name}, {"values", a.values}, {"labels", a.labels}});
  json points_json = json::array();
  for (const auto& p : points) {
    json values = json::array();
    for (std::size_t k = 0; k < axes.size(); ++k) values.push_back(axes[k].labels[p.value_of[k]]);
    points_json.push_back({{"index", p.index}, {"id", p.id}, {"label", p.label}, {"values", values}});
  }
  return {{"dtsim_sweep_version", 1},
          {"name", name},
          {"mode", mode},
          {"target_loss", targets.loss ? json(*targets.loss) : json(nullptr)},
          {"target_accuracy", targets.accuracy ? json(*targets.accuracy) : json(nullptr)},
          {"axes", axes_json},
          {"points", points_json}};
}

Sweep parse_sweep(const json& doc, const fs::path& dir, const std::string& default_name) {
  if (!doc.is_object()) throw SweepError("sweep: expected a JSON object with base and axes");
  if (const auto deep = config::first_too_deep(doc))
    throw SweepError(fmt::format("sweep: {}: expected at most {} levels of nesting, got more", *deep, config::kMaxJsonDepth));
  static const std::set<std::string> known{"name", "base", "mode", "axes", "target_loss", "target_accuracy", "description"};
  for (const auto& [key, value] : doc.items())
    if (!known.count(key))
      throw SweepError(fmt::format("sweep: /{}: unknown field (expected one of name, base, mode, axes, target_loss, target_accuracy, description)",
                                   config::pointer_token(key)));
  Sweep sweep;
  sweep.name = default_name;
  if (doc.contains("name")) {
    if (!doc["name"].is_string()) throw SweepError("sweep: /name: expected a string");
    sweep.name = doc["name"].get<std::string>();
  }
  if (doc.contains("mode")) {
    if (!doc["mode"].is_string() || (doc["mode"] != "product" && doc["mode"] != "zip"))
      throw SweepError(fmt::format("sweep: /mode: expected \"product\" or \"zip\", got {}", doc["mode"].dump()));
    sweep.mode = doc["mode"].get<std::string>();
  }
  if (doc.contains("target_loss")) {
    if (!doc["target_loss"].is_number()) throw SweepError("sweep: /target_loss: expected a number");
    sweep.targets.loss = doc["target_loss"].get<double>();
  }
  if (doc.contains("target_accuracy")) {
    const auto& a = doc["target_accuracy"];
    if (!a.is_number() || !(a.get<double>() > 0.0 && a.get<double>() <= 1.0))
      throw SweepError(fmt::format("sweep: /target_accuracy: expected a fraction in (0, 1] (0.75 for 75 %), got {}", a.dump()));
    sweep.targets.accuracy = a.get<double>();
  }

  // The base scenario, as written, and its resolved form.
  if (!doc.contains("base")) throw SweepError("sweep: /base: missing required field (a scenario file path or object)");
  json base;
  fs::path base_dir = dir;
  std::string base_name = "inline base scenario";
  if (doc["base"].is_string()) {
    const fs::path file = dir / doc["base"].get<std::string>();
    base_name = "base scenario " + file.string();
    base = read_json_file(file, "base scenario");
    base_dir = file.parent_path();
  } else if (doc["base"].is_object()) {
    base = doc["base"];
  } else {
    throw SweepError("sweep: /base: expected a scenario file path or a scenario object");
  }
  try {
    runner::resolve_file_fields(base, base_dir);
  } catch (const runner::ScenarioError& e) {
    throw SweepError(std::string("base scenario: ") + e.what());
  }
  json resolved;
  try {
    resolved = runner::parse_scenario(base).to_json();
  } catch (const runner::ScenarioError& e) {
    throw SweepError(fmt::format("{}: {}", base_name, e.what()));
  }

  if (!doc.contains("axes") || !doc["axes"].is_array() || doc["axes"].empty())
    throw SweepError("sweep: /axes: expected a non-empty array of {path, values}");
  std::vector<std::vector<std::string>> tokens;
  std::set<std::string> paths;
  for (std::size_t k = 0; k < doc["axes"].size(); ++k) {
    const json& a = doc["axes"][k];
    if (!a.is_object() || !a.contains("path") || !a["path"].is_string())
      throw SweepError(fmt::format("sweep: /axes/{}: expected an object with a \"path\" string", k));
    Axis axis;
    axis.path = a["path"].get<std::string>();
    const std::string where = "axis " + axis.path;
    for (const auto& [key, value] : a.items())
      if (key != "path" && key != "values" && key != "name" && key != "labels")
        throw SweepError(fmt::format("{}: unknown field \"{}\" (expected path, values, name, labels)", where, key));
    try {
      tokens.push_back(pointer_tokens(axis.path));
    } catch (const SweepError& e) {
      throw SweepError(fmt::format("{}: {}", where, e.what()));
    }
    if (!paths.insert(axis.path).second) throw SweepError(fmt::format("{}: appears twice", where));
    if (!a.contains("values") || !a["values"].is_array())
      throw SweepError(fmt::format("{}: expected \"values\", a non-empty array", where));
    if (a["values"].empty()) throw SweepError(fmt::format("{}: empty axis (expected at least one value)", where));
    axis.values = a["values"].get<std::vector<json>>();
    axis.name = tokens.back().back();
    if (a.contains("name")) {
      if (!a["name"].is_string() || a["name"].get<std::string>().empty())
        throw SweepError(fmt::format("{}: name: expected a non-empty string", where));
      axis.name = a["name"].get<std::string>();
    }
    if (a.contains("labels")) {
      const json& l = a["labels"];
      if (!l.is_array() || l.size() != axis.values.size())
        throw SweepError(fmt::format("{}: labels: expected an array of {} strings, one per value", where, axis.values.size()));
      for (const auto& s : l) {
        if (!s.is_string()) throw SweepError(fmt::format("{}: labels: expected strings, got {}", where, s.dump()));
        axis.labels.push_back(s.get<std::string>());
      }
    } else {
      for (const auto& v : axis.values) axis.labels.push_back(format_value(v));
    }
    std::set<std::string> seen_labels;  // in a product a repeated value repeats points; a zip may repeat one
    for (const auto& l : axis.labels)
      if (!seen_labels.insert(l).second && sweep.mode == "product")
        throw SweepError(fmt::format("{}: value {} appears twice", where, l));
    sweep.axes.push_back(std::move(axis));
  }
  for (std::size_t k = 0; k < sweep.axes.size(); ++k)
    for (std::size_t j = 0; j < sweep.axes.size(); ++j)
      if (j != k && is_prefix(sweep.axes[j].path, sweep.axes[k].path))
        throw SweepError(fmt::format("axis {}: lies inside axis {} (one would overwrite the other)", sweep.axes[k].path,
                                     sweep.axes[j].path));

  // Expansion: value indices per point.
  std::vector<std::vector<std::size_t>> combos;
  if (sweep.mode == "zip") {
    const std::size_t n = sweep.axes[0].values.size();
    for (const auto& a : sweep.axes)
      if (a.values.size() != n)
        throw SweepError(fmt::format("axis {}: zip mode needs every axis to have the same number of values; it has {}, "
                                     "axis {} has {}",
                                     a.path, a.values.size(), sweep.axes[0].path, n));
    for (std::size_t i = 0; i < n; ++i) combos.emplace_back(sweep.axes.size(), i);
  } else {
    // An odometer: the last axis turns fastest.
    std::vector<std::size_t> at(sweep.axes.size(), 0);
    for (;;) {
      combos.push_back(at);
      std::size_t k = sweep.axes.size();
      while (k > 0 && ++at[k - 1] == sweep.axes[k - 1].values.size()) at[--k] = 0;
      if (k == 0) break;
    }
  }

  std::map<std::string, std::size_t> ids;
  for (std::size_t i = 0; i < combos.size(); ++i) {
    Point p;
    p.index = i;
    p.value_of = combos[i];
    p.document = base;
    std::string label, slug_text;
    for (std::size_t k = 0; k < sweep.axes.size(); ++k) {
      const auto& a = sweep.axes[k];
      const json& value = a.values[p.value_of[k]];
      if (!set_path(p.document, tokens[k], value))
        throw SweepError(fmt::format("axis {}: unknown path (it runs through a value that is not an object, or past "
                                     "the end of an array, in the base scenario)",
                                     a.path));
      label += fmt::format("{}{}={}", k ? ", " : "", a.name, a.labels[p.value_of[k]]);
      slug_text += fmt::format("{}{}={}", k ? "_" : "", a.name, a.labels[p.value_of[k]]);
    }
    p.label = label;
    try {
      p.scenario = runner::parse_scenario(p.document);
    } catch (const runner::ScenarioError& e) {
      // Which axis: the one whose path contains the error's path or lies inside it.
      std::vector<std::size_t> culprits;
      for (std::size_t k = 0; k < sweep.axes.size(); ++k)
        if (is_prefix(sweep.axes[k].path, e.path()) || is_prefix(e.path(), sweep.axes[k].path)) culprits.push_back(k);
      if (culprits.empty() && sweep.axes.size() == 1) culprits.push_back(0);
      if (culprits.size() == 1) {
        const auto& a = sweep.axes[culprits[0]];
        if (is_unknown_field(e) && !find_path(resolved, tokens[culprits[0]]))
          throw SweepError(fmt::format("axis {}: unknown path (not in the base scenario, and the loader says {})",
                                       a.path, e.what()));
        throw SweepError(fmt::format("axis {} value {}: {}", a.path, format_value(a.values[p.value_of[culprits[0]]]),
                                     e.what()));
      }
      throw SweepError(fmt::format("point {}: {}", label, e.what()));
    }
    p.id = slug(slug_text) + "-" + hash_hex(p.scenario.to_json().dump()).substr(0, 10);
    if (auto [it, fresh] = ids.emplace(p.id, i); !fresh)
      throw SweepError(fmt::format("points {} and {} are the same scenario ({})", sweep.points[it->second].label, label, p.id));
    sweep.points.push_back(std::move(p));
  }
  return sweep;
}

Sweep load_sweep(const fs::path& file) {
  const json doc = read_json_file(file, "sweep file");
  return parse_sweep(doc, file.parent_path(), file.stem().string());
}

}  // namespace dtsim::sweep
