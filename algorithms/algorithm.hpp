// algorithms::Algorithm: one rank's distributed optimizer step, written once against
// comm::Communicator and run unchanged on every backend.
#pragma once

#include <ATen/ATen.h>

#include <any>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "comm/communicator.hpp"
#include "algorithms/lr_schedule.hpp"
#include "kernels/compressor.hpp"
#include "comm/phase_timer.hpp"
#include "network_models/topology.hpp"
#include "sim/task.hpp"

namespace dtsim::algorithms {

// Local optimizer hyper-parameters, applied as the reference apply_gradient does.
struct OptimizerSpec {
  double lr = 0.1;  // the scenario's; each step runs at StepContext::lr, which lr_schedule derives from it
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;
  // Per-tensor L2 clipping of d after weight decay, before momentum (the reference DGC's
  // _clip_gradient): d <- (c / |d|) d when |d| >= c. 0: none. Not a scenario field as such:
  // sparsified SGD sets it from its clip_grad_norm, scaled by 1/sqrt(ranks) as the reference does.
  double clip_norm = 0.0;
  LrScheduleSpec lr_schedule;
  // Per parameter tensor: false skips weight decay on it. Not a scenario field: the training
  // loop fills it from the workload's parameter names (weight_decay_mask in
  // apply_gradient.hpp, the reference's parameter groups); empty decays every tensor.
  std::vector<bool> weight_decay_mask;
};

// Everything a scenario can say about an algorithm. Each algorithm reads the fields it
// uses; algorithm_fields(name) lists them, and a scenario setting any other is an error.
struct AlgorithmSpec {
  std::string name;     // see algorithm_names()
  std::string variant;  // parallel_sgd: "centralized" or "decentralized"
  OptimizerSpec optimizer;
  kernels::CompressorSpec compressor;      // C, for the compressed algorithms
  double consensus_stepsize = 1.0;         // gamma (CHOCO-SGD, DeepSqueeze)
  bool overlap = true;                     // CHOCO-SGD: round t's exchange overlaps round t+1's compute
  std::int64_t local_steps = 1;            // H (local SGD family): sync every H-th step
  std::int64_t turn_on_local_steps_from = 0;  // post-local SGD: every step syncs before this step index
  bool majority_vote = true;               // sign SGD: sign of the sum (true) or the mean of signs
  bool mask_momentum = false;              // sparsified SGD: zero momentum at the sent coordinates
  double clip_grad_norm = 0.0;             // sparsified SGD: the reference's clip_grad_val (0: no clipping)
  double compress_warmup_epochs = 0.0;     // sparsified SGD: the reference's compression-ratio warm-up
  std::vector<double> compress_warmup_ratios;  // sparsified SGD: fractions kept during the warm-up (loader's default)
  bool packed_signs = false;               // local EF-sign SGD: 1-bit packed exchange instead of fp32 all-reduce
  // distopt (Apache SINGA's DistOpt; variant "sync", "half", "partial" or "sparse"):
  std::int64_t threshold = 2097152;        // elements: larger tensors are reduced alone, smaller ones fused
  std::int64_t buffer_size = 4194304;      // elements of the fused buffer; needs threshold <= buffer_size / 2
  bool clipping = false;                   // half: clip every gradient element to [-clip_value, clip_value]
  double clip_value = 100.0;
  double spars = 0.05;                     // sparse: fraction kept (top_k) or magnitude threshold
  bool top_k = false;                      // sparse: top-k by magnitude instead of |g| >= spars
  bool corr = true;                        // sparse: error-feedback residual per partition
  bool padded_exchange = true;             // sparse threshold mode: SINGA's count all-gather and padded blocks
  // ddp (PyTorch DistributedDataParallel's bucketed all-reduce with a comm hook):
  double bucket_cap_mb = 25.0;             // every bucket after the first closes at this size (MB = 2^20 bytes)
  double first_bucket_mb = 1.0;            // the first bucket's cap (PyTorch's _DEFAULT_FIRST_BUCKET_BYTES)
  std::string hook = "allreduce";          // "allreduce", "fp16_compress", "bf16_compress" or "powersgd"
  // parallel_sgd centralized: "none" (the plain all-reduce) or "powersgd" (the fields below)
  std::string gradient_compression = "none";
  // powersgd (PyTorch's PowerSGDState; ddp's powersgd hook, parallel_sgd's powersgd):
  std::int64_t matrix_approximation_rank = 1;
  std::int64_t start_powerSGD_iter = 1000;  // plain all-reduce while the iteration (from 0) is below it
  double min_compression_rate = 2.0;         // compress n x m only when n m > (n + m) r min_compression_rate
  bool use_error_feedback = true;
  bool warm_start = true;
  double orthogonalization_epsilon = 0.0;
  std::uint64_t random_seed = 0;             // Q's initial draws (an at::Generator, the same on every rank)
  // The entry's own settings struct, for algorithms whose fields are not among the shared
  // ones above: the entry's parse stores it, its to_json, memory and factory read it back
  // with settings_of<T>. A default is written once, in that struct.
  std::any settings;
  // The workload's parameter names, in parameter order. Not a scenario field: the training
  // loop fills it (runner/rank_program.cpp) for the algorithms that group tensors by name
  // (Streaming DiLoCo's fragments of transformer blocks); empty where nobody filled it.
  std::vector<std::string> parameter_names;
};

// The settings struct an entry's parse stored in spec.settings (std::bad_any_cast for another type).
template <class Settings>
const Settings& settings_of(const AlgorithmSpec& spec) {
  return std::any_cast<const Settings&>(spec.settings);
}

// The backward pass of the current step, for algorithms that overlap communication with
// it (Algorithm::drives_backward). Stage k computes the gradients of stage_params(k) into
// StepContext::grads and advances the rank's clock by the stage's compute time; stages run
// in order 0..stages()-1, each exactly once per step.
class BackwardPass {
 public:
  virtual ~BackwardPass() = default;
  virtual std::size_t stages() const = 0;
  virtual const std::vector<std::size_t>& stage_params(std::size_t k) const = 0;
  virtual sim::Task<void> run_stage(std::size_t k) = 0;
};

// The parameter indices in the order `backward`'s stages produce their gradients (for the
// algorithms that bucket or fuse gradients as they appear: DistOpt, DDP). Throws
// std::logic_error naming `who` when a stage lists a parameter twice or out of range, or
// the stages do not produce all `n_params` gradients.
std::vector<std::size_t> gradient_ready_order(const BackwardPass& backward, std::size_t n_params, const char* who);

// What a step needs from the training loop.
struct StepContext {
  comm::Communicator& comm;
  comm::PhaseTimer& timer;
  std::vector<at::Tensor>& params;  // updated in place
  std::vector<at::Tensor>& grads;   // this step's local gradients (may be overwritten)
  std::int64_t local_index;         // t, the local step index, starting at 1
  double lr;                        // this step's learning rate (LrSchedule::at(t)), for every use of lr
  // Set only for algorithms that drive the backward pass (drives_backward() true): the
  // training loop then runs forward only, and the step runs every backward stage itself.
  BackwardPass* backward = nullptr;
  // Epochs of the rank's shard done at this step, e = t / S (S = ceil(shard / batch) steps
  // per epoch, the lr schedule's count); NaN for a workload without data. Read by what is
  // scheduled in epochs besides the lr (sparsified SGD's compression-ratio warm-up).
  double epoch = std::numeric_limits<double>::quiet_NaN();
};

class Algorithm {
 public:
  virtual ~Algorithm() = default;
  // One optimizer step. Returns n_bits: the bits this rank transmits in the step,
  // under the reference implementation's convention for this algorithm.
  virtual sim::Task<std::uint64_t> step(StepContext& ctx) = 0;
  // Joins communication still in flight after the last step (CHOCO-SGD's overlapped
  // exchange); called once, after the last step. Most algorithms have nothing to join.
  virtual sim::Task<void> finish(comm::Communicator& /*comm*/) { co_return; }
  // Called once with the initial parameters, before the first step (SINGA's partial
  // update averages them over ranks). Most algorithms have nothing to do.
  virtual sim::Task<void> start(comm::Communicator& /*comm*/, std::vector<at::Tensor>& /*params*/) { co_return; }
  // Called on every rank before the model is evaluated between steps and after the last
  // step (SINGA's partial update replaces every rank's parameters by their average, as
  // its example does before each evaluation). Most algorithms leave them alone.
  virtual sim::Task<void> before_evaluation(comm::Communicator& /*comm*/, std::vector<at::Tensor>& /*params*/) {
    co_return;
  }
  // Bytes of the model-sized state the algorithm keeps between steps (replicas, memories;
  // not the momentum buffer or per-step scratch), at its peak so far.
  virtual std::uint64_t state_bytes() const { return 0; }
  // True when step() runs the backward pass itself through StepContext::backward, to
  // overlap communication with it; the training loop then does not run backward.
  virtual bool drives_backward() const { return false; }
};

// The names of registry.hpp's table (algorithm_entries()), in its order.
const std::vector<std::string>& algorithm_names();
// The scenario fields (keys of the "algorithm" object besides "name") that algorithm
// `name` reads; setting any other is an error naming the field.
const std::vector<std::string>& algorithm_fields(const std::string& name);

// Builds `spec` (as the loader checked it) for `rank` with its entry's factory.
std::unique_ptr<Algorithm> make_algorithm(const AlgorithmSpec& spec, const net::Topology& topology, int rank);

// What one rank of `spec` keeps and sends, for the up-front resource estimate
// (runner/resource_estimate.hpp): a static count per algorithm, an upper bound read off
// its members (each algorithm's entry lists them), not a measurement. Units: the model (its fp32
// parameters) and the payload (one compressed message of the model).
struct MemoryFootprint {
  // Model-sized buffers besides the parameters, the gradients and the momentum buffer:
  // flat copies, replicas, error memories, scratch.
  double model_buffers = 0.0;
  // Model-sized buffers per gossip neighbour (DCD/ECD-PSGD's replicas x^_j).
  double model_buffers_per_peer = 0.0;
  // Exchanges with the gossip neighbours every step: the rank keeps one payload received
  // per neighbour, its own and the copy in flight.
  bool gossips = false;
  // All-gathers a payload from every rank every step: every rank's output holds one
  // block per rank (the emulated world clones them), the world one more set.
  bool gathers = false;
  // Bytes of a payload per byte of the model (1: uncompressed fp32; a top-k 1 % message
  // of values and indices 0.02; threshold kinds, whose size depends on the data, 0.2).
  double payload_fraction = 1.0;
  // Collectives (all-reduces, all-gathers or exchanges) per step, on average over `steps`.
  double collectives_per_step = 1.0;
};
// `sizes`: the workload's tensor sizes in backward order (DistOpt's partitions).
MemoryFootprint memory_footprint(const AlgorithmSpec& spec, std::span<const std::int64_t> sizes, std::int64_t steps);

}  // namespace dtsim::algorithms
