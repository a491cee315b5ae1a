// Published nccl-tests all_reduce_perf curves the nccl model is checked against
// (nccl_validation_test.cpp, bench/results/nccl-validation.md): in-place bus bandwidth,
// GB/s, per size (powers of two; nccl-tests' busbw = algbw x 2(n-1)/n).
//
// All from Azure/AI-benchmarking-guide (Azure_Results/ND_*_results.md), run by
// Benchmarks/NVIDIA/NCCLBandwidth.py as `NCCL_ALGO=NVLS all_reduce_perf -b 8 -e 8G -f 2 -g 8
// -n 40`: one process and one thread for the node's 8 GPUs (-g 8); on a node of 4 GPUs (ND
// GB200 v6, 2025: a GB200 NVL72's compute tray, its 4 Blackwell GPUs on the rack's NVLink
// switches, NCCL 2.25.1) the script runs NCCL_ALGO=Ring with -g 4. On A100 NVLS does
// not exist and NCCL >= 2.19 runs the ring instead, with its own protocols (tuning.cc:
// "at least set ring algo available"); the page's "NCCL 2.18.5" can therefore not be the
// library that ran, whose all-reduce would have had no algorithm: it is modelled as 2.20
// (the H200 page's release, and PyTorch 2.4.1's, which all three pages list).
//
// The NCCL release a figure is modelled with (tuning.hpp): the one its source names; where
// it names none, 2.18 for figures from before 2024 and 2.20 (PyTorch 2.3 and 2.4 ship
// 2.20.5) for later ones: they are large sizes, where 2.20 and 2.21 choose alike.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "network_models/nccl_table.hpp"

