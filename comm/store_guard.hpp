// comm::guard_store_sockets: rank 0's defence of the c10d store it serves against a
// client that stops in the middle of a request (live_job.hpp, "Bad peers", garbage).
// LibTorch-free: it works on the process's sockets, whoever created them.
#pragma once

#include <chrono>
#include <cstdint>

namespace dtsim::comm {

// Every TCP socket of this process bound to `port` (c10d's listening socket and the
// connections its daemon has accepted) gets a receive and a send timeout of `limit`, so
// that the daemon thread fails a stalled client's recv or send after `limit`, drops that
// client alone and goes on serving.
//
// Linux makes an accepted socket a copy of the listening socket when the client's
// handshake completes, not when accept() returns: a connection established before the
// listening socket had its options keeps none, however late it is accepted. So after
// setting them on the listening socket the guard waits (at most `limit`) until its accept
// queue is empty, which is when every connection older than the options has been accepted,
// then sets them on every accepted connection. Later connections inherit them.
//
// Returns whether the listening socket was found.
bool guard_store_sockets(std::uint16_t port, std::chrono::milliseconds limit);

}  // namespace dtsim::comm
