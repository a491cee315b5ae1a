// net::MachineClock: a network model's own timing of a job on a described machine (the
// nccl model: nccl/nccl_model.hpp) in place of the alpha-beta closed forms and the
// topology's links. Network builds one per job from its NetworkConfig (NetworkModel::
// make_clock) and asks it for every collective's time (a closed form: the collective ends
// that long after its last rank arrives) and, through ClockTransport (clock_transport.hpp),
// every point-to-point message's.
#pragma once

#include <memory>
#include <string>

#include "network_models/schedule.hpp"

namespace dtsim::net {

// A point-to-point message as the machine carries it: a fixed part, a time on the wire
// alone, and the ports it uses meanwhile (the sender's way out, the receiver's way in; ids
// in [0, MachineClock::ports()) for each direction) and the share of their speed it uses
// at its own pace, whose time the transfers on them share (port_flows.hpp).
struct MessageTiming {
  double latency_s = 0.0;
  double wire_s = 0.0;
  double share = 1.0;  // in (0, 1]
  int egress = 0, ingress = 0;
};

// A collective as the machine runs it alone: seconds from the last rank's arrival to every
// rank's completion, and the part of them that is its data on the ports (the rest is
// latency: hops, steps, launches), which the transfers on the ports share.
struct CollectiveTiming {
  double seconds = 0.0;
  double wire_s = 0.0;  // <= seconds
};

class MachineClock {
 public:
  virtual ~MachineClock() = default;
  // Spec resolved (ranks set).
  virtual CollectiveTiming collective_timing(const CollectiveSpec& spec) const = 0;
  double collective_seconds(const CollectiveSpec& spec) const { return collective_timing(spec).seconds; }
  // What a benchmark that launches `gpus_per_thread` GPUs' kernels from one thread
  // (nccl-tests' -g) measures per iteration: the host's launches can outlast the GPUs.
  virtual double benchmark_seconds(const CollectiveSpec& spec, int gpus_per_thread) const = 0;
  // `bytes` from rank `src` to rank `dst`, and the ports of each direction.
  virtual MessageTiming message_timing(int src, int dst, double bytes) const = 0;
  virtual int ports() const = 0;
  // How the collective runs, for tables ("Ring/LL128/24ch").
  virtual std::string describe(const CollectiveSpec& spec) const = 0;
  virtual double bytes_sent_per_rank(const CollectiveSpec& spec) const = 0;
};

}  // namespace dtsim::net
