#include "network_models/nccl/system.hpp"

#include <algorithm>
#include <fstream>
#include <iterator>
#include <set>
#include <stdexcept>

#include <fmt/format.h>

#include "config/closest_name.hpp"
#include "network_models/nccl/presets.hpp"

namespace dtsim::net::nccl {

using config::ErrorKind;
using config::ObjectReader;
using config::ScenarioError;
using nlohmann::json;

const char* to_string(GpuArch arch) {
  switch (arch) {
    case GpuArch::Volta: return "volta";
    case GpuArch::Ampere: return "ampere";
    case GpuArch::Hopper: return "hopper";
    case GpuArch::Blackwell: return "blackwell";
  }
  return "?";
}

const char* to_string(IntraKind kind) { return kind == IntraKind::NvSwitch ? "nvswitch" : "pcie"; }
const char* to_string(CpuVendor cpu) {
  switch (cpu) {
    case CpuVendor::Intel: return "intel";
    case CpuVendor::Amd: return "amd";
    case CpuVendor::Arm: return "arm";
  }
  return "?";
}
const std::vector<NcclReleaseInfo>& nccl_releases() {
  static const std::vector<NcclReleaseInfo> releases{
      {NcclRelease::V2_18, "2.18", {"2.18.5", "2.18.6"}, "-",
       "the base: NCCL_ALGO keeps the ring for all but all-reduce, and fails where it leaves all-reduce nothing"},
      {NcclRelease::V2_19, "2.19", {"2.19.3", "2.19.4"}, "2.2",
       "latencies re-tuned (Tree Simple 28 us a hop, the NVLS tree, CollNet); NVLS for reduce-scatter and all-gather "
       "on one node; Hopper's speed lists gain 50 and 22 GB/s; the NVLS tree's chunk 64 KiB from 4 nodes; NVLS across "
       "nodes 32 KiB chunks under 150 GB/s; NCCL_ALGO falls back to the ring where it leaves a collective nothing; "
       "AMD's link between sockets counts 16 GB/s (unlimited before)"},
      {NcclRelease::V2_20, "2.20", {"2.20.3", "2.20.5"}, "2.3, 2.4",
       "a Hopper NVLink counts 20.6 GB/s; CollNet Direct for reduce-scatter and all-gather; each channel loops over "
       "one contiguous part of a collective; the tree's Simple chunk no longer halved; Hopper's extra channel doubling "
       "across nodes only from under 16 channels"},
      {NcclRelease::V2_21, "2.21", {"2.21.5"}, "2.5, 2.6",
       "LL estimated at half the links (a quarter before; the LL kernel keeps this pace in every release), capped at "
       "141 GB/s on one Hopper node; NVLS's NVLink hop 25 us; the NVLS tree's chunk 128 KiB"},
      {NcclRelease::V2_22, "2.22", {"2.22.3"}, "-",
       "a collective's parts are split over the channels in 16-byte cells by traffic, each part's chunk sized for it "
       "alone; the ring all-reduce's last chunk in 16 bytes; the tree always runs 640 threads; the ring NCCL falls "
       "back to keeps NCCL_PROTO; with NVLS the rings and trees run on at least NVLS's channels"},
      {NcclRelease::V2_23, "2.23", {"2.23.4"}, "-",
       "Tree Simple's latency re-tuned (8.4 us once, 4 us a hop, 14 across nodes); PAT for reduce-scatter and "
       "all-gather with one GPU per node (its kernels one step at a time); LL128's one-GPU-per-node "
       "discount dropped; NVLS reduce-scatter and all-gather estimated at the bus bandwidth (the kernels keep this "
       "pace in every release); an all-reduce ring counts 2(N - 1) network steps; one GPU per node takes the tree's "
       "network latency; parts of at least 16 KiB of traffic"},
      {NcclRelease::V2_24, "2.24", {"2.24.3"}, "-",
       "NCCL_ALGO and NCCL_PROTO lists per collective (\"ring;allreduce:tree\"); no fallback: NCCL fails where they "
       "leave a collective nothing, as 2.18 does; PAT at 0.75 of the tree graph's bandwidth"},
      {NcclRelease::V2_25, "2.25", {"2.25.1"}, "-",
       "Blackwell (its NVLink 40 GB/s, speed lists, llMaxBw and per-channel caps twice Hopper's, 32 NVLS channels); "
       "64 channels at most (a ring graph up to 32); Hopper's extra channel doubling across nodes on Blackwell too; "
       "NVLS's graph at most 32 heads"},
      {NcclRelease::V2_26, "2.26", {"2.26.2", "2.26.3", "2.26.5", "2.26.6"}, "2.7",
       "LL's traffic counts four times when a collective's parts are dealt out (smaller parts, more channels); a ring "
       "over two NVLink domains (two bridged pairs) takes at least 2 channels; PAT's kernels work on up to 16 steps "
       "at once"},
      {NcclRelease::V2_27, "2.27", {"2.27.3"}, "2.8",
       "NVLS reduce-scatter and all-gather estimated over (G - 1) / G of the channels' speed (the kernels keep this "
       "pace in every release); CollNet Direct's at 0.9 of the network; Blackwell's speed lists gain 18 within a node "
       "and start at 47.9 across, and one node runs 24 NVLS channels; NVLS reduce-scatter and all-gather across nodes "
       "where the network reduces (a NIC for every GPU), and not with more than 32 GPUs a node"},
      {NcclRelease::V2_27_5, "2.27.5", {"2.27.5"}, "2.9, 2.10",
       "Blackwell: an NVLink counts 40.1 GB/s, and its speed list across nodes starts at 48 (45.1 after it)"},
      {NcclRelease::V2_27_6, "2.27.6", {"2.27.6", "2.27.7"}, "-", "Blackwell: its speed list across nodes starts at 96"},
      {NcclRelease::V2_28, "2.28", {"2.28.3"}, "-",
       "NVLS and the NVLS tree re-estimated (an efficiency per GPU generation, the channels but one, all-reduce's "
       "two operations pipelined, at the ring's n / steps; the kernels keep 2.27's pace); Blackwell's own per-channel "
       "caps for the trees and the NVLS tree; the rings no longer copied up to NVLS's channels, and NVLS across nodes "
       "on at most the communicator's; CollNet Chain up to 8 GPUs a node"},
      {NcclRelease::V2_28_7, "2.28.7", {"2.28.7"}, "-",
       "NVLS from 2 GPUs a node; Blackwell's ring LL128 capped at 34.6 GB/s a channel on 2 nodes"},
      {NcclRelease::V2_28_9, "2.28.9", {"2.28.9"}, "2.11",
       "the NVLS tree's network hop 20.9 us (14 before); Blackwell's NVLS tree capped at 43.8 GB/s a channel beyond "
       "2 nodes (43.1 before)"},
      {NcclRelease::V2_29, "2.29", {"2.29.2", "2.29.3"}, "-",
       "a collective's parts in cells of 32 KiB of traffic, a channel's share no longer at least that; Blackwell: "
       "the ring's LL128 capped at 34.5 GB/s a channel (34.6 on 2 nodes), the speed list within a node gains 45, "
       "NVLS tree estimates corrected by size as the tree's are; Blackwell on ARM hosts: point-to-point steps of 256 "
       "KiB across nodes"},
      {NcclRelease::V2_29_7, "2.29.7", {"2.29.7"}, "2.12, 2.13",
       "Blackwell: the ring's LL128 capped at 40 GB/s a channel; the speed list across nodes gains 80"},
      {NcclRelease::V2_30, "2.30", {"2.30.3", "2.30.4", "2.30.7"}, "2.14, 2.15",
       "Blackwell: the NVLS tree capped at 80 GB/s a channel beyond 2 nodes, the speed list across nodes gains 86, "
       "and across nodes NVLS takes its channels (24 or 32) and chunks (64 - 256 KiB) by the NICs' speed and the GPUs "
       "a node"},
  };
  return releases;
}

const char* to_string(NcclRelease release) {
  for (const auto& r : nccl_releases())
    if (r.release == release) return r.series.c_str();
  return "?";
}

std::string modelled_nccl_releases() {
  std::string out;
  const auto& releases = nccl_releases();
  for (std::size_t i = 0; i < releases.size(); ++i) {
    out += i == 0 ? "" : i + 1 == releases.size() ? " or " : ", ";
    out += fmt::format("{} ({})", releases[i].series, fmt::join(releases[i].patches, ", "));
  }
  return out;
}

NcclRelease parse_nccl_release(const std::string& text) {
  for (const auto& r : nccl_releases())
    if (text == r.series || std::find(r.patches.begin(), r.patches.end(), text) != r.patches.end()) return r.release;
  throw std::invalid_argument(fmt::format("NCCL {} is not modelled: expected {}",
                                          json(text).dump(-1, ' ', false, json::error_handler_t::replace),
                                          modelled_nccl_releases()));
}

void check_release_runs(const System& s) {
  if (s.gpu == GpuArch::Blackwell && s.nccl < NcclRelease::V2_25)
    throw std::invalid_argument(fmt::format("NCCL {} does not run Blackwell GPUs; 2.25 and later do", to_string(s.nccl)));
}

int compute_capability(GpuArch arch) {
  switch (arch) {
    case GpuArch::Volta: return 70;
    case GpuArch::Ampere: return 80;
    case GpuArch::Hopper: return 90;
    case GpuArch::Blackwell: return 100;
  }
  return 80;
}

bool System::bridged(int a, int b) const {
  for (const auto& p : intra.nvlink_pairs)
    if ((p[0] == a && p[1] == b) || (p[0] == b && p[1] == a)) return true;
  return false;
}

const std::vector<std::string>& system_fields() {
  static const std::vector<std::string> fields{"preset", "name", "description", "source", "gpu",  "gpus_per_node", "nodes",
                                               "intra",  "pcie", "cpu",         "sockets", "network", "host", "nccl_version"};
  return fields;
}

namespace {

template <class E>
E pick(ObjectReader& r, const std::string& key, E fallback, const std::vector<std::pair<std::string, E>>& names) {
  std::vector<std::string> allowed;
  std::string current;
  for (const auto& [name, value] : names) {
    allowed.push_back(name);
    if (value == fallback) current = name;
  }
  const std::string s = r.choice(key, current, allowed, ObjectReader::Fallback::derived);  // the preset's, or dtsim's
  for (const auto& [name, value] : names)
    if (name == s) return value;
  return fallback;
}

void parse_intra(ObjectReader& r, System& s) {
  auto& in = s.intra;
  in.kind = pick<IntraKind>(r, "kind", in.kind, {{"nvswitch", IntraKind::NvSwitch}, {"pcie", IntraKind::Pcie}});
  in.nvlink_links = static_cast<int>(r.integer("nvlink_links", in.nvlink_links, 0, 64));
  in.nvlink_GBps = r.number("nvlink_GBps", in.nvlink_GBps, 0.0, 1e4);
  in.nvls = r.boolean("nvls", in.nvls);
  if (const json* pairs = r.find("nvlink_pairs")) {
    const std::string at = r.where("nvlink_pairs");
    if (!pairs->is_array()) throw ScenarioError(at, ErrorKind::wrong_type, "expected an array of [a, b] pairs, got " + config::describe(*pairs));
    if (pairs->size() > 1024) throw ScenarioError(at, ErrorKind::out_of_range, fmt::format("expected at most 1024 pairs, got {}", pairs->size()));
    in.nvlink_pairs.clear();
    for (std::size_t i = 0; i < pairs->size(); ++i) {
      const json& p = (*pairs)[i];
      const std::string pi = fmt::format("{}/{}", at, i);
      if (!p.is_array() || p.size() != 2 || !p[0].is_number_integer() || !p[1].is_number_integer())
        throw ScenarioError(pi, ErrorKind::wrong_type, "expected a pair [a, b] of GPU indices, got " + config::describe(p));
      in.nvlink_pairs.push_back({static_cast<int>(std::clamp<std::int64_t>(p[0].get<std::int64_t>(), -1, 1 << 20)),
                                 static_cast<int>(std::clamp<std::int64_t>(p[1].get<std::int64_t>(), -1, 1 << 20))});
    }
  }
  r.finish();
}

void parse_network(ObjectReader& r, System& s) {
  auto& n = s.network;
  n.nics_per_node = static_cast<int>(r.integer("nics_per_node", n.nics_per_node, 0, 64));
  n.nic_Gbps = r.number("nic_Gbps", n.nic_Gbps, 0.0, 1e5);
  n.rails = static_cast<int>(r.integer("rails", n.rails == 0 ? n.nics_per_node : n.rails, 0, 64));
  n.collnet = r.boolean("collnet", n.collnet);
  r.finish();
}

// Every check that involves more than one field, each naming the field to change.
void check(const System& s, const std::string& path) {
  auto fail = [&](const std::string& key, const std::string& what) {
    throw ScenarioError(path + key, ErrorKind::inconsistent, what);
  };
  if (s.intra.kind == IntraKind::NvSwitch && (s.intra.nvlink_links < 1 || !(s.intra.nvlink_GBps > 0)))
    fail("/intra/nvlink_links", "an NVSwitch node needs nvlink_links >= 1 and nvlink_GBps > 0");
  if (s.intra.nvls && s.intra.kind != IntraKind::NvSwitch) fail("/intra/nvls", "NVLS needs \"kind\": \"nvswitch\"");
  if (s.intra.nvls && compute_capability(s.gpu) < 90)
    fail("/intra/nvls", "NVLS needs Hopper or Blackwell GPUs (NVSwitch 3 or later), got " + std::string(to_string(s.gpu)));
  try {
    check_release_runs(s);
  } catch (const std::invalid_argument& e) {
    fail("/nccl_version", e.what());
  }
  if (s.intra.kind == IntraKind::NvSwitch && !s.intra.nvlink_pairs.empty())
    fail("/intra/nvlink_pairs", "NVLink bridges between pairs belong to \"kind\": \"pcie\" nodes");
  std::set<int> seen;
  for (std::size_t i = 0; i < s.intra.nvlink_pairs.size(); ++i) {
    const auto& p = s.intra.nvlink_pairs[i];
    for (int g : p)
      if (g < 0 || g >= s.gpus_per_node)
        fail(fmt::format("/intra/nvlink_pairs/{}", i), fmt::format("expected GPU indices in [0, {}), got [{}, {}]", s.gpus_per_node, p[0], p[1]));
    if (p[0] == p[1] || !seen.insert(p[0]).second || !seen.insert(p[1]).second)
      fail(fmt::format("/intra/nvlink_pairs/{}", i), fmt::format("pair [{}, {}] bridges a GPU twice (each GPU has one bridge)", p[0], p[1]));
  }
  if (!s.intra.nvlink_pairs.empty() && !(s.intra.nvlink_links >= 1 && s.intra.nvlink_GBps > 0))
    fail("/intra/nvlink_links", "NVLink bridges need nvlink_links >= 1 and nvlink_GBps > 0");
  if (s.sockets == 2 && s.gpus_per_node % 2 != 0) fail("/sockets", fmt::format("2 sockets need an even gpus_per_node, got {}", s.gpus_per_node));
  if (s.nodes > 1 && (s.network.nics_per_node < 1 || !(s.network.nic_Gbps > 0)))
    fail("/network/nics_per_node", fmt::format("{} nodes need nics_per_node >= 1 and nic_Gbps > 0", s.nodes));
  if (s.network.nics_per_node > 0 && (s.network.rails < 1 || s.network.rails > s.network.nics_per_node))
    fail("/network/rails", fmt::format("expected 1 to nics_per_node ({}) rails, got {}", s.network.nics_per_node, s.network.rails));
  if (s.network.collnet && s.network.nics_per_node < 1) fail("/network/collnet", "CollNet needs a network (nics_per_node >= 1)");
}

}  // namespace

System parse_system(const json& value, const std::string& path, config::FieldRecorder* recorder) {
  if (value.is_string()) {
    const std::string name = value.get<std::string>();
    if (const System* p = find_system_preset(name)) return *p;
    throw ScenarioError(path, ErrorKind::unknown_name,
                        fmt::format("expected a system preset ({}) or an object, got {}{}", system_preset_names(),
                                    json(name).dump(-1, ' ', false, json::error_handler_t::replace),
                                    config::did_you_mean(name, system_preset_list())));
  }
  ObjectReader r(value, path, recorder);
  System s;
  if (r.find("preset")) {
    const std::string name = r.choice("preset", std::nullopt, system_preset_list());
    s = *find_system_preset(name);
  }
  s.name = r.string("name", s.name);
  s.description = r.string("description", s.description);
  s.source = r.string("source", s.source);
  s.gpu = pick<GpuArch>(r, "gpu", s.gpu, {{"volta", GpuArch::Volta}, {"ampere", GpuArch::Ampere}, {"hopper", GpuArch::Hopper}, {"blackwell", GpuArch::Blackwell}});
  s.gpus_per_node = static_cast<int>(r.integer("gpus_per_node", s.gpus_per_node, 1, 64));
  s.nodes = static_cast<int>(r.integer("nodes", s.nodes, 1, 1 << 14));
  {
    auto in = r.object("intra", false);
    parse_intra(in, s);
  }
  {
    auto p = r.object("pcie", false);
    s.pcie.generation = static_cast<int>(p.integer("generation", s.pcie.generation, 1, 6));
    s.pcie.lanes = static_cast<int>(p.integer("lanes", s.pcie.lanes, 1, 32));
    p.finish();
  }
  s.cpu = pick<CpuVendor>(r, "cpu", s.cpu, {{"amd", CpuVendor::Amd}, {"intel", CpuVendor::Intel}, {"arm", CpuVendor::Arm}});
  s.sockets = static_cast<int>(r.integer("sockets", s.sockets, 1, 2));
  {
    auto n = r.object("network", false);
    parse_network(n, s);
  }
  {
    auto h = r.object("host", false);
    s.host.launch_us = h.number("launch_us", s.host.launch_us, 0.0, 1e6);
    h.finish();
  }
  // Not a choice among names: a release near an accepted one is another release, not a typo.
  try {
    s.nccl = parse_nccl_release(r.string("nccl_version", to_string(s.nccl)));
  } catch (const std::invalid_argument& e) {
    throw ScenarioError(r.where("nccl_version"), ErrorKind::unknown_name, e.what());
  }
  r.finish();
  check(s, path);
  return s;
}

System read_system_file(const std::string& file) {
  if (const auto why = config::not_a_regular_file(file)) throw config::InputError(fmt::format("{} {}", file, *why));
  std::ifstream in(file);
  if (!in) throw config::InputError(fmt::format("{}: cannot read it", file));
  const std::string body{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  json doc;
  try {
    doc = config::parse_json_text(body);
  } catch (const config::JsonTextError& e) {
    throw config::InputError(fmt::format("{}: invalid JSON at line {}, column {}", file, e.line(), e.column()));
  }
  if (const auto deep = config::first_too_deep(doc))
    throw config::InputError(fmt::format("{}: {}: expected at most {} levels of nesting", file, *deep, config::kMaxJsonDepth));
  try {
    return parse_system(doc, "");
  } catch (const ScenarioError& e) {
    throw config::InputError(fmt::format("{}: {}", file, e.what()));
  }
}

json system_json(const System& s) {
  json pairs = json::array();
  for (const auto& p : s.intra.nvlink_pairs) pairs.push_back({p[0], p[1]});
  json intra = {{"kind", to_string(s.intra.kind)},
                {"nvlink_links", s.intra.nvlink_links},
                {"nvlink_GBps", s.intra.nvlink_GBps},
                {"nvls", s.intra.nvls}};
  if (!s.intra.nvlink_pairs.empty()) intra["nvlink_pairs"] = pairs;
  return {{"name", s.name},
          {"description", s.description},
          {"source", s.source},
          {"gpu", to_string(s.gpu)},
          {"gpus_per_node", s.gpus_per_node},
          {"nodes", s.nodes},
          {"intra", intra},
          {"pcie", {{"generation", s.pcie.generation}, {"lanes", s.pcie.lanes}}},
          {"cpu", to_string(s.cpu)},
          {"sockets", s.sockets},
          {"network",
           {{"nics_per_node", s.network.nics_per_node},
            {"nic_Gbps", s.network.nic_Gbps},
            {"rails", s.network.rails},
            {"collnet", s.network.collnet}}},
          {"host", {{"launch_us", s.host.launch_us}}},
          {"nccl_version", to_string(s.nccl)}};
}

}  // namespace dtsim::net::nccl
