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

// Builds the layer list; op() charges a parameter-free operation to the last layer.
class ModelBuilder {
 public:
  void layer(const std::string& name, std::vector<TensorShape> tensors, double flops, double bytes, double fixed) {
    layers_.push_back({name, std::move(tensors), flops, bytes, fixed});
  }
  void op(double flops, double bytes) {
    if (layers_.empty()) throw std::logic_error("shape model: an operation before the first layer");
    layers_.back().flops += flops;
    layers_.back().bytes += bytes;
  }
  std::vector<ShapeLayer> done() { return std::move(layers_); }

 private:
  std::vector<ShapeLayer> layers_;
};

struct Image {
  std::int64_t c, h, w;
  double numel() const { return static_cast<double>(c * h * w); }
};

// A conv named "<name>.weight", bias-free unless `bias` ("<name>.bias": one more FLOP per
// output element, its values read once per batch); updates x to the output.
void conv(ModelBuilder& b, const std::string& name, Image& x, std::int64_t out, std::int64_t k, std::int64_t stride,
          std::int64_t pad, bool bias = false) {
  const Image y{out, (x.h + 2 * pad - k) / stride + 1, (x.w + 2 * pad - k) / stride + 1};
  const double weights = static_cast<double>(x.c * out * k * k);
  std::vector<TensorShape> tensors{{name + ".weight", {out, x.c, k, k}}};
  if (bias) tensors.push_back({name + ".bias", {out}});
  b.layer(name, std::move(tensors), 2.0 * weights * static_cast<double>(y.h * y.w) + (bias ? y.numel() : 0.0),
          4.0 * (x.numel() + y.numel()), 4.0 * (weights + (bias ? static_cast<double>(out) : 0.0)));
  x = y;
}

// BatchNorm (weight, bias) in inference form y = a x + c: 2 FLOPs and 8 bytes per element;
// a following ReLU adds 1 FLOP and 8 bytes per element.
void batchnorm(ModelBuilder& b, const std::string& name, const Image& x, bool relu) {
  b.layer(name, {{name + ".weight", {x.c}}, {name + ".bias", {x.c}}}, 2.0 * x.numel(), 8.0 * x.numel(),
          8.0 * static_cast<double>(x.c));
  if (relu) b.op(x.numel(), 8.0 * x.numel());
}

// Linear layer on `tokens` rows: weight [out, in] (or [in, out] for GPT-2's Conv1D) and bias.
void linear(ModelBuilder& b, const std::string& name, std::int64_t in, std::int64_t out, double tokens,
            bool transposed = false) {
  const std::vector<std::int64_t> shape = transposed ? std::vector<std::int64_t>{in, out} : std::vector<std::int64_t>{out, in};
  const double w = static_cast<double>(in * out);
  b.layer(name, {{name + ".weight", shape}, {name + ".bias", {out}}},
          tokens * (2.0 * w + static_cast<double>(out)), 4.0 * tokens * static_cast<double>(in + out),
          4.0 * (w + static_cast<double>(out)));
}

// LayerNorm over `tokens` x `h`: about 8 FLOPs and 8 bytes per element.
void layernorm(ModelBuilder& b, const std::string& name, std::int64_t h, double tokens) {
  const double n = tokens * static_cast<double>(h);
  b.layer(name, {{name + ".weight", {h}}, {name + ".bias", {h}}}, 8.0 * n, 8.0 * n, 8.0 * static_cast<double>(h));
}

// Residual add of n elements: 1 FLOP, 12 bytes per element.
void add(ModelBuilder& b, double n) { b.op(n, 12.0 * n); }

// Self-attention on S tokens of width h in `heads` heads: scores Q K^T and context P V
// (2 S S h FLOPs each), softmax over heads x S x S.
void attention(ModelBuilder& b, std::int64_t s, std::int64_t h, std::int64_t heads) {
  const double ss = static_cast<double>(s * s), sh = static_cast<double>(s * h), p = static_cast<double>(heads) * ss;
  b.op(2.0 * ss * static_cast<double>(h), 4.0 * (2.0 * sh + p));  // scores: read Q, K; write P
  b.op(5.0 * p, 8.0 * p);                                         // softmax
  b.op(2.0 * ss * static_cast<double>(h), 4.0 * (p + 2.0 * sh));  // context: read P, V; write
}

}  // namespace

