// sgd: torch.optim.SGD (PyTorch 1.13, _single_tensor_sgd), per tensor:
//
//   d = g + weight_decay p                        (if weight_decay != 0)
//   buf = d                                       first step (a copy)
//   buf = momentum buf + (1 - dampening) d        afterwards        (if momentum != 0)
//   d = d + momentum buf (nesterov), else d = buf                   (if momentum != 0)
//   p = p - lr d
//
// The reference's apply_gradient (algorithms/apply_gradient.hpp) is the same rule with the
// same ATen operations, so both give the same bits (tests/optimizers_test.cpp).
#include "algorithms/optimizers/optimizer.hpp"

namespace dtsim::algorithms::optimizers {

namespace {

class Sgd final : public Optimizer {
 public:
  using Optimizer::Optimizer;

  std::uint64_t state_bytes() const override {
    std::uint64_t bytes = 0;
    for (const auto& b : buffers_)
      if (b.defined()) bytes += static_cast<std::uint64_t>(b.nbytes());
    return bytes;
  }

  sim::ComputeCost cost(std::int64_t elements) const override {
    const double n = static_cast<double>(elements);
    // Reads g and p, writes p; momentum reads and writes buf (and d where it is a copy).
    if (config().momentum == 0.0) return {(config().weight_decay != 0.0 ? 4.0 : 2.0) * n, 12.0 * n};
    return {6.0 * n, 24.0 * n};
  }

 protected:
  void resize(std::size_t tensors) override { buffers_.assign(tensors, at::Tensor()); }

  void update(std::size_t i, at::Tensor& p, const at::Tensor& g, double lr, bool decays) override {
    const auto& c = config();
    at::Tensor d = decays ? g.add(p, c.weight_decay) : g;
    if (c.momentum != 0.0) {
      auto& buf = buffers_[i];
      if (!buf.defined())
        buf = d.clone();
      else
        buf.mul_(c.momentum).add_(d, 1.0 - c.dampening);
      d = c.nesterov ? d.add(buf, c.momentum) : buf;
    }
    p.add_(d, -lr);
  }

 private:
  std::vector<at::Tensor> buffers_;  // undefined until the first step (momentum only)
};

}  // namespace

const OptimizerEntry& sgd_entry() {
  static const OptimizerEntry entry{
      .name = "sgd",
      .description = "SGD with momentum, dampening, Nesterov and L2 weight decay (torch.optim.SGD)",
      .paper = "Sutskever, Martens, Dahl, Hinton, ICML 2013 (momentum, Nesterov); torch.optim.SGD",
      .fields = {"weight_decay", "momentum", "dampening", "nesterov"},
      .default_weight_decay = 0.0,
      .make = [](const OptimizerConfig& c) -> std::unique_ptr<Optimizer> { return std::make_unique<Sgd>(c); }};
  return entry;
}

}  // namespace dtsim::algorithms::optimizers
