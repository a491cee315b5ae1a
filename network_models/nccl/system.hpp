// nccl::System: a machine the nccl network model times collectives on, described the way
// NCCL's topology detection sees it (src/graph/topo.cc): nodes of GPUs of one generation,
// the GPUs of a node joined by an NVSwitch or by PCIe (with NVLink bridges between pairs),
// each node's NICs, and the host that launches the kernels.
//
// Bandwidths are the hardware's line rates; the model turns them into NCCL's own figures
// where NCCL does (tuning.hpp): an NVLink of 25 GB/s counts as NCCL's 20 GB/s
// (SMxx_NVLINK_BW), a PCIe link as width x GT/s x 120/128 / 8 (kvDictPciGen), a NIC as
// Gb/s / 8.
//
// JSON (a preset's name, or an object; every field is checked where it is read, and an
// unknown key is an error naming its path):
//   {"preset": "h100_8x",                  // optional: start from a preset, override below
//    "gpu": "ampere" | "hopper" | "blackwell" | "volta",
//    "gpus_per_node": 8, "nodes": 1,
//    "intra": {"kind": "nvswitch" | "pcie", "nvlink_links": 12, "nvlink_GBps": 25,
//              "nvls": false, "nvlink_pairs": [[0, 1], [2, 3]]},
//    "pcie": {"generation": 4, "lanes": 16},
//    "cpu": "amd" | "intel" | "arm", "sockets": 1,
//    "network": {"nics_per_node": 8, "nic_Gbps": 200, "rails": 8, "collnet": false},
//    "host": {"launch_us": 5.07},
//    "nccl_version": "2.18" | "2.19" | ... | "2.29.7" | "2.30"}  // the NCCL release that runs on it (below)
#pragma once

#include <array>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/object_reader.hpp"

namespace dtsim::net::nccl {

// NCCL's compute-capability classes (tuning.cc's VOLTA/AMPERE/HOPPER_COMPCAP_IDX).
enum class GpuArch { Volta, Ampere, Hopper, Blackwell };
enum class IntraKind { NvSwitch, Pcie };
// The host CPU as NCCL tells them apart (cpuArch, cpuVendor): x86 by Intel or AMD, or ARM
// (NVIDIA Grace).
enum class CpuVendor { Intel, Amd, Arm };
// The NCCL release whose constants and rules the model applies (tuning.hpp lists what
// differs; nccl_releases below): 2.18 (2.18.5, 2.18.6), 2.19 (2.19.3, 2.19.4), 2.20 (2.20.3,
// 2.20.5), 2.21 (2.21.5), 2.22 (2.22.3), 2.23 (2.23.4), 2.24 (2.24.3), 2.25 (2.25.1), 2.26
// (2.26.2 - 2.26.6), 2.27 (2.27.3), 2.27.5, 2.27.6 (2.27.6, 2.27.7), 2.28 (2.28.3), 2.28.7,
// 2.28.9, 2.29 (2.29.2, 2.29.3), 2.29.7 or 2.30 (2.30.3 - 2.30.7): the releases of the
// published curves it is checked on, of PyTorch 2.2 - 2.15's wheels, and those between (2.25
// the first that runs Blackwell). A series is one value where its patch releases agree in
// what the model reads; 2.27's, 2.28's and 2.29's patches change some figures, so they have
// values of their own. Others are refused rather than approximated. In release order.
enum class NcclRelease {
  V2_18, V2_19, V2_20, V2_21, V2_22, V2_23, V2_24, V2_25, V2_26, V2_27, V2_27_5, V2_27_6, V2_28, V2_28_7, V2_28_9, V2_29,
  V2_29_7, V2_30
};
inline constexpr NcclRelease kKernelPaceRelease = NcclRelease::V2_27;

const char* to_string(GpuArch arch);
const char* to_string(IntraKind kind);
const char* to_string(CpuVendor cpu);
// A modelled release: its name (the series, or a patch release that changes what the model
// reads), the patch releases whose constants and rules it holds (their src/graph and
// src/enqueue.cc agree where the model reads them), the PyTorch releases whose wheels ship
// one of them, and what it changes from the one before.
struct NcclReleaseInfo {
  NcclRelease release;
  std::string series;                // "2.20", "2.27.5"
  std::vector<std::string> patches;  // "2.20.3", "2.20.5"
  std::string pytorch;               // "2.3, 2.4"; "-": none
  std::string changes;
};
// In release order (`dtsim list nccl_releases`).
const std::vector<NcclReleaseInfo>& nccl_releases();
const char* to_string(NcclRelease release);  // "2.18", "2.19", ..., "2.30"
// The modelled releases with their patch releases: "2.18 (2.18.5, 2.18.6), ... or 2.30 (2.30.3, ...)".
std::string modelled_nccl_releases();
// A release as "2.19" or "2.19.3" (those above); std::invalid_argument naming the releases
// modelled otherwise.
NcclRelease parse_nccl_release(const std::string& text);
int compute_capability(GpuArch arch);  // 70, 80, 90, 100

struct System {
  std::string name = "custom";
  std::string description;
  std::string source;  // where the figures come from (presets)
  GpuArch gpu = GpuArch::Ampere;
  int gpus_per_node = 8;
  int nodes = 1;
  struct Intra {
    IntraKind kind = IntraKind::NvSwitch;
    int nvlink_links = 12;     // per GPU: to the NVSwitch, or to its bridged peer
    double nvlink_GBps = 25;   // per link and direction, line rate
    bool nvls = false;         // NVLink SHARP: in-switch reduction (NVSwitch 3, Hopper)
    std::vector<std::array<int, 2>> nvlink_pairs;  // pcie: GPUs (node-local indices) bridged by NVLink
  } intra;
  struct Pcie {
    int generation = 4;
    int lanes = 16;
  } pcie;
  CpuVendor cpu = CpuVendor::Amd;
  int sockets = 1;  // GPUs split evenly between them when 2
  struct Network {
    int nics_per_node = 0;
    double nic_Gbps = 0;
    int rails = 0;          // independent fabrics; NIC i of every node is on rail i % rails
    bool collnet = false;   // in-network reduction (SHARP)
  } network;
  struct Host {
    // CPU time to enqueue and launch one GPU's collective kernel (ncclGroupEnd's work per
    // GPU): what nccl-tests' -g G (G GPUs from one thread) serialises, G per iteration.
    double launch_us = 5.0;
  } host;
  // The newest modelled release, what PyTorch's current wheels ship; a system file or
  // scenario pins another with "nccl_version".
  NcclRelease nccl = NcclRelease::V2_30;

  int gpus() const { return gpus_per_node * nodes; }
  // Whether node-local GPUs a and b are bridged by NVLink (pcie boxes).
  bool bridged(int a, int b) const;
};

// Throws std::invalid_argument "NCCL 2.24 does not run Blackwell GPUs; 2.25 and later do"
// where the system's release does not run its GPUs.
void check_release_runs(const System& s);

// Parses a system: a preset's name (a string) or an object at `r`'s path (see above).
// Throws config::ScenarioError naming the JSON path. `recorder`: a recording parse
// (config/field_recorder.hpp), for the schema generator.
System parse_system(const nlohmann::json& value, const std::string& path, config::FieldRecorder* recorder = nullptr);
nlohmann::json system_json(const System& system);

// A system JSON file (what `dtsim collective --system FILE` reads): throws
// config::InputError "FILE: ..." (a JSON path inside it where the content is wrong).
System read_system_file(const std::string& file);

// The JSON fields of a system object, for `dtsim list systems` and the schema.
const std::vector<std::string>& system_fields();

}  // namespace dtsim::net::nccl
