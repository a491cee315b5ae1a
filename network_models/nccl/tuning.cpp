#include "network_models/nccl/tuning.hpp"

#include <algorithm>
#include <cctype>
#include <limits>
#include <span>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>

namespace dtsim::net::nccl {

const char* to_string(Coll c) {
  switch (c) {
    case Coll::Broadcast: return "broadcast";
    case Coll::Reduce: return "reduce";
    case Coll::AllGather: return "all_gather";
    case Coll::ReduceScatter: return "reduce_scatter";
    case Coll::AllReduce: return "all_reduce";
  }
  return "?";
}

const char* to_string(Algo a) {
  static const char* const names[kAlgos] = {"Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree", "PAT"};
  return names[index(a)];
}

const char* to_string(Proto p) {
  static const char* const names[kProtos] = {"LL", "LL128", "Simple"};
  return names[index(p)];
}

namespace {

// --- NCCL's constants (src/graph/tuning.cc, search.cc, topo.h): 2.18.5's, and 2.19's, 2.20's and 2.21's where they differ

// baseLat[algo][proto] and hwLat[hw][algo][proto], us, of each release.
struct Latencies {
  double base[kAlgos][kProtos];
  double hw[3][kAlgos][kProtos];  // NVLink, PCI, NET
};
constexpr Latencies kLatencies_2_18 = {
    {{6.8, 14.0, 0.0}, {6.6, 14.0, 8.4},  // Tree, Ring
     {6.8, 14.0, 0.0}, {6.8, 14.0, 0.0},  // CollNetDirect, CollNetChain
     {0.0, 0.0, 23.0}, {0.0, 0.0, 23.0}},  // NVLS, NVLSTree
    {{{.6, 1.25, 4}, {.6, 1.9, 3.4}, {0, 0, 8.0}, {0, 0, 4.75}, {0, 0, 0}, {0, 0, 0}},        // NVLink
     {{1.0, 1.9, 6}, {1.0, 2.5, 5.7}, {0, 0, 8.0}, {0, 0, 8.0}, {0, 0, 0}, {0, 0, 0}},        // PCI
     {{5.0, 8.5, 14}, {2.7, 4.0, 14.0}, {0, 0, 10.7}, {0, 0, 14}, {0, 0, 18}, {0, 0, 19}}}};  // NET
// 2.19 and 2.20: NVLS's latency moves from base to the NVLink hop (the same 23 us on one
// node), Tree Simple pays 28 us a hop (steering the choice away from it), CollNet's hops are
// re-measured.
constexpr Latencies kLatencies_2_19 = {
    {{6.8, 14.0, 0.0}, {6.6, 14.0, 8.4}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}},
    {{{.6, 1.25, 28}, {.6, 1.9, 3.4}, {0, 0, 3.7}, {0, 0, 2.8}, {0, 0, 23}, {0, 0, 23}},
     {{1.0, 1.9, 28}, {1.0, 2.5, 5.7}, {0, 0, 3.7}, {0, 0, 2.8}, {0, 0, 0}, {0, 0, 0}},
     {{5.0, 8.5, 28}, {2.7, 4.0, 14.0}, {0, 0, 31}, {0, 0, 30}, {0, 0, 18}, {0, 0, 14}}}};
// 2.21: 2.19's, but NVLS's and the NVLS tree's NVLink hop 25 us.
constexpr Latencies nvls_nvlink_hop(Latencies l, double us) {
  constexpr int nvlink = static_cast<int>(Hw::NvLink), simple = static_cast<int>(Proto::Simple);
  l.hw[nvlink][static_cast<int>(Algo::Nvls)][simple] = l.hw[nvlink][static_cast<int>(Algo::NvlsTree)][simple] = us;
  return l;
}
constexpr Latencies kLatencies_2_21 = nvls_nvlink_hop(kLatencies_2_19, 25.0);
// 2.23: 2.21's, but Tree Simple 8.4 us once and 4 us a hop within a node, 14 across (28 each
// before). PAT's latency is a formula of its own (nccl_latency_us).
constexpr Latencies tree_simple(Latencies l, double base, double nvlink, double pci, double net) {
  constexpr int tree = static_cast<int>(Algo::Tree), simple = static_cast<int>(Proto::Simple);
  l.base[tree][simple] = base;
  l.hw[static_cast<int>(Hw::NvLink)][tree][simple] = nvlink;
  l.hw[static_cast<int>(Hw::Pci)][tree][simple] = pci;
  l.hw[static_cast<int>(Hw::Net)][tree][simple] = net;
  return l;
}
constexpr Latencies kLatencies_2_23 = tree_simple(kLatencies_2_21, 8.4, 4.0, 4.0, 14.0);
// 2.28.9: 2.23's, but the NVLS tree's network hop 20.9 us (14 before).
constexpr Latencies nvls_tree_net_hop(Latencies l, double us) {
  l.hw[static_cast<int>(Hw::Net)][static_cast<int>(Algo::NvlsTree)][static_cast<int>(Proto::Simple)] = us;
  return l;
}
constexpr Latencies kLatencies_2_28 = nvls_tree_net_hop(kLatencies_2_23, 20.9);
const Latencies& latencies(NcclRelease r) {
  return r == NcclRelease::V2_18  ? kLatencies_2_18
         : r < NcclRelease::V2_21 ? kLatencies_2_19
         : r < NcclRelease::V2_23 ? kLatencies_2_21
         : r < NcclRelease::V2_28_9 ? kLatencies_2_23
                                    : kLatencies_2_28;
}
double tuning_base_us(NcclRelease r, Algo a, Proto p) { return latencies(r).base[index(a)][index(p)]; }
double tuning_hop_us(NcclRelease r, Hw hw, Algo a, Proto p) {
  return latencies(r).hw[static_cast<int>(hw)][index(a)][index(p)];
}
// [compCap index (one node) or CPU (Intel, AMD: several)][nodes index: 1, 2, more]; 2.21
// re-measures Hopper's; Blackwell's (2.25) are twice Hopper's.
constexpr double kLlMaxBw_2_18[4][3] = {{39.0, 39.0, 20.4}, {87.7, 22.5, 19.0}, {87.7, 22.5, 19.0}, {}};
constexpr double kLlMaxBw_2_21[4][3] = {
    {39.0, 39.0, 20.4}, {87.7, 22.5, 19.0}, {141.0, 45.0, 35.0}, {2 * 141.0, 2 * 45.0, 2 * 35.0}};
// Per-channel caps, GB/s, [compCap index][nodes index]: Blackwell's (2.25) twice Hopper's
// until 2.28 gives it its own; the NVLS tree's are 2.28's (none before).
struct ChannelCaps {
  double ring_ll128[4][3], tree_ll128[4][3], tree[4][3], nvls_tree[4][3];
};
constexpr ChannelCaps kChannelCaps_2_18 = {
    {{20.0, 20.0, 20.0}, {20.0, 20.0, 20.0}, {36.7, 36.7, 36.7}, {2 * 36.7, 2 * 36.7, 2 * 36.7}},
    {{20.0, 20.0, 20.0}, {20.0, 20.0, 20.0}, {36.7, 36.7, 29.0}, {2 * 36.7, 2 * 36.7, 2 * 29.0}},
    {{26.5, 18.5, 10.0}, {24.0, 23.6, 17.8}, {38.7, 41.4, 36.0}, {2 * 38.7, 2 * 41.4, 2 * 36.0}},
    {}};
constexpr ChannelCaps kChannelCaps_2_28_9 = {
    {{20.0, 20.0, 20.0}, {20.0, 20.0, 20.0}, {36.7, 36.7, 36.7}, {2 * 36.7, 34.6, 2 * 36.7}},
    {{20.0, 20.0, 20.0}, {20.0, 20.0, 20.0}, {36.7, 36.7, 29.0}, {55.6, 31.67, 20.0}},
    {{26.5, 18.5, 10.0}, {24.0, 23.6, 17.8}, {38.7, 41.4, 36.0}, {70.0, 42.8, 24.0}},
    {{26.5, 18.5, 10.0}, {24.0, 23.6, 17.8}, {0.0, 57.7, 45.5}, {0.0, 96.0, 43.8}}};
// Blackwell's ring LL128: 2.28.3 twice Hopper's on 2 nodes too (34.6 from 2.28.7); 2.29 34.5
// GB/s a channel (34.6 on 2 nodes); 2.29.7 40.
constexpr ChannelCaps blackwell_ring_ll128(ChannelCaps c, double n1, double n2, double n4) {
  c.ring_ll128[3][0] = n1;
  c.ring_ll128[3][1] = n2;
  c.ring_ll128[3][2] = n4;
  return c;
}
// Blackwell's NVLS tree beyond 2 nodes: 43.1 GB/s a channel up to 2.28.7 (43.8 from 2.28.9),
// 80 from 2.30.
constexpr ChannelCaps blackwell_nvls_tree_n4(ChannelCaps c, double cap) {
  c.nvls_tree[3][2] = cap;
  return c;
}
constexpr ChannelCaps kChannelCaps_2_28_7 = blackwell_nvls_tree_n4(kChannelCaps_2_28_9, 43.1);
constexpr ChannelCaps kChannelCaps_2_28 = blackwell_ring_ll128(kChannelCaps_2_28_7, 2 * 36.7, 2 * 36.7, 2 * 36.7);
constexpr ChannelCaps kChannelCaps_2_29 = blackwell_ring_ll128(kChannelCaps_2_28_9, 34.5, 34.6, 34.5);
constexpr ChannelCaps kChannelCaps_2_29_7 = blackwell_ring_ll128(kChannelCaps_2_28_9, 40.0, 40.0, 40.0);
constexpr ChannelCaps kChannelCaps_2_30 = blackwell_nvls_tree_n4(kChannelCaps_2_29_7, 80.0);
const ChannelCaps& channel_caps(NcclRelease r) {
  return r < NcclRelease::V2_28     ? kChannelCaps_2_18
         : r < NcclRelease::V2_28_7 ? kChannelCaps_2_28
         : r < NcclRelease::V2_28_9 ? kChannelCaps_2_28_7
         : r < NcclRelease::V2_29   ? kChannelCaps_2_28_9
         : r < NcclRelease::V2_29_7 ? kChannelCaps_2_29
         : r < NcclRelease::V2_30   ? kChannelCaps_2_29_7
                                    : kChannelCaps_2_30;
}
// 2.28's NVLS efficiency per compCap index (nvlsEfficiency; NVLS runs on Hopper and later).
constexpr double kNvlsEfficiency[4] = {0.0, 0.0, 0.85, 0.74};
// Trees' correction below 256 MB, by log2(bytes / 64) (tuning.cc treeCorrectionFactor); from
// 2.29 the NVLS tree's on Blackwell too, up to 512 MB (the 24th entry).
constexpr double kTreeCorrection[kProtos][24] = {
    {1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0, 1.0},
    {1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0, 1.0},
    {.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9, .9}};

constexpr double kSpeedIntra[] = {40.0, 30.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0};
constexpr double kSpeedInter[] = {48.0, 30.0, 28.0, 24.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0,
                                  7.0,  6.0,  5.0,  4.0,  3.0,  2.4,  1.2,  0.24, 0.12};
// Hopper's: 2.19 adds 50 within a node and 22 across nodes, 2.21 11 within.
constexpr double kSm90SpeedIntra_2_18[] = {60.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 6.0, 3.0};
constexpr double kSm90SpeedIntra_2_19[] = {60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 6.0, 3.0};
constexpr double kSm90SpeedIntra_2_21[] = {60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 11.0, 6.0, 3.0};
constexpr double kSm90SpeedInter_2_18[] = {48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 20.0, 17.5,
                                           15.0, 12.0, 6.0,  3.0,  2.4,  1.2,  0.24, 0.12};
constexpr double kSm90SpeedInter_2_19[] = {48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5,
                                           15.0, 12.0, 6.0,  3.0,  2.4,  1.2,  0.24, 0.12};
// Blackwell's (2.25; 2.27 adds 18 within a node and starts across nodes at 47.9, 2.27.5 at 48
// and 45.1, 2.27.6 at 96; 2.29 adds 45 within a node, 2.29.7 80 across, 2.30 86).
constexpr double kSm100SpeedIntra_2_25[] = {90.0, 80.0, 70.0, 60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 19.0};
constexpr double kSm100SpeedIntra_2_27[] = {90.0, 80.0, 70.0, 60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 19.0, 18.0};
constexpr double kSm100SpeedIntra_2_29[] = {90.0, 80.0, 70.0, 60.0, 50.0, 45.0, 40.0, 30.0, 24.0, 20.0, 19.0, 18.0};
constexpr double kSm100SpeedInter_2_25[] = {48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5,
                                            15.0, 12.0, 6.0,  3.0,  2.4,  1.2,  0.24, 0.12};
constexpr double kSm100SpeedInter_2_27[] = {47.9, 45.0, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5,
                                            15.0, 12.0, 6.0,  3.0,  2.4,  1.2,  0.24, 0.12};
constexpr double kSm100SpeedInter_2_27_5[] = {48.0, 45.1, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5,
                                              15.0, 12.0, 6.0,  3.0,  2.4,  1.2,  0.24, 0.12};
constexpr double kSm100SpeedInter_2_27_6[] = {96.0, 48.0, 45.1, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0,
                                              17.5, 15.0, 12.0, 6.0,  3.0,  2.4,  1.2,  0.24, 0.12};
constexpr double kSm100SpeedInter_2_29_7[] = {96.0, 80.0, 48.0, 45.1, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0,
                                              17.5, 15.0, 12.0, 6.0,  3.0,  2.4,  1.2,  0.24, 0.12};
constexpr double kSm100SpeedInter_2_30[] = {96.0, 86.0, 80.0, 48.0, 45.1, 42.0, 40.0, 30.0, 24.0, 22.0,
                                            20.0, 17.5, 15.0, 12.0, 6.0,  3.0,  2.4,  1.2,  0.24, 0.12};
std::span<const double> speeds_intra(int cc, NcclRelease r) {
  if (cc < 90) return kSpeedIntra;
  if (cc >= 100)
    return r < NcclRelease::V2_27   ? std::span<const double>(kSm100SpeedIntra_2_25)
           : r < NcclRelease::V2_29 ? std::span<const double>(kSm100SpeedIntra_2_27)
                                    : std::span<const double>(kSm100SpeedIntra_2_29);
  return r == NcclRelease::V2_18 ? std::span<const double>(kSm90SpeedIntra_2_18)
         : r < NcclRelease::V2_21 ? std::span<const double>(kSm90SpeedIntra_2_19)
                                  : std::span<const double>(kSm90SpeedIntra_2_21);
}
std::span<const double> speeds_inter(int cc, NcclRelease r) {
  if (cc < 90) return kSpeedInter;
  if (cc >= 100)
    return r < NcclRelease::V2_27     ? std::span<const double>(kSm100SpeedInter_2_25)
           : r < NcclRelease::V2_27_5 ? std::span<const double>(kSm100SpeedInter_2_27)
           : r < NcclRelease::V2_27_6 ? std::span<const double>(kSm100SpeedInter_2_27_5)
           : r < NcclRelease::V2_29_7 ? std::span<const double>(kSm100SpeedInter_2_27_6)
           : r < NcclRelease::V2_30   ? std::span<const double>(kSm100SpeedInter_2_29_7)
                                      : std::span<const double>(kSm100SpeedInter_2_30);
  return r == NcclRelease::V2_18 ? std::span<const double>(kSm90SpeedInter_2_18) : std::span<const double>(kSm90SpeedInter_2_19);
}

// SMxx_NVLINK_BW, GB/s per link of the generation's line rate: 20 per 25 GB/s (Hopper: 20.6
// from 2.20 on), Blackwell's NVLink5 40 per 50 GB/s (40.1 from 2.27.5).
double nvlink_bw(int cc, NcclRelease r) {
  if (cc >= 100) return r >= NcclRelease::V2_27_5 ? 40.1 : 40.0;
  return cc >= 90 && r >= NcclRelease::V2_20 ? 20.6 : 20.0;
}
// What a link carries: kKernelPaceRelease's figure.
double nvlink_rate(int cc) { return nvlink_bw(cc, kKernelPaceRelease); }
double nvlink_line_rate(int cc) { return cc >= 100 ? 50.0 : 25.0; }
constexpr double kPciBwGen3x16 = 12.0;  // PCI_BW: below this the ring uses 256 threads
constexpr double kLocBw = 5000.0;  // LOC_BW: a link NCCL does not limit
constexpr int kSimpleFifoStepBytes = (1 << 22) / 8;  // DEFAULT_BUFFSIZE / NCCL_STEPS
// ncclTopoGetInterCpuBw: SKL_QPI_BW, AMD_BW (from 2.19), ARM_BW.
double inter_cpu_bw(CpuVendor cpu, NcclRelease r) {
  switch (cpu) {
    case CpuVendor::Intel: return 10.0;
    case CpuVendor::Amd: return r >= NcclRelease::V2_19 ? 16.0 : kLocBw;
    case CpuVendor::Arm: return 6.0;
  }
  return kLocBw;
}
// MAXCHANNELS: 32, 64 from 2.25.
int max_channels(NcclRelease r) { return r >= NcclRelease::V2_25 ? 64 : 32; }
// NCCL's NVLS setup (ncclNvlsInit; 2.30's ncclNvlsTuning): NCCL_NVLS_NCHANNELS's default, 16
// (Blackwell's 32; from 2.27 24 within one node); NCCL_NVLS_CHUNKSIZE's, 128 KiB; the NVLS
// tree's chunk a FIFO step (512 KiB), NVLS's from 2.21, and from 2.19 at most 64 KiB on 4
// nodes or more. 2.30 sets Blackwell's across nodes by the NICs' speed (GB/s) and the GPUs a
// node, for a NIC on its GPU's PCIe switch (PXB, as on the NVSwitch systems modelled).
struct NvlsSetup {
  int channels, chunk, tree_chunk;
};
NvlsSetup nvls_setup(const Machine& m, int cc) {
  const NcclRelease r = m.system.nccl;
  const int N = m.nodes, ppn = m.per_node;
  NvlsSetup s{cc < 100 ? 16 : r >= NcclRelease::V2_27 && N == 1 ? 24 : 32, 128 << 10, 0};
  int tree_max = 0;  // 0: the release's rule
  if (cc >= 100 && N > 1 && r >= NcclRelease::V2_30) {
    const double nic = m.net_bw;  // comm->minNetBw: the NIC's line rate
    if (N == 2 && nic >= 48) {
      s.channels = 32;
      tree_max = 128 << 10;
      if (ppn <= 4) s.chunk = tree_max = 256 << 10;
      else if (ppn >= 16 || (ppn <= 8 && nic < 96)) tree_max = 64 << 10;
    } else if (nic >= 96) {
      if (ppn <= 8) s.channels = 24, s.chunk = tree_max = 256 << 10;
      else s.channels = 32, tree_max = ppn < 32 ? 128 << 10 : 64 << 10;
    } else if (nic >= 48) {
      s.channels = 24;
      tree_max = 64 << 10;  // 128 KiB unless the NIC is PXB-close
    }
  }
  const int tree_start = r >= NcclRelease::V2_21 ? s.chunk : 512 << 10;
  if (tree_max == 0) tree_max = r >= NcclRelease::V2_19 && N >= 4 ? 64 << 10 : tree_start;
  s.tree_chunk = std::min(tree_start, tree_max);
  return s;
}
constexpr int kMaxNvlsArity = 32;  // NCCL_MAX_NVLS_ARITY (from 2.21)
// Threads per protocol (NCCL_LL_MAX_NTHREADS, NCCL_LL128_MAX_NTHREADS, NCCL_SIMPLE_MAX_NTHREADS, NCCL_MAX_NTHREADS).
constexpr int kLLThreads = 512, kLL128Threads = 640, kSimpleThreads = 512, kMaxThreads = 640, kWarp = 32;

int cc_index(GpuArch g) { return g == GpuArch::Blackwell ? 3 : g == GpuArch::Hopper ? 2 : g == GpuArch::Ampere ? 1 : 0; }

int log2i(long long n) {
  int l = 0;
  while (n >>= 1) ++l;
  return l;
}

// ncclTopoCompute's speed search, restated: the speeds from the first that fits
// (<= maxBw, minChannels of it <= totalBw); at each, the channels that fit; the best
// channels x speed (the first of equals) until it reaches totalBw or the next speed is
// under 0.49 of the best's.
struct Found {
  int channels = 0;
  double speed = 0.0;
  std::size_t index = 0;  // the speed's in the list
};
template <class Fits>
Found search(std::span<const double> speeds, double max_bw, double total_bw, int min_channels, int max_channels, Fits fits) {
  std::size_t i = 0;
  while (i + 1 < speeds.size() && (speeds[i] > max_bw || speeds[i] * min_channels > total_bw)) ++i;
  Found best;
  for (; i < speeds.size(); ++i) {
    const int ch = std::min(max_channels, fits(speeds[i]));
    if (ch >= min_channels && ch * speeds[i] > best.channels * best.speed) best = {ch, speeds[i], i};
    if (best.channels > 0 && best.channels * best.speed >= total_bw) break;
    if (i + 1 < speeds.size() && best.channels > 0 && !(speeds[i + 1] / best.speed > 0.49)) break;
  }
  if (best.channels == 0) best = {1, 0.1};  // "Could not find a path ...": simple order, 0.1 GB/s
  return best;
}

int floor_div(double bw, double speed) { return static_cast<int>(bw / speed + 1e-9); }

// The channel split at the end of ncclTopoCompute: a channel of >= 25 GB/s becomes two.
void duplicate(Graph& g, int cc, int max_channels) {
  if (g.bw_intra < 25.0) return;
  if (cc > 80 && g.bw_intra < 50.0 && g.channels > 4) return;
  const int dup = std::min(g.channels * 2, max_channels);
  const int div = (dup + g.channels - 1) / g.channels;
  g.bw_intra /= div;
  g.bw_inter /= div;
  g.channels = dup;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// parseList: every name in `names` on (a list) or off (^list); the rest the other way. From
// 2.24 a list may name the collectives it is for ("allreduce:tree"), and every list after
// the first must.
template <std::size_t N>
void parse_list(const char* var, const std::string& text, const char* const (&names)[N],
                std::array<std::array<int, N>, kColls>& out, bool& per_collective) {
  static const char* const colls[kColls] = {"Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce"};
  auto join = [](const auto& list) {
    std::string s;
    for (std::size_t j = 0; j < std::size(list); ++j) s += (j ? ", " : "") + std::string(list[j]);
    return s;
  };
  if (text.empty()) return;
  std::size_t entry_start = 0;
  for (bool first = true; entry_start <= text.size(); first = false) {
    const std::size_t semicolon = text.find(';', entry_start);
    const std::string entry = text.substr(entry_start, semicolon == std::string::npos ? std::string::npos : semicolon - entry_start);
    entry_start = semicolon == std::string::npos ? text.size() + 1 : semicolon + 1;
    if (entry.empty()) continue;  // NCCL's strtok skips empty entries ("ring;")
    const std::size_t colon = entry.find(':');
    std::string body = colon == std::string::npos ? entry : entry.substr(colon + 1);
    int coll = -1;  // -1: every collective
    if (colon != std::string::npos) {
      const std::string prefix = entry.substr(0, colon);
      while (++coll < kColls && lower(prefix) != lower(colls[coll])) {
      }
      if (coll == kColls)
        throw std::invalid_argument(fmt::format("{}: unknown collective \"{}\" in \"{}\" (expected {})", var, prefix, text,
                                                join(colls)));
      per_collective = true;
      if (body.empty())
        throw std::invalid_argument(fmt::format("{}: \"{}\": no list after \"{}:\"", var, text, prefix));
    } else if (!first) {
      throw std::invalid_argument(
          fmt::format("{}: \"{}\": every list but the first names its collective (\"allreduce:...\")", var, text));
    }
    int set = 1, def = 0;
    if (!body.empty() && body[0] == '^') {
      set = 0;
      def = 1;
      body = body.substr(1);
    }
    std::array<int, N> list;
    list.fill(def);
    std::size_t start = 0;
    while (start <= body.size()) {
      const std::size_t comma = body.find(',', start);
      const std::string token = body.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      if (!token.empty()) {
        std::size_t k = 0;
        while (k < N && lower(token) != lower(names[k])) ++k;
        if (k == N)
          throw std::invalid_argument(fmt::format("{}: unknown name \"{}\" in \"{}\" (expected a comma-separated list of {}, "
                                                  "or ^ and the ones to leave out)", var, token, text, join(names)));
        list[k] = set;
      }
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    for (int c = 0; c < kColls; ++c)
      if (coll < 0 || c == coll) out[c] = list;
  }
}

}  // namespace

Overrides::Overrides() {
  for (auto& a : algo_enabled) a.fill(true);
  for (auto& p : proto_enabled) p = {1, 2, 1};
}

Overrides parse_overrides(const std::string& algo, const std::string& proto) {
  static const char* const algos[kAlgos] = {"Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree", "PAT"};
  static const char* const protos[kProtos] = {"LL", "LL128", "Simple"};
  Overrides o;
  o.algo = algo;
  o.proto = proto;
  std::array<std::array<int, kAlgos>, kColls> a;
  for (auto& per : a) per.fill(1);
  parse_list("NCCL_ALGO", algo, algos, a, o.per_collective);
  for (int c = 0; c < kColls; ++c)
    for (int i = 0; i < kAlgos; ++i) o.algo_enabled[c][i] = a[c][i] != 0;
  parse_list("NCCL_PROTO", proto, protos, o.proto_enabled, o.per_collective);
  auto none = [](const auto& list) { return std::none_of(list.begin(), list.end(), [](auto b) { return b != 0; }); };
  if (std::all_of(o.algo_enabled.begin(), o.algo_enabled.end(), none))
    throw std::invalid_argument(fmt::format("NCCL_ALGO: \"{}\" leaves no algorithm", algo));
  if (std::all_of(o.proto_enabled.begin(), o.proto_enabled.end(), none))
    throw std::invalid_argument(fmt::format("NCCL_PROTO: \"{}\" leaves no protocol", proto));
  return o;
}

namespace {

void check_ranks(const System& s, int ranks) {
  const int G = s.gpus_per_node;
  if (ranks < 1) throw std::invalid_argument(fmt::format("{} ranks: expected at least 1", ranks));
  if (ranks > G && ranks % G != 0)
    throw std::invalid_argument(fmt::format("{} ranks do not fill whole nodes of {} GPUs (a job is one node's first GPUs, "
                                            "or whole nodes)", ranks, G));
  if (ranks > s.gpus())
    throw std::invalid_argument(fmt::format("{} ranks: the system \"{}\" has {} GPUs ({} node{} of {}; its \"nodes\" "
                                            "adds more)", ranks, s.name, s.gpus(), s.nodes, s.nodes == 1 ? "" : "s", G));
}

// The ring's graph: the node's slowest hop per GPU, and NCCL's search from there (within
// the node, or through the NICs), its channels duplicated.
Graph ring_graph(const Machine& m, int cc) {
  const System& s = m.system;
  const int g = m.per_node;
  const double nvl_total = s.intra.nvlink_links * m.nvlink_bw;
  double ring_bw = nvl_total, max_bw = nvl_total;
  Hw intra = Hw::NvLink;
  if (s.intra.kind == IntraKind::Pcie) {
    const bool one_pair = g == 2 && s.bridged(0, 1);
    if (g > 1 && !one_pair) {
      intra = Hw::Pci;
      ring_bw = m.pci_bw;
      if (s.sockets == 2 && g > s.gpus_per_node / 2) ring_bw = std::min(ring_bw, m.inter_cpu_bw);
    }
    max_bw = s.intra.nvlink_pairs.empty() ? ring_bw : std::max(ring_bw, nvl_total);
  }
  // getTotalBw: a GPU's NVLinks together, or its PCIe link.
  const bool has_nvlink = s.intra.kind == IntraKind::NvSwitch || !s.intra.nvlink_pairs.empty();
  const double total_bw = std::max(m.pci_bw, has_nvlink ? nvl_total : 0.0);

  // 2.26: where the node's GPUs form exactly two NVLink domains (two bridged pairs), a ring
  // needs at least 2 channels (ncclTopoSplitNvLink).
  int domains = 0;
  for (const auto& pair : s.intra.nvlink_pairs) domains += pair[0] < g && pair[1] < g ? 1 : 0;
  const int min_channels = s.intra.kind == IntraKind::Pcie && domains == 2 && s.nccl >= NcclRelease::V2_26 ? 2 : 1;

  Graph ring;
  ring.intra = intra;
  Found f;
  if (m.nodes == 1) {
    f = search(speeds_intra(cc, s.nccl), g == 1 ? kLocBw : max_bw, total_bw, min_channels, max_channels(s.nccl) / 2,
               [&](double sp) { return floor_div(ring_bw, sp); });
  } else {
    const double nic = std::min(m.net_bw, m.pci_bw);
    f = search(speeds_inter(cc, s.nccl), nic, total_bw, min_channels, max_channels(s.nccl) / 2, [&](double sp) {
      return std::min(s.network.nics_per_node * floor_div(nic, sp), g == 1 ? max_channels(s.nccl) : floor_div(ring_bw, sp));
    });
  }
  ring.channels = f.channels;
  ring.bw_intra = ring.bw_inter = f.speed;
  ring.node_bw = intra == Hw::NvLink ? s.intra.nvlink_links * m.nvlink_rate : ring_bw;
  duplicate(ring, cc, max_channels(s.nccl) / 2);
  return ring;
}

// NVLS's graph: one channel per GPU of the node (NCCL forces minChannels = maxChannels = the
// GPUs) at the first speed of NCCL's table at which they all fit, the NIC's speed across
// nodes. The search starts below the node's bandwidth over (g - 1) / g (patterns other than
// the ring); a channel then takes its speed on every GPU's NVLinks to and from the switch,
// twice on its head's (ncclTopoSearchTryNvls), so k channels need k + 1 speeds of a GPU's
// NVLinks: 8 GPUs of an H100 (18 x 20 = 360 GB/s) fit 8 channels of 40 GB/s exactly, 6 or 7
// GPUs no more than 5 of 60 and so also run at 40, 5 GPUs fit at 60.
// From 2.19 the search's second pass then raises NVLS's inter-node speed a step at a time
// while it is under twice the channels' speed; on one node no link carries it, so every
// step succeeds: 8 H100s end at 40 / 60 GB/s (only 2.28's estimate reads it there).
Graph nvls_graph(const Machine& m) {
  const int g = m.per_node;
  const double nvl_total = m.system.intra.nvlink_links * m.nvlink_bw;
  const double nvls_total = nvl_total * g / (g - 1.0);  // patterns other than the ring
  const int cc = compute_capability(m.system.gpu);  // Hopper or later
  // From 2.25 at most NCCL_MAX_NVLS_ARITY (32) heads, whatever the GPUs.
  const int heads = m.system.nccl >= NcclRelease::V2_25 ? std::min(g, kMaxNvlsArity) : g;
  const Found fn = search(speeds_intra(cc, m.system.nccl), nvl_total, nvls_total, heads, heads, [&](double sp) {
    return sp * heads <= nvls_total ? std::min(heads, floor_div(nvl_total, sp) - 1) : 0;
  });
  Graph nv;
  nv.channels = fn.channels;
  nv.bw_intra = nv.bw_inter = fn.speed;
  if (m.nodes == 1 && m.system.nccl >= NcclRelease::V2_19) {
    const auto speeds = speeds_intra(cc, m.system.nccl);
    for (std::size_t i = fn.index; i > 0 && nv.bw_inter < 2 * nv.bw_intra;) nv.bw_inter = speeds[--i];
  }
  if (m.nodes > 1) {
    const double nic = std::min(m.net_bw, m.pci_bw);
    const auto speeds = speeds_inter(cc, m.system.nccl);
    std::size_t i = 0;
    while (i + 1 < speeds.size() && speeds[i] > nic) ++i;
    nv.bw_inter = speeds[i];
  }
  return nv;
}

// ncclTopoPostset: the rings twice over; CollNet x1.5 when the node is faster than the
// network; Hopper across nodes x2 once more above 45 GB/s per channel (up to 32 channels;
// 2.20 on, only from under 16).
int collective_channels(const Machine& m, int cc) {
  const Graph& ring = m.graphs[index(Algo::Ring)];
  const Graph& tree = m.graphs[index(Algo::Tree)];
  const int most = max_channels(m.system.nccl);
  int nc = std::min(most, std::min(tree.channels, ring.channels) * 2);
  if (m.collnet && ring.bw_intra > ring.bw_inter && m.ranks > m.nodes) nc = std::min(most, nc + nc / 2);
  const bool room = m.system.nccl >= NcclRelease::V2_20 ? nc < 16 : 2 * nc <= most;
  if (cc >= 90 && m.nodes > 1 && ring.bw_intra > 45.0 && room) nc *= 2;  // Hopper (2.25: and later)
  return nc;
}

}  // namespace

namespace {

int pow2_up(int n) {  // NCCL's pow2Up (nextPow2)
  int p = 1;
  while (p < n) p *= 2;
  return p;
}

// The channels NCCL gives a peer across nodes (ncclTopoGetNchannels' network branch): 2 up
// to 2.19 (NCCL_NCHANNELS_PER_NET_PEER); 2.20 - 2.28 two, halved while two a peer over the
// ranks would put more than four operations on a channel, but at least one per NIC the GPU
// needs to match its PCIe link; from 2.29 one per such NIC and enough for its speed at
// NCCL_P2P_PER_CHANNEL_NET_BW (14 GB/s) a channel. NCCL_NCHANNELS_PER_NET_PEER, where set,
// in every release.
int net_peer_channels(const Machine& m, int channels, const NcclEnv& env) {
  const System& s = m.system;
  if (env.nchannels_per_net_peer > 0) return env.nchannels_per_net_peer;
  if (s.nccl < NcclRelease::V2_20) return 2;
  const int local_nics = std::max(1, s.network.nics_per_node / std::max(1, s.gpus_per_node));
  int nics = 0;
  double nic_bw = 0.0;
  while (nics < local_nics && nic_bw < m.pci_bw) {
    nic_bw += m.net_bw;
    ++nics;
  }
  if (s.nccl < NcclRelease::V2_29) {
    int most = 2;
    while (most * m.ranks > channels * 4 && most > 1) most /= 2;
    return std::max(nics, most);
  }
  return std::max(nics, (static_cast<int>(nic_bw) + 13) / 14);
}

// NCCL's point-to-point setup (ncclTopoComputeP2pChannels, p2pChunkSize): a power of two of
// the communicator's channels (within NCCL_MIN_P2P_NCHANNELS - NCCL_MAX_P2P_NCHANNELS, at
// most MAXCHANNELS: 32, 64 from 2.25), and per peer the fewest any two ranks take (two per
// NVLink's worth of their path, two over PCIe, the network's across nodes), rounded up to a
// power of two too; from 2.29, across nodes and unless NCCL_NCHANNELS_PER_NET_PEER is set,
// halved while a peer's channels times the rounds of 8 peers exceed the channels. Steps of
// NCCL_P2P_NET_CHUNKSIZE across nodes (from 2.29 twice that for Blackwell on ARM hosts, whose
// nodes have 4 GPUs), NCCL_P2P_NVL_CHUNKSIZE where every GPU pair is NVLink,
// NCCL_P2P_PCI_CHUNKSIZE otherwise (computeBuffSizes); from 2.19 at most a step of the Simple
// FIFO (4 MiB / NCCL_STEPS).
P2pChannels p2p_setup(const Machine& m, const NcclEnv& env) {
  const System& s = m.system;
  const int max_channels = s.nccl >= NcclRelease::V2_25 ? 64 : 32;
  const int drawn = std::max(std::min(m.channels, env.max_p2p_nchannels), env.min_p2p_nchannels);  // p2pnChannels
  const int channels = std::min(drawn, max_channels);
  int least = max_channels;
  bool all_nvlink = true;
  for (int a = 0; a < m.per_node; ++a)
    for (int b = 0; b < m.per_node; ++b) {
      if (a == b) continue;
      const bool nvlink = s.intra.kind == IntraKind::NvSwitch || s.bridged(a, b);
      all_nvlink = all_nvlink && nvlink;
      least = std::min(least, nvlink ? 2 * std::max(1, s.intra.nvlink_links) : 2);
    }
  if (m.nodes > 1) least = std::min(least, net_peer_channels(m, channels, env));
  const bool rounds = s.nccl >= NcclRelease::V2_29 && m.nodes > 1 && env.nchannels_per_net_peer == 0;
  const bool gbx = s.nccl >= NcclRelease::V2_29 && s.cpu == CpuVendor::Arm && compute_capability(s.gpu) >= 100;
  int chunk = m.nodes > 1   ? (gbx ? 2 : 1) * env.p2p_net_chunksize
              : all_nvlink ? env.p2p_nvl_chunksize
                           : env.p2p_pci_chunksize;
  if (s.nccl >= NcclRelease::V2_19) chunk = std::min(chunk, kSimpleFifoStepBytes);
  P2pChannels out{.per_peer = pow2_up(rounds ? least : std::min(least, channels)),
                  .total = pow2_up(channels),
                  .chunk_bytes = chunk};
  if (rounds)
    while (out.per_peer * ((m.ranks + 7) / 8) > out.total && out.per_peer > 1) out.per_peer /= 2;
  return out;
}

}  // namespace

namespace {

// ncclTopoPostset's last word on the rings' channels, and ncclNvlsInit's on NVLS's: cut to
// min(NCCL_MAX_NCHANNELS, maxCTAs), then copied up to max(NCCL_MIN_NCHANNELS, minCTAs);
// NVLS's NCCL_NVLS_NCHANNELS where set, within [minCTAs, maxCTAs]. Each bound is at most
// MAXCHANNELS, and minCTAs at most maxCTAs (ncclCommInitRankConfig).
void bound_channels(Machine& m, const NcclEnv& env) {
  const int most = max_channels(m.system.nccl);
  const int max_ctas = std::min(env.max_ctas, most), min_ctas = std::min(env.min_ctas, max_ctas);
  const int max_nchannels = std::min(env.max_nchannels, most), min_nchannels = std::min(env.min_nchannels, most);
  m.channels = std::max(std::min({m.channels, max_nchannels, max_ctas}), std::max(min_nchannels, min_ctas));
  if (m.nvls) {
    if (env.nvls_nchannels > 0) m.nvls_channels = env.nvls_nchannels;
    m.nvls_channels = std::max(min_ctas, std::min(max_ctas, m.nvls_channels));
  }
}

}  // namespace

Machine make_machine(const System& s, int ranks, const NcclEnv& env) {
  check_release_runs(s);
  check_ranks(s, ranks);
  check_nccl_env(env);
  const int G = s.gpus_per_node;
  Machine m;
  m.system = s;
  m.ranks = ranks;
  m.nodes = ranks > G ? ranks / G : 1;
  m.per_node = ranks > G ? G : ranks;
  const int cc = compute_capability(s.gpu);
  static const double kPciGen[] = {15, 30, 60, 120, 240, 480};  // kvDictPciGen, x100 Mb/s per lane
  m.nvlink_bw = nvlink_bw(cc, s.nccl) * s.intra.nvlink_GBps / nvlink_line_rate(cc);
  m.nvlink_rate = nvlink_rate(cc) * s.intra.nvlink_GBps / nvlink_line_rate(cc);
  m.pci_bw = s.pcie.lanes * kPciGen[s.pcie.generation - 1] / 80.0;
  m.net_bw = s.network.nic_Gbps / 8.0;
  m.inter_cpu_bw = inter_cpu_bw(s.cpu, s.nccl);
  m.ll128_inter_ok = m.nodes == 1 || s.intra.kind == IntraKind::NvSwitch;

  const Graph ring = ring_graph(m, cc);
  Graph tree = ring;
  tree.tree_pattern = m.nodes > 1 && m.per_node == 1;
  m.graphs[index(Algo::Ring)] = ring;
  m.graphs[index(Algo::Tree)] = tree;
  m.graphs[index(Algo::Pat)] = tree;  // PAT runs on the tree's graph
  m.collnet = m.nodes > 1 && s.network.collnet;
  if (m.collnet) {
    m.graphs[index(Algo::CollNetDirect)] = ring;
    m.graphs[index(Algo::CollNetChain)] = ring;
  }
  // ncclNvlsInit: no NVLS for a communicator of 2 GPUs or fewer on a node (gpuCount <= 2;
  // from 2.28.7 of 1 GPU).
  const int nvls_min_gpus = s.nccl >= NcclRelease::V2_28_7 ? 2 : 3;
  m.nvls = s.intra.nvls && s.intra.kind == IntraKind::NvSwitch && cc >= 90 && m.per_node >= nvls_min_gpus;
  if (m.nvls) {
    m.graphs[index(Algo::Nvls)] = m.graphs[index(Algo::NvlsTree)] = nvls_graph(m);
    const NvlsSetup setup = nvls_setup(m, cc);
    m.nvls_channels = setup.channels;
    m.nvls_chunk = setup.chunk;
    m.nvls_tree_chunk = setup.tree_chunk;
  }
  m.channels = collective_channels(m, cc);
  bound_channels(m, env);
  // 2.20 - 2.27 copy the rings up to NVLS's channels where the communicator has fewer
  // (ncclTopoPostset), and from 2.22 the collectives read that count (nChannels; up to 2.21
  // collChannels, the count before the copy); 2.28 no longer copies.
  if (m.nvls && s.nccl >= NcclRelease::V2_22 && s.nccl < NcclRelease::V2_28) m.channels = std::max(m.channels, m.nvls_channels);
  m.p2p = p2p_setup(m, env);
  return m;
}

double base_latency_us(Algo a, Proto p) { return kLatencies_2_18.base[index(a)][index(p)]; }
double hop_latency_us(Hw hw, Algo a, Proto p) { return kLatencies_2_18.hw[static_cast<int>(hw)][index(a)][index(p)]; }

double protocol_bus_bw(const Machine& m, NcclRelease release, Coll coll, Algo a, Proto p, double bw) {
  const Graph& g = m.graphs[index(a)];
  const int cc = cc_index(m.system.gpu);
  const int i2 = m.nodes <= 2 ? m.nodes - 1 : 2;
  const int i1 = m.nodes == 1 ? cc : m.system.cpu == CpuVendor::Amd ? 1 : 0;
  const bool v2_21 = release >= NcclRelease::V2_21;
  const double ll_max = (v2_21 ? kLlMaxBw_2_21 : kLlMaxBw_2_18)[i1][i2];
  const double ppn = static_cast<double>(m.ranks) / m.nodes;
  double bus = g.channels * bw;
  // LL: 2.21 re-estimates the same kernel at half the links' bandwidth (before: a quarter
  // for all-reduce, reduce and across nodes, a third otherwise).
  const bool quarter = m.nodes > 1 || coll == Coll::AllReduce || coll == Coll::Reduce;
  if (a == Algo::Ring && p == Proto::LL) bus = std::min(ll_max, bus * (v2_21 ? 0.5 : quarter ? 1.0 / 4.0 : 1.0 / 3.0));
  // LL128 with one GPU per node: 0.7 up to 2.22 ("sending/receiving at the same GPU through the NIC").
  const double ll128 = ppn < 2 && release < NcclRelease::V2_23 ? 0.7 : 0.92;
  const ChannelCaps& caps = channel_caps(release);
  if (a == Algo::Ring && p == Proto::LL128) bus = std::min(bus * ll128, g.channels * caps.ring_ll128[cc][i2]);
  if (a == Algo::Tree) bus = std::min(bus * .92, g.channels * caps.tree[cc][i2]);
  if (a == Algo::Tree && p == Proto::LL) bus = std::min(bus * 1.0 / 3.8, ll_max);
  if (a == Algo::Tree && p == Proto::LL128)
    bus = std::min(bus * (m.nodes == 1 ? 7.0 / 9.0 : 120.0 / 128.0), g.channels * caps.tree_ll128[cc][i2]);
  if (a == Algo::Tree && g.tree_pattern) bus *= .85;
  if (a == Algo::Pat) bus *= release >= NcclRelease::V2_24 ? .75 : .85;
  if ((a == Algo::CollNetDirect || a == Algo::CollNetChain) && p != Proto::Simple) bus = 0;
  if (a == Algo::CollNetDirect && p == Proto::Simple) {
    if (coll == Coll::AllGather || coll == Coll::ReduceScatter) {
      // 2.20: one GPU per NIC (the plugin's all-gather and reduce-scatter), and a corrective
      // ratio NCCL measured at 1 and 8 GPUs per node, interpolated; 2.27: 0.9 of the network.
      const double w = (ppn - 1) / (8 - 1);
      bus = release >= NcclRelease::V2_27 ? ppn * std::min(g.bw_intra, g.bw_inter * 0.9) : ppn * bw * (w * 0.85 + (1 - w) * 0.95);
    } else {
      double factor = ppn / g.channels;  // GPU/NIC ratio
      factor -= (factor - 1) / 2;
      bus /= factor;
      if (compute_capability(m.system.gpu) >= 90) bus *= .85;
    }
  }
  // Reduce-scatter and all-gather across nodes through the network's reduction (CollNet
  // Direct; NVLS from 2.27) need it, and a NIC (head) for every GPU of a node.
  const bool gather = coll == Coll::AllGather || coll == Coll::ReduceScatter;
  if (gather && m.nodes > 1 && (a == Algo::CollNetDirect || a == Algo::Nvls) &&
      (!m.collnet || ppn > m.system.network.nics_per_node))
    bus = 0;
  return bus;
}

namespace {

// Threads per block and the per-thread byte thresholds below which NCCL uses fewer channels.
void set_thread_limits(Tuning& t, const Machine& m) {
  const auto& ring = m.graphs[index(Algo::Ring)];
  const int simple_threads = ring.bw_intra * ring.channels <= kPciBwGen3x16 ? 256 : kSimpleThreads;
  for (int a = 0; a < kAlgos; ++a) {
    t.max_threads[a][index(Proto::LL)] = kLLThreads;
    t.max_threads[a][index(Proto::LL128)] = kLL128Threads;
    t.max_threads[a][index(Proto::Simple)] = kMaxThreads;
    t.thread_threshold[a][index(Proto::LL)] = 8;
    t.thread_threshold[a][index(Proto::LL128)] = 8;
    t.thread_threshold[a][index(Proto::Simple)] = 64;
  }
  t.max_threads[index(Algo::Ring)][index(Proto::Simple)] = simple_threads;
  t.max_threads[index(Algo::Tree)][index(Proto::Simple)] = kSimpleThreads;
  t.thread_threshold[index(Algo::Ring)][index(Proto::LL)] *= m.ranks;
  t.thread_threshold[index(Algo::CollNetDirect)][index(Proto::Simple)] = 512;
  t.thread_threshold[index(Algo::CollNetChain)][index(Proto::Simple)] = 512;
}

// The ring's steps for `coll` over n ranks (all of them, and the ones crossing nodes).
int ring_steps(Coll coll, int n) {
  return coll == Coll::AllReduce ? 2 * (n - 1) : coll == Coll::ReduceScatter || coll == Coll::AllGather ? n - 1 : n;
}

// The ring's steps that cross nodes, as NCCL counts them: an all-reduce's 2N (2.23 on: 2(N - 1)).
int ring_inter_steps(const Machine& m, NcclRelease release, Coll coll) {
  const int N = m.nodes;
  if (coll == Coll::AllReduce) return N == 1 ? 0 : release >= NcclRelease::V2_23 ? 2 * (N - 1) : 2 * N;
  return coll == Coll::ReduceScatter || coll == Coll::AllGather ? N - 1 : N;
}

// The algorithm whose network hop NCCL charges `a`: its own, but from 2.23 with one GPU per
// node, where "latencies are fully exposed", the tree's for every algorithm.
Algo network_hop_algo(const Machine& m, NcclRelease release, Algo a) {
  return m.per_node == 1 && release >= NcclRelease::V2_23 ? Algo::Tree : a;
}

}  // namespace

double nccl_latency_us(const Machine& m, NcclRelease release, Coll coll, Algo a, Proto p) {
  const int n = m.ranks, N = m.nodes;
  const Hw intra_hw = m.graphs[index(a)].intra;
  const Hw hw = N == 1 ? intra_hw : Hw::Net;
  const bool v2_18 = release == NcclRelease::V2_18;
  double lat = tuning_base_us(release, a, p);
  double intra_lat = tuning_hop_us(release, intra_hw, a, p);
  // + latencyInter (0: no SHARP latency measured).
  const double inter_lat = tuning_hop_us(release, Hw::Net, network_hop_algo(m, release, a), p);
  switch (a) {
    case Algo::Ring: {
      if (coll == Coll::Reduce || coll == Coll::Broadcast) return lat + tuning_hop_us(release, hw, a, p);  // sameChannels graphs
      const double net_overhead = m.system.cpu == CpuVendor::Amd ? 2.0 : 1.0;  // getNetOverhead, us
      double overhead = 0.0;
      if (N > 1) overhead = p == Proto::Simple ? 3 * net_overhead : net_overhead;
      intra_lat = std::max(intra_lat, overhead);
      const int nsteps = ring_steps(coll, n), inter_steps = ring_inter_steps(m, release, coll);
      return lat + (nsteps - inter_steps) * intra_lat + inter_steps * inter_lat;
    }
    case Algo::Tree: return lat + 2 * ((n / N - 1) * intra_lat + log2i(N) * inter_lat);
    case Algo::CollNetDirect:  // + the arity's serialisation, 0.5 us a GPU (2.19 on: 0.4)
      return lat + 2 * (std::min(1, n / N - 1) * intra_lat + (n / N - 1) * (v2_18 ? 0.5 : 0.4)) + inter_lat;
    case Algo::CollNetChain: return lat + 2 * (n / N - 1) * intra_lat + inter_lat;
    case Algo::Nvls: return lat + intra_lat + (N > 1 ? inter_lat : 0.0);  // 2.18: the NVLink hop's in the base
    case Algo::NvlsTree: return v2_18 ? lat + 2 * (N - 1) * inter_lat : lat + intra_lat + 2 * log2i(N) * inter_lat;
    case Algo::Pat: {
      const PatLatency pat = pat_latency(m, release, p);
      return pat.base_us + log2i(N) * pat.level_us + n * pat.per_rank_us;
    }
  }
  return lat;
}

PatLatency pat_latency(const Machine& m, NcclRelease release, Proto p) {
  return {.level_us = tuning_hop_us(release, Hw::Net, network_hop_algo(m, release, Algo::Pat), p) / 3.5};
}

namespace {

// Enables: LL128 by default only on NVLink with one GPU generation (and the NIC close);
// NVLSTree across nodes only; CollNet and multi-node NVLS only with in-network reduction.
// A disabled (algorithm, protocol) gets no bandwidth, so it is never chosen. 2.18 never
// disables the ring for other collectives than all-reduce (NCCL_ALGO=Tree still runs them);
// 2.19 to 2.23 disable it too, but give a collective left with nothing the ring back, with
// every protocol ("at least set ring algo available"; from 2.22 with the protocols enabled);
// 2.24 has no fallback and fails, as 2.18 does, and reads lists per collective.
void apply_enables(Tuning& t, const Machine& m, const Overrides& overrides) {
  const int N = m.nodes;
  const int cc = compute_capability(m.system.gpu);
  const NcclRelease release = m.system.nccl;
  const bool v2_18 = release == NcclRelease::V2_18, v2_24 = release >= NcclRelease::V2_24;
  for (int c = 0; c < kColls; ++c) {
    std::array<bool, kAlgos> algo_on = overrides.algo_enabled[c];
    if (N == 1) algo_on[index(Algo::NvlsTree)] = false;
    if (!m.collnet) {
      algo_on[index(Algo::CollNetDirect)] = algo_on[index(Algo::CollNetChain)] = false;
      if (N > 1) algo_on[index(Algo::Nvls)] = false;
      if (!v2_24 && !algo_on[index(Algo::Ring)] && !algo_on[index(Algo::Tree)] && !algo_on[index(Algo::Nvls)] &&
          !algo_on[index(Algo::NvlsTree)])
        algo_on[index(Algo::Ring)] = algo_on[index(Algo::Tree)] = true;  // "ignoring NCCL_ALGO=COLLNET" (up to 2.23)
    } else if (m.system.intra.kind != IntraKind::NvSwitch) {
      algo_on[index(Algo::CollNetDirect)] = false;
    }
    for (int a = 0; a < kAlgos; ++a)
      for (int p = 0; p < kProtos; ++p) {
        int on = overrides.proto_enabled[c][p];
        if (on == 2 && p == index(Proto::LL128))
          on = m.ll128_inter_ok && m.graphs[a].intra == Hw::NvLink && cc >= 70 ? 1 : 0;
        if (on == 0) t.bandwidth_GBps[c][a][p] = 0;
        if (on == 0 && a == index(Algo::Ring) && release >= NcclRelease::V2_22) t.ring_backup_GBps[c][p] = 0;
        if (v2_18 && a == index(Algo::Ring) && c != index(Coll::AllReduce)) continue;
        if (!algo_on[a]) t.bandwidth_GBps[c][a][p] = 0;
      }
  }
  if (v2_18 || v2_24) return;  // no fallback: NCCL fails where nothing is left
  for (int c = 0; c < kColls; ++c) {
    bool available = false;
    for (int a = 0; a < kAlgos; ++a)
      for (int p = 0; p < kProtos; ++p) available = available || t.bandwidth_GBps[c][a][p] != 0;
    if (!available)
      for (int p = 0; p < kProtos; ++p) t.bandwidth_GBps[c][index(Algo::Ring)][p] = t.ring_backup_GBps[c][p];
  }
}

// The algorithms NCCL tunes for a collective: all but PAT for all-reduce, the ring for the
// others; 2.19 adds NVLS for reduce-scatter and all-gather, 2.20 CollNet Direct, 2.23 PAT
// (Simple, one GPU per node: ncclPatEnable).
bool tuned_for(const Machine& m, Coll coll, Algo a) {
  if (a == Algo::Pat)
    return (coll == Coll::AllGather || coll == Coll::ReduceScatter) && m.system.nccl >= NcclRelease::V2_23 && m.per_node == 1;
  if (coll == Coll::AllReduce || a == Algo::Ring) return true;
  if (coll == Coll::Broadcast || coll == Coll::Reduce || m.system.nccl == NcclRelease::V2_18) return false;
  return a == Algo::Nvls || (a == Algo::CollNetDirect && m.system.nccl >= NcclRelease::V2_20);
}

}  // namespace

double nvls_bandwidth(const Machine& m, NcclRelease release, Coll coll, Algo a) {
  const Graph& g = m.graphs[index(a)];
  const int N = m.nodes;
  const double ppn = m.per_node;
  if (release >= NcclRelease::V2_28) {
    if (g.channels < 2) return 0.0;  // "NVLS/NVLStree needs at least 2 channels"
    const int cc = cc_index(m.system.gpu), i2 = N <= 2 ? N - 1 : 2;
    // The switch's reduction over the channels but one, all-reduce's two operations pipelined.
    const double intra = g.bw_intra * kNvlsEfficiency[cc] * (g.channels - 1) / g.channels *
                         (coll == Coll::AllReduce ? 2.0 : (ppn - 1) / ppn);
    const double inter = g.bw_inter * (N <= 2 && a == Algo::NvlsTree ? 2 : 1);
    const double bw = std::min(intra, inter);
    return a == Algo::NvlsTree ? std::min(bw, channel_caps(release).nvls_tree[cc][i2]) : bw;
  }
  if (a == Algo::NvlsTree)
    return release == NcclRelease::V2_18 ? (N <= 2 ? g.bw_intra : g.bw_inter) : std::min(g.bw_intra, N <= 2 ? g.bw_inter : g.bw_inter / 2);
  if (release == NcclRelease::V2_18) return N <= 2 ? g.bw_intra : g.bw_inter;
  if (release >= NcclRelease::V2_27 && coll != Coll::AllReduce) return std::min(g.bw_intra * (ppn - 1) / ppn, g.bw_inter * 0.9);
  return std::min(g.bw_intra, g.bw_inter);
}

double algorithm_ratio(const Machine& m, NcclRelease release, Coll coll, Algo a) {
  const int n = m.ranks, N = m.nodes;
  // Reduce-scatter and all-gather: a bus bandwidth that is the algorithm's for CollNet Direct
  // (2.20), and for all but the ring from 2.23.
  const bool gather = coll == Coll::AllGather || coll == Coll::ReduceScatter;
  if (gather && (a == Algo::CollNetDirect || (a != Algo::Ring && release >= NcclRelease::V2_23))) return 1.0;
  switch (a) {
    case Algo::Ring: return static_cast<double>(n) / ring_steps(coll, n);
    // 2.28: NVLS and the NVLS tree at the ring's n / steps.
    case Algo::Nvls: return release >= NcclRelease::V2_28 ? static_cast<double>(n) / ring_steps(coll, n) : 5.0 / 6.0;
    case Algo::NvlsTree:
      return release >= NcclRelease::V2_28  ? static_cast<double>(n) / ring_steps(coll, n)
             : release == NcclRelease::V2_18 ? .70 * N / (2.0 * (N - 1))
                                             : 5.0 / 6.0;
    default: return .5;
  }
}

Tuning tune(const Machine& m, const Overrides& overrides) {
  if (overrides.per_collective && m.system.nccl < NcclRelease::V2_24)
    throw std::invalid_argument(fmt::format(
        "NCCL_ALGO / NCCL_PROTO: lists per collective (\"{}\", \"{}\") are read from NCCL 2.24; {} does not",
        overrides.algo, overrides.proto, to_string(m.system.nccl)));
  Tuning t;
  set_thread_limits(t, m);
  const int n = m.ranks, N = m.nodes;
  if (n <= 1) return t;
  for (int c = 0; c < kColls; ++c) {
    const Coll coll = static_cast<Coll>(c);
    for (int ai = 0; ai < kAlgos; ++ai) {
      const Algo a = static_cast<Algo>(ai);
      if (!tuned_for(m, coll, a)) continue;
      const Graph& g = m.graphs[ai];
      for (int pi = 0; pi < kProtos; ++pi) {
        const Proto p = static_cast<Proto>(pi);
        if ((a == Algo::Nvls || a == Algo::NvlsTree || a == Algo::Pat) && p != Proto::Simple) continue;
        const bool collnet = a == Algo::CollNetDirect || a == Algo::CollNetChain;
        double bw = N <= 2 || collnet ? g.bw_intra : g.bw_inter;
        if (a == Algo::Nvls || a == Algo::NvlsTree) bw = nvls_bandwidth(m, m.system.nccl, coll, a);
        const double bus = protocol_bus_bw(m, m.system.nccl, coll, a, p, bw);
        const double ratio = algorithm_ratio(m, m.system.nccl, coll, a);
        t.bandwidth_GBps[c][ai][pi] = bus * ratio;
        if (a == Algo::Ring) t.ring_backup_GBps[c][pi] = bus * ratio;  // NCCL's ringbdw, before the enables
        t.latency_us[c][ai][pi] = nccl_latency_us(m, m.system.nccl, coll, a, p);
      }
    }
  }
  apply_enables(t, m, overrides);
  return t;
}

double nccl_estimate_us(const Machine& m, const Tuning& t, Coll c, Algo a, Proto p, double bytes) {
  double bw = t.bandwidth_GBps[index(c)][index(a)][index(p)];
  double lat = t.latency_us[index(c)][index(a)][index(p)];
  if (bw == 0) return -1.0;
  const int log_size = log2i(static_cast<long long>(bytes) >> 6);
  if (a == Algo::Tree && log_size < 23) bw *= kTreeCorrection[index(p)][log_size];
  if (a == Algo::NvlsTree && c == Coll::AllReduce && log_size < 24 && m.system.gpu == GpuArch::Blackwell &&
      m.system.nccl >= NcclRelease::V2_29)
    bw *= kTreeCorrection[index(p)][log_size];  // NCCL's condition "on x86": every modelled host
  if (a == Algo::Ring && p == Proto::Simple && m.nodes > 1 && c == Coll::AllReduce &&
      bytes / (static_cast<double>(m.channels) * m.ranks) >= 64)
    lat *= compute_capability(m.system.gpu) < 80 ? 1.9 : 1.4;  // "plateau effect of ring"
  return lat + bytes / (1000.0 * bw);
}

namespace {

// The fastest (algorithm, protocol) by NCCL's estimate among those `t` enables, into `ch`
// with its estimate; false when none is.
bool fastest_enabled(const Machine& m, const Tuning& t, Coll c, double bytes, Choice& ch) {
  double best = std::numeric_limits<double>::infinity();
  for (int a = 0; a < kAlgos; ++a) {
    const Algo algo = static_cast<Algo>(a);
    if ((algo == Algo::CollNetDirect || algo == Algo::CollNetChain) && !m.collnet) continue;
    if (algo == Algo::Nvls && !m.collnet && m.nodes > 1) continue;
    // NVLS reduce-scatter and all-gather: one node only up to 2.26; from 2.27 across nodes too,
    // through the network's reduction (tune() gives them no bandwidth without it).
    if (algo == Algo::Nvls && (c == Coll::AllGather || c == Coll::ReduceScatter) && m.nodes > 1 &&
        m.system.nccl < NcclRelease::V2_27)
      continue;
    // From 2.27 NVLS runs only all-reduce where a node has more GPUs than NCCL_MAX_NVLS_ARITY.
    if ((algo == Algo::Nvls || algo == Algo::NvlsTree) && c != Coll::AllReduce && m.per_node > kMaxNvlsArity &&
        m.system.nccl >= NcclRelease::V2_27)
      continue;
    if (algo == Algo::CollNetDirect && m.per_node > 8 && m.system.nccl >= NcclRelease::V2_23) continue;  // up to 8 local GPUs
    if (algo == Algo::CollNetChain && m.per_node > 8 && m.system.nccl >= NcclRelease::V2_28) continue;  // 2.28: it too
    for (int p = 0; p < kProtos; ++p) {
      const double time = nccl_estimate_us(m, t, c, algo, static_cast<Proto>(p), bytes);
      if (time >= 0 && time < best) {
        best = time;
        ch.algo = algo;
        ch.proto = static_cast<Proto>(p);
      }
    }
  }
  ch.nccl_estimate_us = best;
  return best < std::numeric_limits<double>::infinity();
}

// 2.19 on, when nothing it may run has bandwidth (an algorithm tuned but not run here, such as
// NVLS reduce-scatter across nodes): the ring at its bandwidth before the enables, whatever
// NCCL_ALGO says; every protocol up to 2.21, those NCCL_PROTO (and LL128's default) enable
// from 2.22.
bool fastest_ring_backup(const Machine& m, const Tuning& t, Coll c, double bytes, Choice& ch) {
  Tuning ring_only = t;
  for (int a = 0; a < kAlgos; ++a)
    for (int p = 0; p < kProtos; ++p)
      ring_only.bandwidth_GBps[index(c)][a][p] = a == index(Algo::Ring) ? t.ring_backup_GBps[index(c)][p] : 0.0;
  return fastest_enabled(m, ring_only, c, bytes, ch);
}

// getAlgoInfo's channels and threads for the chosen algorithm and protocol.
void set_channels_and_threads(const Machine& m, const Tuning& t, double bytes, Choice& ch) {
  int nc = m.channels;
  int nt = t.max_threads[index(ch.algo)][index(ch.proto)];
  long threshold = t.thread_threshold[index(ch.algo)][index(ch.proto)];
  if (ch.algo == Algo::CollNetDirect) {
    const int heads = m.graphs[index(Algo::CollNetDirect)].channels;
    int nc_switch = 16;
    bool flag = true;
    while (nc_switch >= 1 && flag) {
      while ((flag = bytes < static_cast<double>(nc) * nt * heads * threshold) && nc > nc_switch) {
        if (nc == nc_switch + nc_switch / 2) threshold /= 2;
        --nc;
      }
      nc_switch /= 2;
    }
  } else if (ch.algo == Algo::Nvls || ch.algo == Algo::NvlsTree) {
    nc = m.nvls_channels;
    // 2.28: NVLS across nodes runs on at most the communicator's channels.
    if (ch.algo == Algo::Nvls && m.nodes > 1 && m.system.nccl >= NcclRelease::V2_28) nc = std::min(nc, m.channels);
  } else {
    while (bytes < static_cast<double>(nc) * nt * threshold) {
      if (nc >= 2) --nc;
      else if (nt % 128 == 0) nt /= 2;
      else break;
    }
  }
  if (ch.proto == Proto::Simple) {
    if (ch.algo == Algo::Ring) nt += kWarp;  // extra warp for sync
    if (ch.algo == Algo::Tree) nt += 4 * kWarp;
  }
  nt = nt / kWarp < 3 ? 3 * kWarp : nt;
  if (ch.algo == Algo::Tree && m.system.nccl >= NcclRelease::V2_22) nt = kMaxThreads;  // "tree now uses all threads always"
  if (ch.algo == Algo::Pat) nt = kMaxThreads;
  ch.channels = nc;
  ch.threads = nt;
}

}  // namespace

Choice choose(const Machine& m, const Tuning& t, Coll c, double bytes) {
  Choice ch;
  if (m.ranks > 1 && !fastest_enabled(m, t, c, bytes, ch)) {
    const NcclRelease release = m.system.nccl;
    if (release == NcclRelease::V2_18)
      throw std::invalid_argument(fmt::format(
          "{}: NCCL_ALGO leaves no algorithm that runs on {} GPUs of \"{}\", where NCCL 2.18 fails (\"no "
          "algorithm/protocol available\"); 2.19 to 2.23 fall back to the ring (\"nccl_version\": \"2.19\" to \"2.23\")",
          to_string(c), m.ranks, m.system.name));
    if (release >= NcclRelease::V2_24)
      throw std::invalid_argument(fmt::format(
          "{}: NCCL_ALGO and NCCL_PROTO leave no algorithm that runs on {} GPUs of \"{}\", where NCCL {} fails (\"no "
          "algorithm/protocol available\")",
          to_string(c), m.ranks, m.system.name, to_string(release)));
    if (!fastest_ring_backup(m, t, c, bytes, ch))
      throw std::invalid_argument(fmt::format("{} of {} bytes: no algorithm/protocol available", to_string(c), bytes));
  }
  set_channels_and_threads(m, t, bytes, ch);
  return ch;
}

}  // namespace dtsim::net::nccl
