// net::MachinePorts: when each port of a described machine is next free (MachineClock::
// ports(): a GPU's way out and way in, a node's NICs). A point-to-point message holds its
// two while on the wire (ClockTransport); a collective holds every one from its start to its
// end (ClosedFormExecution, through the CollectiveStream), since NCCL's kernels drive every
// GPU's links and the nodes' NICs at once. So a message sent while a collective runs waits
// for it to end, and a collective whose last rank arrives while messages are on the wire
// starts when they have left it: one job's traffic takes turns at the ports it shares.
#pragma once

#include <algorithm>
#include <vector>

namespace dtsim::net {

struct MachinePorts {
  explicit MachinePorts(int ports)
      : egress_free(static_cast<std::size_t>(ports), 0.0), ingress_free(static_cast<std::size_t>(ports), 0.0) {}

  std::vector<double> egress_free, ingress_free;  // per port, when what holds it lets go

  // When every port is free.
  double all_free() const {
    double t = 0.0;
    for (double f : egress_free) t = std::max(t, f);
    for (double f : ingress_free) t = std::max(t, f);
    return t;
  }
  // Every port held until `until`.
  void hold_all(double until) {
    for (double& f : egress_free) f = std::max(f, until);
    for (double& f : ingress_free) f = std::max(f, until);
  }
};

}  // namespace dtsim::net
