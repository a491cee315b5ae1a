// Bytes each rank puts on the wire for a collective: the sum of its sends in the
// collective's point-to-point schedule (network_models/schedule.hpp), with chunks of
// whole elements. Every backend reports these figures for the algorithm the scenario
// selects, so emulated and live runs count identical traffic even when the live library
// picks another algorithm internally.
#pragma once

#include <cstdint>

#include "network_models/schedule.hpp"

namespace dtsim::comm {

std::uint64_t collective_bytes_sent(const net::CollectiveSpec& resolved_spec, int rank);

}  // namespace dtsim::comm
