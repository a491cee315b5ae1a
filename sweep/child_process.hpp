// Work run in a child process of its own: forked, without exec, so that it sees this
// process's memory as it was (a parsed sweep, its points' scenarios) and shares no state
// with the parent or its other children afterwards. The sweep runs each point this way
// (execute.hpp): two points never share a library's hidden buffers, and a point that
// crashes or exceeds its memory limit fails alone.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <span>
#include <string>

namespace dtsim::sweep {

struct Child {
  pid_t pid = -1;
  int message_fd = -1;  // the read end of the pipe the child writes its error to
  std::chrono::steady_clock::time_point started;
};

struct ChildEnd {
  pid_t pid = -1;
  std::string error;  // empty when the work returned; else one line saying how it failed
};

// Forks a child that runs `work` and exits: with status 0 when it returns, else after
// writing the first line of the exception's message (or the signal that ended it, which
// the parent reports). The child dies with its parent (a killed sweep leaves no orphan
// writing into its directory). With memory_limit_bytes > 0 the child's private writable
// memory (heap, anonymous mappings, thread stacks: RLIMIT_DATA) is limited to that once
// `setup` has run (it starts the thread pools that must exist before the limit: a pool
// that cannot start its threads may wait for them forever); an allocation beyond it fails
// as "out of memory". Throws std::runtime_error when the fork fails.
Child start_child(const std::function<void()>& setup, const std::function<void()>& work,
                  std::uint64_t memory_limit_bytes = 0);

// Blocks until one of `children` ends; reaps it and says how it ended. `children` must
// not be empty.
ChildEnd wait_any_child(std::span<const Child> children);

}  // namespace dtsim::sweep
