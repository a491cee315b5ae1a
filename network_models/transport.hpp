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

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "network_models/due_queue.hpp"
#include "network_models/exact_shortcuts.hpp"
#include "network_models/perturbations.hpp"
#include "network_models/topology.hpp"
#include "sim/engine.hpp"
#include "sim/trace_writer.hpp"

namespace dtsim::net {

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
  // The same, telling `sink` `tag` at that time. The sink must outlive the message (a
  // ScheduledExecution keeps itself alive while it has messages in flight): a plain
  // pointer, not a shared_ptr copy per message.
  void send(int src, int dst, double bytes, Sink& sink, std::uint64_t tag);

  const Topology& topology() const { return topology_; }
  sim::Engine& engine() { return engine_; }
  // Record every message as a span (send to last byte) on a track per (src, dst) pair.
  void record_to(sim::TraceWriter* trace) { trace_ = trace; }
  std::uint64_t messages_sent() const { return messages_; }
  double bytes_sent() const { return bytes_; }
  std::size_t messages_in_flight() const { return in_flight_.size() - free_messages_.size(); }
  // Messages in flight whose bytes have all arrived and whose receivers are being told
  // now (the flow model's batch of completions at this instant): they hold no link.
  virtual std::size_t messages_being_delivered() const { return 0; }
  // What collective reuse (collective_reuse.hpp) asks of a transport besides its
  // shortcuts' state (shortcuts()).
  // Whether messages in flight together change each other's times (the flow model).
  virtual bool messages_interact() const { return false; }
  bool jitters() const { return perturbations_.jitter_s > 0; }
  // Bandwidth changes and link failures fired so far.
  std::uint64_t perturbation_epoch() const { return perturbation_epoch_; }
  // The time of the first bandwidth change or failure at or after `t` (infinity if none).
  double next_perturbation_at_or_after(double t) const;
  // Drops every message in flight that tells `sink`: it never arrives, and frees the
  // links it holds (a replayed collective's own messages).
  void cancel(const Sink& sink);
  // Whether a message (and so a trace span) must exist for every transfer: a trace is
  // being recorded.
  bool records_messages() const { return trace_ != nullptr; }

  // The state the executor's exact shortcuts read and set (exact_shortcuts.hpp): traffic
  // counts, rounding ties, the replay guard, ring evaluation, link holds, alone paths.
  ExactShortcuts& shortcuts() { return shortcuts_; }
  const ExactShortcuts& shortcuts() const { return shortcuts_; }

 protected:
  // Message `message` has paid its overhead and latency; its bytes start flowing now
  // over `links` (its route's link ids, valid until the next link failure). The
  // transport calls deliver(message) (or schedules it) when the last byte arrives.
  virtual void transmit(std::span<const int> links, double bytes, int message) = 0;
  // Tells the message's receiver that it has arrived, and frees the message.
  void deliver(int message);
  // Schedules deliver(message) at absolute time `t`.
  void deliver_at(double t, int message);
  // Time `t` plus duration `d` (both non-negative), as every time a transport computes:
  // t + d on the engine's time grid (d in whole ticks below its horizon, so the sum is
  // exact: sim/time_grid.hpp), counting the shortcuts' rounding ties when asked to.
  double later(double t, double d) {
    d = engine_.time_grid().duration_at(t, d);
    const double sum = t + d;
    shortcuts_.on_sum(t, d, sum);
    return sum;
  }
  virtual void on_bandwidth_change() {}
  virtual void before_link_failure() {}  // routes are still valid here
  virtual void on_link_failure() {}      // routes have been recomputed
  // Messages were cancelled: drop the flows of those whose sink is discarded_sink().
  virtual void on_cancel() {}
  // Whether a flow is on `link` now.
  virtual bool carries_flow(int /*link*/) const { return false; }
  // A transfer starts on `links` now: a conflict if one is held (link holds).
  void check_holds(std::span<const int> links) { shortcuts_.on_transfer(links); }
  // A model's own events (a solve, a completion), as cheap as a message's: no
  // std::function to store. on_model_event(code) runs at absolute time `t`; code < 2^60.
  void model_event_at(double t, std::uint64_t code);
  // The same at the current time, in the place of a sequence reserved earlier in this
  // event (sim::Engine::reserve_sequence).
  void model_event_now_reserved(std::uint64_t seq, std::uint64_t code);
  virtual void on_model_event(std::uint64_t /*code*/) {}
  // The transfers of one start event have all started.
  virtual void after_starts() {}
  // The sink of a cancelled message: arrives nowhere.
  static Sink& discarded_sink();
  bool cancelled(int message) const { return in_flight_[message].sink == &discarded_sink(); }
  void free_message(int message) { free_messages_.push_back(message); }
  double link_bandwidth(int link) const { return bandwidth_[link]; }
  // A message's delay before its bytes flow, on a route of latency `route_latency_s`
  // (jitter aside), and the smallest bandwidth now of `links` (infinity for none).
  double fixed_delay(double route_latency_s) const { return perturbations_.overhead_s + route_latency_s; }
  double bottleneck(std::span<const int> links) const;
  int message_src(int message) const { return in_flight_[message].src; }
  int message_dst(int message) const { return in_flight_[message].dst; }

