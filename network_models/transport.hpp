// net::Transport: moves point-to-point messages over the topology in simulated time.
//
// The network models (network_model.hpp) use two, which share one interface (send a
// message; be called back when its last byte arrives):
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

class Transport : private sim::Engine::Handler {
 public:
  // What a message tells on arrival when sent with a sink instead of a function: one
  // virtual call with the sender's tag, no allocation per message (collective
  // executions send millions).
  class Sink {
   public:
    virtual ~Sink() = default;
    virtual void message_arrived(std::uint64_t tag) = 0;
  };

  Transport(sim::Engine& engine, Topology topology, Perturbations perturbations);
  virtual ~Transport() = default;
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;

  virtual std::string name() const = 0;
  // Sends `bytes` from node `src` to node `dst` now; `arrived` runs at the time the
  // last byte arrives.
  void send(int src, int dst, double bytes, std::function<void()> arrived);
  // The same, telling `sink` (kept alive until then) `tag` at that time.
  void send(int src, int dst, double bytes, std::shared_ptr<Sink> sink, std::uint64_t tag);

  const Topology& topology() const { return topology_; }
  sim::Engine& engine() { return engine_; }
  // Record every message as a span (send to last byte) on a track per (src, dst) pair.
  void record_to(sim::TraceWriter* trace) { trace_ = trace; }
  std::uint64_t messages_sent() const { return messages_; }
  double bytes_sent() const { return bytes_; }

 protected:
  // Message `message` has paid its overhead and latency; its bytes start flowing now.
  // The transport calls deliver(message) (or schedules it) when the last byte arrives.
  virtual void transmit(const Topology::Route& route, double bytes, int message) = 0;
  // Tells the message's receiver that it has arrived, and frees the message.
  void deliver(int message);
  // Schedules deliver(message) at absolute time `t`.
  void deliver_at(double t, int message);
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
  // Messages in flight, by id, recycled through a free list: the engine's events and the
  // flows refer to them by id, so a message costs no allocation once the pool has grown.
  struct Message {
    std::function<void()> arrived;  // either this,
    std::shared_ptr<Sink> sink;     // or this with the tag
    std::uint64_t tag = 0;
    double bytes = 0.0;
    double sent_at = 0.0;
    const Topology::Route* route = nullptr;  // looked up at send, valid while
    std::uint64_t routes_version = 0;        // the topology's routes are this version
    int src = 0, dst = 0;
  };
  int new_message(int src, int dst, double bytes);
  void send_message(int message);
  // The engine's events for messages: arg = message id << 1 | 1 to start the transfer
  // after the latency phase, << 1 | 0 to deliver.
  void on_event(std::uint64_t arg) override;
  std::vector<Message> in_flight_;
  std::vector<int> free_messages_;
};

class UncontendedTransport final : public Transport {
 public:
  using Transport::Transport;
  std::string name() const override { return "alpha_beta"; }

 protected:
  void transmit(const Topology::Route& route, double bytes, int message) override;
};

class FlowTransport final : public Transport {
 public:
  FlowTransport(sim::Engine& engine, Topology topology, Perturbations perturbations);
  std::string name() const override { return "flow"; }
  std::size_t active_flows() const { return active_count_; }
  std::uint64_t rate_solves() const { return solves_; }

 protected:
  void transmit(const Topology::Route& route, double bytes, int message) override;
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
    int message = -1;           // the Transport's message this flow carries
    int src = 0, dst = 0;
    bool active = false;
  };
  struct Due {  // a completion candidate; stale when the flow's version moved on
    double time;
    std::uint64_t sequence;  // start order, so simultaneous completions keep it
    int flow;
    std::uint64_t version;
    bool operator<(const Due& o) const { return time != o.time ? time < o.time : sequence < o.sequence; }
  };
  // The completion candidates in (time, start order) order. A solve's candidates arrive
  // together and mostly in order already (a batch of flows that started together):
  // each batch is sorted once into a run, and the runs are merged through a small heap
  // of their fronts, so taking the next candidate is O(1) plus a sift among the few
  // live batches rather than a sift through one heap of every flow.
  class DueQueue {
   public:
    void push(const Due& d) { open_.push_back(d); }  // into the open batch
    void seal();  // closes the open batch: its candidates become visible
    bool empty() const { return heap_.empty(); }
    const Due& top() const { return runs_[heap_.front()].entries[runs_[heap_.front()].pos]; }
    void pop();

   private:
    struct Run {
      std::vector<Due> entries;
      std::size_t pos = 0;
    };
    bool later(int a, int b) const {  // for a min-heap of run ids by front
      return runs_[b].entries[runs_[b].pos] < runs_[a].entries[runs_[a].pos];
    }
    void sift_down(std::size_t i);
    std::vector<Due> open_;
    std::vector<Run> runs_;
    std::vector<int> free_runs_;
    std::vector<int> heap_;  // binary min-heap of the non-empty runs
  };
  void mark_dirty(int link);
  void request_solve();
  // Max-min rates for the flows connected (through shared links) to the dirty links:
  // rates elsewhere cannot change, so only that component is re-solved.
  void solve();
  void solve_alone(int id, double now);
  void fill(std::size_t first_link, double now);
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
  DueQueue due_;
  double scheduled_at_ = -1.0;  // time of the pending completion event, or -1
  bool solve_pending_ = false;
  std::uint64_t solves_ = 0;
  // Solver workspaces, reused across solves.
  std::vector<double> capacity_;
  std::vector<int> unfrozen_, component_links_, component_flows_;
  std::vector<std::pair<double, int>> share_heap_;
  std::vector<char> link_seen_, flow_seen_;
  std::vector<int> completed_;  // messages completed at this instant (complete_due's scratch)
};

// The transport of the network model named `model` (network_model.hpp; the analytical
// model's is the uncontended one); throws std::invalid_argument for an unknown name.
std::unique_ptr<Transport> make_transport(const std::string& model, sim::Engine& engine, Topology topology,
                                          Perturbations perturbations);

}  // namespace dtsim::net
