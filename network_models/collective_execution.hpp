// net::Execution: one collective (or neighbour exchange) in flight on the network.
//
// Ranks enter it at their own times (arrive); each is told when it is done. Two kinds:
// - ScheduledExecution runs a Schedule's point-to-point steps over a Transport, so a
//   rank starts sending as soon as it arrives, and contention with other traffic on the
//   same transport is modelled by the transport.
// - ClosedFormExecution (model "analytical") waits for the last rank and finishes
//   everyone a closed-form time later: no contention, cheapest, for big sweeps.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "network_models/schedule.hpp"
#include "network_models/transport.hpp"

namespace dtsim::net {

class Execution {
 public:
  using RankDone = std::function<void(int rank)>;
  virtual ~Execution() = default;
  // Rank `rank` enters the collective at the current simulated time.
  virtual void arrive(int rank) = 0;
};

class ScheduledExecution final : public Execution, public std::enable_shared_from_this<ScheduledExecution> {
 public:
  ScheduledExecution(Transport& transport, std::shared_ptr<const Schedule> schedule, RankDone done);
  void arrive(int rank) override;
  const Schedule& schedule() const { return *schedule_; }

 private:
  // Per-peer counters in a small flat list: a step talks to few peers.
  struct PeerCounts {
    std::vector<std::pair<int, int>> items;
    int& operator[](int peer) {
      for (auto& [p, c] : items)
        if (p == peer) return c;
      return items.emplace_back(peer, 0).second;
    }
  };
  struct LaneState {
    std::size_t step = 0;
    int pending_sends = 0;
    int pending_receives = 0;
    PeerCounts waiting;  // peer -> receives of the current step not yet arrived
    PeerCounts mailbox;  // peer -> messages arrived before they were awaited
    bool started = false;
  };
  void start_step(int rank, int lane);
  void maybe_advance(int rank, int lane);
  void deliver(int to, int lane, int from);

  Transport& transport_;
  std::shared_ptr<const Schedule> schedule_;
  Step scratch_;
  RankDone done_;
  std::vector<std::vector<LaneState>> state_;
  std::vector<int> lanes_left_;
};

class ClosedFormExecution final : public Execution {
 public:
  ClosedFormExecution(sim::Engine& engine, int ranks, double seconds, RankDone done);
  void arrive(int rank) override;

 private:
  sim::Engine& engine_;
  double seconds_;
  RankDone done_;
  int arrived_ = 0;
  int ranks_;
  double last_ = 0.0;
};

// Runs one schedule alone on a fresh engine and transport: every rank arrives at
// `arrival[r]`; returns the time each rank is done. For tests and `dtsim collective`.
std::vector<double> simulate(const std::string& model, const Topology& topology, const Schedule& schedule,
                             const std::vector<double>& arrival, const Perturbations& perturbations = {});

}  // namespace dtsim::net
