// What a collective takes on the GPUs once NCCL has chosen how to run it (tuning.hpp),
// following what NCCL's kernels do (src/collectives/device/*.h, prims_*.h; 2.18's, and from
// 2.20 on how a collective's elements reach the channels, below) with NCCL's own per-hop
// latencies and per-protocol bandwidths (no constant fitted to a curve).
//
// Ring (all-reduce: K = 2(n-1) steps per loop; reduce-scatter, all-gather: K = n-1). Each of
// the c channels (thread blocks) moves its share of the buffer in loops; in a loop every rank
// sends one chunk per step to its successor. Up to 2.19 a loop strides over all channels and
// the chunk rc is the kernel's: Simple min(4 FIFO steps, the rest / (c n)) rounded up to its
// threads' grain; LL128 and LL in whole grains of their threads (minChunkSize), so a small
// buffer fills fewer than c x n chunks and the busy channels move a whole grain per step.
// From 2.20 each channel loops over its own contiguous part (the buffer over the channels,
// in whole alignments of the protocol: Simple 4 KiB, LL128 480 bytes a warp, LL 8 bytes a
// thread): full chunks of FIFO steps, then the rest (all-reduce: the rest over the n chunks,
// rounded up to whole alignments). From 2.22 the parts are cells dealt out by the traffic
// they make, 16 bytes and at least 512 bytes of traffic a channel (the first channel its
// share rounded down, the others up, the last the rest; 2.23: cells and a channel's least
// of 16 KiB of traffic, the first share rounded up too), each part's chunk sized for it
// alone, and the all-reduce's last chunk rounded up to 16 bytes. A step's work on a hop:
//   LL, LL128: rc / r, and the hop's latency lat once
//   Simple:    per slice that carries data (SlicePerChunk = 2 of at least 32 KiB each; one
//              for a smaller chunk) slice / r + w x lat: the block's threads wait for and
//              post every slice themselves, w = 2 where NCCL reads across the link (NVLink
//              between Ampere GPUs: P2P read, the sender's flag and then the reader's
//              loads), 1 where it writes (data and flag together: Hopper, Blackwell, PCIe;
//              a rule of NCCL's source the H100 ring and GB200 figures served to check).
//              Across nodes that is the GPU's side
//              of a network hop, which the NIC overlaps (the proxy sends a slice while the
//              GPU writes the next): the step costs the slower of the two, and the
//              network's latency comes once per crossing
// with r = the protocol's bus bandwidth over the hop's links (NCCL's busBw for the graph's
// channels, tuning.hpp) / the communicator's channels, and lat = NCCL's latency for a hop
// over that link (hwLat: NVLink, PCIe, network; across nodes at least the network post
// overhead); a hop within a node shares the node's links (a GPU's NVLinks or PCIe link)
// among the channels, whatever speed NCCL's search rounded them to (across nodes a
// NIC-sized one). A loop takes
//   max(sum over the K hops its chunks cross of (lat + work), K x the slowest hop's work + lat)
// (the first when latency dominates: a chunk's path; the second when one hop's bandwidth
// does), and the collective NCCL's baseLat plus its loops. On the development curve (8x
// A100) the Simple law holds from 32 MiB to 8 GiB (two slices of 88 KB - 1 MiB per step);
// for chunks under 32 KiB it charges w hop latencies per step where NCCL's own estimate
// charges one, which no curve here tests.
// Broadcast and reduce run a pipeline from the root: the first chunk crosses n-1 hops
// (stored and forwarded whole by Simple; LL and LL128 forward lines as they arrive), every
// later one follows the slowest hop's work behind.
// Tree all-reduce (a chain within each node, NCCL's double binary tree across nodes):
// chunks of NCCL's tree chunk size (up to 2.19 Simple's halved for small buffers, LL's and
// LL128's a whole step; from 2.20 Simple's a whole step, LL128's halved, over the channel's
// part; 2.22 halves it for the part alone) flow up and then down through 2 x depth levels,
// the last chunk what is left:
//   baseLat + 2 (depth_intra x lat_intra + depth_inter x lat_net)
//     + Simple: (chunks + 2 depth - 2) x (chunk / r + lat) + (last / r + lat)
//     + LL, LL128: (chunks - 1) x chunk / r + last / r
// NVLS, NVLS tree and CollNet (reduction in the NVSwitch or the network): three roles on
// successive loops (scatter, reduce, gather) with a hand-over latency each: NCCL's latency
// + 3 NVLink Simple hop latencies + (loops + 2) x a loop's time at NCCL's bandwidth per
// channel (from 2.20 NVLS within a node and the NVLS tree loop over a channel's part, the
// last loop what is left; from 2.22 the chunk sized for the part); within one node NVLS's
// at the channels' unrounded share of the GPUs' NVLinks (a GPU's NVLinks over the channels
// plus one, as NCCL's search counts them), and for reduce-scatter and all-gather at the whole
// of NCCL's bus bandwidth (its 2.23 estimate; 5/6 before, as for all-reduce).
// PAT (2.23 on; reduce-scatter and all-gather with one GPU per node): a binomial tree from
// every rank, so a chunk's n - 1 pieces leave each rank once, as on the ring, but none waits
// behind more than log2(n) network levels; messages of up to f pieces of a dimension (f
// from the part and the chunk, up to n / 2), and the kernel's n - 1 + log2(n) steps a chunk
// one at a time (2.26: up to min(f, 16)): NCCL's base time + per chunk max(the deepest
// piece's path: a level latency, a step and a message on every dimension, max(every piece on
// the NIC, the steps) + a level and a step), with NCCL's own PAT latency figures (a level:
// the tree's network hop / 3.5; a step: its 2.8 us a rank) and bandwidth (0.75 of the tree
// graph's; collective_time.cpp's pat_us).
//
// Point-to-point (send/recv; gossip's neighbour exchanges): baseLat + the path's hop latency
// + the data: NVLink between GPUs of an NVSwitch node or a bridged pair, PCIe otherwise, the
// NIC across nodes, one more NVLink hop when the two GPUs' NICs are on different rails
// (PXN). Within a node a message runs on NCCL's channels for its peer (p2p_split, from
// ncclTopoComputeP2pChannels and enqueue.cc's scheduling of each release): in a one-node
// communicator a few for a small message, doubled while a channel's part exceeds 32 of
// NCCL's point-to-point steps (512 KiB over NVLink, 128 KiB otherwise); in a multi-node one
// as many as NCCL gives a peer across the network (two, or by the NICs' speed from 2.29), in
// steps of 128 KiB. Each channel is a thread block moving its part at most at the speed
// NCCL's search gives a channel of the ring's graph (20 GB/s on an A100), the channels
// sharing the path, Simple paying a hop's latency per step after the first (as the ring's
// slices); LL up to NCCL_P2P_LL_THRESHOLD (16 KiB: of the message up to 2.21, of each
// channel from 2.22). The message uses the part of its ports' speed its channels carry
// (P2pTiming::share). Across nodes a message moves at the NIC's speed.
//
// All plain double arithmetic (no libm beyond what the tuning's integer log2 needs), so the
// times are the same on every machine.
#pragma once

