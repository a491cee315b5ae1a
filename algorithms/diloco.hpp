// DiLoCo (Douillard, Feng, Rusu, Chhaparia, Donchev, Kuncoro, Ranzato, Szlam, Shen,
// "DiLoCo: Distributed Low-Communication Training of Language Models", arXiv 2311.08105,
// Algorithm 1). Rank r, outer step k (every H-th inner step t = k H):
//
//   theta_r <- theta^(k-1)                          the global model (x_0 at the start)
//   H times:  theta_r <- InnerOpt(theta_r, g_r)     inner/update, at the step's lr
//                                                   (algorithm.lr, lr_schedule)
//   Delta^(k) = (1/R) sum_r (theta^(k-1) - theta_r) outer/pseudo_gradient, outer/exchange
//   theta^(k) <- OuterOpt(theta^(k-1), Delta^(k))   outer/update, at outer_lr
//   theta_r <- theta^(k)
//
// InnerOpt: any optimizer of the registry (algorithms/optimizers/), AdamW by default, its
// state kept across outer steps and counting its own steps. OuterOpt: the registry's
// optimizer on Delta, tensor by tensor (so the weight-decay mask applies), torch.optim.SGD
// with Nesterov momentum 0.9 at lr 0.7 by default (the paper's). Delta may travel in bf16, int8 (INTELLECT-1's codebook) or
// FP4 E3M0 (outer_exchange.hpp), decoded and averaged in fp32.
//
// n_bits: 0 on an inner step, the outer gradient's message on an outer step (32 d for
// fp32; outer_exchange.hpp's closed forms for the codecs).
// state_bytes(): theta (one replica of the model), the outer optimizer's state (Nesterov
// momentum: one more) and the inner optimizer's (AdamW: m and v), the model-sized memory
// DiLoCo adds on each worker.
//
// With H = 1, outer SGD at lr 1 without momentum: theta^(k) = theta - (1/R) sum_r (theta -
// InnerOpt_r(theta)), i.e. every rank's inner step averaged. That is data-parallel AdamW
// only where the ranks' gradients agree (each rank keeps its own AdamW moments, and AdamW is
// not linear in g): on one rank, up to the rounding of theta - (theta - A(theta))
// (tests/llm_algorithms_test.cpp states the relations it checks).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "algorithms/algorithm.hpp"
#include "algorithms/local_update.hpp"
#include "algorithms/optimizers/optimizer.hpp"
#include "algorithms/optimizers/sgd.hpp"
#include "algorithms/outer_exchange.hpp"
#include "algorithms/registry.hpp"
#include "kernels/tensor_buffer.hpp"

namespace dtsim::algorithms {

// What DiLoCo reads from its scenario fields (AlgorithmSpec::settings); Streaming DiLoCo and
// SparseLoCo share the inner half.
struct DilocoSettings {
  std::int64_t local_steps = 500;  // H, inner steps per outer step (the paper's 500)
  optimizers::OptimizerConfig inner_optimizer{.name = "adamw", .weight_decay = 0.01};
  optimizers::OptimizerConfig outer_optimizer{.name = "sgd",
                                              .settings = optimizers::SgdSettings{.momentum = 0.9, .nesterov = true}};
  double outer_lr = 0.7;
  OuterCodec outer_codec = OuterCodec::none;
  std::int64_t fp4_block = 256;  // elements per FP4 scale (0: one per tensor); read with outer_codec fp4 only
};

// The scenario fields and their parse / echo, shared with Streaming DiLoCo (whose defaults
// differ: the settings passed in hold them). The inner half (local_steps, inner_optimizer)
// is SparseLoCo's too.
const std::vector<std::string>& diloco_fields();
void parse_diloco_settings(config::ObjectReader& a, DilocoSettings& s);
void diloco_settings_json(const DilocoSettings& s, nlohmann::json& out);
void parse_inner_fields(config::ObjectReader& a, std::int64_t& local_steps, optimizers::OptimizerConfig& inner);
void inner_fields_json(std::int64_t local_steps, const optimizers::OptimizerConfig& inner, nlohmann::json& out);

// For the memory footprints: the share of `steps` steps that are outer steps
// (extra_optimizer_buffers, in local_update.hpp, gives an optimizer's extra moments).
double outer_step_share(std::int64_t local_steps, std::int64_t steps);
// DiLoCo's entry's memory footprint (registry.hpp's MemoryFootprint) for these settings.
MemoryFootprint diloco_memory(const DilocoSettings& s, std::span<const std::int64_t> sizes, std::int64_t steps);

class Diloco final : public Algorithm {
 public:
  explicit Diloco(const AlgorithmSpec& spec);
  sim::Task<std::uint64_t> step(StepContext& ctx) override;
  std::uint64_t state_bytes() const override;

  // theta, the global model of the last outer step.
  const std::vector<at::Tensor>& global() const { return theta_; }
  const std::vector<at::Tensor>& outer_gradient() const { return delta_; }  // the last Delta, averaged
  const optimizers::Optimizer& inner() const { return *inner_; }

 private:
  void first_step(const std::vector<at::Tensor>& params);

  DilocoSettings s_;
  std::unique_ptr<optimizers::Optimizer> inner_, outer_;
  OuterExchange exchange_;
  std::vector<at::Tensor> theta_, delta_;  // theta^(k) and Delta, in the parameters' shapes
};

}  // namespace dtsim::algorithms
