// The scenario's /topology section: parse and to_json, next to the TopologySpec it fills.
#pragma once

#include <nlohmann/json.hpp>

#include "config/object_reader.hpp"
#include "network_models/topology_spec.hpp"

namespace dtsim::net {

// Physical bounds of a link, so that a message's time (latency + bytes / bandwidth) stays
// a finite double for any message dtsim can send: one byte per second to a petabyte per
// second, and up to 1,000 s of latency.
inline constexpr double kMinBandwidthGBps = 1e-9;
inline constexpr double kMaxBandwidthGBps = 1e6;
inline constexpr double kMaxLatencyUs = 1e9;

// The topology of `ranks` ranks: "kind" and the fields that kind reads. Whether it can be
// built (a fat-tree large enough, ...) is make_topology's to say.
TopologySpec parse_topology_section(config::ObjectReader& t, int ranks);
nlohmann::json topology_section_json(const TopologySpec& topology);

}  // namespace dtsim::net
