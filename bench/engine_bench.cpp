// Engine throughput: schedule + fire + resume of trivial coroutine events.
//
// `pending` programs each sleep for a pseudo-random interval in a loop, so the queue
// holds `pending` events at all times. BM_BaselineHeap runs the same workload on a plain
// std::priority_queue of coroutine handles: the ratio of the two, from one run on one
// machine, is the figure to watch.
#include <benchmark/benchmark.h>

#include <coroutine>
#include <cstdint>
#include <queue>
#include <vector>

#include "sim/engine.hpp"
#include "sim/task.hpp"

namespace {

using dtsim::sim::Engine;
using dtsim::sim::Task;

// xorshift: cheap, deterministic intervals in (0, 1].
double next_interval(std::uint64_t& state) {
  state ^= state << 13;
  state ^= state >> 7;
  state ^= state << 17;
  return static_cast<double>((state >> 11) + 1) * 0x1.0p-53;
}

Task<void> sleeper(Engine& engine, std::uint64_t seed, std::int64_t wakeups) {
  std::uint64_t state = seed * 0x9E3779B97F4A7C15ULL + 1;
  for (std::int64_t i = 0; i < wakeups; ++i) co_await engine.sleep_for(next_interval(state));
}

constexpr std::int64_t kEventsPerIteration = 1 << 18;

void BM_Engine(benchmark::State& state) {
  const auto pending = state.range(0);
  const auto wakeups = std::max<std::int64_t>(1, kEventsPerIteration / pending);
  for (auto _ : state) {
    Engine engine;
    for (std::int64_t p = 0; p < pending; ++p) engine.spawn(sleeper(engine, p, wakeups), "sleeper");
    engine.run();
    benchmark::DoNotOptimize(engine.events_fired());
  }
  state.SetItemsProcessed(state.iterations() * pending * (wakeups + 1));
}
BENCHMARK(BM_Engine)->Arg(16)->Arg(1024)->Arg(65536)->Unit(benchmark::kMillisecond);

// The baseline: the same sleepers on a std::priority_queue with no tie-breaking
// sequence, no callbacks and no failure tracking.
struct BaselineQueue {
  struct Entry {
    double time;
    std::coroutine_handle<> h;
    bool operator>(const Entry& o) const { return time > o.time; }
  };
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> heap;
  double now = 0.0;
  auto sleep_for(double dt) {
    struct Awaiter {
      BaselineQueue& q;
      double dt;
      bool await_ready() const noexcept { return false; }
      void await_suspend(std::coroutine_handle<> h) { q.heap.push({q.now + dt, h}); }
      void await_resume() const noexcept {}
    };
    return Awaiter{*this, dt};
  }
};

Task<void> baseline_sleeper(BaselineQueue& q, std::uint64_t seed, std::int64_t wakeups) {
  std::uint64_t state = seed * 0x9E3779B97F4A7C15ULL + 1;
  for (std::int64_t i = 0; i < wakeups; ++i) co_await q.sleep_for(next_interval(state));
}

void BM_BaselineHeap(benchmark::State& state) {
  const auto pending = state.range(0);
  const auto wakeups = std::max<std::int64_t>(1, kEventsPerIteration / pending);
  for (auto _ : state) {
    BaselineQueue q;
    std::vector<Task<void>> tasks;
    for (std::int64_t p = 0; p < pending; ++p) {
      tasks.push_back(baseline_sleeper(q, p, wakeups));
      q.heap.push({0.0, tasks.back().handle()});
    }
    while (!q.heap.empty()) {
      auto e = q.heap.top();
      q.heap.pop();
      q.now = e.time;
      e.h.resume();
    }
  }
  state.SetItemsProcessed(state.iterations() * pending * (wakeups + 1));
}
BENCHMARK(BM_BaselineHeap)->Arg(16)->Arg(1024)->Arg(65536)->Unit(benchmark::kMillisecond);

}  // namespace
