#include "runner/scenario.hpp"

#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "network_models/topology.hpp"

namespace dtsim::runner {

using nlohmann::json;

namespace {

std::string describe(const json& v) {
  std::string text = v.dump();
  if (text.size() > 40) text = text.substr(0, 37) + "...";
  const char* type = v.is_string() ? "string" : v.is_boolean() ? "boolean" : v.is_number() ? "number"
                   : v.is_object() ? "object" : v.is_array() ? "array" : "null";
  return fmt::format("{} {}", type, text);
}

// Reads the fields of one JSON object, remembering which keys were consumed so that
// unknown keys can be reported with their full path.
class ObjectReader {
 public:
  ObjectReader(const json& object, std::string path) : object_(object), path_(std::move(path)) {
    if (!object_.is_object()) throw ScenarioError(where(), "expected an object, got " + describe(object_));
  }

  std::string where(const std::string& key = "") const { return key.empty() ? (path_.empty() ? "/" : path_) : path_ + "/" + key; }

  const json* find(const std::string& key) {
    seen_.insert(key);
    auto it = object_.find(key);
    return it == object_.end() ? nullptr : &*it;
  }
  const json& require(const std::string& key, const char* expected) {
    const json* v = find(key);
    if (!v) throw ScenarioError(where(key), fmt::format("missing required field (expected {})", expected));
    return *v;
  }

  double number(const std::string& key, std::optional<double> fallback, double lo, double hi, bool lo_open = false) {
    const json* v = fallback ? find(key) : &require(key, "a number");
    if (!v) return *fallback;
    if (!v->is_number()) throw ScenarioError(where(key), "expected a number, got " + describe(*v));
    const double x = v->get<double>();
    if (x < lo || x > hi || (lo_open && x == lo))
      throw ScenarioError(where(key), fmt::format("expected a number in {}{}, {}], got {}", lo_open ? "(" : "[", lo,
                                                  hi, v->dump()));
    return x;
  }

  std::int64_t integer(const std::string& key, std::optional<std::int64_t> fallback, std::int64_t lo, std::int64_t hi) {
    const json* v = fallback ? find(key) : &require(key, "an integer");
    if (!v) return *fallback;
    if (!v->is_number_integer()) throw ScenarioError(where(key), "expected an integer, got " + describe(*v));
    if (v->is_number_unsigned() && v->get<std::uint64_t>() > static_cast<std::uint64_t>(hi))
      throw ScenarioError(where(key), fmt::format("expected an integer in [{}, {}], got {}", lo, hi, v->dump()));
    const auto x = v->get<std::int64_t>();
    if (x < lo || x > hi)
      throw ScenarioError(where(key), fmt::format("expected an integer >= {}{}, got {}", lo,
                                                  hi == std::numeric_limits<std::int64_t>::max() ? "" : fmt::format(" and <= {}", hi), x));
    return x;
  }

  bool boolean(const std::string& key, bool fallback) {
    const json* v = find(key);
    if (!v) return fallback;
    if (!v->is_boolean()) throw ScenarioError(where(key), "expected true or false, got " + describe(*v));
    return v->get<bool>();
  }

  std::string string(const std::string& key, std::optional<std::string> fallback) {
    const json* v = fallback ? find(key) : &require(key, "a string");
    if (!v) return *fallback;
    if (!v->is_string()) throw ScenarioError(where(key), "expected a string, got " + describe(*v));
    return v->get<std::string>();
  }

  std::string choice(const std::string& key, std::optional<std::string> fallback,
                     const std::vector<std::string>& allowed) {
    std::string s = string(key, fallback);
    if (std::find(allowed.begin(), allowed.end(), s) == allowed.end())
      throw ScenarioError(where(key), fmt::format("expected one of {}, got \"{}\"", fmt::join(allowed, ", "), s));
    return s;
  }

  ObjectReader object(const std::string& key, bool required) {
    static const json empty = json::object();
    const json* v = required ? &require(key, "an object") : find(key);
    return ObjectReader(v ? *v : empty, where(key));
  }

  // Unknown keys are errors: a typo must not silently fall back to a default.
  void finish() const {
    for (const auto& [key, value] : object_.items())
      if (!seen_.count(key)) throw ScenarioError(where(key), "unknown field");
  }

