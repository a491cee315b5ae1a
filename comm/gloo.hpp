// comm::GlooCommunicator: a live rank over c10d's ProcessGroupGloo (CPU tensors), with
// a TCPStore rendezvous at MASTER_ADDR:MASTER_PORT (rank 0 serves it), as torchrun does.
// Compiled only when the LibTorch found has c10d's Gloo (DTSIM_HAVE_GLOO).
#pragma once

#include <memory>

#include "comm/communicator.hpp"
#include "comm/live_env.hpp"
#include "network_models/network_config.hpp"

namespace dtsim::comm {

// Creates the rank's communicator; blocks until all ranks have joined or the timeout
// passes (then throws naming the ranks' rendezvous address). Traffic is counted under
// the collective algorithms `accounting` selects, as the emulated network would run them.
std::unique_ptr<Communicator> make_gloo_communicator(const LiveEnv& env, net::NetworkConfig accounting = {});

// Whether this build has the Gloo backend.
bool gloo_available();

}  // namespace dtsim::comm
