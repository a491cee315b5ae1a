// net::CollectiveReuse: exact replay of collectives simulated before.
//
// Training repeats the same collectives every step. A scheduled collective that runs
// alone on the network (the flow model: nothing else in flight from its first rank's
// arrival until its last message lands; the uncontended model: messages never interact,
// so only perturbations matter) is a function of its schedule, the network's state and
// the ranks' arrival times relative to the first one. The first such run is recorded:
// each rank's done time relative to the first arrival. A later collective with the same
// key skips its messages and finishes every rank at first arrival + the recorded offset.
//
// Why that is exact, bit for bit: the transports only ever add durations to times
// (Transport::later) and subtract times, so a window computes the same offsets from its
// first arrival wherever it lies, as long as shifting every time of it is exact:
// - On the engine's time grid (sim/time_grid.hpp, what scenario runs use), every time
//   below the horizon (64 s at the default 2^-47 s tick) is a whole number of ticks
//   and every sum exact: any shift by whole ticks is exact, so one shift domain covers
//   all of [0, horizon), and a step recorded at 1.3 s replays at 26.7 s. Arrivals off
//   the grid (none that the simulation computes) are not recorded.
// - Without a grid, or beyond its horizon, doubles of one binade [2^e, 2^(e+1)) lie on
//   one grid: shifting every time by an even multiple of its step shifts every sum and
//   keeps every difference, as long as all of them stay in the binade; the shift domain
//   is the binade. Even, because a sum that falls exactly halfway between two grid
//   points rounds to the one whose last mantissa bit is 0: an odd shift flips that
//   choice (it happens: a duration whose lowest set bit is half the step makes every
//   sum a tie). So a collective whose whole window (first arrival to last done) lies in
//   the binade of the recorded one, and whose first arrival has the same last mantissa
//   bit, computes exactly the recorded offsets, shifted. Whether a sum is a tie does not
//   change with the shift, so a record whose window had none (ExactShortcuts::rounding_ties,
//   nearly always, and always on the grid, where sums are exact) is replayed whatever
//   the bit; one with a tie is keyed by the bit too.
// Windows that straddle two shift domains (a power of two off the grid, the horizon on
// it) are never reused.
//
// What else disables reuse for a collective: jitter (its draws are consumed per
// message), a bandwidth change or link failure inside the window (the key holds how
// many have happened, so the state before is the same), another message in flight when
// it starts or sent before its last rank arrives (flow model). Cross traffic after the
// replay is committed cannot be foreseen: the transport then throws ReuseConflict,
// which forbids that collective's shape from then on, and the runner starts the run
// again (runs are deterministic, so the rerun reaches the same point and simulates it).
//
// Collectives that overlap each other on the flow model (none alone) are reused as a
// busy period instead: busy_period.hpp.
#pragma once

#include <bit>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "network_models/busy_period.hpp"
#include "sim/engine.hpp"

