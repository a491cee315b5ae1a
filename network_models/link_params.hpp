// net::LinkParams: a link's latency and bandwidth, alone, so that what only names a
// link's figures (a scenario's nominal network, the CLI) needs no topology.
#pragma once

namespace dtsim::net {

struct LinkParams {
  double latency_s = 0.0;
  double bandwidth_bytes_per_s = 1e9;
};

}  // namespace dtsim::net
