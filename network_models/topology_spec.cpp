#include "network_models/topology_spec.hpp"

#include "network_models/topology_kinds.hpp"

#include <algorithm>
#include <cstdint>
#include <string>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "config/closest_name.hpp"

namespace dtsim::net {

Topology make_topology(const TopologySpec& s, int ranks, LinkParams link) {
  const auto* kind = find_topology_kind(s.kind);
  if (!kind)
    throw std::invalid_argument(
        fmt::format("unknown topology \"{}\"{} (expected one of: {})", s.kind,
                    config::did_you_mean(s.kind, topology_kinds()), fmt::join(topology_kinds(), ", ")));
  return kind->build(s, ranks, link);
}

TopologySpec parse_topology(const std::string& text) {
  TopologySpec s;
  const auto colon = text.find(':');
  s.kind = text.substr(0, colon);
  const auto* kind = find_topology_kind(s.kind);
  if (!kind || kind->short_form.empty()) {
    std::vector<std::string> forms;
    for (const auto& k : topology_kind_table())
      if (!k.short_form.empty()) forms.push_back(k.short_form);
    throw std::invalid_argument(fmt::format("topology \"{}\"{}: expected {}", text,
                                            config::did_you_mean(s.kind, topology_kinds()), fmt::join(forms, ", ")));
  }
  kind->parse_short(colon == std::string::npos ? "" : text.substr(colon + 1), text, s);
  return s;
}

}  // namespace dtsim::net
