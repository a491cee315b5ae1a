#include "workloads/module_workload.hpp"

#include <torch/nn/module.h>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/autograd.h>

#include <algorithm>
#include <map>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "workloads/augment.hpp"
#include "workloads/fashion_mnist.hpp"
#include "workloads/op_costs.hpp"

namespace dtsim::workloads {

namespace {

at::Tensor cross_entropy(const at::Tensor& logits, const at::Tensor& labels) {
  return at::nll_loss(at::log_softmax(logits, 1), labels);
}

class NnModule final : public TrainableModule {
 public:
  explicit NnModule(torch::nn::AnyModule module) : module_(std::move(module)) {}
  std::vector<std::pair<std::string, at::Tensor>> named_parameters() const override {
    std::vector<std::pair<std::string, at::Tensor>> out;
    for (const auto& p : module_.ptr()->named_parameters(/*recurse=*/true)) out.emplace_back(p.key(), p.value());
    return out;
  }
  std::vector<at::Tensor> buffers() const override { return module_.ptr()->buffers(); }
  at::Tensor forward(const at::Tensor& x) override { return module_.forward<at::Tensor>(x); }
  void train(bool on) override { module_.ptr()->train(on); }
  void to(at::Device device) override { module_.ptr()->to(device); }
  const torch::nn::Module* nn_module() const override { return module_.ptr().get(); }

