#include "network_models/topology_section.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "network_models/topology_kinds.hpp"

namespace dtsim::net {

using config::ErrorKind;
using config::ObjectReader;
using config::ScenarioError;
using nlohmann::json;

TopologySpec parse_topology_section(ObjectReader& t, int ranks) {
  TopologySpec topo;
  topo.kind = t.choice("kind", std::nullopt, topology_kinds());
  const auto& kind = *find_topology_kind(topo.kind);
  const std::vector<std::string> except{"kind"};
  t.only_fields(kind.fields, except, "topology kind " + topo.kind);
  kind.parse(t, topo, ranks);
  t.finish();
  return topo;
}

json topology_section_json(const TopologySpec& topology) {
  json topo = {{"kind", topology.kind}};
  const auto* kind = find_topology_kind(topology.kind);
  if (!kind) throw std::logic_error("topology_section_json: unknown kind " + topology.kind);
  kind->to_json(topology, topo);
  return topo;
}

}  // namespace dtsim::net
