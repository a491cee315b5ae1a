// The nccl network model (network_models/nccl/): system descriptions and their errors,
// NCCL's graph search and tuning restated, its choice at the switch-over sizes, the
// kernels' execution times against dtsim's own simulation of the same steps, and the model
// inside a Network (closed-form collectives, clocked messages).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "config/object_reader.hpp"
#include "network_models/closed_form.hpp"
#include "network_models/collective_execution.hpp"
#include "network_models/nccl/nccl_model.hpp"
#include "network_models/nccl/presets.hpp"
#include "network_models/network.hpp"
#include "network_models/network_docs.hpp"
#include "network_models/network_section.hpp"

namespace dtsim::net::nccl {
namespace {

using nlohmann::json;

// A preset under NCCL 2.18 (Blackwell's under 2.25, the first that runs it): the releases
// most closed forms here were written for; tests of later releases set theirs. The presets'
// own release, the model's default (the newest), is checked in NcclSystems.DefaultRelease.
System preset(const char* name) {
  const System* found = find_system_preset(name);
  EXPECT_NE(found, nullptr) << name;
  System s = *found;
  s.nccl = s.gpu == GpuArch::Blackwell ? NcclRelease::V2_25 : NcclRelease::V2_18;
  return s;
}

// The message of parsing `doc` as a system at "/network/system", or "" if it parses.
std::string system_error(const json& doc) {
  try {
    (void)parse_system(doc, "/network/system");
  } catch (const config::ScenarioError& e) {
    return e.what();
  }
  return "";
}

// --- systems ---------------------------------------------------------------------------------

// Every preset reads back from its own JSON, as a name and as an object, and says where its
// figures come from.
TEST(NcclSystems, PresetsRoundTrip) {
  ASSERT_EQ(system_preset_list(), (std::vector<std::string>{"a100_8x", "h100_8x", "h200_8x", "b200_8x", "a100_pcie_pairs"}));
  for (const auto& s : system_presets()) {
    EXPECT_FALSE(s.description.empty()) << s.name;
    EXPECT_FALSE(s.source.empty()) << s.name;
    EXPECT_EQ(system_json(parse_system(json(s.name), "/s")), system_json(s)) << s.name;
    EXPECT_EQ(system_json(parse_system(system_json(s), "/s")), system_json(s)) << s.name;
  }
  // "N such nodes": a preset with its nodes changed.
  const System two = parse_system(json{{"preset", "h100_8x"}, {"nodes", 2}}, "/s");
  EXPECT_EQ(two.nodes, 2);
  EXPECT_EQ(two.gpus(), 16);
  EXPECT_EQ(two.intra.nvlink_links, 18);
}

// The example system files (scenarios/systems/) read, each names and describes itself, and
// the one written after issue 119's machine is the validation file's description of it.
TEST(NcclSystems, ExampleFilesRead) {
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(std::filesystem::path(DTSIM_SOURCE_DIR) / "scenarios" / "systems")) {
    if (entry.path().extension() != ".json") continue;
    ++files;
    const System s = read_system_file(entry.path().string());
    EXPECT_EQ(s.name, entry.path().stem().string());
    EXPECT_FALSE(s.description.empty()) << s.name;
    EXPECT_FALSE(s.source.empty()) << s.name;
    EXPECT_NO_THROW((void)make_machine(s, s.gpus())) << s.name;
  }
  EXPECT_GE(files, 2);
  System file = read_system_file(std::string(DTSIM_SOURCE_DIR) + "/scenarios/systems/a100_8x_4nic.json");
  System validation = parse_system(
      json::parse(R"({"preset": "a100_8x", "name": "a100_8x_4nic", "cpu": "intel", "network": {"nics_per_node": 4, "rails": 4}})"),
      "/s");
  file.description = validation.description;
  file.source = validation.source;
  EXPECT_EQ(system_json(file), system_json(validation));
}

// A bad description is one line naming the JSON path to change.
TEST(NcclSystems, ErrorsNameThePath) {
  EXPECT_EQ(system_error("a100_9x"), "/network/system: expected a system preset (a100_8x, h100_8x, h200_8x, b200_8x, a100_pcie_pairs) "
                                     "or an object, got \"a100_9x\" (did you mean `a100_8x`?)");
  EXPECT_EQ(system_error(json{{"intra", {{"kind", "nvlink"}}}}),
            "/network/system/intra/kind: expected one of nvswitch, pcie, got \"nvlink\"");
  EXPECT_EQ(system_error(json{{"gpus_per_node", 0}}), "/network/system/gpus_per_node: expected an integer >= 1 and <= 64, got 0");
  EXPECT_EQ(system_error(json{{"gpu", "ampere"}, {"intra", {{"nvls", true}}}}),
            "/network/system/intra/nvls: NVLS needs Hopper or Blackwell GPUs (NVSwitch 3 or later), got ampere");
  EXPECT_EQ(system_error(json{{"nodes", 2}}),
            "/network/system/network/nics_per_node: 2 nodes need nics_per_node >= 1 and nic_Gbps > 0");
  EXPECT_EQ(system_error(json{{"intra", {{"kind", "pcie"}, {"nvlink_pairs", {{0, 9}}}}}}),
            "/network/system/intra/nvlink_pairs/0: expected GPU indices in [0, 8), got [0, 9]");
  EXPECT_EQ(system_error(json{{"intra", {{"kind", "pcie"}, {"nvlink_pairs", {{0, 1}, {1, 2}}}}}}),
            "/network/system/intra/nvlink_pairs/1: pair [1, 2] bridges a GPU twice (each GPU has one bridge)");
  EXPECT_EQ(system_error(json{{"network", {{"nics", 8}}}}).rfind("/network/system/network/nics: unknown field", 0), 0u);
  EXPECT_EQ(system_error(json{{"preset", "h100_8"}}),
            "/network/system/preset: expected one of a100_8x, h100_8x, h200_8x, b200_8x, a100_pcie_pairs, got \"h100_8\" (did you mean `h100_8x`?)");
  // Blackwell needs NCCL 2.25.
  EXPECT_EQ(system_error(json{{"preset", "b200_8x"}, {"nccl_version", "2.24"}}),
            "/network/system/nccl_version: NCCL 2.24 does not run Blackwell GPUs; 2.25 and later do");
  // A job's ranks must be one node's first GPUs or whole nodes, within the system.
  EXPECT_THROW((void)make_machine(preset("a100_8x"), 12), std::invalid_argument);
  EXPECT_THROW((void)make_machine(preset("a100_8x"), 16), std::invalid_argument);  // one node only
  EXPECT_NO_THROW((void)make_machine(preset("a100_8x"), 5));
}

// --- NCCL's graph search ----------------------------------------------------------------------

// Every preset, and a system that names no release, runs the newest modelled release (what
// PyTorch's current wheels ship: 2.30 for 2.14 and 2.15); "nccl_version" pins another.
TEST(NcclSystems, DefaultRelease) {
  const NcclRelease newest = nccl_releases().back().release;
  for (const char* name : {"a100_8x", "h100_8x", "h200_8x", "b200_8x", "a100_pcie_pairs"})
    EXPECT_EQ(find_system_preset(name)->nccl, newest) << name;
  EXPECT_EQ(System{}.nccl, newest);
  EXPECT_EQ(parse_system(json{{"preset", "h100_8x"}}, "/network/system").nccl, newest);
  EXPECT_EQ(parse_system(json{{"preset", "h100_8x"}, {"nccl_version", "2.18"}}, "/network/system").nccl, NcclRelease::V2_18);
}

// 8x A100: 12 NVLinks of NCCL's 20 GB/s = 240 GB/s per GPU; the first speed that fits is 40,
// 6 channels of it fill the 240, a channel of >= 25 GB/s splits in two (12 x 20), and the
// communicator doubles the rings: 24 channels (what DGX A100 logs print: "Channel 23/24").
TEST(NcclGraph, A100NvSwitch) {
  const Machine m = make_machine(preset("a100_8x"), 8);
  const Graph& ring = m.graphs[index(Algo::Ring)];
  EXPECT_EQ(ring.channels, 12);
  EXPECT_DOUBLE_EQ(ring.bw_intra, 20.0);
  EXPECT_EQ(ring.intra, Hw::NvLink);
  EXPECT_EQ(m.channels, 24);
  EXPECT_FALSE(m.nvls);
}

// 8x H100: 18 x 20 = 360 GB/s; Hopper's speed list starts at 60: 6 x 60 = 360, split to
// 12 x 30, 24 channels. NVLS: one channel per GPU at the first speed whose 8 channels fit
// 360 x 8/7 (60 x 8 = 480 does not, 40 x 8 = 320 does); 16 NVLS compute channels.
TEST(NcclGraph, H100NvSwitchWithNvls) {
  const Machine m = make_machine(preset("h100_8x"), 8);
  EXPECT_EQ(m.graphs[index(Algo::Ring)].channels, 12);
  EXPECT_DOUBLE_EQ(m.graphs[index(Algo::Ring)].bw_intra, 30.0);
  EXPECT_EQ(m.channels, 24);
  ASSERT_TRUE(m.nvls);
  EXPECT_EQ(m.graphs[index(Algo::Nvls)].channels, 8);
  EXPECT_DOUBLE_EQ(m.graphs[index(Algo::Nvls)].bw_intra, 40.0);
  EXPECT_EQ(m.nvls_channels, 16);
  // NCCL gives a communicator of 2 GPUs on a node no NVLS (ncclNvlsInit: gpuCount <= 2);
  // asked for it (NCCL_ALGO=NVLS), NCCL 2.18 fails and 2.19 on fall back to the ring.
  EXPECT_FALSE(make_machine(preset("h100_8x"), 2).nvls);
  EXPECT_TRUE(make_machine(preset("h100_8x"), 3).nvls);
  // Fewer GPUs: k channels take k + 1 speeds of a GPU's 360 GB/s (twice on the head's
  // links), so 5 GPUs fit 5 x 60, 6 and 7 only 5 of 60 and fall to 40 (NCCL's table), as 8.
  for (const auto& [gpus, speed] : std::vector<std::pair<int, double>>{{3, 60}, {4, 60}, {5, 60}, {6, 40}, {7, 40}, {8, 40}}) {
    const Machine sub = make_machine(preset("h100_8x"), gpus);
    EXPECT_EQ(sub.graphs[index(Algo::Nvls)].channels, gpus) << gpus;
    EXPECT_DOUBLE_EQ(sub.graphs[index(Algo::Nvls)].bw_intra, speed) << gpus;
  }
  auto config = std::make_shared<Config>();
  config->system = preset("h100_8x");
  config->overrides = parse_overrides("NVLS", "");
  EXPECT_THROW((void)Clock(config, 2), std::invalid_argument);
  EXPECT_EQ(Clock(config, 3).run(Coll::AllReduce, 1 << 30).choice.algo, Algo::Nvls);
  config->system.nccl = NcclRelease::V2_20;
  EXPECT_EQ(Clock(config, 2).run(Coll::AllReduce, 1 << 30).choice.algo, Algo::Ring);
  EXPECT_EQ(Clock(config, 3).run(Coll::AllReduce, 1 << 30).choice.algo, Algo::Nvls);
}

// A PCIe box: the ring crosses PCIe Gen4 x16 (16 x 120 / 80 = 24 GB/s) between pairs; 1 x 20
// is beaten by 2 x 12 = 24 (the search goes on while the next speed is over 0.49 of the
// best's), no split under 25: 4 channels, over PCIe. Two bridged GPUs alone ring over NVLink.
TEST(NcclGraph, PcieBoxWithBridgedPairs) {
  const Machine m = make_machine(preset("a100_pcie_pairs"), 8);
  EXPECT_EQ(m.graphs[index(Algo::Ring)].channels, 2);
  EXPECT_DOUBLE_EQ(m.graphs[index(Algo::Ring)].bw_intra, 12.0);
  EXPECT_EQ(m.graphs[index(Algo::Ring)].intra, Hw::Pci);
  EXPECT_EQ(m.channels, 4);
  const Machine pair = make_machine(preset("a100_pcie_pairs"), 2);
  EXPECT_EQ(pair.graphs[index(Algo::Ring)].intra, Hw::NvLink);
  // LL128 is NVLink-only: never enabled on the PCIe ring.
  const Tuning t = tune(m, Overrides{});
  EXPECT_EQ(t.bandwidth_GBps[index(Coll::AllReduce)][index(Algo::Ring)][index(Proto::LL128)], 0.0);
  EXPECT_GT(tune(pair, Overrides{}).bandwidth_GBps[index(Coll::AllReduce)][index(Algo::Ring)][index(Proto::LL128)], 0.0);
}

// The host CPU (ncclTopoGetInterCpuBw, computeBuffSizes): a ring that crosses the two sockets
// of a PCIe box runs at most at the link between them, Intel's SKL_QPI_BW (10 GB/s), AMD's
// AMD_BW (16, from 2.19; unlimited before) or ARM's ARM_BW (6); NCCL's search then takes one
// channel of 15 GB/s (AMD: the first speed of Ampere's list that fits, and twice 7 is less),
// of 10 (Intel) or of 6 (ARM), where the PCIe link alone gives 2 of 12. From 2.29 Blackwell
// on ARM hosts (GB200's Grace) steps
// point-to-point messages across nodes at twice NCCL_P2P_NET_CHUNKSIZE.
TEST(NcclGraph, TheHostCpu) {
  System box = preset("a100_pcie_pairs");
  ASSERT_EQ(box.cpu, CpuVendor::Amd);
  ASSERT_EQ(box.sockets, 2);
  const auto ring = [&](CpuVendor cpu, NcclRelease release) {
    box.cpu = cpu;
    box.nccl = release;
    return make_machine(box, 8).graphs[index(Algo::Ring)];
  };
  for (const auto& [cpu, release, channels, speed, node_bw] : std::vector<std::tuple<CpuVendor, NcclRelease, int, double, double>>{
           {CpuVendor::Amd, NcclRelease::V2_18, 2, 12.0, 24.0},
           {CpuVendor::Amd, NcclRelease::V2_19, 1, 15.0, 16.0},
           {CpuVendor::Amd, NcclRelease::V2_30, 1, 15.0, 16.0},
           {CpuVendor::Intel, NcclRelease::V2_18, 1, 10.0, 10.0},
           {CpuVendor::Arm, NcclRelease::V2_18, 1, 6.0, 6.0}}) {
    const Graph g = ring(cpu, release);
    EXPECT_EQ(g.channels, channels) << to_string(cpu) << " " << to_string(release);
    EXPECT_DOUBLE_EQ(g.bw_intra, speed) << to_string(cpu) << " " << to_string(release);
    EXPECT_DOUBLE_EQ(g.node_bw, node_bw) << to_string(cpu) << " " << to_string(release);
  }
  // Within one socket the CPU sets nothing.
  box.cpu = CpuVendor::Arm;
  EXPECT_DOUBLE_EQ(make_machine(box, 4).graphs[index(Algo::Ring)].node_bw, 24.0);

  System gb200 = preset("b200_8x");
  gb200.gpus_per_node = 4;
  gb200.sockets = 1;
  gb200.nodes = 2;
  for (const auto& [cpu, release, ranks, chunk] : std::vector<std::tuple<CpuVendor, NcclRelease, int, int>>{
           {CpuVendor::Arm, NcclRelease::V2_29, 8, 256 << 10},
           {CpuVendor::Arm, NcclRelease::V2_30, 8, 256 << 10},
           {CpuVendor::Arm, NcclRelease::V2_28_9, 8, 128 << 10},
           {CpuVendor::Intel, NcclRelease::V2_30, 8, 128 << 10},
           {CpuVendor::Arm, NcclRelease::V2_30, 4, 512 << 10}}) {
    gb200.cpu = cpu;
    gb200.nccl = release;
    EXPECT_EQ(make_machine(gb200, ranks).p2p.chunk_bytes, chunk) << to_string(cpu) << " " << to_string(release) << " " << ranks;
  }
  EXPECT_EQ(parse_system(json{{"preset", "b200_8x"}, {"cpu", "arm"}}, "/network/system").cpu, CpuVendor::Arm);
  EXPECT_EQ(system_json(gb200)["cpu"], "arm");
}

// Across nodes a ring channel crosses one NIC each way: A100 with 8x HDR (25 GB/s, PCIe 24):
// 24 GB/s fits one channel per NIC, 8 x 24 = 192; 16 channels. H100 with 8x NDR (50 GB/s,
// PCIe Gen5 48): 48 would fit 7 channels through the 360 GB/s of NVLink, 45 fits 8 (= 360,
// the search stops); Hopper keeps 8 x 45 whole (under 50 GB/s, more than 4 channels): 16.
TEST(NcclGraph, MultiNode) {
  System a100 = preset("a100_8x");
  a100.nodes = 2;
  const Machine a = make_machine(a100, 16);
  EXPECT_EQ(a.nodes, 2);
  EXPECT_EQ(a.graphs[index(Algo::Ring)].channels, 8);
  EXPECT_DOUBLE_EQ(a.graphs[index(Algo::Ring)].bw_inter, 24.0);
  EXPECT_EQ(a.channels, 16);
  System h100 = preset("h100_8x");
  h100.nodes = 4;
  const Machine h = make_machine(h100, 32);
  EXPECT_EQ(h.graphs[index(Algo::Ring)].channels, 8);
  EXPECT_DOUBLE_EQ(h.graphs[index(Algo::Ring)].bw_inter, 45.0);
  EXPECT_EQ(h.channels, 16);
  // Without SHARP, NVLS is not run across nodes, NVLS tree is.
  const Tuning t = tune(h, Overrides{});
  EXPECT_EQ(t.bandwidth_GBps[index(Coll::AllReduce)][index(Algo::Nvls)][index(Proto::Simple)], 0.0);
  EXPECT_GT(t.bandwidth_GBps[index(Coll::AllReduce)][index(Algo::NvlsTree)][index(Proto::Simple)], 0.0);
}

// --- NCCL's tuning ---------------------------------------------------------------------------

// The ring all-reduce's latencies and bandwidths, from NCCL's formulas: lat = baseLat +
// 2(n-1) hwLat (NVLink: LL 6.6 + 14 x 0.6 = 15.0 us, LL128 14 + 14 x 1.9, Simple 8.4 + 14 x
// 3.4 = 56 us); bw = busBw x n / 2(n-1), busBw = 12 x 20 = 240 for Simple, min(87.7, 240/4)
// for LL, min(0.92 x 240, 12 x 20) for LL128.
TEST(NcclTuning, RingAllReduceClosedForms) {
  const Machine m = make_machine(preset("a100_8x"), 8);
  const Tuning t = tune(m, Overrides{});
  const auto* lat = t.latency_us[index(Coll::AllReduce)][index(Algo::Ring)];
  const auto* bw = t.bandwidth_GBps[index(Coll::AllReduce)][index(Algo::Ring)];
  EXPECT_NEAR(lat[index(Proto::LL)], 6.6 + 14 * 0.6, 1e-12);
  EXPECT_NEAR(lat[index(Proto::LL128)], 14.0 + 14 * 1.9, 1e-12);
  EXPECT_NEAR(lat[index(Proto::Simple)], 8.4 + 14 * 3.4, 1e-12);
  const double ratio = 8.0 / 14.0;
  EXPECT_NEAR(bw[index(Proto::LL)], 60.0 * ratio, 1e-12);
  EXPECT_NEAR(bw[index(Proto::LL128)], 240.0 * 0.92 * ratio, 1e-9);
  EXPECT_NEAR(bw[index(Proto::Simple)], 240.0 * ratio, 1e-12);
}

// NCCL runs the cheapest of its estimates: the choice is the minimum over every enabled
// (algorithm, protocol), size by size.
TEST(NcclTuning, ChoiceIsTheCheapestEstimate) {
  for (const char* name : {"a100_8x", "h100_8x", "a100_pcie_pairs"}) {
    const Machine m = make_machine(preset(name), 8);
    const Tuning t = tune(m, Overrides{});
    for (double bytes = 8; bytes <= 8.0 * (1 << 30); bytes *= 4) {
      const Choice c = choose(m, t, Coll::AllReduce, bytes);
      double best = std::numeric_limits<double>::infinity();
      for (int a = 0; a < kAlgos; ++a)
        for (int p = 0; p < kProtos; ++p) {
          const double e = nccl_estimate_us(m, t, Coll::AllReduce, static_cast<Algo>(a), static_cast<Proto>(p), bytes);
          if (e >= 0) best = std::min(best, e);
        }
      EXPECT_EQ(c.nccl_estimate_us, best) << name << " " << bytes;
    }
  }
}

// The switch-over sizes between protocols of NCCL's ring on 8x A100 follow from its
// estimates lat_a + S / bw_a = lat_b + S / bw_b: LL below S*, LL128 above, and LL128 below
// the next S*, Simple above; checked a byte either side (NCCL_ALGO=Ring, no tree).
TEST(NcclTuning, ProtocolSwitchOverSizes) {
  const Machine m = make_machine(preset("a100_8x"), 8);
  const Tuning t = tune(m, parse_overrides("Ring", ""));
  const auto* lat = t.latency_us[index(Coll::AllReduce)][index(Algo::Ring)];
  const auto* bw = t.bandwidth_GBps[index(Coll::AllReduce)][index(Algo::Ring)];
  auto crossover = [&](Proto a, Proto b) {
    const int i = index(a), j = index(b);
    return (lat[j] - lat[i]) / (1.0 / (1000 * bw[i]) - 1.0 / (1000 * bw[j]));
  };
  const double ll_to_ll128 = crossover(Proto::LL, Proto::LL128);
  const double ll128_to_simple = crossover(Proto::LL128, Proto::Simple);
  EXPECT_GT(ll_to_ll128, 1e6);  // about 1.2 MB and 24 MB: the development curve's 2 MiB - 16 MiB
  EXPECT_LT(ll128_to_simple, 32e6);
  EXPECT_EQ(choose(m, t, Coll::AllReduce, std::floor(ll_to_ll128) - 1).proto, Proto::LL);
  EXPECT_EQ(choose(m, t, Coll::AllReduce, std::ceil(ll_to_ll128) + 1).proto, Proto::LL128);
  EXPECT_EQ(choose(m, t, Coll::AllReduce, std::floor(ll128_to_simple) - 1).proto, Proto::LL128);
  EXPECT_EQ(choose(m, t, Coll::AllReduce, std::ceil(ll128_to_simple) + 1).proto, Proto::Simple);
}

// The algorithm's switch-over on 8x H100: NCCL's ring LL (15 us, 87.7 GB/s of bus capped
// to algbw x 8/14) against NVLS (23 us, 8 x 40 x 5/6 GB/s): the ring below S*, NVLS above
// (NCCL_ALGO=Ring,NVLS: the tree left out, whose corrections move its own cross-overs).
TEST(NcclTuning, AlgorithmSwitchOverSize) {
  const Machine m = make_machine(preset("h100_8x"), 8);
  const Tuning t = tune(m, parse_overrides("Ring,NVLS", ""));
  const double lr = t.latency_us[index(Coll::AllReduce)][index(Algo::Ring)][index(Proto::LL)];
  const double br = t.bandwidth_GBps[index(Coll::AllReduce)][index(Algo::Ring)][index(Proto::LL)];
  const double ln = t.latency_us[index(Coll::AllReduce)][index(Algo::Nvls)][index(Proto::Simple)];
  const double bn = t.bandwidth_GBps[index(Coll::AllReduce)][index(Algo::Nvls)][index(Proto::Simple)];
  EXPECT_NEAR(bn, 8 * 40.0 * 5 / 6, 1e-9);
  const double s_star = (ln - lr) / (1.0 / (1000 * br) - 1.0 / (1000 * bn));
  const Choice below = choose(m, t, Coll::AllReduce, std::floor(s_star) - 1);
  const Choice above = choose(m, t, Coll::AllReduce, std::ceil(s_star) + 1);
  EXPECT_EQ(below.algo, Algo::Ring);
  EXPECT_EQ(below.proto, Proto::LL);
  EXPECT_EQ(above.algo, Algo::Nvls);
  EXPECT_EQ(above.channels, 16);
}

// CollNet runs only where the network reduces (SHARP), and then wins large all-reduces
// across nodes on 8x A100 (its bandwidth is the node's, not the NICs').
TEST(NcclTuning, CollNetOnlyWithInNetworkReduction) {
  System s = preset("a100_8x");
  s.nodes = 4;
  const Machine plain = make_machine(s, 32);
  s.network.collnet = true;
  const Machine sharp = make_machine(s, 32);
  for (double bytes = 1024; bytes <= 1.0 * (1 << 30); bytes *= 8) {
    const Algo a = choose(plain, tune(plain, Overrides{}), Coll::AllReduce, bytes).algo;
    EXPECT_TRUE(a != Algo::CollNetDirect && a != Algo::CollNetChain) << bytes;
  }
  const Algo large = choose(sharp, tune(sharp, Overrides{}), Coll::AllReduce, 256.0 * (1 << 20)).algo;
  EXPECT_TRUE(large == Algo::CollNetDirect || large == Algo::CollNetChain) << to_string(large);
}

// getAlgoInfo: fewer channels while bytes < channels x threads x threshold (ring LL:
// 512 threads x 8 x nRanks bytes each), then fewer threads, at least 3 warps.
TEST(NcclTuning, ChannelsGrowWithTheSize) {
  const Machine m = make_machine(preset("a100_8x"), 8);
  const Tuning t = tune(m, parse_overrides("", "LL"));
  for (double bytes : {1024.0, 65536.0, 262144.0, 1048576.0}) {
    const Choice c = choose(m, t, Coll::AllReduce, bytes);
    ASSERT_EQ(c.proto, Proto::LL);
    const int expected = std::clamp(static_cast<int>(bytes / (512.0 * 8 * 8)), 1, 24);
    EXPECT_EQ(c.channels, expected) << bytes;
  }
  // One channel: 512 threads halved while 1 x nt x 64 > 1 KiB, down to 64 (no longer a
  // multiple of 128), then raised to the 3 warps a kernel has at least.
  EXPECT_EQ(choose(m, t, Coll::AllReduce, 1024).threads, 96);
}

// NCCL_ALGO / NCCL_PROTO: lists or exclusions force what NCCL runs; an unknown name is an
// error naming the variable; an algorithm the machine lacks leaves nothing in 2.18 (NCCL
// fails, and so does dtsim) and the ring in 2.20.
TEST(NcclTuning, Overrides) {
  const Machine a100 = make_machine(preset("a100_8x"), 8);
  const double bytes = 1 << 20;
  EXPECT_EQ(choose(a100, tune(a100, parse_overrides("Tree", "")), Coll::AllReduce, bytes).algo, Algo::Tree);
  EXPECT_EQ(choose(a100, tune(a100, parse_overrides("tree,ring", "simple")), Coll::AllReduce, bytes).proto, Proto::Simple);
  EXPECT_NE(choose(a100, tune(a100, parse_overrides("^Ring", "")), Coll::AllReduce, bytes).algo, Algo::Ring);
  try {
    (void)choose(a100, tune(a100, parse_overrides("NVLS", "")), Coll::AllReduce, bytes);
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()), "all_reduce: NCCL_ALGO leaves no algorithm that runs on 8 GPUs of \"a100_8x\", where NCCL "
                                     "2.18 fails (\"no algorithm/protocol available\"); 2.19 to 2.23 fall back to the "
                                     "ring (\"nccl_version\": \"2.19\" to \"2.23\")");
  }
  System a100_2_20 = preset("a100_8x");
  a100_2_20.nccl = NcclRelease::V2_20;
  const Machine a100_new = make_machine(a100_2_20, 8);
  // 2.20's fallback has every protocol, whatever NCCL_PROTO says (its ring bandwidths from
  // before the enables).
  const Choice nvls = choose(a100_new, tune(a100_new, parse_overrides("NVLS", "")), Coll::AllReduce, bytes);
  EXPECT_EQ(nvls.algo, Algo::Ring);
  EXPECT_EQ(nvls.proto, Proto::LL);
  EXPECT_EQ(choose(a100_new, tune(a100_new, parse_overrides("NVLS", "Simple")), Coll::AllReduce, bytes).proto, Proto::LL);
  // Other collectives keep their ring: always in 2.18, as the fallback in 2.20.
  EXPECT_EQ(choose(a100, tune(a100, parse_overrides("Tree", "")), Coll::AllGather, bytes).algo, Algo::Ring);
  EXPECT_EQ(choose(a100_new, tune(a100_new, parse_overrides("Tree", "")), Coll::AllGather, bytes).algo, Algo::Ring);
  const Machine h100 = make_machine(preset("h100_8x"), 8);
  EXPECT_EQ(choose(h100, tune(h100, parse_overrides("NVLS", "")), Coll::AllReduce, bytes).algo, Algo::Nvls);
  try {
    (void)parse_overrides("Ring,Butterfly", "");
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()), "NCCL_ALGO: unknown name \"Butterfly\" in \"Ring,Butterfly\" (expected a comma-separated list "
                                     "of Tree, Ring, CollNetDirect, CollNetChain, NVLS, NVLSTree, PAT, or ^ and the ones to leave out)");
  }
  EXPECT_THROW((void)parse_overrides("", "^LL,LL128,Simple"), std::invalid_argument);
}