namespace dtsim::net {

struct ReuseKey {
  std::string shape;                 // the collective: kind, sizes, algorithm, root, ranks
  std::uint64_t perturbation_epoch;  // bandwidth changes and failures fired before it
  int shift_domain;                  // of the first arrival (sim::TimeGrid::shift_domain)
  int last_bit;                      // the first arrival's lowest mantissa bit; kAnyLastBit: no tie
  std::vector<double> arrival;       // per rank: arrival - first arrival (exact in the domain)
  auto operator<=>(const ReuseKey&) const = default;
};

// The lowest bit of a positive normal time's mantissa: two times of one binade whose
// last bits are equal differ by an even number of the binade's steps.
inline int last_mantissa_bit(double t) { return static_cast<int>(std::bit_cast<std::uint64_t>(t) & 1u); }
// A stored key's last bit when its window rounded no sum half to even.
inline constexpr int kAnyLastBit = -1;

struct ReuseRecord {
  std::vector<double> done;  // per rank: done time - first arrival
  std::vector<int> order;    // ranks in the order they were done
  double end = 0.0;          // the last done, relative to the first arrival
  bool same_instant = false; // every rank done at `end`
};

struct ReuseStats {
  std::uint64_t collectives = 0;  // scheduled collectives started
  std::uint64_t replayed = 0;     // of them, replayed from a record
  std::uint64_t recorded = 0;     // records made (a busy period's counts once)
  std::uint64_t restarts = 0;     // runs started again after a conflict
  double hit_rate() const { return collectives ? static_cast<double>(replayed) / static_cast<double>(collectives) : 0.0; }
};

// Cross traffic met a replayed collective, or a ring computed on the flow model
// (link_holds.hpp); the shape is forbidden already.
class ReuseConflict : public sim::RunRestart {
 public:
  explicit ReuseConflict(const std::string& shape);
};

// Shared by the attempts of one run (a conflict's restart keeps the records and the
// forbidden shapes; the counts of the failed attempt are dropped).
//
// It is also what restarts a run whose computed ring met other traffic, so a network
// keeps one when replay is off (`enabled` false: no record, no replay, no counts) for
// the rings it computes on the flow model.
class CollectiveReuse {
 public:
  explicit CollectiveReuse(bool enabled = true) : enabled_(enabled) {}
  // Whether collectives are recorded and replayed.
  bool enabled() const { return enabled_; }
  bool allowed(const std::string& shape) const { return enabled_ && !forbidden_.count(shape); }
  // The record for `key` (its last bit the first arrival's), or for the key with any
  // last bit.
  const ReuseRecord* find(const ReuseKey& key) const;
  void store(ReuseKey key, ReuseRecord record);
  // Busy periods (busy_period.hpp), keyed by their head's key.
  const PeriodRecord* find_period(const ReuseKey& key) const;
  void store_period(ReuseKey key, PeriodRecord record);
  // This attempt's period being recorded (null when none) and being replayed (null when
  // none, or once the network has been idle again since).
  std::shared_ptr<OpenPeriod>& open_period() { return open_period_; }
  std::shared_ptr<PeriodReplay>& period_replay() { return period_replay_; }
  void forbid(const std::string& shape) { forbidden_.insert(shape); }
  // Rings computed from their recurrence on the flow model (ring_wavefront.hpp) that met
  // other traffic: simulated from the next attempt on.
  void forbid_evaluation(const std::string& shape) { unevaluated_.insert(shape); }
  bool evaluation_allowed(const std::string& shape) const { return evaluate_ && !unevaluated_.count(shape); }
  // A new attempt of the run after a conflict: counts from zero but `restarts`, records
  // and forbidden shapes kept; no period open or replayed.
  void restart();
  // No more replay (a network configured without reuse).
  void disable_replay() { enabled_ = false; }
  // No more replay, and no ring computed on the flow model either: the attempt after
  // too many restarts simulates everything, so it cannot conflict.
  void disable() { enabled_ = evaluate_ = false; }

  ReuseStats& stats() { return stats_; }
  const ReuseStats& stats() const { return stats_; }

 private:
  bool enabled_;
  bool evaluate_ = true;
  std::map<ReuseKey, ReuseRecord> records_;
  std::map<ReuseKey, PeriodRecord> period_records_;
  std::set<std::string> forbidden_;
  std::set<std::string> unevaluated_;
  std::shared_ptr<OpenPeriod> open_period_;
  std::shared_ptr<PeriodReplay> period_replay_;
  ReuseStats stats_;
};

// Runs `attempt` until it finishes without a ReuseConflict (each conflict forbids one
// more shape, so this ends; after `max_restarts`, the last attempt runs without reuse).
template <typename Attempt>
auto run_with_reuse(CollectiveReuse& reuse, Attempt&& attempt, int max_restarts = 32) {
  for (int restarts = 1;; ++restarts) {
    try {
      return attempt();
    } catch (const ReuseConflict&) {
      if (restarts >= max_restarts) reuse.disable();
      reuse.restart();
    }
  }
}

}  // namespace dtsim::net
