#include "algorithms/deepsqueeze.hpp"
#include "algorithms/registry.hpp"
#include "algorithms/spec_fields.hpp"
#include "kernels/compressor_kinds.hpp"

namespace dtsim::algorithms {

DeepSqueeze::DeepSqueeze(const AlgorithmSpec& spec, const net::Topology& topology, int rank)
    : optimizer_(spec.optimizer),
      gamma_(settings_of<DeepSqueezeSettings>(spec).consensus_stepsize),
      hood_(Neighborhood::of(topology, rank)),
      compressor_(make_gossip_compressor(spec.compressor, rank, "deepsqueeze")) {}

std::uint64_t DeepSqueeze::state_bytes() const {
  return memory_.defined() ? static_cast<std::uint64_t>(memory_.nbytes()) : 0;
}

sim::Task<std::uint64_t> DeepSqueeze::step(StepContext& ctx) {
  auto& comm = ctx.comm;
  const auto d = total_elements(ctx.params);
  {
    auto phase = ctx.timer.phase("grad/apply_grad");
    co_await comm.compute(optimizer_.cost(d), [&] { optimizer_.apply_gradient(ctx.params, ctx.grads, ctx.lr); });
  }
  {
    auto phase = ctx.timer.phase("grad/get_params");
    co_await comm.compute(elementwise_cost(d, 0.0, 8.0), [&] {
      if (flat_params_.count() == 0) {
        flat_params_ = kernels::TensorBuffer(ctx.params);
        for (const auto& p : ctx.params) segments_.push_back(p.numel());
        memory_ = at::zeros_like(flat_params_.buffer());
      } else {
        flat_params_.pack(ctx.params);
      }
    });
  }
  {
    auto phase = ctx.timer.phase("grad/error_compensate");
    co_await comm.compute(elementwise_cost(d, 1.0, 12.0), [&] { memory_.add_(flat_params_.buffer()); });
  }
  {
    auto phase = ctx.timer.phase("grad/compress");
    co_await comm.compute(elementwise_cost(d, 6.0, 8.0), [&] { message_.compress(compressor_, memory_, segments_); });
  }
  {
    auto phase = ctx.timer.phase("grad/update_memory");
    co_await comm.compute(elementwise_cost(d, 2.0, 12.0), [&] { message_.add_own(compressor_, -1.0, memory_); });
  }
  {
    auto phase = ctx.timer.phase("grad/sync");
    co_await message_.exchange(comm, hood_.peers);
  }
  {
    auto phase = ctx.timer.phase("grad/decompress");
    const double k = static_cast<double>(hood_.degree() + 1);
    co_await comm.compute(elementwise_cost(d, 2.0 * k, 12.0 * k + 8.0), [&] {
      auto& x = flat_params_.buffer();
      message_.add_own(compressor_, gamma_ * (hood_.self_weight - 1.0), x);
      for (std::size_t j = 0; j < hood_.degree(); ++j)
        message_.add_peer(compressor_, j, gamma_ * hood_.peer_weights[j], x);
      flat_params_.unpack(ctx.params);
    });
  }
  co_return compressor_.reference_bits(segments_);
}

const AlgorithmEntry& deepsqueeze_entry() {
  static const AlgorithmEntry entry{
      .name = "deepsqueeze",
      .description = "DeepSqueeze: decentralized SGD with error-compensated compression of the model",
      .paper = "Tang, Lian, Qiu, Yuan, Zhang, Liu, arXiv 1907.07346, 2019; the ChocoSGD reference code's deep_squeeze.py",
      .fields = with_optimizer_fields({"compressor", "consensus_stepsize"}),
      .parse =
          [](config::ObjectReader& a, AlgorithmSpec& spec, const SpecContext& ctx) {
            spec.compressor = parse_gossip_compressor(a, ctx, "deepsqueeze");
            DeepSqueezeSettings s;
            s.consensus_stepsize = a.number("consensus_stepsize", s.consensus_stepsize, 0.0, 1.0, true);
            spec.settings = s;
          },
      .to_json =
          [](const AlgorithmSpec& spec, nlohmann::json& out) {
            out["compressor"] = compressor_json(spec.compressor);
            out["consensus_stepsize"] = settings_of<DeepSqueezeSettings>(spec).consensus_stepsize;
          },
      .make = [](const AlgorithmSpec& spec, const net::Topology& topology, int rank) -> std::unique_ptr<Algorithm> {
        return std::make_unique<DeepSqueeze>(spec, topology, rank);
      },
      .memory = [](const AlgorithmSpec& spec, std::span<const std::int64_t>, std::int64_t) {
        MemoryFootprint f;
        f.model_buffers = 2;  // flat_params_, memory_
        f.gossips = true;
        f.payload_fraction = kernels::payload_fraction(spec.compressor);
        return f;
      }};
  return entry;
}

}  // namespace dtsim::algorithms
