#include "sim/frame_arena.hpp"

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <new>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace dtsim::sim::frame_arena::detail {

namespace {

constexpr std::size_t kSlabBytes = std::size_t{2} << 20;  // one huge page

// Frames handed back by threads that exited, and every slab ever made. Never destroyed:
// frames may be released during static destruction, and the slabs stay reachable.
struct SharedPool {
  std::mutex mutex;
  FreeFrame* free[kClasses] = {};
  std::atomic<bool> any_free{false};  // set once frames were handed back: then look
  std::vector<void*> slabs;
};

SharedPool& shared() {
  static auto* pool = new SharedPool;
  return *pool;
}

// A new slab, registered in the pool.
char* new_slab() {
  void* slab = std::aligned_alloc(kSlabBytes, kSlabBytes);
  if (slab == nullptr) throw std::bad_alloc();
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  // Only advice: where transparent huge pages are off, the slab is 4 KiB pages.
  madvise(slab, kSlabBytes, MADV_HUGEPAGE);
#endif
  auto& pool = shared();
  const std::lock_guard lock(pool.mutex);
  pool.slabs.push_back(slab);
  return static_cast<char*>(slab);
}

// Carves a frame of class c from the slab at (next, left), starting a new one when it is
// too short (the rest of the old one, under 4 KiB, is left unused).
void* carve(char*& next, std::size_t& left, std::size_t c) {
  const std::size_t bytes = c * kLine;
  if (left < bytes) {
    next = new_slab();
    left = kSlabBytes;
  }
  void* frame = next;
  next += bytes;
  left -= bytes;
  return frame;
}

void push_shared(SharedPool& pool, void* p, std::size_t c) {
  auto* f = static_cast<FreeFrame*>(p);
  f->next = pool.free[c];
  pool.free[c] = f;
  pool.any_free.store(true, std::memory_order_relaxed);
}

// At the exit of its thread, hands the thread's free frames to the shared pool.
struct HandBackAtExit {
  ~HandBackAtExit() {
    auto& frames = thread_frames;
    auto& pool = shared();
    const std::lock_guard lock(pool.mutex);
    for (std::size_t c = 0; c < kClasses; ++c) {
      while (FreeFrame* f = frames.free[c]) {
        frames.free[c] = f->next;
        push_shared(pool, f, c);
      }
    }
    frames.state = ThreadState::gone;
  }
};

void guard_this_thread() {
  static thread_local HandBackAtExit hand_back;
  thread_frames.state = ThreadState::live;
}

}  // namespace

void* allocate_slow(std::size_t c) {
  auto& frames = thread_frames;
  if (frames.state == ThreadState::unguarded) guard_this_thread();
  auto& pool = shared();
  if (pool.any_free.load(std::memory_order_relaxed)) {
    const std::lock_guard lock(pool.mutex);
    if (FreeFrame* f = pool.free[c]) {
      pool.free[c] = f->next;
      return f;
    }
  }
  // The thread's own slab, even when its lists are gone (thread exit): slabs are never
  // released, and only frees need to know where the lists went.
  return carve(frames.slab_next, frames.slab_left, c);
}

void release_slow(void* p, std::size_t c) noexcept {
  auto& frames = thread_frames;
  if (frames.state == ThreadState::unguarded) {
    try {
      guard_this_thread();
    } catch (...) {
      // No guard (out of memory for it): the frame goes to the shared pool instead.
    }
  }
  if (frames.state == ThreadState::live) {
    auto* f = static_cast<FreeFrame*>(p);
    f->next = frames.free[c];
    frames.free[c] = f;
    return;
  }
  auto& pool = shared();
  const std::lock_guard lock(pool.mutex);
  push_shared(pool, p, c);
}

}  // namespace dtsim::sim::frame_arena::detail
