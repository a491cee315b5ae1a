#include "workloads/shape_models.hpp"
#include "workloads/workload_registry.hpp"

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace dtsim::workloads {

namespace {

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Fills `t` (contiguous) with consecutive runs of the pool at offsets drawn from `key`.
void fill_from_pool(const at::Tensor& t, const at::Tensor& pool, std::uint64_t key) {
  if (!t.is_contiguous()) throw std::invalid_argument("shape model: gradient tensors must be contiguous");
  auto flat = t.view({-1});
  const std::int64_t n = flat.numel(), p = pool.numel(), run = p / 2;
  for (std::int64_t pos = 0; pos < n; pos += run) {
    const std::int64_t len = std::min(run, n - pos);
    key = splitmix64(key);
    const auto offset = static_cast<std::int64_t>(key % static_cast<std::uint64_t>(p - len + 1));
    flat.narrow(0, pos, len).copy_(pool.narrow(0, offset, len));
  }
}

class ShapeWorkload final : public Workload {
 public:
  ShapeWorkload(ShapeModel model, std::int64_t batch_size, at::Tensor pool, std::uint64_t seed, int rank)
      : model_(std::move(model)), batch_(batch_size), pool_(std::move(pool)), seed_(seed), rank_(rank) {
    if (batch_size < 1)
      throw std::invalid_argument(fmt::format("/workload/batch_size: expected >= 1, got {}", batch_size));
    if (!pool_.defined() || pool_.dim() != 1 || pool_.numel() < 2 || pool_.scalar_type() != at::kFloat)
      throw std::invalid_argument("shape model: the value pool must be a 1-D fp32 tensor (make_shape_pool)");
    for (std::size_t l = model_.layers.size(); l-- > 0;) {
      BackwardStage stage;
      std::size_t first = 0;
      for (std::size_t j = 0; j < l; ++j) first += model_.layers[j].tensors.size();
      const auto& layer = model_.layers[l];
      for (std::size_t i = layer.tensors.size(); i-- > 0;) stage.params.push_back(first + i);
      const double b = static_cast<double>(batch_);
      stage.cost = {2.0 * b * layer.flops, 2.0 * (b * layer.bytes + layer.fixed_bytes)};
      stages_.push_back(std::move(stage));
      forward_.flops += b * layer.flops;
      forward_.bytes += b * layer.bytes + layer.fixed_bytes;
    }
    for (const auto& layer : model_.layers)
      for (const auto& t : layer.tensors) {
        names_.push_back(t.name);
        shapes_.push_back(t.shape);
      }
  }

  std::vector<at::Tensor> initial_parameters() const override {
    std::vector<at::Tensor> params;
    for (std::size_t i = 0; i < shapes_.size(); ++i) {
      params.push_back(at::empty(shapes_[i], pool_.options()));  // on the pool's device
      fill_from_pool(params.back(), pool_, splitmix64(seed_ ^ 0x1badb002ULL) + i);
    }
    return params;
  }
  std::vector<std::string> parameter_names() const override { return names_; }
  DataShard data_shard() const override { return {0, batch_}; }  // no data: no epochs

  double forward(const std::vector<at::Tensor>&) override {
    ++step_;
    return std::numeric_limits<double>::quiet_NaN();
  }
  void backward(const std::vector<at::Tensor>& params, std::vector<at::Tensor>& grads) override {
    for (std::size_t k = 0; k < stages_.size(); ++k) backward_stage(k, params, grads);
  }
  sim::ComputeCost forward_cost() const override { return forward_; }
  sim::ComputeCost backward_cost() const override {
    sim::ComputeCost c;
    for (const auto& s : stages_) {
      c.flops += s.cost.flops;
      c.bytes += s.cost.bytes;
    }
    return c;
  }
  std::vector<BackwardStage> backward_stages() const override { return stages_; }
  void backward_stage(std::size_t k, const std::vector<at::Tensor>&, std::vector<at::Tensor>& grads) override {
    if (k >= stages_.size())
      throw std::out_of_range(fmt::format("backward_stage {}: {} has {} stages", k, model_.name, stages_.size()));
    for (auto i : stages_[k].params) {
      const std::uint64_t key = splitmix64(splitmix64(splitmix64(seed_) ^ static_cast<std::uint64_t>(rank_)) ^ step_) + i;
      fill_from_pool(grads.at(i), pool_, key);
    }
  }
  // No data: no loss or accuracy (the runner reports them as null).
  bool computes_loss() const override { return false; }
  Evaluation evaluate(const std::vector<at::Tensor>&) const override {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    return {nan, nan};
  }

 private:
  ShapeModel model_;
  std::int64_t batch_;
  at::Tensor pool_;
  std::uint64_t seed_;
  int rank_;
  std::uint64_t step_ = 0;
  std::vector<BackwardStage> stages_;
  sim::ComputeCost forward_;
  std::vector<std::string> names_;
  std::vector<std::vector<std::int64_t>> shapes_;
};

}  // namespace

std::int64_t TensorShape::numel() const {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

const ShapeModelKind& resnet20_shape();    // shapes/resnet20.cpp
const ShapeModelKind& resnet50_shape();    // shapes/resnet50.cpp
const ShapeModelKind& bert_base_shape();   // shapes/bert_base.cpp
const ShapeModelKind& gpt2_small_shape();  // shapes/gpt2_small.cpp

std::span<const ShapeModelKind* const> shape_model_kinds() {
  static const std::vector<const ShapeModelKind*> table{&resnet20_shape(), &resnet50_shape(), &bert_base_shape(),
                                                        &gpt2_small_shape()};
  return table;
}

const std::vector<std::string>& shape_model_types() {
  static const std::vector<std::string> types = [] {
    std::vector<std::string> t;
    for (const auto* k : shape_model_kinds()) t.emplace_back(k->name);
    return t;
  }();
  return types;
}

namespace {

const ShapeModelKind* find_shape_model(const std::string& model) {
  for (const auto* k : shape_model_kinds())
    if (k->name == model) return k;
  return nullptr;
}

}  // namespace

bool is_shape_model(const std::string& model) { return find_shape_model(model) != nullptr; }

ShapeModel shape_model(const std::string& model, std::int64_t sequence_length) {
  const ShapeModelKind* kind = find_shape_model(model);
  if (!kind)
    throw std::invalid_argument(fmt::format("unknown shape model '{}' (expected one of: {})", model,
                                            fmt::join(shape_model_types(), ", ")));
  ShapeModel m;
  m.name = model;
  if (kind->max_positions > 0) {
    if (sequence_length < 1 || sequence_length > kind->max_positions)
      throw std::invalid_argument(fmt::format("/workload/sequence_length: expected 1 to {} for {}, got {}",
                                              kind->max_positions, model, sequence_length));
    m.sequence_length = sequence_length;
  }
  m.layers = kind->layers(sequence_length);
  return m;
}

std::vector<TensorShape> shape_model_tensors(const std::string& model) {
  std::vector<TensorShape> out;
  for (const auto& layer : shape_model(model, 1).layers)
    for (const auto& t : layer.tensors) out.push_back(t);
  std::reverse(out.begin(), out.end());
  return out;
}

at::Tensor make_shape_pool(std::uint64_t seed) {
  constexpr std::int64_t kPool = (std::int64_t{1} << 22) + 7;
  return at::randn({kPool}, at::detail::createCPUGenerator(seed ^ 0x900dULL), at::kFloat).mul_(0.01);
}

std::unique_ptr<Workload> make_shape_workload(const std::string& model, std::int64_t batch_size,
                                              std::int64_t sequence_length, at::Tensor pool, std::uint64_t seed,
                                              int rank) {
  return std::make_unique<ShapeWorkload>(shape_model(model, sequence_length), batch_size, std::move(pool), seed, rank);
}

// --- the registry entries of the shape-only models (workload_registry.hpp) ---------------

namespace {

struct ShapePoolData : WorkloadData {
  at::Tensor pool;
};

// The shape model a shape workload's entry was made for (its type is a kind's name).
const ShapeModelKind& kind_of(const WorkloadSpec& spec) { return *find_shape_model(spec.type); }

bool is_transformer(const std::string& model) { return find_shape_model(model)->max_positions > 0; }

void parse_shape_workload(config::ObjectReader& w, WorkloadSpec& spec, const WorkloadContext&) {
  spec.batch_size = w.integer("batch_size", spec.batch_size, 1, config::kIntMax);
  ShapeModelSpec s;
  if (const std::int64_t positions = kind_of(spec).max_positions; positions > 0)
    s.sequence_length = w.integer("sequence_length", s.sequence_length, 1, positions);
  spec.settings = s;
}

void shape_workload_json(const WorkloadSpec& spec, nlohmann::json& out) {
  out["batch_size"] = spec.batch_size;
  if (is_transformer(spec.type))
    out["sequence_length"] = settings_of<ShapeModelSpec>(spec).sequence_length;
}

std::shared_ptr<const WorkloadData> load_shape_pool(const WorkloadSpec& spec, std::uint64_t seed) {
  shape_model(spec.type, settings_of<ShapeModelSpec>(spec).sequence_length);  // validates the sequence length
  auto data = std::make_shared<ShapePoolData>();
  data->pool = make_shape_pool(seed).to(spec.device);
  return data;
}

std::unique_ptr<Workload> make_shape_model_workload(const WorkloadSpec& spec, std::shared_ptr<const WorkloadData> data,
                                                    std::uint64_t seed, int rank, int) {
  return make_shape_workload(spec.type, spec.batch_size, settings_of<ShapeModelSpec>(spec).sequence_length,
                             data_for<ShapePoolData>(data, spec.type).pool, seed, rank);
}

WorkloadFootprint shape_workload_footprint(const WorkloadSpec& spec, int) {
  WorkloadFootprint w;
  for (const auto& t : shape_model_tensors(spec.type)) {
    w.sizes_backward.push_back(t.numel());
    w.elements += static_cast<double>(t.numel());
  }
  w.data_bytes = static_cast<double>((std::int64_t{1} << 22) + 7) * 4;  // the value pool (fp32)
  return w;
}

WorkloadEntry shape_workload_entry(const ShapeModelKind& kind) {
  std::vector<std::string> fields{"batch_size"};
  if (kind.max_positions > 0) fields.push_back("sequence_length");
  return {.name = std::string(kind.name),
          .description = std::string(kind.description),
          .fields = std::move(fields),
          .data_path = "/workload",
          .parse = parse_shape_workload,
          .to_json = shape_workload_json,
          .load_data = load_shape_pool,
          .make = make_shape_model_workload,
          .footprint = shape_workload_footprint};
}

}  // namespace

std::span<const WorkloadEntry* const> shape_workload_entries() {
  static const std::vector<WorkloadEntry> entries = [] {
    std::vector<WorkloadEntry> e;
    for (const auto* k : shape_model_kinds()) e.push_back(shape_workload_entry(*k));
    return e;
  }();
  static const std::vector<const WorkloadEntry*> pointers = [] {
    std::vector<const WorkloadEntry*> p;
    for (const auto& e : entries) p.push_back(&e);
    return p;
  }();
  return pointers;
}

}  // namespace dtsim::workloads