// The releases: 2.20 counts a Hopper NVLink as 20.6 GB/s (2.18: 20) in its search and
// estimates, which leaves the graphs' channels and speeds as they were (6 x 60 and 8 x 40
// still fit 18 x 20.6); the links the kernels share carry 20.6 in every release. From 2.19 the
// latencies move NVLS's from the base to the NVLink hop (the same 23 us on one node), charge
// 28 us a Tree Simple hop and count NVLS trees' network hops by log2 of the nodes; and NCCL
// tunes NVLS for reduce-scatter and all-gather on one node.
TEST(NcclTuning, Releases) {
  EXPECT_EQ(parse_nccl_release("2.20.5"), NcclRelease::V2_20);
  EXPECT_EQ(parse_nccl_release("2.19.3"), NcclRelease::V2_19);
  EXPECT_EQ(parse_nccl_release("2.18"), NcclRelease::V2_18);
  EXPECT_STREQ(to_string(NcclRelease::V2_19), "2.19");
  EXPECT_EQ(parse_nccl_release("2.28.3"), NcclRelease::V2_28);
  EXPECT_EQ(parse_nccl_release("2.28.7"), NcclRelease::V2_28_7);
  EXPECT_EQ(parse_nccl_release("2.28.9"), NcclRelease::V2_28_9);
  try {
    (void)parse_nccl_release("2.17.1");
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()), "NCCL \"2.17.1\" is not modelled: expected " + modelled_nccl_releases());
  }
  System h100 = preset("h100_8x");
  const Machine old_h100 = make_machine(h100, 8);
  h100.nccl = NcclRelease::V2_20;
  const Machine new_h100 = make_machine(h100, 8);
  EXPECT_DOUBLE_EQ(old_h100.nvlink_bw, 20.0);
  EXPECT_DOUBLE_EQ(new_h100.nvlink_bw, 20.6);
  for (const Algo a : {Algo::Ring, Algo::Nvls}) {
    EXPECT_EQ(new_h100.graphs[index(a)].channels, old_h100.graphs[index(a)].channels) << to_string(a);
    EXPECT_DOUBLE_EQ(new_h100.graphs[index(a)].bw_intra, old_h100.graphs[index(a)].bw_intra) << to_string(a);
  }
  for (const Machine* m : {&old_h100, &new_h100}) {
    EXPECT_DOUBLE_EQ(m->nvlink_rate, 20.6);
    EXPECT_DOUBLE_EQ(m->graphs[index(Algo::Ring)].node_bw, 18 * 20.6);
  }
  System a100 = preset("a100_8x");
  a100.nccl = NcclRelease::V2_20;
  EXPECT_DOUBLE_EQ(make_machine(a100, 8).nvlink_bw, 20.0);  // SM80_NVLINK_BW is unchanged
  EXPECT_DOUBLE_EQ(make_machine(a100, 8).nvlink_rate, 20.0);

  const Tuning t_old = tune(old_h100, Overrides{}), t_new = tune(new_h100, Overrides{});
  const int ar = index(Coll::AllReduce), rs = index(Coll::ReduceScatter), ag = index(Coll::AllGather);
  const int simple = index(Proto::Simple);
  EXPECT_DOUBLE_EQ(t_old.latency_us[ar][index(Algo::Nvls)][simple], 23.0);
  EXPECT_DOUBLE_EQ(t_new.latency_us[ar][index(Algo::Nvls)][simple], 23.0);
  EXPECT_NEAR(t_old.latency_us[ar][index(Algo::Tree)][simple], 0 + 2 * 7 * 4.0, 1e-12);
  EXPECT_NEAR(t_new.latency_us[ar][index(Algo::Tree)][simple], 0 + 2 * 7 * 28.0, 1e-12);
  EXPECT_NEAR(t_new.bandwidth_GBps[ar][index(Algo::Nvls)][simple], 8 * 40.0 * 5 / 6, 1e-9);
  // NVLS tree across 4 nodes: 2.18 23 + 2 (N - 1) x 19, 2.20 23 + 2 log2(N) x 14.
  System four = preset("h100_8x");
  four.nodes = 4;
  const Machine old_four = make_machine(four, 32);
  four.nccl = NcclRelease::V2_20;
  const Machine new_four = make_machine(four, 32);
  EXPECT_NEAR(tune(old_four, Overrides{}).latency_us[ar][index(Algo::NvlsTree)][simple], 23 + 2 * 3 * 19.0, 1e-12);
  EXPECT_NEAR(tune(new_four, Overrides{}).latency_us[ar][index(Algo::NvlsTree)][simple], 23 + 2 * 2 * 14.0, 1e-12);

  // Reduce-scatter and all-gather: 2.18 tunes the ring alone; 2.20 NVLS too, at 8 x 40 x 5/6
  // GB/s and 23 us, which beats the ring's LL (10.8 us, 87.7 x 8/7) above about 2 MB and its
  // LL128 (27.3 us, 9 x 36.7 x 8/7) below about 4 MB: 3 MB runs on NVLS. Not across nodes.
  EXPECT_EQ(t_old.bandwidth_GBps[rs][index(Algo::Nvls)][simple], 0.0);
  EXPECT_NEAR(t_new.bandwidth_GBps[rs][index(Algo::Nvls)][simple], 8 * 40.0 * 5 / 6, 1e-9);
  EXPECT_NEAR(t_new.bandwidth_GBps[ag][index(Algo::Nvls)][simple], 8 * 40.0 * 5 / 6, 1e-9);
  for (const Coll c : {Coll::ReduceScatter, Coll::AllGather}) {
    EXPECT_EQ(choose(old_h100, t_old, c, 3e6).algo, Algo::Ring) << to_string(c);
    EXPECT_EQ(choose(new_h100, t_new, c, 3e6).algo, Algo::Nvls) << to_string(c);
    EXPECT_EQ(choose(new_h100, t_new, c, 1e6).algo, Algo::Ring) << to_string(c);
    EXPECT_EQ(choose(new_h100, t_new, c, 64e6).algo, Algo::Ring) << to_string(c);
    for (double bytes = 1024; bytes <= 1e9; bytes *= 2)
      EXPECT_EQ(choose(new_four, tune(new_four, Overrides{}), c, bytes).algo, Algo::Ring) << to_string(c) << " " << bytes;
  }

  // 2.19: 2.20's latencies and rules, but a Hopper NVLink still at 20 GB/s, and CollNet Direct
  // not tuned for reduce-scatter and all-gather (2.20 tunes it where the network reduces).
  h100.nccl = NcclRelease::V2_19;
  const Machine h100_2_19 = make_machine(h100, 8);
  EXPECT_DOUBLE_EQ(h100_2_19.nvlink_bw, 20.0);
  const Tuning t_2_19 = tune(h100_2_19, Overrides{});
  EXPECT_NEAR(t_2_19.latency_us[ar][index(Algo::Tree)][simple], 2 * 7 * 28.0, 1e-12);
  EXPECT_NEAR(t_2_19.bandwidth_GBps[rs][index(Algo::Nvls)][simple], 8 * 40.0 * 5 / 6, 1e-9);
  System sharp = preset("a100_8x");
  sharp.nodes = 2;
  sharp.network.collnet = true;
  for (const auto& [release, tuned] : std::vector<std::pair<NcclRelease, bool>>{
           {NcclRelease::V2_18, false}, {NcclRelease::V2_19, false}, {NcclRelease::V2_20, true}}) {
    sharp.nccl = release;
    const Machine m = make_machine(sharp, 16);
    EXPECT_EQ(tune(m, Overrides{}).bandwidth_GBps[ag][index(Algo::CollNetDirect)][simple] > 0, tuned) << to_string(release);
  }

  // 2.19 on, Hopper's speed list has 50 GB/s: 6 GPUs' NVLS channels (7 shares of 18 x 20.6)
  // fit at 50 where 2.18 rounds them down to 40; 7 GPUs' (8 shares) still at 40.
  for (const auto& [gpus, release, speed] : std::vector<std::tuple<int, NcclRelease, double>>{
           {6, NcclRelease::V2_18, 40.0}, {6, NcclRelease::V2_19, 50.0}, {6, NcclRelease::V2_21, 50.0}, {7, NcclRelease::V2_21, 40.0}}) {
    System part = preset("h100_8x");
    part.nccl = release;
    EXPECT_DOUBLE_EQ(make_machine(part, gpus).graphs[index(Algo::Nvls)].bw_intra, speed) << gpus << " " << to_string(release);
  }

  // Hopper across nodes above 45 GB/s a channel: x2 up to 32 channels (2.18, 2.19), only from
  // under 16 (2.20 on). 24 NVLinks a GPU and 8 NDR NICs give 8 ring channels of 48 GB/s, 16
  // after the rings' doubling.
  System wide = preset("h100_8x");
  wide.nodes = 2;
  wide.intra.nvlink_links = 24;
  for (const auto& [release, channels] :
       std::vector<std::pair<NcclRelease, int>>{{NcclRelease::V2_19, 32}, {NcclRelease::V2_20, 16}}) {
    wide.nccl = release;
    const Machine m = make_machine(wide, 16);
    EXPECT_DOUBLE_EQ(m.graphs[index(Algo::Ring)].bw_intra, 48.0) << to_string(release);
    EXPECT_EQ(m.channels, channels) << to_string(release);
  }

  // 2.21: NVLS's NVLink hop 25 us, and the ring's LL estimated at half the links (a quarter
  // for all-reduce before), capped at llMaxBw: 141 on one Hopper node (87.7 before), 87.7 on
  // an A100's.
  EXPECT_EQ(parse_nccl_release("2.21.5"), NcclRelease::V2_21);
  EXPECT_STREQ(to_string(NcclRelease::V2_21), "2.21");
  EXPECT_EQ(modelled_nccl_releases(),
            "2.18 (2.18.5, 2.18.6), 2.19 (2.19.3, 2.19.4), 2.20 (2.20.3, 2.20.5), 2.21 (2.21.5), 2.22 (2.22.3), "
            "2.23 (2.23.4), 2.24 (2.24.3), 2.25 (2.25.1), 2.26 (2.26.2, 2.26.3, 2.26.5, 2.26.6), 2.27 (2.27.3), "
            "2.27.5 (2.27.5), 2.27.6 (2.27.6, 2.27.7), 2.28 (2.28.3), 2.28.7 (2.28.7), 2.28.9 (2.28.9), 2.29 (2.29.2, "
            "2.29.3), 2.29.7 (2.29.7) or "
            "2.30 (2.30.3, 2.30.4, 2.30.7)");
  const auto docs = dtsim::net::network_docs();  // the schema's description of the field names them all
  const auto field = std::find_if(docs.begin(), docs.end(), [](const auto& d) {
    return d.section == "nccl_system" && d.field == "nccl_version";
  });
  ASSERT_NE(field, docs.end());
  EXPECT_NE(field->description.find(modelled_nccl_releases()), std::string_view::npos) << field->description;
  h100.nccl = NcclRelease::V2_21;
  const Machine h100_2_21 = make_machine(h100, 8);
  const Tuning t_2_21 = tune(h100_2_21, Overrides{});
  const int ll = index(Proto::LL), ring = index(Algo::Ring);
  EXPECT_DOUBLE_EQ(t_2_21.latency_us[ar][index(Algo::Nvls)][simple], 25.0);
  EXPECT_NEAR(t_new.bandwidth_GBps[ar][ring][ll], std::min(87.7, 12 * 30.0 / 4) * 8 / 14, 1e-9);
  EXPECT_NEAR(t_2_21.bandwidth_GBps[ar][ring][ll], std::min(141.0, 12 * 30.0 / 2) * 8 / 14, 1e-9);
  EXPECT_NEAR(t_2_21.bandwidth_GBps[ag][ring][ll], std::min(141.0, 12 * 30.0 / 2) * 8 / 7, 1e-9);
  a100.nccl = NcclRelease::V2_21;
  const Machine a100_2_21 = make_machine(a100, 8);
  EXPECT_NEAR(tune(a100_2_21, Overrides{}).bandwidth_GBps[ar][ring][ll], std::min(87.7, 12 * 20.0 / 2) * 8 / 14, 1e-9);
  // The LL kernel is the same code in every release: it keeps 2.21's pace in all of them, so
  // one choice takes the same time whichever release chose it.
  a100.nccl = NcclRelease::V2_18;
  const Machine a100_2_18 = make_machine(a100, 8);
  const Choice ll_choice = choose(a100_2_18, tune(a100_2_18, parse_overrides("Ring", "LL")), Coll::AllReduce, 1 << 20);
  ASSERT_EQ(ll_choice.proto, Proto::LL);
  EXPECT_DOUBLE_EQ(collective_us(a100_2_18, tune(a100_2_18, Overrides{}), Coll::AllReduce, 1 << 20, ll_choice),
                   collective_us(a100_2_21, tune(a100_2_21, Overrides{}), Coll::AllReduce, 1 << 20, ll_choice));
  EXPECT_DOUBLE_EQ(kernel_bus_bw(a100_2_18, Coll::AllReduce, Algo::Ring, Proto::LL, 20.0), std::min(87.7, 12 * 20.0 / 2));

  // 2.22: the ring a collective falls back to keeps NCCL_PROTO. NCCL_ALGO=NVLS leaves an
  // A100 nothing; with NCCL_PROTO=Simple 2.21 still falls back to the ring with every
  // protocol (LL for 1 KiB), 2.22 to the ring's Simple. And the tree always runs 640 threads
  // (2.21: 512 halved while 1 KiB is under threads x 8 (LL) or 64 (Simple) bytes, Simple's
  // 4 warps more).
  EXPECT_EQ(parse_nccl_release("2.22"), NcclRelease::V2_22);
  for (const auto& [release, proto] :
       std::vector<std::pair<NcclRelease, Proto>>{{NcclRelease::V2_21, Proto::LL}, {NcclRelease::V2_22, Proto::Simple}}) {
    a100.nccl = release;
    const Machine m = make_machine(a100, 8);
    const Choice fallback = choose(m, tune(m, parse_overrides("NVLS", "Simple")), Coll::AllReduce, 1024);
    EXPECT_EQ(fallback.algo, Algo::Ring) << to_string(release);
    EXPECT_EQ(fallback.proto, proto) << to_string(release);
  }
  for (const auto& [release, proto, threads] : std::vector<std::tuple<NcclRelease, const char*, int>>{
           {NcclRelease::V2_21, "Simple", 64 + 128}, {NcclRelease::V2_21, "LL", 128}, {NcclRelease::V2_22, "LL", 640}}) {
    a100.nccl = release;
    a100.nodes = 2;
    const Machine m = make_machine(a100, 16);
    const Choice tree = choose(m, tune(m, parse_overrides("Tree", proto)), Coll::AllReduce, 1024);
    ASSERT_EQ(tree.algo, Algo::Tree);
    EXPECT_EQ(tree.threads, threads) << to_string(release) << " " << proto;
  }

  // 2.23: Tree Simple 8.4 us once, 4 us a hop within a node and 14 across (28 each before);
  // an all-reduce ring counts 2(N - 1) network steps (2N before): on 2 nodes of 8x A100,
  // 16 ranks, 30 steps, LL's 6.6 us + 26 (2.23: 28) steps at the network's 2 us post
  // overhead (AMD hosts) + 4 (2) at 2.7 us; LL128 with one GPU per node loses its 0.7; NVLS reduce-scatter
  // and all-gather are estimated at the bus bandwidth (5/6 of it before).
  a100.nodes = 2;
  for (const auto& [release, tree_simple, ring_ll] : std::vector<std::tuple<NcclRelease, double, double>>{
           {NcclRelease::V2_22, 2 * (7 * 28.0 + 28), 6.6 + 26 * 2.0 + 4 * 2.7},
           {NcclRelease::V2_23, 8.4 + 2 * (7 * 4.0 + 14), 6.6 + 28 * 2.0 + 2 * 2.7}}) {
    a100.nccl = release;
    const Tuning t = tune(make_machine(a100, 16), Overrides{});
    EXPECT_NEAR(t.latency_us[ar][index(Algo::Tree)][simple], tree_simple, 1e-9) << to_string(release);
    EXPECT_NEAR(t.latency_us[ar][ring][ll], ring_ll, 1e-9) << to_string(release);
  }
  h100.nccl = NcclRelease::V2_23;
  const Machine h100_2_23 = make_machine(h100, 8);
  EXPECT_NEAR(tune(h100_2_23, Overrides{}).bandwidth_GBps[ag][index(Algo::Nvls)][simple], 8 * 40.0, 1e-9);
  h100.nccl = NcclRelease::V2_22;
  EXPECT_NEAR(tune(make_machine(h100, 8), Overrides{}).bandwidth_GBps[ag][index(Algo::Nvls)][simple], 8 * 40.0 * 5 / 6, 1e-9);

  // 2.23's PAT: reduce-scatter and all-gather with one GPU per node, Simple, at 0.85 of the
  // tree's graph, latency 8 us + log2(N) x the tree's network hop / 3.5 + 2.8 us a rank (4
  // nodes: 8 + 2 x 14 / 3.5 + 4 x 2.8 = 27.2 us), and every algorithm's network hop is the
  // tree's there (LL: 5 us, the ring's 2.7 before). NCCL runs a 1 MiB reduce-scatter as PAT
  // (timed in NcclPat), NCCL_ALGO=^PAT as the ring.
  System singles = preset("h100_8x");
  singles.gpus_per_node = 1;
  singles.nodes = 4;
  singles.network.nics_per_node = singles.network.rails = 1;
  for (const auto& [release, pat_lat, ring_ll_hop] : std::vector<std::tuple<NcclRelease, double, double>>{
           {NcclRelease::V2_22, 0.0, 2.7}, {NcclRelease::V2_23, 27.2, 5.0}}) {
    singles.nccl = release;
    const Machine m = make_machine(singles, 4);
    const Tuning t = tune(m, Overrides{});
    EXPECT_NEAR(t.latency_us[ag][index(Algo::Pat)][simple], pat_lat, 1e-9) << to_string(release);
    EXPECT_EQ(t.bandwidth_GBps[ag][index(Algo::Pat)][simple] > 0, release == NcclRelease::V2_23);
    EXPECT_NEAR(t.latency_us[ag][ring][ll], 6.6 + 3 * ring_ll_hop, 1e-9) << to_string(release);
  }
  const Machine singles_m = make_machine(singles, 4);
  const Tuning singles_t = tune(singles_m, Overrides{});
  const Graph& tree_graph = singles_m.graphs[index(Algo::Tree)];
  EXPECT_NEAR(singles_t.bandwidth_GBps[ag][index(Algo::Pat)][simple], tree_graph.channels * tree_graph.bw_inter * 0.85, 1e-9);
  const Choice pat = choose(singles_m, singles_t, Coll::ReduceScatter, 1 << 20);
  EXPECT_EQ(pat.algo, Algo::Pat);
  EXPECT_EQ(pat.threads, 640);  // NCCL_MAX_NTHREADS, whatever the size
  EXPECT_EQ(choose(singles_m, tune(singles_m, parse_overrides("^PAT", "")), Coll::ReduceScatter, 1 << 20).algo, Algo::Ring);
  auto config = std::make_shared<Config>();
  config->system = singles;
  EXPECT_EQ(Clock(config, 4).run(Coll::AllGather, 1 << 20).choice.algo, Algo::Pat);
  config->overrides = parse_overrides("^PAT", "");
  EXPECT_EQ(Clock(config, 4).run(Coll::AllGather, 1 << 20).choice.algo, Algo::Ring);

  // 2.25 runs Blackwell: an NVLink5 link (50 GB/s a direction) counts 40 GB/s, 18 of them
  // 720; its speed list from 90 GB/s finds 8 ring channels of 90, split into 16 of 45 and
  // doubled to 32 (MAXCHANNELS 64 from 2.25); NVLS 8 channels of 80 (9 shares of 720), 32
  // NVLS channels; llMaxBw and the per-channel caps twice Hopper's.
  const Machine b200 = make_machine(preset("b200_8x"), 8);
  EXPECT_DOUBLE_EQ(b200.nvlink_bw, 40.0);
  EXPECT_EQ(b200.graphs[ring].channels, 16);
  EXPECT_DOUBLE_EQ(b200.graphs[ring].bw_intra, 45.0);
  EXPECT_EQ(b200.channels, 32);
  EXPECT_EQ(b200.graphs[index(Algo::Nvls)].channels, 8);
  EXPECT_DOUBLE_EQ(b200.graphs[index(Algo::Nvls)].bw_intra, 80.0);
  EXPECT_EQ(b200.nvls_channels, 32);
  EXPECT_NEAR(tune(b200, Overrides{}).bandwidth_GBps[ar][ring][ll], std::min(2 * 141.0, 16 * 45.0 / 2) * 8 / 14, 1e-9);
  EXPECT_NEAR(tune(b200, Overrides{}).bandwidth_GBps[ar][ring][index(Proto::LL128)],
              std::min(16 * 45.0 * 0.92, 16 * 2 * 36.7) * 8 / 14, 1e-9);
  // 2.27: one Blackwell node runs 24 NVLS channels (32 across nodes, and before 2.27); NVLS
  // reduce-scatter and all-gather are estimated at (G - 1) / G of the channels' speed: 8 x
  // 80 x 7/8 on B200, 8 x 40 x 7/8 on H100 (all-reduce unchanged, 8 x 40 x 5/6).
  System b200_2_27 = preset("b200_8x");
  b200_2_27.nccl = NcclRelease::V2_27;
  EXPECT_EQ(make_machine(b200_2_27, 8).nvls_channels, 24);
  b200_2_27.nodes = 2;
  EXPECT_EQ(make_machine(b200_2_27, 16).nvls_channels, 32);
  b200_2_27.nodes = 1;
  EXPECT_NEAR(tune(make_machine(b200_2_27, 8), Overrides{}).bandwidth_GBps[ag][index(Algo::Nvls)][simple], 8 * 80.0 * 7 / 8, 1e-9);
  h100.nccl = NcclRelease::V2_27;
  const Tuning h100_2_27 = tune(make_machine(h100, 8), Overrides{});
  EXPECT_NEAR(h100_2_27.bandwidth_GBps[ag][index(Algo::Nvls)][simple], 8 * 40.0 * 7 / 8, 1e-9);
  EXPECT_NEAR(h100_2_27.bandwidth_GBps[ar][index(Algo::Nvls)][simple], 8 * 40.0 * 5 / 6, 1e-9);
  // And CollNet Direct's all-gather: 8 GPUs a node x the graph's 24 GB/s x NCCL's measured
  // 0.85 at 8 GPUs a node up to 2.26; 2.27 takes 0.9 of the network's speed instead.
  System sharp_2_27 = preset("a100_8x");
  sharp_2_27.nodes = 2;
  sharp_2_27.network.collnet = true;
  for (const auto& [release, busbw] :
       std::vector<std::pair<NcclRelease, double>>{{NcclRelease::V2_26, 8 * 24.0 * 0.85}, {NcclRelease::V2_27, 8 * 24.0 * 0.9}}) {
    sharp_2_27.nccl = release;
    const Machine m = make_machine(sharp_2_27, 16);
    ASSERT_DOUBLE_EQ(m.graphs[index(Algo::CollNetDirect)].bw_inter, 24.0);
    EXPECT_NEAR(tune(m, Overrides{}).bandwidth_GBps[ag][index(Algo::CollNetDirect)][simple], busbw, 1e-9) << to_string(release);
  }

  // 2.27 runs NVLS all-gathers across nodes where the network reduces and every GPU of a node
  // has its NIC: a 1 MiB all-gather on 2 nodes of 8x H100 with SHARP; not before 2.27, nor
  // without SHARP.
  for (const auto& [release, collnet, algo] : std::vector<std::tuple<NcclRelease, bool, Algo>>{
           {NcclRelease::V2_26, true, Algo::CollNetDirect}, {NcclRelease::V2_27, true, Algo::Nvls}, {NcclRelease::V2_27, false, Algo::Ring}}) {
    System two = preset("h100_8x");
    two.nodes = 2;
    two.network.collnet = collnet;
    two.nccl = release;
    const Machine m = make_machine(two, 16);
    const Tuning t = tune(m, Overrides{});
    const Choice gather = choose(m, t, Coll::AllGather, 1 << 20);
    EXPECT_EQ(gather.algo, algo) << to_string(release) << " " << collnet;
    EXPECT_GT(collective_us(m, t, Coll::AllGather, 1 << 20, gather), 0.0);
  }

  // 2.24: PAT at 0.75 of the tree graph's bandwidth (0.85 in 2.23).
  singles.nccl = NcclRelease::V2_24;
  const Machine singles_2_24 = make_machine(singles, 4);
  EXPECT_NEAR(tune(singles_2_24, Overrides{}).bandwidth_GBps[ag][index(Algo::Pat)][simple],
              tree_graph.channels * tree_graph.bw_inter * 0.75, 1e-9);

  // 2.24 reads NCCL_ALGO and NCCL_PROTO per collective ("ring;allreduce:tree": the ring for
  // every collective, the tree alone for all-reduce), which earlier releases do not; and it
  // has no fallback: where the lists leave a collective nothing (NVLS on an A100), NCCL
  // fails, as 2.18 did, where 2.19 - 2.23 ran the ring; nor does it re-enable the ring and
  // the tree when NCCL_ALGO names only CollNet on a network without it.
  const Overrides per_collective = parse_overrides("ring;allreduce:tree", "^LL128;allgather:LL");
  EXPECT_TRUE(per_collective.per_collective);
  EXPECT_EQ(parse_overrides("ring;allreduce:tree;", "").algo_enabled, per_collective.algo_enabled);  // empty entries skipped
  EXPECT_TRUE(per_collective.algo_enabled[ar][index(Algo::Tree)]);
  EXPECT_FALSE(per_collective.algo_enabled[ar][ring]);
  EXPECT_TRUE(per_collective.algo_enabled[ag][ring]);
  EXPECT_EQ(per_collective.proto_enabled[ag], (std::array<int, 3>{1, 0, 0}));
  EXPECT_EQ(per_collective.proto_enabled[ar], (std::array<int, 3>{1, 0, 1}));
  for (const auto& [text, message] : std::vector<std::pair<std::string, std::string>>{
           {"ring;tree", "NCCL_ALGO: \"ring;tree\": every list but the first names its collective (\"allreduce:...\")"},
           {"allreduces:tree", "NCCL_ALGO: unknown collective \"allreduces\" in \"allreduces:tree\" (expected Broadcast, Reduce, "
                               "AllGather, ReduceScatter, AllReduce)"},
           {"ring;allreduce:", "NCCL_ALGO: \"ring;allreduce:\": no list after \"allreduce:\""}}) {
    try {
      (void)parse_overrides(text, "");
      FAIL() << text;
    } catch (const std::invalid_argument& e) {
      EXPECT_EQ(std::string(e.what()), message);
    }
  }
  System a100_2_24 = preset("a100_8x");
  a100_2_24.nccl = NcclRelease::V2_24;
  const Machine a100_m = make_machine(a100_2_24, 8);
  const Tuning split = tune(a100_m, per_collective);
  EXPECT_EQ(choose(a100_m, split, Coll::AllReduce, 1 << 20).algo, Algo::Tree);
  const Choice gather = choose(a100_m, split, Coll::AllGather, 1 << 20);
  EXPECT_EQ(gather.algo, Algo::Ring);
  EXPECT_EQ(gather.proto, Proto::LL);
  a100_2_24.nccl = NcclRelease::V2_23;
  try {
    (void)tune(make_machine(a100_2_24, 8), per_collective);
    FAIL() << "expected 2.23 to refuse lists per collective";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()), "NCCL_ALGO / NCCL_PROTO: lists per collective (\"ring;allreduce:tree\", "
                                     "\"^LL128;allgather:LL\") are read from NCCL 2.24; 2.23 does not");
  }
  const Machine a100_2_23 = make_machine(a100_2_24, 8);
  EXPECT_EQ(choose(a100_2_23, tune(a100_2_23, parse_overrides("NVLS", "")), Coll::AllReduce, 1 << 20).algo, Algo::Ring);
  try {
    (void)choose(a100_m, tune(a100_m, parse_overrides("NVLS", "")), Coll::AllReduce, 1 << 20);
    FAIL() << "expected 2.24 to fail";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()), "all_reduce: NCCL_ALGO and NCCL_PROTO leave no algorithm that runs on 8 GPUs of "
                                     "\"a100_8x\", where NCCL 2.24 fails (\"no algorithm/protocol available\")");
  }
  a100_2_24.nodes = 2;
  for (const NcclRelease release : {NcclRelease::V2_23, NcclRelease::V2_24}) {
    a100_2_24.nccl = release;
    const Machine m = make_machine(a100_2_24, 16);
    const Tuning collnet_only = tune(m, parse_overrides("CollNetDirect", ""));
    const int enabled = std::count_if(&collnet_only.bandwidth_GBps[ar][0][0], &collnet_only.bandwidth_GBps[ar][0][0] + kAlgos * kProtos,
                                      [](double bw) { return bw > 0; });
    EXPECT_EQ(enabled > 0, release == NcclRelease::V2_23) << to_string(release);  // 2.23: "ignoring NCCL_ALGO=COLLNET"
  }
}

