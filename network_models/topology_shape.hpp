// net::TopologyShape: a topology's size and route lengths, known from its spec without
// building it, for the up-front resource estimate (runner/resource_estimate.hpp). Each
// topology kind's entry (topology_kinds.hpp) gives its own.
#pragma once

#include <string>

namespace dtsim::net {

struct TopologyShape {
  double ranks = 1, nodes = 1, cables = 0;
  double degree = 0;          // gossip neighbours of a rank (the largest)
  double hops = 1;            // mean route length between two ranks
  double neighbour_hops = 1;  // route length to a gossip neighbour (and to rank r + 1 on direct topologies)
  // The share of a ring's senders (r -> r + 1) whose route shares a link with another
  // sender's (a network model whose flows interact simulates their messages; see
  // NetworkModel::rings_simulate_coupled_senders). Counted from the routes dtsim
  // builds: none on rings, stars, fat trees, hierarchical nodes, complete and exponential
  // graphs; 2 per 2-D torus ring, about 2 per d0 x d1 slice of a larger one; 3 in 8 on
  // hypercubes of 8 to 4,096 ranks. A custom graph's routes are unknown here: all counted.
  double coupled_ring_share = 0;
  bool dedup = false;  // the builder de-duplicates cables through a std::set
  std::string label;   // the kind and its size, for messages ("torus 4x4")
};

}  // namespace dtsim::net
