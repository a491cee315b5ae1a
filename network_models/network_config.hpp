// net::NetworkConfig: the network a scenario describes (model, nominal links,
// perturbations, the algorithm per collective and the exact shortcuts allowed), in a
// header of its own: a scenario, a section reader or a live communicator that only holds
// one needs no simulator headers, and editing the simulator rebuilds none of them.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "network_models/link_params.hpp"
#include "network_models/perturbations.hpp"
#include "network_models/schedule.hpp"

namespace dtsim::net {

namespace nccl {
struct Config;
}

struct NetworkConfig {
  std::string model = "alpha_beta";  // a name from network_model_table(), looked up by Network
  LinkParams nominal;                // alpha and beta of the closed forms
  Perturbations perturbations;
  // Algorithm per collective kind; Auto: the fastest candidate on the network in use
  // (Network::resolve).
  std::map<CollectiveKind, Algorithm> algorithms = {{CollectiveKind::AllReduce, Algorithm::Ring},
                                                    {CollectiveKind::ReduceScatter, Algorithm::Ring},
                                                    {CollectiveKind::AllGather, Algorithm::Ring},
                                                    {CollectiveKind::Broadcast, Algorithm::Binomial}};
  // Replay collectives simulated before instead of simulating them again, where that is
  // exact (collective_reuse.hpp); the figures are the same either way.
  bool reuse_collectives = true;
  // Compute ring collectives on the uncontended model from their recurrence
  // (ring_recurrence.hpp) instead of simulating their messages; the figures are the
  // same either way.
  bool evaluate_rings = true;
  // The nccl model's machine and NCCL_ALGO / NCCL_PROTO (nccl/nccl_model.hpp); null for the others.
  std::shared_ptr<const nccl::Config> nccl;
};

// `spec` over `ranks` ranks with its algorithm resolved where there is no network to
// simulate on (a live run's byte accounting, resource estimates): an explicit algorithm
// stays, Auto takes the config's choice for the kind, and a configured Auto the
// cheapest by closed-form cost, which is what Network::resolve picks only where the
// model's collectives are closed forms.
CollectiveSpec resolve_collective(CollectiveSpec spec, int ranks, const NetworkConfig& config);

}  // namespace dtsim::net
