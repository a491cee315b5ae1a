// The frame arena (sim/frame_arena.hpp): where Task coroutine frames live.
#include "sim/frame_arena.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <set>
#include <thread>
#include <vector>

#include "sim/engine.hpp"
#include "sim/task.hpp"

namespace {

namespace arena = dtsim::sim::frame_arena;
using dtsim::sim::Engine;
using dtsim::sim::Task;

std::uintptr_t address(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }

// Frames are line-aligned and disjoint, a released frame is the next one of its size
// handed out, and sizes in different classes do not share frames.
TEST(FrameArena, FramesAreLineAlignedDisjointAndReusedLastInFirstOut) {
  if (!arena::enabled) GTEST_SKIP() << "frames come from operator new in this build (AddressSanitizer)";
  std::vector<void*> frames;
  std::set<std::uintptr_t> lines;
  for (int i = 0; i < 1000; ++i) {
    void* f = arena::allocate(120);
    EXPECT_EQ(address(f) % arena::kLine, 0u);
    std::memset(f, i & 0xFF, 120);
    // Two lines each, and no line shared with another frame.
    EXPECT_TRUE(lines.insert(address(f)).second);
    EXPECT_TRUE(lines.insert(address(f) + 64).second);
    frames.push_back(f);
  }
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(static_cast<unsigned char*>(frames[i])[119], i & 0xFF);
  arena::release(frames[10], 120);
  arena::release(frames[20], 120);
  void* large = arena::allocate(300);  // another class: not one of those two
  EXPECT_NE(large, frames[10]);
  EXPECT_NE(large, frames[20]);
  EXPECT_EQ(arena::allocate(100), frames[20]);  // 100 and 120 bytes are both two lines
  EXPECT_EQ(arena::allocate(128), frames[10]);
  arena::release(large, 300);
  for (void* f : frames) arena::release(f, 120);
  // Beyond the largest class, operator new: still usable, and released the same way.
  void* huge = arena::allocate(arena::kLargestFrame + 1);
  std::memset(huge, 1, arena::kLargestFrame + 1);
  arena::release(huge, arena::kLargestFrame + 1);
}

// A frame made on one thread and released on another joins that thread's lists; a
// thread that exits hands its free frames to the pool, whose frames the next thread
// takes before carving new ones.
TEST(FrameArena, FramesOutliveTheirThreadAndExitedThreadsHandTheirsBack) {
  if (!arena::enabled) GTEST_SKIP() << "frames come from operator new in this build (AddressSanitizer)";
  constexpr std::size_t kBytes = 3000;  // a class no other test uses
  std::vector<void*> made;
  std::thread([&] {
    for (int i = 0; i < 64; ++i) made.push_back(arena::allocate(kBytes));
  }).join();
  // The maker has exited; its frames are still good memory.
  for (void* f : made) std::memset(f, 7, kBytes);
  std::set<void*> released;
  std::thread([&] {
    for (void* f : made) {
      arena::release(f, kBytes);
      released.insert(f);
    }
  }).join();
  // That thread exited with 64 free frames of the class: a new thread gets them back.
  std::set<void*> reused;
  std::thread([&] {
    for (int i = 0; i < 64; ++i) reused.insert(arena::allocate(kBytes));
    for (void* f : reused) arena::release(f, kBytes);
  }).join();
  EXPECT_EQ(reused, released);
}

// A frame released during thread exit, after the thread's lists were handed back (by a
// thread-local made before the arena's guard, so destroyed after it), goes to the pool
// too, and the next thread gets it.
struct ReleasesAtThreadExit {
  void* frame = nullptr;
  std::size_t bytes = 0;
  ~ReleasesAtThreadExit() {
    if (frame) arena::release(frame, bytes);
  }
};

TEST(FrameArena, FramesReleasedAfterTheirThreadHandedBackReachThePool) {
  if (!arena::enabled) GTEST_SKIP() << "frames come from operator new in this build (AddressSanitizer)";
  constexpr std::size_t kBytes = 2500;  // a class no other test uses
  void* released = nullptr;
  std::thread([&] {
    static thread_local ReleasesAtThreadExit holder;  // made first: destroyed last
    holder.bytes = kBytes;
    holder.frame = arena::allocate(kBytes);  // the thread's first frame: its guard is made now
    released = holder.frame;
  }).join();
  void* reused = nullptr;
  std::thread([&] {
    reused = arena::allocate(kBytes);
    arena::release(reused, kBytes);
  }).join();
  EXPECT_EQ(reused, released);
}

Task<int> add_after(Engine& engine, int a, int b) {
  co_await engine.sleep_for(1.0);
  co_return a + b;
}

Task<void> program(Engine& engine, int& out) {
  int sum = 0;
  for (int i = 0; i < 100; ++i) sum += co_await add_after(engine, i, 1);
  out = sum;
}

// Tasks run on arena frames: a program that awaits 100 short helpers reuses one frame
// for all of them, and computes what it should.
TEST(FrameArena, TasksRunOnArenaFrames) {
  Engine engine;
  int out = 0;
  engine.spawn(program(engine, out), "program");
  engine.run();
  EXPECT_EQ(out, 100 * 99 / 2 + 100);
  EXPECT_EQ(engine.now(), 100.0);
  if (!arena::enabled) return;
  // The helper's frame: made, released, and made again at the same place.
  void* first = nullptr;
  {
    auto task = add_after(engine, 1, 2);
    first = task.handle().address();
    EXPECT_EQ(address(first) % arena::kLine, 0u);
  }
  auto again = add_after(engine, 3, 4);
  EXPECT_EQ(again.handle().address(), first);
}

}  // namespace