#include "network_models/nccl/tuning.hpp"

namespace dtsim::net::nccl {

// Microseconds the GPUs take for `bytes` (NCCL's nBytes) of `c` run as `choice` (chosen
// with `t`, whose figures NVLS and CollNet use).
// `element_size`: bytes per element of a reduction's datatype (the kernels round chunks to
// whole elements; all-gather and broadcast move bytes).
double collective_us(const Machine& m, const Tuning& t, Coll c, double bytes, const Choice& choice, int element_size = 4);
// The part of collective_us that is latency: the same collective with the links' bandwidth
// unlimited (every hop's and step's latency, no byte's time); the rest is the data on the
// links, which other transfers on them slow (net::PortFlows).
double collective_latency_us(const Machine& m, const Tuning& t, Coll c, double bytes, const Choice& choice,
                             int element_size = 4);

// How NCCL runs a message of `bytes` to a peer: the channels it is split among, the largest
// part one carries, the protocol and the Simple protocol's step (NCCL's point-to-point chunk
// size).
struct P2pSplit {
  int channels = 1;
  double part_bytes = 0.0;
  Proto proto = Proto::Simple;
  double step_bytes = 0.0;
};
P2pSplit p2p_split(const Machine& m, double bytes);

// The protocol NCCL's send/recv uses for a message of `bytes`: LL up to
// NCCL_P2P_LL_THRESHOLD (of a channel from 2.22), Simple above.
Proto p2p_protocol(const Machine& m, double bytes);

// A point-to-point message: its fixed part (NCCL's base latency and the hops') and its
// time on the wire, and the ports it holds while on the wire: the sender's way out and the
// receiver's way in, each a GPU's NVLink or PCIe port within a node, a node's NIC across
// nodes (p2p_ports of each direction per machine), and the share of their speed it uses.
struct P2pTiming {
  double latency_us = 0.0;
  double wire_us = 0.0;
  double share = 1.0;  // of each of its ports, at its own pace (its channels' part of the path's speed)
  int egress = 0, ingress = 0;  // in [0, ports(m))
};
P2pTiming p2p_timing(const Machine& m, int src, int dst, double bytes);
// Ports of each direction: one per GPU, then one per NIC of every node.
int p2p_ports(const Machine& m);

// Microseconds for `bytes` from rank `src` to rank `dst` alone (ranks fill nodes in order):
// latency plus wire time.
double p2p_us(const Machine& m, int src, int dst, double bytes);

// Bytes every rank sends for the collective as run (for the table's bytes per rank).
double bytes_sent_per_rank(const Machine& m, Coll c, double bytes, const Choice& choice);

}  // namespace dtsim::net::nccl
