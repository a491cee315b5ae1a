#include "network_models/nccl/presets.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace dtsim::net::nccl {

namespace {

// 8 GPUs on NVSwitches, 8 NICs (one per GPU, rail-optimised), two sockets.
System nvswitch_node(std::string name, GpuArch gpu, int links, bool nvls, int pcie_gen, CpuVendor cpu, double nic_Gbps,
                     double launch_us) {
  System s;
  s.name = std::move(name);
  s.gpu = gpu;
  s.gpus_per_node = 8;
  s.nodes = 1;
  s.intra.kind = IntraKind::NvSwitch;
  s.intra.nvlink_links = links;
  s.intra.nvlink_GBps = 25.0;
  s.intra.nvls = nvls;
  s.pcie = {pcie_gen, 16};
  s.cpu = cpu;
  s.sockets = 2;
  s.network = {.nics_per_node = 8, .nic_Gbps = nic_Gbps, .rails = 8, .collnet = false};
  s.host.launch_us = launch_us;
  return s;
}

std::vector<System> make_presets() {
  std::vector<System> out;
  {
    // DGX / HGX A100: six 2nd-generation NVSwitches, 12 NVLink3 links per GPU (25 GB/s per
    // direction each, 300 GB/s), 8x ConnectX-6 HDR 200 Gb/s, 2x AMD EPYC 7742 (Azure ND A100 v4:
    // EPYC 7V12), PCIe Gen4.
    System s = nvswitch_node("a100_8x", GpuArch::Ampere, 12, false, 4, CpuVendor::Amd, 200.0, 5.07);
    s.description = "8x A100 SXM4 (DGX/HGX A100): NVSwitch, 12 NVLink3 per GPU, 8x HDR 200 Gb/s";
    s.source = "NVIDIA DGX A100 datasheet and A100 datasheet (NVLink3 600 GB/s bidirectional); host launch 5.07 us per GPU "
               "measured on NCCL issue #583 (2x A100-SXM4, all_reduce_perf -g 2, 32 B: 10.14 us)";
    out.push_back(s);
  }
  {
    // DGX / HGX H100: four 3rd-generation NVSwitches with NVLink SHARP, 18 NVLink4 links per
    // GPU (450 GB/s per direction), 8x ConnectX-7 NDR 400 Gb/s, 2x Xeon Platinum 8480C, PCIe Gen5.
    System s = nvswitch_node("h100_8x", GpuArch::Hopper, 18, true, 5, CpuVendor::Intel, 400.0, 3.74);
    s.description = "8x H100 SXM5 (DGX/HGX H100): NVSwitch 3 with NVLS, 18 NVLink4 per GPU, 8x NDR 400 Gb/s";
    s.source = "NVIDIA DGX H100 datasheet and H100 datasheet (NVLink4 900 GB/s bidirectional); host launch 3.74 us per GPU "
               "measured on Azure ND H200 v5 (same 2x Xeon 8480C host; all_reduce_perf -g 8, 1 KiB: 29.9 us)";
    out.push_back(s);
  }
  {
    System s = nvswitch_node("h200_8x", GpuArch::Hopper, 18, true, 5, CpuVendor::Intel, 400.0, 3.20);
    s.description = "8x H200 SXM (HGX H200): NVSwitch 3 with NVLS, 18 NVLink4 per GPU, 8x NDR 400 Gb/s";
    s.source = "NVIDIA H200 datasheet (NVLink4 900 GB/s bidirectional, as H100); host launch 3.20 us per GPU measured on "
               "Azure ND H100 v5 (same 2x Xeon 8480C host; all_reduce_perf -g 8, 1 KiB: 25.6 us)";
    out.push_back(s);
  }
  {
    // DGX / HGX B200: two 5th-generation NVSwitch chips with NVLink SHARP, 18 NVLink5 links per
    // GPU (50 GB/s per direction each, 900 GB/s), 8x ConnectX-7 400 Gb/s, 2x Xeon Platinum
    // 8570, PCIe Gen5. NCCL runs Blackwell from 2.25.
    System s = nvswitch_node("b200_8x", GpuArch::Blackwell, 18, true, 5, CpuVendor::Intel, 400.0, 3.74);
    s.intra.nvlink_GBps = 50.0;
    s.description = "8x B200 (DGX/HGX B200): NVSwitch 5th generation with NVLS, 18 NVLink5 per GPU, 8x 400 Gb/s";
    s.source = "NVIDIA DGX B200 datasheet (NVLink5 1.8 TB/s bidirectional per GPU, 8x ConnectX-7 400 Gb/s); host launch "
               "not measured on this host: h100_8x's (3.74 us per GPU, Xeon 8480C; the DGX B200's Xeon 8570 is its "
               "successor)";
    out.push_back(s);
  }
  {
    // A PCIe server: 8x A100 PCIe on PCIe Gen4 x16, each pair joined by NVLink bridges (12
    // NVLink3 links, 600 GB/s bidirectional between the two), two AMD sockets, 2x 100 Gb/s.
    System s;
    s.name = "a100_pcie_pairs";
    s.description = "8x A100 PCIe on PCIe Gen4, NVLink bridges between pairs (0-1, 2-3, 4-5, 6-7), 2x 100 Gb/s";
    s.source = "NVIDIA A100 PCIe datasheet (PCIe Gen4 x16; NVLink bridge for 2 GPUs: 600 GB/s bidirectional); host launch "
               "as a100_8x";
    s.gpu = GpuArch::Ampere;
    s.gpus_per_node = 8;
    s.intra.kind = IntraKind::Pcie;
    s.intra.nvlink_links = 12;
    s.intra.nvlink_GBps = 25.0;
    s.intra.nvlink_pairs = {{0, 1}, {2, 3}, {4, 5}, {6, 7}};
    s.pcie = {4, 16};
    s.cpu = CpuVendor::Amd;
    s.sockets = 2;
    s.network = {.nics_per_node = 2, .nic_Gbps = 100.0, .rails = 2, .collnet = false};
    s.host.launch_us = 5.07;
    out.push_back(s);
  }
  return out;
}

}  // namespace

const std::vector<System>& system_presets() {
  static const std::vector<System> presets = make_presets();
  return presets;
}

const System* find_system_preset(const std::string& name) {
  for (const auto& s : system_presets())
    if (s.name == name) return &s;
  return nullptr;
}

const std::vector<std::string>& system_preset_list() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const auto& s : system_presets()) out.push_back(s.name);
    return out;
  }();
  return names;
}

std::string system_preset_names() { return fmt::format("{}", fmt::join(system_preset_list(), ", ")); }

}  // namespace dtsim::net::nccl
