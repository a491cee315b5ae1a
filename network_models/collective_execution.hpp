// net::Execution: one collective (or neighbour exchange) in flight on the network.
//
// Ranks enter it at their own times (arrive); each is told when it is done. Two kinds:
// - ScheduledExecution runs a Schedule's point-to-point steps over a Transport, so a
//   rank starts sending as soon as it arrives, and contention with other traffic on the
//   same transport is modelled by the transport.
// - ClosedFormExecution (models with closed-form collectives: "analytical") waits for the last rank and finishes
//   everyone a closed-form time later: no contention, cheapest, for big sweeps.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "network_models/collective_reuse.hpp"
#include "network_models/execution.hpp"
#include "network_models/machine_clock.hpp"
#include "network_models/network_model.hpp"
#include "network_models/port_flows.hpp"
#include "network_models/ring_wavefront.hpp"
#include "network_models/schedule.hpp"
#include "network_models/transport.hpp"
#include "sim/time_grid.hpp"

namespace dtsim::net {

class ScheduledExecution final : public Execution,
                                 public Transport::Sink,
                                 private RingWavefront::Hooks,
                                 public std::enable_shared_from_this<ScheduledExecution> {
 public:
  // With `reuse` enabled, the execution is recorded or replayed (collective_reuse.hpp)
  // when it can be; enabled or not, `reuse` restarts the run if its ring, computed on
  // the flow model, meets other traffic. `shape` names the collective (its kind, sizes,
  // algorithm, root, ranks).
  ScheduledExecution(Transport& transport, std::shared_ptr<const Schedule> schedule, RankDone done,
                     CollectiveReuse* reuse = nullptr, std::string shape = {});
  void arrive(int rank) override;
  const Schedule& schedule() const { return *schedule_; }
  // A message of this execution has arrived: `tag` packs sender, lane and receiver.
  void message_arrived(std::uint64_t tag) override;
  // Nothing else runs on this engine (simulate()): on the flow model a ring may be
  // computed from its recurrence with nothing to restart the run, since no other
  // traffic can meet it.
  void alone_on_its_engine() { alone_on_engine_ = true; }
  // Stops where it is (simulate_before's deadline passed): its messages in flight arrive
  // nowhere, its held links are released, and it no longer keeps itself alive for them.
  void abandon();

 private:
  // Per-peer counters: a step talks to few peers, so the first two are kept inline (no
  // pointer to chase when a message arrives) and any more in a list.
  struct PeerCounts {
    int peers[2] = {-1, -1};
    int counts[2] = {0, 0};
    std::unique_ptr<std::vector<std::pair<int, int>>> more;
    int& operator[](int peer) {
      for (int i = 0; i < 2; ++i)
        if (peers[i] == peer) return counts[i];
      if (more)
        for (auto& [p, c] : *more)
          if (p == peer) return c;
      for (int i = 0; i < 2; ++i)
        if (peers[i] < 0) {
          peers[i] = peer;
          return counts[i];
        }
      if (!more) more = std::make_unique<std::vector<std::pair<int, int>>>();
      return more->emplace_back(peer, 0).second;
    }
  };
  // One cache line per lane: a message's arrival touches its sender's and its
  // receiver's lanes, nothing else of the execution.
  struct alignas(64) LaneState {
    std::uint32_t step = 0;
    int pending_sends = 0;
    int pending_receives = 0;
    bool started = false;
    PeerCounts waiting;  // peer -> receives of the current step not yet arrived
    PeerCounts mailbox;  // peer -> messages arrived before they were awaited
  };
  // A message's tag: sender, lane, receiver.
  static constexpr int kPeerBits = 28, kLaneBits = 8;
  static constexpr int kMaxRanks = 1 << kPeerBits, kMaxLanes = 1 << kLaneBits;
  static std::uint64_t pack(int rank, int lane, int peer) {
    return (static_cast<std::uint64_t>(rank) << (kPeerBits + kLaneBits)) |
           (static_cast<std::uint64_t>(lane) << kPeerBits) | static_cast<std::uint64_t>(peer);
  }
  void start_step(int rank, int lane);
  void expect(LaneState& st, int peer);
  void send(int rank, int lane, int peer, double bytes);
  void maybe_advance(int rank, int lane);
  void deliver(int to, int lane, int from);
  void finish(int rank);  // the rank is done

  // A ring is computed from its recurrence instead of simulated message by message, the
  // same times bit for bit: on a transport whose messages never interact, all of it once
  // every rank has arrived (ring_recurrence.hpp); on the flow model, its alone senders as
  // their inputs become known, its coupled senders' messages sent, the alone senders'
  // links held for it (ring_wavefront.hpp).
  void decide_evaluation();
  bool start_wavefront();  // flow model: whether it can be computed so
  void arrive_evaluated(int rank);
  void arrive_in_wavefront(int rank);
  void send_at(int rank, int step, double at) override;
  void done_at(int rank, double at) override;
  void links_free_after(int rank, double at) override;
  void send_in_wavefront(int rank, int step);
  void release_links();  // replayed instead
  int arrivals_ = 0;
  bool evaluated_ = false;
  bool alone_on_engine_ = false;
  std::vector<double> arrived_at_;  // per rank, while evaluated_ without a wavefront
  std::unique_ptr<RingWavefront> wavefront_;
  int holder_ = -1;  // of the alone senders' links (the transport's ExactShortcuts link holds)
  CollectiveReuse* restarts_ = nullptr;  // what a conflict on those links restarts the run through

  // Collective reuse: the window from the first arrival, while it may still be recorded
  // or replayed (`candidate`), every time relative to the first arrival.
  struct ReuseWatch {
    CollectiveReuse* reuse = nullptr;
    std::string shape;
    bool candidate = false;
    bool replayed = false;
    bool recorded = false;
    double first_arrival = 0.0;
    int shift_domain = 0;  // of the first arrival (sim::TimeGrid)
    int last_bit = 0;  // of the first arrival: collective_reuse.hpp
    std::uint64_t ties_before = 0;  // the transport's rounding ties before the first arrival
    std::uint64_t perturbation_epoch = 0;
    std::uint64_t sends_before = 0;  // the transport's shortcuts().traffic() before the first arrival
    std::uint64_t own_sends = 0;
    double last_own_send = -1.0;
    int arrived = 0, done = 0;
    std::vector<double> arrival, done_at;
    std::vector<int> order;
    // Busy periods (busy_period.hpp), flow model: the period this collective is a member
    // of while it is recorded (`member` its index), or the period replayed that it is a
    // later member of.
    std::shared_ptr<OpenPeriod> period;
    int member = -1;
    bool member_closed = false;
    std::shared_ptr<PeriodReplay> replay;
  };
  void watch_first_arrival();
  // Nothing else has touched the network since the first arrival: no bandwidth change or
  // failure, and (flow model) no other message sent; `but_now`: except messages sent at
  // this instant, which cannot meet ours when every rank is done now.
  bool isolated(bool but_now = false) const;
  ReuseKey reuse_key() const;
  void try_replay();
  void commit_replay(const ReuseRecord& record);
  bool take_over(double end, const std::vector<double>& done);
  void maybe_record();
  // Busy periods: joining one at the first arrival (as its head, a member, or a later
  // member of the one replayed), the records' bookkeeping, and the replay.
  void enter_busy_period(bool network_idle);
  void leave_busy_period();  // stops recording this collective's period
  void record_in_period(int rank, bool arrived);
  void maybe_close_member();
  void finish_period(OpenPeriod& period);
  void commit_period_replay(const PeriodRecord& record);
  void arrive_replayed(int rank);
  [[noreturn]] void period_conflict(const PeriodReplay& replay);
  // Finishes each rank not done yet at origin + done[r], in `order`; `end_guard`: the
  // transport's replay guard ends with the last.
  void finish_at_recorded_times(const std::vector<double>& done, const std::vector<int>& order, double origin,
                                bool end_guard);

  Transport& transport_;
  ReuseWatch watch_;
  std::shared_ptr<const Schedule> schedule_;
  Step scratch_;
  RankDone done_;
  // Every rank's lanes in one array: rank r's lane k is lanes_[first_lane_[r] + k].
  LaneState& state(int rank, int lane) { return lanes_[static_cast<std::size_t>(first_lane_[rank] + lane)]; }
  std::vector<LaneState> lanes_;
  std::vector<int> first_lane_;  // size() + 1 entries
  std::vector<int> lanes_left_;
  // Messages sent and not yet arrived, and a reference to this execution held while
  // there are any: the transport holds a plain Sink&, and whoever started the
  // collective may drop it before its last message lands.
  std::uint64_t in_flight_ = 0;
  std::shared_ptr<ScheduledExecution> self_while_in_flight_;
};

// The collectives of one communicator on a described machine: one at a time, in the
// order their last ranks arrive, as a process group's collectives run on its NCCL stream.
// A collective's data is a transfer on every port of the machine for its wire time
// (port_flows.hpp), and its latencies follow: alone it ends exactly its clock's time after
// it starts; point-to-point messages on the wire meanwhile share the ports' time with its
// data, and so slow it by as much as they take of the ports, and it them. The next
// collective starts when the running one ends.
class CollectiveStream : private PortFlows::Client {
 public:
  CollectiveStream(sim::Engine& engine, std::shared_ptr<PortFlows> ports);
  // A collective whose last rank arrived now and that takes `timing` alone: each of its
  // `ranks` is told it is done (one event each) when it ends.
  void submit(CollectiveTiming timing, int ranks, Execution::RankDone done);

