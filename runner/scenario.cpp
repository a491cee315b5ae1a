#include "runner/scenario.hpp"
#include "runner/schema.hpp"
#include "runner/scenario_schema.hpp"
#include "runner/resource_estimate.hpp"

#include <algorithm>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "algorithms/registry.hpp"
#include "comm/compute_section.hpp"
#include "config/closest_name.hpp"
#include "config/field_recorder.hpp"
#include "config/object_reader.hpp"
#include "network_models/network_section.hpp"
#include "network_models/topology.hpp"
#include "network_models/topology_section.hpp"
#include "workloads/workload_registry.hpp"

namespace dtsim::runner {

using config::kIntMax;
using config::ObjectReader;
using nlohmann::json;

namespace {

// "device": where every rank's tensors live (WorkloadSpec::device). "cuda" needs a dtsim
// built against a CUDA LibTorch and a device it can see; the error says which is missing.
at::Device parse_device(ObjectReader& root) {
  if (root.choice("device", "cpu", {"cpu", "cuda"}) == "cpu") return at::kCPU;
#if DTSIM_TORCH_CUDA
  if (!at::hasCUDA())
    throw ScenarioError(root.where("device"), ErrorKind::environment,
                        "\"cuda\" needs a CUDA device, and this LibTorch sees none (check nvidia-smi and "
                        "CUDA_VISIBLE_DEVICES)");
  return at::kCUDA;
#else
  throw ScenarioError(root.where("device"), ErrorKind::environment,
                      "\"cuda\" needs a dtsim built against a CUDA LibTorch, and this one's LibTorch is a CPU build");
#endif
}

// The topology must be buildable (e.g. a fat-tree large enough for the ranks), and the
// network's bandwidth changes and failures must name its links.
void check_topology_and_links(const Scenario& s) {
  check_topology_fits(s);  // before building it: a complete graph of 10^6 ranks would not fit (resource_estimate.hpp)
  std::optional<net::Topology> topology;
  try {
    topology = net::make_topology(s.topology, s.ranks, s.network.nominal);
  } catch (const std::invalid_argument& e) {
    throw ScenarioError("/topology", ErrorKind::inconsistent, e.what());
  }
  net::check_network_links(s.network, *topology);
}

// "time_resolution_s": the simulated clock's tick, rounded down to a power of two so
// that whole ticks add exactly (sim/time_grid.hpp); 0 turns the grid off. At most a
// nanosecond: every duration rounds to whole ticks, so a coarser clock would turn
// microsecond latencies and nanosecond transfers into zero or a tick without a word.
double parse_time_resolution(ObjectReader& root) {
  constexpr double kFinest = 1e-18, kCoarsest = 1e-9;
  const double seconds = root.number("time_resolution_s", 1e-14, 0.0, kCoarsest);
  if (seconds > 0 && seconds < kFinest)
    throw ScenarioError("/time_resolution_s", ErrorKind::out_of_range,
                        fmt::format("expected 0 (plain doubles) or a tick of {:g} to {:g} s, got {:g}", kFinest,
                                    kCoarsest, seconds));
  return sim::TimeGrid::from_resolution(seconds).tick();
}

// Every field name the scenario schema knows, in any section.
const std::vector<std::string>& schema_field_names() {
  static const std::vector<std::string> names = [] {
    std::set<std::string> found;
    auto walk = [&found](const json& node, auto&& self) -> void {
      if (node.is_object()) {
        if (node.contains("properties") && node["properties"].is_object())
          for (const auto& [key, value] : node["properties"].items()) found.insert(key);
        for (const auto& [key, value] : node.items()) self(value, self);
      } else if (node.is_array()) {
        for (const auto& value : node) self(value, self);
      }
    };
    walk(scenario_schema(), walk);
    return std::vector<std::string>(found.begin(), found.end());
  }();
  return names;
}

// A required field is missing: a key beside it that no section has is what the user
// typed instead (a typo, or a field of another dtsim), and is named first, with the
// missing field when it is close to it.
void name_unknown_key_beside(const json& doc, const ScenarioError& missing) {
  const std::string& path = missing.path();
  const auto slash = path.rfind('/');
  if (slash == std::string::npos) return;
  const json* object = &doc;
  try {
    if (slash > 0) object = &doc.at(json::json_pointer(path.substr(0, slash)));
  } catch (const json::exception&) {
    return;
  }
  if (!object->is_object()) return;
  const std::vector<std::string> wanted{path.substr(slash + 1)};
  const auto& known = schema_field_names();
  for (const auto& [key, value] : object->items()) {
    if (std::binary_search(known.begin(), known.end(), key)) continue;
    throw ScenarioError(path.substr(0, slash) + "/" + config::pointer_token(key), ErrorKind::unknown_field,
                        "unknown field" + config::did_you_mean(key, wanted));
  }
}

Scenario parse_scenario_fields(const json& doc, config::FieldRecorder* recorder = nullptr);

}  // namespace

Scenario parse_scenario(const json& doc) {
  try {
    return parse_scenario_fields(doc);
  } catch (const ScenarioError& e) {
    if (e.kind() == ErrorKind::missing_field) name_unknown_key_beside(doc, e);
    throw;
  }
}

namespace {

// With a recorder (the schema generator) it reads the fields and skips the checks across
// sections, which need a whole scenario.
Scenario parse_scenario_fields(const json& doc, config::FieldRecorder* recorder) {
  if (const auto deep = config::first_too_deep(doc))
    throw ScenarioError(*deep, ErrorKind::syntax, fmt::format("expected at most {} levels of nesting, got more", config::kMaxJsonDepth));
  Scenario s;
  ObjectReader root(doc, "", recorder);
  s.name = root.string("name", "unnamed");
  s.ranks = static_cast<int>(root.integer("ranks", std::nullopt, 1, 1 << 20));
  s.steps = root.integer("steps", std::nullopt, 1, kIntMax);
  s.seed = static_cast<std::uint64_t>(root.integer("seed", 0, 0, kIntMax));
  s.eval_every = root.integer("eval_every", 0, 0, kIntMax);
  s.timing_only = root.boolean("timing_only", false);
  s.time_resolution_s = parse_time_resolution(root);
  {
    auto w = root.object("workload", true);
    s.workload = workloads::parse_workload_section(w, {.ranks = s.ranks});
  }
  s.workload.device = parse_device(root);
  {
    auto a = root.object("algorithm", true);
    s.algorithm = algorithms::parse_algorithm_section(a, {.seed = s.seed});
  }
  // Timing-only mode replays rank 0's trace on every rank, which holds only where each rank
  // sends what rank 0 sends, to its own topology neighbours.
  if (const auto* entry = algorithms::find_algorithm(s.algorithm.name); s.timing_only && entry && !entry->replays_from_one_rank)
    throw ScenarioError("/timing_only", ErrorKind::inconsistent,
                        fmt::format("algorithm {} sends to ranks that are not topology neighbours, which one rank's "
                                    "trace cannot stand for: run it without timing-only mode",
                                    s.algorithm.name));
  {
    auto t = root.object("topology", true);
    s.topology = net::parse_topology_section(t, s.ranks);
  }
  {
    auto n = root.object("network", true);
    s.network = net::parse_network_section(n, std::max(s.ranks, s.topology.nodes), s.seed);
  }
  if (!recorder) check_topology_and_links(s);
  {
    auto c = root.object("compute", false);
    s.compute = comm::parse_compute_section(c, s.ranks);
  }
  root.finish();
  if (recorder) return s;
  // The typed parse above gives the precise messages; the schema (scenarios/
  // scenario.schema.json, generated from these parse functions) must accept whatever it
  // accepts, so a parse the generator misreads fails at once rather than leaving the
  // schema wrong.
  if (const auto schema_error = validate_scenario_schema(doc))
    throw std::logic_error("the scenario passes the loader but not the generated scenario schema (a dtsim bug): " +
                           *schema_error);
  return s;
}

}  // namespace

void record_scenario_fields(const json& doc, config::FieldRecorder& recorder) { parse_scenario_fields(doc, &recorder); }

void resolve_file_fields(json& doc, const std::filesystem::path& dir) {
  if (const auto deep = config::first_too_deep(doc))
    throw ScenarioError(*deep, ErrorKind::syntax, fmt::format("expected at most {} levels of nesting, got more", config::kMaxJsonDepth));
  // "network": {"calibrated": "model.json"} (a file from `dtsim calibrate`, relative to the
  // scenario's directory) supplies model, latency_us and bandwidth_GBps where the scenario
  // does not set them.
  if (doc.is_object() && doc.contains("network") && doc["network"].is_object() && doc["network"].contains("calibrated")) {
    auto& n = doc["network"];
    if (!n["calibrated"].is_string()) throw ScenarioError("/network/calibrated", ErrorKind::wrong_type, "expected a network model file name");
    std::filesystem::path model_file = n["calibrated"].get<std::string>();
    if (model_file.is_relative()) model_file = dir / model_file;
    if (const auto why = config::not_a_regular_file(model_file))
      throw ScenarioError("/network/calibrated", ErrorKind::bad_file, fmt::format("{} {}", config::one_line(model_file.string()), *why));
    std::ifstream model_in(model_file);
    json model = json::parse(model_in, nullptr, false);
    if (!model.is_object() || !model.contains("latency_us") || !model.contains("bandwidth_GBps") || config::first_too_deep(model))
      throw ScenarioError("/network/calibrated", ErrorKind::bad_file, fmt::format("{}: expected a network model file (from dtsim calibrate) "
                                                             "with latency_us and bandwidth_GBps", model_file.string()));
    for (const char* key : {"model", "latency_us", "bandwidth_GBps"})
      if (!n.contains(key) && model.contains(key)) n[key] = model[key];
    n.erase("calibrated");
  }
  // A relative data or model path (/workload/libsvm_file, /workload/data_dir,
  // /workload/model_file: every data source's and workload type's path fields) is
  // relative to the scenario file's directory.
  if (doc.is_object() && doc.contains("workload") && doc["workload"].is_object()) {
    auto& w = doc["workload"];
    for (const auto& key : workloads::path_fields())
      if (w.contains(key) && w[key].is_string()) {
        const std::filesystem::path data = w[key].get<std::string>();
        if (!data.empty() && data.is_relative()) w[key] = (dir / data).lexically_normal().string();
      }
  }
}

Scenario load_scenario(const std::filesystem::path& file) {
  if (const auto why = config::not_a_regular_file(file))
    throw ScenarioError("/", ErrorKind::bad_file, fmt::format("scenario file {} {}", config::one_line(file.string()), *why));
  std::ifstream in(file);
  if (!in) throw ScenarioError("/", ErrorKind::bad_file, fmt::format("cannot read scenario file {}", file.string()));
  std::stringstream text;
  text << in.rdbuf();
  json doc;
  try {
    doc = config::parse_json_text(text.str());
  } catch (const config::JsonTextError& e) {
    // A syntax error says no more than where; a number out of range says which.
    const auto overflow = e.reason().find("number overflow");
    throw ScenarioError("/", ErrorKind::syntax, fmt::format("invalid JSON at line {}, column {}{}", e.line(), e.column(),
                                         overflow == std::string::npos ? "" : ": " + e.reason().substr(overflow) +
                                                                                  " (beyond the range of a double)"));
  }
  resolve_file_fields(doc, file.parent_path());
  return parse_scenario(doc);
}

json Scenario::to_json() const {
  return {{"name", name},
          {"ranks", ranks},
          {"steps", steps},
          {"seed", seed},
          {"eval_every", eval_every},
          {"timing_only", timing_only},
          {"time_resolution_s", time_resolution_s},
          {"workload", workloads::workload_section_json(workload)},
          {"algorithm", algorithms::algorithm_section_json(algorithm)},
          {"topology", net::topology_section_json(topology)},
          {"network", net::network_section_json(network)},
          {"compute", comm::compute_section_json(compute)},
          {"device", workload.device.is_cuda() ? "cuda" : "cpu"}};
}

}  // namespace dtsim::runner
