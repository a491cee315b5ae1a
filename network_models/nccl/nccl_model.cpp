#include "network_models/nccl/nccl_model.hpp"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "network_models/network.hpp"

namespace dtsim::net::nccl {

using config::ErrorKind;
using config::ScenarioError;
using nlohmann::json;

std::shared_ptr<const Config> parse_config(config::ObjectReader& n) {
  auto c = std::make_shared<Config>();
  const json& system = n.require("system", "a system preset's name or a system object");
  c->system = parse_system(system, n.where("system"));
  const std::string algo = n.string("nccl_algo", "");
  const std::string proto = n.string("nccl_proto", "");
  try {
    (void)parse_overrides(algo, "");
  } catch (const std::invalid_argument& e) {
    throw ScenarioError(n.where("nccl_algo"), ErrorKind::unknown_name, e.what());
  }
  try {
    c->overrides = parse_overrides(algo, proto);
  } catch (const std::invalid_argument& e) {
    throw ScenarioError(n.where("nccl_proto"), ErrorKind::unknown_name, e.what());
  }
  // Each variable's default leaves NCCL's own choice (nccl_env.hpp).
  const NcclEnv unset;
  for (const NcclEnvVar& var : nccl_env_vars())
    c->env.*var.value = static_cast<int>(n.integer(var.field, unset.*var.value, var.least, var.most));
  return c;
}

const std::vector<std::string>& config_fields() {
  static const std::vector<std::string> fields = [] {
    std::vector<std::string> out{"system", "nccl_algo", "nccl_proto"};
    for (const NcclEnvVar& var : nccl_env_vars()) out.emplace_back(var.field);
    return out;
  }();
  return fields;
}

void add_config_json(const Config& c, json& network) {
  network["system"] = system_json(c.system);
  if (!c.overrides.algo.empty()) network["nccl_algo"] = c.overrides.algo;
  if (!c.overrides.proto.empty()) network["nccl_proto"] = c.overrides.proto;
  const NcclEnv unset;
  for (const NcclEnvVar& var : nccl_env_vars())
    if (c.env.*var.value != unset.*var.value) network[var.field] = c.env.*var.value;
}

LinkParams nominal_link(const System& s) {
  const Machine m = make_machine(s, 1);
  const bool nvlink = s.intra.kind == IntraKind::NvSwitch || !s.intra.nvlink_pairs.empty();
  const double GBps = nvlink ? s.intra.nvlink_links * m.nvlink_bw : m.pci_bw;
  return {.latency_s = 0.0, .bandwidth_bytes_per_s = std::max(GBps, 1e-3) * 1e9};
}

Clock::Clock(std::shared_ptr<const Config> config, int ranks)
    : config_(std::move(config)), machine_(make_machine(config_->system, ranks, config_->env)), tuning_(tune(machine_, config_->overrides)) {
  // Whether a collective has an algorithm does not depend on its size. NCCL refuses the
  // first collective that has none; dtsim refuses the job here, before it runs (whether or
  // not it would issue one), so that no result is lost mid-run.
  for (const Coll c : {Coll::AllReduce, Coll::ReduceScatter, Coll::AllGather, Coll::Broadcast, Coll::Reduce})
    (void)choose(machine_, tuning_, c, 1 << 20);
}

Clock::Run Clock::run(Coll coll, double bytes, int element_size) const {
  Run r;
  r.coll = coll;
  r.bytes = bytes;
  r.choice = choose(machine_, tuning_, coll, bytes);
  r.gpu_us = collective_us(machine_, tuning_, coll, bytes, r.choice, element_size);
  r.element_size = element_size;
  return r;
}

Clock::Run Clock::run(const CollectiveSpec& spec) const {
  if (spec.ranks != machine_.ranks)
    throw std::invalid_argument(fmt::format("nccl model: a collective over {} ranks on a job of {}", spec.ranks, machine_.ranks));
  const double size = static_cast<double>(spec.element_size);
  const int element = static_cast<int>(std::clamp<std::int64_t>(spec.element_size, 1, 8));
  switch (spec.kind) {
    case CollectiveKind::AllReduce: return run(Coll::AllReduce, static_cast<double>(spec.elements) * size, element);
    case CollectiveKind::ReduceScatter: return run(Coll::ReduceScatter, static_cast<double>(spec.elements) * size, element);
    case CollectiveKind::Broadcast: return run(Coll::Broadcast, static_cast<double>(spec.elements) * size, element);
    case CollectiveKind::AllGather: {
      // NCCL's all-gather has one block size: the largest, every rank's (allgatherv is
      // NCCL's grouped send/recv, not timed here).
      std::int64_t largest = 0;
      for (auto b : spec.block_elements) largest = std::max(largest, b);
      return run(Coll::AllGather, static_cast<double>(largest) * size * spec.ranks, element);
    }
  }
  return {};
}

CollectiveTiming Clock::collective_timing(const CollectiveSpec& spec) const {
  // Only a job's collectives need their latency part (the streams' port sharing), not
  // tables and benchmarks: it is timed here, not in run().
  const Run r = run(spec);
  const double latency_us = collective_latency_us(machine_, tuning_, r.coll, r.bytes, r.choice, r.element_size);
  return {.seconds = r.gpu_us * 1e-6, .wire_s = (r.gpu_us - latency_us) * 1e-6};
}

double Clock::benchmark_seconds(const CollectiveSpec& spec, int gpus_per_thread) const {
  const double host_us = gpus_per_thread * config_->system.host.launch_us;
  return std::max(host_us, run(spec).gpu_us) * 1e-6;
}

MessageTiming Clock::message_timing(int src, int dst, double bytes) const {
  const P2pTiming t = p2p_timing(machine_, src, dst, bytes);
  return {.latency_s = t.latency_us * 1e-6, .wire_s = t.wire_us * 1e-6, .share = t.share, .egress = t.egress, .ingress = t.ingress};
}

int Clock::ports() const { return p2p_ports(machine_); }

std::string describe(const Choice& c) {
  return fmt::format("{}/{}/{}ch", to_string(c.algo), to_string(c.proto), c.channels);
}

std::string Clock::describe(const CollectiveSpec& spec) const { return nccl::describe(run(spec).choice); }

double Clock::bytes_sent_per_rank(const CollectiveSpec& spec) const {
  const Run r = run(spec);
  return nccl::bytes_sent_per_rank(machine_, r.coll, r.bytes, r.choice);
}

std::shared_ptr<const MachineClock> make_clock(const NetworkConfig& config, int ranks) {
  if (!config.nccl) throw std::invalid_argument("the nccl network model needs a system (/network/system, --system)");
  return std::make_shared<Clock>(config.nccl, ranks);
}

}  // namespace dtsim::net::nccl
