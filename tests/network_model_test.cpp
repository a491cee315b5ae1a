// Network models against closed forms (Thakur, Rabenseifner & Gropp 2005), and the
// topology's mixing matrix against its definition.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <vector>

#include "network_models/network_model.hpp"
#include "network_models/topology.hpp"

namespace dtsim::net {
namespace {

constexpr double kAlpha = 5e-6;     // 5 us
constexpr double kBeta = 12.5e9;    // 12.5 GB/s

double relative_error(double got, double want) { return std::fabs(got - want) / std::fabs(want); }

// Ring all-reduce with every rank arriving at t0: 2(n-1)(alpha + S/(n beta)), for
// several rank counts and sizes (including sizes not divisible by n).
TEST(AlphaBeta, RingAllReduceMatchesClosedForm) {
  for (int n : {2, 3, 4, 8, 16, 33, 128}) {
    AlphaBetaModel model(Topology::ring(n), kAlpha, kBeta);
    for (double bytes : {4.0, 1000.0, 1e6, 3e8 + 7}) {
      const double t0 = 0.125;
      std::vector<double> arrival(n, t0);
      const double want = 2.0 * (n - 1) * (kAlpha + bytes / (n * kBeta));
      for (double finish : model.all_reduce(arrival, bytes))
        EXPECT_LT(relative_error(finish - t0, want), 1e-9) << "n=" << n << " S=" << bytes;
    }
  }
}

TEST(AlphaBeta, SingleRankCollectivesTakeNoTime) {
  AlphaBetaModel model(Topology::ring(1), kAlpha, kBeta);
  std::vector<double> arrival{2.0};
  EXPECT_EQ(model.all_reduce(arrival, 1e6), arrival);
  EXPECT_EQ(model.broadcast(arrival, 1e6, 0), arrival);
}

// Ring all-gather of equal blocks b: (n-1)(alpha + b/beta).
TEST(AlphaBeta, RingAllGatherMatchesClosedForm) {
  for (int n : {2, 5, 16}) {
    AlphaBetaModel model(Topology::ring(n), kAlpha, kBeta);
    std::vector<double> arrival(n, 0.0), blocks(n, 4096.0);
    const double want = (n - 1) * (kAlpha + 4096.0 / kBeta);
    for (double finish : model.all_gather(arrival, blocks)) EXPECT_LT(relative_error(finish, want), 1e-12);
  }
}

// With unequal blocks the slowest step of each round paces everyone in a ring: the
// last rank to finish has waited for every block to pass through n-1 links once.
TEST(AlphaBeta, RingAllGatherWithOneLargeBlock) {
  const int n = 4;
  AlphaBetaModel model(Topology::ring(n), 0.0, 1.0);  // time = bytes
  std::vector<double> arrival(n, 0.0), blocks{100.0, 1.0, 1.0, 1.0};
  auto finish = model.all_gather(arrival, blocks);
  // Rank 0's block travels 0->1 (t=100), 1->2 (200), 2->3 (300); rank 3 ends at 300.
  EXPECT_DOUBLE_EQ(finish[3], 300.0);
  EXPECT_DOUBLE_EQ(*std::max_element(finish.begin(), finish.end()), 300.0);
}

// A late rank delays everyone in a ring all-reduce by exactly its lateness when the
// others wait on it in the first step.
TEST(AlphaBeta, LateArrivalShiftsTheRing) {
  const int n = 6;
  AlphaBetaModel model(Topology::ring(n), kAlpha, kBeta);
  std::vector<double> on_time(n, 0.0), late(n, 0.0);
  late[2] = 1e-3;
  auto a = model.all_reduce(on_time, 1e6);
  auto b = model.all_reduce(late, 1e6);
  for (int r = 0; r < n; ++r) {
    EXPECT_GE(b[r], a[r]);
    EXPECT_LE(b[r], a[r] + 1e-3 + 1e-15);
  }
  EXPECT_NEAR(*std::max_element(b.begin(), b.end()), a[0] + 1e-3, 1e-12);
}

// Binomial broadcast on a complete graph: ceil(log2 n) rounds of alpha + S/beta.
TEST(AlphaBeta, BinomialBroadcastMatchesClosedForm) {
  for (int n : {2, 3, 8, 13}) {
    AlphaBetaModel model(Topology::complete(n), kAlpha, kBeta);
    std::vector<double> arrival(n, 0.0);
    auto finish = model.broadcast(arrival, 1e5, n / 2);
    const double rounds = std::ceil(std::log2(n));
    EXPECT_LT(relative_error(*std::max_element(finish.begin(), finish.end()), rounds * (kAlpha + 1e5 / kBeta)),
              1e-12);
  }
}

TEST(AlphaBeta, PointToPointCountsHops) {
  AlphaBetaModel model(Topology::ring(8), kAlpha, kBeta);
  EXPECT_DOUBLE_EQ(model.p2p_time(0, 1, 1000.0), kAlpha + 1000.0 / kBeta);
  EXPECT_DOUBLE_EQ(model.p2p_time(0, 4, 1000.0), 4 * kAlpha + 1000.0 / kBeta);
  EXPECT_DOUBLE_EQ(model.p2p_time(0, 7, 1000.0), kAlpha + 1000.0 / kBeta);
  EXPECT_THROW(AlphaBetaModel(Topology::ring(2), kAlpha, 0.0), std::invalid_argument);
}

TEST(Topology, RingNeighboursAndHops) {
  auto ring = Topology::ring(8);
  EXPECT_EQ(ring.neighbors(0), (std::vector<int>{1, 7}));
  EXPECT_EQ(ring.neighbors(5), (std::vector<int>{4, 6}));
  EXPECT_EQ(ring.hops(1, 6), 3);
  EXPECT_EQ(Topology::ring(2).neighbors(0), (std::vector<int>{1}));
  EXPECT_TRUE(Topology::ring(1).neighbors(0).empty());
}

// Metropolis-Hastings weights: 1/3 on a ring of n >= 3 (the reference's ring weights),
// symmetric and doubly stochastic on every topology.
TEST(Topology, MetropolisWeightsAreDoublyStochastic) {
  auto ring = Topology::ring(8);
  for (int j : {0, 1, 7}) EXPECT_DOUBLE_EQ(ring.mixing_row(0)[j], 1.0 / 3.0);
  EXPECT_DOUBLE_EQ(ring.mixing_row(0)[2], 0.0);
  for (const auto& topo : {Topology::ring(2), Topology::ring(5), Topology::ring(16), Topology::complete(6)}) {
    const int n = topo.size();
    for (int i = 0; i < n; ++i) {
      const auto& row = topo.mixing_row(i);
      EXPECT_NEAR(std::accumulate(row.begin(), row.end(), 0.0), 1.0, 1e-15);
      for (int j = 0; j < n; ++j) EXPECT_DOUBLE_EQ(row[j], topo.mixing_row(j)[i]);
    }
  }
  EXPECT_DOUBLE_EQ(Topology::complete(6).mixing_row(2)[4], 1.0 / 6.0);
}

TEST(Topology, UnknownKindNamesTheChoices) {
  try {
    Topology::make("hypercube", 8);
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "unknown topology \"hypercube\" (expected one of: ring, complete)");
  }
}

}  // namespace
}  // namespace dtsim::net