 private:
  void transfer_done(std::uint64_t tag) override;
  void start_next();
  void finish();

  struct Waiting {
    CollectiveTiming timing;
    int ranks = 0;
    Execution::RankDone done;
  };
  sim::Engine& engine_;
  std::shared_ptr<PortFlows> ports_;
  std::deque<Waiting> waiting_;  // the front is running when running_
  bool running_ = false;
  double started_at_ = 0.0;  // the running one's
};

// Waits for the last rank, then ends every rank `timing.seconds` later (one event each),
// or, given a stream, hands the collective to it. Ranks issue their collectives in one
// order, so the last arrivals come in that order too and the stream runs them in it.
class ClosedFormExecution final : public Execution {
 public:
  ClosedFormExecution(sim::Engine& engine, int ranks, CollectiveTiming timing, RankDone done,
                      std::shared_ptr<CollectiveStream> stream = nullptr);
  void arrive(int rank) override;

 private:
  sim::Engine& engine_;
  CollectiveTiming timing_;
  RankDone done_;
  std::shared_ptr<CollectiveStream> stream_;
  int arrived_ = 0;
  int ranks_;
};

// Runs one schedule alone on a fresh engine (its time grid `grid`, none by default) and
// `model`'s transport: every rank arrives at `arrival[r]`; returns the time each rank is
// done. For tests, `dtsim collective` and `auto` (fastest_algorithm.hpp). A ring is
// computed from its recurrence where it can be (`evaluate_rings`; the same times), else
// every message simulated. Throws std::invalid_argument for a model whose collectives
// are closed forms (they have no schedule to run: see closed_form_seconds) or, by name,
// an unknown model.
std::vector<double> simulate(const NetworkModel& model, const Topology& topology, const Schedule& schedule,
                             const std::vector<double>& arrival, const Perturbations& perturbations = {},
                             bool evaluate_rings = true, sim::TimeGrid grid = {});
std::vector<double> simulate(const std::string& model, const Topology& topology, const Schedule& schedule,
                             const std::vector<double>& arrival, const Perturbations& perturbations = {},
                             bool evaluate_rings = true);
// simulate() without perturbations, given up at `deadline`: the done times when every
// rank is done before it, else nullopt (a rank done exactly at the deadline is not).
// Until then it runs exactly as simulate() does, so the times are the same, and a
// schedule that is slower than `deadline` costs only the events before it: `auto`
// (fastest_algorithm.hpp) drops a candidate so as soon as it is slower than the best.
std::optional<std::vector<double>> simulate_before(double deadline, const NetworkModel& model,
                                                   const Topology& topology, const Schedule& schedule,
                                                   const std::vector<double>& arrival, sim::TimeGrid grid = {});

}  // namespace dtsim::net