std::vector<ShapeLayer> resnet20_layers(std::int64_t in_channels, std::int64_t classes) {
  ModelBuilder b;
  Image x{in_channels, 32, 32};
  conv(b, "conv1", x, 16, 3, 1, 1);
  batchnorm(b, "bn1", x, true);
  const std::int64_t widths[] = {16, 32, 64};
  for (int stage = 0; stage < 3; ++stage) {
    for (int block = 0; block < 3; ++block) {
      const std::string p = fmt::format("layer{}.{}.", stage + 1, block);
      const std::int64_t stride = stage > 0 && block == 0 ? 2 : 1;
      conv(b, p + "conv1", x, widths[stage], 3, stride, 1);
      batchnorm(b, p + "bn1", x, true);
      conv(b, p + "conv2", x, widths[stage], 3, 1, 1);
      batchnorm(b, p + "bn2", x, false);
      add(b, x.numel());  // option A shortcut: subsample and zero-pad, no parameters
      b.op(x.numel(), 8.0 * x.numel());  // relu
    }
  }
  b.op(x.numel(), 4.0 * (x.numel() + static_cast<double>(x.c)));  // global average pool
  linear(b, "fc", 64, classes, 1.0);
  return b.done();
}

std::vector<ShapeLayer> vgg11_layers(std::int64_t in_channels, std::int64_t classes) {
  ModelBuilder b;
  Image x{in_channels, 32, 32};
  int index = 0;  // the module's position in `features`: conv, bn, relu, then maxpool after some
  for (const std::int64_t width : {64, 0, 128, 0, 256, 256, 0, 512, 512, 0, 512, 512, 0}) {
    if (width == 0) {  // maxpool 2x2 stride 2: 4 comparisons per output
      const Image pooled{x.c, x.h / 2, x.w / 2};
      b.op(4.0 * pooled.numel(), 4.0 * (x.numel() + pooled.numel()));
      x = pooled;
      ++index;
      continue;
    }
    conv(b, fmt::format("features.{}", index), x, width, 3, 1, 1, /*bias=*/true);
    batchnorm(b, fmt::format("features.{}", index + 1), x, true);
    index += 3;
  }
  // classifier: dropout, fc 512, relu, dropout, fc 512, relu, fc; a dropout is a mask
  // multiply (1 FLOP, 12 bytes per element).
  const double hidden = 512;
  b.op(x.numel(), 12.0 * x.numel());
  linear(b, "classifier.1", x.c * x.h * x.w, 512, 1.0);
  b.op(hidden, 8.0 * hidden);
  b.op(hidden, 12.0 * hidden);
  linear(b, "classifier.4", 512, 512, 1.0);
  b.op(hidden, 8.0 * hidden);
  linear(b, "classifier.6", 512, classes, 1.0);
  return b.done();
}

