#include "algorithms/ecd_psgd.hpp"
#include "algorithms/registry.hpp"
#include "algorithms/spec_fields.hpp"
#include "kernels/compressor_kinds.hpp"

#include "kernels/aggregation.hpp"

namespace dtsim::algorithms {

EcdPsgd::EcdPsgd(const AlgorithmSpec& spec, const net::Topology& topology, int rank)
    : optimizer_(spec.optimizer),
      hood_(Neighborhood::of(topology, rank)),
      compressor_(make_gossip_compressor(spec.compressor, rank, "ecd_psgd")),
      weights_(hood_.self_then_peer_weights()) {}

std::uint64_t EcdPsgd::state_bytes() const { return tensor_bytes(replicas_); }

sim::Task<std::uint64_t> EcdPsgd::step(StepContext& ctx) {
  auto& comm = ctx.comm;
  const auto d = total_elements(ctx.params);
  const double k = static_cast<double>(weights_.size());
  const double t = static_cast<double>(ctx.local_index);
  {
    auto phase = ctx.timer.phase("grad/apply_grad");
    co_await comm.compute(optimizer_.cost(d), [&] { optimizer_.transform_gradient(ctx.params, ctx.grads); });
  }
  {
    auto phase = ctx.timer.phase("grad/get_params");
    co_await comm.compute(elementwise_cost(d, 0.0, 16.0), [&] {
      if (flat_params_.count() == 0) {
        flat_params_ = kernels::TensorBuffer(ctx.params);
        flat_grads_ = kernels::TensorBuffer(ctx.grads);
        for (const auto& p : ctx.params) segments_.push_back(p.numel());
        for (std::size_t j = 0; j < weights_.size(); ++j) replicas_.push_back(flat_params_.buffer().clone());
        next_ = at::empty_like(flat_params_.buffer());
        z_ = at::empty_like(next_);
      } else {
        flat_params_.pack(ctx.params);
        flat_grads_.pack(ctx.grads);
      }
    });
  }
  {
    auto phase = ctx.timer.phase("grad/get_extrapolated_model");
    co_await comm.compute(elementwise_cost(d, 2.0 * k, 4.0 * (k + 1.0)),
                          [&] { kernels::weighted_sum(next_, replicas_, weights_); });
  }
  auto& x = flat_params_.buffer();
  {
    auto phase = ctx.timer.phase("grad/unflatten_to_update");
    co_await comm.compute(elementwise_cost(d, 5.0, 28.0), [&] {
      next_.sub_(flat_grads_.buffer(), ctx.lr);
      // z = (1 - t/2) x_t + (t/2) x+ ; then x <- x+.
      z_.copy_(x).mul_(1.0 - 0.5 * t);
      z_.add_(next_, 0.5 * t);
      x.copy_(next_);
      flat_params_.unpack(ctx.params);
    });
  }
  {
    auto phase = ctx.timer.phase("grad/compress");
    co_await comm.compute(elementwise_cost(d, 6.0, 8.0), [&] { message_.compress(compressor_, z_, segments_); });
  }
  {
    auto phase = ctx.timer.phase("grad/sync");
    co_await message_.exchange(comm, hood_.peers);
  }
  {
    auto phase = ctx.timer.phase("grad/unflatten_to_update");
    co_await comm.compute(elementwise_cost(d, 3.0 * k, 16.0 * k), [&] {
      for (auto& y : replicas_) y.mul_(1.0 - 2.0 / t);
      message_.add_own(compressor_, 2.0 / t, replicas_[0]);
      for (std::size_t j = 0; j < hood_.degree(); ++j) message_.add_peer(compressor_, j, 2.0 / t, replicas_[j + 1]);
    });
  }
  co_return compressor_.reference_bits(segments_);
}

const AlgorithmEntry& ecd_psgd_entry() {
  static const AlgorithmEntry entry{
      .name = "ecd_psgd",
      .description = "ECD-PSGD: decentralized SGD sending compressed extrapolations of the model",
      .paper = "Tang, Gan, Zhang, Zhang, Liu, NeurIPS 2018 (Algorithm 2); the ChocoSGD reference code's ecd_psgd.py",
      .fields = with_optimizer_fields({"compressor"}),
      .parse = parse_gossip_compressor_field,
      .to_json = compressor_field_json,
      .make = [](const AlgorithmSpec& spec, const net::Topology& topology, int rank) -> std::unique_ptr<Algorithm> {
        return std::make_unique<EcdPsgd>(spec, topology, rank);
      },
      .memory = [](const AlgorithmSpec& spec, std::span<const std::int64_t>, std::int64_t) {
        MemoryFootprint f;
        f.model_buffers = 5;  // flat_params_, flat_grads_, next_, z_, replicas_[0] (y^_i)
        f.model_buffers_per_peer = 1;  // replicas_ y^_j
        f.gossips = true;
        f.payload_fraction = kernels::payload_fraction(spec.compressor);
        return f;
      }};
  return entry;
}

}  // namespace dtsim::algorithms
