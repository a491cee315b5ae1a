#include "comm/store_guard.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <cstdlib>
#include <thread>
#include <vector>

namespace dtsim::comm {

namespace {

// The local port of a TCP/IP socket, or -1 for any other descriptor.
int local_port(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return -1;
  if (addr.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in&>(addr).sin_port);
  if (addr.ss_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6&>(addr).sin6_port);
  return -1;
}

std::vector<int> open_descriptors() {
  std::vector<int> fds;
  if (DIR* dir = ::opendir("/proc/self/fd")) {
    while (const dirent* entry = ::readdir(dir))
      if (entry->d_name[0] != '.') fds.push_back(std::atoi(entry->d_name));
    ::closedir(dir);
  } else {
    for (int fd = 0; fd < 4096; ++fd)
      if (::fcntl(fd, F_GETFD) != -1) fds.push_back(fd);
  }
  return fds;
}

struct PortSockets {
  std::vector<int> listening, connections;
};

PortSockets stream_sockets_on(std::uint16_t port) {
  PortSockets found;
  for (int fd : open_descriptors()) {
    if (local_port(fd) != port) continue;
    int type = 0, accepting = 0;
    socklen_t len = sizeof type;
    if (::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_STREAM) continue;
    len = sizeof accepting;
    const bool listens = ::getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &accepting, &len) == 0 && accepting;
    (listens ? found.listening : found.connections).push_back(fd);
  }
  return found;
}

void set_timeouts(int fd, const timeval& tv) {
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

// Connections established and not yet accepted: Linux reports a listening socket's accept
// queue length as its tcp_info's tcpi_unacked. An unreadable queue counts as empty.
unsigned accept_queue_length(int fd) {
  tcp_info info{};
  socklen_t len = sizeof info;
  if (::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0) return 0;
  return info.tcpi_unacked;
}

}  // namespace

bool guard_store_sockets(std::uint16_t port, std::chrono::milliseconds limit) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(limit.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>(limit.count() % 1000 * 1000);

  const PortSockets before = stream_sockets_on(port);
  for (int fd : before.listening) set_timeouts(fd, tv);

  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (int fd : before.listening)
    while (accept_queue_length(fd) > 0 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));

  for (int fd : stream_sockets_on(port).connections) set_timeouts(fd, tv);
  return !before.listening.empty();
}

}  // namespace dtsim::comm
