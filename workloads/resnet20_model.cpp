#include "workloads/resnet20_model.hpp"

#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>

#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <utility>

#include <fmt/format.h>

#include "workloads/image32_entry.hpp"
#include "workloads/workload_registry.hpp"

namespace dtsim::workloads {

namespace {

namespace nn = torch::nn;

nn::Conv2d conv3x3(std::int64_t in, std::int64_t out, std::int64_t stride) {
  return nn::Conv2d(nn::Conv2dOptions(in, out, 3).stride(stride).padding(1).bias(false));
}

// conv - bn - relu - conv - bn, plus the option-A shortcut, then relu.
class BasicBlockImpl : public nn::Module {
 public:
  BasicBlockImpl(std::int64_t in, std::int64_t out, std::int64_t stride)
      : in_(in),
        out_(out),
        stride_(stride),
        conv1_(register_module("conv1", conv3x3(in, out, stride))),
        bn1_(register_module("bn1", nn::BatchNorm2d(out))),
        conv2_(register_module("conv2", conv3x3(out, out, 1))),
        bn2_(register_module("bn2", nn::BatchNorm2d(out))) {}

  at::Tensor forward(const at::Tensor& x) {
    auto y = at::relu(bn1_(conv1_(x)));
    y = bn2_(conv2_(y));
    return at::relu(y + shortcut(x));
  }

 private:
  // Option A: the identity, or, where the block halves the resolution and widens, every
  // other pixel with (out - in) / 2 zero channels on each side.
  at::Tensor shortcut(const at::Tensor& x) const {
    if (stride_ == 1 && in_ == out_) return x;
    const auto sub = x.slice(2, 0, c10::nullopt, stride_).slice(3, 0, c10::nullopt, stride_);
    const std::int64_t before = (out_ - in_) / 2;
    return at::constant_pad_nd(sub, {0, 0, 0, 0, before, out_ - in_ - before});
  }

  std::int64_t in_, out_, stride_;
  nn::Conv2d conv1_;
  nn::BatchNorm2d bn1_;
  nn::Conv2d conv2_;
  nn::BatchNorm2d bn2_;
};
TORCH_MODULE(BasicBlock);

class ResNet20Impl : public nn::Module {
 public:
  ResNet20Impl(std::int64_t in_channels, std::int64_t classes)
      : conv1_(register_module("conv1", conv3x3(in_channels, 16, 1))),
        bn1_(register_module("bn1", nn::BatchNorm2d(16))),
        fc_(nullptr) {
    const std::int64_t widths[] = {16, 32, 64};
    std::int64_t in = 16;
    for (int stage = 0; stage < 3; ++stage) {
      nn::Sequential blocks;
      for (int block = 0; block < 3; ++block) {
        blocks->push_back(BasicBlock(in, widths[stage], stage > 0 && block == 0 ? 2 : 1));
        in = widths[stage];
      }
      stages_.push_back(register_module(fmt::format("layer{}", stage + 1), blocks));
    }
    fc_ = register_module("fc", nn::Linear(64, classes));
  }

  at::Tensor forward(const at::Tensor& x) {
    auto h = at::relu(bn1_(conv1_(x)));
    for (auto& stage : stages_) h = stage->forward(h);
    return fc_(h.mean({2, 3}));  // global average pool
  }

 private:
  nn::Conv2d conv1_;
  nn::BatchNorm2d bn1_;
  std::vector<nn::Sequential> stages_;
  nn::Linear fc_;
};
TORCH_MODULE(ResNet20);

// Draws every parameter from `gen` in module order (see the header).
void initialise(nn::Module& net, at::Generator& gen) {
  torch::NoGradGuard no_grad;
  for (const auto& m : net.modules(/*include_self=*/false)) {
    if (auto* conv = m->as<nn::Conv2d>()) {
      const auto& w = conv->weight;
      const double fan_out = static_cast<double>(w.size(0) * w.size(2) * w.size(3));
      w.normal_(0.0, std::sqrt(2.0 / fan_out), gen);
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

ModuleModel make_resnet20_model(std::int64_t in_channels, std::int64_t classes, std::uint64_t seed) {
  ResNet20 net(in_channels, classes);
  auto gen = at::detail::createCPUGenerator(seed * 0x9e3779b97f4a7c15ULL + 0x2020ULL);
  initialise(*net, gen);
  return {nn::AnyModule(net), resnet20_layers(in_channels, classes)};
}

std::unique_ptr<ModuleWorkload> make_resnet20_workload(std::shared_ptr<const LabelledData> data, std::int64_t batch_size,
                                                       const std::string& partition, std::uint64_t seed, int rank,
                                                       int ranks) {
  const auto channels = image32_channels(*data, "resnet20_real");
  return std::make_unique<ModuleWorkload>(make_resnet20_model(channels, data->classes, seed), std::move(data),
                                          batch_size, partition, seed, rank, ranks);
}

// --- the registry entry of "resnet20_real" (workload_registry.hpp) ---------------------

namespace {

constexpr Image32Model kResNet20Real{
    .name = "resnet20_real",
    .description = "ResNet-20 (He et al. 2016, option-A shortcuts, BatchNorm) on 32 x 32 images under autograd (real "
                    "data, real accuracy)",
    .make_workload = make_resnet20_workload,
    .layers = resnet20_layers,
    .widest = 16.0 * 32 * 32};  // conv1's output

}  // namespace

const WorkloadEntry& resnet20_real_entry() { return image32_entry<kResNet20Real>(); }

}  // namespace dtsim::workloads
