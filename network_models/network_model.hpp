// net::NetworkModel: how long messages and collectives take on the simulated network.
//
// A model defines one hook, p2p_time (an uncontended point-to-point message); the
// collectives are decomposed into point-to-point steps here, once for every model:
//
// - all_reduce: ring reduce-scatter then ring all-gather, 2(n-1) steps of S/n bytes;
//   with simultaneous arrival on an alpha-beta network this is 2(n-1)(alpha + S/(n beta)).
// - all_gather: ring, n-1 steps; at step s rank r forwards block (r - s) mod n.
// - broadcast: binomial tree rooted at `root`.
//
// Each takes the time every rank entered the collective and returns the time every rank
// leaves it. A step starts when the sender's previous send is done and it holds the
// data to send (its own at arrival, or the chunk received in the previous step).
// Chunk sizes are treated as real numbers (S/n), so timings match closed forms exactly.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "network_models/topology.hpp"

namespace dtsim::net {

class NetworkModel {
 public:
  explicit NetworkModel(Topology topology) : topology_(std::move(topology)) {}
  virtual ~NetworkModel() = default;

  virtual std::string name() const = 0;
  // Seconds for `bytes` from `src` to `dst` on an otherwise idle network.
  virtual double p2p_time(int src, int dst, double bytes) const = 0;

  const Topology& topology() const { return topology_; }
  int size() const { return topology_.size(); }

  std::vector<double> all_reduce(std::span<const double> arrival, double bytes) const;
  std::vector<double> all_gather(std::span<const double> arrival, std::span<const double> block_bytes) const;
  std::vector<double> broadcast(std::span<const double> arrival, double bytes, int root) const;

 private:
  Topology topology_;
};

// Alpha-beta (latency-bandwidth) model without contention: a message over h links takes
// h * alpha + bytes / beta (cut-through: bandwidth is paid once).
class AlphaBetaModel final : public NetworkModel {
 public:
  AlphaBetaModel(Topology topology, double alpha_s, double beta_bytes_per_s);
  std::string name() const override { return "alpha_beta"; }
  double p2p_time(int src, int dst, double bytes) const override;
  double alpha() const { return alpha_; }
  double beta() const { return beta_; }

 private:
  double alpha_;
  double beta_;
};

}  // namespace dtsim::net
