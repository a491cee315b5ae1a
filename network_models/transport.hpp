// net::Transport: moves point-to-point messages over the topology in simulated time.
//
// Two models share one interface (send a message; be called back when its last byte
// arrives):
// - UncontendedTransport (model "alpha_beta"): a message over route R takes
//   overhead + sum of R's link latencies + bytes / min of R's bandwidths, whatever else
//   is in flight.
// - FlowTransport (model "flow"): after overhead and the route's latency, a message
//   is a flow over its route; concurrent flows share every link's bandwidth by max-min
//   fairness (progressive filling), recomputed whenever a flow starts or ends, as
//   SimGrid's flow model does (with its correction factors off). A flow of b bytes
//   alone on its route takes latency + b / bottleneck bandwidth, as above.
//
// Perturbations apply to both: a fixed per-message overhead, seeded jitter (extra
// latency uniform in [0, jitter) per message), link bandwidth changes at given times
// (a trace), and link failures at given times (routes are recomputed and flows in
// flight move to the new route; if the graph is disconnected the run stops with an
// error naming the link).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <queue>
#include <random>
#include <string>
#include <vector>

#include "network_models/topology.hpp"
#include "sim/engine.hpp"
#include "sim/trace_writer.hpp"

namespace dtsim::net {

struct BandwidthChange {
  double time_s;
  int a, b;  // the cable between nodes a and b (both directions)
  double bandwidth_bytes_per_s;
};

struct LinkFailure {
  double time_s;
  int a, b;
};

struct Perturbations {
  double overhead_s = 0.0;
  double jitter_s = 0.0;
  std::uint64_t jitter_seed = 0;
  std::vector<BandwidthChange> bandwidth_trace;
  std::vector<LinkFailure> failures;
};

class Transport {
 public:
  Transport(sim::Engine& engine, Topology topology, Perturbations perturbations);
  virtual ~Transport() = default;
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;

  virtual std::string name() const = 0;
  // Sends `bytes` from node `src` to node `dst` now; `arrived` runs at the time the
  // last byte arrives.
  void send(int src, int dst, double bytes, std::function<void()> arrived);

  const Topology& topology() const { return topology_; }
  sim::Engine& engine() { return engine_; }
  // Record every message as a span (send to last byte) on a track per (src, dst) pair.
  void record_to(sim::TraceWriter* trace) { trace_ = trace; }
  std::uint64_t messages_sent() const { return messages_; }
  double bytes_sent() const { return bytes_; }

 protected:
  // The message has paid its overhead and latency; its bytes start flowing now.
  virtual void transmit(const std::vector<int>& route, double bytes, std::function<void()> arrived) = 0;
  virtual void on_bandwidth_change() {}
  virtual void before_link_failure() {}  // routes are still valid here
  virtual void on_link_failure() {}      // routes have been recomputed
  double link_bandwidth(int link) const { return bandwidth_[link]; }

  sim::Engine& engine_;
  Topology topology_;

 private:
  Perturbations perturbations_;
  std::vector<double> bandwidth_;  // current bandwidth per directed link
  std::mt19937_64 jitter_rng_;
  sim::TraceWriter* trace_ = nullptr;
  std::uint64_t messages_ = 0;
  double bytes_ = 0.0;
};

class UncontendedTransport final : public Transport {
 public:
  using Transport::Transport;
  std::string name() const override { return "alpha_beta"; }

 protected:
  void transmit(const std::vector<int>& route, double bytes, std::function<void()> arrived) override;
};

class FlowTransport final : public Transport {
 public:
  FlowTransport(sim::Engine& engine, Topology topology, Perturbations perturbations);
  std::string name() const override { return "flow"; }
  std::size_t active_flows() const { return active_count_; }
  std::uint64_t rate_solves() const { return solves_; }

 protected:
  void transmit(const std::vector<int>& route, double bytes, std::function<void()> arrived) override;
  void on_bandwidth_change() override;
  void before_link_failure() override;
  void on_link_failure() override;

 private:
  struct Flow {
    const std::vector<int>* route = nullptr;  // the topology's cached route (refreshed on failures)
    double remaining = 0.0;
    double rate = 0.0;
    double updated_at = 0.0;
    double finish_at = 0.0;
    std::uint64_t version = 0;  // bumped whenever finish_at changes
    std::function<void()> arrived;
    int src = 0, dst = 0;
    bool active = false;
  };
  struct Due {  // a completion candidate; stale when the flow's version moved on
    double time;
    std::uint64_t sequence;  // start order, so simultaneous completions keep it
    int flow;
    std::uint64_t version;
    bool operator>(const Due& o) const { return time != o.time ? time > o.time : sequence > o.sequence; }
  };
  void mark_dirty(int link);
  void request_solve();
  // Max-min rates for the flows connected (through shared links) to the dirty links:
  // rates elsewhere cannot change, so only that component is re-solved.
  void solve();
  void schedule_next_completion();
  void complete_due();
  void attach(int id);
  void detach(int id);

  std::vector<Flow> flows_;
  std::vector<int> free_ids_;
  std::vector<std::uint64_t> start_order_;
  std::uint64_t started_ = 0;
  std::size_t active_count_ = 0;
  std::vector<std::vector<int>> on_link_;  // active flow ids per directed link
  std::vector<int> dirty_links_;
  std::vector<char> link_dirty_;
  std::priority_queue<Due, std::vector<Due>, std::greater<>> due_;
  double scheduled_at_ = -1.0;  // time of the pending completion event, or -1
  bool solve_pending_ = false;
  std::uint64_t solves_ = 0;
  // Solver workspaces, reused across solves.
  std::vector<double> capacity_;
  std::vector<int> unfrozen_, component_links_, component_flows_;
  std::vector<char> link_seen_, flow_seen_;
};

// Which transport a model name selects: "alpha_beta" or "flow".
std::unique_ptr<Transport> make_transport(const std::string& model, sim::Engine& engine, Topology topology,
                                          Perturbations perturbations);

}  // namespace dtsim::net