// 2.27's patch releases change Blackwell's figures: an NVLink counts 40.1 GB/s from 2.27.5
// (40 before), and the speed list across nodes starts at 47.9 (2.27.3), 48 (2.27.5) or 96
// (2.27.6, 2.27.7). 2 nodes of B200 (a NIC 48 GB/s in NCCL's units, PCIe 5): 2.27.3's 8
// channels of 47.9 are beaten by 16 of 24; 2.27.5's 8 of 48 tie with them and stay.
TEST(NcclTuning, Release2_27PatchesForBlackwell) {
  EXPECT_EQ(parse_nccl_release("2.27"), NcclRelease::V2_27);
  EXPECT_EQ(parse_nccl_release("2.27.3"), NcclRelease::V2_27);
  EXPECT_EQ(parse_nccl_release("2.27.5"), NcclRelease::V2_27_5);
  EXPECT_EQ(parse_nccl_release("2.27.7"), NcclRelease::V2_27_6);
  System b200 = preset("b200_8x");
  b200.nodes = 2;
  for (const auto& [release, nvlink, channels, speed] : std::vector<std::tuple<NcclRelease, double, int, double>>{
           {NcclRelease::V2_27, 40.0, 16, 24.0}, {NcclRelease::V2_27_5, 40.1, 8, 48.0}, {NcclRelease::V2_27_6, 40.1, 8, 48.0}}) {
    b200.nccl = release;
    const Machine m = make_machine(b200, 16);
    EXPECT_DOUBLE_EQ(m.nvlink_bw, nvlink) << to_string(release);
    EXPECT_DOUBLE_EQ(m.nvlink_rate, 40.0) << to_string(release);  // the kernels' (kKernelPaceRelease's)
    EXPECT_EQ(m.graphs[index(Algo::Ring)].channels, channels) << to_string(release);
    EXPECT_DOUBLE_EQ(m.graphs[index(Algo::Ring)].bw_intra, speed) << to_string(release);
  }
  // With 800 Gb/s NICs on PCIe 6 (96 GB/s), 2.27.6's list starts at 96: 7 channels of it do
  // not fit beside 16 of 45.1, which 2.27.5's list also finds.
  b200.network.nic_Gbps = 800;
  b200.pcie.generation = 6;
  b200.nccl = NcclRelease::V2_27_6;
  const Machine fast = make_machine(b200, 16);
  EXPECT_EQ(fast.graphs[index(Algo::Ring)].channels, 16);
  EXPECT_DOUBLE_EQ(fast.graphs[index(Algo::Ring)].bw_intra, 45.1);
}

