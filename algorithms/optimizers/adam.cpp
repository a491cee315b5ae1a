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
#include "algorithms/optimizers/adam.hpp"

#include <cmath>

#include <nlohmann/json.hpp>

#include "algorithms/optimizers/adam_moments.hpp"
#include "algorithms/optimizers/optimizer.hpp"

namespace dtsim::algorithms::optimizers {

namespace {

const AdamSettings& settings(const OptimizerConfig& c) { return optimizer_settings<AdamSettings>(c); }

class Adam final : public Optimizer {
 public:
  Adam(const OptimizerConfig& c, bool decoupled) : Optimizer(c), s_(settings(c)), decoupled_(decoupled) {}

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
    if (s_.amsgrad) return {14.0 * n, 44.0 * n};
    return {12.0 * n, 36.0 * n};
  }

 protected:
  void resize(std::size_t tensors) override {
    m_.assign(tensors, at::Tensor());
    v_.assign(tensors, at::Tensor());
    v_max_.assign(tensors, at::Tensor());
  }

  void update(std::size_t i, at::Tensor& p, const at::Tensor& g_in, double lr, bool decays) override {
    if (!m_[i].defined()) {
      m_[i] = at::zeros_like(p, at::MemoryFormat::Preserve);
      v_[i] = at::zeros_like(p, at::MemoryFormat::Preserve);
      if (s_.amsgrad) v_max_[i] = at::zeros_like(p, at::MemoryFormat::Preserve);
    }
    at::Tensor g = g_in;
    if (decays) {
      if (decoupled_)
        p.mul_(1.0 - lr * config().weight_decay);
      else
        g = g.add(p, config().weight_decay);
    }
    adam_first_moment_(m_[i], g, s_.beta1);
    v_[i].mul_(s_.beta2).addcmul_(g, g, 1.0 - s_.beta2);
    const double t = static_cast<double>(steps());
    const double bias_correction1 = 1.0 - std::pow(s_.beta1, t);
    const double bias_correction2 = 1.0 - std::pow(s_.beta2, t);
    const double step_size = lr / bias_correction1;
    const double bias_correction2_sqrt = adam_bias_correction2_sqrt(bias_correction2);
    at::Tensor denom;
    if (s_.amsgrad) {
      at::maximum_out(v_max_[i], v_max_[i], v_[i]);
      denom = (v_max_[i].sqrt() / bias_correction2_sqrt).add_(s_.eps);
    } else {
      denom = (v_[i].sqrt() / bias_correction2_sqrt).add_(s_.eps);
    }
    p.addcdiv_(m_[i], denom, -step_size);
  }

 private:
  AdamSettings s_;
  bool decoupled_;
  std::vector<at::Tensor> m_, v_, v_max_;  // v_max_: amsgrad only
};

void parse(config::ObjectReader& o, OptimizerConfig& c) {
  AdamSettings s;
  s.beta1 = o.number_below("beta1", s.beta1, 0.0, 1.0);
  s.beta2 = o.number_below("beta2", s.beta2, 0.0, 1.0);
  s.eps = o.number("eps", s.eps, 0.0, config::kInf);
  s.amsgrad = o.boolean("amsgrad", s.amsgrad);
  c.settings = s;
}

void to_json(const OptimizerConfig& c, nlohmann::json& out) {
  const auto& s = settings(c);
  out["beta1"] = s.beta1;
  out["beta2"] = s.beta2;
  out["eps"] = s.eps;
  out["amsgrad"] = s.amsgrad;
}

double state_buffers(const OptimizerConfig& c) { return settings(c).amsgrad ? 3.0 : 2.0; }

}  // namespace

const OptimizerEntry& adam_entry() {
  static const OptimizerEntry entry{
      .name = "adam",
      .description = "Adam with bias corrections, L2 weight decay added to the gradient, optional AMSGrad "
                     "(torch.optim.Adam)",
      .paper = "Kingma, Ba, ICLR 2015; Reddi, Kale, Kumar, ICLR 2018 (AMSGrad); torch.optim.Adam",
      .fields = {"weight_decay", "beta1", "beta2", "eps", "amsgrad"},
      .default_weight_decay = 0.0,
      .make = [](const OptimizerConfig& c) -> std::unique_ptr<Optimizer> { return std::make_unique<Adam>(c, false); },
      .parse = parse,
      .to_json = to_json,
      .state_buffers = state_buffers};
  return entry;
}

const OptimizerEntry& adamw_entry() {
  static const OptimizerEntry entry{
      .name = "adamw",
      .description = "AdamW: Adam with decoupled weight decay p *= 1 - lr wd, optional AMSGrad (torch.optim.AdamW)",
      .paper = "Loshchilov, Hutter, ICLR 2019; torch.optim.AdamW",
      .fields = {"weight_decay", "beta1", "beta2", "eps", "amsgrad"},
      .default_weight_decay = 0.01,
      .make = [](const OptimizerConfig& c) -> std::unique_ptr<Optimizer> { return std::make_unique<Adam>(c, true); },
      .parse = parse,
      .to_json = to_json,
      .state_buffers = state_buffers};
  return entry;
}

}  // namespace dtsim::algorithms::optimizers
