#include "workloads/vgg11_model.hpp"

#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/pooling.h>

#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <utility>

#include "workloads/image32_entry.hpp"
#include "workloads/workload_registry.hpp"

namespace dtsim::workloads {

namespace {

namespace nn = torch::nn;

// Dropout with its own generator (see the header); the mask is drawn on the CPU.
class SeededDropoutImpl : public nn::Module {
 public:
  SeededDropoutImpl(double p, at::Generator gen) : p_(p), gen_(std::move(gen)) {}
  at::Tensor forward(const at::Tensor& x) {
    if (!is_training()) return x;
    const auto keep = at::empty(x.sizes(), x.options().device(at::kCPU)).bernoulli_(1.0 - p_, gen_).to(x.device());
    return x * keep / (1.0 - p_);
  }

 private:
  double p_;
  at::Generator gen_;
};
TORCH_MODULE(SeededDropout);

class Vgg11Impl : public nn::Module {
 public:
  Vgg11Impl(std::int64_t in_channels, std::int64_t classes, at::Generator dropout) {
    std::int64_t in = in_channels;
    for (const std::int64_t width : {64, 0, 128, 0, 256, 256, 0, 512, 512, 0, 512, 512, 0}) {
      if (width == 0) {
        features_->push_back(nn::MaxPool2d(nn::MaxPool2dOptions(2).stride(2)));
        continue;
      }
      features_->push_back(nn::Conv2d(nn::Conv2dOptions(in, width, 3).padding(1)));
      features_->push_back(nn::BatchNorm2d(width));
      features_->push_back(nn::ReLU());
      in = width;
    }
    classifier_->push_back(SeededDropout(0.5, dropout));
    classifier_->push_back(nn::Linear(512, 512));
    classifier_->push_back(nn::ReLU());
    classifier_->push_back(SeededDropout(0.5, dropout));
    classifier_->push_back(nn::Linear(512, 512));
    classifier_->push_back(nn::ReLU());
    classifier_->push_back(nn::Linear(512, classes));
    register_module("features", features_);
    register_module("classifier", classifier_);
  }

  at::Tensor forward(const at::Tensor& x) { return classifier_->forward(features_->forward(x).flatten(1)); }

 private:
  nn::Sequential features_, classifier_;
};
TORCH_MODULE(Vgg11);

// Draws every parameter from `gen` in module order (see the header).
void initialise(nn::Module& net, at::Generator& gen) {
  torch::NoGradGuard no_grad;
  for (const auto& m : net.modules(/*include_self=*/false)) {
    if (auto* conv = m->as<nn::Conv2d>()) {
      const auto& w = conv->weight;
      w.normal_(0.0, std::sqrt(2.0 / static_cast<double>(w.size(0) * w.size(2) * w.size(3))), gen);
      const double bound = 1.0 / std::sqrt(static_cast<double>(w.size(1) * w.size(2) * w.size(3)));
      conv->bias.uniform_(-bound, bound, gen);
    } else if (auto* bn = m->as<nn::BatchNorm2d>()) {
      bn->weight.fill_(1.0);
      bn->bias.zero_();
    } else if (auto* fc = m->as<nn::Linear>()) {
      const double bound = 1.0 / std::sqrt(static_cast<double>(fc->weight.size(1)));
      fc->weight.uniform_(-bound, bound, gen);
      fc->bias.uniform_(-bound, bound, gen);
    }
  }
}

}  // namespace

ModuleModel make_vgg11_model(std::int64_t in_channels, std::int64_t classes, std::uint64_t seed, int rank) {
  Vgg11 net(in_channels, classes,
            at::detail::createCPUGenerator(seed * 0x9e3779b97f4a7c15ULL + 0xd40ULL + static_cast<std::uint64_t>(rank)));
  auto gen = at::detail::createCPUGenerator(seed * 0x9e3779b97f4a7c15ULL + 0x1111ULL);
  initialise(*net, gen);
  return {nn::AnyModule(net), vgg11_layers(in_channels, classes)};
}

std::unique_ptr<ModuleWorkload> make_vgg11_workload(std::shared_ptr<const LabelledData> data, std::int64_t batch_size,
                                                    const std::string& partition, std::uint64_t seed, int rank,
                                                    int ranks) {
  const auto channels = image32_channels(*data, "vgg11_real");
  return std::make_unique<ModuleWorkload>(make_vgg11_model(channels, data->classes, seed, rank), std::move(data),
                                          batch_size, partition, seed, rank, ranks);
}

// --- the registry entry of "vgg11_real" (workload_registry.hpp) ------------------------

namespace {

constexpr Image32Model kVgg11Real{
    .name = "vgg11_real",
    .description = "VGG-11 with BatchNorm (the CHOCO-SGD reference's vgg11_bn, 512-wide classifier) on 32 x 32 images "
                    "under autograd (real data, real accuracy)",
    .make_workload = make_vgg11_workload,
    .layers = vgg11_layers,
    .widest = 64.0 * 32 * 32};  // conv1's output

}  // namespace

const WorkloadEntry& vgg11_real_entry() { return image32_entry<kVgg11Real>(); }

}  // namespace dtsim::workloads