// 2.22 - 2.27: a communicator with NVLS runs its rings and trees on at least NVLS's channels
// (the rings copied up to them; 2.20 and 2.21 copy them too but run the collectives on the
// count before). 2 nodes of B200: 8 ring channels of 48 GB/s doubled to 16, copied up to
// NVLS's 32 in 2.25 - 2.27, not in 2.28; 2 nodes of H100 already have NVLS's 16.
TEST(NcclTuning, RingsCopiedUpToNvlsChannels) {
  System b200 = preset("b200_8x");
  b200.nodes = 2;
  for (const auto& [release, channels] : std::vector<std::pair<NcclRelease, int>>{
           {NcclRelease::V2_25, 32}, {NcclRelease::V2_27_6, 32}, {NcclRelease::V2_28, 16}}) {
    b200.nccl = release;
    const Machine m = make_machine(b200, 16);
    ASSERT_EQ(m.nvls_channels, 32) << to_string(release);
    EXPECT_EQ(m.channels, channels) << to_string(release);
  }
  System h100 = preset("h100_8x");
  h100.nodes = 2;
  h100.nccl = NcclRelease::V2_27;
  EXPECT_EQ(make_machine(h100, 16).channels, 16);
}

// A node of more GPUs than NCCL_MAX_NVLS_ARITY (32), as one NVLink domain of 64 H100s: from
// 2.25 NVLS's graph has at most 32 heads (32 channels of 11 GB/s fit the 64 GPUs' 18
// NVLinks; 2.24 searches 64 heads, which fit only at 3 GB/s), and from 2.27 NVLS runs only
// all-reduce there (NCCL_ALGO=NVLS leaves an all-gather nothing: NCCL fails).
TEST(NcclTuning, NvlsArity) {
  System wide = preset("h100_8x");
  wide.gpus_per_node = 64;
  for (const auto& [release, heads, speed] : std::vector<std::tuple<NcclRelease, int, double>>{
           {NcclRelease::V2_24, 64, 3.0}, {NcclRelease::V2_25, 32, 11.0}, {NcclRelease::V2_27, 32, 11.0}}) {
    wide.nccl = release;
    const Machine m = make_machine(wide, 64);
    EXPECT_EQ(m.graphs[index(Algo::Nvls)].channels, heads) << to_string(release);
    EXPECT_DOUBLE_EQ(m.graphs[index(Algo::Nvls)].bw_intra, speed) << to_string(release);
    const Tuning t = tune(m, parse_overrides("NVLS", ""));
    EXPECT_EQ(choose(m, t, Coll::AllReduce, 1 << 26).algo, Algo::Nvls) << to_string(release);
    if (release < NcclRelease::V2_27) {
      EXPECT_EQ(choose(m, t, Coll::AllGather, 1 << 26).algo, Algo::Nvls) << to_string(release);
    } else {
      EXPECT_THROW((void)choose(m, t, Coll::AllGather, 1 << 26), std::invalid_argument);
    }
  }
}

// 2.29 (2.29.2, 2.29.3) and 2.29.7 (PyTorch 2.12's and 2.13's) on Blackwell: the ring's LL128
// capped at 34.5 GB/s a channel on one node (2.29.7: 40; 2.28: twice Hopper's 36.7), and the
// NVLS tree's estimate corrected by size as the tree's is (4 MiB: x .7 for Simple).
TEST(NcclTuning, Release2_29) {
  EXPECT_EQ(parse_nccl_release("2.29.3"), NcclRelease::V2_29);
  EXPECT_EQ(parse_nccl_release("2.29.7"), NcclRelease::V2_29_7);
  const int ar = index(Coll::AllReduce), ring = index(Algo::Ring), ll128 = index(Proto::LL128);
  System b200 = preset("b200_8x");
  for (const auto& [release, cap] : std::vector<std::pair<NcclRelease, double>>{
           {NcclRelease::V2_28, 2 * 36.7}, {NcclRelease::V2_29, 34.5}, {NcclRelease::V2_29_7, 40.0}}) {
    b200.nccl = release;
    const Machine m = make_machine(b200, 8);
    ASSERT_EQ(m.graphs[ring].channels, 16);
    ASSERT_DOUBLE_EQ(m.graphs[ring].bw_intra, 45.0);
    EXPECT_NEAR(tune(m, Overrides{}).bandwidth_GBps[ar][ring][ll128], std::min(16 * 45 * .92, 16 * cap) * 8 / 14, 1e-4)
        << to_string(release);
  }
  b200.nodes = 2;
  const double bytes = 4 << 20;
  for (const auto& [release, correction] :
       std::vector<std::pair<NcclRelease, double>>{{NcclRelease::V2_28, 1.0}, {NcclRelease::V2_29, .7}}) {
    b200.nccl = release;
    const Machine m = make_machine(b200, 16);
    const Tuning t = tune(m, Overrides{});
    const int tree = index(Algo::NvlsTree), simple = index(Proto::Simple);
    ASSERT_GT(t.bandwidth_GBps[ar][tree][simple], 0.0);
    EXPECT_NEAR(nccl_estimate_us(m, t, Coll::AllReduce, Algo::NvlsTree, Proto::Simple, bytes),
                t.latency_us[ar][tree][simple] + bytes / (1000 * t.bandwidth_GBps[ar][tree][simple] * correction), 1e-9)
        << to_string(release);
  }
}

// 2.30 (2.30.3 - 2.30.7, PyTorch 2.14's and 2.15's) sets Blackwell's NVLS across nodes by the
// NICs' speed and the GPUs a node (ncclNvlsTuning): 8 B200s a node with 400 Gb/s NICs (50 GB/s)
// on 2 nodes keep 32 channels, the NVLS tree at most 64 KiB chunks (128 KiB before: fewer than
// 4 nodes), on 4 nodes 24 channels; with 800 Gb/s NICs (100 GB/s; PCIe 6) 32 channels and 128
// KiB on 2 nodes, 24 channels and 256 KiB chunks for NVLS and its tree on 4. Hopper's are
// unchanged (16 channels, 128 KiB; 64 KiB for the tree from 4 nodes). The NVLS tree's cap
// beyond 2 nodes is 80 GB/s a channel (43.8 in 2.28.9 and 2.29).
TEST(NcclTuning, Release2_30) {
  EXPECT_EQ(parse_nccl_release("2.30.7"), NcclRelease::V2_30);
  struct Case {
    const char* preset;
    double nic_Gbps;
    int nodes;
    NcclRelease release;
    int channels, chunk, tree_chunk;
  };
  for (const Case& c : std::vector<Case>{{"b200_8x", 400, 2, NcclRelease::V2_29_7, 32, 128 << 10, 128 << 10},
                                         {"b200_8x", 400, 2, NcclRelease::V2_30, 32, 128 << 10, 64 << 10},
                                         {"b200_8x", 400, 4, NcclRelease::V2_29_7, 32, 128 << 10, 64 << 10},
                                         {"b200_8x", 400, 4, NcclRelease::V2_30, 24, 128 << 10, 64 << 10},
                                         {"b200_8x", 800, 2, NcclRelease::V2_30, 32, 128 << 10, 128 << 10},
                                         {"b200_8x", 800, 4, NcclRelease::V2_30, 24, 256 << 10, 256 << 10},
                                         {"h100_8x", 400, 2, NcclRelease::V2_30, 16, 128 << 10, 128 << 10},
                                         {"h100_8x", 400, 4, NcclRelease::V2_30, 16, 128 << 10, 64 << 10}}) {
    System s = preset(c.preset);
    s.nodes = c.nodes;
    s.network.nic_Gbps = c.nic_Gbps;
    s.pcie.generation = 6;
    s.nccl = c.release;
    const Machine m = make_machine(s, 8 * c.nodes);
    const std::string what = fmt::format("{} {} Gb/s {} nodes {}", c.preset, c.nic_Gbps, c.nodes, to_string(c.release));
    EXPECT_EQ(m.nvls_channels, c.channels) << what;
    EXPECT_EQ(m.nvls_chunk, c.chunk) << what;
    EXPECT_EQ(m.nvls_tree_chunk, c.tree_chunk) << what;
  }
  System b200 = preset("b200_8x");
  b200.nodes = 4;
  for (const auto& [release, cap] : std::vector<std::pair<NcclRelease, double>>{{NcclRelease::V2_29_7, 43.8}, {NcclRelease::V2_30, 80.0}}) {
    b200.nccl = release;
    const Machine m = make_machine(b200, 32);
    const Graph& g = m.graphs[index(Algo::NvlsTree)];
    const double intra = g.bw_intra * .74 * (g.channels - 1) / g.channels * 2;
    EXPECT_NEAR(tune(m, Overrides{}).bandwidth_GBps[index(Coll::AllReduce)][index(Algo::NvlsTree)][index(Proto::Simple)],
                g.channels * std::min({intra, g.bw_inter, cap}) * 32 / 62, 1e-4) << to_string(release);
  }
}

// NCCL 2.28 (from 2.28.3; 2.28.9 is PyTorch 2.11's) re-estimates NVLS and the NVLS tree: the
// channels' speed x the generation's efficiency (Hopper .85) x (channels - 1) / channels, x 2
// for all-reduce's two pipelined operations, x (G - 1) / G for the others, at most the
// inter-node speed (the NVLS tree's x 2 on 2 nodes) and the NVLS tree's cap (Hopper 57.7 on 2
// nodes, 45.5 beyond), then at the ring's n / steps. On one node the inter-node speed is what
// the search's second pass raised it to (from 2.19): 8 H100s' 8 NVLS channels of 40 GB/s carry
// 60.
TEST(NcclTuning, NvlsReestimatedIn2_28) {
  const int ar = index(Coll::AllReduce), ag = index(Coll::AllGather), simple = index(Proto::Simple);
  const int nvls = index(Algo::Nvls), nvls_tree = index(Algo::NvlsTree);
  System h100 = preset("h100_8x");
  EXPECT_DOUBLE_EQ(make_machine(h100, 8).graphs[nvls].bw_inter, 40.0);  // 2.18: no second pass for NVLS
  h100.nccl = parse_nccl_release("2.28.9");
  ASSERT_EQ(h100.nccl, NcclRelease::V2_28_9);
  const Machine one = make_machine(h100, 8);
  ASSERT_EQ(one.graphs[nvls].channels, 8);
  EXPECT_DOUBLE_EQ(one.graphs[nvls].bw_intra, 40.0);
  EXPECT_DOUBLE_EQ(one.graphs[nvls].bw_inter, 60.0);
  const Tuning t = tune(one, Overrides{});
  EXPECT_NEAR(t.bandwidth_GBps[ar][nvls][simple], 8 * std::min(40 * .85 * 7 / 8 * 2, 60.0) * 8 / 14, 1e-4);
  EXPECT_NEAR(t.bandwidth_GBps[ag][nvls][simple], 8 * 40 * .85 * 7 / 8 * 7 / 8, 1e-4);

  // Across nodes the NVLS tree: 2 nodes at its cap (under 59.5 and 2 x 48), 4 nodes at 45.5;
  // its network hop 20.9 us from 2.28.9 (14 in 2.27 - 2.28.7), crossed 2 log2(N) times.
  for (const auto& [nodes, per_channel] : std::vector<std::pair<int, double>>{{2, 57.7}, {4, 45.5}}) {
    h100.nodes = nodes;
    const int n = 8 * nodes;
    h100.nccl = NcclRelease::V2_28_9;
    const Machine m = make_machine(h100, n);
    ASSERT_DOUBLE_EQ(m.graphs[nvls_tree].bw_inter, 48.0);
    const Tuning t_2_28 = tune(m, Overrides{});
    EXPECT_NEAR(t_2_28.bandwidth_GBps[ar][nvls_tree][simple], 8 * per_channel * n / (2.0 * (n - 1)), 1e-4) << nodes;
    for (const NcclRelease before : {NcclRelease::V2_27, NcclRelease::V2_28, NcclRelease::V2_28_7}) {
      h100.nccl = before;
      const Tuning t_before = tune(make_machine(h100, n), Overrides{});
      EXPECT_NEAR(t_2_28.latency_us[ar][nvls_tree][simple] - t_before.latency_us[ar][nvls_tree][simple],
                  2 * std::log2(nodes) * (20.9 - 14), 1e-9) << nodes << " " << to_string(before);
    }
  }
}

// The kernels keep 2.27's pace under 2.28 (kKernelPaceRelease): the same NVLS all-reduce on
// one node and NVLS tree on 2 nodes take the same time under both, though NCCL's estimates
// of them differ.
TEST(NcclExecution, KernelsKeep2_27sPaceUnder2_28) {
  for (const auto& [nodes, algo] : std::vector<std::pair<int, Algo>>{{1, Algo::Nvls}, {2, Algo::NvlsTree}}) {
    const double bytes = 256.0 * (1 << 20);
    double us[2], estimate[2];
    for (const NcclRelease release : {NcclRelease::V2_27, NcclRelease::V2_28}) {
      System s = preset("h100_8x");
      s.nodes = nodes;
      s.nccl = release;
      const Machine m = make_machine(s, 8 * nodes);
      const Tuning t = tune(m, parse_overrides(to_string(algo), ""));
      const Choice c = choose(m, t, Coll::AllReduce, bytes);
      ASSERT_EQ(c.algo, algo);
      us[release == NcclRelease::V2_28] = collective_us(m, t, Coll::AllReduce, bytes, c);
      estimate[release == NcclRelease::V2_28] = c.nccl_estimate_us;
    }
    EXPECT_DOUBLE_EQ(us[1], us[0]) << nodes;
    EXPECT_NE(estimate[1], estimate[0]) << nodes;
  }
}

// 2.28's other rules: NVLS on 2 GPUs of a node from 2.28.7 (3 before; 2 channels of 60 GB/s,
// all-reduce at 2 x 60 x .85 x 1/2 x 2 x 2/2); the rings no longer copied up to NVLS's
// channels, and NVLS across nodes on at most the communicator's channels (8 where 2 NICs a
// node make 8; 2.27 copies the rings up to NVLS's 16 and runs NVLS on all 16); CollNet Chain
// only up to 8 GPUs a node; Blackwell's own per-channel caps (on 2 nodes the tree's LL128
// 31.67 GB/s, and from 2.28.7 the ring's LL128 34.6, twice Hopper's 36.7 before).
TEST(NcclTuning, Release2_28Rules) {
  const int ar = index(Coll::AllReduce), simple = index(Proto::Simple);
  System h100 = preset("h100_8x");
  for (const NcclRelease before : {NcclRelease::V2_27, NcclRelease::V2_28}) {
    h100.nccl = before;
    EXPECT_FALSE(make_machine(h100, 2).nvls) << to_string(before);
  }
  h100.nccl = NcclRelease::V2_28_7;
  const Machine pair = make_machine(h100, 2);
  ASSERT_TRUE(pair.nvls);
  EXPECT_EQ(pair.graphs[index(Algo::Nvls)].channels, 2);
  EXPECT_NEAR(tune(pair, Overrides{}).bandwidth_GBps[ar][index(Algo::Nvls)][simple], 2 * 60 * .85 * 1 / 2 * 2, 1e-4);

  System few_nics = preset("h100_8x");
  few_nics.nodes = 2;
  few_nics.network.nics_per_node = 2;
  few_nics.network.collnet = true;
  for (const auto& [release, channels] : std::vector<std::pair<NcclRelease, int>>{{NcclRelease::V2_27, 16}, {NcclRelease::V2_28, 8}}) {
    few_nics.nccl = release;
    const Machine m = make_machine(few_nics, 16);
    ASSERT_EQ(m.channels, channels);  // 2.27 copies the rings up to NVLS's 16 channels
    ASSERT_EQ(m.nvls_channels, 16);
    const Choice c = choose(m, tune(m, parse_overrides("NVLS", "")), Coll::AllReduce, 1 << 26);
    ASSERT_EQ(c.algo, Algo::Nvls);
    EXPECT_EQ(c.channels, channels) << to_string(release);
  }

  System wide = preset("h100_8x");
  wide.gpus_per_node = 16;
  wide.nodes = 2;
  wide.network.collnet = true;
  wide.nccl = NcclRelease::V2_27;
  const Machine wide_2_27 = make_machine(wide, 32);
  EXPECT_EQ(choose(wide_2_27, tune(wide_2_27, parse_overrides("CollNetChain", "")), Coll::AllReduce, 1 << 26).algo,
            Algo::CollNetChain);
  wide.nccl = NcclRelease::V2_28;
  const Machine wide_2_28 = make_machine(wide, 32);
  try {
    (void)choose(wide_2_28, tune(wide_2_28, parse_overrides("CollNetChain", "")), Coll::AllReduce, 1 << 26);
    FAIL() << "expected 2.28 to have no CollNet Chain with 16 GPUs a node";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("where NCCL 2.28 fails"), std::string::npos) << e.what();
  }

  // 2 nodes of B200 with 800 Gb/s NICs on PCIe 6 (96 GB/s in NCCL's units): 16 ring channels
  // of 45 GB/s (2.27.3's list; 45.1 from 2.27.5), where 2.28's caps bind.
  System b200 = preset("b200_8x");
  b200.nodes = 2;
  b200.network.nic_Gbps = 800;
  b200.pcie.generation = 6;
  for (const auto& [release, speed, ring_ll128, tree_ll128] : std::vector<std::tuple<NcclRelease, double, double, double>>{
           {NcclRelease::V2_27, 45.0, 2 * 36.7, 2 * 36.7},
           {NcclRelease::V2_28, 45.1, 2 * 36.7, 31.67},
           {NcclRelease::V2_28_7, 45.1, 34.6, 31.67}}) {
    b200.nccl = release;
    const Machine m = make_machine(b200, 16);
    const Graph& g = m.graphs[index(Algo::Ring)];
    ASSERT_EQ(g.channels, 16);
    ASSERT_DOUBLE_EQ(g.bw_intra, speed);
    const Tuning t = tune(m, Overrides{});
    EXPECT_NEAR(t.bandwidth_GBps[ar][index(Algo::Ring)][index(Proto::LL128)],
                std::min(16 * speed * .92, 16 * ring_ll128) * 16 / 30, 1e-4) << to_string(release);
    EXPECT_NEAR(t.bandwidth_GBps[ar][index(Algo::Tree)][index(Proto::LL128)],
                std::min(16 * speed * .92 * 120 / 128, 16 * tree_ll128) / 2, 1e-4) << to_string(release);
  }
}

// --- execution times -------------------------------------------------------------------------

// A ring all-reduce that fits one loop is 2(n-1) steps of one chunk each: for LL and LL128
// every step pays the hop's latency and the chunk over the channel's share of the links; for
// Simple its two slices' flags (2 FIFO steps each) and data. That is an alpha-beta ring with
// those alpha and beta, which dtsim simulates message by message: the same time.
TEST(NcclExecution, RingMatchesDtsimsSimulationOfItsSteps) {
  const Machine m = make_machine(preset("a100_8x"), 8);
  const Tuning t = tune(m, Overrides{});
  const int n = 8;
  struct Case {
    Proto proto;
    double bytes;
  };
  for (const Case& c : {Case{Proto::LL, 262144}, Case{Proto::LL128, 4 << 20}, Case{Proto::Simple, 64 << 20}}) {
    Choice ch = choose(m, tune(m, parse_overrides("Ring", to_string(c.proto))), Coll::AllReduce, c.bytes);
    ASSERT_EQ(ch.proto, c.proto);
    const double model = collective_us(m, t, Coll::AllReduce, c.bytes, ch) - base_latency_us(Algo::Ring, c.proto);
    // The step's chunk and costs as the kernel has them.
    const double rate = kernel_bus_bw(m, Coll::AllReduce, Algo::Ring, c.proto, 20.0) / m.channels;  // GB/s per channel
    const double hop = hop_latency_us(Hw::NvLink, Algo::Ring, c.proto);
    double chunk = 0, alpha = 0;
    if (c.proto == Proto::Simple) {
      const double per_rank = c.bytes / (ch.channels * n);  // 349,525.3 -> rounded to the threads' 4 KiB grain
      chunk = std::ceil(per_rank / 4096) * 4096;
      alpha = 2 * 2 * hop;
    } else {
      const double grain = c.proto == Proto::LL ? ch.threads * 8.0 : ch.threads * 60.0 / 2;
      chunk = std::ceil(c.bytes / (ch.channels * n * grain)) * grain;
      alpha = hop;
    }
    const Topology ring = Topology::ring(n, {.latency_s = alpha * 1e-6, .bandwidth_bytes_per_s = rate * 1e9});
    const Schedule s = make_schedule({.kind = CollectiveKind::AllReduce, .algorithm = Algorithm::Ring, .ranks = n,
                                      .elements = static_cast<std::int64_t>(chunk * n / 4)});
    const auto finish = simulate("alpha_beta", ring, s, std::vector<double>(n, 0.0));
    EXPECT_NEAR(model * 1e-6, finish[0], 1e-9 * finish[0]) << to_string(c.proto);
  }
}

