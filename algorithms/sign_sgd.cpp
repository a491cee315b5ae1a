#include "algorithms/sign_sgd.hpp"
#include "algorithms/registry.hpp"
#include "algorithms/spec_fields.hpp"

#include "kernels/majority_vote.hpp"

namespace dtsim::algorithms {

namespace {
sim::ComputeCost copy_cost(std::int64_t elements) { return {0.0, 8.0 * static_cast<double>(elements)}; }

kernels::CompressorSpec sign_spec() { return {.kind = "sign"}; }
}  // namespace

SignSgd::SignSgd(const AlgorithmSpec& spec)
    : optimizer_(spec.optimizer), compressor_(kernels::make_compressor(sign_spec())), majority_vote_(settings_of<SignSgdSettings>(spec).majority_vote) {}

sim::Task<std::uint64_t> SignSgd::step(StepContext& ctx) {
  auto& comm = ctx.comm;
  const auto d = total_elements(ctx.params);
  const auto dd = static_cast<double>(d);
  const double n = static_cast<double>(comm.size());
  {
    auto phase = ctx.timer.phase("sync/get_data");
    co_await comm.compute(copy_cost(d), [&] {
      if (flat_params_.count() == 0) {
        flat_params_ = kernels::TensorBuffer(ctx.params);
        update_ = at::zeros_like(flat_params_.buffer());
        for (const auto& p : ctx.params) segments_.push_back(p.numel());
      } else {
        flat_params_.pack(ctx.params);
      }
    });
  }
  {
    auto phase = ctx.timer.phase("sync/apply_grad");
    co_await comm.compute({optimizer_.cost(d).flops, optimizer_.cost(d).bytes + 8.0 * dd}, [&] {
      optimizer_.transform_gradient(ctx.params, ctx.grads);
      if (flat_grads_.count() == 0)
        flat_grads_ = kernels::TensorBuffer(ctx.grads);
      else
        flat_grads_.pack(ctx.grads);
    });
  }
  {
    auto phase = ctx.timer.phase("sync/compress");
    co_await comm.compute({dd, 4.5 * dd}, [&] { compressor_.compress(flat_grads_.buffer(), segments_, payload_); });
  }
  {
    auto phase = ctx.timer.phase("sync/sync_and_decompress");
    co_await comm.all_gather(payload_.bytes, gathered_);
    co_await comm.compute({n * dd, n * dd / 8.0 + 4.0 * dd}, [&] {
      received_.resize(gathered_.size());
      for (std::size_t r = 0; r < gathered_.size(); ++r) {
        received_[r] = payload_;
        received_[r].bytes = gathered_[r];
      }
      if (majority_vote_) {
        kernels::majority_vote(received_, update_);
      } else {
        update_.zero_();
        for (const auto& p : received_) compressor_.decompress_add(p, 1.0, update_);
        update_.div_(n);
      }
    });
  }
  {
    auto phase = ctx.timer.phase("sync/apply_grad");
    co_await comm.compute({2.0 * dd, 12.0 * dd}, [&] {
      flat_params_.buffer().add_(update_, -ctx.lr);
      flat_params_.unpack(ctx.params);
    });
  }
  co_return static_cast<std::uint64_t>(payload_.payload_bits());
}

const AlgorithmEntry& sign_sgd_entry() {
  static const AlgorithmEntry entry{
      .name = "sign_sgd",
      .description = "signSGD / signum: all-gather of packed gradient signs, update along the majority vote (or the mean of signs)",
      .paper = "Bernstein, Wang, Azizzadenesheli, Anandkumar, ICML 2018; Bernstein, Zhao et al., ICLR 2019 (majority vote)",
      .fields = with_optimizer_fields({"majority_vote"}),
      .parse =
          [](config::ObjectReader& a, AlgorithmSpec& spec, const SpecContext&) {
            SignSgdSettings s;
            s.majority_vote = a.boolean("majority_vote", s.majority_vote);
            spec.settings = s;
          },
      .to_json =
          [](const AlgorithmSpec& spec, nlohmann::json& out) {
            out["majority_vote"] = settings_of<SignSgdSettings>(spec).majority_vote;
          },
      .make = [](const AlgorithmSpec& spec, const net::Topology&, int) -> std::unique_ptr<Algorithm> {
        return std::make_unique<SignSgd>(spec);
      },
      .memory = [](const AlgorithmSpec& , std::span<const std::int64_t>, std::int64_t ) {
        MemoryFootprint f;
        f.model_buffers = 3;  // flat_params_, flat_grads_, update_
        f.gathers = true;     // packed signs
        f.payload_fraction = 1.0 / 32.0;
        return f;
      }};
  return entry;
}

}  // namespace dtsim::algorithms
