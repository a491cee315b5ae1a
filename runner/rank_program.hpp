// One rank's training program, the same emulated and live: `steps` training steps
// (forward, backward, the algorithm's step, the step's record), evaluations of the
// rank-averaged model every eval_every steps, then the reductions that make every rank's
// RunResult identical (per-step records averaged over ranks, the averaged model's figures).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "comm/communicator.hpp"
#include "comm/trace_recorder.hpp"
#include "network_models/topology.hpp"
#include "runner/run.hpp"
#include "runner/scenario.hpp"
#include "sim/task.hpp"
#include "sim/trace_writer.hpp"
#include "workloads/workload_spec.hpp"

namespace dtsim::runner {

// What one rank runs, besides its communicator.
struct RankJob {
  const Scenario& scenario;
  const net::Topology& topology;
  std::shared_ptr<const workloads::WorkloadData> data;
  const RunOptions& options;
  sim::TraceWriter* trace = nullptr;          // the rank's phases go here (a --trace file or a live partial)
  comm::TraceRecorder* recorder = nullptr;    // when `comm` records its OpTrace: the replay's marks go here
  // False for the timing-only mode's representative, whose model is not the algorithm's:
  // the evaluations communicate but compute nothing.
  bool evaluate = true;
};

// Runs the job on `comm` and fills `result` (the same on every rank).
sim::Task<void> rank_program(comm::Communicator& comm, RankJob job, RunResult& result);

// Before any rank starts (whose errors the engine reports as a rank's failure): what counts
// epochs (the lr schedule, sparsified SGD's compression-ratio warm-up) needs a workload with
// data; rank 0's fails as every rank's would. Also the algorithm entry's check of the
// workload's parameters (AlgorithmEntry::check_parameters), where it has one.
void check_epoch_counting(const Scenario& s, const net::Topology& topology,
                          const std::shared_ptr<const workloads::WorkloadData>& data);

}  // namespace dtsim::runner