// One node's NVLS moves a large buffer at the channels' share of a GPU's NVLinks (18 x 20.6
// = 370.8 GB/s on an H100, what they carry in every release), k + 1 shares for k channels,
// times NCCL's 5/6 (its NVLS busBw to algBw): 8 H100s 8 x 370.8/9 x 5/6 = 274.7 GB/s (NCCL
// 2.18's estimate: its table speed, 40, for 266.7); 4 H100s 4 x 370.8/5 x 5/6 = 247.2 GB/s,
// where NCCL's estimate rounds the share down to 60 (200 GB/s). A 4 GiB buffer comes within
// 1.5 % (the pipeline's fill and latencies).
TEST(NcclExecution, NvlsMovesDataAtTheChannelsShareOfTheLinks) {
  const double bytes = 4.0 * (1 << 30);
  for (const auto& [gpus, algbw_GBps] :
       std::vector<std::pair<int, double>>{{8, 8 * 370.8 / 9 * 5.0 / 6}, {4, 4 * 370.8 / 5 * 5.0 / 6}}) {
    auto config = std::make_shared<Config>();
    config->system = preset("h100_8x");
    config->overrides = parse_overrides("NVLS", "");
    const Clock clock(config, gpus);
    const auto run = clock.run(Coll::AllReduce, bytes);
    ASSERT_EQ(run.choice.algo, Algo::Nvls) << gpus;
    EXPECT_NEAR(bytes / (run.gpu_us * 1e3), algbw_GBps, 0.015 * algbw_GBps) << gpus;  // less the pipeline's fill
  }
}

// 2.20's NVLS reduce-scatter: two roles (scatter into the switch's buffers, reduce out of
// them), so NCCL's 23 us + 2 hand-overs of an NVLink Simple hop (3.4 us) + (loops + 1) loops;
// from 1 GiB (64 loops; smaller buffers get smaller chunks) 16 channels x 8 heads x 128 KiB
// chunks make a loop 1 MiB a channel, moved at the channels' share of the links (NCCL's 8 x
// 40 GB/s x 18 x 20.6 / 9 / 40, over 16 channels), all-reduce at 5/6 of it; reduce-scatter
// and all-gather at 7/8 of it, NCCL's newest estimate (2.27: (G - 1) / G of the speed, the
// bus bandwidth the algorithm's since 2.23; 5/6 before). The all-reduce has the third role
// (gather): one hand-over and one loop more.
TEST(NcclExecution, NvlsReduceScatterAndAllGatherRunTwoOfTheThreeRoles) {
  System s = preset("h100_8x");
  s.nccl = NcclRelease::V2_20;
  const Machine m = make_machine(s, 8);
  const Tuning t = tune(m, parse_overrides("NVLS", ""));
  const double loops = 64, bytes = 16 * 8 * 131072 * loops;
  const double rate = 8 * 40.0 * 5 / 6 * (18 * 20.6 / 9 / 40) / 16 * 1e3;  // bytes per us per channel
  const double loop_us = 1048576 / rate, gather_loop_us = loop_us * 5 / 6 * 8 / 7;
  const Choice rs = choose(m, t, Coll::ReduceScatter, bytes);
  ASSERT_EQ(rs.algo, Algo::Nvls);
  EXPECT_NEAR(collective_us(m, t, Coll::ReduceScatter, bytes, rs), 23 + 2 * 3.4 + (loops + 1) * gather_loop_us, 1e-9);
  const Choice ag = choose(m, t, Coll::AllGather, bytes);
  ASSERT_EQ(ag.algo, Algo::Nvls);
  EXPECT_NEAR(collective_us(m, t, Coll::AllGather, bytes, ag), 23 + 2 * 3.4 + (loops + 1) * gather_loop_us, 1e-9);
  const Choice ar = choose(m, t, Coll::AllReduce, bytes);
  EXPECT_NEAR(collective_us(m, t, Coll::AllReduce, bytes, ar), 23 + 3 * 3.4 + (loops + 2) * loop_us, 1e-9);
  // Each rank sends its input into the switch: the whole buffer to reduce-scatter, its
  // block to all-gather.
  EXPECT_DOUBLE_EQ(bytes_sent_per_rank(m, Coll::ReduceScatter, bytes, rs), bytes);
  EXPECT_DOUBLE_EQ(bytes_sent_per_rank(m, Coll::AllGather, bytes, ag), bytes / 8);
}

// From 2.20 each channel loops over its own contiguous part (enqueue.cc's addCBDCollToPlan)
// instead of striding over all channels. An LL128 ring all-reduce of 4 MiB on 8x A100 (24
// channels of 640 threads): 2.18's chunk is two of its minimum grains, 2 x 4800 floats;
// 2.20's part is 174,768 bytes rounded to 45,600 floats (whole alignments of 480 bytes x 20
// warps = 2400 floats), its one loop's chunk that over the 8 ranks rounded up again: 7200
// floats. 2.22 deals 16-byte cells by traffic: the first channel 10,922 cells, the 23
// others 10,923 (43,692 floats), the chunk 43,692 / 8 rounded up to 16 bytes: 5464 floats;
// 2.23 cells of 8 KiB (16 KiB of traffic): 22 cells for each of the first 23 channels, 6 for
// the last, 45,056 floats over 8: 5632 floats.
// Each of the 14 steps pays the hop's 1.9 us and the chunk over the channel's share of the
// links.
TEST(NcclExecution, ContiguousChannelPartsFrom2_20) {
  for (const auto& [release, chunk_floats] :
       std::vector<std::pair<NcclRelease, double>>{{NcclRelease::V2_18, 9600}, {NcclRelease::V2_19, 9600},
                                                   {NcclRelease::V2_20, 7200}, {NcclRelease::V2_21, 7200},
                                                   {NcclRelease::V2_22, 5464}, {NcclRelease::V2_23, 5632}}) {
    System s = preset("a100_8x");
    s.nccl = release;
    const Machine m = make_machine(s, 8);
    const Tuning t = tune(m, parse_overrides("Ring", "LL128"));
    const double bytes = 4 << 20;
    const Choice ch = choose(m, t, Coll::AllReduce, bytes);
    ASSERT_EQ(ch.proto, Proto::LL128);
    ASSERT_EQ(ch.channels, 24);
    const double rate = kernel_bus_bw(m, Coll::AllReduce, Algo::Ring, Proto::LL128, 20.0) / 24 * 1e3;  // bytes per us
    EXPECT_NEAR(collective_us(m, t, Coll::AllReduce, bytes, ch), 14.0 + 14 * (1.9 + chunk_floats * 4 / rate), 1e-9)
        << to_string(release);
  }
  // 2.29 deals cells of 32 KiB of traffic (16 KiB of an all-reduce), the share a channel
  // the traffic over the channels in 16 bytes: 8 MiB of LL128 over 24 channels is 512 cells,
  // 22 to the first channel (699,056 bytes of traffic over 32 KiB a cell, rounded up), a
  // largest part of 90,112 floats, its chunk 11,264; 2.23 - 2.28's 8 KiB cells give 43 to
  // the first, 88,064 floats, a chunk of 11,008.
  for (const auto& [release, chunk_floats] :
       std::vector<std::pair<NcclRelease, double>>{{NcclRelease::V2_28, 11008}, {NcclRelease::V2_29, 11264}}) {
    System s = preset("a100_8x");
    s.nccl = release;
    const Machine m = make_machine(s, 8);
    const Tuning t = tune(m, parse_overrides("Ring", "LL128"));
    const double bytes = 8 << 20;
    const Choice ch = choose(m, t, Coll::AllReduce, bytes);
    ASSERT_EQ(ch.channels, 24);
    const double rate = kernel_bus_bw(m, Coll::AllReduce, Algo::Ring, Proto::LL128, 20.0) / 24 * 1e3;
    EXPECT_NEAR(collective_us(m, t, Coll::AllReduce, bytes, ch), 14.0 + 14 * (1.9 + chunk_floats * 4 / rate), 1e-9)
        << to_string(release);
  }
  // NVLS within a node: 1 KiB fits one Simple alignment (4 KiB), so in 2.20 and 2.21 one
  // channel holds all of it, where striding gave each of the 16 a 64-byte share; 2.22 gives a
  // channel at least 512 bytes of traffic (256 of an all-reduce's data): 4 channels; 2.23 at
  // least 16 KiB, in cells of 8 KiB of data: one channel again. NCCL's
  // 23 us (2.21: 25), 3 hand-overs of 3.4 us and 3 loop times (the pipeline's 2 of fill and
  // its one loop).
  for (const auto& [release, lat, loop_bytes] : std::vector<std::tuple<NcclRelease, double, double>>{
           {NcclRelease::V2_18, 23.0, 64.0}, {NcclRelease::V2_20, 23.0, 1024.0}, {NcclRelease::V2_21, 25.0, 1024.0},
           {NcclRelease::V2_22, 25.0, 256.0}, {NcclRelease::V2_23, 25.0, 1024.0}}) {
    System s = preset("h100_8x");
    s.nccl = release;
    const Machine m = make_machine(s, 8);
    const Tuning t = tune(m, parse_overrides("NVLS", ""));
    const Choice ch = choose(m, t, Coll::AllReduce, 1024);
    ASSERT_EQ(ch.algo, Algo::Nvls);
    const double rate = 8 * 40.0 * 5 / 6 * (18 * 20.6 / 9 / 40) / 16 * 1e3;  // bytes per us per channel
    EXPECT_NEAR(collective_us(m, t, Coll::AllReduce, 1024, ch), lat + 3 * 3.4 + 3 * loop_bytes / rate, 1e-9)
        << to_string(release);
  }
  // The NVLS tree's chunk: a FIFO step (512 KiB) up to 2.20, NVLS's 128 KiB from 2.21, halved
  // while the buffer gives the 16 channels x 8 heads fewer than 32, 16, 4 loops: 1 GiB on 2
  // nodes of 8x H100 takes 256 KiB chunks in 2.19 (32 loops of 8 heads a channel, striding)
  // and 128 KiB in 2.21 and 2.22 (64 loops over each channel's 64 MiB part; 2.22 sizes the
  // chunk for that part alone, the same here).
  for (const auto& [release, loops] : std::vector<std::pair<NcclRelease, double>>{
           {NcclRelease::V2_19, 32}, {NcclRelease::V2_21, 64}, {NcclRelease::V2_22, 64}}) {
    System s = preset("h100_8x");
    s.nodes = 2;
    s.nccl = release;
    const Machine m = make_machine(s, 16);
    const Tuning t = tune(m, parse_overrides("NVLSTree", ""));
    const double bytes = 1 << 30;
    const Choice ch = choose(m, t, Coll::AllReduce, bytes);
    ASSERT_EQ(ch.algo, Algo::NvlsTree) << to_string(release);
    ASSERT_EQ(ch.channels, 16);
    const int ar = index(Coll::AllReduce), tree = index(Algo::NvlsTree), simple = index(Proto::Simple);
    const double rate = t.bandwidth_GBps[ar][tree][simple] / 16 * 1e3, loop = bytes / 16 / loops;
    EXPECT_NEAR(collective_us(m, t, Coll::AllReduce, bytes, ch), t.latency_us[ar][tree][simple] + 3 * 3.4 + (loops + 2) * loop / rate,
                1e-6) << to_string(release);
  }
}

// 2.26's ring over two NVLink domains takes at least 2 channels: 4 GPUs of a PCIe Gen3 box
// bridged in 2 pairs (a ring of 12 GB/s) get 1 channel of 12 GB/s up to 2.25, 2 of 6.
TEST(NcclTuning, TwoNvlinkDomainsTakeTwoChannelsFrom2_26) {
  System pairs = preset("a100_pcie_pairs");
  pairs.pcie.generation = 3;
  for (const auto& [release, channels, speed] :
       std::vector<std::tuple<NcclRelease, int, double>>{{NcclRelease::V2_25, 1, 12.0}, {NcclRelease::V2_26, 2, 6.0}}) {
    pairs.nccl = release;
    const Graph ring = make_machine(pairs, 4).graphs[index(Algo::Ring)];
    EXPECT_EQ(ring.channels, channels) << to_string(release);
    EXPECT_DOUBLE_EQ(ring.bw_intra, speed) << to_string(release);
  }
}

// From 2.26 LL's traffic counts four times when the parts are dealt out, so its cells are
// 2 KiB of an all-reduce (16 KiB of traffic / 8) instead of 8 KiB. 1 MiB on 8x H100 over 24
// channels: 2.25 gives the first channel 6 cells (12,288 floats), 2.26 22 cells of 512
// (11,264); the one loop's chunk is that over the 8 ranks, rounded up to 16 bytes: 1536 and
// 1408 floats. Each of the 14 steps pays the hop's 0.6 us and the chunk at the channel's
// share of LL's 141 GB/s (one Hopper node's llMaxBw) over 24 channels, and NCCL's 6.6 us once.
TEST(NcclExecution, LlTrafficCountsFourTimesFrom2_26) {
  for (const auto& [release, chunk_floats] :
       std::vector<std::pair<NcclRelease, double>>{{NcclRelease::V2_25, 1536}, {NcclRelease::V2_26, 1408}}) {
    System s = preset("h100_8x");
    s.nccl = release;
    const Machine m = make_machine(s, 8);
    const Tuning t = tune(m, parse_overrides("Ring", "LL"));
    const Choice ch = choose(m, t, Coll::AllReduce, 1 << 20);
    ASSERT_EQ(ch.channels, 24);
    EXPECT_NEAR(collective_us(m, t, Coll::AllReduce, 1 << 20, ch), 6.6 + 14 * (0.6 + chunk_floats * 4 / (141.0 / 24 * 1e3)), 1e-9)
        << to_string(release);
  }
}

// A chunk rounded up past what is left carries only what is left (the kernel's nelem): a
// 2 KiB Simple ring all-reduce on 8x A100 under 2.20 runs on one channel, its last chunk
// 512 / 8 floats rounded up to a 4 KiB alignment, of which the fullest chunk carries the 2
// KiB. Each of the 14 steps: one slice of 2 KiB at the channel's 10 GB/s share of 12 x 20
// GB/s, and its two FIFO steps' flags of 3.4 us; NCCL's 8.4 us once. Under 2.22 the chunk
// is 64 floats (16-byte aligned) and all eight carry data.
TEST(NcclExecution, ChunksCarryWhatIsLeft) {
  for (const auto& [release, chunk_bytes] :
       std::vector<std::pair<NcclRelease, double>>{{NcclRelease::V2_20, 2048}, {NcclRelease::V2_22, 256}}) {
    System s = preset("a100_8x");
    s.nccl = release;
    const Machine m = make_machine(s, 8);
    const Tuning t = tune(m, parse_overrides("Ring", "Simple"));
    const Choice ch = choose(m, t, Coll::AllReduce, 2048);
    ASSERT_EQ(ch.channels, 1);
    EXPECT_NEAR(collective_us(m, t, Coll::AllReduce, 2048, ch), 8.4 + 14 * (chunk_bytes / 10e3 + 2 * 3.4), 1e-9)
        << to_string(release);
  }
}

// With one GPU a node every hop of the ring crosses the network: a chunk's path through an
// all-reduce's K = 2(N - 1) steps is K network hops, each NCCL's 14 us and the GPU's side of
// it (one wait of the 3.4 us NVLink latency, at least NCCL's 3 us network overhead): the
// latency part (the links' bandwidth unlimited) of a one-loop Simple ring all-reduce on 4
// one-H100 nodes is 8.4 + 6 x 17.4 us.
TEST(NcclExecution, OneGpuANodeRingCrossesTheNetworkEveryHop) {
  System s = preset("h100_8x");
  s.gpus_per_node = 1;
  s.sockets = 1;
  s.network.nics_per_node = 1;
  s.network.rails = 1;
  s.nodes = 4;
  const Machine m = make_machine(s, 4);
  const Tuning t = tune(m, parse_overrides("Ring", "Simple"));
  const Choice ch = choose(m, t, Coll::AllReduce, 4096);
  EXPECT_NEAR(collective_latency_us(m, t, Coll::AllReduce, 4096, ch), 8.4 + 6 * (14.0 + 3.4), 1e-9);
}

// A Simple slice waits two hop latencies where NCCL reads across the link (NVLink between
// Ampere GPUs: P2P read, the flag and then the reader's loads) and one where it writes (data
// and flag together: Hopper, Blackwell, PCIe): a 2 KiB ring all-reduce on one channel (2.20;
// Blackwell 2.25), its latency part (the links' bandwidth unlimited) NCCL's 8.4 us and 14
// steps of one slice each. A point-to-point step waits the same.
TEST(NcclExecution, SimpleSlicesWaitTwiceWhereNcclReads) {
  for (const auto& [name, waits] : std::vector<std::pair<const char*, int>>{{"a100_8x", 2}, {"h100_8x", 1}, {"b200_8x", 1}}) {
    System s = preset(name);
    s.nccl = s.gpu == GpuArch::Blackwell ? NcclRelease::V2_25 : NcclRelease::V2_20;
    const Machine m = make_machine(s, 8);
    const Tuning t = tune(m, parse_overrides("Ring", "Simple"));
    const Choice ch = choose(m, t, Coll::AllReduce, 2048);
    ASSERT_EQ(ch.channels, 1) << name;
    EXPECT_NEAR(collective_latency_us(m, t, Coll::AllReduce, 2048, ch), 8.4 + 14 * waits * 3.4, 1e-9) << name;
  }
  const Machine h = make_machine(preset("h100_8x"), 8);  // 64 MiB: 4 channels of 30 GB/s, 32 steps
  EXPECT_NEAR(p2p_us(h, 0, 5, 64 << 20), 8.4 + 3.4 + (16 << 20) / (30.0 * 1e3) + 31 * 3.4, 1e-9);
}

// CollNet's chunk (computeColl): Direct a FIFO step (512 KiB), halved while the 16 channels x
// 8 heads (one per NIC) get fewer than 64 x its depth (2: the node's GPUs are its peers)
// loops; Chain 256 KiB, halved below 64 x its depth (8 GPUs a node) chunks a channel, a loop
// one chunk. 16 GiB on 2 nodes of 8x A100 with SHARP: Direct 256 loops of 8 x 512 KiB a
// channel, Chain 4096 of 256 KiB.
TEST(NcclExecution, CollNetChunks) {
  System s = preset("a100_8x");
  s.nodes = 2;
  s.network.collnet = true;
  const Machine m = make_machine(s, 16);
  const double bytes = 16.0 * (1 << 30);
  for (const auto& [algo, loop_bytes] :
       std::vector<std::pair<Algo, double>>{{Algo::CollNetDirect, 8 * 524288.0}, {Algo::CollNetChain, 262144.0}}) {
    const Tuning t = tune(m, parse_overrides(to_string(algo), ""));
    const Choice ch = choose(m, t, Coll::AllReduce, bytes);
    ASSERT_EQ(ch.algo, algo);
    ASSERT_EQ(ch.channels, 16);
    ASSERT_EQ(m.graphs[index(algo)].channels, 8);  // heads: one per NIC
    const int ar = index(Coll::AllReduce), a = index(algo), simple = index(Proto::Simple);
    const double rate = t.bandwidth_GBps[ar][a][simple] / 16 * 1e3, loops = bytes / 16 / loop_bytes;
    EXPECT_NEAR(collective_us(m, t, Coll::AllReduce, bytes, ch), t.latency_us[ar][a][simple] + 3 * 3.4 + (loops + 2) * loop_bytes / rate,
                1e-6 * loops) << to_string(algo);
  }
}