 private:
  torch::nn::AnyModule module_;
};

}  // namespace

std::pair<at::Tensor, at::Tensor> TrainableModule::forward_loss(const at::Tensor&, const at::Tensor&) {
  throw std::logic_error("TrainableModule: this module has no loss of its own");
}

std::unique_ptr<TrainableModule> trainable(torch::nn::AnyModule module) {
  return std::make_unique<NnModule>(std::move(module));
}

namespace {

// Evaluation's chunk: as many samples as keep the widest layer's activations within a few
// MiB, near the caches, between 16 and 2,000. LibTorch's CPU convolutions slow down when a
// batch's activations leave the caches (ResNet-20 on 2,048 images, python3-torch 1.13: 12.1 s
// in chunks of 2,000 against 0.76 s in chunks of 32 on an AMD EPYC).
std::int64_t evaluation_chunk(const std::vector<ShapeLayer>& layers) {
  constexpr double kChunkBytes = 4.0 * (1 << 20);
  constexpr std::int64_t kMost = 2000, kLeast = 16;
  double widest = 0.0;
  for (const auto& layer : layers) widest = std::max(widest, layer.bytes);
  if (widest <= 0.0) return kMost;
  return std::clamp(static_cast<std::int64_t>(kChunkBytes / widest), kLeast, kMost);
}

}  // namespace

ModuleWorkload::ModuleWorkload(ModuleModel model, std::shared_ptr<const LabelledData> data, std::int64_t batch_size,
                               const std::string& partition, std::uint64_t seed, int rank, int ranks)
    : module_(model.other ? std::move(model.other) : std::shared_ptr<TrainableModule>(trainable(std::move(model.module)))),
      loss_kind_(model.loss),
      layers_(std::move(model.layers)),
      cost_source_(layers_.empty() ? "estimated from ops" : "table"),
      data_(std::move(data)),
      gen_(at::detail::createCPUGenerator(seed * 1000003ULL + 7919ULL * static_cast<std::uint64_t>(rank + 1))) {
  if (batch_size < 1) throw std::invalid_argument(fmt::format("/workload/batch_size: expected >= 1, got {}", batch_size));
  for (const auto& [name, value] : module_->named_parameters()) {
    names_.push_back(name);
    initial_.push_back(value.detach().clone());
  }
  if (names_.empty()) throw std::invalid_argument("ModuleWorkload: the module has no parameters");
  module_->to(data_->train_x.device());
  for (const auto& p : module_->named_parameters()) module_params_.push_back(p.second);
  // Sample indices stay on the CPU (drawn from CPU generators); a batch's indices go to
  // the data's device when it is gathered.
  batches_ = ShardBatches(partition_indices(data_->train_y.to(at::kCPU), partition, seed, rank, ranks), batch_size);
  probe({data_->train_x.sizes().begin() + 1, data_->train_x.sizes().end()}, layers_.empty());
  build_stages();
  eval_chunk_ = evaluation_chunk(layers_);
}

const torch::nn::Module& ModuleWorkload::module() const {
  const auto* m = module_->nn_module();
  if (!m) throw std::logic_error("ModuleWorkload::module(): not a torch::nn module (see trainable_module())");
  return *m;
}

std::pair<at::Tensor, at::Tensor> ModuleWorkload::loss_of(const at::Tensor& x, const at::Tensor& y) const {
  if (loss_kind_ == ModuleModel::Loss::module) return module_->forward_loss(x, y);
  auto logits = module_->forward(x);
  return {cross_entropy(logits, y), logits};
}

void ModuleWorkload::probe(const std::vector<std::int64_t>& sample_shape, bool estimate) {
  torch::AutoGradMode grad_mode(true);
  std::vector<at::Tensor> buffers;
  for (const auto& b : module_->buffers()) buffers.push_back(b.clone());
  std::vector<unsigned> hooks;
  for (std::size_t i = 0; i < module_params_.size(); ++i) {
    if (!module_params_[i].requires_grad())
      throw std::invalid_argument(fmt::format("ModuleWorkload: parameter {} does not require a gradient", names_[i]));
    hooks.push_back(module_params_[i].register_hook([this, i](const at::Tensor&) { ready_order_.push_back(i); }));
  }

  constexpr std::int64_t kProbe = 2;
  std::vector<std::int64_t> probe_shape{kProbe};
  probe_shape.insert(probe_shape.end(), sample_shape.begin(), sample_shape.end());
  auto gen = at::detail::createCPUGenerator(0x5eedULL);
  const auto device = data_->train_x.device();
  const auto x = at::randn(probe_shape, gen, at::kFloat).to(device);
  const auto y = at::zeros({kProbe}, at::TensorOptions(at::kLong).device(device));
  module_->train(true);
  at::Tensor loss;
  if (estimate) {
    OpRecorder recorder;
    loss = loss_of(x, y).first;
    layers_ = estimate_cost_table(recorder.take(), module_->named_parameters(), kProbe);
  } else {
    loss = loss_of(x, y).first;
  }
  loss.backward();

  for (std::size_t i = 0; i < module_params_.size(); ++i) {
    module_params_[i].remove_hook(hooks[i]);
    module_params_[i].mutable_grad().reset();
  }
  torch::NoGradGuard no_grad;
  const auto now = module_->buffers();
  for (std::size_t i = 0; i < buffers.size(); ++i) now[i].copy_(buffers[i]);

  auto sorted = ready_order_;
  std::sort(sorted.begin(), sorted.end());
  if (sorted.size() != module_params_.size() || std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
    throw std::invalid_argument(fmt::format("ModuleWorkload: autograd made {} gradients ready for {} parameters (a "
                                            "parameter the loss does not depend on, or one used twice?)",
                                            ready_order_.size(), module_params_.size()));
}

void ModuleWorkload::build_stages() {
  const auto& layers = layers_;
  // Each parameter's layer in the cost table, its shape checked.
  std::map<std::string, std::size_t> layer_of_name;
  for (std::size_t l = 0; l < layers.size(); ++l)
    for (const auto& t : layers[l].tensors) layer_of_name[t.name] = l;
  std::vector<std::size_t> layer_of(names_.size());
  for (std::size_t i = 0; i < names_.size(); ++i) {
    const auto it = layer_of_name.find(names_[i]);
    if (it == layer_of_name.end())
      throw std::logic_error(fmt::format("ModuleWorkload: parameter {} is in no layer of the cost table", names_[i]));
    layer_of[i] = it->second;
    for (const auto& t : layers[it->second].tensors)
      if (t.name == names_[i] && at::IntArrayRef(t.shape) != initial_[i].sizes())
        throw std::logic_error(fmt::format("ModuleWorkload: parameter {} is [{}], the cost table says [{}]", names_[i],
                                           fmt::join(initial_[i].sizes(), ", "), fmt::join(t.shape, ", ")));
  }
  // Runs of the ready order within one layer; a layer's cost goes to its first run (its
  // backward has run by the time its first gradient is ready).
  const double b = static_cast<double>(batches_.batch());
  std::vector<bool> charged(layers.size(), false);
  for (std::size_t n = 0; n < ready_order_.size(); ++n) {
    const std::size_t i = ready_order_[n], l = layer_of[i];
    if (n == 0 || layer_of[ready_order_[n - 1]] != l) stages_.push_back({});
    stages_.back().params.push_back(i);
    if (!charged[l]) {
      charged[l] = true;
      stages_.back().cost.flops += 2.0 * b * layers[l].flops;
      stages_.back().cost.bytes += 2.0 * (b * layers[l].bytes + layers[l].fixed_bytes);
    }
  }
  for (const auto& layer : layers) {
    forward_cost_.flops += b * layer.flops;
    forward_cost_.bytes += b * layer.bytes + layer.fixed_bytes;
  }
}

std::vector<at::Tensor> ModuleWorkload::initial_parameters() const {
  std::vector<at::Tensor> params;
  for (const auto& p : initial_) params.push_back(p.to(data_->train_x.device(), /*non_blocking=*/false, /*copy=*/true));
  return params;
}

at::ScalarType ModuleWorkload::load_parameters(const std::vector<at::Tensor>& params) const {
  if (params.size() != module_params_.size())
    throw std::invalid_argument(fmt::format("ModuleWorkload: expected {} parameter tensors, got {}", module_params_.size(),
                                            params.size()));
  const auto dtype = params.front().scalar_type();
  torch::NoGradGuard no_grad;
  if (dtype != module_params_.front().scalar_type()) {
    // In place (set_data), so module_params_ stay the module's; floating buffers only
    // (Module::to would make BatchNorm's batch count a double too).
    for (auto& p : module_params_) p.set_data(p.to(dtype));
    for (auto& b : module_->buffers())
      if (at::isFloatingType(b.scalar_type())) b.set_data(b.to(dtype));
  }
  for (std::size_t i = 0; i < params.size(); ++i) module_params_[i].copy_(params[i]);
  return dtype;
}

double ModuleWorkload::forward(const std::vector<at::Tensor>& params) {
  const auto idx = batches_.next(gen_, data_->train_x.device());
  auto x = data_->train_x.index_select(0, idx);
  if (data_->augment) x = augment_batch(x, gen_);
  // A forward replaces the graph of one whose backward did not run.
  loss_ = at::Tensor();
  const auto dtype = load_parameters(params);
  torch::AutoGradMode grad_mode(true);
  module_->train(true);
  loss_ = loss_of(x.to(dtype), data_->train_y.index_select(0, idx)).first;
  return loss_.item<double>();
}

void ModuleWorkload::backward_stage(std::size_t k, const std::vector<at::Tensor>&, std::vector<at::Tensor>& grads) {
  if (k >= stages_.size())
    throw std::out_of_range(fmt::format("backward_stage {}: there are {} stages", k, stages_.size()));
  if (k == 0) {
    if (!loss_.defined()) throw std::logic_error("ModuleWorkload: backward_stage 0 without a forward");
    for (auto& p : module_params_) p.mutable_grad().reset();
    torch::AutoGradMode grad_mode(true);
    loss_.backward();
    loss_ = at::Tensor();  // its graph is freed
  }
  for (auto i : stages_[k].params) {
    const auto& g = module_params_[i].grad();
    if (!g.defined()) throw std::logic_error(fmt::format("ModuleWorkload: backward_stage {} before stage 0", k));
    grads.at(i).copy_(g);
  }
}

void ModuleWorkload::backward(const std::vector<at::Tensor>& params, std::vector<at::Tensor>& grads) {
  for (std::size_t k = 0; k < stages_.size(); ++k) backward_stage(k, params, grads);
}

sim::ComputeCost ModuleWorkload::backward_cost() const {
  sim::ComputeCost c;
  for (const auto& s : stages_) {
    c.flops += s.cost.flops;
    c.bytes += s.cost.bytes;
  }
  return c;
}

Evaluation ModuleWorkload::evaluate(const std::vector<at::Tensor>& params) const {
  return evaluate_on(params, data_->train_x, data_->train_y);
}

std::optional<Evaluation> ModuleWorkload::evaluate_test(const std::vector<at::Tensor>& params) const {
  if (!data_->has_test()) return std::nullopt;
  return evaluate_on(params, data_->test_x, data_->test_y);
}

Evaluation ModuleWorkload::evaluate_on(const std::vector<at::Tensor>& params, const at::Tensor& x,
                                       const at::Tensor& y) const {
  // Loading other parameters would invalidate the tensors a pending backward saved.
  if (loss_.defined()) throw std::logic_error("ModuleWorkload: evaluation between a forward and its backward");
  const auto dtype = load_parameters(params);
  torch::NoGradGuard no_grad;
  module_->train(false);
  const std::int64_t kChunk = eval_chunk_;
  const std::int64_t n = x.size(0);
  double loss = 0.0;
  std::int64_t correct = 0;
  for (std::int64_t begin = 0; begin < n; begin += kChunk) {
    const std::int64_t len = std::min(kChunk, n - begin);
    const auto yb = y.narrow(0, begin, len);
    const auto xb = x.narrow(0, begin, len).to(dtype);
    at::Tensor z;
    if (loss_kind_ == ModuleModel::Loss::cross_entropy) {
      z = module_->forward(xb);
      // Per sample, summed in double: the figure does not depend on the chunk.
      loss += at::nll_loss(at::log_softmax(z, 1), yb, {}, at::Reduction::None).to(at::kDouble).sum().item<double>();
    } else {
      const auto [mean_loss, logits] = module_->forward_loss(xb, yb);
      loss += mean_loss.item<double>() * static_cast<double>(len);
      z = logits;
    }
    // A module that computes its own loss and returns no logits has no accuracy (0).
    if (z.defined()) correct += z.argmax(1).eq(yb).sum().item<std::int64_t>();
  }
  module_->train(true);
  Evaluation e;
  if (n > 0) {
    e.loss = loss / static_cast<double>(n);
    e.accuracy = static_cast<double>(correct) / static_cast<double>(n);
  }
  return e;
}

}  // namespace dtsim::workloads
