// net::Network: the simulated network a job runs on — a topology, a model (one of
// network_model.hpp's table), perturbations, and the algorithm each collective uses.
//
// collective() starts one collective: ranks arrive at their own times and are told
// when they are done. send() moves one point-to-point message. Everything is driven by
// the sim::Engine the network was built on, so concurrent operations of different
// ranks share the links (in the flow model).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "network_models/execution.hpp"
#include "network_models/network_config.hpp"
#include "network_models/schedule.hpp"

namespace dtsim::sim {
class Engine;
}

namespace dtsim::net {

class CollectiveReuse;
class CollectiveStream;
class FastestAlgorithm;
class MachineClock;
struct NetworkModel;
class Topology;
class Transport;


// A resolved collective's schedule and what each run of it needs besides: every rank's
// bytes sent (Schedule::bytes_sent) and its reuse shape (reuse_shape).
struct CollectivePlan {
  CollectiveSpec spec;
  std::shared_ptr<const Schedule> schedule;
  std::vector<double> bytes_sent;  // per rank
  std::string shape;
};

class Network {
 public:
  // `reuse`: the records and counts of collective reuse, kept across the attempts of a
  // run (collective_reuse.hpp); none means a fresh one per network, when the config
  // enables reuse.
  Network(sim::Engine& engine, Topology topology, NetworkConfig config,
          std::shared_ptr<CollectiveReuse> reuse = nullptr);
  ~Network();

  const Topology& topology() const;
  const NetworkConfig& config() const { return config_; }
  const NetworkModel& model() const { return *model_; }
  int size() const;
  sim::Engine& engine();
  Transport& transport() { return *transport_; }
  // Its enabled() is false when reuse is off (it still restarts the run for a computed
  // ring's conflict).
  const CollectiveReuse* reuse() const { return reuse_.get(); }

  // `spec` with its algorithm resolved: an explicit algorithm stays, Auto takes the
  // config's choice for the kind, and a configured Auto the candidate fastest on this
  // network (fastest_algorithm.hpp): where the model schedules collectives, each
  // candidate simulated alone on a scratch transport of the model over the topology as
  // built (no perturbations), once per collective shape (kind, sizes, root) in the
  // Network's life, a training run issuing the same shapes every step; where its
  // collectives are closed forms, the cheapest closed form, which is exact there.
  CollectiveSpec resolve(CollectiveSpec spec);
  // Collective shapes whose `auto` choice was simulated so far, each once.
  std::size_t auto_decisions() const { return auto_choices_.size(); }
  // Starts a collective whose spec is resolved and whose schedule is `schedule`
  // (make_schedule(spec)); `done(rank)` runs when that rank is done.
  std::shared_ptr<Execution> collective(const CollectiveSpec& spec, std::shared_ptr<const Schedule> schedule,
                                        Execution::RankDone done);
  // The plan of a resolved spec, built the first time the spec is asked for (kept for
  // up to kMaxPlans distinct specs, then the cache starts afresh): training issues the
  // same collectives every step, and counting a ring's bytes per rank walks every step
  // of every rank (33.5 M steps at 4,096 ranks), as much work as simulating it, and all
  // of it again when it is replayed.
  std::shared_ptr<const CollectivePlan> plan(const CollectiveSpec& resolved);
  // Starts a planned collective.
  std::shared_ptr<Execution> collective(const CollectivePlan& plan, Execution::RankDone done);
  void send(int src, int dst, double bytes, std::function<void()> arrived);

 private:
  // Both collective()s: a closed form, or a scheduled execution (recorded under `shape`
  // when reuse is on, and its ring computed unless a conflict forbade the shape).
  std::shared_ptr<Execution> start(const CollectiveSpec& spec, std::shared_ptr<const Schedule> schedule,
                                   Execution::RankDone done, std::string shape);
  // Auto's choice for a spec whose config leaves it to `auto`.
  Algorithm auto_algorithm(const CollectiveSpec& spec);
  static constexpr std::size_t kMaxPlans = 256;
  std::map<std::string, std::shared_ptr<const CollectivePlan>> plans_;  // by shape
  // `auto` where the config leaves a collective to it and the model schedules
  // collectives: over the topology as built, before the transport fails any of its links.
  std::unique_ptr<FastestAlgorithm> fastest_;
  std::map<std::string, Algorithm> auto_choices_;  // by the shape with algorithm "auto"
  NetworkConfig config_;
  const NetworkModel* model_;  // config_.model's entry
  std::shared_ptr<const MachineClock> clock_;  // models of a described machine (nccl)
  // Their collectives' stream: they run one at a time, as one process group's do.
  std::shared_ptr<CollectiveStream> stream_;
  std::unique_ptr<Transport> transport_;
  std::shared_ptr<CollectiveReuse> reuse_;
};

// What a collective's record is keyed by besides arrivals: kind, algorithm, sizes, root
// and ranks, as text.
std::string reuse_shape(const CollectiveSpec& spec);

}  // namespace dtsim::net
