// comm::guard_store_sockets on plain sockets: every connection on the store's port gets
// the timeouts, including one whose handshake completed before the guard ran and that is
// accepted while it runs (Linux copies the listening socket's options at the handshake).
#include <gtest/gtest.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include "comm/store_guard.hpp"

namespace dtsim::comm {
namespace {

using std::chrono::milliseconds;

struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  Fd(Fd&& o) noexcept : fd(o.fd) { o.fd = -1; }
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

sockaddr_in loopback(std::uint16_t port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  return addr;
}

// A listening socket on a free loopback port.
Fd listener(std::uint16_t& port) {
  Fd l(::socket(AF_INET, SOCK_STREAM, 0));
  sockaddr_in addr = loopback(0);
  EXPECT_EQ(::bind(l.fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  EXPECT_EQ(::listen(l.fd, 16), 0);
  socklen_t len = sizeof addr;
  ::getsockname(l.fd, reinterpret_cast<sockaddr*>(&addr), &len);
  port = ntohs(addr.sin_port);
  return l;
}

// A client whose handshake has completed (it waits in the accept queue until accepted).
Fd connected(std::uint16_t port) {
  Fd c(::socket(AF_INET, SOCK_STREAM, 0));
  sockaddr_in addr = loopback(port);
  EXPECT_EQ(::connect(c.fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  return c;
}

milliseconds timeout_of(int fd, int option) {
  timeval tv{};
  socklen_t len = sizeof tv;
  ::getsockopt(fd, SOL_SOCKET, option, &tv, &len);
  return milliseconds(tv.tv_sec * 1000 + tv.tv_usec / 1000);
}

TEST(StoreGuard, ConnectionsQueuedBeforeTheGuardAndAcceptedDuringItGetTheTimeouts) {
  std::uint16_t port = 0;
  Fd l = listener(port);
  std::vector<Fd> clients;
  clients.push_back(connected(port));
  Fd early(::accept(l.fd, nullptr, nullptr));  // accepted before the guard
  clients.push_back(connected(port));          // queued before the guard, accepted during it
  clients.push_back(connected(port));

  bool found_listener = false;
  std::thread guard([&] { found_listener = guard_store_sockets(port, milliseconds(2000)); });
  std::this_thread::sleep_for(milliseconds(100));  // the daemon is slow to accept
  Fd late1(::accept(l.fd, nullptr, nullptr)), late2(::accept(l.fd, nullptr, nullptr));
  guard.join();
  clients.push_back(connected(port));  // after the guard: inherits from the listener
  Fd after(::accept(l.fd, nullptr, nullptr));

  EXPECT_TRUE(found_listener);
  for (int fd : {l.fd, early.fd, late1.fd, late2.fd, after.fd}) {
    EXPECT_EQ(timeout_of(fd, SO_RCVTIMEO), milliseconds(2000)) << "descriptor " << fd;
    EXPECT_EQ(timeout_of(fd, SO_SNDTIMEO), milliseconds(2000)) << "descriptor " << fd;
  }
  // The clients' own sockets are on other ports: untouched.
  for (const Fd& c : clients) EXPECT_EQ(timeout_of(c.fd, SO_RCVTIMEO), milliseconds(0));
}

TEST(StoreGuard, AQueueNobodyAcceptsDelaysTheGuardAtMostItsLimit) {
  std::uint16_t port = 0;
  Fd l = listener(port);
  Fd client = connected(port);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(guard_store_sockets(port, milliseconds(300)));
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_GE(waited, milliseconds(300));
  EXPECT_LT(waited, milliseconds(3000));
}

TEST(StoreGuard, NoListenerOnThePortIsReported) {
  std::uint16_t port = 0;
  { Fd l = listener(port); }
  EXPECT_FALSE(guard_store_sockets(port, milliseconds(100)));
}

}  // namespace
}  // namespace dtsim::comm
