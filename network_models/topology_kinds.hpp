// The topology kind registry: the one table (topology_kinds.cpp) of the topologies a
// scenario's /topology/kind or the command line's short form can name, each with a
// one-line description, the /topology fields it reads, its short form, how it reads and
// echoes them and its builder (a Topology:: factory, topology.hpp). The scenario section,
// make_topology, parse_topology (the short form), `dtsim list topologies` and the schema
// test read it; nothing else lists topology kinds.
//
// Adding a kind: its builder in topology.cpp and one entry in topology_kinds.cpp (with its
// fields, short form and shape).
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/object_reader.hpp"
#include "network_models/topology_shape.hpp"
#include "network_models/topology_spec.hpp"

namespace dtsim::net {

struct TopologyKindEntry {
  std::string name;
  std::string description;  // one line
  // The keys of /topology besides "kind" it reads.
  std::vector<std::string> fields;
  // The command line's form ("torus:AxB[xC]"); the part after "name:" goes to parse_short.
  std::string short_form;
  void (*parse)(config::ObjectReader& t, TopologySpec& spec, int ranks);
  // Writes its fields: parse(to_json(spec)) gives `spec` again.
  void (*to_json)(const TopologySpec& spec, nlohmann::json& out);
  // `rest`: the text after "name:" (empty without one); `whole` for messages. Throws
  // std::invalid_argument naming the expected form.
  void (*parse_short)(const std::string& rest, const std::string& whole, TopologySpec& spec);
  // Throws std::invalid_argument naming what does not fit `ranks`.
  Topology (*build)(const TopologySpec& spec, int ranks, LinkParams link);
  // Its size and route lengths for `ranks` ranks, without building it (the resource estimate).
  TopologyShape (*shape)(const TopologySpec& spec, int ranks);
};

// In table order.
std::span<const TopologyKindEntry> topology_kind_table();
// nullptr when no kind has that name.
const TopologyKindEntry* find_topology_kind(std::string_view name);
// The shape of `spec` by its kind's entry; std::invalid_argument for an unknown kind.
TopologyShape topology_shape(const TopologySpec& spec, int ranks);

}  // namespace dtsim::net
