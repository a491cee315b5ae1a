// DDP's communication hooks (PyTorch's DistributedDataParallel.register_comm_hook and the
// hooks of torch/distributed/algorithms/ddp_comm_hooks): what a full bucket's flat fp32
// gradient becomes on the wire, and how the rank gets the average back. ddp.hpp builds
// the buckets, stages the gradients into them as backward produces them, hands each full
// bucket to its hook, and after backward copies the hook's result back into the gradients.
//
// ddp_hooks() is the only list of the hooks: each is its file in algorithms/ddp_hooks/
// (its DdpHook and its entry: name, description, its own /algorithm fields and their
// parse / echo, the buffers it adds) and one line in ddp_hooks.cpp's table. The scenario's
// `hook` choices, the ddp entry's fields, the check that a field belongs to the chosen
// hook, its echo and the memory estimate read the table.
#pragma once

#include <ATen/ATen.h>

#include <any>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "algorithms/algorithm.hpp"
#include "algorithms/memory_footprint.hpp"
#include "config/object_reader.hpp"

namespace dtsim::algorithms {

// One gradient's place in a bucket.
struct DdpSlot {
  std::size_t param = 0;    // index into the parameters
  std::int64_t offset = 0;  // element offset in the bucket's buffer
};

struct DdpBucket {
  std::vector<DdpSlot> slots;  // in ready order
  std::int64_t elements = 0;
  at::Tensor buffer;  // fp32, PyTorch's bucket.buffer()
};

// What a hook sees of a step.
struct DdpHookStep {
  StepContext& ctx;
  std::vector<DdpBucket>& buckets;
  std::int64_t iteration = 0;  // steps completed before this one (PyTorch's state.iter)
};

class DdpHook {
 public:
  virtual ~DdpHook() = default;
  // Once, when the buckets are first built (step 1).
  virtual void init(std::span<const DdpBucket> /*buckets*/, std::span<const at::Tensor> /*params*/) {}
  // Bucket b is full: the hook's compute on the rank (phase sync/compress), then its
  // collectives on the rank's communication stream, appended to ops[b]. Returns n_bits.
  virtual sim::Task<std::uint64_t> bucket_ready(DdpHookStep& step, std::size_t b,
                                                std::vector<std::vector<comm::Op>>& ops) = 0;
  // After backward: leaves every bucket's average in result(). By default waits for each
  // bucket's collectives in order (phase sync/sync: the communication backward did not hide).
  virtual sim::Task<void> after_backward(DdpHookStep& step, std::vector<std::vector<comm::Op>>& ops);
  // Bucket b's averaged gradient, flat: its buffer, or the hook's own payload.
  virtual const at::Tensor& result(const DdpBucket& bucket, std::size_t /*b*/) const { return bucket.buffer; }
  // What the hook carries from one step to the next (PowerSGD's error and warm-start Q).
  virtual std::uint64_t state_bytes() const { return 0; }
};

struct DdpHookEntry {
  std::string name;
  std::string description;
  std::vector<std::string> fields;  // its own /algorithm fields
  // Its settings from the /algorithm object (reads its fields only); empty for none.
  std::function<std::any(config::ObjectReader&)> parse = [](config::ObjectReader&) { return std::any(); };
  std::function<void(const std::any&, nlohmann::json&)> to_json = [](const std::any&, nlohmann::json&) {};
  // The hook for these settings (default ones when empty). Throws std::logic_error naming
  // the field for settings PyTorch refuses (the parse refuses them first, with its path).
  std::function<std::unique_ptr<DdpHook>(const std::any&)> make;
  // Adds the hook's buffers and payload to DDP's footprint (its fp32 buckets).
  std::function<void(const std::any&, MemoryFootprint&)> memory = [](const std::any&, MemoryFootprint&) {};
  double collectives_per_bucket = 1.0;
};

const std::vector<DdpHookEntry>& ddp_hooks();
const DdpHookEntry* find_ddp_hook(const std::string& name);  // nullptr when unknown
std::vector<std::string> ddp_hook_names();
// The allreduce hook's work on bucket b: b <- (sum_r b^r) / W on the stream (comm::
// ReduceOp::Average: the sum in rank order, then / W, where PyTorch's allreduce_hook divides
// each rank's buffer by W first; the two agree bit for bit when W is a power of two).
// Returns its n_bits: 32 per element.
std::uint64_t all_reduce_bucket(DdpHookStep& step, std::size_t b, std::vector<std::vector<comm::Op>>& ops);
// The settings a hook's entry reads, or its defaults when `settings` is empty.
template <class S>
S hook_settings_or_default(const std::any& settings) {
  return settings.has_value() ? std::any_cast<const S&>(settings) : S{};
}

}  // namespace dtsim::algorithms
