#include "workloads/image_models.hpp"
#include "workloads/augment.hpp"
#include "workloads/shard_batches.hpp"
#include "workloads/workload_registry.hpp"

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace dtsim::workloads {

namespace {

std::int64_t elements(const std::vector<std::int64_t>& shape) {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

sim::ComputeCost operator+(sim::ComputeCost a, const sim::ComputeCost& b) {
  a.flops += b.flops;
  a.bytes += b.bytes;
  return a;
}

// Builds the layer list, tracking per-sample shapes and parameter indices.
class NetBuilder {
 public:
  explicit NetBuilder(std::vector<std::int64_t> input) : shape_(std::move(input)) {}
  NetBuilder& conv(const std::string& name, std::int64_t out, std::int64_t k, std::int64_t pad) {
    LayerNet::Layer l{LayerNet::Op::Conv, name, shape_[0], out, k, pad, next_param_, shape_, {}};
    l.out_shape = {out, shape_[1] + 2 * pad - k + 1, shape_[2] + 2 * pad - k + 1};
    return push(std::move(l), 2);
  }
  NetBuilder& linear(const std::string& name, std::int64_t out) {
    LayerNet::Layer l{LayerNet::Op::Linear, name, shape_[0], out, 0, 0, next_param_, shape_, {out}};
    return push(std::move(l), 2);
  }
  NetBuilder& relu() { return push({LayerNet::Op::Relu, "", 0, 0, 0, 0, 0, shape_, shape_}, 0); }
  NetBuilder& maxpool2() {
    return push({LayerNet::Op::MaxPool, "", 0, 0, 2, 0, 0, shape_, {shape_[0], shape_[1] / 2, shape_[2] / 2}}, 0);
  }
  NetBuilder& flatten() { return push({LayerNet::Op::Flatten, "", 0, 0, 0, 0, 0, shape_, {elements(shape_)}}, 0); }
  std::vector<LayerNet::Layer> done() { return std::move(layers_); }

 private:
  NetBuilder& push(LayerNet::Layer l, std::size_t params) {
    shape_ = l.out_shape;
    next_param_ += params;
    layers_.push_back(std::move(l));
    return *this;
  }
  std::vector<std::int64_t> shape_;
  std::size_t next_param_ = 0;
  std::vector<LayerNet::Layer> layers_;
};


}  // namespace

LayerNet LayerNet::make(const std::string& model, const std::vector<std::int64_t>& sample_shape, std::int64_t classes) {
  if (sample_shape.size() != 3 || classes < 2)
    throw std::invalid_argument(fmt::format("{}: expected C x H x W samples in at least 2 classes, got {} in {}", model,
                                            fmt::join(sample_shape, " x "), classes));
  if (model == "mlp") {
    return LayerNet(NetBuilder(sample_shape).flatten().linear("fc1", 256).relu().linear("fc2", 128).relu()
                        .linear("fc3", classes).done());
  }
  if (model == "cnn") {
    if (sample_shape[1] < 4 || sample_shape[2] < 4)
      throw std::invalid_argument(fmt::format("cnn: expected images of at least 4 x 4 (two 2 x 2 poolings), got {}",
                                              fmt::join(sample_shape, " x ")));
    return LayerNet(NetBuilder(sample_shape).conv("conv1", 16, 3, 1).relu().maxpool2().conv("conv2", 32, 3, 1).relu()
                        .maxpool2().flatten().linear("fc1", 128).relu().linear("fc2", classes).done());
  }
  throw std::invalid_argument(fmt::format("unknown Fashion-MNIST model '{}' (expected mlp or cnn)", model));
}

LayerNet::LayerNet(std::vector<Layer> layers) : layers_(std::move(layers)) {
  for (std::size_t i = 0; i < layers_.size(); ++i)
    if (layers_[i].op == Op::Conv || layers_[i].op == Op::Linear) param_layers_.push_back(i);
  inputs_.resize(layers_.size());
  saved_.resize(layers_.size());
}

std::vector<std::string> LayerNet::parameter_names() const {
  std::vector<std::string> names;
  for (auto i : param_layers_) {
    names.push_back(layers_[i].name + ".weight");
    names.push_back(layers_[i].name + ".bias");
  }
  return names;
}

std::vector<at::Tensor> LayerNet::initial_parameters(std::uint64_t seed) const {
  auto gen = at::detail::createCPUGenerator(seed * 0x9e3779b97f4a7c15ULL + 0x1234567ULL);
  std::vector<at::Tensor> params;
  for (auto i : param_layers_) {
    const auto& l = layers_[i];
    std::vector<std::int64_t> shape{l.out, l.in};
    std::int64_t fan_in = l.in;
    if (l.op == Op::Conv) {
      shape.insert(shape.end(), {l.kernel, l.kernel});
      fan_in *= l.kernel * l.kernel;
    }
    const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
    params.push_back(at::empty(shape, at::kFloat).uniform_(-bound, bound, gen));
    params.push_back(at::empty({l.out}, at::kFloat).uniform_(-bound, bound, gen));
  }
  return params;
}

at::Tensor LayerNet::apply(std::size_t i, const std::vector<at::Tensor>& params, const at::Tensor& x,
                           at::Tensor* saved) const {
  const auto& l = layers_[i];
  switch (l.op) {
    case Op::Conv:
      return at::conv2d(x, params[l.weight], params[l.weight + 1], {1, 1}, {l.pad, l.pad});
    case Op::Linear:
      return at::addmm(params[l.weight + 1], x, params[l.weight].t());
    case Op::Relu: {
      auto y = at::relu(x);
      if (saved) *saved = y;
      return y;
    }
    case Op::MaxPool: {
      auto [y, idx] = at::max_pool2d_with_indices(x, {2, 2}, {2, 2}, {0, 0}, {1, 1}, false);
      if (saved) *saved = idx;
      return y;
    }
    case Op::Flatten:
      return x.reshape({x.size(0), -1});
  }
  throw std::logic_error("LayerNet: unknown layer op");
}

at::Tensor LayerNet::logits(const std::vector<at::Tensor>& params, const at::Tensor& x) const {
  at::Tensor h = x.to(params.at(0).scalar_type());
  for (std::size_t i = 0; i < layers_.size(); ++i) h = apply(i, params, h, nullptr);
  return h;
}

double LayerNet::forward(const std::vector<at::Tensor>& params, const at::Tensor& x, const at::Tensor& y) {
  at::Tensor h = x.to(params.at(0).scalar_type());
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    inputs_[i] = h;
    h = apply(i, params, h, &saved_[i]);
  }
  log_probs_ = at::log_softmax(h, 1);
  labels_ = y;
  return at::nll_loss(log_probs_, y).item<double>();
}

std::vector<std::size_t> LayerNet::stage_params(std::size_t k) const {
  if (k >= num_stages()) throw std::out_of_range(fmt::format("backward_stage {}: there are {} stages", k, num_stages()));
  const auto& l = layers_[param_layers_[num_stages() - 1 - k]];
  return {l.weight, l.weight + 1};
}

void LayerNet::back_through(std::size_t from_exclusive, std::size_t to_exclusive) {
  for (std::size_t i = from_exclusive; i-- > to_exclusive + 1;) {
    const auto& l = layers_[i];
    switch (l.op) {
      case Op::Relu:
        grad_ = at::threshold_backward(grad_, saved_[i], 0);
        break;
      case Op::MaxPool:
        grad_ = at::max_pool2d_with_indices_backward(grad_, inputs_[i], {2, 2}, {2, 2}, {0, 0}, {1, 1}, false, saved_[i]);
        break;
      case Op::Flatten:
        grad_ = grad_.reshape(inputs_[i].sizes());
        break;
      case Op::Conv:
      case Op::Linear:
        throw std::logic_error("LayerNet: back_through crossed a parametrised layer");
    }
  }
}

void LayerNet::backward_stage(std::size_t k, const std::vector<at::Tensor>& params, std::vector<at::Tensor>& grads) {
  const std::size_t n = num_stages();
  if (k >= n) throw std::out_of_range(fmt::format("backward_stage {}: there are {} stages", k, n));
  if (!log_probs_.defined()) throw std::logic_error("LayerNet: backward_stage before forward");
  const std::size_t j = param_layers_[n - 1 - k];
  if (k == 0) {
    // d mean NLL(log_softmax(z)) / dz = (softmax(z) - onehot(y)) / B
    grad_ = log_probs_.exp();
    grad_.scatter_add_(1, labels_.unsqueeze(1), at::full({labels_.size(0), 1}, -1.0, grad_.options()));
    grad_.div_(static_cast<double>(labels_.size(0)));
    back_through(layers_.size(), j);
  }
  const auto& l = layers_[j];
  const bool need_input = k + 1 < n;
  const auto& w = params[l.weight];
  const auto& x = inputs_[j];
  if (l.op == Op::Linear) {
    grads[l.weight].copy_(grad_.t().mm(x));
    grads[l.weight + 1].copy_(grad_.sum(0));
    if (need_input) grad_ = grad_.mm(w);
  } else {
    const std::int64_t bias_size[] = {l.out};
    auto [gx, gw, gb] = at::convolution_backward(grad_, x, w, at::IntArrayRef(bias_size), {1, 1}, {l.pad, l.pad},
                                                 {1, 1}, false, {0, 0}, 1, {need_input, true, true});
    grads[l.weight].copy_(gw);
    grads[l.weight + 1].copy_(gb);
    if (need_input) grad_ = gx;
  }
  if (need_input) back_through(j, param_layers_[n - 2 - k]);
  else grad_ = at::Tensor();
}

void LayerNet::backward(const std::vector<at::Tensor>& params, std::vector<at::Tensor>& grads) {
  for (std::size_t k = 0; k < num_stages(); ++k) backward_stage(k, params, grads);
}

sim::ComputeCost LayerNet::forward_cost(std::int64_t batch) const {
  const double b = static_cast<double>(batch);
  sim::ComputeCost c;
  for (const auto& l : layers_) {
    const double in = static_cast<double>(elements(l.in_shape)), out = static_cast<double>(elements(l.out_shape));
    switch (l.op) {
      case Op::Conv:
      case Op::Linear: {
        const double w = static_cast<double>(l.in * l.out * (l.op == Op::Conv ? l.kernel * l.kernel : 1));
        const double macs_per_out = w / static_cast<double>(l.out);  // per output element
        c.flops += b * out * (2.0 * macs_per_out + 1.0);
        c.bytes += 4.0 * (b * (in + out) + w + static_cast<double>(l.out));
        break;
      }
      case Op::Relu:
        c = c + sim::ComputeCost{b * in, 8.0 * b * in};
        break;
      case Op::MaxPool:
        c = c + sim::ComputeCost{b * in, b * (4.0 * in + 12.0 * out)};
        break;
      case Op::Flatten:
        break;
    }
  }
  const double classes = static_cast<double>(elements(layers_.back().out_shape));
  return c + sim::ComputeCost{4.0 * b * classes, b * (8.0 * classes + 8.0)};  // log_softmax + NLL
}

sim::ComputeCost LayerNet::elementwise_back_cost(std::size_t from_exclusive, std::size_t to_exclusive,
                                                 std::int64_t batch) const {
  const double b = static_cast<double>(batch);
  sim::ComputeCost c;
  for (std::size_t i = from_exclusive; i-- > to_exclusive + 1;) {
    const auto& l = layers_[i];
    const double in = static_cast<double>(elements(l.in_shape)), out = static_cast<double>(elements(l.out_shape));
    if (l.op == Op::Relu) c = c + sim::ComputeCost{b * in, 12.0 * b * in};
    if (l.op == Op::MaxPool) c = c + sim::ComputeCost{b * out, b * (12.0 * out + 4.0 * in)};
  }
  return c;
}

sim::ComputeCost LayerNet::stage_cost(std::size_t k, std::int64_t batch) const {
  const std::size_t n = num_stages();
  if (k >= n) throw std::out_of_range(fmt::format("backward stage {}: there are {} stages", k, n));
  const double b = static_cast<double>(batch);
  const std::size_t j = param_layers_[n - 1 - k];
  sim::ComputeCost c;
  if (k == 0) {
    const double classes = static_cast<double>(elements(layers_.back().out_shape));
    c = sim::ComputeCost{3.0 * b * classes, 12.0 * b * classes} + elementwise_back_cost(layers_.size(), j, batch);
  }
  const auto& l = layers_[j];
  const bool need_input = k + 1 < n;
  const double in = static_cast<double>(elements(l.in_shape)), out = static_cast<double>(elements(l.out_shape));
  const double w = static_cast<double>(l.in * l.out * (l.op == Op::Conv ? l.kernel * l.kernel : 1));
  const double macs = b * out * w / static_cast<double>(l.out);
  c.flops += 2.0 * macs * (need_input ? 2.0 : 1.0) + b * out;                    // dW (+ dX), db
  c.bytes += 4.0 * (b * (out + in) + w + static_cast<double>(l.out));           // read dY, X; write dW, db
  if (need_input) {
    c.bytes += 4.0 * (w + b * in);  // read W, write dX
    c = c + elementwise_back_cost(j, param_layers_[n - 2 - k], batch);
  }
  return c;
}

sim::ComputeCost LayerNet::backward_cost(std::int64_t batch) const {
  sim::ComputeCost c;
  for (std::size_t k = 0; k < num_stages(); ++k) c = c + stage_cost(k, batch);
  return c;
}

namespace {

std::vector<std::int64_t> sample_shape_of(const LabelledData& data) {
  return {data.train_x.sizes().begin() + 1, data.train_x.sizes().end()};
}

class ImageWorkload final : public Workload {
 public:
  ImageWorkload(const std::string& model, std::shared_ptr<const LabelledData> data, std::int64_t batch_size,
                const std::string& partition, std::uint64_t seed, int rank, int ranks)
      : net_(LayerNet::make(model, sample_shape_of(*data), data->classes)),
        data_(std::move(data)),
        seed_(seed),
        gen_(at::detail::createCPUGenerator(seed * 1000003ULL + 7919ULL * static_cast<std::uint64_t>(rank + 1))) {
    if (batch_size < 1)
      throw std::invalid_argument(fmt::format("/workload/batch_size: expected >= 1, got {}", batch_size));
    // Sample indices stay on the CPU (drawn from CPU generators); a batch's indices go to
    // the data's device when it is gathered.
    batches_ = ShardBatches(partition_indices(data_->train_y.to(at::kCPU), partition, seed, rank, ranks), batch_size);
  }

  // Drawn on the CPU, then copied: the same initial model on every device.
  std::vector<at::Tensor> initial_parameters() const override {
    auto params = net_.initial_parameters(seed_);
    for (auto& p : params) p = p.to(data_->train_x.device());
    return params;
  }
  std::vector<std::string> parameter_names() const override { return net_.parameter_names(); }

  double forward(const std::vector<at::Tensor>& params) override {
    const auto idx = batches_.next(gen_, data_->train_x.device());
    auto x = data_->train_x.index_select(0, idx);
    if (data_->augment) x = augment_batch(x, gen_);
    return net_.forward(params, x, data_->train_y.index_select(0, idx));
  }
  void backward(const std::vector<at::Tensor>& params, std::vector<at::Tensor>& grads) override {
    net_.backward(params, grads);
  }
  sim::ComputeCost forward_cost() const override { return net_.forward_cost(batches_.batch()); }
  sim::ComputeCost backward_cost() const override { return net_.backward_cost(batches_.batch()); }
  DataShard data_shard() const override { return {batches_.samples(), batches_.batch()}; }

  std::vector<BackwardStage> backward_stages() const override {
    std::vector<BackwardStage> stages;
    for (std::size_t k = 0; k < net_.num_stages(); ++k) stages.push_back({net_.stage_params(k), net_.stage_cost(k, batches_.batch())});
    return stages;
  }
  void backward_stage(std::size_t k, const std::vector<at::Tensor>& params, std::vector<at::Tensor>& grads) override {
    net_.backward_stage(k, params, grads);
  }

  Evaluation evaluate(const std::vector<at::Tensor>& params) const override {
    return evaluate_on(params, data_->train_x, data_->train_y);
  }
  std::optional<Evaluation> evaluate_test(const std::vector<at::Tensor>& params) const override {
    return evaluate_on(params, data_->test_x, data_->test_y);
  }

 private:
  Evaluation evaluate_on(const std::vector<at::Tensor>& params, const at::Tensor& x, const at::Tensor& y) const {
    constexpr std::int64_t kChunk = 2000;
    const std::int64_t n = x.size(0);
    double loss = 0.0;
    std::int64_t correct = 0;
    for (std::int64_t begin = 0; begin < n; begin += kChunk) {
      const std::int64_t len = std::min(kChunk, n - begin);
      const auto yb = y.narrow(0, begin, len);
      const auto z = net_.logits(params, x.narrow(0, begin, len));
      loss += at::nll_loss(at::log_softmax(z, 1), yb, {}, at::Reduction::Sum).item<double>();
      correct += z.argmax(1).eq(yb).sum().item<std::int64_t>();
    }
    Evaluation e;
    if (n > 0) {
      e.loss = loss / static_cast<double>(n);
      e.accuracy = static_cast<double>(correct) / static_cast<double>(n);
    }
    return e;
  }

  LayerNet net_;
  std::shared_ptr<const LabelledData> data_;
  std::uint64_t seed_;
  at::Generator gen_;
  ShardBatches batches_;
};

}  // namespace

std::unique_ptr<Workload> make_image_workload(const std::string& model, std::shared_ptr<const LabelledData> data,
                                              std::int64_t batch_size, const std::string& partition,
                                              std::uint64_t seed, int rank, int ranks) {
  return std::make_unique<ImageWorkload>(model, std::move(data), batch_size, partition, seed, rank, ranks);
}

// --- the registry entries of "mlp" and "cnn" (workload_registry.hpp) ---------------------

namespace {

struct ImageData : WorkloadData {
  std::shared_ptr<const LabelledData> dataset;
};

void parse_image_workload(config::ObjectReader& w, WorkloadSpec& spec, const WorkloadContext&) {
  spec.batch_size = w.integer("batch_size", spec.batch_size, 1, config::kIntMax);
  spec.partition = w.choice("partition", "iid", {"iid", "by_label"});
}

void image_workload_json(const WorkloadSpec& spec, nlohmann::json& out) {
  out["batch_size"] = spec.batch_size;
  out["partition"] = spec.partition;
}

std::shared_ptr<const WorkloadData> load_images(const WorkloadSpec& spec, std::uint64_t seed) {
  auto data = std::make_shared<ImageData>();
  data->dataset = on_device(load_data_source(workload_data(spec), seed), spec.device,
                            [](const LabelledData& from, LabelledData& to, at::Device device) {
                              to.train_x = from.train_x.to(device);
                              to.train_y = from.train_y.to(device);
                              to.test_x = from.test_x.defined() ? from.test_x.to(device) : at::Tensor();
                              to.test_y = from.test_y.defined() ? from.test_y.to(device) : at::Tensor();
                              to.classes = from.classes;
                              to.augment = from.augment;
                            });
  return data;
}

std::unique_ptr<Workload> make_images_workload(const WorkloadSpec& spec, std::shared_ptr<const WorkloadData> data,
                                               std::uint64_t seed, int rank, int ranks) {
  return make_image_workload(spec.type, data_for<ImageData>(data, spec.type).dataset, spec.batch_size, spec.partition,
                             seed, rank, ranks);
}

WorkloadFootprint image_workload_footprint(const WorkloadSpec& spec, int ranks) {
  constexpr double kFloat = 4;
  const auto d = [](auto x) { return static_cast<double>(x); };
  WorkloadFootprint w;
  const auto data = workload_data(spec);
  const auto shape = data_source_entry(data.source).shape(data);
  const auto net = LayerNet::make(spec.type, shape.sample, shape.classes);
  const double sample = d(shape.sample_elements());
  double activations = sample, widest = sample;
  for (const auto& l : net.layers()) {
    double out = 1;
    for (auto e : l.out_shape) out *= d(e);
    activations += out;
    widest = std::max(widest, out);
    if (l.op == LayerNet::Op::Conv || l.op == LayerNet::Op::Linear) {
      const double weight = d(l.in) * d(l.out) * (l.op == LayerNet::Op::Conv ? d(l.kernel) * d(l.kernel) : 1);
      w.sizes_backward.insert(w.sizes_backward.begin(), {static_cast<std::int64_t>(l.out), static_cast<std::int64_t>(weight)});
      w.elements += weight + d(l.out);
    }
  }
  const double train = d(shape.train), test = d(shape.test);
  // fp32 images and int64 labels, the file's bytes while they are converted, and the
  // evaluation's chunk of 2,000 images (activations and their ReLU outputs).
  w.data_bytes = (train + test) * (sample * kFloat + 8) + shape.file_bytes + 2000 * activations * kFloat * 2;
  const double shard = std::ceil(train / std::max(1, ranks)), batch = std::min(d(spec.batch_size), shard);
  w.per_rank_bytes = 2 * shard * 8 + batch * (activations * 2 + widest) * kFloat;
  return w;
}

WorkloadEntry image_workload_entry(std::string name, std::string description) {
  const auto sources = sources_yielding(SampleKind::labelled_samples, "fashion_mnist");
  return {.name = std::move(name),
          .description = std::move(description),
          .fields = with_data_fields({"batch_size", "partition"}, sources),
          .data_sources = sources,
          .parse = parse_image_workload,
          .to_json = image_workload_json,
          .load_data = load_images,
          .make = make_images_workload,
          .footprint = image_workload_footprint};
}

}  // namespace

const WorkloadEntry& mlp_entry() {
  static const WorkloadEntry entry =
      image_workload_entry("mlp", "an MLP, input-256-128-classes with ReLU, on an image data source (real data, real "
                                  "accuracy)");
  return entry;
}

const WorkloadEntry& cnn_entry() {
  static const WorkloadEntry entry =
      image_workload_entry("cnn", "a two-convolution CNN on an image data source (real data, real accuracy)");
  return entry;
}

}  // namespace dtsim::workloads
