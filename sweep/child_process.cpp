#include "sweep/child_process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>

namespace dtsim::sweep {

namespace {

constexpr std::size_t kMaxMessage = 4096;  // well under a pipe's buffer: the child never blocks writing it

void write_all(int fd, const std::string& text) {
  const char* p = text.data();
  std::size_t left = text.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    p += n;
    left -= static_cast<std::size_t>(n);
  }
}

std::string first_line(std::string s) {
  if (auto nl = s.find('\n'); nl != std::string::npos) s.resize(nl);
  if (s.size() > kMaxMessage) s.resize(kMaxMessage);
  return s.empty() ? std::string("failed without a message") : s;
}

[[noreturn]] void run_child(const std::function<void()>& setup, const std::function<void()>& work,
                           std::uint64_t memory_limit_bytes, pid_t parent, int fd) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(1);  // the parent died before the line above
  std::string error;
  try {
    if (setup) setup();
    if (memory_limit_bytes > 0) {
      const rlimit limit{memory_limit_bytes, memory_limit_bytes};
      ::setrlimit(RLIMIT_DATA, &limit);
    }
    work();
  } catch (const std::bad_alloc&) {
    error = memory_limit_bytes > 0 ? fmt::format("out of memory (the limit is {:.3g} GB a point)", memory_limit_bytes / 1e9)
                                   : std::string("out of memory");
  } catch (const std::exception& e) {
    error = first_line(e.what());
    // LibTorch's allocator reports the limit as its own error, not std::bad_alloc.
    if (memory_limit_bytes > 0 && error.find("allocate memory") != std::string::npos)
      error = fmt::format("out of memory (the limit is {:.3g} GB a point): {}", memory_limit_bytes / 1e9, error);
  } catch (...) {
    error = "failed with an exception that is not a std::exception";
  }
  if (!error.empty()) write_all(fd, error);
  // _exit: the parent's atexit handlers, static destructors and unflushed stdio buffers
  // (copied by fork) belong to the parent.
  ::_exit(error.empty() ? 0 : 1);
}

std::string read_all(int fd) {
  std::string text;
  char buffer[1024];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buffer, static_cast<std::size_t>(n));
  }
  return text;
}

}  // namespace

Child start_child(const std::function<void()>& setup, const std::function<void()>& work,
                  std::uint64_t memory_limit_bytes) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0)
    throw std::runtime_error(fmt::format("cannot create a pipe for a child process: {}", std::strerror(errno)));
  const pid_t parent = ::getpid();
  const auto started = std::chrono::steady_clock::now();
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int e = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    throw std::runtime_error(fmt::format("cannot start a child process: {}", std::strerror(e)));
  }
  if (pid == 0) {
    ::close(fds[0]);
    run_child(setup, work, memory_limit_bytes, parent, fds[1]);
  }
  ::close(fds[1]);  // the pipe's only write end is the child's: end of file when it exits
  return {pid, fds[0], started};
}

ChildEnd wait_any_child(std::span<const Child> children) {
  if (children.empty()) throw std::logic_error("wait_any_child: no children");
  std::vector<pollfd> fds;
  for (const auto& c : children) fds.push_back({c.message_fd, POLLIN, 0});
  for (;;) {
    const int n = ::poll(fds.data(), fds.size(), -1);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw std::runtime_error(fmt::format("waiting for a child process: {}", std::strerror(errno)));
    for (std::size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      // Readable or hung up: the child writes its message only as it exits, so read to the
      // end of file (its exit), then reap it.
      const Child& c = children[i];
      std::string message = read_all(c.message_fd);
      ::close(c.message_fd);
      int status = 0;
      while (::waitpid(c.pid, &status, 0) < 0 && errno == EINTR) {
      }
      ChildEnd end{c.pid, {}};
      if (WIFSIGNALED(status)) {
        const int sig = WTERMSIG(status);
        end.error = fmt::format("crashed: signal {} ({}){}", sig, ::strsignal(sig),
                                sig == SIGKILL ? ", perhaps killed for memory" : "");
      } else if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
        end.error = message.empty() ? fmt::format("exited with status {}", WEXITSTATUS(status)) : message;
      }
      return end;
    }
  }
}

}  // namespace dtsim::sweep
