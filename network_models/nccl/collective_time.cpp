#include "network_models/nccl/collective_time.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

namespace dtsim::net::nccl {

namespace {

using i64 = std::int64_t;

// NCCL's FIFO: NCCL_STEPS slots per connection and protocol; a slot's data bytes.
constexpr i64 kSimpleStepBytes = (i64{1} << 22) / 8;          // DEFAULT_BUFFSIZE / NCCL_STEPS
constexpr i64 kLLStepDataBytes = (8 * 512 * 8 * 16) / 8 / 2;  // LL lines x threads x steps x 16 B / steps, half data
constexpr i64 kLL128StepDataBytes = (120 * 640 * 8 * 8) / 8 * 15 / 16;  // LL128 buffer / steps x 120/128
constexpr i64 kLLGrainBytes = 8;      // ProtoLL::calcBytePerGrain
constexpr i64 kLL128GrainBytes = 60;  // ProtoLL128::calcBytePerGrain
constexpr double kP2pLLThreshold = 16384;  // NCCL_P2P_LL_THRESHOLD

constexpr double kUnlimited = std::numeric_limits<double>::infinity();

// What to time: the collective, or its latencies alone (the links' bandwidth unlimited:
// every byte takes no time, each hop's and step's latency stays).
enum class Part { Whole, Latency };

i64 divup(i64 a, i64 b) { return (a + b - 1) / b; }
i64 roundup(i64 a, i64 b) { return divup(a, b) * b; }
int ceil_log2(int n) {
  int l = 0;
  while ((1 << l) < n) ++l;
  return l;
}
int floor_log2(int n) {  // NCCL's log2i
  int l = 0;
  while (n >>= 1) ++l;
  return l;
}

// The element the kernel counts in: bytes for all-gather and broadcast (NCCL moves them
// as int8), the datatype's otherwise.
i64 element_bytes(Coll c, int element_size) { return c == Coll::AllGather || c == Coll::Broadcast ? 1 : element_size; }

// How a collective's elements reach its channels. Up to 2.19 every loop strides over all of
// them (a loop is channels x chunks, each channel taking its chunks of it). From 2.20 each
// channel takes one contiguous part and loops over it alone (enqueue.cc's addCBDCollToPlan):
// a part is the bytes over the channels, rounded up to 16 bytes and then to whole
// alignments of the protocol (computeCollAlignCount); the first channels take full parts,
// the last what is left. Rings, trees and NVLS within a node; CollNet and NVLS across nodes
// still stride (addCollnetCollToPlan).
bool contiguous_parts(const Machine& m) { return m.system.nccl >= NcclRelease::V2_20; }

// computeCollAlignCount, in elements of `elem` bytes for blocks of `threads`.
i64 align_elements(Proto p, i64 elem, i64 threads) {
  switch (p) {
    case Proto::Simple: return std::max<i64>(1, 32 * 8 * 16 / elem);        // NCCL_SIMPLE_ALIGNMENT
    case Proto::LL128: return std::max<i64>(1, 480 / elem) * (threads / 32);  // NCCL_LL128_ALIGNMENT_PER_WARP a warp
    case Proto::LL: return std::max<i64>(1, 8 / elem) * threads;              // NCCL_LL_ALIGNMENT_PER_THREAD a thread
  }
  return 1;
}

// The first (a full) channel's part of `count` elements over `channels`.
i64 first_part(i64 count, i64 elem, i64 channels, i64 align) {
  const i64 max_bytes = roundup(divup(count * elem, channels), 16);  // maxBytesPerChannel
  return std::min(roundup(divup(std::min(max_bytes, count * elem), elem), align), count);
}

// From 2.22 (scheduleCollTasksToPlan) the parts are dealt out in cells by the traffic they
// make (all-reduce two bytes a byte, reduce-scatter and all-gather n, the others one):
// 16-byte cells and at least 512 bytes of traffic a channel, the first channel its share
// rounded down; from 2.23 cells of 16 KiB of traffic (in 16 bytes: 8 KiB of an all-reduce)
// and at least 16 KiB a channel, the first channel's share rounded up; from 2.26 LL's
// traffic counts four times; from 2.29 cells of 32 KiB of traffic, and a channel's share is
// the traffic (at least 32 KiB) over the channels in 16 bytes, however small. The middle
// channels take theirs rounded up, the last what is left (the cells' padding comes off the
// last part). Each part's chunk is then sized for that part alone (calcCollChunking with
// one channel), and a ring all-reduce's last chunk is aligned to 16 bytes.
bool cell_parts(const Machine& m) { return m.system.nccl >= NcclRelease::V2_22; }

int traffic_per_byte(Coll c, int ranks) {
  return c == Coll::AllReduce ? 2 : c == Coll::AllGather || c == Coll::ReduceScatter ? ranks : 1;
}

// The largest part, in elements, of `count` over `channels` of the `max_channels` a kind of
// algorithm has (the communicator's; NVLS's for NVLS and the NVLS tree).
i64 largest_cell_part(const Machine& m, Proto p, i64 count, i64 elem, i64 traffic_per_byte, i64 channels, i64 max_channels) {
  if (count <= 0) return 0;
  const bool v2_23 = m.system.nccl >= NcclRelease::V2_23, v2_29 = m.system.nccl >= NcclRelease::V2_29;
  if (p == Proto::LL && m.system.nccl >= NcclRelease::V2_26) traffic_per_byte *= 4;
  const i64 min_traffic = v2_29 ? 32 << 10 : v2_23 ? 16 << 10 : 512;  // MinTrafficPerChannel
  const i64 cell = v2_23 ? roundup(divup(min_traffic, traffic_per_byte), 16) : 16;
  const i64 per_cell = std::max<i64>(1, cell / elem);
  const i64 cells = divup(count * elem, cell);
  const i64 traffic = std::max(v2_23 ? min_traffic : 0, count * elem * traffic_per_byte);
  const i64 share = traffic / std::min(channels, max_channels);
  const i64 traffic_per_channel = v2_29 ? roundup(share, 16) : std::max(min_traffic, share);
  const i64 traffic_per_cell = cell * traffic_per_byte;
  i64 per_channel = std::min(cells, divup(traffic_per_channel, traffic_per_cell));
  const i64 first_share = v2_23 ? divup(traffic_per_channel, traffic_per_cell) : traffic_per_channel / traffic_per_cell;
  i64 lo = max_channels == 1 ? cells : std::min(cells, first_share);
  i64 mid = (cells - lo) / per_channel, hi = (cells - lo) % per_channel;
  if ((lo != 0) + mid + (hi != 0) > max_channels) {  // more parts than channels: the last takes the rest
    mid = max_channels - 2;
    per_channel = (cells - lo) / (mid + 1);
    hi = per_channel + (cells - lo) % (mid + 1);
  }
  if (hi == 0 && mid != 0) hi = per_channel, --mid;
  if (lo == 0) {
    if (mid == 0) lo = hi, hi = 0;
    else lo = per_channel, --mid;
  }
  i64 count_lo = lo * per_cell, count_hi = hi * per_cell;
  const i64 count_mid = mid != 0 ? per_channel * per_cell : 0;
  (count_hi != 0 ? count_hi : count_lo) -= cells * per_cell - count;
  return std::max({count_lo, count_mid, count_hi});
}

// The channels an algorithm's bandwidth is shared among: the communicator's (NCCL
// duplicates its graph's channels, whose kernels then share the links), or the graph's
// where NCCL_MAX_NCHANNELS or NCCL_MAX_CTAS leave fewer (NcclEnv): a channel, one thread
// block, moves at most the speed the search gives its graph channel.
int sharing_channels(int channels, const Graph& g) { return std::max(channels, g.channels); }

struct Hop {
  double rate = 0.0;  // bytes per us per channel
  double lat = 0.0;   // us
  int waits = 1;      // Simple: hop latencies a slice waits (slice_waits)
};

// The hop latencies a Simple slice (a point-to-point step) pays on the GPU. NCCL reads
// over NVLink between Ampere GPUs (P2P read: ncclTopoCheckP2p) and writes elsewhere: a
// reader waits for the sender's flag and then for its own loads across the link, two
// crossings in a row; a writer's data and flag cross once, and the receiver reads its own
// memory.
int slice_waits(const Machine& m, Hw hw) { return hw == Hw::NvLink && m.system.gpu == GpuArch::Ampere ? 2 : 1; }

// The ring's intra-node and network hops for protocol p. The channels share the node's
// links (a GPU's NVLinks, or its PCIe link): NCCL's search speed only sets how many channels
// there are (within a node it fills the links: 12 x 20 = 240 GB/s on an A100; across nodes
// it is sized for the NICs, 24 GB/s per channel for HDR), and the kernels' hops between the
// node's GPUs move data as fast as those links carry it.
void ring_hops(const Machine& m, Coll c, Proto p, Part part, Hop& intra, Hop& net) {
  const Graph& g = m.graphs[index(Algo::Ring)];
  const double per_channel = g.channels > 0 ? std::max(g.bw_intra, g.node_bw / g.channels) : g.bw_intra;
  intra.rate = kernel_bus_bw(m, c, Algo::Ring, p, per_channel) / sharing_channels(m.channels, g) * 1e3;
  net.rate = kernel_bus_bw(m, c, Algo::Ring, p, g.bw_inter) / sharing_channels(m.channels, g) * 1e3;
  intra.lat = hop_latency_us(g.intra, Algo::Ring, p);
  net.lat = hop_latency_us(Hw::Net, Algo::Ring, p);
  intra.waits = slice_waits(m, g.intra);
  if (m.nodes > 1 && c != Coll::Broadcast && c != Coll::Reduce) {
    const double overhead = m.system.cpu == CpuVendor::Amd ? 2.0 : 1.0;  // getNetOverhead
    intra.lat = std::max(intra.lat, p == Proto::Simple ? 3 * overhead : overhead);
  }
  if (m.nodes == 1) net = intra;
  if (part == Part::Latency) intra.rate = net.rate = kUnlimited;
}

// One step's work on a hop for a chunk of rc elements: the data over the channel's share of
// the hop's links and, for Simple, whose threads wait for and post every slice themselves,
// `waits` x the GPU-side hop latency `sync` per slice that carries data (a chunk smaller
// than the slice size has one: the other's flags carry nothing to wait for).
double step_cost(Proto p, i64 rc, i64 elem, double rate, double sync, int waits, int slice_per_chunk, int step_per_slice) {
  if (p != Proto::Simple) return static_cast<double>(rc * elem) / rate;
  const i64 step_elems = kSimpleStepBytes / elem;
  const i64 slice = std::max(divup(rc, 16 * slice_per_chunk) * 16, step_elems * step_per_slice / 32);
  double cost = 0.0;
  for (int j = 0; j < slice_per_chunk; ++j) {
    const i64 here = std::clamp<i64>(rc - j * slice, 0, slice);
    if (here > 0) cost += static_cast<double>(here * elem) / rate + waits * sync;
  }
  return cost;
}

// One step's work on a network hop. The GPU writes each slice into the FIFO the proxy
// sends from and posts it, and the NIC carries it while the GPU writes the next (NCCL_STEPS
// slots ahead), so for Simple a step costs the slower of the wire and the GPU's side (its
// copies over the node's links and its hop latencies per slice), not their sum. LL and
// LL128 lines go out as they are written.
double net_step_cost(Proto p, i64 rc, i64 elem, const Hop& intra, const Hop& net, int slice_per_chunk, int step_per_slice) {
  if (p != Proto::Simple) return static_cast<double>(rc * elem) / net.rate;
  const double wire = step_cost(p, rc, elem, net.rate, 0.0, 0, slice_per_chunk, step_per_slice);
  const double gpu = step_cost(p, rc, elem, intra.rate, intra.lat, intra.waits, slice_per_chunk, step_per_slice);
  return std::max(wire, gpu);
}

// A ring collective as NCCL's kernel runs it: loops over nc channels x chunks_per_loop
// chunks, each chunk crossing K steps.
struct RingPlan {
  Proto p;
  i64 nc, nt, elem;
  int n, N;
  bool pipeline;    // broadcast, reduce: chunks forwarded down the ring
  bool ring_twice;  // all-reduce: reduce-scatter then all-gather, n chunks a loop
  i64 total_bytes, count, chunks_per_loop, chunk, loop;
  int K, net_hops, slice_per_chunk, slice_steps;
  bool contiguous;  // 2.20 on: the busiest channel loops over its part alone
  i64 align, part;  // the last chunk's alignment (all-reduce) and the busiest part, elements
};

RingPlan ring_plan(const Machine& m, Coll c, double bytes, const Choice& ch, int element_size) {
  RingPlan r;
  r.p = ch.proto;
  r.n = m.ranks;
  r.N = m.nodes;
  r.nc = ch.channels;
  r.nt = ch.threads;
  r.elem = element_bytes(c, element_size);
  r.pipeline = c == Coll::Broadcast || c == Coll::Reduce;
  r.ring_twice = c == Coll::AllReduce;
  // Elements each loop is over: the whole buffer (all-reduce, broadcast, reduce), one rank's
  // block (all-gather, reduce-scatter).
  r.total_bytes = static_cast<i64>(bytes);
  const i64 total_elems = r.total_bytes / r.elem;
  r.count = r.ring_twice || r.pipeline ? total_elems : total_elems / r.n;
  r.chunks_per_loop = r.ring_twice ? r.n : 1;
  r.K = r.ring_twice ? 2 * (r.n - 1) : r.n - 1;
  // Network crossings on a chunk's path: each turn of the ring crosses N; all-reduce's two
  // turns but two hops, with one GPU a node all K hops.
  r.net_hops = r.N == 1 ? 0 : r.ring_twice ? std::min(2 * r.N, r.K) : r.N - 1;
  const int chunk_steps = r.pipeline ? 1 : 4;
  r.slice_steps = r.pipeline ? 1 : 2;
  r.slice_per_chunk = chunk_steps / r.slice_steps;
  switch (r.p) {
    case Proto::Simple: r.chunk = kSimpleStepBytes / r.elem * chunk_steps; break;
    case Proto::LL: r.chunk = kLLStepDataBytes / r.elem; break;
    case Proto::LL128: r.chunk = kLL128StepDataBytes / r.elem; break;
  }
  r.loop = r.nc * r.chunks_per_loop * r.chunk;
  r.contiguous = contiguous_parts(m);
  if (cell_parts(m)) {
    r.align = std::max<i64>(1, 16 / r.elem);
    r.part = largest_cell_part(m, r.p, r.count, r.elem, traffic_per_byte(c, r.n), r.nc, m.channels);
  } else {
    r.align = align_elements(r.p, r.elem, r.nt);
    r.part = r.contiguous ? first_part(r.count, r.elem, r.nc, r.align) : 0;
  }
  return r;
}

// The chunk of a loop with `rest` elements still to go: whole loops have the full one.
i64 ring_chunk(const RingPlan& r, i64 rest) {
  if (r.p == Proto::Simple)
    return roundup(std::min(r.chunk, divup(rest, r.nc * r.chunks_per_loop)), (r.nt - 32) * 8 / r.elem);
  if (r.p == Proto::LL128) {
    const i64 min_chunk = std::max<i64>(1, r.nt * (kLL128GrainBytes / r.elem) / (r.pipeline ? 1 : 2));
    return std::min(r.chunk, divup(rest, r.nc * r.chunks_per_loop * min_chunk) * min_chunk);
  }
  if (r.ring_twice) {
    const i64 min_chunk = std::max<i64>(1, r.nt * kLLGrainBytes / r.elem);
    return std::min(r.chunk, divup(rest, r.nc * r.chunks_per_loop * min_chunk) * min_chunk);
  }
  // computeColl's lastChunkSize for the loop that is not full.
  const i64 nchunks = r.pipeline ? 1 : r.n;
  const i64 loop_bytes = r.nc * nchunks * kLLStepDataBytes;
  const i64 tail_bytes = r.total_bytes - (r.total_bytes / loop_bytes) * loop_bytes;
  const i64 last = roundup(divup(tail_bytes, r.nc * nchunks), r.nt * 8) / r.elem;
  return rest < r.loop ? std::max<i64>(last, 1) : r.chunk;
}

// One loop whose chunks have rc elements, the first of a pipeline (its fill) or not.
double ring_loop_us(const RingPlan& r, const Hop& intra, const Hop& net, i64 rc, bool first) {
  // Simple pays its hop latencies per slice on the GPU (the network's own latency, which
  // the proxy's pipeline overlaps, once per crossing); LL and LL128 once per step.
  const bool simple = r.p == Proto::Simple;
  const double ci = step_cost(r.p, rc, r.elem, intra.rate, intra.lat, intra.waits, r.slice_per_chunk, r.slice_steps);
  const double cn = r.N == 1 ? ci : net_step_cost(r.p, rc, r.elem, intra, net, r.slice_per_chunk, r.slice_steps);
  const double li = simple ? 0.0 : intra.lat, ln = simple && r.N == 1 ? 0.0 : net.lat;
  if (r.pipeline) {
    // The first chunk crosses n-1 hops (Simple: stored and forwarded whole at each; LL
    // and LL128 forward lines as they arrive); every later one follows a slowest hop behind.
    if (!first) return std::max(ci, cn);
    return simple ? (r.n - 1 - r.net_hops) * ci + r.net_hops * (ln + cn)
                  : (r.n - 1 - r.net_hops) * li + r.net_hops * ln + std::max(ci, cn);
  }
  const double path = (r.K - r.net_hops) * (li + ci) + r.net_hops * (ln + cn);
  const double bandwidth = r.K * std::max(ci, cn) + std::max(li, ln);
  return std::max(path, bandwidth);
}

double ring_us(const Machine& m, Coll c, double bytes, const Choice& ch, int element_size, Part part) {
  const RingPlan r = ring_plan(m, c, bytes, ch, element_size);
  Hop intra, net;
  ring_hops(m, c, r.p, part, intra, net);
  // Whole loops are alike: the first (a pipeline's fill), then the others, then the rest.
  // Striding, a loop spans every channel and its chunks shrink for the rest; a channel's own
  // part has loops of chunks_per_loop chunks, the last with what is left (all-reduce: over
  // the n chunks, in whole alignments; runRing's lastChunkCount). A chunk rounded up past
  // what is left carries only that (the kernel's nelem), and every step of the ring takes
  // the fullest chunk's time.
  const i64 per_loop = r.contiguous ? r.chunks_per_loop * r.chunk : r.loop;
  const i64 elements = r.contiguous ? r.part : r.count;
  const i64 whole = elements / per_loop, rest = elements % per_loop;
  const i64 full_chunk = r.contiguous ? r.chunk : ring_chunk(r, r.count);
  const i64 rest_chunk =
      std::min(rest, !r.contiguous ? ring_chunk(r, rest) : r.ring_twice ? roundup(divup(rest, r.n), r.align) : rest);
  double t = base_latency_us(Algo::Ring, r.p);
  if (whole > 0) {
    t += ring_loop_us(r, intra, net, full_chunk, true);
    if (whole > 1) t += static_cast<double>(whole - 1) * ring_loop_us(r, intra, net, full_chunk, false);
  }
  if (rest > 0) t += ring_loop_us(r, intra, net, rest_chunk, whole == 0);
  return t;
}

double tree_us(const Machine& m, double bytes, const Choice& ch, int element_size, Part part) {
  const Proto p = ch.proto;
  const Graph& g = m.graphs[index(Algo::Tree)];
  const i64 nc = ch.channels, nt = ch.threads, elem = element_size;
  const i64 count = static_cast<i64>(bytes) / elem;
  const int depth_intra = m.per_node - 1, depth_inter = ceil_log2(m.nodes);
  const int depth = std::max(1, depth_intra + depth_inter);
  const i64 b = static_cast<i64>(bytes);
  // A channel's chunks: `chunks` of `chunk` elements, the last of `last`.
  i64 chunk = 0, chunks = 1, last = 0;
  if (!contiguous_parts(m)) {
    if (p == Proto::Simple) {
      // computeColl: 512 KiB, halved while the buffer gives each channel too few chunks.
      i64 c = kSimpleStepBytes;
      while (b / (nc * c) < depth * 8 && c > 131072) c /= 2;
      while (b / (nc * c) < depth * 4 && c > 65536) c /= 2;
      while (b / (nc * c) < depth && c > 32768) c /= 2;
      chunk = c / elem;
    } else {
      chunk = (p == Proto::LL ? kLLStepDataBytes : kLL128StepDataBytes) / elem;  // the kernel's whole step
    }
    if (nc * chunk > count) {
      const i64 min_chunk = p == Proto::Simple ? (nt - 64) * 8 * (8 / elem)
                                                : nt * ((p == Proto::LL ? kLLGrainBytes : kLL128GrainBytes) / elem);
      chunk = divup(count, nc * std::max<i64>(1, min_chunk)) * std::max<i64>(1, min_chunk);
    }
    chunks = std::max<i64>(1, divup(count, nc * chunk));
    last = chunk;
  } else {
    // 2.20 (computeCollChunkInfo): a whole FIFO step (Simple 512 KiB, no longer halved);
    // LL128 halved while the buffer gives each channel few chunks for the tree's steps (2.22:
    // the channel's own part).
    const i64 own = cell_parts(m) ? largest_cell_part(m, p, count, elem, traffic_per_byte(Coll::AllReduce, m.ranks), nc, m.channels)
                                  : first_part(count, elem, nc, align_elements(p, elem, nt));
    const i64 sized_bytes = cell_parts(m) ? own * elem : b, sized_channels = cell_parts(m) ? 1 : nc;
    i64 c = p == Proto::Simple ? kSimpleStepBytes : p == Proto::LL ? kLLStepDataBytes : kLL128StepDataBytes;
    if (p == Proto::LL128) {
      const double ppn = static_cast<double>(m.ranks) / m.nodes;
      const double steps = 1 + floor_log2(m.nodes) + 0.1 * ppn;  // nstepsLL128
      while (static_cast<double>(sized_bytes / (sized_channels * c)) < steps * 64 / ppn && c > 131072) c /= 2;
      while (static_cast<double>(sized_bytes / (sized_channels * c)) < steps * 16 / ppn && c > 32768) c /= 2;
    }
    chunk = c / elem;
    chunks = std::max<i64>(1, divup(own, chunk));
    last = own - (chunks - 1) * chunk;
    if (chunks == 1) chunk = last;
  }
  auto rate = [&](double bw) {
    return part == Part::Latency ? kUnlimited
                                 : kernel_bus_bw(m, Coll::AllReduce, Algo::Tree, p, bw) * 0.5 / sharing_channels(m.channels, g) * 1e3;
  };
  const double ri = rate(g.bw_intra), rn = m.nodes > 1 ? rate(g.bw_inter) : ri;
  const double li = hop_latency_us(g.intra, Algo::Tree, p), ln = hop_latency_us(Hw::Net, Algo::Tree, p);
  const double stage = static_cast<double>(chunk * elem) / std::min(ri, rn);
  const double last_stage = static_cast<double>(last * elem) / std::min(ri, rn);
  const double path = 2 * (depth_intra * li + depth_inter * ln);
  // Simple stores and forwards each chunk, with its flags, at every level (2 depth stages to
  // fill); LL and LL128 forward lines as they arrive (one chunk's time to fill).
  const double more = static_cast<double>(chunks - 1);
  if (p == Proto::Simple)
    return base_latency_us(Algo::Tree, p) + path + (more + 2 * depth - 1) * (stage + li) + (last_stage + li);
  return base_latency_us(Algo::Tree, p) + path + more * stage + last_stage;
}

// The chunk of NVLS, the NVLS tree and CollNet (computeColl, computeCollChunkInfo): NVLS at
// most its chunk (Machine::nvls_chunk; from 2.19 32 KiB across nodes where NCCL's NVLS
// bandwidth is under 150 GB/s) halved while the buffer gives the channels' heads
// (concurrentOps) under 64, 8 and 2 loops; the NVLS tree from Machine::nvls_tree_chunk,
// halved under 32, 16, 4 and 1; CollNet Direct a FIFO step halved while the channels'
// heads get fewer than 64, 8 and 8 loops times its depth (2 with peers in the node, else 1),
// CollNet Chain 256 KiB halved under 64, 8 and 1 chunks a channel times its depth (the GPUs
// of a node).
// `bytes` over `channels`: the whole collective over its channels, or from 2.22 (within a
// node and for the NVLS tree) a channel's part over one.
double switch_chunk_bytes(const Machine& m, const Tuning& t, const Choice& ch, double bytes, int channels, int heads) {
  const NcclRelease release = m.system.nccl;
  const double ops = static_cast<double>(channels) * heads;
  double chunk = m.nvls_chunk;
  if (ch.algo == Algo::Nvls) {
    const double nvls_bw = t.bandwidth_GBps[index(Coll::AllReduce)][index(Algo::Nvls)][index(Proto::Simple)];
    if (release >= NcclRelease::V2_19 && m.nodes > 1 && nvls_bw < 150) chunk = 32768;
    if (bytes < 64 * ops * chunk && chunk > 65536) chunk = 65536;
    if (bytes < 8 * ops * chunk && chunk > 32768) chunk = 32768;
    if (bytes < 2 * ops * chunk && chunk > 16384) chunk = 16384;
  } else if (ch.algo == Algo::NvlsTree) {
    chunk = m.nvls_tree_chunk;
    if (bytes < 32 * ops * chunk && chunk > 262144) chunk = 262144;
    if (bytes < 16 * ops * chunk && chunk > 131072) chunk = 131072;
    if (bytes < 4 * ops * chunk && chunk > 65536) chunk = 65536;
    if (bytes < 1 * ops * chunk && chunk > 32768) chunk = 32768;
  } else if (ch.algo == Algo::CollNetDirect) {
    const double depth = m.per_node > 1 ? 2 : 1;
    const auto loops = [&] { return std::floor(bytes / (ops * chunk)); };  // nBytes / (nc nHeads chunk), integer
    chunk = static_cast<double>(kSimpleStepBytes);
    while (loops() < depth * 64 && chunk > 131072) chunk /= 2;
    while (loops() < depth * 8 && chunk > 65536) chunk /= 2;
    while (loops() < depth * 8 && chunk > 32768) chunk /= 2;
  } else if (ch.algo == Algo::CollNetChain) {
    const double depth = m.per_node;
    const auto chunks = [&] { return std::floor(bytes / (channels * chunk)); };
    chunk = 262144;
    while (chunks() < depth * 64 && chunk > 131072) chunk /= 2;
    while (chunks() < depth * 8 && chunk > 65536) chunk /= 2;
    while (chunks() < depth && chunk > 32768) chunk /= 2;
  }
  return chunk;
}

// NVLS, NVLS tree, CollNet: the kernel's warps are split into roles working on successive
// loops at once (all-reduce: scatter the input to the reduction's buffers, reduce through
// the switch or the network and send the result back, gather it to the output; 2.20's
// reduce-scatter and all-gather: the first two, or the last two), each loop nHeads chunks
// per channel at NCCL's bandwidth per channel; a loop hands over between roles through
// flags, one NVLink Simple hop latency each. So: NCCL's latency (base and network hops) +
// a hand-over per role + (loops + roles - 1) x a loop's time.
// Within a node NVLS moves data as fast as the GPUs' NVLinks carry it, as the ring does
// (ring_hops): NCCL's search gives each of the k channels one share of every GPU's NVLinks
// and its head two (k + 1 shares a GPU), rounded down to its speed table, which sets NCCL's
// estimate but not the kernels' pace; with 8 GPUs the share is the table's speed (360 / 9 =
// 40 GB/s on an H100), with 3 - 7 it is above it.
double switch_reduction_us(const Machine& m, const Tuning& t, Coll c, double bytes, const Choice& ch, int element_size,
                           Part part) {
  // The kernels' time is NCCL's estimate of it (latency and bandwidth), each release's own up
  // to kKernelPaceRelease: 2.28's re-estimates of NVLS and the NVLS tree await a curve that
  // confirms them. Within a node NVLS's bandwidth is kKernelPaceRelease's in every release
  // (reduce-scatter and all-gather: 2.23 at the bus bandwidth, before at 5/6 of it; 2.27 over
  // (G - 1) / G of the channels' speed).
  const NcclRelease release = m.system.nccl, estimate = std::min(release, kKernelPaceRelease);
  const double lat = estimate == release ? t.latency_us[index(c)][index(ch.algo)][index(ch.proto)]
                                         : nccl_latency_us(m, estimate, c, ch.algo, ch.proto);
  double bw = t.bandwidth_GBps[index(c)][index(ch.algo)][index(ch.proto)];
  if (!(bw > 0)) return lat;
  const bool nvls = ch.algo == Algo::Nvls || ch.algo == Algo::NvlsTree;
  if (ch.algo == Algo::Nvls && m.nodes == 1) {
    const Graph& g = m.graphs[index(Algo::Nvls)];
    const double share = m.system.intra.nvlink_links * m.nvlink_rate / (g.channels + 1);
    if (share > g.bw_intra) bw *= share / g.bw_intra;
  }
  const NcclRelease pace = ch.algo == Algo::Nvls && m.nodes == 1 ? kKernelPaceRelease : estimate;
  if (nvls && pace != release)
    bw *= algorithm_ratio(m, pace, c, ch.algo) * nvls_bandwidth(m, pace, c, ch.algo) /
          (algorithm_ratio(m, release, c, ch.algo) * nvls_bandwidth(m, release, c, ch.algo));
  // CollNet's bandwidth is its heads' (NCCL gives it the same whatever channels run it).
  const int total_channels = nvls ? sharing_channels(m.nvls_channels, m.graphs[index(Algo::Nvls)]) : ch.channels;
  const double rate = part == Part::Latency ? kUnlimited : bw / total_channels * 1e3;  // bytes per us per channel
  const int heads = std::max(1, m.graphs[index(nvls ? Algo::Nvls : ch.algo)].channels);  // NVLS: a head per graph channel
  const double handover = hop_latency_us(m.graphs[index(Algo::Ring)].intra, Algo::Ring, Proto::Simple);
  const int roles = c == Coll::AllReduce ? 3 : 2;
  const double fixed = lat + roles * handover;
  // 2.20 on, NVLS within a node and the NVLS tree give each channel a contiguous part, whose
  // last loop is what is left (contiguous_parts); otherwise loops stride over the channels.
  if (contiguous_parts(m) && (ch.algo == Algo::NvlsTree || (ch.algo == Algo::Nvls && m.nodes == 1))) {
    const i64 elem = element_size, count = static_cast<i64>(bytes) / elem;
    // 2.22 deals out one rank's block for reduce-scatter and all-gather (its part is then
    // every rank's share of it) and sizes the chunk for the part.
    const i64 blocks = c == Coll::AllGather || c == Coll::ReduceScatter ? m.ranks : 1;
    const i64 part_elems =
        cell_parts(m) ? blocks * largest_cell_part(m, Proto::Simple, count / blocks, elem, traffic_per_byte(c, m.ranks), ch.channels,
                                                   m.nvls_channels)
                      : first_part(count, elem, ch.channels, align_elements(Proto::Simple, elem, ch.threads));
    const double chunk = cell_parts(m) ? switch_chunk_bytes(m, t, ch, static_cast<double>(part_elems * elem), 1, heads)
                                       : switch_chunk_bytes(m, t, ch, bytes, ch.channels, heads);
    const i64 loop_elems = heads * static_cast<i64>(chunk) / elem;
    const i64 whole = part_elems / loop_elems, rest = part_elems % loop_elems;
    const double full = static_cast<double>(loop_elems * elem) / rate, last = static_cast<double>(rest * elem) / rate;
    return fixed + (roles - 1) * (whole > 0 ? full : last) + static_cast<double>(whole) * full + (rest > 0 ? last : 0.0);
  }
  // A loop is a chunk for each head (CollNet Chain: one chunk).
  const double chunk = switch_chunk_bytes(m, t, ch, bytes, ch.channels, heads);
  const double per_channel = bytes / ch.channels;
  const double loop = std::min(per_channel, (ch.algo == Algo::CollNetChain ? 1 : heads) * chunk);
  const double loops = std::ceil(per_channel / loop);
  return fixed + (loops + roles - 1) * (loop / rate);
}

// PAT (reduce-scatter and all-gather with one GPU per node, 2.23 on): every rank roots a
// binomial tree over the dimensions d < k = ceil(log2 n) (peers rank +- 2^d), and a chunk's
// piece of another rank's block crosses one dimension per set bit of its offset s from this
// rank (PatAGAlgorithm, PatRSAlgorithm): n_d pieces a chunk cross dimension d, the offsets
// whose lowest set bit is d (n / 2^(d+1) for n a power of two), n - 1 in all, as on the ring,
// but no piece waits behind more than k network levels. A channel takes its part of a rank's
// block (cells, as the ring's) in chunks of a FIFO step, 512 KiB, halved down to 64 KiB while
// 32 chunks (reduce-scatter 16) exceed the part's bytes over every rank (calcCollChunking).
// The kernel sends up to f pieces of a dimension in one network message, f doubling from 1
// while a chunk holds two parts f times over, up to n / 2 (the algorithm's postFreq), and
// from 2.26 works on up to min(f, 16) steps at once (its worker groups; one before). A step
// handles one piece: received (and forwarded, or reduced and sent on), or the rank's own sent
// on a dimension: S = n - 1 + k steps a chunk. The chunks run one after another, each
//   max(k (level + step) + sum over d of min(f, n_d) b / r,
//       max((n - 1) b / r, S step / groups) + level + step)
// (the deepest piece's path through a message on every dimension; or the NIC carrying every
// piece, or the steps, and the last message's level) with b a piece's bytes, r the channel's
// share of the NICs at NCCL's PAT bandwidth (0.75 of the tree graph's, kernel_bus_bw), and
// NCCL's own PAT latency figures (pat_latency): level = its log latency per tree level, step =
// its linear part per rank (a step a rank), after its base time once.
i64 pieces_over_dimension(i64 n, int d) {
  const i64 p = i64{1} << d;
  return p < n ? (n - 1 - p) / (2 * p) + 1 : 0;
}

double pat_us(const Machine& m, Coll c, double bytes, const Choice& ch, int element_size, Part part) {
  const PatLatency lat = pat_latency(m, m.system.nccl);
  const i64 n = m.ranks, elem = element_bytes(c, element_size);
  const int k = ceil_log2(m.ranks);
  const i64 count = static_cast<i64>(bytes) / elem / n;  // one rank's block
  if (count <= 0) return lat.base_us;
  const i64 part_elems = largest_cell_part(m, Proto::Simple, count, elem, traffic_per_byte(c, m.ranks), ch.channels, m.channels);
  i64 chunk_bytes = kSimpleStepBytes;
  const i64 chunks_over = c == Coll::AllGather ? 32 : 16;
  while (chunk_bytes * chunks_over > n * part_elems * elem && chunk_bytes > 65536) chunk_bytes /= 2;
  const i64 chunk = std::max<i64>(1, chunk_bytes / elem);
  i64 f = 1;
  while (chunk / (part_elems * f) >= 2 && f < n / 2) f *= 2;
  const i64 groups = m.system.nccl >= NcclRelease::V2_26 ? std::min<i64>(f, 16) : 1;
  i64 path_pieces = 0;
  for (int d = 0; d < k; ++d) path_pieces += std::min(f, pieces_over_dimension(n, d));
  const double r = part == Part::Latency ? kUnlimited
                                         : kernel_bus_bw(m, c, Algo::Pat, Proto::Simple, m.graphs[index(Algo::Pat)].bw_inter) /
                                               sharing_channels(m.channels, m.graphs[index(Algo::Pat)]) * 1e3;
  const double step = lat.per_rank_us, steps = static_cast<double>(n - 1 + k);
  auto chunk_us = [&](i64 nelem) {
    const double b = static_cast<double>(nelem * elem);
    const double path = k * (lat.level_us + step) + static_cast<double>(path_pieces) * b / r;
    const double busiest = std::max(static_cast<double>(n - 1) * b / r, steps * step / static_cast<double>(groups));
    return std::max(path, busiest + lat.level_us + step);
  };
  const i64 whole = part_elems / chunk, rest = part_elems % chunk;
  return lat.base_us + static_cast<double>(whole) * chunk_us(chunk) + (rest > 0 ? chunk_us(rest) : 0.0);
}

double time_us(const Machine& m, const Tuning& t, Coll c, double bytes, const Choice& choice, int element_size, Part part) {
  if (m.ranks <= 1 || !(bytes > 0)) return 0.0;
  element_size = std::clamp(element_size, 1, 8);
  switch (choice.algo) {
    case Algo::Ring: return ring_us(m, c, bytes, choice, element_size, part);
    case Algo::Tree: return tree_us(m, bytes, choice, element_size, part);
    case Algo::CollNetDirect:
    case Algo::CollNetChain:
    case Algo::Nvls:
    case Algo::NvlsTree: return switch_reduction_us(m, t, c, bytes, choice, element_size, part);
    case Algo::Pat: return pat_us(m, c, bytes, choice, element_size, part);
  }
  return 0.0;
}

}  // namespace

double collective_us(const Machine& m, const Tuning& t, Coll c, double bytes, const Choice& choice, int element_size) {
  return time_us(m, t, c, bytes, choice, element_size, Part::Whole);
}

double collective_latency_us(const Machine& m, const Tuning& t, Coll c, double bytes, const Choice& choice, int element_size) {
  return std::min(time_us(m, t, c, bytes, choice, element_size, Part::Latency),
                  collective_us(m, t, c, bytes, choice, element_size));
}

P2pSplit p2p_split(const Machine& m, double bytes) {
  const NcclRelease release = m.system.nccl;
  const P2pChannels& pc = m.p2p;
  const bool nodes = m.nodes > 1;
  const i64 step = pc.chunk_bytes;
  // Parts of at least an eighth of a step (across nodes from 2.20: half), at most 32 steps
  // (across nodes: one).
  const i64 min_part = nodes && release >= NcclRelease::V2_20 ? step / 2 : step / 8;
  const i64 max_part = nodes ? step : step * 32;
  // One channel per operation when every peer has one (nChannelsMin); up to 2.19 no more than
  // four operations a channel (nChannelsMax), both within one node only.
  int most = pc.per_peer, least = pc.per_peer;
  if (!nodes || release >= NcclRelease::V2_20)
    while (least * m.ranks > pc.total && least > 1) least /= 2;
  if (!nodes && release < NcclRelease::V2_20)
    while (most * m.ranks > pc.total * 4 && most > 1) most /= 2;
  const i64 b = std::max<i64>(0, static_cast<i64>(bytes));
  P2pSplit out;
  if (release < NcclRelease::V2_22) {
    // calcP2pChunkSize: parts of at least min_part, doubling the channels while a part
    // exceeds max_part; the message is cut in parts of that size (the last the rest), one
    // a channel.
    i64 size = std::max(min_part, divup(b, least));
    int channels = least;
    while (size > max_part && channels <= most / 2) {
      channels *= 2;
      size = divup(b, channels);
    }
    const i64 part = roundup(size, min_part);
    out.channels = static_cast<int>(std::min<i64>(std::max<i64>(1, divup(b, part)), pc.per_peer));
    out.part_bytes = static_cast<double>(std::min(part, b));
  } else {
    // addP2pToPlan: as few channels as parts of min_part need (up to nChannelsMin), doubled
    // while a part exceeds max_part; the message split evenly among them in whole 4 KiB
    // (ncclP2pPartBounds).
    int channels = static_cast<int>(std::min<i64>(least, std::max<i64>(1, divup(b, min_part))));
    i64 part = std::max(min_part, divup(b, channels));
    while (part > max_part && channels <= most / 2) {
      channels *= 2;
      part = divup(b, channels);
    }
    out.channels = channels;
    out.part_bytes = static_cast<double>(std::min(roundup(divup(b, channels), 4096), b));
  }
  // LL up to NCCL_P2P_LL_THRESHOLD: the message (up to 2.21), a channel of the peer's
  // (2.22 - 2.28: of its nChannelsMax), a channel the message uses (2.29).
  const double threshold = release < NcclRelease::V2_22   ? kP2pLLThreshold
                           : release < NcclRelease::V2_29 ? most * kP2pLLThreshold
                                                          : out.channels * kP2pLLThreshold;
  out.proto = bytes <= threshold ? Proto::LL : Proto::Simple;
  out.step_bytes = static_cast<double>(step);
  return out;
}

Proto p2p_protocol(const Machine& m, double bytes) { return p2p_split(m, bytes).proto; }

int p2p_ports(const Machine& m) { return m.ranks + m.nodes * std::max(1, m.system.network.nics_per_node); }

P2pTiming p2p_timing(const Machine& m, int src, int dst, double bytes) {
  if (src == dst) return {.egress = src, .ingress = dst};
  const P2pSplit split = p2p_split(m, bytes);
  const Proto p = split.proto;
  const double efficiency = p == Proto::LL ? 0.5 : 1.0;  // LL: 8 data bytes per 16-byte line
  const System& s = m.system;
  const int node_a = src / m.per_node, node_b = dst / m.per_node;
  const int local_a = src % m.per_node, local_b = dst % m.per_node;
  const double nvlink = s.intra.nvlink_links * m.nvlink_rate;
  double bw = 0.0, lat = 0.0;
  int egress = src, ingress = dst;
  auto intra_path = [&](int a, int b, double& path_bw, Hw& hw) {
    if (s.intra.kind == IntraKind::NvSwitch || s.bridged(a, b)) {
      path_bw = nvlink;
      hw = Hw::NvLink;
    } else {
      path_bw = m.pci_bw;
      const bool cross_socket = s.sockets == 2 && (a < s.gpus_per_node / 2) != (b < s.gpus_per_node / 2);
      if (cross_socket) path_bw = std::min(path_bw, m.inter_cpu_bw);
      hw = Hw::Pci;
    }
  };
  double wire_us = 0.0, share = 1.0;
  if (node_a == node_b) {
    Hw hw = Hw::NvLink;
    intra_path(local_a, local_b, bw, hw);
    lat = hop_latency_us(hw, Algo::Ring, p);
    // The message's channels, each a thread block at most at the speed NCCL's search gives a
    // channel of the ring's graph (over a bridge of a PCIe box, whose ring crosses PCIe,
    // NCCL's figure for one NVLink), sharing the path; Simple waits for and posts every step
    // of its part (its hop latencies each after the first, as the ring's slices).
    const Graph& ring = m.graphs[index(Algo::Ring)];
    const double channel_cap = hw == ring.intra ? ring.bw_intra : m.nvlink_bw;
    const double channel_bw = std::min(bw / split.channels, channel_cap);
    const double steps = p == Proto::Simple ? std::max(1.0, std::ceil(split.part_bytes / split.step_bytes)) : 1.0;
    wire_us = split.part_bytes / (channel_bw * efficiency * 1e3) + (steps - 1) * slice_waits(m, hw) * lat;
    if (wire_us > 0) share = std::min(1.0, bytes / (efficiency * wire_us * 1e3) / bw);
  } else {
    bw = std::min(m.net_bw, m.pci_bw);
    lat = hop_latency_us(Hw::Net, Algo::Ring, p);
    wire_us = bytes / (bw * efficiency * 1e3);
    const int nics = std::max(1, s.network.nics_per_node), rails = std::max(1, s.network.rails);
    const int nic_a = local_a * nics / s.gpus_per_node, nic_b = local_b * nics / s.gpus_per_node;
    int out_nic = nic_a;
    if (nic_a % rails != nic_b % rails) {  // PXN: through the NVLink peer whose NIC is on the receiver's rail
      double hop_bw = 0.0;
      Hw hw = Hw::NvLink;
      intra_path(local_a, local_a, hop_bw, hw);
      lat += hop_latency_us(hw, Algo::Ring, p);
      out_nic = nic_b;
    }
    egress = m.ranks + node_a * nics + out_nic;
    ingress = m.ranks + node_b * nics + nic_b;
  }
  return {.latency_us = base_latency_us(Algo::Ring, p) + lat,
          .wire_us = wire_us,
          .share = share,
          .egress = egress,
          .ingress = ingress};
}

double p2p_us(const Machine& m, int src, int dst, double bytes) {
  const P2pTiming t = p2p_timing(m, src, dst, bytes);
  return t.latency_us + t.wire_us;
}

double bytes_sent_per_rank(const Machine& m, Coll c, double bytes, const Choice& choice) {
  const double n = m.ranks;
  if (m.ranks <= 1) return 0.0;
  switch (choice.algo) {
    case Algo::Ring:
      switch (c) {
        case Coll::AllReduce: return 2 * (n - 1) / n * bytes;
        case Coll::ReduceScatter:
        case Coll::AllGather: return (n - 1) / n * bytes;
        case Coll::Broadcast:
        case Coll::Reduce: return bytes * (n - 1) / n;  // every rank but one forwards the buffer
      }
      break;
    case Algo::Tree: return 2 * bytes * (n - 1) / n;  // up and down every tree edge, n-1 edges
    case Algo::Pat: return (n - 1) / n * bytes;  // every other rank's piece of the block, once
    default:  // into the switch (or network) once; the reduction comes back
      return c == Coll::AllGather ? bytes / n : bytes;  // all-gather: the rank's block
  }
  return bytes;
}

}  // namespace dtsim::net::nccl
