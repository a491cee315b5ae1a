// net::DueQueue (network_models/due_queue.hpp): candidates come out in exact (time,
// start order) order, against a sorted set as the oracle, however the batches overlap;
// and a batch that comes after the whole of the last run extends it rather than adding
// a front to the merge heap.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <set>
#include <tuple>
#include <vector>

#include "network_models/due_queue.hpp"

namespace dtsim::net {
namespace {

using Key = std::tuple<double, std::uint64_t>;  // (time, sequence)

Key key(const Due& d) { return {d.time, d.sequence}; }

// Batches as a solve pushes them (every time at or after now, in any order within the
// batch), sealed, then every candidate due by the next instant popped, as the transport
// does; the kinds of batch mix: one candidate, an in-order burst after everything, and
// a spread overlapping what is pending.
TEST(DueQueue, PopsInTimeThenStartOrder) {
  std::mt19937_64 rng(2026);
  DueQueue queue;
  std::set<Key> oracle;
  std::uint64_t sequence = 0;
  double now = 0.0, latest = 0.0;
  for (int step = 0; step < 20000; ++step) {
    const int kind = static_cast<int>(rng() % 3);
    const int n = kind == 0 ? 1 : 1 + static_cast<int>(rng() % 40);
    std::vector<Due> batch;
    for (int i = 0; i < n; ++i) {
      double t;
      if (kind == 1) t = std::max(latest, now) + static_cast<double>(i) * 1e-3;  // after all pending, in order
      else t = now + std::uniform_real_distribution<double>(0.0, 0.1)(rng);
      if (rng() % 8 == 0 && !batch.empty()) t = batch.back().time;  // equal times: start order decides
      batch.push_back({t, sequence++, i, 0});
    }
    if (kind == 2) std::shuffle(batch.begin(), batch.end(), rng);
    for (const auto& d : batch) {
      queue.push(d);
      oracle.insert(key(d));
      latest = std::max(latest, d.time);
    }
    queue.seal();
    now += std::uniform_real_distribution<double>(0.0, 0.02)(rng);
    while (!queue.empty() && queue.top().time <= now) {
      ASSERT_FALSE(oracle.empty());
      ASSERT_EQ(key(queue.top()), *oracle.begin()) << "step " << step;
      oracle.erase(oracle.begin());
      queue.pop();
    }
    ASSERT_EQ(queue.empty(), oracle.empty());
    if (!oracle.empty()) {
      ASSERT_EQ(key(queue.top()), *oracle.begin());
    }
  }
  for (; !queue.empty(); queue.pop()) {
    ASSERT_EQ(key(queue.top()), *oracle.begin());
    oracle.erase(oracle.begin());
  }
  EXPECT_TRUE(oracle.empty());
}

// Equal flows that start batch after batch finish in start order: each sealed batch
// continues the last run, so the merge heap keeps one front however many batches are
// pending; a batch reaching back before the last run's end starts a run of its own.
TEST(DueQueue, BatchesAfterTheLastRunExtendIt) {
  DueQueue queue;
  std::uint64_t sequence = 0;
  for (int batch = 0; batch < 50; ++batch) {
    for (int i = 0; i < 8; ++i) queue.push({1.0 + batch + 0.1 * i, sequence++, i, 0});
    queue.seal();
    ASSERT_EQ(queue.fronts(), 1u) << "batch " << batch;
  }
  queue.push({1.05, sequence++, 0, 0});  // before the run's second candidate
  queue.push({1.06, sequence++, 1, 0});
  queue.seal();
  EXPECT_EQ(queue.fronts(), 2u);
  std::vector<double> times;
  for (; !queue.empty(); queue.pop()) times.push_back(queue.top().time);
  ASSERT_EQ(times.size(), 402u);
  EXPECT_TRUE(std::is_sorted(times.begin(), times.end()));
  EXPECT_EQ(times[1], 1.05);
  EXPECT_EQ(times[2], 1.06);
}

// Ranks that drift apart start their flows one at a time, and flows of a few kinds (a
// chunk an element longer, a shared link) finish a few fixed durations after they
// start: the candidates come as interleaved rising sequences. Each keeps a lane, so the
// merge heap holds one front per sequence, not one per candidate, up to kLanes (8)
// sequences; beyond that the extra ones fall back to fronts of their own, and the order
// stays exact either way.
TEST(DueQueue, InterleavedRisingSequencesKeepALaneEach) {
  for (const int kinds : {3, 8, 11}) {
    DueQueue queue;
    std::set<Key> oracle;
    std::uint64_t sequence = 0;
    std::size_t most_fronts = 0;
    for (int i = 0; i < 3000; ++i) {
      const double started = 1.0 + 1e-3 * i;
      // The flow's kind, its duration: each shorter than the last by more than the time
      // between starts, so every round of kinds comes in falling order and needs them all.
      const double duration = 0.5 - 0.01 * (i % kinds);
      const Due d{started + duration, sequence++, i, 0};
      queue.push(d);
      oracle.insert(key(d));
      queue.seal();
      most_fronts = std::max(most_fronts, queue.fronts());
      while (!queue.empty() && queue.top().time <= started) {
        ASSERT_EQ(key(queue.top()), *oracle.begin()) << "kinds " << kinds << ", flow " << i;
        oracle.erase(oracle.begin());
        queue.pop();
      }
    }
    for (; !queue.empty(); queue.pop()) {
      ASSERT_EQ(key(queue.top()), *oracle.begin()) << "kinds " << kinds;
      oracle.erase(oracle.begin());
    }
    EXPECT_TRUE(oracle.empty());
    if (kinds <= 8) EXPECT_EQ(most_fronts, static_cast<std::size_t>(kinds));
    else EXPECT_GT(most_fronts, 8u);  // more sequences than lanes: some candidates are fronts alone
  }
}

}  // namespace
}  // namespace dtsim::net
