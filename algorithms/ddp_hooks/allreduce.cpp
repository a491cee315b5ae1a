// PyTorch's allreduce_hook (default_hooks.py): the bucket averaged over the ranks.
#include "algorithms/ddp_hook.hpp"

namespace dtsim::algorithms {

namespace {

class AllReduceHook final : public DdpHook {
 public:
  sim::Task<std::uint64_t> bucket_ready(DdpHookStep& step, std::size_t b, std::vector<std::vector<comm::Op>>& ops) override {
    co_return all_reduce_bucket(step, b, ops);
  }
};

}  // namespace

const DdpHookEntry& allreduce_hook_entry() {
  static const DdpHookEntry entry{
      .name = "allreduce",
      .description = "the bucket all-reduced in fp32 and divided by the ranks (PyTorch's default)",
      .make = [](const std::any&) -> std::unique_ptr<DdpHook> { return std::make_unique<AllReduceHook>(); }};
  return entry;
}

}  // namespace dtsim::algorithms
