// The nccl network model: collectives and point-to-point messages timed the way NCCL runs
// them on a described machine (system.hpp): NCCL's communicator setup and choice of
// algorithm, protocol and channels (tuning.hpp), then the kernels' chunked, pipelined
// execution (collective_time.hpp). A scenario selects it with
//   "network": {"model": "nccl", "system": "h100_8x" | {...},
//                "nccl_algo": "Ring,Tree", "nccl_proto": "^LL128",
//                "nccl_max_nchannels": 8}
// (nccl_algo / nccl_proto as NCCL_ALGO / NCCL_PROTO, the other NCCL variables as the fields
// nccl_env.hpp lists; all optional), `dtsim collective` with --model nccl --system
// NAME|FILE.json [--nccl-algo A] [--nccl-proto P] [--nccl-max-nchannels N ...] [-g G].
//
// A collective's time is the GPUs' (its kernel from start to end, as NCCL's choice runs it):
// in training the host enqueues collectives ahead of the GPUs, so its launch cost overlaps.
// A benchmark launching G GPUs from one thread (nccl-tests -g G) also pays G launches per
// iteration: it measures max(G x launch_us, the GPUs' time) (benchmark_seconds).
//
// Collectives run one at a time in the order they start, as one process group's do on
// its NCCL stream (net::CollectiveStream): one issued while another runs waits for it. A
// running collective's data is a transfer on every port of the machine (its latencies
// follow it, its own) and a point-to-point message's data one on its two ports, sharing
// each port's time by max-min fairness (net::PortFlows): alone each takes its clock's
// time; a message beside a collective slows both by the part of each that is data.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/object_reader.hpp"
#include "network_models/machine_clock.hpp"
#include "network_models/nccl/collective_time.hpp"
#include "network_models/nccl/system.hpp"
#include "network_models/nccl/tuning.hpp"
#include "network_models/topology.hpp"

namespace dtsim::net {
struct NetworkConfig;
}

namespace dtsim::net::nccl {

struct Config {
  System system;
  Overrides overrides;
  NcclEnv env;
};

// The /network fields the nccl model reads besides "model": "system" (required),
// "nccl_algo", "nccl_proto" and one per NCCL variable (nccl_env.hpp). ScenarioError naming
// the field otherwise.
std::shared_ptr<const Config> parse_config(config::ObjectReader& network);
// Their names: "system", "nccl_algo", "nccl_proto" and NcclEnv's fields.
const std::vector<std::string>& config_fields();
// Adds them to a /network section's JSON.
void add_config_json(const Config& config, nlohmann::json& network);
// The link the rest of dtsim reads where a model has one (resource estimates, `auto`): a
// GPU's NVLink bandwidth in NCCL's units (PCIe for a node without NVLink), no latency.
LinkParams nominal_link(const System& system);

// One job: the communicator NCCL sets up for `ranks` GPUs of the system, and its tuning.
class Clock final : public MachineClock {
 public:
  // Throws std::invalid_argument when the ranks do not fit the system (tuning.hpp:
  // make_machine) or NCCL_ALGO leaves a collective no algorithm where the release fails.
  Clock(std::shared_ptr<const Config> config, int ranks);
  const Machine& machine() const { return machine_; }
  const Tuning& tuning() const { return tuning_; }

  struct Run {
    Coll coll = Coll::AllReduce;
    double bytes = 0.0;  // NCCL's nBytes
    Choice choice;
    double gpu_us = 0.0;
    int element_size = 4;
  };
  // How NCCL runs `bytes` of `coll` here (element_size: the reduction's datatype).
  Run run(Coll coll, double bytes, int element_size = 4) const;
  Run run(const CollectiveSpec& spec) const;

  CollectiveTiming collective_timing(const CollectiveSpec& spec) const override;
  double benchmark_seconds(const CollectiveSpec& spec, int gpus_per_thread) const override;
  MessageTiming message_timing(int src, int dst, double bytes) const override;
  int ports() const override;
  std::string describe(const CollectiveSpec& spec) const override;
  double bytes_sent_per_rank(const CollectiveSpec& spec) const override;

 private:
  std::shared_ptr<const Config> config_;
  Machine machine_;
  Tuning tuning_;
};

// "Ring/LL128/24ch"
std::string describe(const Choice& choice);

// NetworkModel::make_clock for the nccl model: needs config.nccl (std::invalid_argument
// otherwise).
std::shared_ptr<const MachineClock> make_clock(const NetworkConfig& config, int ranks);

}  // namespace dtsim::net::nccl
