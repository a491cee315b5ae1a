// algorithms::Algorithm: one rank's distributed optimizer step, written once against
// comm::Communicator and run unchanged on every backend.
#pragma once

#include <ATen/ATen.h>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "algorithms/algorithm_spec.hpp"
#include "algorithms/backward_pass.hpp"
#include "comm/communicator.hpp"
#include "comm/phase_timer.hpp"
#include "network_models/topology.hpp"
#include "sim/task.hpp"

namespace dtsim::algorithms {

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

// Builds `spec` (as the loader checked it) for `rank` with its entry's factory.
std::unique_ptr<Algorithm> make_algorithm(const AlgorithmSpec& spec, const net::Topology& topology, int rank);

}  // namespace dtsim::algorithms
