// adam and adamw: torch.optim.Adam and torch.optim.AdamW (Kingma & Ba, ICLR 2015; Loshchilov
// & Hutter, ICLR 2019), _single_tensor_adam / _single_tensor_adamw of the PyTorch whose
// LibTorch dtsim is built with, per tensor, at this optimizer's own step t (from 1):
//
//   adamw:  p = p (1 - lr wd)                           decoupled weight decay
//   adam:   g = g + wd p                                L2 weight decay (if wd != 0)
//   m = b1 m + (1 - b1) g
//   v = b2 v + (1 - b2) g g
//   v_max = max(v_max, v)                               (amsgrad; then v_max below)
//   denom = sqrt(v) / sqrt(1 - b2^t) + eps
//   p = p - (lr / (1 - b1^t)) m / denom
//
// The scalars (1 - b1, b1^t, lr / (1 - b1^t), sqrt(1 - b2^t), 1 - lr wd) are computed in
// double as Python computes them; each tensor operation is the ATen call PyTorch makes.
// PyTorch 2.x writes two of them differently from 1.13 (adam_moments.hpp).
#include <cmath>

#include "algorithms/optimizers/adam_moments.hpp"
#include "algorithms/optimizers/optimizer.hpp"

namespace dtsim::algorithms::optimizers {

namespace {

class Adam final : public Optimizer {
 public:
  Adam(const OptimizerConfig& c, bool decoupled) : Optimizer(c), decoupled_(decoupled) {}

  std::uint64_t state_bytes() const override {
    std::uint64_t bytes = 0;
    for (const auto* list : {&m_, &v_, &v_max_})
      for (const auto& t : *list)
        if (t.defined()) bytes += static_cast<std::uint64_t>(t.nbytes());
    return bytes;
  }

  sim::ComputeCost cost(std::int64_t elements) const override {
    const double n = static_cast<double>(elements);
    // Reads g, p, m, v and writes m, v, p; denom is written and read once more; amsgrad
    // reads and writes v_max. About 12 flops per element (14 with amsgrad).
    if (config().amsgrad) return {14.0 * n, 44.0 * n};
    return {12.0 * n, 36.0 * n};
  }

 protected:
  void resize(std::size_t tensors) override {
    m_.assign(tensors, at::Tensor());
    v_.assign(tensors, at::Tensor());
    v_max_.assign(tensors, at::Tensor());
  }

  void update(std::size_t i, at::Tensor& p, const at::Tensor& g_in, double lr, bool decays) override {
    const auto& c = config();
    if (!m_[i].defined()) {
      m_[i] = at::zeros_like(p, at::MemoryFormat::Preserve);
      v_[i] = at::zeros_like(p, at::MemoryFormat::Preserve);
      if (c.amsgrad) v_max_[i] = at::zeros_like(p, at::MemoryFormat::Preserve);
    }
    at::Tensor g = g_in;
    if (decays) {
      if (decoupled_)
        p.mul_(1.0 - lr * c.weight_decay);
      else
        g = g.add(p, c.weight_decay);
    }
    adam_first_moment_(m_[i], g, c.beta1);
    v_[i].mul_(c.beta2).addcmul_(g, g, 1.0 - c.beta2);
    const double t = static_cast<double>(steps());
    const double bias_correction1 = 1.0 - std::pow(c.beta1, t);
    const double bias_correction2 = 1.0 - std::pow(c.beta2, t);
    const double step_size = lr / bias_correction1;
    const double bias_correction2_sqrt = adam_bias_correction2_sqrt(bias_correction2);
    at::Tensor denom;
    if (c.amsgrad) {
      at::maximum_out(v_max_[i], v_max_[i], v_[i]);
      denom = (v_max_[i].sqrt() / bias_correction2_sqrt).add_(c.eps);
    } else {
      denom = (v_[i].sqrt() / bias_correction2_sqrt).add_(c.eps);
    }
    p.addcdiv_(m_[i], denom, -step_size);
  }

 private:
  bool decoupled_;
  std::vector<at::Tensor> m_, v_, v_max_;  // v_max_: amsgrad only
};

}  // namespace

const OptimizerEntry& adam_entry() {
  static const OptimizerEntry entry{
      .name = "adam",
      .description = "Adam with bias corrections, L2 weight decay added to the gradient, optional AMSGrad "
                     "(torch.optim.Adam)",
      .paper = "Kingma, Ba, ICLR 2015; Reddi, Kale, Kumar, ICLR 2018 (AMSGrad); torch.optim.Adam",
      .fields = {"weight_decay", "beta1", "beta2", "eps", "amsgrad"},
      .default_weight_decay = 0.0,
      .make = [](const OptimizerConfig& c) -> std::unique_ptr<Optimizer> { return std::make_unique<Adam>(c, false); }};
  return entry;
}

const OptimizerEntry& adamw_entry() {
  static const OptimizerEntry entry{
      .name = "adamw",
      .description = "AdamW: Adam with decoupled weight decay p *= 1 - lr wd, optional AMSGrad (torch.optim.AdamW)",
      .paper = "Loshchilov, Hutter, ICLR 2019; torch.optim.AdamW",
      .fields = {"weight_decay", "beta1", "beta2", "eps", "amsgrad"},
      .default_weight_decay = 0.01,
      .make = [](const OptimizerConfig& c) -> std::unique_ptr<Optimizer> { return std::make_unique<Adam>(c, true); }};
  return entry;
}

}  // namespace dtsim::algorithms::optimizers
