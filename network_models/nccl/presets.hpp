// Named system descriptions (nccl::System) for the nccl network model: a scenario's
// "network": {"model": "nccl", "system": "h100_8x"} or `dtsim collective --system
// h100_8x`; "N such nodes" is {"preset": "h100_8x", "nodes": N} or `-n` ranks. One table
// (presets.cpp), the only place their names are listed; `dtsim list systems` prints it.
//
// Each preset's figures are hardware specifications (link counts and line rates, NIC
// rates, PCIe generation) with their source, except the host's launch cost, which is
// measured and says where (system.hpp: Host).
#pragma once

#include <string>
#include <vector>

#include "network_models/nccl/system.hpp"

namespace dtsim::net::nccl {

// Every preset, in the order `dtsim list systems` prints them.
const std::vector<System>& system_presets();
const System* find_system_preset(const std::string& name);
const std::vector<std::string>& system_preset_list();
std::string system_preset_names();  // "a100_8x, h100_8x, ..."

}  // namespace dtsim::net::nccl
