#include "algorithms/local_sgd.hpp"
#include "algorithms/gossip.hpp"
#include "algorithms/registry.hpp"
#include "algorithms/spec_fields.hpp"

namespace dtsim::algorithms {

std::uint64_t LocalSgd::state_bytes() const { return tensor_bytes({consensus_.buffer()}); }

sim::Task<std::uint64_t> LocalSgd::step(StepContext& ctx) {
  auto& comm = ctx.comm;
  const auto d = total_elements(ctx.params);
  const auto dd = static_cast<double>(d);
  {
    auto phase = ctx.timer.phase("sync/local_update");
    co_await comm.compute(optimizer_.cost(d), [&] {
      if (consensus_.count() == 0) {  // x_bar = x_0
        consensus_ = kernels::TensorBuffer(ctx.params);
        flat_params_ = kernels::TensorBuffer(ctx.params);
        diff_ = at::empty_like(consensus_.buffer());
      }
      optimizer_.apply_gradient(ctx.params, ctx.grads, ctx.lr);
    });
  }
  if (!schedule_.sync_step(ctx.local_index)) co_return 0;
  {
    auto phase = ctx.timer.phase("sync/sync_and_update");
    co_await comm.compute({dd, 20.0 * dd}, [&] {
      flat_params_.pack(ctx.params);
      at::sub_out(diff_, consensus_.buffer(), flat_params_.buffer());
    });
    co_await comm.all_reduce(diff_, comm::ReduceOp::Average);
    co_await comm.compute({dd, 20.0 * dd}, [&] {
      consensus_.buffer().sub_(diff_);
      consensus_.unpack(ctx.params);
    });
  }
  co_return 32ULL * static_cast<std::uint64_t>(d);
}

const AlgorithmEntry& local_sgd_entry() {
  static const AlgorithmEntry entry{
      .name = "local_sgd",
      .description = "local SGD / post-local SGD: H local steps between all-reduces of the model",
      .paper = "Stich, ICLR 2019; Lin, Stich, Patel, Jaggi, ICLR 2020; the reference code's local_sgd.py",
      .fields = with_optimizer_fields({"local_steps", "turn_on_local_steps_from"}),
      .parse = parse_local_schedule_field,
      .to_json = local_schedule_field_json,
      .make = [](const AlgorithmSpec& spec, const net::Topology&, int) -> std::unique_ptr<Algorithm> {
        return std::make_unique<LocalSgd>(spec);
      },
      .memory = [](const AlgorithmSpec& spec, std::span<const std::int64_t>, std::int64_t steps) {
        MemoryFootprint f;
        f.model_buffers = 3;  // consensus_, flat_params_, diff_
        f.collectives_per_step = settings_of<LocalSchedule>(spec).sync_share(steps);
        return f;
      }};
  return entry;
}

}  // namespace dtsim::algorithms
