#include "runner/scenario.hpp"
#include "runner/schema.hpp"
#include "runner/resource_estimate.hpp"

#include <fstream>
#include <optional>
#include <limits>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "network_models/topology.hpp"
#include <tuple>

namespace dtsim::runner {

using nlohmann::json;

namespace {

std::string describe(const json& v) {
  std::string text = v.dump(-1, ' ', false, json::error_handler_t::replace);
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

  std::string where(const std::string& key = "") const {
    return key.empty() ? (path_.empty() ? "/" : path_) : path_ + "/" + pointer_token(key);
  }

  auto items() const { return object_.items(); }

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
    if (!(x >= lo && x <= hi) || (lo_open && x == lo))  // NaN (from a document built in memory) is out of range
      throw ScenarioError(where(key), fmt::format("expected a number in {}{}, {}], got {}", lo_open ? "(" : "[", lo,
                                                  hi, v->dump()));
    return x;
  }

  std::int64_t integer(const std::string& key, std::optional<std::int64_t> fallback, std::int64_t lo, std::int64_t hi) {
    const json* v = fallback ? find(key) : &require(key, "an integer");
    if (!v) return *fallback;
    if (!v->is_number_integer()) throw ScenarioError(where(key), "expected an integer, got " + describe(*v));
    const bool too_big = v->is_number_unsigned() && v->get<std::uint64_t>() > static_cast<std::uint64_t>(hi);
    const auto x = too_big ? hi : v->get<std::int64_t>();
    if (too_big || x < lo || x > hi)
      throw ScenarioError(where(key), fmt::format("expected an integer >= {}{}, got {}", lo,
                                                  hi == std::numeric_limits<std::int64_t>::max() ? "" : fmt::format(" and <= {}", hi),
                                                  v->dump()));
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
      throw ScenarioError(where(key), fmt::format("expected one of {}, got {}", fmt::join(allowed, ", "),
                                                  json(s).dump(-1, ' ', false, json::error_handler_t::replace)));
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

// The fields (besides "type") of each workload type; setting another is an error.
const std::vector<std::string>& workload_fields(const std::string& type) {
  static const std::vector<std::string> logistic{"samples", "features", "batch_size", "partition", "libsvm_file"};
  static const std::vector<std::string> images{"data_dir", "batch_size", "partition", "train_samples", "test_samples"};
  static const std::vector<std::string> convnets{"batch_size"};
  static const std::vector<std::string> sequences{"batch_size", "sequence_length"};
  if (type == "logistic_regression") return logistic;
  if (type == "mlp" || type == "cnn") return images;
  if (type.rfind("resnet", 0) == 0) return convnets;
  return sequences;  // the shape-only transformers
}

// "device": where every rank's tensors live (WorkloadSpec::device). "cuda" needs a dtsim
// built against a CUDA LibTorch and a device it can see; the error says which is missing.
at::Device parse_device(ObjectReader& root) {
  if (root.choice("device", "cpu", {"cpu", "cuda"}) == "cpu") return at::kCPU;
#if DTSIM_TORCH_CUDA
  if (!at::hasCUDA())
    throw ScenarioError(root.where("device"), "\"cuda\" needs a CUDA device, and this LibTorch sees none (check "
                                              "nvidia-smi and CUDA_VISIBLE_DEVICES)");
  return at::kCUDA;
#else
  throw ScenarioError(root.where("device"), "\"cuda\" needs a dtsim built against a CUDA LibTorch, and this one's "
                                            "LibTorch is a CPU build");
#endif
}

constexpr auto kIntMax = std::numeric_limits<std::int64_t>::max();
constexpr double kInf = std::numeric_limits<double>::infinity();
// Physical bounds of a link, so that a message's time (latency + bytes / bandwidth) stays a
// finite double for any message dtsim can send: one byte per second to a petabyte per
// second, and up to 1,000 s of latency.
constexpr double kMinBandwidthGBps = 1e-9;
constexpr double kMaxBandwidthGBps = 1e6;
constexpr double kMaxLatencyUs = 1e9;

}  // namespace

Scenario parse_scenario(const json& doc) {
  if (const auto deep = first_too_deep(doc))
    throw ScenarioError(*deep, fmt::format("expected at most {} levels of nesting, got more", kMaxJsonDepth));
  Scenario s;
  ObjectReader root(doc, "");
  s.name = root.string("name", "unnamed");
  s.ranks = static_cast<int>(root.integer("ranks", std::nullopt, 1, 1 << 20));
  s.steps = root.integer("steps", std::nullopt, 1, kIntMax);
  s.seed = static_cast<std::uint64_t>(root.integer("seed", 0, 0, kIntMax));

  s.eval_every = root.integer("eval_every", 0, 0, kIntMax);
  s.timing_only = root.boolean("timing_only", false);
  {
    auto w = root.object("workload", true);
    auto& spec = s.workload;
    // "type" (default logistic_regression); "kind" is its older name.
    const json* kind = w.find("kind");
    if (kind && w.find("type"))
      throw ScenarioError(w.where("kind"), "expected type or kind, not both (kind is the older name of type)");
    spec.type = w.choice(kind ? "kind" : "type", "logistic_regression", workloads::workload_types());
    const auto& allowed = workload_fields(spec.type);
    for (const auto& [key, value] : w.items())
      if (key != "type" && key != "kind" && std::find(allowed.begin(), allowed.end(), key) == allowed.end())
        throw ScenarioError(w.where(key), fmt::format("not a field of workload type {} (its fields: {})", spec.type,
                                                      fmt::join(allowed, ", ")));
    if (spec.type == "logistic_regression") {
      auto& lr = spec.logistic;
      if (const json* file = w.find("libsvm_file")) {
        // Data from a LIBSVM file (load_scenario has made a relative path relative to the
        // scenario file's directory): samples is the file's; features defaults to its
        // largest index.
        if (!file->is_string() || file->get<std::string>().empty())
          throw ScenarioError(w.where("libsvm_file"), "expected a non-empty path string, got " + describe(*file));
        if (w.find("samples"))
          throw ScenarioError(w.where("samples"), "expected no samples with libsvm_file (the file's lines are the samples)");
        lr.libsvm_file = file->get<std::string>();
        if (const auto why = not_a_regular_file(lr.libsvm_file))
          throw ScenarioError(w.where("libsvm_file"), fmt::format("{} {}", one_line(lr.libsvm_file), *why));
        lr.features = w.integer("features", 0, 1, kIntMax);
        try {  // the file's shape, without building its (dense) data
          const auto shape = workloads::libsvm_shape(lr.libsvm_file, lr.features);
          lr.samples = shape.samples;
          lr.features = shape.features;
        } catch (const std::invalid_argument& e) {
          throw ScenarioError(w.where("libsvm_file"), e.what());
        }
      } else {
        lr.samples = w.integer("samples", 4096, 1, kIntMax);
        lr.features = w.integer("features", 32, 1, kIntMax);
      }
      // batch_size: a positive integer, or "full" / 0 for the whole shard every step.
      if (const json* b = w.find("batch_size"); b && b->is_string()) {
        if (b->get<std::string>() != "full")
          throw ScenarioError(w.where("batch_size"), "expected a positive integer, 0 or \"full\", got " + describe(*b));
        lr.batch_size = 0;
      } else {
        lr.batch_size = w.integer("batch_size", 32, 0, kIntMax);
      }
      lr.partition = w.choice("partition", "iid", {"iid", "sorted"});
      if (lr.samples < s.ranks)
        throw ScenarioError(w.where("samples"),
                            fmt::format("expected at least one sample per rank ({}), got {}", s.ranks, lr.samples));
    } else {
      spec.batch_size = w.integer("batch_size", spec.batch_size, 1, kIntMax);
      if (spec.type == "mlp" || spec.type == "cnn") {
        const std::string dir = w.string("data_dir", spec.data_dir);
        if (dir.empty()) throw ScenarioError(w.where("data_dir"), "expected a non-empty directory path");
        spec.data_dir = dir;
        spec.partition = w.choice("partition", "iid", {"iid", "by_label"});
        spec.train_samples = w.integer("train_samples", 0, 0, kIntMax);
        spec.test_samples = w.integer("test_samples", 0, 0, kIntMax);
        if (spec.train_samples != 0 && spec.train_samples < s.ranks)
          throw ScenarioError(w.where("train_samples"), fmt::format("expected 0 (all) or at least one sample per rank "
                                                                    "({}), got {}",
                                                                    s.ranks, spec.train_samples));
      }
      if (std::find(allowed.begin(), allowed.end(), "sequence_length") != allowed.end())
        spec.sequence_length = w.integer("sequence_length", spec.sequence_length, 1, kIntMax);
    }
    w.finish();
  }
  s.workload.device = parse_device(root);
  {
    auto a = root.object("algorithm", true);
    auto& alg = s.algorithm;
    alg.name = a.choice("name", std::nullopt, algorithms::algorithm_names());
    const auto& allowed = algorithms::algorithm_fields(alg.name);
    auto uses = [&](const char* key) { return std::find(allowed.begin(), allowed.end(), key) != allowed.end(); };
    // A field the algorithm does not read is an error, not silently ignored.
    for (const auto& [key, value] : a.items())
      if (key != "name" && !uses(key.c_str()))
        throw ScenarioError(a.where(key), fmt::format("not a field of algorithm {} (its fields: {})", alg.name,
                                                      fmt::join(allowed, ", ")));
    if (uses("variant")) {
      if (alg.name == "distopt")
        alg.variant = a.choice("variant", "sync", {"sync", "half", "partial", "sparse"});
      else
        alg.variant = a.choice("variant", std::nullopt, {"centralized", "decentralized"});
    }
    auto& o = alg.optimizer;
    o.lr = a.number("lr", std::nullopt, 0.0, kInf);
    o.momentum = a.number("momentum", 0.0, 0.0, 1.0);
    o.dampening = a.number("dampening", 0.0, 0.0, 1.0);
    o.weight_decay = a.number("weight_decay", 0.0, 0.0, kInf);
    o.nesterov = a.boolean("nesterov", false);
    if (o.nesterov && (o.momentum == 0.0 || o.dampening != 0.0))
      throw ScenarioError(a.where("nesterov"), "expected momentum > 0 and dampening 0 with nesterov");
    if (uses("compressor")) {
      auto c = a.object("compressor", false);
      auto& cs = alg.compressor;
      const std::vector<std::string> kinds{"identity", "top_k", "random_k", "threshold", "sign",
                                           "scaled_sign", "qsgd", "fp16", "bf16"};
      const auto kind = c.choice("kind", "identity", kinds);
      cs.kind = static_cast<kernels::CompressorKind>(std::find(kinds.begin(), kinds.end(), kind) - kinds.begin());
      cs.ratio = c.number("ratio", 0.01, 0.0, 1.0);
      cs.threshold = c.number("threshold", 0.0, 0.0, kInf);
      cs.levels = static_cast<int>(c.integer("levels", 15, 2, 256));
      cs.seed = static_cast<std::uint64_t>(c.integer("seed", static_cast<std::int64_t>(s.seed), 0, kIntMax));
      cs.shared_seed = c.boolean("shared_seed", false);
      cs.unbiased = c.boolean("unbiased", false);
      cs.tau_rescale = c.boolean("tau_rescale", false);
      cs.bucket = c.integer("bucket", 0, 0, std::int64_t{1} << 30);
      c.finish();
      try {
        kernels::Compressor check(cs);
      } catch (const std::invalid_argument& e) {
        throw ScenarioError(a.where("compressor"), e.what());
      }
    }
    if (uses("consensus_stepsize")) alg.consensus_stepsize = a.number("consensus_stepsize", 1.0, 0.0, 1.0, true);
    if (uses("overlap")) alg.overlap = a.boolean("overlap", true);
    if (uses("local_steps")) alg.local_steps = a.integer("local_steps", 1, 1, kIntMax);
    if (uses("turn_on_local_steps_from")) alg.turn_on_local_steps_from = a.integer("turn_on_local_steps_from", 0, 0, kIntMax);
    if (uses("majority_vote")) alg.majority_vote = a.boolean("majority_vote", true);
    if (uses("mask_momentum")) alg.mask_momentum = a.boolean("mask_momentum", false);
    if (uses("packed_signs")) alg.packed_signs = a.boolean("packed_signs", false);
    if (alg.name == "distopt") {
      // Fields of one variant only are errors under another.
      const std::vector<std::pair<const char*, const char*>> variant_only{
          {"clipping", "half"}, {"clip_value", "half"}, {"spars", "sparse"}, {"top_k", "sparse"}, {"corr", "sparse"}};
      for (const auto& [key, variant] : variant_only)
        if (alg.variant != variant && a.find(key))
          throw ScenarioError(a.where(key), fmt::format("only the {} variant of distopt reads it (this one is {})",
                                                        variant, alg.variant));
      alg.buffer_size = a.integer("buffer_size", 4194304, 0, kIntMax);
      alg.threshold = a.integer("threshold", 2097152, 0, kIntMax);
      if (alg.threshold > alg.buffer_size / 2)
        throw ScenarioError(a.where("threshold"),
                            fmt::format("expected at most buffer_size / 2 = {} elements (a fused group holds up to 2 * "
                                        "threshold elements and would overflow the {}-element buffer), got {}",
                                        alg.buffer_size / 2, alg.buffer_size, alg.threshold));
      alg.clipping = a.boolean("clipping", false);
      alg.clip_value = a.number("clip_value", 100.0, 0.0, kInf, true);
      alg.top_k = a.boolean("top_k", false);
      alg.spars = alg.top_k ? a.number("spars", 0.05, 0.0, 1.0) : a.number("spars", 0.05, 0.0, kInf);
      alg.corr = a.boolean("corr", true);
    }
    a.finish();
  }
  {
    auto t = root.object("topology", true);
    auto& topo = s.topology;
    topo.kind = t.choice("kind", std::nullopt, net::topology_kinds());
    if (topo.kind == "torus") {
      const json& dims = t.require("dims", "an array of dimension sizes");
      if (!dims.is_array() || dims.empty())
        throw ScenarioError(t.where("dims"), "expected a non-empty array of integers, got " + describe(dims));
      std::int64_t product = 1;
      for (std::size_t i = 0; i < dims.size(); ++i) {
        // Each dimension divides ranks, so a larger one (which would overflow the product) is wrong too.
        if (!dims[i].is_number_integer() || (dims[i].is_number_unsigned() && dims[i].get<std::uint64_t>() > 1u << 20) ||
            dims[i].get<std::int64_t>() < 1 || dims[i].get<std::int64_t>() > s.ranks)
          throw ScenarioError(t.where("dims") + fmt::format("/{}", i),
                              fmt::format("expected an integer >= 1 and <= ranks ({}), got {}", s.ranks, describe(dims[i])));
        topo.dims.push_back(dims[i].get<int>());
        product *= topo.dims.back();
        if (product > s.ranks) break;
      }
      if (product != s.ranks)
        throw ScenarioError(t.where("dims"), fmt::format("expected dimensions whose product is ranks ({}), got {}",
                                                         s.ranks, fmt::join(topo.dims, "x")));
    }
    if (topo.kind == "fat_tree") topo.k = static_cast<int>(t.integer("k", std::nullopt, 2, 256));
    if (topo.kind == "hypercube" && (s.ranks & (s.ranks - 1)) != 0)
      throw ScenarioError(t.where("kind"), fmt::format("hypercube needs a power-of-two rank count, got {}", s.ranks));
    if (topo.kind == "hierarchical") {
      topo.gpus_per_node = static_cast<int>(t.integer("gpus_per_node", std::nullopt, 1, 1 << 20));
      topo.nvswitch = t.boolean("nvswitch", true);
      topo.intra.latency_s = t.number("intra_latency_us", std::nullopt, 0.0, kMaxLatencyUs) * 1e-6;
      topo.intra.bandwidth_bytes_per_s = t.number("intra_bandwidth_GBps", std::nullopt, kMinBandwidthGBps, kMaxBandwidthGBps) * 1e9;
    }
    if (topo.kind == "edges") {
      topo.nodes = static_cast<int>(t.integer("nodes", s.ranks, s.ranks, 1 << 24));
      const json& edges = t.require("edges", "an array of {a, b, latency_us, bandwidth_GBps}");
      if (!edges.is_array() || edges.empty())
        throw ScenarioError(t.where("edges"), "expected a non-empty array of edges, got " + describe(edges));
      for (std::size_t i = 0; i < edges.size(); ++i) {
        ObjectReader e(edges[i], t.where("edges") + fmt::format("/{}", i));
        net::Edge edge;
        edge.a = static_cast<int>(e.integer("a", std::nullopt, 0, topo.nodes - 1));
        edge.b = static_cast<int>(e.integer("b", std::nullopt, 0, topo.nodes - 1));
        edge.params.latency_s = e.number("latency_us", std::nullopt, 0.0, kMaxLatencyUs) * 1e-6;
        edge.params.bandwidth_bytes_per_s = e.number("bandwidth_GBps", std::nullopt, kMinBandwidthGBps, kMaxBandwidthGBps) * 1e9;
        if (edge.a == edge.b) throw ScenarioError(e.where("b"), fmt::format("expected a node other than a ({})", edge.a));
        e.finish();
        topo.edges.push_back(edge);
      }
    }
    t.finish();
  }
  {
    auto n = root.object("network", true);
    auto& net = s.network;
    net.model = n.choice("model", std::nullopt, net::network_models());
    net.nominal.latency_s = n.number("latency_us", std::nullopt, 0.0, kMaxLatencyUs) * 1e-6;
    net.nominal.bandwidth_bytes_per_s = n.number("bandwidth_GBps", std::nullopt, kMinBandwidthGBps, kMaxBandwidthGBps) * 1e9;
    net.perturbations.overhead_s = n.number("overhead_us", 0.0, 0.0, kInf) * 1e-6;
    net.perturbations.jitter_s = n.number("jitter_us", 0.0, 0.0, kInf) * 1e-6;
    net.perturbations.jitter_seed = s.seed;
    {
      auto a = n.object("algorithms", false);
      const std::vector<std::pair<const char*, net::CollectiveKind>> kinds{
          {"all_reduce", net::CollectiveKind::AllReduce},
          {"reduce_scatter", net::CollectiveKind::ReduceScatter},
          {"all_gather", net::CollectiveKind::AllGather},
          {"broadcast", net::CollectiveKind::Broadcast}};
      for (const auto& [key, kind] : kinds) {
        std::vector<std::string> allowed{"auto"};
        for (auto alg : net::algorithms_for(kind)) allowed.push_back(net::to_string(alg));
        net.algorithms[kind] = net::parse_algorithm(a.choice(key, net::to_string(net.algorithms[kind]), allowed));
      }
      a.finish();
    }
    auto node_pair = [&](ObjectReader& r) {
      const int nodes = std::max(s.ranks, s.topology.nodes);
      return std::pair{static_cast<int>(r.integer("a", std::nullopt, 0, 1 << 24)),
                       static_cast<int>(r.integer("b", std::nullopt, 0, std::max(nodes, 1 << 24)))};
    };
    if (const json* trace = n.find("bandwidth_trace")) {
      if (!trace->is_array()) throw ScenarioError(n.where("bandwidth_trace"), "expected an array, got " + describe(*trace));
      for (std::size_t i = 0; i < trace->size(); ++i) {
        ObjectReader c((*trace)[i], n.where("bandwidth_trace") + fmt::format("/{}", i));
        net::BandwidthChange change;
        change.time_s = c.number("time_s", std::nullopt, 0.0, kInf);
        std::tie(change.a, change.b) = node_pair(c);
        change.bandwidth_bytes_per_s = c.number("bandwidth_GBps", std::nullopt, kMinBandwidthGBps, kMaxBandwidthGBps) * 1e9;
        c.finish();
        net.perturbations.bandwidth_trace.push_back(change);
      }
    }
    if (const json* failures = n.find("failures")) {
      if (!failures->is_array()) throw ScenarioError(n.where("failures"), "expected an array, got " + describe(*failures));
      for (std::size_t i = 0; i < failures->size(); ++i) {
        ObjectReader c((*failures)[i], n.where("failures") + fmt::format("/{}", i));
        net::LinkFailure failure;
        failure.time_s = c.number("time_s", std::nullopt, 0.0, kInf);
        std::tie(failure.a, failure.b) = node_pair(c);
        c.finish();
        net.perturbations.failures.push_back(failure);
      }
    }
    n.finish();
  }
  check_topology_fits(s);  // before building it: a complete graph of 10^6 ranks would not fit (resource_estimate.hpp)
  std::optional<net::Topology> topology;
  try {  // the topology must be buildable (e.g. a fat-tree large enough for the ranks)
    topology = net::make_topology(s.topology, s.ranks, s.network.nominal);
  } catch (const std::invalid_argument& e) {
    throw ScenarioError("/topology", e.what());
  }
  // Bandwidth changes and failures must name cables that exist.
  auto is_link = [&](int a, int b) {
    for (const auto& link : topology->links())
      if (link.src == a && link.dst == b) return true;
    return false;
  };
  const auto& p = s.network.perturbations;
  for (std::size_t i = 0; i < p.bandwidth_trace.size(); ++i)
    if (!is_link(p.bandwidth_trace[i].a, p.bandwidth_trace[i].b))
      throw ScenarioError(fmt::format("/network/bandwidth_trace/{}", i),
                          fmt::format("expected a link of the topology, but there is none between nodes {} and {}",
                                      p.bandwidth_trace[i].a, p.bandwidth_trace[i].b));
  for (std::size_t i = 0; i < p.failures.size(); ++i)
    if (!is_link(p.failures[i].a, p.failures[i].b))
      throw ScenarioError(fmt::format("/network/failures/{}", i),
                          fmt::format("expected a link of the topology, but there is none between nodes {} and {}",
                                      p.failures[i].a, p.failures[i].b));
  {
    auto c = root.object("compute", false);
    const auto timing = c.choice("timing", "cost_model", {"cost_model", "measured"});
    s.compute.kind = timing == "measured" ? comm::ComputeTiming::Kind::Measured : comm::ComputeTiming::Kind::CostModel;
    s.compute.model.flops_per_s = c.number("gflops", 1000.0, 0.0, kInf, true) * 1e9;
    s.compute.model.bytes_per_s = c.number("memory_GBps", 100.0, 0.0, kInf, true) * 1e9;
    if (const json* stragglers = c.find("stragglers")) {
      if (!stragglers->is_array())
        throw ScenarioError(c.where("stragglers"), "expected an array of {rank, slowdown}, got " + describe(*stragglers));
      s.compute.slowdown.assign(s.ranks, 1.0);
      for (std::size_t i = 0; i < stragglers->size(); ++i) {
        ObjectReader st((*stragglers)[i], c.where("stragglers") + fmt::format("/{}", i));
        const auto rank = st.integer("rank", std::nullopt, 0, s.ranks - 1);
        s.compute.slowdown[rank] = st.number("slowdown", std::nullopt, 0.0, kInf, true);
        st.finish();
      }
    }
    c.finish();
  }
  root.finish();
  // The typed parse above gives the precise messages; the schema (scenarios/
  // scenario.schema.json) must accept whatever it accepts, so a loader change that the
  // schema does not follow fails at once rather than leaving the documentation stale.
  if (const auto schema_error = validate_scenario_schema(doc))
    throw ScenarioError("/", "the scenario passes the loader but not scenarios/scenario.schema.json (update it): " +
                                 *schema_error);
  return s;
}

void resolve_file_fields(json& doc, const std::filesystem::path& dir) {
  if (const auto deep = first_too_deep(doc))
    throw ScenarioError(*deep, fmt::format("expected at most {} levels of nesting, got more", kMaxJsonDepth));
  // "network": {"calibrated": "model.json"} (a file from `dtsim calibrate`, relative to the
  // scenario's directory) supplies model, latency_us and bandwidth_GBps where the scenario
  // does not set them.
  if (doc.is_object() && doc.contains("network") && doc["network"].is_object() && doc["network"].contains("calibrated")) {
    auto& n = doc["network"];
    if (!n["calibrated"].is_string()) throw ScenarioError("/network/calibrated", "expected a network model file name");
    std::filesystem::path model_file = n["calibrated"].get<std::string>();
    if (model_file.is_relative()) model_file = dir / model_file;
    if (const auto why = not_a_regular_file(model_file))
      throw ScenarioError("/network/calibrated", fmt::format("{} {}", one_line(model_file.string()), *why));
    std::ifstream model_in(model_file);
    json model = json::parse(model_in, nullptr, false);
    if (!model.is_object() || !model.contains("latency_us") || !model.contains("bandwidth_GBps") || first_too_deep(model))
      throw ScenarioError("/network/calibrated", fmt::format("{}: expected a network model file (from dtsim calibrate) "
                                                             "with latency_us and bandwidth_GBps", model_file.string()));
    for (const char* key : {"model", "latency_us", "bandwidth_GBps"})
      if (!n.contains(key) && model.contains(key)) n[key] = model[key];
    n.erase("calibrated");
  }
  // A relative /workload/libsvm_file or /workload/data_dir is relative to the scenario
  // file's directory.
  if (doc.is_object() && doc.contains("workload") && doc["workload"].is_object()) {
    auto& w = doc["workload"];
    for (const char* key : {"libsvm_file", "data_dir"})
      if (w.contains(key) && w[key].is_string()) {
        const std::filesystem::path data = w[key].get<std::string>();
        if (!data.empty() && data.is_relative()) w[key] = (dir / data).lexically_normal().string();
      }
  }
}

Scenario load_scenario(const std::filesystem::path& file) {
  if (const auto why = not_a_regular_file(file))
    throw ScenarioError("/", fmt::format("scenario file {} {}", one_line(file.string()), *why));
  std::ifstream in(file);
  if (!in) throw ScenarioError("/", fmt::format("cannot read scenario file {}", file.string()));
  std::stringstream text;
  text << in.rdbuf();
  json doc;
  try {
    doc = parse_json_text(text.str());
  } catch (const JsonTextError& e) {
    // A syntax error says no more than where; a number out of range says which.
    const auto overflow = e.reason().find("number overflow");
    throw ScenarioError("/", fmt::format("invalid JSON at line {}, column {}{}", e.line(), e.column(),
                                         overflow == std::string::npos ? "" : ": " + e.reason().substr(overflow) +
                                                                                  " (beyond the range of a double)"));
  }
  resolve_file_fields(doc, file.parent_path());
  return parse_scenario(doc);
}

json Scenario::to_json() const {
  const bool measured = compute.kind == comm::ComputeTiming::Kind::Measured;
  const auto& alg = algorithm;
  json algo = {{"name", alg.name},
               {"lr", alg.optimizer.lr},
               {"momentum", alg.optimizer.momentum},
               {"dampening", alg.optimizer.dampening},
               {"weight_decay", alg.optimizer.weight_decay},
               {"nesterov", alg.optimizer.nesterov}};
  const auto& fields = algorithms::algorithm_fields(alg.name);
  auto uses = [&](const char* key) { return std::find(fields.begin(), fields.end(), key) != fields.end(); };
  if (uses("variant")) algo["variant"] = alg.variant;
  if (uses("compressor"))
    algo["compressor"] = {{"kind", std::string(kernels::to_string(alg.compressor.kind))},
                          {"ratio", alg.compressor.ratio},
                          {"threshold", alg.compressor.threshold},
                          {"levels", alg.compressor.levels},
                          {"seed", alg.compressor.seed},
                          {"shared_seed", alg.compressor.shared_seed},
                          {"unbiased", alg.compressor.unbiased},
                          {"tau_rescale", alg.compressor.tau_rescale},
                          {"bucket", alg.compressor.bucket}};
  if (uses("consensus_stepsize")) algo["consensus_stepsize"] = alg.consensus_stepsize;
  if (uses("overlap")) algo["overlap"] = alg.overlap;
  if (uses("local_steps")) algo["local_steps"] = alg.local_steps;
  if (uses("turn_on_local_steps_from")) algo["turn_on_local_steps_from"] = alg.turn_on_local_steps_from;
  if (uses("majority_vote")) algo["majority_vote"] = alg.majority_vote;
  if (uses("mask_momentum")) algo["mask_momentum"] = alg.mask_momentum;
  if (uses("packed_signs")) algo["packed_signs"] = alg.packed_signs;
  if (alg.name == "distopt") {
    algo["threshold"] = alg.threshold;
    algo["buffer_size"] = alg.buffer_size;
    if (alg.variant == "half") {
      algo["clipping"] = alg.clipping;
      algo["clip_value"] = alg.clip_value;
    }
    if (alg.variant == "sparse") {
      algo["spars"] = alg.spars;
      algo["top_k"] = alg.top_k;
      algo["corr"] = alg.corr;
    }
  }
  json topo = {{"kind", topology.kind}};
  if (topology.kind == "torus") topo["dims"] = topology.dims;
  if (topology.kind == "fat_tree") topo["k"] = topology.k;
  if (topology.kind == "hierarchical") {
    topo["gpus_per_node"] = topology.gpus_per_node;
    topo["nvswitch"] = topology.nvswitch;
    topo["intra_latency_us"] = topology.intra.latency_s * 1e6;
    topo["intra_bandwidth_GBps"] = topology.intra.bandwidth_bytes_per_s / 1e9;
  }
  if (topology.kind == "edges") {
    topo["nodes"] = topology.nodes;
    topo["edges"] = json::array();
    for (const auto& e : topology.edges)
      topo["edges"].push_back({{"a", e.a}, {"b", e.b}, {"latency_us", e.params.latency_s * 1e6},
                               {"bandwidth_GBps", e.params.bandwidth_bytes_per_s / 1e9}});
  }
  json algorithms = json::object();
  for (const auto& [kind, choice] : network.algorithms) algorithms[net::to_string(kind)] = net::to_string(choice);
  json net = {{"model", network.model},
              {"latency_us", network.nominal.latency_s * 1e6},
              {"bandwidth_GBps", network.nominal.bandwidth_bytes_per_s / 1e9},
              {"overhead_us", network.perturbations.overhead_s * 1e6},
              {"jitter_us", network.perturbations.jitter_s * 1e6},
              {"algorithms", algorithms}};
  if (!network.perturbations.bandwidth_trace.empty()) {
    net["bandwidth_trace"] = json::array();
    for (const auto& c : network.perturbations.bandwidth_trace)
      net["bandwidth_trace"].push_back(
          {{"time_s", c.time_s}, {"a", c.a}, {"b", c.b}, {"bandwidth_GBps", c.bandwidth_bytes_per_s / 1e9}});
  }
  if (!network.perturbations.failures.empty()) {
    net["failures"] = json::array();
    for (const auto& f : network.perturbations.failures) net["failures"].push_back({{"time_s", f.time_s}, {"a", f.a}, {"b", f.b}});
  }
  json comp = {{"timing", measured ? "measured" : "cost_model"},
               {"gflops", compute.model.flops_per_s / 1e9},
               {"memory_GBps", compute.model.bytes_per_s / 1e9}};
  if (!compute.slowdown.empty()) {
    comp["stragglers"] = json::array();
    for (std::size_t r = 0; r < compute.slowdown.size(); ++r)
      if (compute.slowdown[r] != 1.0) comp["stragglers"].push_back({{"rank", r}, {"slowdown", compute.slowdown[r]}});
  }
  json work = {{"type", workload.type}};
  if (workload.type == "logistic_regression") {
    const auto& lr = workload.logistic;
    work["samples"] = lr.samples;
    work["features"] = lr.features;
    work["batch_size"] = lr.batch_size;
    work["partition"] = lr.partition;
    if (!lr.libsvm_file.empty()) {  // the file's sample count is implied (and not a field then)
      work.erase("samples");
      work["libsvm_file"] = lr.libsvm_file;
    }
  } else {
    for (const auto& key : workload_fields(workload.type)) {
      if (key == "data_dir") work[key] = workload.data_dir;
      if (key == "batch_size") work[key] = workload.batch_size;
      if (key == "partition") work[key] = workload.partition;
      if (key == "train_samples") work[key] = workload.train_samples;
      if (key == "test_samples") work[key] = workload.test_samples;
      if (key == "sequence_length") work[key] = workload.sequence_length;
    }
  }
  return {{"name", name},
          {"ranks", ranks},
          {"steps", steps},
          {"seed", seed},
          {"eval_every", eval_every},
          {"timing_only", timing_only},
          {"workload", work},
          {"algorithm", algo},
          {"topology", topo},
          {"network", net},
          {"compute", comp},
          {"device", workload.device.is_cuda() ? "cuda" : "cpu"}};
}

}  // namespace dtsim::runner