  sim::Engine& engine_;
  Topology topology_;

 private:
  // A route short enough to copy: most routes of direct topologies (ring, torus) have
  // one or two links, and a copy saves two dependent loads (the Route, its vector's
  // storage) per message when its bytes start to flow.
  static constexpr int kInlineLinks = 4;
  Perturbations perturbations_;
  std::vector<double> bandwidth_;  // current bandwidth per directed link
  std::mt19937_64 jitter_rng_;
  sim::TraceWriter* trace_ = nullptr;
  std::uint64_t messages_ = 0;
  double bytes_ = 0.0;
  std::uint64_t perturbation_epoch_ = 0;
  friend class ExactShortcuts;  // alone paths read the routes and bandwidths, and add as later() does
  ExactShortcuts shortcuts_;
  // Messages in flight, by id, recycled through a free list: the engine's events and the
  // flows refer to them by id, so a message costs no allocation once the pool has grown.
  // One cache line each; a function to call on arrival, rare in bulk traffic, lives
  // apart (arrived_[id]).
  struct alignas(64) Message {
    Sink* sink = nullptr;  // when null, arrived_[id] is called
    std::uint64_t tag = 0;
    double bytes = 0.0;
    double sent_at = 0.0;
    union {
      int links[kInlineLinks];          // the route's links, when hops <= kInlineLinks
      const Topology::Route* route;     // otherwise the route looked up at send
    };
    std::uint32_t routes_version = 0;   // (low bits of) the routes' version at send
    int src = 0, dst = 0;
    int hops = 0;
  };
  // The last route each source node sent on: a collective's rank sends to the same one
  // or few peers step after step, so this answers most lookups with one load instead of
  // a probe into the route table (a hash, a slot, the Route).
  struct LastRoute {
    int dst = -1;
    int hops = 0;
    std::uint64_t routes_version = 0;
    const Topology::Route* route = nullptr;
    double latency_s = 0.0;  // route->latency_s, without loading the Route
    int links[kInlineLinks] = {};
  };
  int new_message(int src, int dst, double bytes);
  void send_message(int message);
  // The engine's events: arg = payload << 2 | kind, the payload a message id (start its
  // transfer after the latency phase, or deliver it) or a model event's code.
  enum EventKind : std::uint64_t { kDeliver = 0, kStartTransfer = 1, kModelEvent = 2 };
  void on_event(std::uint64_t arg) override;
  std::vector<Message> in_flight_;
  // Messages whose bytes start to flow at one time, sent one after another with nothing
  // scheduled in between (a collective step's sends): their starts would be consecutive
  // events, firing back to back, so one event starts them all in send order.
  // next_start_[id] is the message started after `id` (-1: none); the open batch is the
  // one sends may still join.
  std::vector<int> next_start_;
  struct OpenStartBatch {
    int head = -1, tail = -1;  // -1: none open
    double time = 0.0;
    std::uint64_t scheduled = 0;  // engine_.events_scheduled() after its event
  } open_starts_;
  void schedule_start(double t, int message);
  void start_transfer(int message);
  std::vector<std::function<void()>> arrived_;
  std::vector<int> free_messages_;
  std::vector<LastRoute> last_route_;  // per source node
};

inline double ExactShortcuts::alone_arrival(const AlonePath& path, double t, double bytes) const {
  const double start = transport_.later(t, path.delay);
  return path.to_self ? start : transport_.later(start, bytes / path.bottleneck);
}

class UncontendedTransport final : public Transport {
 public:
  using Transport::Transport;
  std::string name() const override { return "alpha_beta"; }

 protected:
  void transmit(std::span<const int> links, double bytes, int message) override;
};

class FlowTransport final : public Transport {
 public:
  FlowTransport(sim::Engine& engine, Topology topology, Perturbations perturbations);
  std::string name() const override { return "flow"; }
  bool messages_interact() const override { return true; }
  std::size_t messages_being_delivered() const override { return delivering_; }
  std::size_t active_flows() const { return active_count_; }
  std::uint64_t rate_solves() const { return solves_; }

 protected:
  void transmit(std::span<const int> links, double bytes, int message) override;
  void on_bandwidth_change() override;
  void before_link_failure() override;
  void on_link_failure() override;
  void on_cancel() override;
  void on_model_event(std::uint64_t code) override;
  bool carries_flow(int link) const override { return links_[static_cast<std::size_t>(link)].count > 0; }

