// How NCCL sets up a communicator on a machine and picks, per collective and size, its
// algorithm, protocol and channel count: NCCL's topology search (src/graph/search.cc),
// tuning model (src/graph/tuning.cc) and getAlgoInfo (src/enqueue.cc), restated for the
// system's release (System::nccl), 2.18.5 to 2.30.7 (thirteen series). What 2.19 changes here
// (and every later release):
//   - latencies: NVLS's 23 us moves from the base to the NVLink hop (unchanged on one node),
//     Tree Simple pays 28 us a hop, CollNet's hops are re-measured (3.7 / 2.8 us on NVLink,
//     31 / 30 on the network, 0.4 us of arity serialisation a GPU instead of 0.5), the NVLS
//     tree crosses 2 log2(N) network hops of 14 us (2.18: 2 (N - 1) of 19);
//   - NVLS takes the slower of its intra- and inter-node speeds (the NVLS tree half the
//     network's beyond 2 nodes) and the NVLS tree's ratio is 5/6 (2.18: .7 N / 2(N - 1));
//   - reduce-scatter and all-gather are tuned for NVLS (one node) besides the ring;
//   - Hopper's speed lists gain 50 GB/s within a node (6 GPUs' NVLS channels fit at 50
//     instead of 40) and 22 across nodes;
//   - NCCL_ALGO disables the ring for every collective (2.18 keeps it for all but
//     all-reduce), and a collective left with nothing runs the ring with every protocol
//     (2.18 fails: "no algorithm/protocol available").
// And 2.20 on top of those:
//   - a Hopper NVLink counts 20.6 GB/s in its graphs and estimates (SM90_NVLINK_BW; 20
//     before, as every generation; the kernels move 20.6 in every release: Machine);
//   - reduce-scatter and all-gather are tuned for CollNet Direct too (one GPU per NIC,
//     NCCL's measured .85 - .95);
//   - Hopper's extra doubling of the channels across nodes needs fewer than 16 (before: 32
//     after it).
// And 2.21 on top of those:
//   - the ring's LL is estimated at half the links' bandwidth (a quarter or a third before),
//     capped at 141 GB/s on one Hopper node (87.7 before; the kernels run at this figure in
//     every release: kernel_bus_bw);
//   - NVLS's NVLink hop is 25 us; Hopper's intra-node speeds gain 11 GB/s.
// And 2.22 on top of those (its tuning constants and graphs are 2.21's):
//   - the ring a collective falls back to has only the protocols NCCL_PROTO (and LL128's
//     default) enable: ringbdw is zeroed for the others;
//   - the tree always runs 640 threads (NCCL_MAX_NTHREADS), whatever the size;
//   - with NVLS the rings and trees run on at least NVLS's channels (the rings copied up to
//     them, as from 2.20, and now counted by the collectives);
//   - how a collective reaches the channels changes again (collective_time.hpp).
// And 2.23 on top of those:
//   - Tree Simple's latencies: 8.4 us once, 4 us a hop within a node, 14 across (28 before);
//   - an all-reduce ring counts 2(N - 1) network steps (2N before); with one GPU per node
//     every algorithm's network hop is the tree's;
//   - LL128's ring keeps 0.92 with one GPU per node (0.7 before);
//   - reduce-scatter and all-gather by anything but the ring are estimated at their bus
//     bandwidth (NVLS: 5/6 of it before; the kernels keep this pace in every release);
//   - PAT for reduce-scatter and all-gather with one GPU per node (Simple, 0.85 of the tree
//     graph's bandwidth, 8 us + log2(N) x the network hop / 3.5 + 2.8 us a rank; its kernels
//     in collective_time.hpp);
//   - CollNet Direct only up to 8 GPUs a node.
// And 2.24 on top of those (its kernels' split and chunks are 2.23's):
//   - NCCL_ALGO and NCCL_PROTO may give lists per collective ("ring;allreduce:tree");
//   - no fallback: where they leave a collective nothing NCCL fails, as 2.18 does, and
//     NCCL_ALGO naming only CollNet where there is none no longer brings back ring and tree;
//   - PAT at 0.75 of the tree graph's bandwidth.
// And 2.25 on top of those:
//   - Blackwell (compute capability 100): an NVLink5 link (50 GB/s a direction) counts 40
//     GB/s, its own speed lists (intra-node from 90 GB/s), llMaxBw and the per-channel caps
//     twice Hopper's, 32 NVLS channels;
//   - MAXCHANNELS 64: a ring graph up to 32 channels (16 before), the communicator up to 64;
//   - Hopper's extra channel doubling across nodes applies to later GPUs too;
//   - NVLS's graph has at most 32 heads (NCCL_MAX_NVLS_ARITY), whatever the GPUs a node.
// And 2.26: LL's traffic counts four times when a collective's parts are dealt out
// (collective_time.hpp); a ring over exactly two NVLink domains (two bridged pairs) needs at
// least 2 channels; its tuning is 2.25's.
// And 2.27: NVLS reduce-scatter and all-gather estimated over (G - 1) / G of the channels'
// speed (nvls_bandwidth; the kernels keep this pace in every release), CollNet Direct's at
// 0.9 of the network; Blackwell's speed lists gain 18 GB/s within a node and start at 47.9
// across, and one Blackwell node runs 24 NVLS channels; NVLS reduce-scatter and all-gather
// run across nodes where the network reduces and every GPU of a node has its NIC (timed as
// NVLS across nodes is: NCCL's bandwidth, loops striding over the channels), and not at all
// with more than 32 GPUs a node.
// And 2.28 (2.28.3): NVLS and the NVLS tree re-estimated (nvls_bandwidth, at the ring's n /
// steps; the kernels keep 2.27's pace: kKernelPaceRelease), Blackwell's per-channel caps its
// own (tree {70, 42.8, 24}, tree LL128 {55.6, 31.67, 20}, NVLS tree {-, 96, 43.1}); the rings
// no longer copied up to NVLS's channels, and NVLS across nodes on at most the
// communicator's; CollNet Chain only up to 8 GPUs a node. 2.28.7: NVLS from 2 GPUs a node (3
// before), Blackwell's ring LL128 34.6 GB/s a channel on 2 nodes. 2.28.9: the NVLS tree's
// network hop 20.9 us (14 before), Blackwell's NVLS tree 43.8 GB/s a channel beyond 2 nodes.
// And 2.29: Blackwell's ring LL128 capped at 34.5 GB/s a channel (2.29.7: 40), its speed
// lists gain 45 within a node (2.29.7: and 80 across), its NVLS tree estimates corrected by
// size as the tree's are; how a collective reaches the channels changes (collective_time.hpp).
// And 2.30 (2.30.3 - 2.30.7): Blackwell only: the NVLS tree's cap beyond 2 nodes 80 GB/s a
// channel, the speed list across nodes gains 86, and across nodes NVLS's channels and chunks
// follow the NICs' speed and the GPUs a node (nvls_setup in tuning.cpp).
// 2.27.5 and 2.27.6 change Blackwell's figures too (NVLink 40.1 GB/s, speed lists across nodes).
// The kernels' hop latencies (hop_latency_us, collective_time.hpp) are 2.18's in all of them;
// how a collective's elements reach the channels changes in 2.20, 2.22 and 2.23
// (collective_time.hpp).
//
// Graph (per algorithm, ncclTopoCompute): channels x bandwidth per channel, found by
// trying NCCL's speed list from the fastest that fits: a ring channel takes `speed` GB/s on
// every link it crosses, so an NVSwitch node of L links of NCCL's 20 GB/s (per 25 GB/s of
// line rate) fits floor(20 L / speed) channels, a multi-node ring floor(NIC / speed) per NIC;
// the best channels x speed wins (the first of equals), the search stops once that reaches
// the GPU's total bandwidth or the next speed is under 0.49 of the best; a channel of at
// least 25 GB/s is split in two (not on Hopper below 50 GB/s with more than 4). The
// communicator doubles the ring's channels (ncclTopoPostset), and Hopper doubles them once
// more across nodes above 45 GB/s per channel. Trees share the ring's graph; NVLS takes one
// channel per GPU of a node (its own speed, up to the node's bandwidth x G/(G-1)) and 16
// compute channels (NCCL_NVLS_NCHANNELS).
//
// Tuning (ncclTopoTuneModel): per collective, algorithm and protocol, a latency
//   lat = baseLat + intra and inter hop latencies (ring: (nsteps - nInterSteps) x intra +
//         nInterSteps x inter; tree: 2 ((G-1) intra + log2(N) inter); ...)
// and an algorithm bandwidth
//   bw = channels x bw/channel, refined per protocol (LL: /4 or /3, 2.21 /2, capped at llMaxBw;
//        LL128: x0.92, capped at channels x perChMaxRingLL128Bw; tree x0.92, ...),
//        then x n/nsteps (ring), x0.5 (tree), x5/6 (NVLS);
// NCCL's estimate is lat + bytes / bw (us, GB/s; trees x treeCorrectionFactor below 256 MB,
// multi-node Simple rings lat x1.4), and NCCL runs the (algorithm, protocol) with the
// smallest, among those enabled: LL128 only on NVLink with one GPU generation, CollNet where
// the network reduces, NVLS on NVSwitch 3, and what NCCL_ALGO / NCCL_PROTO allow.
// Channels: all of the communicator's, fewer while bytes < channels x threads x
// threadThreshold (getAlgoInfo), 16 for NVLS.
#pragma once

