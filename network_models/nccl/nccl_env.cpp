#include "network_models/nccl/nccl_env.hpp"

#include <stdexcept>

#include <fmt/format.h>

namespace dtsim::net::nccl {

std::span<const NcclEnvVar> nccl_env_vars() {
  constexpr int kB = kMinP2pChunkBytes, kMB = kMaxP2pChunkBytes;
  static constexpr NcclEnvVar vars[] = {
      {"NCCL_MIN_NCHANNELS", "nccl_min_nchannels", "--nccl-min-nchannels", &NcclEnv::min_nchannels, 0, 64, false,
       "the fewest channels the rings and trees (and so CollNet, PAT and point-to-point) run on: NCCL copies its "
       "channels up to it (0: NCCL's own count; above the release's MAXCHANNELS, 32 or 64, counts as MAXCHANNELS)"},
      {"NCCL_MAX_NCHANNELS", "nccl_max_nchannels", "--nccl-max-nchannels", &NcclEnv::max_nchannels, 1, 64, false,
       "the most channels the rings and trees (and so CollNet, PAT and point-to-point) run on; NCCL's estimates keep "
       "its graphs' channels, and each channel moves at most its graph channel's speed (64: NCCL's own count)"},
      {"NCCL_MIN_CTAS", "nccl_min_ctas", "--nccl-min-ctas", &NcclEnv::min_ctas, 0, 64, false,
       "ncclConfig_t's minCTAs, the fewest channels of the rings and trees and of NVLS (at most NCCL_MAX_CTAS)"},
      {"NCCL_MAX_CTAS", "nccl_max_ctas", "--nccl-max-ctas", &NcclEnv::max_ctas, 1, 64, false,
       "ncclConfig_t's maxCTAs, the most channels of the rings and trees and of NVLS (64: NCCL's own counts)"},
      {"NCCL_NVLS_NCHANNELS", "nccl_nvls_nchannels", "--nccl-nvls-nchannels", &NcclEnv::nvls_nchannels, 0, 64, false,
       "ncclConfig_t's nvlsCTAs from NCCL 2.28, NVLS's channels in place of NCCL's own count (16 on Hopper), within "
       "NCCL_MIN_CTAS - NCCL_MAX_CTAS (0: NCCL's own)"},
      {"NCCL_MIN_P2P_NCHANNELS", "nccl_min_p2p_nchannels", "--nccl-min-p2p-nchannels", &NcclEnv::min_p2p_nchannels, 1, 64,
       false, "the fewest point-to-point channels (NCCL draws them from the communicator's, then rounds up to a power of two)"},
      {"NCCL_MAX_P2P_NCHANNELS", "nccl_max_p2p_nchannels", "--nccl-max-p2p-nchannels", &NcclEnv::max_p2p_nchannels, 1, 64,
       false, "the most point-to-point channels (64: NCCL's own)"},
      {"NCCL_NCHANNELS_PER_NET_PEER", "nccl_nchannels_per_net_peer", "--nccl-nchannels-per-net-peer",
       &NcclEnv::nchannels_per_net_peer, 0, 64, false,
       "the channels a peer across nodes takes (the fewest any peer takes sets every peer's; 0: NCCL's own, which "
       "scales it with the ranks and NICs)"},
      {"NCCL_P2P_NVL_CHUNKSIZE", "nccl_p2p_nvl_chunksize", "--nccl-p2p-nvl-chunksize", &NcclEnv::p2p_nvl_chunksize, kB, kMB,
       true, "bytes of a point-to-point step where every GPU pair of the node is NVLink (from NCCL 2.19 at most the "
       "Simple FIFO's step, 512 KiB)"},
      {"NCCL_P2P_NET_CHUNKSIZE", "nccl_p2p_net_chunksize", "--nccl-p2p-net-chunksize", &NcclEnv::p2p_net_chunksize, kB, kMB,
       true, "bytes of a point-to-point step in a job across nodes (from NCCL 2.29 twice that for Blackwell on ARM "
       "hosts; from 2.19 at most 512 KiB)"},
      {"NCCL_P2P_PCI_CHUNKSIZE", "nccl_p2p_pci_chunksize", "--nccl-p2p-pci-chunksize", &NcclEnv::p2p_pci_chunksize, kB, kMB,
       true, "bytes of a point-to-point step where some GPU pair of the node is not NVLink (from NCCL 2.19 at most 512 KiB)"},
  };
  return vars;
}

void check_nccl_env(const NcclEnv& env) {
  for (const NcclEnvVar& var : nccl_env_vars()) {
    const int value = env.*var.value;
    if (value >= var.least && value <= var.most) continue;
    throw std::invalid_argument(var.bytes ? fmt::format("{}: {} bytes is not a step dtsim models ({} - {})", var.name, value,
                                                        var.least, var.most)
                                          : fmt::format("{}: {} is not a channel count ({} - {})", var.name, value,
                                                        var.least, var.most));
  }
}

}  // namespace dtsim::net::nccl
