// nccl::NcclEnv: the NCCL environment variables of a run that set up its communicator
// (NCCL_ALGO and NCCL_PROTO, which pick per collective, are tuning.hpp's Overrides), and
// their table: each variable's scenario field, `dtsim collective` flag, range and meaning,
// which the scenario reader, its echo, the schema's docs, the command's flags, `--against`
// and the table's title all read. A variable is one member and one table row.
//
// What each sets (tuning.cpp's make_machine applies them; each defaults to the value that
// leaves NCCL's own choice):
//   - NCCL_MIN_NCHANNELS, NCCL_MAX_NCHANNELS bound the rings' and trees' channels
//     (comm->nChannels, and so CollNet's, PAT's and the point-to-point channels drawn from
//     them); NCCL_MIN_CTAS, NCCL_MAX_CTAS (ncclConfig_t's minCTAs, maxCTAs) bound those and
//     NVLS's; ncclTopoPostset applies them after its own duplications: the channels are cut
//     to the maxima, then copied up to the minima. As in NCCL, a bound above the release's
//     MAXCHANNELS (32; 64 from 2.25) counts as MAXCHANNELS and a minimum of CTAs above their
//     maximum as the maximum. NCCL's estimates keep the graphs' channels; each channel of a
//     kernel moves at most its graph channel's speed (collective_time.cpp: sharing_channels);
//   - NCCL_NVLS_NCHANNELS (ncclConfig_t's nvlsCTAs from 2.28) replaces NVLS's own count (16
//     on Hopper) before the CTAs bound it;
//   - NCCL_MIN_P2P_NCHANNELS, NCCL_MAX_P2P_NCHANNELS bound the point-to-point channels drawn
//     from the communicator's; NCCL_NCHANNELS_PER_NET_PEER sets the channels a peer across
//     nodes takes (P2pChannels);
//   - NCCL_P2P_NVL_CHUNKSIZE, NCCL_P2P_NET_CHUNKSIZE, NCCL_P2P_PCI_CHUNKSIZE set a
//     point-to-point step where every GPU pair is NVLink, across nodes, or else; from 2.19 a
//     step is at most the Simple FIFO's (NCCL_BUFFSIZE / NCCL_STEPS: 512 KiB).
#pragma once

#include <span>

namespace dtsim::net::nccl {

struct NcclEnv {
  int min_nchannels = 0, max_nchannels = 64, min_ctas = 0, max_ctas = 64;
  int nvls_nchannels = 0;  // 0: NCCL's own
  int min_p2p_nchannels = 1, max_p2p_nchannels = 64;
  int nchannels_per_net_peer = 0;  // 0: NCCL's own
  int p2p_nvl_chunksize = 1 << 19, p2p_net_chunksize = 1 << 17, p2p_pci_chunksize = 1 << 17;  // bytes
  bool operator==(const NcclEnv&) const = default;
};

inline constexpr int kMinP2pChunkBytes = 4096, kMaxP2pChunkBytes = 64 << 20;

// One variable: its name, the scenario's /network field, the command's flag, the member it
// sets, the values accepted (channel counts: NCCL caps one above MAXCHANNELS, so a printed
// value above `most` counts as `most`; steps: dtsim's range) and what it does (one line,
// after "as NAME, ").
struct NcclEnvVar {
  const char* name;  // "NCCL_MAX_NCHANNELS"
  const char* field;  // "nccl_max_nchannels"
  const char* flag;   // "--nccl-max-nchannels"
  int NcclEnv::*value;
  int least, most;
  bool bytes;  // a step in bytes, not a channel count
  const char* doc;
};
std::span<const NcclEnvVar> nccl_env_vars();

// Throws std::invalid_argument naming the variable ("NCCL_MAX_NCHANNELS: 0 is not a channel
// count (1 - 64)", "NCCL_P2P_NVL_CHUNKSIZE: 4095 bytes is not a step dtsim models (4096 -
// 67108864)") for a value outside its range.
void check_nccl_env(const NcclEnv& env);

}  // namespace dtsim::net::nccl
