#include "algorithms/ddp_hooks/powersgd.hpp"

#include <stdexcept>

#include <fmt/format.h>

namespace dtsim::algorithms {

PowerSgdHook::PowerSgdHook(const PowerSgdOptions& o)
    : settings_(o.group), start_iter_(o.start_powerSGD_iter), random_(static_cast<std::uint32_t>(o.random_seed)) {
  // Preconditions: the loader (parse below) refuses these with their JSON path.
  if (settings_.rank < 1)
    throw std::logic_error(fmt::format("/algorithm/matrix_approximation_rank: expected >= 1, got {}", settings_.rank));
  if (const auto problem = powersgd_start_problem(o); !problem.empty())
    throw std::logic_error("/algorithm/start_powerSGD_iter: " + problem);
}

void PowerSgdHook::init(std::span<const DdpBucket> buckets, std::span<const at::Tensor> params) {
  groups_.clear();
  const auto options = params.front().options().dtype(at::kFloat);
  for (const auto& bucket : buckets) {
    std::vector<PowerSgdSlot> slots;
    for (const auto& s : bucket.slots) slots.push_back(powersgd_slot(params[s.param].sizes(), s.offset, settings_));
    groups_.emplace_back(std::move(slots), options, settings_);
  }
}

// What PowerSGD carries from one step to the next: the error e and, with warm start, Q
// (M0, P and the uncompressed copy are rewritten every step).
std::uint64_t PowerSgdHook::state_bytes() const {
  std::uint64_t bytes = 0;
  for (const auto& g : groups_) bytes += g.state_bytes();
  return bytes;
}

sim::Task<std::uint64_t> PowerSgdHook::bucket_ready(DdpHookStep& step, std::size_t b,
                                                    std::vector<std::vector<comm::Op>>& ops) {
  if (!compresses(step)) co_return all_reduce_bucket(step, b, ops);
  auto& comm = step.ctx.comm;
  auto& bucket = step.buckets[b];
  auto& group = groups_[b];
  {
    auto phase = step.ctx.timer.phase("sync/compress");
    co_await comm.compute(group.first_cost(), [&] { group.first_half(bucket.buffer, random_); });
  }
  if (group.uncompressed().numel() > 0) ops[b].push_back(comm.stream_all_reduce(group.uncompressed(), comm::ReduceOp::Average));
  if (group.p_memory().numel() > 0) ops[b].push_back(comm.stream_all_reduce(group.p_memory(), comm::ReduceOp::Sum));
  co_return group.n_bits();
}

sim::Task<void> PowerSgdHook::after_backward(DdpHookStep& step, std::vector<std::vector<comm::Op>>& ops) {
  if (!compresses(step)) {
    co_await DdpHook::after_backward(step, ops);
    co_return;
  }
  auto& comm = step.ctx.comm;
  // The second half, bucket by bucket: P's sum, then Q = M^T P and Q's all-reduce.
  std::vector<comm::Op> second(step.buckets.size());
  for (std::size_t b = 0; b < step.buckets.size(); ++b) {
    auto& group = groups_[b];
    {
      auto phase = step.ctx.timer.phase("sync/sync");
      for (auto& op : ops[b]) co_await op;
    }
    {
      auto phase = step.ctx.timer.phase("sync/compress");
      co_await comm.compute(group.second_cost(), [&] { group.second_half(step.buckets[b].buffer); });
    }
    if (group.q_memory().numel() > 0) second[b] = comm.stream_all_reduce(group.q_memory(), comm::ReduceOp::Average);
  }
  for (std::size_t b = 0; b < step.buckets.size(); ++b) {
    auto& group = groups_[b];
    {
      auto phase = step.ctx.timer.phase("sync/sync");
      co_await second[b];
    }
    auto phase = step.ctx.timer.phase("sync/compress");
    co_await comm.compute(group.decompress_cost(), [&] { group.decompress(step.buckets[b].buffer); });
  }
}

const DdpHookEntry& powersgd_hook_entry() {
  static const DdpHookEntry entry{
      .name = "powersgd",
      .description = "PowerSGD's low-rank approximation of each bucket's matrices (PyTorch's powerSGD_hook), after "
                     "start_powerSGD_iter steps of the allreduce hook",
      .fields = powersgd_fields(),
      .parse =
          [](config::ObjectReader& a) {
            PowerSgdOptions o;
            parse_powersgd(a, o, true, "");
            return std::any(o);
          },
      .to_json = [](const std::any& s, nlohmann::json& out) { powersgd_json(hook_settings_or_default<PowerSgdOptions>(s), out); },
      .make = [](const std::any& s) -> std::unique_ptr<DdpHook> {
        return std::make_unique<PowerSgdHook>(hook_settings_or_default<PowerSgdOptions>(s));
      },
      .memory =
          [](const std::any& s, MemoryFootprint& f) {
            // The error, M0 and the uncompressed copy (at most the model each; P and Q are smaller).
            f.model_buffers += (hook_settings_or_default<PowerSgdOptions>(s).group.error_feedback ? 2.0 : 0.0) + 1.0;
          },
      .collectives_per_bucket = 3.0};
  return entry;
}

}  // namespace dtsim::algorithms
