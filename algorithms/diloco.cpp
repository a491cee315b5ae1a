#include "algorithms/diloco.hpp"

#include <numeric>

#include <fmt/format.h>

#include "algorithms/apply_gradient.hpp"
#include "algorithms/gossip.hpp"
#include "algorithms/spec_fields.hpp"

namespace dtsim::algorithms {

using config::ErrorKind;
using config::kInf;
using config::kIntMax;
using config::ObjectReader;
using config::ScenarioError;

namespace {

// An optimizer object field: absent keeps the settings' default (the outer SGD's paper
// momentum is not torch.optim.SGD's default), present is read whole by the registry.
void parse_optimizer_object(ObjectReader& a, const char* key, optimizers::OptimizerConfig& config) {
  if (!a.value().contains(key)) return;
  auto o = a.object(key, true);
  config = optimizers::parse_optimizer(o, config.name);
}

}  // namespace

const std::vector<std::string>& diloco_fields() {
  static const std::vector<std::string> fields{"lr",       "lr_schedule", "local_steps", "inner_optimizer",
                                               "outer_optimizer", "outer_lr", "outer_codec", "fp4_block"};
  return fields;
}

void parse_inner_fields(ObjectReader& a, std::int64_t& local_steps, optimizers::OptimizerConfig& inner) {
  local_steps = a.integer("local_steps", local_steps, 1, kIntMax);
  parse_optimizer_object(a, "inner_optimizer", inner);
}

void inner_fields_json(std::int64_t local_steps, const optimizers::OptimizerConfig& inner, nlohmann::json& out) {
  out["local_steps"] = local_steps;
  out["inner_optimizer"] = optimizers::optimizer_json(inner);
}

void parse_diloco_settings(ObjectReader& a, DilocoSettings& s) {
  parse_inner_fields(a, s.local_steps, s.inner_optimizer);
  parse_optimizer_object(a, "outer_optimizer", s.outer_optimizer);
  s.outer_lr = a.number("outer_lr", s.outer_lr, 0.0, kInf, true);
  s.outer_codec = outer_codec_named(a.choice("outer_codec", outer_codec_name(s.outer_codec), outer_codec_names()));
  if (s.outer_codec == OuterCodec::fp4)
    s.fp4_block = a.integer("fp4_block", s.fp4_block, 0, std::int64_t{1} << 30);
  else if (a.value().contains("fp4_block"))
    throw ScenarioError(a.where("fp4_block"), ErrorKind::inconsistent,
                        fmt::format("applies to outer_codec fp4 only (outer_codec is {})", outer_codec_name(s.outer_codec)));
}

void diloco_settings_json(const DilocoSettings& s, nlohmann::json& out) {
  inner_fields_json(s.local_steps, s.inner_optimizer, out);
  out["outer_optimizer"] = optimizers::optimizer_json(s.outer_optimizer);
  out["outer_lr"] = s.outer_lr;
  out["outer_codec"] = outer_codec_name(s.outer_codec);
  if (s.outer_codec == OuterCodec::fp4) out["fp4_block"] = s.fp4_block;
}

Diloco::Diloco(const AlgorithmSpec& spec)
    : s_(settings_of<DilocoSettings>(spec)),
      inner_(make_rank_optimizer(s_.inner_optimizer, spec)),
      outer_(make_rank_optimizer(s_.outer_optimizer, spec)),
      exchange_(s_.outer_codec, s_.fp4_block) {}

std::uint64_t Diloco::state_bytes() const {
  return tensor_bytes(theta_) + inner_->state_bytes() + outer_->state_bytes();
}

void Diloco::first_step(const std::vector<at::Tensor>& params) {
  for (const auto& p : params) {  // theta^(0) = x_0
    theta_.push_back(p.detach().clone());
    delta_.push_back(at::zeros_like(p));
  }
}

sim::Task<std::uint64_t> Diloco::step(StepContext& ctx) {
  auto& comm = ctx.comm;
  const auto d = total_elements(ctx.params);
  {
    auto phase = ctx.timer.phase("inner/update");
    co_await comm.compute(inner_->cost(d), [&] {
      if (theta_.empty()) first_step(ctx.params);
      inner_->step(ctx.params, ctx.grads, ctx.lr);
    });
  }
  if (ctx.local_index % s_.local_steps != 0) co_return 0;
  {
    auto phase = ctx.timer.phase("outer/pseudo_gradient");
    co_await comm.compute(elementwise_cost(d, 1.0, 12.0), [&] {
      for (std::size_t i = 0; i < theta_.size(); ++i) at::sub_out(delta_[i], theta_[i], ctx.params[i]);
    });
  }
  std::uint64_t bits = 0;
  {
    auto phase = ctx.timer.phase("outer/exchange");
    bits = co_await exchange_.start(comm, delta_);
    co_await exchange_.join(comm);
  }
  {
    auto phase = ctx.timer.phase("outer/update");
    auto cost = outer_->cost(d);
    cost.bytes += 8.0 * static_cast<double>(d);  // theta copied into the parameters
    co_await comm.compute(cost, [&] {
      outer_->step(theta_, delta_, s_.outer_lr);
      for (std::size_t i = 0; i < theta_.size(); ++i) ctx.params[i].copy_(theta_[i]);
    });
  }
  co_return bits;
}

double outer_step_share(std::int64_t local_steps, std::int64_t steps) {
  return steps > 0 ? static_cast<double>(steps / local_steps) / static_cast<double>(steps) : 0.0;
}

MemoryFootprint diloco_memory(const DilocoSettings& s, std::span<const std::int64_t> sizes, std::int64_t steps) {
  MemoryFootprint f;
  // theta, Delta, the exchange's flat buffer, the inner optimizer's extra moments (the
  // estimate's momentum buffer is the inner one) and every buffer of the outer optimizer.
  f.model_buffers =
      3.0 + extra_optimizer_buffers(s.inner_optimizer) + optimizers::optimizer_state_buffers(s.outer_optimizer);
  f.gathers = s.outer_codec != OuterCodec::none;
  const std::vector<std::int64_t> numels(sizes.begin(), sizes.end());
  const double d = std::max(1.0, static_cast<double>(std::accumulate(sizes.begin(), sizes.end(), std::int64_t{0})));
  f.payload_fraction = static_cast<double>(outer_codec_bits(s.outer_codec, numels, s.fp4_block)) / (32.0 * d);
  f.collectives_per_step = outer_step_share(s.local_steps, steps);
  return f;
}

const AlgorithmEntry& diloco_entry() {
  static const AlgorithmEntry entry{
      .name = "diloco",
      .description = "DiLoCo: H inner optimizer steps (AdamW), then an outer optimizer step (Nesterov SGD) on the "
                     "all-reduced outer gradient, optionally sent in bf16, int8 or FP4",
      .paper = "Douillard et al., DiLoCo, arXiv 2311.08105 (2023); int8 codebook: INTELLECT-1, arXiv 2412.01152",
      .fields = diloco_fields(),
      .parse =
          [](ObjectReader& a, AlgorithmSpec& spec, const SpecContext&) {
            DilocoSettings s;
            parse_diloco_settings(a, s);
            spec.settings = s;
          },
      .to_json = [](const AlgorithmSpec& spec,
                    nlohmann::json& out) { diloco_settings_json(settings_of<DilocoSettings>(spec), out); },
      .make = [](const AlgorithmSpec& spec, const net::Topology&, int) -> std::unique_ptr<Algorithm> {
        return std::make_unique<Diloco>(spec);
      },
      .memory = [](const AlgorithmSpec& spec, std::span<const std::int64_t> sizes, std::int64_t steps) {
        return diloco_memory(settings_of<DilocoSettings>(spec), sizes, steps);
      }};
  return entry;
}

}  // namespace dtsim::algorithms
