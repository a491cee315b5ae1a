#include "algorithms/choco_sgd.hpp"
#include "algorithms/registry.hpp"
#include "algorithms/spec_fields.hpp"
#include "kernels/compressor_kinds.hpp"

namespace dtsim::algorithms {

ChocoSgd::ChocoSgd(const AlgorithmSpec& spec, const net::Topology& topology, int rank)
    : optimizer_(spec.optimizer),
      gamma_(settings_of<ChocoSgdSettings>(spec).consensus_stepsize),
      overlap_(settings_of<ChocoSgdSettings>(spec).overlap),
      hood_(Neighborhood::of(topology, rank)),
      compressor_(make_gossip_compressor(spec.compressor, rank, "choco_sgd")) {}

std::uint64_t ChocoSgd::state_bytes() const {
  if (!x_hat_.defined()) return 0;
  return static_cast<std::uint64_t>(x_hat_.nbytes() + s_.nbytes());
}

// Waits for the round in flight, then x^_i += q_i and s_i += sum_j w_ij q_j (self first).
sim::Task<void> ChocoSgd::join_and_decode(StepContext& ctx) {
  auto& comm = ctx.comm;
  const auto d = x_hat_.numel();
  {
    auto phase = ctx.timer.phase("grad/sync");
    co_await in_flight_;
  }
  {
    auto phase = ctx.timer.phase("grad/decompress");
    const double terms = static_cast<double>(hood_.degree() + 2);
    co_await comm.compute(elementwise_cost(d, 2.0 * terms, 12.0 * terms), [&] {
      message_.add_own(compressor_, 1.0, x_hat_);
      message_.add_own(compressor_, hood_.self_weight, s_);
      for (std::size_t k = 0; k < hood_.degree(); ++k) message_.add_peer(compressor_, k, hood_.peer_weights[k], s_);
    });
  }
  pending_ = false;
}

sim::Task<std::uint64_t> ChocoSgd::step(StepContext& ctx) {
  auto& comm = ctx.comm;
  const auto d = total_elements(ctx.params);
  {
    auto phase = ctx.timer.phase("grad/apply_grad");
    co_await comm.compute(optimizer_.cost(d), [&] { optimizer_.apply_gradient(ctx.params, ctx.grads, ctx.lr); });
  }
  {
    auto phase = ctx.timer.phase("grad/recover_hat_params");
    co_await comm.compute(elementwise_cost(d, 0.0, 8.0), [&] {
      if (flat_params_.count() == 0) {
        flat_params_ = kernels::TensorBuffer(ctx.params);
        for (const auto& p : ctx.params) segments_.push_back(p.numel());
        x_hat_ = at::zeros_like(flat_params_.buffer());
        s_ = at::zeros_like(x_hat_);
        diff_ = at::empty_like(x_hat_);
      } else {
        flat_params_.pack(ctx.params);
      }
    });
  }
  if (pending_) co_await join_and_decode(ctx);
  auto& x = flat_params_.buffer();
  {
    auto phase = ctx.timer.phase("grad/update_params_from_neighbor");
    co_await comm.compute(elementwise_cost(d, 3.0, 16.0), [&] {
      at::sub_out(diff_, s_, x_hat_);
      x.add_(diff_, gamma_);
    });
  }
  {
    auto phase = ctx.timer.phase("grad/compress");
    co_await comm.compute(elementwise_cost(d, 6.0, 16.0), [&] {
      at::sub_out(diff_, x, x_hat_);
      message_.compress(compressor_, diff_, segments_);
    });
  }
  {
    auto phase = ctx.timer.phase("grad/sync");
    in_flight_ = message_.exchange(comm, hood_.peers);
    pending_ = true;
  }
  if (!overlap_) co_await join_and_decode(ctx);
  {
    auto phase = ctx.timer.phase("grad/unflatten_to_update");
    co_await comm.compute(elementwise_cost(d, 0.0, 8.0), [&] { flat_params_.unpack(ctx.params); });
  }
  co_return compressor_.reference_bits(segments_);
}

sim::Task<void> ChocoSgd::finish(comm::Communicator&) {
  // The last round's messages would only feed a step that never comes: join, do not decode.
  co_await in_flight_;
  pending_ = false;
}

const AlgorithmEntry& choco_sgd_entry() {
  static const AlgorithmEntry entry{
      .name = "choco_sgd",
      .description = "CHOCO-SGD: gossip of compressed model differences x - x^ with consensus step size gamma",
      .paper = "Koloskova, Stich, Jaggi, ICML 2019 (Algorithm 2); the ChocoSGD reference code's parallel_choco.py",
      .fields = with_optimizer_fields({"compressor", "consensus_stepsize", "overlap"}),
      .parse =
          [](config::ObjectReader& a, AlgorithmSpec& spec, const SpecContext& ctx) {
            spec.compressor = parse_gossip_compressor(a, ctx, "choco_sgd");
            ChocoSgdSettings s;
            s.consensus_stepsize = a.number("consensus_stepsize", s.consensus_stepsize, 0.0, 1.0, true);
            s.overlap = a.boolean("overlap", s.overlap);
            spec.settings = s;
          },
      .to_json =
          [](const AlgorithmSpec& spec, nlohmann::json& out) {
            out["compressor"] = compressor_json(spec.compressor);
            const auto& s = settings_of<ChocoSgdSettings>(spec);
            out["consensus_stepsize"] = s.consensus_stepsize;
            out["overlap"] = s.overlap;
          },
      .make = [](const AlgorithmSpec& spec, const net::Topology& topology, int rank) -> std::unique_ptr<Algorithm> {
        return std::make_unique<ChocoSgd>(spec, topology, rank);
      },
      .memory = [](const AlgorithmSpec& spec, std::span<const std::int64_t>, std::int64_t) {
        MemoryFootprint f;
        f.model_buffers = 4;  // flat_params_, x_hat_, s_, diff_
        f.gossips = true;
        f.payload_fraction = kernels::payload_fraction(spec.compressor);
        return f;
      }};
  return entry;
}

}  // namespace dtsim::algorithms
