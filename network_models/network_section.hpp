// The scenario's /network section: parse and to_json, next to the NetworkConfig it fills.
// Whether its bandwidth changes and failures name links of the topology is checked once
// the topology is built (check_network_links).
#pragma once

#include <cstdint>

#include <nlohmann/json.hpp>

#include "config/object_reader.hpp"
#include "network_models/network_config.hpp"
#include "network_models/topology.hpp"

namespace dtsim::net {

// `nodes`: the topology's node count (ranks, or an edge list's nodes); `seed`: the
// scenario's (the jitter's stream).
NetworkConfig parse_network_section(config::ObjectReader& n, int nodes, std::uint64_t seed);
nlohmann::json network_section_json(const NetworkConfig& network);
// Every bandwidth change and failure names a link of `topology`, and a described machine
// (the nccl model's system) holds the topology's ranks (ScenarioError otherwise).
void check_network_links(const NetworkConfig& network, const Topology& topology);

}  // namespace dtsim::net
