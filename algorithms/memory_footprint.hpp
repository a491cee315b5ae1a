// algorithms::MemoryFootprint: what one rank of an algorithm keeps and sends, in units of
// the model, as its registry entry states it (registry.hpp) for the resource estimate.
#pragma once

namespace dtsim::algorithms {

// What one rank of `spec` keeps and sends, for the up-front resource estimate
// (runner/resource_estimate.hpp): a static count per algorithm, an upper bound read off
// its members (each algorithm's entry lists them), not a measurement. Units: the model (its fp32
// parameters) and the payload (one compressed message of the model).
struct MemoryFootprint {
  // Model-sized buffers besides the parameters, the gradients and the momentum buffer:
  // flat copies, replicas, error memories, scratch.
  double model_buffers = 0.0;
  // Model-sized buffers per gossip neighbour (DCD/ECD-PSGD's replicas x^_j).
  double model_buffers_per_peer = 0.0;
  // Exchanges with the gossip neighbours every step: the rank keeps one payload received
  // per neighbour, its own and the copy in flight.
  bool gossips = false;
  // All-gathers a payload from every rank every step: every rank's output holds one
  // block per rank (the emulated world clones them), the world one more set.
  bool gathers = false;
  // Bytes of a payload per byte of the model (1: uncompressed fp32; a top-k 1 % message
  // of values and indices 0.02; threshold kinds, whose size depends on the data, 0.2).
  double payload_fraction = 1.0;
  // Collectives (all-reduces, all-gathers or exchanges) per step, on average over `steps`.
  double collectives_per_step = 1.0;
  // Operations a timing-only trace records per step (phases, marks, collectives, waits),
  // at most: a few dozen for most; more where they go per tensor or partition.
  double traced_ops_per_step = 64.0;
};

}  // namespace dtsim::algorithms
