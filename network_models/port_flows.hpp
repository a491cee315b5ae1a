// net::PortFlows: the ports of a described machine (MachineClock::ports(): each GPU's way
// out and way in, each NIC's) shared by the transfers on them, as the flow model shares
// links. A transfer is what the machine's clock times alone: a point-to-point message
// holds its sender's way out and its receiver's way in for its wire time; a collective's
// data holds every port for its wire time (NCCL's kernels drive every GPU's links and the
// nodes' NICs at once; its latencies, which follow, hold none: CollectiveStream).
// A transfer uses a share of each of its ports at its own pace: a collective all of every
// port, a message what its channels carry of the port's speed (nccl/collective_time.hpp's
// point-to-point), so messages to several peers whose shares fit a port run side by side
// at their own paces. Transfers on a port share its time by max-min fairness (progressive
// filling: every transfer's pace rises together until a port's time is used up by the
// shares of the transfers on it, which then stay at that pace, the time a transfer limited
// elsewhere cannot use going to the others), recomputed whenever one starts or ends: a
// transfer alone runs at its own pace (its time, exactly), two whole-port transfers on one
// port each at half of it, a collective at the pace of its busiest port.
//
// Rates are fractions of a transfer's own pace, so transfers of different speeds (a
// small message's LL protocol, NVLink beside a NIC) share a port's time, not its bytes.
// The transfers that start or end at one instant are solved together, in one event after
// the others due then; only the transfers connected to a changed port through shared
// ports are re-solved.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/engine.hpp"

namespace dtsim::net {

class PortFlows : private sim::Engine::Handler {
 public:
  // Told when one of its transfers has ended.
  class Client {
   public:
    virtual ~Client() = default;
    virtual void transfer_done(std::uint64_t tag) = 0;
  };

  PortFlows(sim::Engine& engine, int ports);
  PortFlows(const PortFlows&) = delete;
  PortFlows& operator=(const PortFlows&) = delete;

  int ports() const { return ports_; }
  // A transfer that alone takes `seconds` from now on the sender's way out at port
  // `egress` and the receiver's way in at `ingress` (ids in [0, ports())); `client` is
  // told `tag` when it ends and must outlive it. `share`: the fraction of each of its two
  // ports it uses at its own pace (a message that NCCL's channels for one peer hold below a
  // port's speed leaves the rest of the port to others); in (0, 1].
  void start(double seconds, int egress, int ingress, Client& client, std::uint64_t tag, double share = 1.0);
  // A transfer on every port, both ways.
  void start_everywhere(double seconds, Client& client, std::uint64_t tag);

  std::size_t active() const { return active_; }
  // Solves of the rates so far (for tests and benchmarks).
  std::uint64_t solves() const { return solves_; }

 private:
  static constexpr int kEverywhere = -1;
  struct Flow {
    double remaining = 0.0;  // seconds of work at its own pace
    double rate = 0.0;       // fraction of its pace it runs at
    double share = 1.0;      // fraction of each of its ports it uses at its own pace
    double updated_at = 0.0;
    std::uint64_t version = 0;  // bumped whenever its end is rescheduled
    std::uint64_t tag = 0;
    Client* client = nullptr;
    int egress = kEverywhere, ingress = kEverywhere;  // resources 2p (way out) and 2p + 1 (way in)
    bool active = false;
    bool seen = false;  // in the component being solved
    bool frozen = false;
  };
  struct Resource {
    std::vector<int> flows;  // the point-to-point transfers on it
    bool seen = false;
    double free = 0.0;  // a solve's capacity left
    int unfrozen = 0;
    double demand = 0.0;  // the unfrozen transfers' shares
    bool bottleneck = false;
  };

  int add(double seconds, int egress, int ingress, Client& client, std::uint64_t tag, double share);
  void remove(int flow);
  void touch(int resource);
  void request_solve();
  void solve();
  void on_event(std::uint64_t arg) override;

  sim::Engine& engine_;
  int ports_;
  std::vector<Flow> flows_;
  std::vector<int> free_flows_;
  std::vector<Resource> resources_;  // 2 per port
  std::vector<int> everywhere_;      // the transfers on every port
  std::vector<int> touched_;         // resources whose transfers changed since the last solve
  bool everywhere_changed_ = false;
  bool solve_pending_ = false;
  std::size_t active_ = 0;
  std::uint64_t solves_ = 0;
  // Scratch of a solve.
  std::vector<int> component_flows_, component_resources_;
  std::vector<double> rates_;
};

}  // namespace dtsim::net