namespace {

std::vector<ShapeLayer> resnet50() {
  ModelBuilder b;
  Image x{3, 224, 224};
  conv(b, "conv1", x, 64, 7, 2, 3);
  batchnorm(b, "bn1", x, true);
  const Image pooled{x.c, (x.h + 2 - 3) / 2 + 1, (x.w + 2 - 3) / 2 + 1};
  b.op(9.0 * pooled.numel(), 4.0 * (x.numel() + pooled.numel()));  // maxpool 3x3 stride 2
  x = pooled;
  const std::int64_t planes[] = {64, 128, 256, 512}, blocks[] = {3, 4, 6, 3};
  for (int stage = 0; stage < 4; ++stage) {
    for (std::int64_t block = 0; block < blocks[stage]; ++block) {
      const std::string p = fmt::format("layer{}.{}.", stage + 1, block);
      const std::int64_t stride = stage > 0 && block == 0 ? 2 : 1;
      const Image in = x;
      conv(b, p + "conv1", x, planes[stage], 1, 1, 0);
      batchnorm(b, p + "bn1", x, true);
      conv(b, p + "conv2", x, planes[stage], 3, stride, 1);
      batchnorm(b, p + "bn2", x, true);
      conv(b, p + "conv3", x, planes[stage] * 4, 1, 1, 0);
      batchnorm(b, p + "bn3", x, false);
      if (block == 0) {
        Image shortcut = in;
        conv(b, p + "downsample.0", shortcut, planes[stage] * 4, 1, stride, 0);
        batchnorm(b, p + "downsample.1", shortcut, false);
      }
      add(b, x.numel());
      b.op(x.numel(), 8.0 * x.numel());  // relu
    }
  }
  b.op(x.numel(), 4.0 * (x.numel() + static_cast<double>(x.c)));  // global average pool
  linear(b, "fc", 2048, 1000, 1.0);
  return b.done();
}

constexpr std::int64_t kHidden = 768, kFfn = 3072, kHeads = 12, kLayers = 12;
constexpr std::int64_t kBertVocab = 30522, kBertPositions = 512, kGptVocab = 50257, kGptPositions = 1024;

std::vector<ShapeLayer> bert_base(std::int64_t s) {
  ModelBuilder b;
  const double t = static_cast<double>(s), th = t * static_cast<double>(kHidden);
  b.layer("embeddings",
          {{"embeddings.word_embeddings.weight", {kBertVocab, kHidden}},
           {"embeddings.position_embeddings.weight", {kBertPositions, kHidden}},
           {"embeddings.token_type_embeddings.weight", {2, kHidden}}},
          2.0 * th, 16.0 * th, 0.0);  // three look-ups summed
  layernorm(b, "embeddings.LayerNorm", kHidden, t);
  for (std::int64_t i = 0; i < kLayers; ++i) {
    const std::string p = fmt::format("encoder.layer.{}.", i);
    linear(b, p + "attention.self.query", kHidden, kHidden, t);
    linear(b, p + "attention.self.key", kHidden, kHidden, t);
    linear(b, p + "attention.self.value", kHidden, kHidden, t);
    attention(b, s, kHidden, kHeads);
    linear(b, p + "attention.output.dense", kHidden, kHidden, t);
    add(b, th);
    layernorm(b, p + "attention.output.LayerNorm", kHidden, t);
    linear(b, p + "intermediate.dense", kHidden, kFfn, t);
    b.op(8.0 * t * kFfn, 8.0 * t * kFfn);  // GELU
    linear(b, p + "output.dense", kFfn, kHidden, t);
    add(b, th);
    layernorm(b, p + "output.LayerNorm", kHidden, t);
  }
  linear(b, "pooler.dense", kHidden, kHidden, 1.0);  // on the [CLS] token
  b.op(4.0 * kHidden, 8.0 * kHidden);                 // tanh
  return b.done();
}

std::vector<ShapeLayer> gpt2_small(std::int64_t s) {
  ModelBuilder b;
  const double t = static_cast<double>(s), th = t * static_cast<double>(kHidden);
  b.layer("embeddings", {{"wte.weight", {kGptVocab, kHidden}}, {"wpe.weight", {kGptPositions, kHidden}}}, th,
          12.0 * th, 0.0);
  for (std::int64_t i = 0; i < kLayers; ++i) {
    const std::string p = fmt::format("h.{}.", i);
    layernorm(b, p + "ln_1", kHidden, t);
    linear(b, p + "attn.c_attn", kHidden, 3 * kHidden, t, true);
    attention(b, s, kHidden, kHeads);
    linear(b, p + "attn.c_proj", kHidden, kHidden, t, true);
    add(b, th);
    layernorm(b, p + "ln_2", kHidden, t);
    linear(b, p + "mlp.c_fc", kHidden, kFfn, t, true);
    b.op(8.0 * t * kFfn, 8.0 * t * kFfn);  // GELU
    linear(b, p + "mlp.c_proj", kFfn, kHidden, t, true);
    add(b, th);
  }
  layernorm(b, "ln_f", kHidden, t);
  // LM head tied to wte: logits = h wte^T, then softmax cross-entropy.
  const double tv = t * static_cast<double>(kGptVocab);
  b.op(2.0 * th * kGptVocab, 4.0 * (th + tv));
  b.op(5.0 * tv, 8.0 * tv);
  return b.done();
}

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

const std::vector<std::string>& shape_model_types() {
  static const std::vector<std::string> types{"resnet20", "resnet50", "bert_base", "gpt2_small"};
  return types;
}

bool is_shape_model(const std::string& model) {
  const auto& t = shape_model_types();
  return std::find(t.begin(), t.end(), model) != t.end();
}

ShapeModel shape_model(const std::string& model, std::int64_t sequence_length) {
  ShapeModel m;
  m.name = model;
  if (model == "resnet20") {
    m.layers = resnet20_layers();
  } else if (model == "resnet50") {
    m.layers = resnet50();
  } else if (model == "bert_base" || model == "gpt2_small") {
    const std::int64_t max = model == "bert_base" ? kBertPositions : kGptPositions;
    if (sequence_length < 1 || sequence_length > max)
      throw std::invalid_argument(fmt::format("/workload/sequence_length: expected 1 to {} for {}, got {}", max, model,
                                              sequence_length));
    m.sequence_length = sequence_length;
    m.layers = model == "bert_base" ? bert_base(sequence_length) : gpt2_small(sequence_length);
  } else {
    throw std::invalid_argument(fmt::format("unknown shape model '{}' (expected one of: {})", model,
                                            fmt::join(shape_model_types(), ", ")));
  }
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

void parse_shape_workload(config::ObjectReader& w, WorkloadSpec& spec, const WorkloadContext&) {
  spec.batch_size = w.integer("batch_size", spec.batch_size, 1, config::kIntMax);
  ShapeModelSpec s;
  if (shape_model(spec.type, 1).sequence_length > 0)  // a transformer
    s.sequence_length = w.integer("sequence_length", s.sequence_length, 1, config::kIntMax);
  spec.settings = s;
}

void shape_workload_json(const WorkloadSpec& spec, nlohmann::json& out) {
  out["batch_size"] = spec.batch_size;
  if (shape_model(spec.type, 1).sequence_length > 0)
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

WorkloadEntry shape_workload_entry(std::string name, std::string description, bool transformer) {
  std::vector<std::string> fields{"batch_size"};
  if (transformer) fields.push_back("sequence_length");
  return {.name = std::move(name),
          .description = std::move(description),
          .fields = std::move(fields),
          .data_path = "/workload",
          .parse = parse_shape_workload,
          .to_json = shape_workload_json,
          .load_data = load_shape_pool,
          .make = make_shape_model_workload,
          .footprint = shape_workload_footprint};
}

}  // namespace

const WorkloadEntry& resnet20_entry() {
  static const WorkloadEntry entry = shape_workload_entry(
      "resnet20", "ResNet-20 (CIFAR-10, 0.27 M parameters), shapes and FLOPs only: for communication sweeps", false);
  return entry;
}

const WorkloadEntry& resnet50_entry() {
  static const WorkloadEntry entry = shape_workload_entry(
      "resnet50", "ResNet-50 (ImageNet, 25.6 M parameters), shapes and FLOPs only: for communication sweeps", false);
  return entry;
}

const WorkloadEntry& bert_base_entry() {
  static const WorkloadEntry entry = shape_workload_entry(
      "bert_base", "BERT-base (110 M parameters), shapes and FLOPs only: for communication sweeps", true);
  return entry;
}

const WorkloadEntry& gpt2_small_entry() {
  static const WorkloadEntry entry = shape_workload_entry(
      "gpt2_small", "GPT-2 small (124 M parameters), shapes and FLOPs only: for communication sweeps", true);
  return entry;
}

}  // namespace dtsim::workloads
