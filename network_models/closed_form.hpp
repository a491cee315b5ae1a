// Closed-form alpha-beta costs of the collectives (Thakur, Rabenseifner & Gropp 2005),
// with no contention: alpha = per-message latency, beta = bandwidth in bytes/s, n ranks,
// S bytes (for all-gather: b bytes per rank). Reduction arithmetic is not charged.
//
//   all-reduce  ring              2(n-1) (alpha + S/(n beta))
//               halving_doubling  2 log2(p) alpha + 2 (p-1)/p S/beta      (p = n a power of 2;
//                                 otherwise + 2 (alpha + S/beta) for the extra ranks' hand-off)
//               tree              2 h (alpha + S/(2 beta))                 (h = floor(log2 n), two trees of S/2)
//               direct            2 (alpha + S/(n beta))                   (multi-port)
//               ps                2 (alpha + S/beta)                       (multi-port server)
//   reduce-scatter ring (n-1)(alpha + S/(n beta));  direct alpha + S/(n beta)
//   all-gather     ring (n-1)(alpha + b/beta);      direct alpha + b/beta
//   broadcast      binomial ceil(log2 n) (alpha + S/beta)
//
// On a topology where every message of the schedule crosses one uncontended link of
// latency alpha and bandwidth beta (ring for ring, hypercube for halving_doubling,
// complete graph for tree, direct and ps), the flow model reproduces these exactly.
#pragma once

#include "network_models/schedule.hpp"

namespace dtsim::net {

// Seconds for `spec` (its algorithm must not be Auto) on an alpha-beta network.
double closed_form_seconds(const CollectiveSpec& spec, double alpha_s, double beta_bytes_per_s);

// The algorithm with the smallest closed-form time for `spec`, as NCCL's tuner picks
// by its cost model; ties go to the earlier one in collective_algorithms(). Candidates
// are auto_candidates(spec.kind), the single-port algorithms (all-reduce: ring,
// halving_doubling, tree; reduce-scatter and all-gather: ring; broadcast: binomial):
// direct and ps assume many simultaneous messages per rank, whose NIC contention their
// closed forms do not see, so `auto` never picks them. Exact for the analytical model;
// on a model that routes messages `auto` simulates the candidates instead
// (fastest_algorithm.hpp), and this is only for callers with no topology to simulate
// on (a live run's byte accounting, resource estimates).
Algorithm cheapest_algorithm(const CollectiveSpec& spec, double alpha_s, double beta_bytes_per_s);

}  // namespace dtsim::net
