// PyTorch's fp16_compress_hook and bf16_compress_hook (default_hooks.py): the bucket cast
// to half precision and divided by the ranks there (cast, then divide, as PyTorch: h =
// fp16(b) / W), all-reduced in that type (each addition rounded to it), and read back into
// fp32 when the gradients are copied out.
#include "algorithms/ddp_hook.hpp"

namespace dtsim::algorithms {

namespace {

class HalfPrecisionHook final : public DdpHook {
 public:
  explicit HalfPrecisionHook(at::ScalarType type) : type_(type) {}
  void init(std::span<const DdpBucket> buckets, std::span<const at::Tensor>) override { wire_.resize(buckets.size()); }

  sim::Task<std::uint64_t> bucket_ready(DdpHookStep& step, std::size_t b, std::vector<std::vector<comm::Op>>& ops) override {
    auto& bucket = step.buckets[b];
    const double W = static_cast<double>(step.ctx.comm.size());
    {
      auto phase = step.ctx.timer.phase("sync/compress");
      const double e = static_cast<double>(bucket.elements);
      co_await step.ctx.comm.compute({e, 8.0 * e}, [&] {  // cast (read 4, write 2), divide (read 2, write 2)
        wire_[b] = bucket.buffer.to(type_).div_(W);
      });
    }
    ops[b].push_back(step.ctx.comm.stream_all_reduce(wire_[b], comm::ReduceOp::Sum));
    co_return 16ULL * static_cast<std::uint64_t>(bucket.elements);
  }
  const at::Tensor& result(const DdpBucket&, std::size_t b) const override { return wire_[b]; }

 private:
  at::ScalarType type_;
  std::vector<at::Tensor> wire_;  // per bucket: the payload, then the average
};

void half_memory(const std::any&, MemoryFootprint& f) {
  f.model_buffers += 0.5;  // the payloads
  f.payload_fraction = 0.5;
}

}  // namespace

const DdpHookEntry& fp16_compress_hook_entry() {
  static const DdpHookEntry entry{
      .name = "fp16_compress",
      .description = "the bucket cast to fp16, divided by the ranks and all-reduced in fp16",
      .make = [](const std::any&) -> std::unique_ptr<DdpHook> { return std::make_unique<HalfPrecisionHook>(at::kHalf); },
      .memory = half_memory};
  return entry;
}

const DdpHookEntry& bf16_compress_hook_entry() {
  static const DdpHookEntry entry{
      .name = "bf16_compress",
      .description = "the bucket cast to bfloat16, divided by the ranks and all-reduced in bfloat16",
      .make = [](const std::any&) -> std::unique_ptr<DdpHook> { return std::make_unique<HalfPrecisionHook>(at::kBFloat16); },
      .memory = half_memory};
  return entry;
}

}  // namespace dtsim::algorithms