// Time never falls as the size grows (it stays flat while the kernels' chunks keep their
// grain), and never beats the links: busbw stays under the ring's NCCL bandwidth (12 x 20
// = 240 GB/s on 8x A100), under every modelled release.
TEST(NcclExecution, BusBandwidthNeverBeatsTheLinks) {
  for (const auto& release : nccl_releases()) {
    System s = preset("a100_8x");
    s.nccl = release.release;
    const Machine m = make_machine(s, 8);
    const Tuning t = tune(m, Overrides{});
    double previous = 0;
    for (double bytes = 1024; bytes <= 8.0 * (1 << 30); bytes *= 2) {
      const Choice c = choose(m, t, Coll::AllReduce, bytes);
      const double us = collective_us(m, t, Coll::AllReduce, bytes, c);
      EXPECT_GE(us, previous) << release.series << " " << bytes;
      previous = us;
      EXPECT_LT(bytes / (us * 1e3) * 2 * 7 / 8, 240.0) << release.series << " " << bytes;
    }
  }
}

// Across nodes the NICs set the ring's pace: the hops between a node's GPUs run over its
// NVLinks (faster than the NIC-sized channels NCCL's search gives the ring), and the GPU's
// per-slice waits overlap the NIC's wire time (the proxy sends one slice while the GPU
// writes the next). So a large Simple all-reduce over two 8x A100 nodes (8 HDR NICs) comes
// within a few percent of NCCL's ring busBw, graph channels x bwInter = 8 x 24 = 192 GB/s,
// and never beats it; the GPU's waits added to the wire time would leave it near 87 %.
TEST(NcclExecution, AcrossNodesTheNicsSetTheRingsPace) {
  System a100 = preset("a100_8x");
  a100.nodes = 2;
  const Machine m = make_machine(a100, 16);
  const Tuning t = tune(m, parse_overrides("Ring", "Simple"));
  const Graph& g = m.graphs[index(Algo::Ring)];
  const double nccl_busbw = g.channels * g.bw_inter;
  ASSERT_DOUBLE_EQ(nccl_busbw, 192.0);
  for (double bytes : {1.0 * (1 << 30), 8.0 * (1 << 30)}) {
    const Choice c = choose(m, t, Coll::AllReduce, bytes);
    ASSERT_EQ(c.proto, Proto::Simple);
    const double us = collective_us(m, t, Coll::AllReduce, bytes, c);
    const double busbw = bytes / (us * 1e3) * 2 * 15 / 16;
    EXPECT_LT(busbw, nccl_busbw) << bytes;
    EXPECT_GT(busbw, 0.97 * nccl_busbw) << bytes;
  }
}

// Point-to-point: NVLink within an NVSwitch node or a bridged pair, PCIe between pairs, the
// NIC across nodes (one more NVLink hop when the NICs are on different rails: PXN). Within
// a one-node communicator the message runs on NCCL's channels for its peer, each at most at
// the ring graph's channel speed, Simple paying a hop's latency per step after the first.
TEST(NcclExecution, PointToPoint) {
  const Machine a = make_machine(preset("a100_8x"), 8);  // NCCL 2.30
  const double big = 64 << 20;
  // 4 channels (nChannelsMin: 32 per peer over 8 peers), 16 MiB each at 20 GB/s of the
  // 240, in 32 steps of 512 KiB, each after the first waiting two NVLink latencies (P2P read).
  EXPECT_NEAR(p2p_us(a, 0, 5, big), 8.4 + 3.4 + (16 << 20) / (20.0 * 1e3) + 31 * 2 * 3.4, 1e-9);
  EXPECT_NEAR(p2p_us(a, 0, 5, 1024), 6.6 + 0.6 + 1024 / (20.0 * 0.5 * 1e3), 1e-9);  // LL, one channel
  const P2pTiming empty = p2p_timing(a, 0, 5, 0);  // a sync: latency only, a whole share of nothing
  EXPECT_EQ(empty.wire_us, 0.0);
  EXPECT_EQ(empty.share, 1.0);
  const Machine p = make_machine(preset("a100_pcie_pairs"), 8);
  // A bridged pair: the same 2 channels and 128 KiB steps, each channel at NCCL's 20 GB/s
  // for an NVLink (the box's ring graph crosses PCIe).
  EXPECT_NEAR(p2p_us(p, 0, 1, big), 8.4 + 3.4 + (32 << 20) / (20.0 * 1e3) + 255 * 2 * 3.4, 1e-9);
  EXPECT_LT(p2p_us(p, 0, 1, big), p2p_us(p, 0, 2, big));  // bridge vs PCIe
  // 2 channels a peer (two over PCIe), 32 MiB each at the PCIe ring channel's 12 GB/s, in
  // steps of 128 KiB (not every pair is NVLink), one PCIe latency each (P2P write).
  EXPECT_NEAR(p2p_us(p, 0, 2, big), 8.4 + 5.7 + (32 << 20) / (12.0 * 1e3) + 255 * 5.7, 1e-9);
  System two = preset("a100_8x");
  two.nodes = 2;
  const Machine n2 = make_machine(two, 16);
  EXPECT_NEAR(p2p_us(n2, 3, 11, big), 8.4 + 14.0 + big / (24.0 * 1e3), 1e-9);         // same rail
  EXPECT_NEAR(p2p_us(n2, 3, 12, big), 8.4 + 14.0 + 3.4 + big / (24.0 * 1e3), 1e-9);  // rails 3 and 4: PXN
}

// NCCL's channels for a one-node communicator's point-to-point (ncclTopoComputeP2pChannels
// and enqueue.cc's scheduling, per release) at the sizes where they change: on 8 A100s, 32
// channels a peer (two per NVLink: 24, rounded up), one channel per peer at least
// (nChannelsMin 4), doubled while a part exceeds 32 steps of 512 KiB; up to 2.19 at most
// four operations a channel (nChannelsMax 16); from 2.22 as few channels as 64 KiB parts
// need, the message split evenly in whole 4 KiB.
// LL: the message up to 16 KiB (2.21), the peer's channels x 16 KiB (2.22 - 2.28), the
// message's channels x 16 KiB (2.29).
TEST(NcclExecution, PointToPointChannels) {
  auto machine = [](const char* name, const char* release, int gpus) {
    System s = preset(name);
    s.nccl = parse_nccl_release(release);
    return make_machine(s, gpus);
  };
  constexpr double M = 1 << 20, K = 1 << 10;
  const Machine a18 = machine("a100_8x", "2.18", 8), a20 = machine("a100_8x", "2.20", 8);
  const Machine a22 = machine("a100_8x", "2.22", 8), a29 = machine("a100_8x", "2.29", 8);
  EXPECT_EQ(a18.p2p.per_peer, 32);
  EXPECT_EQ(a18.p2p.total, 32);
  struct Row {
    const Machine* m;
    double bytes;
    int channels;
    double part;
  };
  for (const Row& r : {Row{&a18, 64 * M, 4, 16 * M}, Row{&a18, 65 * M, 8, 8.125 * M}, Row{&a18, 128 * M, 8, 16 * M},
                       Row{&a18, 256 * M, 16, 16 * M}, Row{&a18, 1024 * M, 16, 64 * M},  // nChannelsMax 16
                       Row{&a20, 1024 * M, 32, 32 * M}, Row{&a20, 100 * K, 2, 64 * K},   // 2.20: 64 KiB parts
                       Row{&a22, 1024 * M, 32, 32 * M}, Row{&a22, 100 * K, 2, 52 * K},   // 2.22: halves in 4 KiB
                       Row{&a22, 1 * M, 4, 256 * K}}) {
    const P2pSplit split = p2p_split(*r.m, r.bytes);
    EXPECT_EQ(split.channels, r.channels) << r.bytes;
    EXPECT_EQ(split.part_bytes, r.part) << r.bytes;
    EXPECT_EQ(split.step_bytes, 512 * K);
  }
  EXPECT_EQ(p2p_protocol(a18, 16 * K), Proto::LL);
  EXPECT_EQ(p2p_protocol(a18, 16 * K + 4), Proto::Simple);
  EXPECT_EQ(p2p_protocol(a22, 512 * K), Proto::LL);  // 32 channels a peer x 16 KiB
  EXPECT_EQ(p2p_protocol(a22, 512 * K + 4), Proto::Simple);
  EXPECT_EQ(p2p_protocol(a29, 16 * K), Proto::LL);
  EXPECT_EQ(p2p_protocol(a29, 64 * K), Proto::Simple);  // one channel: 16 KiB
  // A PCIe box: two channels a peer whatever the bridges, 128 KiB steps; a bridged pair
  // alone: 24 NVLink channels, rounded to 32 but held to the communicator's, 512 KiB steps.
  const Machine p = machine("a100_pcie_pairs", "2.30", 8);
  EXPECT_EQ(p.p2p.per_peer, 2);
  EXPECT_EQ(p2p_split(p, 64 * M).channels, 2);
  EXPECT_EQ(p2p_split(p, 64 * M).step_bytes, 128 * K);
  const Machine pair = machine("a100_pcie_pairs", "2.30", 2);
  EXPECT_EQ(pair.p2p.per_peer, std::min(32, pair.p2p.total));
  EXPECT_EQ(p2p_split(pair, 64 * M).step_bytes, 512 * K);
  // Across nodes every peer, a node's GPUs included, gets the channels NCCL gives one over
  // the network: two up to 2.19 (NCCL_NCHANNELS_PER_NET_PEER); 2.20 - 2.28 two, one where two
  // a peer would put more than four operations on a channel (128 ranks); from 2.29 enough
  // for the NIC at 14 GB/s a channel (NDR: 4), halved while rounds of 8 peers overflow the
  // channels (16 across H100 nodes). Steps of 128 KiB, parts of one step (from 2.20 at least
  // half of one), one channel per operation when every peer has one.
  auto nodes = [&](const char* name, const char* release, int n) {
    System sys = preset(name);
    sys.nccl = parse_nccl_release(release);
    sys.nodes = n;
    return make_machine(sys, n * sys.gpus_per_node);
  };
  const Machine a18n2 = nodes("a100_8x", "2.18", 2), a18n16 = nodes("a100_8x", "2.18", 16);
  const Machine a20n2 = nodes("a100_8x", "2.20", 2), a20n16 = nodes("a100_8x", "2.20", 16);
  const Machine h30n2 = nodes("h100_8x", "2.30", 2), h30n16 = nodes("h100_8x", "2.30", 16);
  EXPECT_EQ(a18n2.p2p.per_peer, 2);
  EXPECT_EQ(a18n16.p2p.per_peer, 2);
  EXPECT_EQ(a20n2.p2p.per_peer, 2);
  EXPECT_EQ(a20n16.p2p.per_peer, 1);
  EXPECT_EQ(h30n2.p2p.per_peer, 4);
  EXPECT_EQ(h30n16.p2p.per_peer, 1);  // 16 rounds of 8 peers over 16 channels
  for (const Row& r : {Row{&a18n2, 16 * M, 2, 8 * M}, Row{&a20n16, 16 * M, 1, 16 * M}, Row{&h30n2, 16 * M, 4, 4 * M},
                       Row{&h30n2, 100 * K, 1, 100 * K}, Row{&h30n16, 16 * M, 1, 16 * M}}) {
    const P2pSplit split = p2p_split(*r.m, r.bytes);
    EXPECT_EQ(split.channels, r.channels) << r.bytes;
    EXPECT_EQ(split.part_bytes, r.part) << r.bytes;
    EXPECT_EQ(split.step_bytes, 128 * K);
  }
  // Every message's parts add up to it, on no more channels than its peer has.
  for (const Machine* m : {&a18, &a20, &a22, &a29, &p, &pair, &a18n2, &a20n16, &h30n2, &h30n16})
    for (double bytes = 4; bytes <= 8.0 * 1024 * M; bytes *= 3) {
      const P2pSplit split = p2p_split(*m, bytes);
      EXPECT_GE(split.channels * split.part_bytes, bytes);
      EXPECT_LT((split.channels - 1) * split.part_bytes, bytes + 1);
      EXPECT_LE(split.channels, m->p2p.per_peer);
    }
}

// The validation's sendrecv figure (8x A100, li-plus/playground): NCCL runs 128 MiB on 8
// channels and 256 MiB on 16, which halves and then doubles the bandwidth there (110.8 GB/s
// measured at 128 MiB, 188.6 at 256 MiB); the model's step follows.
TEST(NcclExecution, PointToPointBandwidthStepsWithTheChannels) {
  System s = preset("a100_8x");
  s.nccl = parse_nccl_release("2.18");
  const Machine a = make_machine(s, 8);
  auto busbw = [&](double bytes) { return bytes / (p2p_us(a, 0, 1, bytes) * 1e3); };
  EXPECT_GT(busbw(256 << 20) / busbw(128 << 20), 1.45);  // 1.70 measured
  EXPECT_LT(busbw(128 << 20), 8 * 20.0);
  EXPECT_LT(busbw(1 << 30), 240.0);
}

// --- the model in a network ------------------------------------------------------------------

NetworkConfig nccl_network(const json& network) {
  config::ObjectReader r(network, "/network");
  return parse_network_section(r, 8, 0);
}

// The error parsing `network` gives, or "" where it parses.
std::string refused(const json& network) {
  try {
    (void)nccl_network(network);
  } catch (const config::ScenarioError& e) {
    return e.what();
  }
  return "";
}

// A scenario's /network for the nccl model: a system instead of links, NCCL's overrides; a
// collective ends its clock's time after the last arrival, a message its p2p time after it
// is sent; the links fields, the topology's perturbations, schedule algorithms, and a system
// under another model are refused by path.
// A job's all-gather on nodes of one GPU runs as NCCL's PAT where NCCL picks it, on the
// clock, and as the ring where NCCL_ALGO leaves PAT out.
TEST(NcclNetwork, PatAllGatherRunsOnTheClock) {
  const json singles = {{"preset", "h100_8x"}, {"gpus_per_node", 1}, {"sockets", 1}, {"nodes", 16},
                        {"network", {{"nics_per_node", 1}, {"rails", 1}}}};
  double seconds[2] = {0, 0};
  for (const bool pat : {true, false}) {
    NetworkConfig config = nccl_network(pat ? json{{"model", "nccl"}, {"system", singles}}
                                            : json{{"model", "nccl"}, {"system", singles}, {"nccl_algo", "^PAT"}});
    sim::Engine engine;
    Network network(engine, Topology::ring(16, config.nominal), config);
    const Clock clock(config.nccl, 16);
    CollectiveSpec spec{.kind = CollectiveKind::AllGather, .ranks = 16, .elements = 16 * 4096,
                        .block_elements = std::vector<std::int64_t>(16, 4096)};
    EXPECT_EQ(clock.describe(spec).rfind(pat ? "PAT/Simple/" : "Ring/", 0), 0u) << clock.describe(spec);
    std::vector<double> done(16, -1);
    auto exec = network.collective(network.resolve(spec), nullptr, [&](int r) { done[r] = engine.now(); });
    for (int r = 0; r < 16; ++r) engine.call_at(0.0, [exec, r] { exec->arrive(r); });
    engine.run();
    seconds[pat] = clock.collective_seconds(network.resolve(spec));
    for (int r = 0; r < 16; ++r) EXPECT_NEAR(done[r], seconds[pat], 1e-12) << r;
  }
  EXPECT_LT(seconds[true], seconds[false]);  // NCCL's choice: its estimate of PAT is the lower
}

TEST(NcclNetwork, CollectivesAndMessagesRunOnTheClock) {
  NetworkConfig config = nccl_network({{"model", "nccl"}, {"system", "a100_8x"}, {"nccl_proto", "^LL128"}});
  ASSERT_TRUE(config.nccl);
  EXPECT_EQ(config.nccl->overrides.proto, "^LL128");
  sim::Engine engine;
  Network network(engine, Topology::ring(8, config.nominal), config);
  const Clock clock(config.nccl, 8);
  CollectiveSpec spec{.kind = CollectiveKind::AllReduce, .ranks = 8, .elements = 1 << 22};
  std::vector<double> done(8, -1);
  auto exec = network.collective(network.resolve(spec), nullptr, [&](int r) { done[r] = engine.now(); });
  for (int r = 0; r < 8; ++r) engine.call_at(r * 1e-6, [exec, r] { exec->arrive(r); });
  double arrived = -1;
  engine.call_at(1e-3, [&] { network.send(2, 6, 1 << 20, [&] { arrived = engine.now(); }); });
  engine.run();
  for (int r = 0; r < 8; ++r) EXPECT_NEAR(done[r], 7e-6 + clock.collective_seconds(network.resolve(spec)), 1e-12);
  EXPECT_NEAR(arrived, 1e-3 + p2p_us(clock.machine(), 2, 6, 1 << 20) * 1e-6, 1e-12);
  EXPECT_NE(clock.describe(network.resolve(spec)).find("Ring/Simple/"), std::string::npos);

  EXPECT_EQ(refused({{"model", "nccl"}, {"system", "a100_8x"}, {"latency_us", 1}}),
            "/network/latency_us: the nccl model takes its links from /network/system, not latency_us");
  EXPECT_EQ(refused({{"model", "flow"}, {"latency_us", 1}, {"bandwidth_GBps", 1}, {"system", "a100_8x"}}),
            "/network/system: only the nccl model reads system (this network's model is flow)");
  // The topology's link perturbations and the schedules' algorithms have nothing to act on.
  const json trace = json::array({{{"time_s", 0}, {"a", 0}, {"b", 1}, {"bandwidth_GBps", 1}}});
  EXPECT_EQ(refused({{"model", "nccl"}, {"system", "a100_8x"}, {"bandwidth_trace", trace}}),
            "/network/bandwidth_trace: the nccl model takes its links from /network/system, not bandwidth_trace");
  EXPECT_EQ(refused({{"model", "nccl"}, {"system", "a100_8x"}, {"failures", json::array({{{"time_s", 0}, {"a", 0}, {"b", 1}}})}}),
            "/network/failures: the nccl model takes its links from /network/system, not failures");
  EXPECT_EQ(refused({{"model", "nccl"}, {"system", "a100_8x"}, {"algorithms", {{"all_reduce", "tree"}}}}),
            "/network/algorithms: the nccl model runs NCCL's own choice of algorithm (nccl_algo restricts it, as NCCL_ALGO "
            "does)");
  EXPECT_EQ(refused({{"model", "nccl"}}), "/network/system: missing required field (expected a system preset's name or a system object)");
  EXPECT_EQ(refused({{"model", "nccl"}, {"system", "a100_8x"}, {"nccl_algo", "Rings"}}).substr(0, 36),
            "/network/nccl_algo: NCCL_ALGO: unkno");
  // The echo reads back.
  const json echo = network_section_json(config);
  EXPECT_FALSE(echo.contains("latency_us"));
  EXPECT_EQ(network_section_json(nccl_network(echo)), echo);
  // Ranks that do not fit the system: named at /network/system.
  try {
    check_network_links(config, Topology::ring(12, config.nominal));
    FAIL() << "expected an error";
  } catch (const config::ScenarioError& e) {
    EXPECT_EQ(e.path(), "/network/system");
  }
  // NCCL_ALGO=NVLS on an A100 under 2.18 (which fails there): named at /network/nccl_algo
  // before the job runs; 2.20 runs the ring.
  const NetworkConfig nvls =
      nccl_network({{"model", "nccl"}, {"system", {{"preset", "a100_8x"}, {"nccl_version", "2.18"}}}, {"nccl_algo", "NVLS"}});
  try {
    check_network_links(nvls, Topology::ring(8, nvls.nominal));
    FAIL() << "expected an error";
  } catch (const config::ScenarioError& e) {
    EXPECT_EQ(e.path(), "/network/nccl_algo");
    EXPECT_NE(std::string(e.what()).find("where NCCL 2.18 fails"), std::string::npos) << e.what();
  }
  const NetworkConfig nvls_2_20 = nccl_network(
      {{"model", "nccl"}, {"system", {{"preset", "a100_8x"}, {"nccl_version", "2.20.5"}}}, {"nccl_algo", "NVLS"}});
  EXPECT_NO_THROW(check_network_links(nvls_2_20, Topology::ring(8, nvls_2_20.nominal)));
  // A scenario where NCCL may run PAT (2.23, one GPU per node) runs, as one that leaves it out.
  const json singles = {{"preset", "h100_8x"}, {"gpus_per_node", 1}, {"sockets", 1}, {"nodes", 4}, {"nccl_version", "2.23"}};
  const NetworkConfig pat = nccl_network({{"model", "nccl"}, {"system", singles}});
  EXPECT_NO_THROW(check_network_links(pat, Topology::ring(4, pat.nominal)));
  const NetworkConfig no_pat = nccl_network({{"model", "nccl"}, {"system", singles}, {"nccl_algo", "^PAT"}});
  EXPECT_NO_THROW(check_network_links(no_pat, Topology::ring(4, no_pat.nominal)));
  EXPECT_EQ(network_section_json(nvls_2_20)["system"]["nccl_version"], "2.20");
  EXPECT_EQ(refused({{"model", "nccl"}, {"system", {{"preset", "a100_8x"}, {"nccl_version", "2.17.1"}}}}),
            "/network/system/nccl_version: NCCL \"2.17.1\" is not modelled: expected " + modelled_nccl_releases());
}

