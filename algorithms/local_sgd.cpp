#include "algorithms/local_sgd.hpp"

namespace dtsim::algorithms {

sim::Task<std::uint64_t> LocalSgd::step(StepContext& ctx) {
  auto& comm = ctx.comm;
  const auto d = total_elements(ctx.params);
  const auto dd = static_cast<double>(d);
  {
    auto phase = ctx.timer.phase("sync.local_update");
    co_await comm.compute(optimizer_.cost(d), [&] {
      if (consensus_.count() == 0) {  // x_bar = x_0
        consensus_ = kernels::TensorBuffer(ctx.params);
        flat_params_ = kernels::TensorBuffer(ctx.params);
        diff_ = at::empty_like(consensus_.buffer());
      }
      optimizer_.apply_gradient(ctx.params, ctx.grads, true);
    });
  }
  if (!schedule_.sync_step(ctx.local_index)) co_return 0;
  {
    auto phase = ctx.timer.phase("sync.sync_and_update");
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

}  // namespace dtsim::algorithms