#include <array>
#include <string>

#include "network_models/nccl/nccl_env.hpp"
#include "network_models/nccl/system.hpp"

namespace dtsim::net::nccl {

// NCCL's enumerations, in NCCL's order (ncclFunc_t, NCCL_ALGO_*, NCCL_PROTO_*).
enum class Coll { Broadcast, Reduce, AllGather, ReduceScatter, AllReduce };
// PAT: 2.23's reduce-scatter and all-gather with one GPU per node.
enum class Algo { Tree, Ring, CollNetDirect, CollNetChain, Nvls, NvlsTree, Pat };
enum class Proto { LL, LL128, Simple };
inline constexpr int kColls = 5, kAlgos = 7, kProtos = 3;

const char* to_string(Coll c);   // "all_reduce", ...
const char* to_string(Algo a);   // NCCL's spelling: "Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree", "PAT"
const char* to_string(Proto p);  // "LL", "LL128", "Simple"
inline int index(Coll c) { return static_cast<int>(c); }
inline int index(Algo a) { return static_cast<int>(a); }
inline int index(Proto p) { return static_cast<int>(p); }

// NCCL_ALGO / NCCL_PROTO: a comma-separated list of names (any case), or "^list" for all
// but those; "" leaves NCCL's defaults (every algorithm; LL128 where NCCL enables it). From
// NCCL 2.24 also lists per collective after the first, separated by semicolons and named
// by NCCL's function names: "ring,tree;allreduce:nvls,tree" (tune() refuses them for
// earlier releases, which do not read them).
struct Overrides {
  std::string algo;   // as given
  std::string proto;
  // Per collective (index(Coll)).
  std::array<std::array<bool, kAlgos>, kColls> algo_enabled;
  // 1: on, 0: off, 2: NCCL's default (LL128 only where it is known to work).
  std::array<std::array<int, kProtos>, kColls> proto_enabled;
  bool per_collective = false;  // a list names a collective
  Overrides();
};
// Throws std::invalid_argument "NCCL_ALGO: unknown name \"x\" in ... (expected ...)" (or
// NCCL_PROTO, or an unknown collective) for a name NCCL does not know, or a list that
// enables nothing.
Overrides parse_overrides(const std::string& algo, const std::string& proto);

// Which link a hop crosses (tuning.cc's NCCL_HW_NVLINK / PCI / NET).
enum class Hw { NvLink, Pci, Net };

struct Graph {
  int channels = 0;   // 0: the algorithm has no graph on this machine
  double bw_intra = 0.0, bw_inter = 0.0;  // GB/s per channel
  // GB/s the ring's slowest hop within a node offers all channels together (a GPU's NVLinks
  // at the rate they carry, or its PCIe link, in NCCL's units): the search's speed rounds the
  // release's figure for it down to a whole number of channels (and across nodes sizes them
  // for the NICs), the kernels' hops share all of it.
  double node_bw = 0.0;
  Hw intra = Hw::NvLink;                  // NVLink, or PCIe (typeIntra beyond NVB)
  bool tree_pattern = false;              // NCCL_TOPO_PATTERN_TREE (one GPU per node)
};

// NCCL's point-to-point setup of a communicator: p2pnChannelsPerPeer, p2pnChannels and
// p2pChunkSize (the Simple protocol's step).
struct P2pChannels {
  int per_peer = 1, total = 1;
  int chunk_bytes = 1 << 17;
};

// A communicator of `ranks` GPUs on a system: how many nodes it spans and the graphs and
// channel counts NCCL sets up.
struct Machine {
  System system;
  int ranks = 1, nodes = 1, per_node = 1;
  std::array<Graph, kAlgos> graphs{};
  int channels = 1;       // comm->nChannels (ring and tree kernels)
  int nvls_channels = 0;  // comm->nvlsChannels
  P2pChannels p2p;        // point-to-point (collective_time.hpp's p2p_split)
  // The largest chunk NVLS and the NVLS tree start from, bytes (comm->nvlsChunkSize; the NVLS
  // tree's at most nvlsTreeMaxChunkSize, or the release's rule before 2.30).
  int nvls_chunk = 0, nvls_tree_chunk = 0;
  bool nvls = false, collnet = false;
  bool ll128_inter_ok = true;  // the NIC sits close enough to the GPU for LL128 (typeInter <= PXB)
  // The links in NCCL's units, GB/s: one NVLink (the release's SMxx_NVLINK_BW, which sizes
  // the graphs and NCCL's estimates), a GPU's PCIe link, a NIC.
  double nvlink_bw = 0.0, pci_bw = 0.0, net_bw = 0.0;
  // GB/s between the two sockets' PCIe trees (ncclTopoGetInterCpuBw): Intel's SKL_QPI_BW,
  // 10 (NCCL also knows older and newer Xeons, which a system does not name); AMD's
  // AMD_BW, 16, from 2.19 (no limit before: LOC_BW); ARM's ARM_BW, 6.
  double inter_cpu_bw = 0.0;
  // GB/s one NVLink carries for the kernels, whatever the release: NCCL's figure for the
  // generation as kKernelPaceRelease counts it (Hopper 20.6, the maintainers' 370
  // GB/s for 18 links; 20 before), scaled to the link's line rate.
  double nvlink_rate = 0.0;
};

// The communicator of the first `ranks` GPUs of `system`: one node with `ranks` GPUs
// (ranks <= gpus_per_node), or ranks / gpus_per_node whole nodes, set up under `env`.
// Throws std::invalid_argument naming the rank count otherwise (or beyond the system's
// nodes), or the variable of `env` out of range (check_nccl_env).
Machine make_machine(const System& system, int ranks, const NcclEnv& env = {});

struct Tuning {
  double latency_us[kColls][kAlgos][kProtos] = {};
  double bandwidth_GBps[kColls][kAlgos][kProtos] = {};  // algorithm bandwidth; 0: disabled
  // The ring's before NCCL_ALGO and NCCL_PROTO (NCCL's ringbdw): what a collective falls
  // back to from 2.19 on when NCCL_ALGO leaves it nothing that runs here.
  double ring_backup_GBps[kColls][kProtos] = {};
  int max_threads[kAlgos][kProtos] = {};
  long thread_threshold[kAlgos][kProtos] = {};
};
Tuning tune(const Machine& m, const Overrides& overrides);

// The bus bandwidth `release`'s model gives one protocol of an algorithm over links of
// `bw_per_channel` GB/s per graph channel (tuning.cc's busBw before the algorithm ratio).
double protocol_bus_bw(const Machine& m, NcclRelease release, Coll coll, Algo a, Proto p, double bw_per_channel);
// The bandwidth per channel NCCL's estimate of `coll` by NVLS or the NVLS tree (`a`) starts
// from under `release`. NVLS: the slower of its graph's intra- and inter-node speeds (2.18: as
// every algorithm, the intra-node one up to 2 nodes, the inter-node one beyond); from 2.27,
// for reduce-scatter and all-gather, the intra-node one x (G - 1) / G, the inter-node x 0.9.
// The NVLS tree: the intra-node speed, or the inter-node one (half of it beyond 2 nodes) if
// slower (2.18: as NVLS). 2.28, both: the intra-node speed x the generation's efficiency
// (Hopper .85, Blackwell .74) x (channels - 1) / channels, x 2 for all-reduce's two pipelined
// operations, x (G - 1) / G for the others; at most the inter-node speed (the NVLS tree's x 2
// on 2 nodes) and the NVLS tree's per-channel cap; 0 with fewer than 2 channels.
double nvls_bandwidth(const Machine& m, NcclRelease release, Coll coll, Algo a);
// NCCL's factor from that bus bandwidth to the algorithm's (ring n / steps, NVLS 5/6, trees
// 1/2, ...; 2.28: NVLS and the NVLS tree n / steps) under `release`.
double algorithm_ratio(const Machine& m, NcclRelease release, Coll coll, Algo a);
// The pace the kernels keep, whatever the release: kKernelPaceRelease's protocol_bus_bw
// (its LL figure is NCCL's estimate of the LL kernel, whose code is the same in every
// modelled release).
inline double kernel_bus_bw(const Machine& m, Coll coll, Algo a, Proto p, double bw_per_channel) {
  return protocol_bus_bw(m, kKernelPaceRelease, coll, a, p, bw_per_channel);
}
// The latency the kernels pay per hop and once (NCCL 2.18's hwLat and baseLat, us): what
// collective_time.hpp charges in every release (2.19's table re-tunes NCCL's choice).
double hop_latency_us(Hw hw, Algo a, Proto p);
double base_latency_us(Algo a, Proto p);

struct Choice {
  Algo algo = Algo::Ring;
  Proto proto = Proto::Simple;
  int channels = 1;
  int threads = 0;
  double nccl_estimate_us = 0.0;  // what NCCL's own model predicts for it
};
// NCCL's latency for `coll` run as (a, p) under `release` (what tune() sets for the
// system's): the base and the hops the algorithm crosses, us.
double nccl_latency_us(const Machine& m, NcclRelease release, Coll coll, Algo a, Proto p);
// NCCL's latency figures for PAT under `release` (2.23 on), us: a base time, a "log latency"
// per tree level (the tree's network hop / 3.5) and "still a linear part" per rank.
struct PatLatency {
  double base_us = 8.0, level_us = 0.0, per_rank_us = 2.8;
};
PatLatency pat_latency(const Machine& m, NcclRelease release, Proto p = Proto::Simple);
// NCCL's estimate for (algo, proto) on `bytes` (ncclTopoGetAlgoTime), or -1 if disabled.
double nccl_estimate_us(const Machine& m, const Tuning& t, Coll c, Algo a, Proto p, double bytes);
// What NCCL runs for `bytes` of collective `c` (its nBytes: the whole buffer, for all-gather
// and reduce-scatter every rank's blocks). Throws std::invalid_argument when overrides leave
// nothing for it (NCCL's "no algorithm/protocol available").
Choice choose(const Machine& m, const Tuning& t, Coll c, double bytes);

}  // namespace dtsim::net::nccl