namespace dtsim::tests {

struct CurvePoint {
  std::int64_t bytes;
  double busbw_GBps;
};

struct Curve {
  std::string system;    // the preset it is compared with
  std::string name;      // the machine, as published
  std::string source;
  std::string nccl_algo;  // NCCL_ALGO of the run
  int gpus_per_thread;    // nccl-tests -g: the node's GPUs, every one of them in the run
  std::string nccl_version;  // the release it is modelled with (above)
  std::vector<CurvePoint> points;
  std::string differs = "";  // what differs from the preset, as a system JSON's fields ("": nothing)
  std::string id = "";       // names its figure, nccl-validation-<id>.svg ("": the preset's name)
};

// A published figure without its curve: nccl-tests' "Avg bus bandwidth" over a run's sizes
// (every size's busbw, out-of-place and in-place alike) and the peak busbw it reported.
struct Figure {
  net::NcclTestOp op;  // the nccl-tests binary
  std::string system;  // the machine as a user writes it: a system JSON (a preset, what differs, the NCCL release)
  std::string name;    // the machine, as published
  std::string source;
  int nodes;
  std::string nccl_algo;                              // NCCL_ALGO of the run ("": NCCL's choice)
  int gpus_per_thread;                                // nccl-tests -g
  std::int64_t min_bytes, max_bytes, step_bytes;      // -b, -e, -i
  double average_busbw_GBps, peak_busbw_GBps;
  double step_factor = 0.0;                           // -f; 0: sizes step by step_bytes
};

// nccl-tests issue 212 (2024-05), NCCL's maintainer on 8x H100 SXM: "NCCL can get an
// effective NVLink bandwidth of 370GB/s, which you can observe as BusBw when running
// non-allreduce operations, or when running with NCCL_ALGO=RING" (a peak at large sizes;
// taken at 8 GiB). It served to check how many hop latencies a Simple slice waits where
// NCCL writes across NVLink (collective_time.hpp), as did issue 1455's H100 rings, issue
// 290's 2x H100 figure and the GB200 curve below.
//
// Across nodes (InfiniBand), where no per-size curve of a preset's machine is published.
// nccl-tests issue 119 (2022-11): 3 servers of 8x A100-SXM4-40GB on NVSwitch, 2x Xeon
// Platinum 8358, 4x HDR 200 Gb/s each; `mpirun -np 24 all_reduce_perf -b 8 -e 128M -g 1`
// with 1 MiB steps (the header's "step: 1048576(bytes)"): average 84.8 GB/s, peak about
// 96 GB/s ("theoretical 100 GB/s: 200G x 4 / 8"); NCCL's version not stated. This figure
// showed the model's multi-node Simple ring paying the GPU's per-slice waits on top of the
// NIC's wire time (about 64 and 75 GB/s then), so it has served development too.
//
// NCCL issue 1138 (2024-01): 2 nodes of 8x A100 with 4x 200 Gb/s NICs each, NCCL 2.18.6,
// `alltoall_perf -b 4G -e 4G -g 1` (one size): busbw 19.83 GB/s, with the NICs at about
// 183 Gb/s on the wire (20.71 after the reporter's change to which GPU's proxy sends for
// which remote GPU). Not used to build the model; added with alltoall.
//
// NCCL issue 812 (2023-03), NCCL's maintainer: "On an Nvidia DGX-A100 system we have
// 8x200Gbit/s IB cards and we measure 192GB/s AllReduce BusBW", advising NCCL_ALGO=RING on
// two nodes (large sizes; node count and size not stated: taken at 2 nodes, 8 GiB). Not
// used to build the model.
//
// nccl-tests issue 290 (2025-03), NCCL's maintainer on 2 nodes of 8x H100 with 8 NDR NICs
// each, NCCL_ALGO=RING: "For NDR @ 400Gbps you should see 46-48GB/s per NIC"; by the
// maintainers' rule of issue 119 (the busbw target is the NICs' count times a NIC's
// figure) 8 x 47 = 376 GB/s (taken at 8 GiB). A rule, not a measurement. Not used to build
// the model.
//
// NCCL issue 1455 (2024-09), 8x H100 SXM, `NCCL_ALGO=[ALGO] all_reduce_perf -b 2G -e 4G -f 2
// -g [gpus]` (NCCL's version not stated): Ring "about 365-370 GBps when gpus from 2 to 8"
// (taken as 367.5); NVLS the same from 2 to 4 GPUs, then 420, 440, 460 and 480 GB/s at 5, 6,
// 7 and 8 GPUs. The GPUs of one node as a node of that many (on one socket: the sockets
// matter only to PCIe paths). 2 GPUs under NCCL_ALGO=NVLS ran (as the ring): NCCL >= 2.19. These served development: they showed NVLS with 3 - 7 GPUs
// running at NCCL's rounded tuning speed (collective_time.cpp, switch_reduction_us).
//
// nccl-tests issue 178 (2023-11): 8 A100s joined in NVLink pairs (nvidia-smi topo: NV12
// between GPUs 0-1, 2-3, 4-5, 6-7, PCIe otherwise, two sockets: a100_pcie_pairs' machine),
// `all_reduce_perf -b 8 -e 12G -f 2 -g 1 -t 2 -o avg` on GPUs 0 and 1: "Bus_BW: 208 GBps";
// with -t 3 (GPU 2 joins over PCIe, the same socket) "bus_bw drops to 20 GBps". NCCL's
// version not stated: modelled as 2.18; the figures taken at 8 GiB, the run's largest size.
// Not used to build the model.
//
// li-plus/playground cuda/nccl.md: "8 A100 NVLink GPUs with 600GB/s bi-directional
// bandwidth" (NVSwitch), `sendrecv_perf -b 128M -e 1G -f 2 -g 8`: busbw 110.8 / 110.8,
// 188.6 / 189.0, 192.8 / 193.7, 195.1 / 195.6 GB/s (out-of-place / in-place) at 128 MiB -
// 1 GiB; NCCL's version not stated, nor the date: modelled as 2.18, whose channels step
// where the curve does (2.20 and later would run 512 MiB - 1 GiB on 32 channels, not 16).
// Not used to build the model.
inline const std::vector<Figure>& published_figures() {
  constexpr std::int64_t M = 1024 * 1024;
  // NCCL issue 1455's runs: `gpus` GPUs of one H100 node under NCCL_ALGO=`algo`, 2 and 4 GiB.
  auto issue_1455 = [](const char* algo, int gpus, double busbw_GBps) {
    return Figure{net::NcclTestOp::AllReduce,
                  fmt::format(R"json({{"preset": "h100_8x", "gpus_per_node": {}, "sockets": 1, "nccl_version": "2.20"}})json", gpus),
                  fmt::format("{} of 8x H100 SXM (NVSwitch 3), all-reduce with NCCL_ALGO={}", gpus, algo),
                  fmt::format("NVIDIA/nccl issue 1455 (-g {}, 2 - 4 GiB)", gpus), 1, algo, gpus, 2048 * M, 4096 * M, 0,
                  busbw_GBps, busbw_GBps, 2.0};
  };
  static const std::vector<Figure> figures{
      {net::NcclTestOp::AllReduce,
       R"json({"preset": "a100_8x", "name": "a100_8x_4nic", "cpu": "intel", "network": {"nics_per_node": 4, "rails": 4}, "nccl_version": "2.18"})json",
       "3x (8x A100-SXM4-40GB, NVSwitch, 2x Xeon Platinum 8358, 4x HDR 200 Gb/s)",
       "NVIDIA/nccl-tests issue 119 (mpirun -np 24, -g 1, 8 B - 128 MiB in 1 MiB steps)", 3, "", 1, 8, 128 * M, M, 84.8, 96.0},
      {net::NcclTestOp::AllReduce, R"json({"preset": "h100_8x", "nccl_version": "2.20"})json",
       "8x H100 SXM (NVSwitch 3), all-reduce with NCCL_ALGO=Ring",
       "NVIDIA/nccl-tests issue 212 (NCCL's maintainer: about 370 GB/s busbw, large sizes; taken at 8 GiB)", 1, "Ring", 1,
       8192 * M, 8192 * M, M, 370.0, 370.0},
      {net::NcclTestOp::AllToAll,
       R"json({"preset": "a100_8x", "name": "a100_8x_4nic", "network": {"nics_per_node": 4, "rails": 4}, "nccl_version": "2.18.6"})json",
       "2x (8x A100, 4x 200 Gb/s NICs), alltoall", "NVIDIA/nccl issue 1138 (NCCL 2.18.6, -np 16, -g 1, 4 GiB)", 2, "", 1,
       4096 * M, 4096 * M, M, 19.83, 19.83},
      {net::NcclTestOp::AllReduce, R"json({"preset": "a100_8x", "nccl_version": "2.18"})json",
       "DGX A100 (8x A100 SXM, 8x HDR 200 Gb/s), all-reduce with NCCL_ALGO=Ring across nodes",
       "NVIDIA/nccl issue 812 (NCCL's maintainer: 192 GB/s measured; taken at 2 nodes, 8 GiB)", 2, "Ring", 1, 8192 * M,
       8192 * M, M, 192.0, 192.0},
      {net::NcclTestOp::AllReduce, R"json({"preset": "h100_8x", "nccl_version": "2.20"})json",
       "2x (8x H100 SXM, 8x NDR 400 Gb/s), all-reduce with NCCL_ALGO=Ring",
       "NVIDIA/nccl-tests issue 290 (NCCL's maintainer: 46-48 GB/s per NDR NIC; 8 x 47 by the rule of issue 119; at 8 GiB)",
       2, "Ring", 1, 8192 * M, 8192 * M, M, 376.0, 376.0},
      issue_1455("Ring", 2, 367.5),
      issue_1455("Ring", 4, 367.5),
      issue_1455("NVLS", 2, 367.5),
      issue_1455("NVLS", 3, 367.5),
      issue_1455("NVLS", 4, 367.5),
      issue_1455("NVLS", 5, 420.0),
      issue_1455("NVLS", 6, 440.0),
      issue_1455("NVLS", 7, 460.0),
      issue_1455("NVLS", 8, 480.0),
      {net::NcclTestOp::AllReduce,
       R"json({"preset": "a100_pcie_pairs", "gpus_per_node": 2, "intra": {"nvlink_pairs": [[0, 1]]}, "nccl_version": "2.18"})json",
       "2 A100s of an 8x A100 box in NVLink pairs (NV12), all-reduce", "NVIDIA/nccl-tests issue 178 (-t 2, GPUs 0 and 1; taken at 8 GiB)",
       1, "", 1, 8192 * M, 8192 * M, M, 208.0, 208.0},
      {net::NcclTestOp::AllReduce,
       R"json({"preset": "a100_pcie_pairs", "gpus_per_node": 3, "sockets": 1, "intra": {"nvlink_pairs": [[0, 1]]}, "nccl_version": "2.18"})json",
       "3 A100s of an 8x A100 box in NVLink pairs (a pair and one over PCIe), all-reduce",
       "NVIDIA/nccl-tests issue 178 (-t 3, GPUs 0 - 2; taken at 8 GiB)", 1, "", 1, 8192 * M, 8192 * M, M, 20.0, 20.0},
      {net::NcclTestOp::SendRecv, R"json({"preset": "a100_8x", "nccl_version": "2.18"})json", "8x A100 SXM (NVSwitch), sendrecv",
       "li-plus/playground cuda/nccl.md (-g 8, 128 MiB - 1 GiB, -f 2)", 1, "", 8, 128 * M, 1024 * M, 0,
       (110.81 + 110.76 + 188.60 + 189.01 + 192.75 + 193.66 + 195.10 + 195.56) / 8, 195.56, 2.0},
  };
  return figures;
}

inline const std::vector<Curve>& published_curves() {
  constexpr std::int64_t K = 1024, M = K * K, G = M * K;
  static const std::vector<Curve> curves{
      {"a100_8x", "Azure ND A100 v4 (8x A100-SXM4-80GB, NVSwitch, 2x AMD EPYC 7V12)",
       "Azure/AI-benchmarking-guide Azure_Results/ND_A100_v4_results.md (NCCL reported as 2.18.5, CUDA 12.5)", "NVLS", 8, "2.20",
       {{1 * K, 0.04},   {2 * K, 0.08},   {4 * K, 0.17},   {8 * K, 0.33},    {16 * K, 0.67},   {32 * K, 1.37},
        {64 * K, 2.70},  {128 * K, 5.15}, {256 * K, 10.11}, {512 * K, 19.24}, {1 * M, 36.22},   {2 * M, 53.54},
        {4 * M, 71.43},  {8 * M, 89.99},  {16 * M, 109.22}, {32 * M, 132.77}, {64 * M, 166.63}, {128 * M, 174.18},
        {256 * M, 213.87}, {512 * M, 221.58}, {1 * G, 228.10}, {2 * G, 230.22}, {4 * G, 230.48}, {8 * G, 231.58}}},
      {"h100_8x", "Azure ND H100 v5 (8x H100 80GB HBM3, NVSwitch 3, 2x Xeon Platinum 8480C)",
       "Azure/AI-benchmarking-guide Azure Results/ND_H100_v5_results.md (NCCL 2.18.5, CUDA 12.6)", "NVLS", 8, "2.18.5",
       {{1 * K, 0.07},   {2 * K, 0.14},   {4 * K, 0.27},   {8 * K, 0.53},    {16 * K, 0.95},   {32 * K, 1.71},
        {64 * K, 2.72},  {128 * K, 5.40}, {256 * K, 10.86}, {512 * K, 21.35}, {1 * M, 43.70},   {2 * M, 81.93},
        {4 * M, 128.73}, {8 * M, 172.13}, {16 * M, 234.45}, {32 * M, 295.53}, {64 * M, 361.78}, {128 * M, 400.61},
        {256 * M, 423.38}, {512 * M, 438.46}, {1 * G, 466.35}, {2 * G, 472.36}, {4 * G, 475.54}, {8 * G, 478.87}}},
      {"h200_8x", "Azure ND H200 v5 (8x H200 141GB, NVSwitch 3, 2x Xeon Platinum 8480C)",
       "Azure/AI-benchmarking-guide Azure_Results/ND_H200_v5_results.md (NCCL 2.20.5, CUDA 12.6)", "NVLS", 8, "2.20.5",
       {{1 * K, 0.06},   {2 * K, 0.12},   {4 * K, 0.23},   {8 * K, 0.47},    {16 * K, 0.93},   {32 * K, 1.84},
        {64 * K, 3.72},  {128 * K, 7.39}, {256 * K, 14.75}, {512 * K, 29.38}, {1 * M, 52.96},   {2 * M, 88.78},
        {4 * M, 138.44}, {8 * M, 181.94}, {16 * M, 240.41}, {32 * M, 300.91}, {64 * M, 368.11}, {128 * M, 412.45},
        {256 * M, 432.24}, {512 * M, 442.72}, {1 * G, 467.58}, {2 * G, 472.57}, {4 * G, 477.41}, {8 * G, 479.98}}},
      // A GB200 NVL72 tray as a user writes it: the B200 preset (the same Blackwell GPU and
      // NVLink5, 18 links), 4 GPUs a node, a Grace (ARM) host. Not used to build the model, but its Simple ring
      // served to check one wait a slice where NCCL writes across NVLink (32 - 64 MiB:
      // 20 - 26 % under with two).
      {"b200_8x", "Azure ND GB200 v6 (4x NVIDIA GB200 185GB a VM, NVLink5 to the NVL72's switches, ARM Neoverse-V2)",
       "Azure/AI-benchmarking-guide Azure_Results/ND_GB200_v6_results.md (NCCL 2.25.1, CUDA 12.8)", "Ring", 4, "2.25.1",
       {{1 * K, 0.10},   {2 * K, 0.19},    {4 * K, 0.38},    {8 * K, 0.76},     {16 * K, 1.46},    {32 * K, 2.88},
        {64 * K, 5.71},  {128 * K, 11.29}, {256 * K, 22.41}, {512 * K, 44.07},  {1 * M, 80.48},    {2 * M, 110.43},
        {4 * M, 146.27}, {8 * M, 253.46},  {16 * M, 331.09}, {32 * M, 422.62},  {64 * M, 550.73},  {128 * M, 574.19},
        {256 * M, 593.53}, {512 * M, 618.74}, {1 * G, 646.87}, {2 * G, 666.63}, {4 * G, 673.06}, {8 * G, 679.61}},
       R"json({"gpus_per_node": 4, "sockets": 1, "cpu": "arm"})json", "gb200_4"},
  };
  return curves;
}

}  // namespace dtsim::tests