 private:
  const json& object_;
  std::string path_;
  std::set<std::string> seen_;
};

constexpr auto kIntMax = std::numeric_limits<std::int64_t>::max();
constexpr double kInf = std::numeric_limits<double>::infinity();

}  // namespace

Scenario parse_scenario(const json& doc) {
  Scenario s;
  ObjectReader root(doc, "");
  s.name = root.string("name", "unnamed");
  s.ranks = static_cast<int>(root.integer("ranks", std::nullopt, 1, 1 << 20));
  s.steps = root.integer("steps", std::nullopt, 1, kIntMax);
  s.seed = static_cast<std::uint64_t>(root.integer("seed", 0, 0, kIntMax));

  {
    auto w = root.object("workload", true);
    w.choice("kind", std::nullopt, {"logistic_regression"});
    s.workload.samples = w.integer("samples", 4096, 1, kIntMax);
    s.workload.features = w.integer("features", 32, 1, kIntMax);
    s.workload.batch_size = w.integer("batch_size", 32, 1, kIntMax);
    s.workload.partition = w.choice("partition", "iid", {"iid", "sorted"});
    if (s.workload.samples < s.ranks)
      throw ScenarioError(w.where("samples"),
                          fmt::format("expected at least one sample per rank ({}), got {}", s.ranks, s.workload.samples));
    w.finish();
  }
  {
    auto a = root.object("algorithm", true);
    s.algorithm.name = a.choice("name", std::nullopt, algorithms::algorithm_names());
    if (s.algorithm.name == "parallel_sgd")
      s.algorithm.variant = a.choice("variant", std::nullopt, {"centralized", "decentralized"});
    auto& o = s.algorithm.optimizer;
    o.lr = a.number("lr", std::nullopt, 0.0, kInf);
    o.momentum = a.number("momentum", 0.0, 0.0, 1.0);
    o.dampening = a.number("dampening", 0.0, 0.0, 1.0);
    o.weight_decay = a.number("weight_decay", 0.0, 0.0, kInf);
    o.nesterov = a.boolean("nesterov", false);
    if (o.nesterov && (o.momentum == 0.0 || o.dampening != 0.0))
      throw ScenarioError(a.where("nesterov"), "expected momentum > 0 and dampening 0 with nesterov");
    a.finish();
  }
  {
    auto t = root.object("topology", true);
    s.topology = t.choice("kind", std::nullopt, net::Topology::kinds());
    t.finish();
  }
  {
    auto n = root.object("network", true);
    s.network.model = n.choice("model", std::nullopt, {"alpha_beta"});
    s.network.latency_s = n.number("latency_us", std::nullopt, 0.0, kInf) * 1e-6;
    s.network.bandwidth_bytes_per_s = n.number("bandwidth_GBps", std::nullopt, 0.0, kInf, true) * 1e9;
    n.finish();
  }
  {
    auto c = root.object("compute", false);
    const auto timing = c.choice("timing", "cost_model", {"cost_model", "measured"});
    s.compute.kind = timing == "measured" ? comm::ComputeTiming::Kind::Measured : comm::ComputeTiming::Kind::CostModel;
    s.compute.model.flops_per_s = c.number("gflops", 1000.0, 0.0, kInf, true) * 1e9;
    s.compute.model.bytes_per_s = c.number("memory_GBps", 100.0, 0.0, kInf, true) * 1e9;
    c.finish();
  }
  root.finish();
  return s;
}

Scenario load_scenario(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) throw ScenarioError("/", fmt::format("cannot read scenario file {}", file.string()));
  std::stringstream text;
  text << in.rdbuf();
  json doc;
  try {
    doc = json::parse(text.str());
  } catch (const json::parse_error& e) {
    // nlohmann reports a byte offset; turn it into line:column for a person.
    const std::string s = text.str();
    std::size_t line = 1, col = 1;
    for (std::size_t i = 0; i + 1 < e.byte && i < s.size(); ++i, ++col)
      if (s[i] == '\n') ++line, col = 0;
    throw ScenarioError("/", fmt::format("invalid JSON at line {}, column {}", line, col));
  }
  return parse_scenario(doc);
}

json Scenario::to_json() const {
  const bool measured = compute.kind == comm::ComputeTiming::Kind::Measured;
  json algo = {{"name", algorithm.name},
               {"lr", algorithm.optimizer.lr},
               {"momentum", algorithm.optimizer.momentum},
               {"dampening", algorithm.optimizer.dampening},
               {"weight_decay", algorithm.optimizer.weight_decay},
               {"nesterov", algorithm.optimizer.nesterov}};
  if (!algorithm.variant.empty()) algo["variant"] = algorithm.variant;
  return {{"name", name},
          {"ranks", ranks},
          {"steps", steps},
          {"seed", seed},
          {"workload",
           {{"kind", "logistic_regression"},
            {"samples", workload.samples},
            {"features", workload.features},
            {"batch_size", workload.batch_size},
            {"partition", workload.partition}}},
          {"algorithm", algo},
          {"topology", {{"kind", topology}}},
          {"network",
           {{"model", network.model},
            {"latency_us", network.latency_s * 1e6},
            {"bandwidth_GBps", network.bandwidth_bytes_per_s / 1e9}}},
          {"compute",
           {{"timing", measured ? "measured" : "cost_model"},
            {"gflops", compute.model.flops_per_s / 1e9},
            {"memory_GBps", compute.model.bytes_per_s / 1e9}}}};
}

}  // namespace dtsim::runner
