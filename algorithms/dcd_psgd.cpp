#include "algorithms/dcd_psgd.hpp"
#include "algorithms/registry.hpp"
#include "algorithms/spec_fields.hpp"
#include "kernels/compressor_kinds.hpp"

#include "kernels/aggregation.hpp"

namespace dtsim::algorithms {

DcdPsgd::DcdPsgd(const AlgorithmSpec& spec, const net::Topology& topology, int rank)
    : optimizer_(spec.optimizer),
      hood_(Neighborhood::of(topology, rank)),
      compressor_(make_gossip_compressor(spec.compressor, rank, "dcd_psgd")),
      weights_(hood_.self_then_peer_weights()) {}

std::uint64_t DcdPsgd::state_bytes() const { return tensor_bytes(replicas_); }

sim::Task<std::uint64_t> DcdPsgd::step(StepContext& ctx) {
  auto& comm = ctx.comm;
  const auto d = total_elements(ctx.params);
  const double k = static_cast<double>(weights_.size());
  {
    auto phase = ctx.timer.phase("grad/apply_grad");
    co_await comm.compute(optimizer_.cost(d), [&] { optimizer_.transform_gradient(ctx.params, ctx.grads); });
  }
  {
    auto phase = ctx.timer.phase("grad/get_grads");
    co_await comm.compute(elementwise_cost(d, 0.0, 16.0), [&] {
      if (flat_params_.count() == 0) {
        flat_params_ = kernels::TensorBuffer(ctx.params);
        flat_grads_ = kernels::TensorBuffer(ctx.grads);
        for (const auto& p : ctx.params) segments_.push_back(p.numel());
        for (std::size_t j = 0; j < weights_.size(); ++j) replicas_.push_back(flat_params_.buffer().clone());
        half_ = at::empty_like(flat_params_.buffer());
      } else {
        flat_params_.pack(ctx.params);
        flat_grads_.pack(ctx.grads);
      }
    });
  }
  {
    auto phase = ctx.timer.phase("grad/apply_local_gradient");
    co_await comm.compute(elementwise_cost(d, 2.0 * k + 2.0, 4.0 * (k + 3.0)), [&] {
      kernels::weighted_sum(half_, replicas_, weights_);
      half_.sub_(flat_grads_.buffer(), ctx.lr);
    });
  }
  {
    auto phase = ctx.timer.phase("grad/compress");
    co_await comm.compute(elementwise_cost(d, 6.0, 16.0), [&] {
      half_.sub_(flat_params_.buffer());  // half_ now holds x_{t+1/2} - x_i
      message_.compress(compressor_, half_, segments_);
    });
  }
  {
    auto phase = ctx.timer.phase("grad/sync");
    co_await message_.exchange(comm, hood_.peers);
  }
  {
    auto phase = ctx.timer.phase("grad/unflatten_to_update");
    co_await comm.compute(elementwise_cost(d, 2.0 * k, 12.0 * k + 8.0), [&] {
      message_.add_own(compressor_, 1.0, replicas_[0]);
      for (std::size_t j = 0; j < hood_.degree(); ++j) message_.add_peer(compressor_, j, 1.0, replicas_[j + 1]);
      flat_params_.buffer().copy_(replicas_[0]);
      flat_params_.unpack(ctx.params);
    });
  }
  co_return compressor_.reference_bits(segments_);
}

const AlgorithmEntry& dcd_psgd_entry() {
  static const AlgorithmEntry entry{
      .name = "dcd_psgd",
      .description = "DCD-PSGD: decentralized SGD sending compressed differences of the model",
      .paper = "Tang, Gan, Zhang, Zhang, Liu, NeurIPS 2018 (Algorithm 1); the ChocoSGD reference code's dcd_psgd.py",
      .fields = with_optimizer_fields({"compressor"}),
      .parse = parse_gossip_compressor_field,
      .to_json = compressor_field_json,
      .make = [](const AlgorithmSpec& spec, const net::Topology& topology, int rank) -> std::unique_ptr<Algorithm> {
        return std::make_unique<DcdPsgd>(spec, topology, rank);
      },
      .memory = [](const AlgorithmSpec& spec, std::span<const std::int64_t>, std::int64_t) {
        MemoryFootprint f;
        f.model_buffers = 4;  // flat_params_, flat_grads_, half_, replicas_[0] (x^_i)
        f.model_buffers_per_peer = 1;  // replicas_ x^_j
        f.gossips = true;
        f.payload_fraction = kernels::payload_fraction(spec.compressor);
        return f;
      }};
  return entry;
}

}  // namespace dtsim::algorithms
