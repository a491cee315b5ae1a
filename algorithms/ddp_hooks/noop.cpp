// PyTorch's noop_hook (debugging_hooks.py): the bucket left as it is, no communication, so
// every rank steps with its own gradient. PyTorch's use: the headroom of DDP's
// communication (the step time without it); the ranks' models drift apart.
#include "algorithms/ddp_hook.hpp"

namespace dtsim::algorithms {

namespace {

class NoopHook final : public DdpHook {
 public:
  sim::Task<std::uint64_t> bucket_ready(DdpHookStep&, std::size_t, std::vector<std::vector<comm::Op>>&) override {
    co_return 0;
  }
};

}  // namespace

const DdpHookEntry& noop_hook_entry() {
  static const DdpHookEntry entry{
      .name = "noop",
      .description = "no communication: each rank steps with its own gradient (PyTorch's noop_hook, for the headroom "
                     "of DDP's communication)",
      .make = [](const std::any&) -> std::unique_ptr<DdpHook> { return std::make_unique<NoopHook>(); },
      .collectives_per_bucket = 0.0};
  return entry;
}

}  // namespace dtsim::algorithms
