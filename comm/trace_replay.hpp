// comm::replay_trace: one rank of a timing-only run — the representative rank's OpTrace
// (comm/op_trace.hpp) issued again on this rank's Communicator with size-only tensors
// (LibTorch's meta device: shapes and dtypes, no storage), so the emulated network times
// every rank's messages while no rank but the representative holds model-sized data.
//
// Compute phases take the recorded seconds (the world's straggler slowdown still applies
// per rank); operations are issued and awaited in the recorded order; phases are timed
// on `timer` as the representative timed them; peers are the same slots of this rank's
// gossip neighbours. The record has the figures rank_program measures per step.
#pragma once

#include <vector>

#include "comm/communicator.hpp"
#include "comm/op_trace.hpp"
#include "comm/phase_timer.hpp"
#include "sim/task.hpp"

namespace dtsim::comm {

struct ReplayRecord {
  // Per step, between TraceMark::StepBegin and StepEnd:
  std::vector<double> step_time_s, compute_time_s, wire_bytes, calls, n_bits;
  std::vector<std::vector<double>> phase_s;  // per step, indexed like timer.names()
  // Per evaluation: the clock when it began, minus the evaluations before it.
  std::vector<double> eval_time_s;
  double end_time_s = 0.0;  // the clock at TraceMark::End, minus every evaluation
};

// The compute cost that takes exactly `seconds` under replay_compute_model().
sim::ComputeCost replay_cost(double seconds);
// The compute model of a replay world: cost.flops are seconds.
sim::ComputeModel replay_compute_model();

sim::Task<ReplayRecord> replay_trace(Communicator& comm, const OpTrace& trace, std::vector<int> neighbours,
                                     PhaseTimer& timer);

}  // namespace dtsim::comm