// Collectives run one at a time, as on one process group's NCCL stream: one whose ranks
// have all arrived while another runs starts when that one ends; one that comes after
// starts at its last arrival. Under the analytical model (no stream) they overlap.
TEST(NcclNetwork, CollectivesQueueOnTheStream) {
  NetworkConfig config = nccl_network({{"model", "nccl"}, {"system", "h100_8x"}});
  sim::Engine engine;
  Network network(engine, Topology::ring(8, config.nominal), config);
  const Clock clock(config.nccl, 8);
  const auto big = network.resolve(CollectiveSpec{.kind = CollectiveKind::AllReduce, .ranks = 8, .elements = 1 << 24});
  const auto small = network.resolve(CollectiveSpec{.kind = CollectiveKind::AllReduce, .ranks = 8, .elements = 1 << 10});
  const double t_big = clock.collective_seconds(big), t_small = clock.collective_seconds(small);
  ASSERT_GT(t_big, 10e-6);
  std::vector<double> first(8, -1), second(8, -1), third(8, -1);
  auto a = network.collective(big, nullptr, [&](int r) { first[r] = engine.now(); });
  auto b = network.collective(small, nullptr, [&](int r) { second[r] = engine.now(); });
  auto c = network.collective(small, nullptr, [&](int r) { third[r] = engine.now(); });
  const double late = 10 * t_big;
  for (int r = 0; r < 8; ++r) {
    engine.call_at(0.0, [a, r] { a->arrive(r); });
    engine.call_at(1e-6, [b, r] { b->arrive(r); });  // while the first runs
    engine.call_at(late, [c, r] { c->arrive(r); });  // long after both
  }
  engine.run();
  for (int r = 0; r < 8; ++r) {
    EXPECT_NEAR(first[r], t_big, 1e-12);
    EXPECT_NEAR(second[r], t_big + t_small, 1e-12);
    EXPECT_NEAR(third[r], late + t_small, 1e-12);
  }

  // The analytical model's closed forms have no stream: the two overlap.
  NetworkConfig analytical;
  analytical.model = "analytical";
  sim::Engine engine2;
  Network free_network(engine2, Topology::ring(8, analytical.nominal), analytical);
  const auto spec = free_network.resolve(CollectiveSpec{.kind = CollectiveKind::AllReduce, .ranks = 8, .elements = 1 << 24});
  const double t = closed_form_seconds(spec, analytical.nominal.latency_s, analytical.nominal.bandwidth_bytes_per_s);
  std::vector<double> ends;
  auto x = free_network.collective(spec, nullptr, [&](int) { ends.push_back(engine2.now()); });
  auto y = free_network.collective(spec, nullptr, [&](int) { ends.push_back(engine2.now()); });
  for (int r = 0; r < 8; ++r) {
    engine2.call_at(0.0, [x, r] { x->arrive(r); });
    engine2.call_at(0.0, [y, r] { y->arrive(r); });
  }
  engine2.run();
  ASSERT_EQ(ends.size(), 16u);
  for (double e : ends) EXPECT_NEAR(e, t, 1e-12);
}

// Point-to-point messages are transfers on the sender's way out and the receiver's way in
// (port_flows.hpp): a GPU's NVLink port within a node, a node's NIC across nodes. Two
// sends through one NIC, or two into one, share its time (each at half pace while both are
// on it); within a node of a multi-node communicator a message runs on the two channels
// NCCL gives every peer there, far from filling the GPU's NVLinks, so two sends from one
// GPU run side by side; messages with no port in common, and one on NVLink beside one
// through a NIC, do not slow each other.
TEST(NcclNetwork, MessagesShareTheirPorts) {
  const json two_nodes = {{"model", "nccl"}, {"system", {{"preset", "a100_8x"}, {"nodes", 2}}}};
  config::ObjectReader r(two_nodes, "/network");
  const NetworkConfig config = parse_network_section(r, 16, 0);
  const Clock clock(config.nccl, 16);
  const double bytes = 16 << 20;
  const P2pTiming nvlink = p2p_timing(clock.machine(), 0, 1, bytes), nic = p2p_timing(clock.machine(), 0, 8, bytes);
  ASSERT_GT(nvlink.wire_us, 2 * nvlink.latency_us);
  EXPECT_EQ(nvlink.egress, 0);
  EXPECT_EQ(nvlink.ingress, 1);
  EXPECT_EQ(nic.egress, 16 + 0);       // node 0's NIC 0
  EXPECT_EQ(nic.ingress, 16 + 8 + 0);  // node 1's NIC 0
  EXPECT_EQ(p2p_ports(clock.machine()), 16 + 2 * 8);
  EXPECT_EQ(p2p_split(clock.machine(), bytes).channels, 2);
  EXPECT_LT(2 * nvlink.share, 1.0);
  EXPECT_EQ(nic.share, 1.0);
  const double alone = (nvlink.latency_us + nvlink.wire_us) * 1e-6;
  const double across = (nic.latency_us + nic.wire_us) * 1e-6, nic_wire = nic.wire_us * 1e-6;

  // Sends at time 0 (in this order); arrival time of each.
  auto arrivals = [&](const std::vector<std::pair<int, int>>& sends, std::vector<double> bytes_each) {
    sim::Engine engine;
    Network network(engine, Topology::ring(16, config.nominal), config);
    std::vector<double> at(sends.size(), -1.0);
    for (std::size_t i = 0; i < sends.size(); ++i)
      engine.call_at(0.0, [&, i] {
        network.send(sends[i].first, sends[i].second, bytes_each[i], [&, i] { at[i] = engine.now(); });
      });
    engine.run();
    return at;
  };
  auto expect = [](const std::vector<double>& got, const std::vector<double>& want) {
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-12) << "message " << i;
  };
  expect(arrivals({{0, 1}, {0, 2}}, {bytes, bytes}), {alone, alone});    // one GPU's way out, side by side
  expect(arrivals({{1, 0}, {2, 0}}, {bytes, bytes}), {alone, alone});    // one GPU's way in
  expect(arrivals({{0, 1}, {2, 3}}, {bytes, bytes}), {alone, alone});    // no port in common
  expect(arrivals({{0, 1}, {0, 8}}, {bytes, bytes}), {alone, across});   // NVLink beside the NIC
  expect(arrivals({{0, 8}, {1, 9}}, {bytes, bytes}), {across, across});  // two NICs (8 per node)
  expect(arrivals({{0, 8}, {0, 8}}, {bytes, bytes}), {2 * nic_wire + nic.latency_us * 1e-6, 2 * nic_wire + nic.latency_us * 1e-6});
  // Rank 0 reaches rank 9 (NIC 1's rail) through GPU 1's NIC (PXN): the NIC rank 1 uses.
  const P2pTiming pxn = p2p_timing(clock.machine(), 0, 9, bytes), direct = p2p_timing(clock.machine(), 1, 9, bytes);
  EXPECT_EQ(pxn.egress, direct.egress);
  EXPECT_GT(pxn.latency_us, direct.latency_us);  // one more NVLink hop
  ASSERT_EQ(pxn.wire_us, direct.wire_us);
  expect(arrivals({{1, 9}, {0, 9}, {0, 8}}, {bytes, bytes, bytes}),
         {2 * nic_wire + direct.latency_us * 1e-6, 2 * nic_wire + pxn.latency_us * 1e-6, across});
  // Ports share time, not bytes: a small message (LL: half the wire's bytes) beside a large
  // one through the same NICs each runs at half its own pace until the small one ends.
  const P2pTiming small = p2p_timing(clock.machine(), 0, 8, 4096);
  ASSERT_EQ(small.share, 1.0);
  const double small_wire = small.wire_us * 1e-6;
  ASSERT_LT(2 * small_wire, nic_wire);
  expect(arrivals({{0, 8}, {0, 8}}, {bytes, 4096}),
         {nic_wire + small_wire + nic.latency_us * 1e-6, 2 * small_wire + small.latency_us * 1e-6});
  // A message sent after the port is free again runs alone.
  sim::Engine engine;
  Network network(engine, Topology::ring(16, config.nominal), config);
  double first = -1, second = -1;
  engine.call_at(0.0, [&] { network.send(0, 8, bytes, [&] { first = engine.now(); }); });
  engine.call_at(2 * across, [&] { network.send(0, 8, bytes, [&] { second = engine.now(); }); });
  engine.run();
  EXPECT_NEAR(first, across, 1e-12);
  EXPECT_NEAR(second, 2 * across + across, 1e-12);
}

// Within a node a message uses only the share of its GPU's port that NCCL's channels for its
// peer carry (4 channels of 20 GB/s of an A100's 240 for 16 MiB), so a GPU's messages to
// several peers at once (gossip's neighbours) run side by side at their own paces while
// their shares fit the port; beyond, they share it and end when it has carried them all.
TEST(NcclNetwork, MessagesToSeveralPeersShareTheirChannelsPorts) {
  const NetworkConfig config = nccl_network({{"model", "nccl"}, {"system", "a100_8x"}});
  const Clock clock(config.nccl, 8);
  const double bytes = 16 << 20;
  const P2pTiming m = p2p_timing(clock.machine(), 0, 1, bytes);
  const double wire = m.wire_us * 1e-6, lat = m.latency_us * 1e-6;
  ASSERT_GT(3 * m.share, 0.5);
  ASSERT_LT(3 * m.share, 1.0);
  ASSERT_GT(4 * m.share, 1.0);
  auto arrivals = [&](int peers) {
    sim::Engine engine;
    Network network(engine, Topology::ring(8, config.nominal), config);
    std::vector<double> at(static_cast<std::size_t>(peers), -1.0);
    engine.call_at(0.0, [&] {
      for (int p = 0; p < peers; ++p)
        network.send(0, 1 + p, bytes, [&, p] { at[static_cast<std::size_t>(p)] = engine.now(); });
    });
    engine.run();
    return at;
  };
  for (double t : arrivals(3)) EXPECT_NEAR(t, wire + lat, 1e-12);                  // 3 shares fit
  for (double t : arrivals(4)) EXPECT_NEAR(t, 4 * m.share * wire + lat, 1e-12);  // the port carries 4
}

// A collective drives every GPU's links and the NICs, so its data is a transfer on every
// port, its latencies following: a message sent while the data is on the wire shares the
// message's two ports with it. The message uses the share s of its ports that its channels
// carry, the collective all of them, so while both are on the wire each runs at 1 / (1 + s)
// of its pace (the collective is as slow as its busiest port): the message takes (1 + s)
// times its wire time and the collective ends later by s times it. A small collective's
// time is mostly latency, which no port holds: it slows the message only by s times its
// data's time. Apart in time, neither slows the other.
TEST(NcclNetwork, CollectivesAndMessagesShareThePorts) {
  const NetworkConfig config = nccl_network({{"model", "nccl"}, {"system", "a100_8x"}});
  const Clock clock(config.nccl, 8);
  const double bytes = 16 << 20;
  const P2pTiming m = p2p_timing(clock.machine(), 2, 3, bytes);
  const double wire = m.wire_us * 1e-6, lat = m.latency_us * 1e-6, alone = lat + wire, s = m.share;
  ASSERT_GT(s, 0.0);
  ASSERT_LT(s, 1.0);  // 4 channels of 20 GB/s of the GPU's 240
  struct Times {
    double collective = -1, message = -1;
  };
  // The collective's ranks arrive at `arrive`, the message 2 -> 3 is sent at `send`.
  auto run = [&](std::int64_t elements, double arrive, double send) {
    sim::Engine engine;
    Network network(engine, Topology::ring(8, config.nominal), config);
    const auto spec = network.resolve(CollectiveSpec{.kind = CollectiveKind::AllReduce, .ranks = 8, .elements = elements});
    Times t;
    auto c = network.collective(spec, nullptr, [&](int r) {
      if (r == 0) t.collective = engine.now();
    });
    for (int r = 0; r < 8; ++r) engine.call_at(arrive, [c, r] { c->arrive(r); });
    engine.call_at(send, [&] { network.send(2, 3, bytes, [&] { t.message = engine.now(); }); });
    engine.run();
    return std::pair{t, clock.collective_timing(spec)};
  };
  // The message sent 1 us into a 64 MiB all-reduce, whose data outlasts it.
  auto [during, big] = run(1 << 24, 0.0, 1e-6);
  ASSERT_GT(big.wire_s, 1e-6 + (1 + s) * wire);
  EXPECT_NEAR(during.message, 1e-6 + (1 + s) * wire + lat, 1e-12);
  EXPECT_NEAR(during.collective, big.seconds + s * wire, 1e-12);
  // A small all-reduce whose ranks arrive while the message is on the wire, and whose data
  // ends first: both at 1 / (1 + s) from then until it does; its latencies follow, alone.
  auto [after, small] = run(1 << 10, wire / 4, 0.0);
  ASSERT_GT(small.wire_s, 0.0);
  ASSERT_LT(small.wire_s, small.seconds / 4);  // mostly latency
  ASSERT_LT(wire / 4 + (1 + s) * small.wire_s, wire);
  EXPECT_NEAR(after.collective, wire / 4 + (1 + s) * small.wire_s + (small.seconds - small.wire_s), 1e-12);
  EXPECT_NEAR(after.message, wire + s * small.wire_s + lat, 1e-12);
  // Apart in time, neither waits.
  auto [apart, small2] = run(1 << 10, 2 * alone, 0.0);
  EXPECT_NEAR(apart.message, alone, 1e-12);
  EXPECT_NEAR(apart.collective, 2 * alone + small2.seconds, 1e-12);
}

// The part of a collective's time that is latency is the collective with the links'
// bandwidth unlimited: all of a tiny one's time, little of a large one's, and the same
// whatever the size while a ring's chunks cross the same steps.
// PAT (one GPU per node): a small collective waits on its deepest piece's k = log2(n) levels
// (NCCL's log latency and a step each), a large one on the NICs at NCCL's PAT bandwidth.
// Up to 2.25 the kernel takes one step at a time, so a small one waits on its n - 1 + k steps
// too: NCCL's own estimate, whose linear part is that.
TEST(NcclExecution, PatLevelsStepsAndNics) {
  System singles = preset("h100_8x");
  singles.gpus_per_node = 1;
  singles.sockets = 1;
  singles.nodes = 16;
  singles.network.nics_per_node = singles.network.rails = 1;
  singles.nccl = NcclRelease::V2_30;
  const Machine m = make_machine(singles, 16);
  const Tuning t = tune(m, Overrides{});
  const int ag = index(Coll::AllGather);
  const PatLatency pat = pat_latency(m, m.system.nccl);
  // The kernel's levels and steps are NCCL's PAT latency: 8 us + log2(16) levels + 16 steps.
  EXPECT_NEAR(t.latency_us[ag][index(Algo::Pat)][index(Proto::Simple)], 8 + 4 * pat.level_us + 16 * 2.8, 1e-9);
  EXPECT_GT(pat.level_us, 0.0);
  // 1 KiB: 64 bytes a rank, f = 8 pieces a message (n / 2), 8 steps at once (2.26 on): the
  // deepest piece's 4 levels, a message on each dimension, of 1, 2, 4 and 8 pieces of 64
  // bytes (the pieces that cross it) at the channel's share of the NICs.
  for (Coll c : {Coll::AllGather, Coll::ReduceScatter}) {
    const Choice small = choose(m, t, c, 1024);
    ASSERT_EQ(describe(small), "PAT/Simple/1ch") << to_string(c);
    const double latency = 8 + 4 * (pat.level_us + 2.8);
    EXPECT_NEAR(collective_latency_us(m, t, c, 1024, small), latency, 1e-9) << to_string(c);
    const double rate = kernel_bus_bw(m, c, Algo::Pat, Proto::Simple, m.graphs[index(Algo::Tree)].bw_inter) / m.channels;
    EXPECT_NEAR(collective_us(m, t, c, 1024, small), latency + (1 + 2 + 4 + 8) * 64 / (rate * 1e3), 1e-9) << to_string(c);
    EXPECT_DOUBLE_EQ(bytes_sent_per_rank(m, c, 1024, small), 1024.0 * 15 / 16);
  }
  // 2.25 takes the 19 steps one at a time: 8 + 19 x 2.8 + a level and a step for the last
  // piece, within a level and a step of NCCL's estimate (8 + 4 levels + 16 x 2.8).
  System one_step = singles;
  one_step.nccl = NcclRelease::V2_25;
  const Machine m_2_25 = make_machine(one_step, 16);
  const Tuning t_2_25 = tune(m_2_25, Overrides{});
  const Choice small_2_25 = choose(m_2_25, t_2_25, Coll::AllGather, 1024);
  ASSERT_EQ(small_2_25.algo, Algo::Pat);
  const PatLatency pat_2_25 = pat_latency(m_2_25, NcclRelease::V2_25);
  const double steps_2_25 = 8 + 19 * 2.8 + pat_2_25.level_us + 2.8;
  EXPECT_NEAR(collective_latency_us(m_2_25, t_2_25, Coll::AllGather, 1024, small_2_25), steps_2_25, 1e-9);
  EXPECT_NEAR(steps_2_25, small_2_25.nccl_estimate_us, pat_2_25.level_us + 2.8);
  // 8 GiB as PAT: the NICs' pace, NCCL's PAT bus bandwidth (0.75 of the tree graph's) over
  // the channels that run it, within 1 %.
  const Tuning pat_only = tune(m, parse_overrides("PAT", ""));
  const double big = 8.0 * (1 << 30);
  const Choice large = choose(m, pat_only, Coll::AllGather, big);
  ASSERT_EQ(large.algo, Algo::Pat);
  const Graph& tree = m.graphs[index(Algo::Tree)];
  const double nics = kernel_bus_bw(m, Coll::AllGather, Algo::Pat, Proto::Simple, tree.bw_inter) * large.channels / m.channels;
  EXPECT_NEAR(nics, 0.75 * tree.channels * tree.bw_inter * large.channels / m.channels, 1e-9);
  const double busbw = big / collective_us(m, pat_only, Coll::AllGather, big, large) * 1e-3 * 15 / 16;
  EXPECT_NEAR(busbw / nics, 1.0, 0.01) << busbw;
  // NCCL itself runs the ring there (PAT's 0.75).
  EXPECT_EQ(choose(m, t, Coll::AllGather, big).algo, Algo::Ring);
}

