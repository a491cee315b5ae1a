// `auto` resolved for the network a collective runs on.
//
// NCCL's tuner picks an algorithm from a cost model of the hardware; dtsim has the
// network's model itself. So where a model's collectives are scheduled messages
// (alpha_beta, flow), FastestAlgorithm picks the candidate that is done first when
// simulated alone on the network's topology (every rank arriving at 0, no
// perturbations). The alpha-beta closed forms (closed_form.hpp) see neither routes nor
// shared links: on an 8-rank ring topology halving-doubling's partners are 1, 2 and 4
// hops apart and its flows share links, so at 1 GB it takes three times the ring's time
// on the flow model (4.17 against 12.49 GB/s bus bandwidth), though its closed form is
// the smaller. Where a model's collectives are closed forms (analytical), the closed
// form is the model and the cheapest one is exact.
//
// The candidates are auto_candidates(kind) (schedule.hpp); ties go to the earlier one in
// collective_algorithms(), as in cheapest_algorithm.
#pragma once

#include "network_models/network_model.hpp"
#include "network_models/schedule.hpp"
#include "network_models/topology.hpp"
#include "sim/time_grid.hpp"

namespace dtsim::net {

struct AlgorithmChoice {
  Algorithm algorithm = Algorithm::Auto;
  double seconds = 0.0;  // alone on the network, every rank arriving at 0: the last rank's done time
};

// `spec` (its algorithm resolved; `schedule` = make_schedule(spec)) alone on the network:
// its closed form over `nominal` where `model`'s collectives are closed forms, else the
// last done time of simulate() on `topology` with the engine's time grid `grid`.
double seconds_alone(const NetworkModel& model, const Topology& topology, const LinkParams& nominal,
                     const CollectiveSpec& spec, const Schedule& schedule, sim::TimeGrid grid = {});

// The most bytes any one link carries in `schedule` (routed over `topology`, whose route
// cache it fills), over that link's bandwidth: a lower bound on the schedule's time
// where messages share links (NetworkModel::messages_share_links), which move no more
// than a link's bandwidth through it. Not on the uncontended model, whose messages
// each have a link's whole bandwidth.
double busiest_link_seconds(const Topology& topology, const Schedule& schedule);

// `auto` on one network: of a spec's auto candidates (its own algorithm is ignored), the
// one with the smallest seconds_alone, and that time. Exactly what simulating every
// candidate in full and taking the fastest gives, at a fraction of the cost: simulating
// a contended candidate on the flow model can take a hundred times the ring's cost (a
// double binary tree over a 64 x 64 torus at 4 MB: 165 s of CPU against under a second),
// and a slow candidate need not run to its end. The first candidate (the ring, the
// cheapest to simulate) is simulated in full; each later one is skipped where messages
// share links and busiest_link_seconds exceeds the best time so far by more than
// rounding, else simulated only until that time (simulate_before). What it still costs:
// one simulation of the ring per choice, and of each candidate the bound does not skip
// up to the best time; where such a candidate is contended (small all-reduces over
// thousands of ranks on a torus, whose double binary tree the bound cannot skip),
// minutes per choice.
class FastestAlgorithm {
 public:
  // `topology` as built, without failed links.
  FastestAlgorithm(const NetworkModel& model, const Topology& topology, LinkParams nominal, sim::TimeGrid grid = {});
  AlgorithmChoice choose(const CollectiveSpec& spec);

 private:
  const NetworkModel& model_;
  Topology topology_;  // copied into each simulation's transport: kept without routes, cheap to copy
  Topology routes_;    // the bounds' routes, computed once for every choice
  LinkParams nominal_;
  sim::TimeGrid grid_;
};

// One choice (tests, one-off callers): FastestAlgorithm(...).choose(spec).
AlgorithmChoice fastest_algorithm(const NetworkModel& model, const Topology& topology, const LinkParams& nominal,
                                  const CollectiveSpec& spec, sim::TimeGrid grid = {});

}  // namespace dtsim::net
