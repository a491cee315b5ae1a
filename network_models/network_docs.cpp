#include "network_models/network_docs.hpp"

#include <iterator>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "network_models/nccl/nccl_env.hpp"

namespace dtsim::net {

std::span<const config::FieldDoc> network_docs() {
  static constexpr config::FieldDoc fixed[] = {
    {"topology", "", "The physical network; gossip uses its rank graph with Metropolis-Hastings weights.",
     R"json({"allOf": [{"if": {"properties": {"kind": {"const": "fat_tree"}}, "required": ["kind"]}, "then": {"properties": {"k": {"multipleOf": 2}}}}]})json"},
    {"topology", "kind", "ring, complete, torus (dims), hypercube (power-of-two ranks), exponential, star (one switch), "
        "fat_tree (k), hierarchical (nodes of gpus_per_node), edges (an explicit cable list)"},
    {"topology", "dims", "torus: shape, row-major ranks; the product must equal ranks",
     R"json({"type": "array", "minItems": 1, "items": {"type": "integer", "description": "dimension size", "minimum": 1}})json"},
    {"topology", "k", "fat_tree: k-ary three-level fat-tree (even; up to k^3/4 ranks)"},
    {"topology", "gpus_per_node", "hierarchical: ranks per node"},
    {"topology", "nvswitch", "hierarchical: GPUs of a node on a switch (true) or fully connected with a NIC each (false)"},
    {"topology", "intra_latency_us", "hierarchical: latency of the links inside a node, microseconds"},
    {"topology", "intra_bandwidth_GBps", "hierarchical: bandwidth of the links inside a node, 1e9 bytes per second"},
    {"topology", "nodes", "edges: node count (ranks are nodes 0..ranks-1, the rest switches); at least ranks"},
    {"topology", "edges", "edges: the cables",
     R"json({"type": "array", "minItems": 1, "items": {"$ref": "#/$defs/edge"}})json"},
    {"edge", "", "a full-duplex cable between nodes a and b",
     R"json({"required": ["a", "b", "latency_us", "bandwidth_GBps"]})json"},
    {"edge", "a", "node",
     R"json({"type": "integer", "minimum": 0})json"},
    {"edge", "b", "node (other than a)",
     R"json({"type": "integer", "minimum": 0})json"},
    {"edge", "latency_us", "link latency, microseconds",
     R"json({"type": "number", "minimum": 0, "maximum": 1000000000})json"},
    {"edge", "bandwidth_GBps", "link bandwidth, 1e9 bytes per second",
     R"json({"type": "number", "minimum": 1e-09, "maximum": 1000000})json"},
    {"network", "", "The network model and the nominal link. model, latency_us and bandwidth_GBps are required unless "
        "calibrated supplies them; the nccl model reads system (and optionally nccl_algo, nccl_proto) "
        "instead of latency_us and bandwidth_GBps.",
     R"json({"requiredUnless": "calibrated"})json"},
    {"network", "calibrated", "a network model file from `dtsim calibrate` (relative to the scenario file): supplies model, "
        "latency_us and bandwidth_GBps where the scenario does not set them (read by load_scenario)",
     R"json({"type": "string", "minLength": 1})json"},
    {"network", "model", "analytical: closed forms, no contention; alpha_beta: point-to-point schedules without "
        "contention; flow: schedules as flows sharing links by max-min fairness; nccl: collectives as "
        "NCCL runs them on a described machine (algorithm, protocol, channels), one at a time; their data and "
        "the messages' share each GPU's and NIC's port by max-min fairness"},
    {"network", "latency_us", "alpha of every link, microseconds"},
    {"network", "bandwidth_GBps", "beta of every link, 1e9 bytes per second"},
    {"network", "system", "nccl model: the machine, a preset's name (dtsim list systems) or a system object "
        "(network_models/nccl/system.hpp); the job's ranks are one node's first GPUs or whole nodes",
     R"json({"anyOf": [{"$ref": "#/$defs/nccl_system/properties/preset"}, {"$ref": "#/$defs/nccl_system"}]})json"},
    {"network", "nccl_algo", "nccl model: as NCCL_ALGO, a comma-separated list of Tree, Ring, CollNetDirect, CollNetChain, "
        "NVLS, NVLSTree, PAT (any case), or ^ and the ones to leave out; from NCCL 2.24 more lists after semicolons, each "
        "for the collective it names (\"ring;allreduce:tree\")"},
    {"network", "nccl_proto", "nccl model: as NCCL_PROTO, a comma-separated list of LL, LL128, Simple, or ^ and the ones to "
        "leave out; from NCCL 2.24 more lists after semicolons, each for the collective it names (\"^LL128;allreduce:LL\")"},
    {"network", "overhead_us", "fixed cost added to every message, microseconds"},
    {"network", "jitter_us", "extra latency per message, uniform in [0, jitter), seeded by seed"},
    {"network", "reuse_collectives", "Replay a scheduled collective simulated before (same shape, network state and relative arrival "
        "times, alone on the network or, under the flow model, with the collectives it overlapped as one "
        "busy period; anywhere below the time grid's horizon (time_resolution_s), or in the same binade "
        "of simulated time without a grid) instead of simulating it again: exact, bit for bit; the "
        "result's collective_reuse says how many were. Off: nothing is replayed (ring collectives are "
        "still computed from their recurrence: evaluate_rings)."},
    {"network", "evaluate_rings", "alpha_beta model: compute a ring collective (all-reduce, reduce-scatter, all-gather) from the "
        "ring's recurrence once its last rank arrives, instead of simulating its messages: the same times "
        "bit for bit, at a few nanoseconds a message. flow model: the same for the senders whose routes "
        "share no link with another sender's, the others' messages simulated; traffic that would meet a "
        "computed sender restarts the run with that ring simulated. Not with jitter, a bandwidth trace or "
        "failures still to come, or a trace file. Off: every message is simulated."},
    {"network", "algorithms", "collective algorithms; auto picks the candidate fastest on this network (simulated alone; by "
        "closed form for the analytical model). Not the nccl model's: it runs NCCL's choice (nccl_algo)"},
    {"network.algorithms", "all_reduce", "all-reduce schedule"},
    {"network.algorithms", "reduce_scatter", "reduce-scatter schedule"},
    {"network.algorithms", "all_gather", "all-gather schedule"},
    {"network.algorithms", "broadcast", "broadcast schedule"},
    {"network", "bandwidth_trace", "bandwidth changes of existing cables (not the nccl model's: its links are its system's)",
     R"json({"type": "array", "items": {"type": "object", "additionalProperties": false, "description": "the cable a-b changes bandwidth at time_s", "required": ["time_s", "a", "b", "bandwidth_GBps"], "properties": {"time_s": {"type": "number", "description": "simulated seconds", "minimum": 0}, "a": {"type": "integer", "description": "node", "minimum": 0}, "b": {"type": "integer", "description": "node", "minimum": 0}, "bandwidth_GBps": {"type": "number", "description": "new bandwidth, 1e9 bytes per second", "minimum": 1e-09, "maximum": 1000000}}}})json"},
    {"network", "failures", "cable failures of existing cables (not the nccl model's: its links are its system's)",
     R"json({"type": "array", "items": {"type": "object", "additionalProperties": false, "description": "the cable a-b fails at time_s; traffic reroutes, or the run stops naming the link", "required": ["time_s", "a", "b"], "properties": {"time_s": {"type": "number", "description": "simulated seconds", "minimum": 0}, "a": {"type": "integer", "description": "node", "minimum": 0}, "b": {"type": "integer", "description": "node", "minimum": 0}}}})json"},
    {"nccl_system", "", "A machine for the nccl model: nodes of GPUs on an NVSwitch or on PCIe (NVLink bridges between "
        "pairs), NICs, the host's launch cost. Fields left out keep the preset's (preset) or the "
        "defaults."},
    {"nccl_system", "preset", "start from this preset"},
    {"nccl_system", "name", ""},
    {"nccl_system", "description", ""},
    {"nccl_system", "source", ""},
    {"nccl_system", "gpu", "NCCL's compute capability class (70, 80, 90, 100)"},
    {"nccl_system", "gpus_per_node", "GPUs per node"},
    {"nccl_system", "nodes", "nodes"},
    {"nccl_system", "intra", ""},
    {"nccl_system.intra", "kind", ""},
    {"nccl_system.intra", "nvlink_links", "NVLink links per GPU (to the NVSwitch, or to its bridged peer)"},
    {"nccl_system.intra", "nvlink_GBps", "line rate per link and direction, GB/s"},
    {"nccl_system.intra", "nvls", "NVLink SHARP (NVSwitch 3, Hopper)"},
    {"nccl_system.intra", "nvlink_pairs", "pcie: node-local GPU pairs bridged by NVLink",
     R"json({"type": "array", "items": {"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 2}, "maxItems": 1024})json"},
    {"nccl_system", "pcie", ""},
    {"nccl_system.pcie", "generation", "PCIe generation"},
    {"nccl_system.pcie", "lanes", "lanes"},
    {"nccl_system", "cpu", "the host CPU: intel, amd (x86) or arm (Grace); sets the link between two sockets, the network overhead NCCL adds per step and Blackwell's point-to-point step across nodes (from 2.29)"},
    {"nccl_system", "sockets", "CPU sockets (GPUs split evenly)"},
    {"nccl_system", "network", ""},
    {"nccl_system.network", "nics_per_node", "NICs per node"},
    {"nccl_system.network", "nic_Gbps", "line rate per NIC, Gb/s"},
    {"nccl_system.network", "rails", "independent fabrics (NIC i on rail i % rails); default nics_per_node"},
    {"nccl_system.network", "collnet", "in-network reduction (SHARP)"},
    {"nccl_system", "host", ""},
    {"nccl_system.host", "launch_us", "CPU time to launch one GPU's collective kernel, microseconds"},
    {"nccl_system", "nccl_version", "the NCCL release whose constants and rules apply: 2.18 (2.18.5, 2.18.6), 2.19 "
        "(2.19.3, 2.19.4), 2.20 (2.20.3, 2.20.5), 2.21 (2.21.5), 2.22 (2.22.3), 2.23 (2.23.4), 2.24 (2.24.3), 2.25 (2.25.1), 2.26 (2.26.2, 2.26.3, 2.26.5, 2.26.6), 2.27 (2.27.3), 2.27.5 (2.27.5), 2.27.6 (2.27.6, 2.27.7), 2.28 (2.28.3), 2.28.7 (2.28.7), 2.28.9 (2.28.9), 2.29 (2.29.2, 2.29.3), 2.29.7 (2.29.7) or 2.30 (2.30.3, 2.30.4, 2.30.7); default the newest, "
        "2.30"},
  };
  // The NCCL variables' fields, from their table (nccl_env.hpp).
  static const std::vector<std::string> env_descriptions = [] {
    std::vector<std::string> out;
    for (const auto& var : nccl::nccl_env_vars()) out.push_back(fmt::format("nccl model: as {}, {}", var.name, var.doc));
    return out;
  }();
  static const std::vector<config::FieldDoc> docs = [] {
    std::vector<config::FieldDoc> out(std::begin(fixed), std::end(fixed));
    const auto vars = nccl::nccl_env_vars();
    for (std::size_t i = 0; i < vars.size(); ++i) out.push_back({"network", vars[i].field, env_descriptions[i]});
    return out;
  }();
  return docs;
}

}  // namespace dtsim::net
