#include "algorithms/ddp_hook.hpp"

namespace dtsim::algorithms {

// Each hook's entry, in its file in ddp_hooks/.
const DdpHookEntry& allreduce_hook_entry();      // allreduce.cpp
const DdpHookEntry& fp16_compress_hook_entry();  // half_precision.cpp
const DdpHookEntry& bf16_compress_hook_entry();  // half_precision.cpp
const DdpHookEntry& powersgd_hook_entry();       // powersgd.cpp
const DdpHookEntry& noop_hook_entry();           // noop.cpp

const std::vector<DdpHookEntry>& ddp_hooks() {
  static const std::vector<DdpHookEntry> table{allreduce_hook_entry(), fp16_compress_hook_entry(),
                                               bf16_compress_hook_entry(), powersgd_hook_entry(), noop_hook_entry()};
  return table;
}

const DdpHookEntry* find_ddp_hook(const std::string& name) {
  for (const auto& e : ddp_hooks())
    if (e.name == name) return &e;
  return nullptr;
}

std::vector<std::string> ddp_hook_names() {
  std::vector<std::string> names;
  for (const auto& e : ddp_hooks()) names.push_back(e.name);
  return names;
}

sim::Task<void> DdpHook::after_backward(DdpHookStep& step, std::vector<std::vector<comm::Op>>& ops) {
  auto phase = step.ctx.timer.phase("sync/sync");  // the communication not hidden behind backward
  for (auto& bucket_ops : ops)
    for (auto& op : bucket_ops) co_await op;
}

std::uint64_t all_reduce_bucket(DdpHookStep& step, std::size_t b, std::vector<std::vector<comm::Op>>& ops) {
  auto& bucket = step.buckets[b];
  ops[b].push_back(step.ctx.comm.stream_all_reduce(bucket.buffer, comm::ReduceOp::Average));
  return 32ULL * static_cast<std::uint64_t>(bucket.elements);
}

}  // namespace dtsim::algorithms
