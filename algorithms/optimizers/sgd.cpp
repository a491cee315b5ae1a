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
#include "algorithms/optimizers/sgd.hpp"

#include <nlohmann/json.hpp>

#include "algorithms/optimizers/optimizer.hpp"

namespace dtsim::algorithms::optimizers {

namespace {

const SgdSettings& settings(const OptimizerConfig& c) { return optimizer_settings<SgdSettings>(c); }

class Sgd final : public Optimizer {
 public:
  explicit Sgd(const OptimizerConfig& c) : Optimizer(c), s_(settings(c)) {}

  std::uint64_t state_bytes() const override {
    std::uint64_t bytes = 0;
    for (const auto& b : buffers_)
      if (b.defined()) bytes += static_cast<std::uint64_t>(b.nbytes());
    return bytes;
  }

  sim::ComputeCost cost(std::int64_t elements) const override {
    const double n = static_cast<double>(elements);
    // Reads g and p, writes p; momentum reads and writes buf (and d where it is a copy).
    if (s_.momentum == 0.0) return {(config().weight_decay != 0.0 ? 4.0 : 2.0) * n, 12.0 * n};
    return {6.0 * n, 24.0 * n};
  }

 protected:
  void resize(std::size_t tensors) override { buffers_.assign(tensors, at::Tensor()); }

  void update(std::size_t i, at::Tensor& p, const at::Tensor& g, double lr, bool decays) override {
    at::Tensor d = decays ? g.add(p, config().weight_decay) : g;
    if (s_.momentum != 0.0) {
      auto& buf = buffers_[i];
      if (!buf.defined())
        buf = d.clone();
      else
        buf.mul_(s_.momentum).add_(d, 1.0 - s_.dampening);
      d = s_.nesterov ? d.add(buf, s_.momentum) : buf;
    }
    p.add_(d, -lr);
  }

 private:
  SgdSettings s_;
  std::vector<at::Tensor> buffers_;  // undefined until the first step (momentum only)
};

void parse(config::ObjectReader& o, OptimizerConfig& c) {
  SgdSettings s;
  s.momentum = o.number("momentum", s.momentum, 0.0, config::kInf);
  s.dampening = o.number("dampening", s.dampening, 0.0, 1.0);
  s.nesterov = o.boolean("nesterov", s.nesterov);
  if (s.nesterov && (s.momentum <= 0.0 || s.dampening != 0.0))
    throw config::ScenarioError(o.where("nesterov"), config::ErrorKind::inconsistent,
                                "nesterov needs momentum > 0 and dampening 0 (as torch.optim.SGD)");
  c.settings = s;
}

void to_json(const OptimizerConfig& c, nlohmann::json& out) {
  const auto& s = settings(c);
  out["momentum"] = s.momentum;
  out["dampening"] = s.dampening;
  out["nesterov"] = s.nesterov;
}

}  // namespace

const OptimizerEntry& sgd_entry() {
  static const OptimizerEntry entry{
      .name = "sgd",
      .description = "SGD with momentum, dampening, Nesterov and L2 weight decay (torch.optim.SGD)",
      .paper = "Sutskever, Martens, Dahl, Hinton, ICML 2013 (momentum, Nesterov); torch.optim.SGD",
      .fields = {"weight_decay", "momentum", "dampening", "nesterov"},
      .default_weight_decay = 0.0,
      .make = [](const OptimizerConfig& c) -> std::unique_ptr<Optimizer> { return std::make_unique<Sgd>(c); },
      .parse = parse,
      .to_json = to_json,
      .state_buffers = [](const OptimizerConfig& c) { return settings(c).momentum != 0.0 ? 1.0 : 0.0; }};
  return entry;
}

}  // namespace dtsim::algorithms::optimizers
