// comm::EmulatedWorld: every rank of a job in one process, as coroutines on one
// sim::Engine. Reductions, gathers and exchanges move and combine the real tensors;
// the network model decides when each rank's operation completes.
//
// Collectives are matched by call order: the k-th collective a rank issues meets the
// k-th of every other rank (as in MPI and c10d), and a mismatch (another operation,
// size or dtype) is an error naming both ranks. Point-to-point messages of `exchange`
// are matched first-in first-out per (sender, receiver) pair. Results become visible
// to a rank only when its operation completes in simulated time.
#pragma once

#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "comm/communicator.hpp"
#include "network_models/network_model.hpp"
#include "sim/engine.hpp"

namespace dtsim::comm {

// How compute phases advance a rank's simulated clock.
struct ComputeTiming {
  enum class Kind { CostModel, Measured };
  Kind kind = Kind::CostModel;  // the default: deterministic, reproducible outputs
  sim::ComputeModel model;
};

class EmulatedWorld {
 public:
  EmulatedWorld(sim::Engine& engine, std::shared_ptr<const net::NetworkModel> network, ComputeTiming timing);
  ~EmulatedWorld();
  EmulatedWorld(const EmulatedWorld&) = delete;
  EmulatedWorld& operator=(const EmulatedWorld&) = delete;

  int size() const { return network_->size(); }
  Communicator& communicator(int rank);
  sim::Engine& engine() { return engine_; }
  const net::NetworkModel& network() const { return *network_; }
  const ComputeTiming& timing() const { return timing_; }

 private:
  friend class EmulatedCommunicator;
  struct PendingCollective;
  struct Message;
  struct PendingReceive;

  // Registers rank `r`'s part of its `seq`-th collective; returns the pending record.
  // `variant` is the root of a broadcast, the ReduceOp of an all-reduce.
  PendingCollective& arrive(int rank, std::uint64_t seq, int kind, const at::Tensor& tensor, int variant,
                            std::vector<at::Tensor>* gather_outputs);
  void complete_all_reduce(PendingCollective& p);
  void complete_all_gather(PendingCollective& p);
  void complete_broadcast(PendingCollective& p);

  sim::Engine& engine_;
  std::shared_ptr<const net::NetworkModel> network_;
  ComputeTiming timing_;
  std::vector<std::unique_ptr<class EmulatedCommunicator>> ranks_;
  std::map<std::uint64_t, PendingCollective> collectives_;
  std::map<std::pair<int, int>, std::vector<Message>> in_flight_;         // (src, dst) FIFO
  std::map<std::pair<int, int>, std::vector<PendingReceive>> receivers_;  // (src, dst) FIFO
};

}  // namespace dtsim::comm
