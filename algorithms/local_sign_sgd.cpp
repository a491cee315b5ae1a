#include "algorithms/local_sign_sgd.hpp"
#include "algorithms/gossip.hpp"
#include "algorithms/registry.hpp"
#include "algorithms/spec_fields.hpp"

namespace dtsim::algorithms {

std::uint64_t LocalSignSgd::state_bytes() const { return tensor_bytes({consensus_.buffer()}); }

sim::Task<std::uint64_t> LocalSignSgd::step(StepContext& ctx) {
  auto& comm = ctx.comm;
  const auto d = total_elements(ctx.params);
  const auto dd = static_cast<double>(d);
  const auto L = static_cast<std::int64_t>(ctx.params.size());
  {
    auto phase = ctx.timer.phase("sync/local_update");
    co_await comm.compute({optimizer_.cost(d).flops + 2.0 * dd, optimizer_.cost(d).bytes + 12.0 * dd}, [&] {
      if (consensus_.count() == 0) {  // x_bar = x_0
        consensus_ = kernels::TensorBuffer(ctx.params);
        flat_params_ = kernels::TensorBuffer(ctx.params);
        signs_ = at::empty_like(consensus_.buffer());
        scales_ = at::empty({L}, consensus_.buffer().options());
        offsets_ = flat_offsets(ctx.params);
      }
      optimizer_.transform_gradient(ctx.params, ctx.grads);
      for (std::size_t i = 0; i < ctx.params.size(); ++i) ctx.params[i].add_(at::sign(ctx.grads[i]), -ctx.lr);
    });
  }
  if (!schedule_.sync_step(ctx.local_index)) co_return 0;
  {
    auto phase = ctx.timer.phase("sync/get_params");
    co_await comm.compute({3.0 * dd, 20.0 * dd}, [&] {
      flat_params_.pack(ctx.params);
      at::sub_out(signs_, consensus_.buffer(), flat_params_.buffer());  // x_bar - x
      // Scales are computed on the host and copied in: scales_ may live on a GPU.
      std::vector<float> s(static_cast<std::size_t>(L));
      for (std::int64_t l = 0; l < L; ++l) {
        const auto v = signs_.narrow(0, offsets_[l], offsets_[l + 1] - offsets_[l]);
        s[static_cast<std::size_t>(l)] = v.abs().sum().item<float>() / static_cast<float>(v.numel());
      }
      scales_.copy_(at::from_blob(s.data(), {L}, at::kFloat));
      signs_.sign_();
    });
  }
  {
    auto phase = ctx.timer.phase("sync/sync_and_decompress");
    co_await comm.all_reduce(signs_, comm::ReduceOp::Average);
    co_await comm.all_reduce(scales_, comm::ReduceOp::Average);
  }
  {
    auto phase = ctx.timer.phase("sync/update_consensus");
    co_await comm.compute({2.0 * dd, 20.0 * dd},
                          [&] { apply_scaled_signs(consensus_, signs_, scales_, offsets_, ctx.params); });
  }
  co_return 32ULL * static_cast<std::uint64_t>(d + L);
}

const AlgorithmEntry& local_sign_sgd_entry() {
  static const AlgorithmEntry entry{
      .name = "local_sign_sgd",
      .description = "local signSGD: local steps along the gradient sign, periodic averaging of scaled signs of the model difference",
      .paper = "Lin, Stich, Patel, Jaggi, ICLR 2020; the LocalSGD-Code repository's local_sign_sgd.py",
      .fields = with_optimizer_fields({"local_steps", "turn_on_local_steps_from"}),
      .parse = parse_local_schedule_field,
      .to_json = local_schedule_field_json,
      .make = [](const AlgorithmSpec& spec, const net::Topology&, int) -> std::unique_ptr<Algorithm> {
        return std::make_unique<LocalSignSgd>(spec);
      },
      .memory = [](const AlgorithmSpec& spec, std::span<const std::int64_t>, std::int64_t steps) {
        MemoryFootprint f;
        f.model_buffers = 3;                                           // consensus_, flat_params_, signs_
        f.collectives_per_step = 2.0 * settings_of<LocalSchedule>(spec).sync_share(steps);  // signs, scales
        return f;
      }};
  return entry;
}

}  // namespace dtsim::algorithms