// PAT on any count of one-GPU nodes (powers of two or not) and sizes: a time that grows with
// the size, of which the latency part is at most the whole and NCCL's base time at least.
// (From 2.24: up to 2.23 NCCL_ALGO=PAT without CollNet brings back the ring and the tree,
// "ignoring NCCL_ALGO=COLLNET".)
TEST(NcclExecution, PatTimesGrowWithTheSize) {
  System singles = preset("h100_8x");
  singles.gpus_per_node = 1;
  singles.sockets = 1;
  singles.network.nics_per_node = singles.network.rails = 1;
  for (const NcclRelease release : {NcclRelease::V2_24, NcclRelease::V2_26, NcclRelease::V2_30}) {
    for (const int n : {2, 3, 5, 12, 16, 100}) {
      singles.nodes = n;
      singles.nccl = release;
      const Machine m = make_machine(singles, n);
      const Tuning t = tune(m, parse_overrides("PAT", ""));
      for (const Coll c : {Coll::AllGather, Coll::ReduceScatter}) {
        double last = 0.0;
        for (double bytes = n * 4.0; bytes <= 4.0 * (1 << 30); bytes *= 4) {
          const Choice ch = choose(m, t, c, bytes);
          ASSERT_EQ(ch.algo, Algo::Pat) << to_string(release) << " " << n << " " << to_string(c) << " " << bytes;
          const double us = collective_us(m, t, c, bytes, ch), latency = collective_latency_us(m, t, c, bytes, ch);
          const std::string where = fmt::format("{} {} nodes {} {} bytes", to_string(release), n, to_string(c), bytes);
          EXPECT_TRUE(std::isfinite(us)) << where;
          EXPECT_GE(us, last) << where;
          EXPECT_LE(latency, us) << where;
          EXPECT_GE(latency, pat_latency(m, release).base_us) << where;
          last = us;
        }
      }
    }
  }
}

TEST(NcclExecution, LatencyIsTheTimeWithUnlimitedBandwidth) {
  const NetworkConfig config = nccl_network({{"model", "nccl"}, {"system", "a100_8x"}});
  const Clock clock(config.nccl, 8);
  struct Timed {
    Clock::Run run;
    double latency_us;
  };
  auto at = [&](double bytes) {
    const auto r = clock.run(Coll::AllReduce, bytes);
    return Timed{r, collective_latency_us(clock.machine(), clock.tuning(), Coll::AllReduce, bytes, r.choice)};
  };
  for (double bytes : {1024.0, 65536.0, 16.0 * (1 << 20), 1024.0 * (1 << 20)}) {
    const auto t = at(bytes);
    EXPECT_GT(t.latency_us, 0.0) << bytes;
    EXPECT_LE(t.latency_us, t.run.gpu_us) << bytes;
    // The clock's split of a job's collective is the same.
    const auto timing = clock.collective_timing(
        CollectiveSpec{.kind = CollectiveKind::AllReduce, .ranks = 8, .elements = static_cast<std::int64_t>(bytes) / 4});
    EXPECT_DOUBLE_EQ(timing.seconds, t.run.gpu_us * 1e-6) << bytes;
    EXPECT_NEAR(timing.wire_s, (t.run.gpu_us - t.latency_us) * 1e-6, 1e-15) << bytes;
  }
  // Ring/LL over 24 channels at 1 MiB: 2(n-1) = 14 steps of NVLink LL latency after NCCL's
  // base latency, whatever the chunks carry.
  const auto small = at(1 << 20);
  ASSERT_EQ(describe(small.run.choice), "Ring/LL/24ch");
  EXPECT_NEAR(small.latency_us, base_latency_us(Algo::Ring, Proto::LL) + 14 * hop_latency_us(Hw::NvLink, Algo::Ring, Proto::LL),
              1e-9);
  // 1 GiB of Ring/Simple: its data is most of its time.
  const auto big = at(1024.0 * (1 << 20));
  EXPECT_LT(big.latency_us, 0.1 * big.run.gpu_us);
  // 1 KiB: the data's share is small.
  const auto tiny = at(1024);
  EXPECT_GT(tiny.latency_us, 0.5 * tiny.run.gpu_us);
}

// --- the run's bounds on the channels (NCCL_MIN_NCHANNELS, NCCL_MAX_NCHANNELS, NCCL_MIN_CTAS,
// NCCL_MAX_CTAS) ----------------------------------------------------------------------------

// ncclTopoPostset cuts the communicator's channels to min(NCCL_MAX_NCHANNELS, maxCTAs), then
// copies them up to max(NCCL_MIN_NCHANNELS, minCTAs), each at most MAXCHANNELS (32 up to
// 2.24); NVLS's channels (16 on an H100, or NCCL_NVLS_NCHANNELS) only follow the CTAs; the
// point-to-point channels
// are drawn from the communicator's; from 2.22 to 2.27 the rings are copied up to NVLS's
// channels after the cut.
TEST(NcclChannels, TheEnvironmentBoundsTheCommunicatorsChannels) {
  const System a100 = preset("a100_8x");
  const auto channels = [&](NcclEnv env, const System& s) { return make_machine(s, 8, env).channels; };
  EXPECT_EQ(channels({}, a100), 24);
  EXPECT_EQ(channels({.max_nchannels = 8}, a100), 8);
  EXPECT_EQ(channels({.min_nchannels = 28}, a100), 28);
  EXPECT_EQ(channels({.min_nchannels = 40}, a100), 32);  // MAXCHANNELS
  EXPECT_EQ(channels({.min_nchannels = 16, .max_nchannels = 8}, a100), 16);  // max, then min
  EXPECT_EQ(channels({.max_ctas = 4}, a100), 4);
  EXPECT_EQ(channels({.min_nchannels = 16, .max_ctas = 4}, a100), 16);  // NCCL_MIN_NCHANNELS copies past maxCTAs
  EXPECT_EQ(channels({.min_ctas = 20, .max_ctas = 12}, a100), 12);      // minCTAs at most maxCTAs
  System a100_2_25 = a100;
  a100_2_25.nccl = NcclRelease::V2_25;
  EXPECT_EQ(channels({.min_nchannels = 40}, a100_2_25), 40);  // MAXCHANNELS 64
  EXPECT_EQ(make_machine(a100, 8, {.max_nchannels = 8}).p2p.total, 8);
  EXPECT_EQ(make_machine(a100, 8, {.max_nchannels = 6}).p2p.total, 8);  // a power of two
  // NCCL_MIN_P2P_NCHANNELS and NCCL_MAX_P2P_NCHANNELS bound the point-to-point channels drawn
  // from the communicator's 24 (32 as a power of two; a peer over 12 NVLinks takes 24, 32 too);
  // NCCL_NCHANNELS_PER_NET_PEER sets a peer's across nodes (2 by default up to 2.19).
  EXPECT_EQ(make_machine(a100, 8).p2p.total, 32);
  EXPECT_EQ(make_machine(a100, 8).p2p.per_peer, 32);
  const P2pChannels four = make_machine(a100, 8, {.max_p2p_nchannels = 4}).p2p;
  EXPECT_EQ(four.total, 4);
  EXPECT_EQ(four.per_peer, 4);
  EXPECT_EQ(make_machine(a100, 8, {.max_nchannels = 12, .min_p2p_nchannels = 48}).p2p.total, 32);  // MAXCHANNELS
  System a100_2 = a100;
  a100_2.nodes = 2;
  EXPECT_EQ(make_machine(a100_2, 16).p2p.per_peer, 2);
  EXPECT_EQ(make_machine(a100_2, 16, {.nchannels_per_net_peer = 4}).p2p.per_peer, 4);
  // 2.29 sizes a network peer's channels by the NIC (NDR: 4 of 14 GB/s) and halves them for
  // rounds of 8 peers; a set NCCL_NCHANNELS_PER_NET_PEER skips the halving.
  System h100_2 = preset("h100_8x");
  h100_2.nodes = 2;
  h100_2.nccl = NcclRelease::V2_29;
  EXPECT_EQ(make_machine(h100_2, 16).p2p.per_peer, 4);
  EXPECT_EQ(make_machine(h100_2, 16, {.nchannels_per_net_peer = 8}).p2p.per_peer, 8);
  // The point-to-point step: NCCL_P2P_NVL_CHUNKSIZE where every pair is NVLink (512 KiB), else
  // NCCL_P2P_PCI_CHUNKSIZE (128 KiB), across nodes NCCL_P2P_NET_CHUNKSIZE (128 KiB; x2 for
  // Blackwell on ARM hosts from 2.29); from 2.19 at most the Simple FIFO's step, 512 KiB.
  const auto step = [](System s, NcclRelease release, int ranks, NcclEnv env) {
    s.nccl = release;
    return make_machine(s, ranks, env).p2p.chunk_bytes;
  };
  EXPECT_EQ(step(a100, NcclRelease::V2_18, 8, {.p2p_nvl_chunksize = 1 << 20}), 1 << 20);
  EXPECT_EQ(step(a100, NcclRelease::V2_19, 8, {.p2p_nvl_chunksize = 1 << 20}), 1 << 19);
  EXPECT_EQ(step(a100, NcclRelease::V2_30, 8, {.p2p_nvl_chunksize = 1 << 18}), 1 << 18);
  EXPECT_EQ(step(a100_2, NcclRelease::V2_30, 16, {.p2p_nvl_chunksize = 1 << 18, .p2p_net_chunksize = 1 << 16}), 1 << 16);
  EXPECT_EQ(step(preset("a100_pcie_pairs"), NcclRelease::V2_30, 8, {.p2p_pci_chunksize = 1 << 16}), 1 << 16);
  EXPECT_EQ(step(preset("a100_pcie_pairs"), NcclRelease::V2_30, 2, {.p2p_pci_chunksize = 1 << 16}), 1 << 19);  // a bridged pair
  System gb200 = preset("b200_8x");
  gb200.gpus_per_node = 4;
  gb200.sockets = 1;
  gb200.nodes = 2;
  gb200.cpu = CpuVendor::Arm;
  EXPECT_EQ(step(gb200, NcclRelease::V2_30, 8, {.p2p_net_chunksize = 1 << 17}), 1 << 18);
  EXPECT_EQ(step(gb200, NcclRelease::V2_30, 8, {.p2p_net_chunksize = 1 << 19}), 1 << 19);  // 1 MiB, cut to the FIFO's

  const System h100 = preset("h100_8x");
  const Machine plain = make_machine(h100, 8);
  ASSERT_TRUE(plain.nvls);
  EXPECT_EQ(plain.nvls_channels, 16);
  EXPECT_EQ(make_machine(h100, 8, {.max_nchannels = 4}).nvls_channels, 16);
  EXPECT_EQ(make_machine(h100, 8, {.max_nchannels = 4}).channels, 4);
  EXPECT_EQ(make_machine(h100, 8, {.max_ctas = 8}).nvls_channels, 8);
  EXPECT_EQ(make_machine(h100, 8, {.min_ctas = 20}).nvls_channels, 20);
  EXPECT_EQ(make_machine(h100, 8, {.nvls_nchannels = 8}).nvls_channels, 8);  // NCCL_NVLS_NCHANNELS
  EXPECT_EQ(make_machine(h100, 8, {.nvls_nchannels = 8}).channels, 24);
  EXPECT_EQ(make_machine(h100, 8, {.max_ctas = 4, .nvls_nchannels = 8}).nvls_channels, 4);
  EXPECT_EQ(make_machine(preset("a100_8x"), 8, {.nvls_nchannels = 8}).nvls_channels, 0);  // no NVLS on an A100
  System h100_2_22 = h100;
  h100_2_22.nccl = NcclRelease::V2_22;
  EXPECT_EQ(make_machine(h100_2_22, 8, {.max_nchannels = 4}).channels, 16);  // copied up to NVLS's after the cut
  EXPECT_EQ(make_machine(h100_2_22, 8, {.max_ctas = 4}).channels, 4);         // NVLS's cut too

  for (const auto& [env, name] : std::vector<std::pair<NcclEnv, std::string>>{
           {{.max_nchannels = 0}, "NCCL_MAX_NCHANNELS: 0 is not a channel count (1 - 64)"},
           {{.min_nchannels = -1}, "NCCL_MIN_NCHANNELS: -1 is not a channel count (0 - 64)"},
           {{.max_ctas = 65}, "NCCL_MAX_CTAS: 65 is not a channel count (1 - 64)"},
           {{.min_ctas = 65}, "NCCL_MIN_CTAS: 65 is not a channel count (0 - 64)"},
           {{.nvls_nchannels = -2}, "NCCL_NVLS_NCHANNELS: -2 is not a channel count (0 - 64)"},
           {{.min_p2p_nchannels = 0}, "NCCL_MIN_P2P_NCHANNELS: 0 is not a channel count (1 - 64)"},
           {{.nchannels_per_net_peer = 65}, "NCCL_NCHANNELS_PER_NET_PEER: 65 is not a channel count (0 - 64)"},
           {{.p2p_nvl_chunksize = 4095}, "NCCL_P2P_NVL_CHUNKSIZE: 4095 bytes is not a step dtsim models (4096 - 67108864)"}}) {
    try {
      (void)make_machine(a100, 8, env);
      ADD_FAILURE() << name;
    } catch (const std::invalid_argument& e) {
      EXPECT_EQ(std::string(e.what()), name);
    }
  }
}

// NCCL's estimates keep the graphs' channels, so its choice does not move; the kernels run
// on the channels left, each at most its graph channel's speed. An A100's ring graph has 12
// channels of 20 GB/s, duplicated to 24 sharing the NVLinks: cut to 12, a large all-reduce
// keeps its bandwidth (each channel now at its graph channel's whole speed); cut to 6, each
// of them carries twice a 12-channel run's data at the same speed, so the bandwidth term
// (the time less the time with unlimited links) doubles. Raised to 32, the channels share
// the same links.
TEST(NcclChannels, EachChannelMovesAtMostItsGraphChannelsSpeed) {
  const System a100 = preset("a100_8x");
  const double bytes = 8.0 * (1 << 30);
  enum class Part { Whole, Bandwidth };  // the whole time, or less the time with unlimited links
  const auto run = [&](NcclEnv env, Part part) {
    const Machine m = make_machine(a100, 8, env);
    const Tuning t = tune(m, Overrides{});
    const Choice c = choose(m, t, Coll::AllReduce, bytes);
    EXPECT_EQ(describe(c), fmt::format("Ring/Simple/{}ch", m.channels));
    const double whole = collective_us(m, t, Coll::AllReduce, bytes, c);
    return part == Part::Whole ? whole : whole - collective_latency_us(m, t, Coll::AllReduce, bytes, c);
  };
  // 12 channels keep the links' bandwidth but hide less of Simple's per-slice waits: each
  // channel waits on twice the slices (6 % slower here); never faster than 24.
  const double base = run({}, Part::Whole), twelve = run({.max_nchannels = 12}, Part::Whole);
  EXPECT_GE(twelve, base);
  EXPECT_LT(twelve / base, 1.1);
  EXPECT_NEAR(run({.max_nchannels = 6}, Part::Bandwidth) / run({.max_nchannels = 12}, Part::Bandwidth), 2.0, 1e-4);
  EXPECT_NEAR(run({.min_nchannels = 32}, Part::Whole) / base, 1.0, 0.05);
  // NCCL's choice at every size is the one it makes without the bounds.
  const Machine plain = make_machine(a100, 8), cut = make_machine(a100, 8, {.max_nchannels = 4});
  const Tuning tp = tune(plain, Overrides{}), tc = tune(cut, Overrides{});
  for (double b = 1024; b <= bytes; b *= 4) {
    const Choice p = choose(plain, tp, Coll::AllReduce, b), c = choose(cut, tc, Coll::AllReduce, b);
    EXPECT_EQ(p.algo, c.algo) << b;
    EXPECT_EQ(p.proto, c.proto) << b;
    EXPECT_LE(c.channels, 4) << b;
  }
}

// A scenario's bounds (/network/nccl_min_nchannels, ...) reach the job's communicator and
// read back from the echo; out-of-range values and the fields under another model are
// refused by path.
TEST(NcclChannels, ScenarioFields) {
  const NetworkConfig config = nccl_network({{"model", "nccl"}, {"system", "a100_8x"}, {"nccl_max_nchannels", 4}, {"nccl_min_ctas", 2}});
  ASSERT_TRUE(config.nccl);
  EXPECT_EQ(config.nccl->env, (NcclEnv{.max_nchannels = 4, .min_ctas = 2}));
  EXPECT_EQ(Clock(config.nccl, 8).machine().channels, 4);
  const json echo = network_section_json(config);
  EXPECT_EQ(echo["nccl_max_nchannels"], 4);
  EXPECT_FALSE(echo.contains("nccl_min_nchannels"));  // NCCL's own: left out
  EXPECT_EQ(network_section_json(nccl_network(echo)), echo);
  EXPECT_EQ(network_section_json(nccl_network({{"model", "nccl"}, {"system", "a100_8x"}})).contains("nccl_max_ctas"), false);
  EXPECT_EQ(refused({{"model", "nccl"}, {"system", "a100_8x"}, {"nccl_max_nchannels", 0}}),
            "/network/nccl_max_nchannels: expected an integer >= 1 and <= 64, got 0");
  EXPECT_EQ(refused({{"model", "nccl"}, {"system", "a100_8x"}, {"nccl_min_ctas", 65}}),
            "/network/nccl_min_ctas: expected an integer >= 0 and <= 64, got 65");
  const NetworkConfig nvls = nccl_network({{"model", "nccl"}, {"system", "h100_8x"}, {"nccl_nvls_nchannels", 8}});
  EXPECT_EQ(Clock(nvls.nccl, 8).machine().nvls_channels, 8);
  EXPECT_EQ(network_section_json(nvls)["nccl_nvls_nchannels"], 8);
  const NetworkConfig p2p = nccl_network({{"model", "nccl"}, {"system", "a100_8x"}, {"nccl_max_p2p_nchannels", 4},
                                          {"nccl_nchannels_per_net_peer", 1}, {"nccl_min_p2p_nchannels", 2}});
  EXPECT_EQ(p2p.nccl->env, (NcclEnv{.min_p2p_nchannels = 2, .max_p2p_nchannels = 4, .nchannels_per_net_peer = 1}));
  EXPECT_EQ(network_section_json(nccl_network(network_section_json(p2p))), network_section_json(p2p));
  EXPECT_EQ(refused({{"model", "nccl"}, {"system", "a100_8x"}, {"nccl_min_p2p_nchannels", 0}}),
            "/network/nccl_min_p2p_nchannels: expected an integer >= 1 and <= 64, got 0");
  const NetworkConfig steps = nccl_network({{"model", "nccl"}, {"system", "a100_8x"}, {"nccl_p2p_nvl_chunksize", 262144}});
  EXPECT_EQ(Clock(steps.nccl, 8).machine().p2p.chunk_bytes, 262144);
  EXPECT_EQ(network_section_json(steps)["nccl_p2p_nvl_chunksize"], 262144);
  EXPECT_EQ(refused({{"model", "nccl"}, {"system", "a100_8x"}, {"nccl_p2p_net_chunksize", 1024}}),
            "/network/nccl_p2p_net_chunksize: expected an integer >= 4096 and <= 67108864, got 1024");
  EXPECT_EQ(refused({{"model", "flow"}, {"latency_us", 1}, {"bandwidth_GBps", 1}, {"nccl_max_ctas", 8}}),
            "/network/nccl_max_ctas: only the nccl model reads nccl_max_ctas (this network's model is flow)");
}

// NCCL_P2P_NVL_CHUNKSIZE sets how 2.18 splits a message: parts of at most 32 steps, so with
// 128 KiB steps a 64 MiB send takes 16 channels of 4 MiB where 512 KiB steps take 4 of 16
// MiB, and runs faster on an A100's links.
TEST(NcclChannels, PointToPointStepsSetTheParts) {
  const System a100 = preset("a100_8x");
  const double bytes = 64.0 * (1 << 20);
  const Machine plain = make_machine(a100, 8), small = make_machine(a100, 8, {.p2p_nvl_chunksize = 1 << 17});
  EXPECT_EQ(p2p_split(plain, bytes).channels, 4);
  EXPECT_EQ(p2p_split(plain, bytes).part_bytes, 16.0 * (1 << 20));
  EXPECT_EQ(p2p_split(small, bytes).channels, 16);
  EXPECT_EQ(p2p_split(small, bytes).part_bytes, 4.0 * (1 << 20));
  EXPECT_LT(p2p_us(small, 0, 1, bytes), p2p_us(plain, 0, 1, bytes));
}

}  // namespace
}  // namespace dtsim::net::nccl
