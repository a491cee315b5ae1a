// sim::frame_arena: where Task coroutine frames live.
//
// A simulation with thousands of rank programs resumes their frames in time order, which
// is random order in memory, and each resume starts with cache misses on a frame. The
// engine prefetches the frames of the next events (event_queue.hpp); what this arena
// adds is that a frame costs as few cache lines and pages as its size allows:
//  - Frames are 64-byte aligned, in size classes of 64 bytes: a 120-byte frame is two
//    cache lines, where at malloc's 16-byte alignment three in four straddle three.
//  - Frames come from 2 MiB slabs, which Linux is asked to back with huge pages: the
//    frames of 65,536 programs (8 MiB) are then four TLB entries, not 2,048 pages whose
//    walks held up the prefetches.
//  - A freed frame is the next one of its size handed out (LIFO), so a program that
//    spawns and joins short helpers reuses warm memory.
// The engine benchmark's baseline (a std::priority_queue of coroutine handles) runs the
// same Task type, so both sides of its ratio get these frames.
//
// Threads: each thread allocates from its own lists and slab, without locks. A frame
// may be freed on another thread (it joins that thread's lists); slabs are never
// released, since a frame may outlive the thread that made it; a thread that exits
// hands its free frames to a shared pool, which a thread whose list of a size is empty
// takes from before it carves new frames.
//
// Under AddressSanitizer frames come from operator new as before, so that a frame used
// after its coroutine was destroyed is still reported.
#pragma once

#include <cstddef>
#include <new>

#if defined(__SANITIZE_ADDRESS__)
#define DTSIM_FRAME_ARENA 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define DTSIM_FRAME_ARENA 0
#endif
#endif
#ifndef DTSIM_FRAME_ARENA
#define DTSIM_FRAME_ARENA 1
#endif

namespace dtsim::sim::frame_arena {

inline constexpr std::size_t kLine = 64;
// Frames up to this size come from the arena; larger ones from operator new.
inline constexpr std::size_t kLargestFrame = 4096;
inline constexpr std::size_t kClasses = kLargestFrame / kLine + 1;  // class c: c lines

namespace detail {

struct FreeFrame {
  FreeFrame* next;
};

// One thread's free lists, by size class, and what is left of its current slab.
// Trivially destructible, so that reaching it is a plain thread-local access. The
// thread's first trip to a slow path makes a guard that, when the thread exits, hands
// the lists to the shared pool and marks them gone.
enum class ThreadState : unsigned char { unguarded, live, gone };
struct ThreadFrames {
  FreeFrame* free[kClasses];
  char* slab_next;
  std::size_t slab_left;
  ThreadState state;
};
inline constinit thread_local ThreadFrames thread_frames{};

// A frame of class c when the thread's list of that class is empty: from the shared
// pool, else carved from a slab.
void* allocate_slow(std::size_t c);
// A frame released by a thread without a guard yet, or whose lists are gone.
void release_slow(void* p, std::size_t c) noexcept;

inline std::size_t size_class(std::size_t bytes) noexcept { return bytes == 0 ? 1 : (bytes + kLine - 1) / kLine; }

}  // namespace detail

// A frame of `bytes` bytes, 64-byte aligned when at most kLargestFrame.
inline void* allocate(std::size_t bytes) {
#if DTSIM_FRAME_ARENA
  if (bytes <= kLargestFrame) {
    const std::size_t c = detail::size_class(bytes);
    auto& frames = detail::thread_frames;
    if (detail::FreeFrame* f = frames.free[c]) {
      frames.free[c] = f->next;
      return f;
    }
    return detail::allocate_slow(c);
  }
#endif
  return ::operator new(bytes);
}

// Returns a frame that allocate(bytes) made, with the same `bytes`.
inline void release(void* p, std::size_t bytes) noexcept {
#if DTSIM_FRAME_ARENA
  if (bytes <= kLargestFrame) {
    const std::size_t c = detail::size_class(bytes);
    auto& frames = detail::thread_frames;
    if (frames.state != detail::ThreadState::live) return detail::release_slow(p, c);
    auto* f = static_cast<detail::FreeFrame*>(p);
    f->next = frames.free[c];
    frames.free[c] = f;
    return;
  }
#endif
  ::operator delete(p, bytes);
}

// For tests: whether frames come from the arena in this build (not under ASan).
inline constexpr bool enabled = DTSIM_FRAME_ARENA != 0;

}  // namespace dtsim::sim::frame_arena