 private:
  static constexpr int kInlineLinks = 4;
  // One cache line per flow: everything a solve, a completion and a detach read.
  struct alignas(64) Flow {
    union {
      int inline_links[kInlineLinks];  // the route's links when hops <= kInlineLinks,
      const int* long_links;           // else the topology's (refreshed on failures)
    };
    double remaining = 0.0;
    double rate = 0.0;
    double updated_at = 0.0;
    std::uint64_t start_order = 0;  // start order, so simultaneous completions keep it
    std::uint64_t version = 0;      // bumped whenever the finish time changes
    int message = -1;               // the Transport's message this flow carries
    std::uint16_t hops = 0;
    bool active = false;
    bool seen = false;  // in the component being solved
    std::span<const int> links() const { return {hops <= kInlineLinks ? inline_links : long_links, hops}; }
  };
  // The active flows on one directed link, in attach order (the first two inline, the
  // rest in `more`), with what a solve reads of the link: half a cache line per link
  // instead of a list's header, its storage, two flags and the bandwidth in five arrays.
  // Two inline because a ring's link carries one flow, or two where rows wrap; half a
  // line because at 4,096 ranks the links' records are a good share of what no longer
  // fits in L2 (attach's load of `count` was 80 % of its time at 64 x 64).
  struct alignas(32) LinkState {
    static constexpr int kInline = 2;
    int count = 0;
    bool seen = false;  // in the component being solved
    int first[kInline] = {};
    std::unique_ptr<std::vector<int>> more;  // the flows after the first kInline
    double bandwidth = 0.0;
    int at(int i) const { return i < kInline ? first[i] : (*more)[static_cast<std::size_t>(i - kInline)]; }
    void add(int id);
    void remove(int id);
    template <typename F>
    void for_each(F&& f) const {
      for (int i = 0; i < count && i < kInline; ++i) f(first[i]);
      if (count > kInline)
        for (int id : *more) f(id);
    }
  };
  static_assert(sizeof(LinkState) == 32);
  enum ModelEvent : std::uint64_t { kSolve = 0, kCompletion = 1 };
  void mark_dirty(int link);
  // A solve at this instant, in a solve event after those already due now.
  void request_solve();
  // The same, decided at the end of this event (settle_solve): with nothing else due at
  // this instant the solve event would fire next, so the solve runs then and there
  // instead; otherwise the event is scheduled in the place reserved at the request.
  // What fires, and in what order, is the same but for the event left out.
  void defer_solve();
  void settle_solve();
  void after_starts() override { settle_solve(); }
  // Max-min rates for the flows connected (through shared links) to the dirty links:
  // rates elsewhere cannot change, so only that component is re-solved.
  void solve();
  bool alone(const Flow& f) const;  // the only flow on each of its links
  static void copy_short_route(std::span<const int> from, int* to);  // from.size() <= kInlineLinks
  void solve_alone(int id, double now);
  void fill(std::size_t first_link, double now);
  void schedule_next_completion();
  void complete_due();
  void attach(int id);
  // attach(id), marking its links dirty only when it shares one: true when it is alone
  // (and then `bottleneck` is its links' smallest bandwidth).
  bool attach_if_alone(int id, double& bottleneck);
  // solve_alone's second half, the rate known: the flow's own links' bottleneck.
  void give_alone_rate(int id, double now, double rate);
  void detach(int id);

  std::vector<Flow> flows_;
  std::vector<int> free_ids_;
  std::uint64_t started_ = 0;
  std::size_t active_count_ = 0;
  std::vector<LinkState> links_;  // per directed link
  std::vector<int> dirty_links_;
  DueQueue due_;
  double scheduled_at_ = -1.0;  // time of the pending completion event, or -1
  bool solve_pending_ = false;
  bool solve_deferred_ = false;           // solve_pending_ by defer_solve, not yet settled
  std::uint64_t deferred_solve_seq_ = 0;  // the sequence its event would take
  std::uint64_t solves_ = 0;
  // Solver workspaces, reused across solves.
  std::vector<double> capacity_;
  std::vector<int> unfrozen_, component_links_, component_flows_;
  std::vector<std::pair<double, int>> share_heap_;
  std::vector<int> completed_;  // messages completed at this instant (complete_due's scratch)
  std::size_t delivering_ = 0;  // of them, not yet delivered
};

// The transport of the network model named `model` (network_model.hpp; the analytical
// model's is the uncontended one), evaluating rings where the model's entry allows it;
// throws std::invalid_argument for an unknown name.
std::unique_ptr<Transport> make_transport(const std::string& model, sim::Engine& engine, Topology topology,
                                          Perturbations perturbations);

}  // namespace dtsim::net
