// The emulated backend: real data movement, completion times from the network model,
// traffic counted per rank, and mismatched programs reported instead of hanging.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <memory>
#include <vector>

#include "comm/emulated.hpp"
#include "comm/phase_timer.hpp"
#include "comm/wire_bytes.hpp"
#include "network_models/network.hpp"
#include "network_models/topology_spec.hpp"
#include "sim/engine.hpp"

namespace dtsim::comm {
namespace {

constexpr double kAlpha = 2e-6;
constexpr double kBeta = 1e10;

struct World {
  sim::Engine engine;
  std::unique_ptr<EmulatedWorld> world;
  World(int n, const std::string& topology = "ring", const std::string& model = "alpha_beta") {
    net::NetworkConfig config;
    config.model = model;
    config.nominal = {kAlpha, kBeta};
    auto network = std::make_shared<net::Network>(
        engine, net::make_topology(net::parse_topology(topology), n, config.nominal), config);
    world = std::make_unique<EmulatedWorld>(engine, network, ComputeTiming{});
  }
  // Spawns program(comm) on every rank and runs the simulation.
  void run(const std::function<sim::Task<void>(Communicator&)>& program) {
    for (int r = 0; r < world->size(); ++r) engine.spawn(program(world->communicator(r)), "rank " + std::to_string(r));
    engine.run();
  }
};

// Each rank contributes (rank+1) * ones(m); the all-reduce gives sum = n(n+1)/2 (or the
// average), every rank leaves at 2(n-1)(alpha + S/(n beta)), and each rank's counted
// traffic is its ring share, which adds up to 2(n-1) S over the job.
TEST(Emulated, AllReduceComputesTheSumAtTheClosedFormTime) {
  for (int n : {1, 2, 3, 8}) {
    for (std::int64_t m : {1, 24, 1000, 4099, 24 * 4099}) {
      World w(n);
      std::vector<at::Tensor> data(n);
      std::vector<double> finish(n);
      w.run([&](Communicator& c) -> sim::Task<void> {
        data[c.rank()] = at::full({m}, static_cast<float>(c.rank() + 1));
        co_await c.all_reduce(data[c.rank()], ReduceOp::Sum);
        finish[c.rank()] = c.now();
      });
      // Chunks are whole elements: with m divisible by n the closed form holds exactly;
      // otherwise the larger chunks pace the ring, between S/n and ceil(m/n) elements.
      const double bytes = 4.0 * static_cast<double>(m);
      const double want = n == 1 ? 0.0 : 2.0 * (n - 1) * (kAlpha + bytes / (n * kBeta));
      const double ceiling = n == 1 ? 0.0 : 2.0 * (n - 1) * (kAlpha + 4.0 * static_cast<double>((m + n - 1) / n) / kBeta);
      std::uint64_t total_traffic = 0;
      for (int r = 0; r < n; ++r) {
        EXPECT_TRUE(at::equal(data[r], at::full({m}, n * (n + 1) / 2.0f)));
        if (m % n == 0) {
          EXPECT_NEAR(finish[r], want, 1e-9 * want) << "n=" << n << " m=" << m;
        } else {
          EXPECT_GE(finish[r], want * (1 - 1e-12)) << "n=" << n << " m=" << m;
          EXPECT_LE(finish[r], ceiling * (1 + 1e-12)) << "n=" << n << " m=" << m;
        }
        total_traffic += w.world->communicator(r).traffic().wire_bytes;
      }
      EXPECT_EQ(total_traffic, static_cast<std::uint64_t>(2 * (n - 1) * m * 4));
    }
  }
}

// Phase names follow one rule (group/step), so every algorithm's phases read alike.
TEST(PhaseTimer, NamesAreGroupSlashStep) {
  World w(2);
  PhaseTimer timer(w.world->communicator(0));
  EXPECT_NO_THROW(timer.index_of("sync/compress"));
  EXPECT_NO_THROW(timer.index_of("forward_pass"));
  for (const char* bad : {"sync.sync", "Sync/compress", "a/b/c", "/sync", "sync/", ""})
    EXPECT_THROW(timer.index_of(bad), std::logic_error) << bad;
}

TEST(Emulated, AllReduceAverage) {
  World w(4);
  std::vector<at::Tensor> data(4);
  w.run([&](Communicator& c) -> sim::Task<void> {
    data[c.rank()] = at::arange(5, at::kFloat) * static_cast<float>(c.rank());
    co_await c.all_reduce(data[c.rank()], ReduceOp::Average);
  });
  for (auto& t : data) EXPECT_TRUE(at::allclose(t, at::arange(5, at::kFloat) * 1.5f));
}

// 16-bit payloads (ddp's fp16 / bf16 hooks) are summed in rank order, each addition
// rounded to the payload's type (round to nearest even), so the result does not depend
// on arrival order. bf16 has 8 significant bits: 1 + 2^-8 is a tie that rounds back to 1,
// twice, where the exact sum 1 + 2^-7 is representable; fp16 (11 bits) the same at 2^-11.
TEST(Emulated, HalfAndBFloat16AllReduceRoundEachAdditionInRankOrder) {
  for (const auto dtype : {at::kBFloat16, at::kHalf}) {
    const double tiny = dtype == at::kBFloat16 ? std::ldexp(1.0, -8) : std::ldexp(1.0, -11);
    World w(3);
    std::vector<at::Tensor> data(3);
    const std::vector<double> values{1.0, tiny, tiny};
    w.run([&](Communicator& c) -> sim::Task<void> {
      data[c.rank()] = at::full({4}, values[c.rank()], at::TensorOptions().dtype(dtype));
      co_await c.all_reduce(data[c.rank()], ReduceOp::Sum);
    });
    for (auto& t : data) {
      EXPECT_EQ(t.scalar_type(), dtype);
      EXPECT_EQ(t.to(at::kDouble).max().item<double>(), 1.0) << c10::toString(dtype);
    }
    EXPECT_EQ(at::full({1}, 1.0 + 2.0 * tiny, at::TensorOptions().dtype(dtype)).item<double>(), 1.0 + 2.0 * tiny);
  }
}

// Results appear only when the operation completes: a rank that issues the all-reduce,
// then computes, still sees its own input until it awaits.
TEST(Emulated, ResultsAreInvisibleBeforeCompletion) {
  World w(2);
  std::vector<float> seen_before(2), seen_after(2);
  std::vector<at::Tensor> data(2);
  w.run([&](Communicator& c) -> sim::Task<void> {
    data[c.rank()] = at::full({1}, static_cast<float>(c.rank() + 1));
    auto op = c.all_reduce(data[c.rank()], ReduceOp::Sum);
    seen_before[c.rank()] = data[c.rank()].item<float>();
    co_await op;
    seen_after[c.rank()] = data[c.rank()].item<float>();
  });
  EXPECT_EQ(seen_before, (std::vector<float>{1.0f, 2.0f}));
  EXPECT_EQ(seen_after, (std::vector<float>{3.0f, 3.0f}));
}

// Variable-size all-gather: rank r contributes r+1 elements of value r.
TEST(Emulated, AllGatherWithVariableSizes) {
  const int n = 5;
  World w(n);
  std::vector<std::vector<at::Tensor>> out(n);
  std::vector<double> finish(n);
  w.run([&](Communicator& c) -> sim::Task<void> {
    auto mine = at::full({c.rank() + 1}, static_cast<float>(c.rank()));
    co_await c.all_gather(mine, out[c.rank()]);
    finish[c.rank()] = c.now();
  });
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(out[r].size(), static_cast<std::size_t>(n));
    for (int j = 0; j < n; ++j) EXPECT_TRUE(at::equal(out[r][j], at::full({j + 1}, static_cast<float>(j))));
    // Rank r forwards every block but rank (r+1)'s: 15 - (r+2) elements of 4 bytes.
    EXPECT_EQ(w.world->communicator(r).traffic().wire_bytes, static_cast<std::uint64_t>(4 * (15 - ((r + 1) % n + 1))));
  }
}

// Neighbour exchange on a ring: each rank receives both neighbours' payloads after
// alpha + S/beta, and sends S bytes per neighbour.
TEST(Emulated, RingExchangeDeliversNeighboursPayloads) {
  const int n = 6;
  World w(n);
  auto topo = net::Topology::ring(n);
  std::vector<std::vector<at::Tensor>> got(n);
  std::vector<double> finish(n);
  w.run([&](Communicator& c) -> sim::Task<void> {
    auto mine = at::full({250}, static_cast<float>(c.rank()));
    const auto& peers = topo.neighbors(c.rank());
    co_await c.exchange(mine, peers, got[c.rank()]);
    finish[c.rank()] = c.now();
  });
  for (int r = 0; r < n; ++r) {
    const auto& peers = topo.neighbors(r);
    ASSERT_EQ(got[r].size(), peers.size());
    for (std::size_t k = 0; k < peers.size(); ++k)
      EXPECT_TRUE(at::equal(got[r][k], at::full({250}, static_cast<float>(peers[k]))));
    EXPECT_DOUBLE_EQ(finish[r], kAlpha + 1000.0 / kBeta);
    EXPECT_EQ(w.world->communicator(r).traffic().wire_bytes, 2000u);
  }
}

// A receiver that posts late gets the data at its post time; the early one waits for
// the late sender: completion = max(own post, sender post + transfer).
TEST(Emulated, ExchangeWaitsForTheLateSender) {
  World w(2);
  std::vector<double> finish(2);
  std::vector<std::vector<at::Tensor>> got(2);
  w.run([&](Communicator& c) -> sim::Task<void> {
    const sim::ComputeCost ten_us{0.0, 1e6};  // 1e6 bytes at 100 GB/s
    if (c.rank() == 1) co_await c.compute(ten_us, [] {});
    std::vector<int> peer{1 - c.rank()};
    // (A braced size list inside a co_await expression trips GCC 12, hence the variable.)
    const at::Tensor payload = at::ones({10});
    co_await c.exchange(payload, peer, got[c.rank()]);
    finish[c.rank()] = c.now();
  });
  const double transfer = kAlpha + 40.0 / kBeta;
  EXPECT_DOUBLE_EQ(finish[0], 1e-5 + transfer);
  EXPECT_DOUBLE_EQ(finish[1], 1e-5 + transfer);
}

TEST(Emulated, BroadcastFromRoot) {
  const int n = 5;
  World w(n, "complete");
  std::vector<at::Tensor> data(n);
  w.run([&](Communicator& c) -> sim::Task<void> {
    data[c.rank()] = at::full({3}, static_cast<float>(c.rank()));
    co_await c.broadcast(data[c.rank()], 3);
  });
  for (auto& t : data) EXPECT_TRUE(at::equal(t, at::full({3}, 3.0f)));
}

// Ranks that disagree on the collective get an error naming both calls, not a hang.
TEST(Emulated, MismatchedCollectivesAreReported) {
  World w(2);
  try {
    w.run([&](Communicator& c) -> sim::Task<void> {
      at::Tensor t = at::ones({c.rank() == 0 ? 4 : 5});
      co_await c.all_reduce(t, ReduceOp::Sum);
    });
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("collective #0 does not match"), std::string::npos) << e.what();
  }
}

// A rank that skips a collective leaves its peers waiting: reported as a deadlock.
TEST(Emulated, MissingPeerIsADeadlockNotAHang) {
  World w(3);
  try {
    w.run([&](Communicator& c) -> sim::Task<void> {
      if (c.rank() == 2) co_return;
      at::Tensor t = at::ones({4});
      co_await c.all_reduce(t, ReduceOp::Sum);
    });
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("deadlocked"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("rank 0, rank 1"), std::string::npos) << e.what();
  }
}

// The compute cost model: time = flops / rate + bytes / bandwidth.
TEST(Emulated, ComputeAdvancesTheClockByTheCostModel) {
  World w(1);
  double finish = 0.0;
  bool ran = false;
  w.run([&](Communicator& c) -> sim::Task<void> {
    const sim::ComputeCost cost{2e9, 5e8};
    co_await c.compute(cost, [&] { ran = true; });
    finish = c.now();
  });
  EXPECT_TRUE(ran);
  EXPECT_DOUBLE_EQ(finish, 2e9 / 1e12 + 5e8 / 1e11);
}

// The ring all-reduce byte count per rank, with uneven chunks: rank r sends every
// chunk but (r+1) mod n in reduce-scatter and every chunk but (r+2) mod n in all-gather.
TEST(WireBytes, RingAllReduceSharesAddUp) {
  for (int n : {2, 3, 7}) {
    for (std::int64_t elements : {1, 10, 1001}) {
      std::uint64_t total = 0;
      for (int r = 0; r < n; ++r) {
        const net::CollectiveSpec spec{.kind = net::CollectiveKind::AllReduce, .algorithm = net::Algorithm::Ring,
                                       .ranks = n, .elements = elements};
        const auto sent = collective_bytes_sent(spec, r);
        auto chunk = [&](int i) { return elements / n + (i < elements % n ? 1 : 0); };
        EXPECT_EQ(sent, static_cast<std::uint64_t>(4 * (2 * elements - chunk((r + 1) % n) - chunk((r + 2) % n))));
        total += sent;
      }
      EXPECT_EQ(total, static_cast<std::uint64_t>(2 * (n - 1) * elements * 4));
    }
  }
}

// The same program on the flow model: on a ring every ring all-reduce message has its
// own link, so contention-free timing equals the closed form there too; and two
// concurrent exchanges over a star share the switch links.
TEST(Emulated, FlowModelAllReduceAndContention) {
  const int n = 4;
  World w(n, "ring", "flow");
  std::vector<double> finish(n);
  std::vector<at::Tensor> data(n);
  w.run([&](Communicator& c) -> sim::Task<void> {
    data[c.rank()] = at::ones({4000});
    co_await c.all_reduce(data[c.rank()], ReduceOp::Sum);
    finish[c.rank()] = c.now();
  });
  for (int r = 0; r < n; ++r) EXPECT_NEAR(finish[r], 6 * (kAlpha + 4000.0 / kBeta), 1e-15);

  World star(3, "star", "flow");
  std::vector<std::vector<at::Tensor>> got(3);
  std::vector<double> done(3);
  star.run([&](Communicator& c) -> sim::Task<void> {
    // Ranks 0 and 1 both exchange with rank 2: rank 2's link carries two flows each way.
    std::vector<int> peers = c.rank() == 2 ? std::vector<int>{0, 1} : std::vector<int>{2};
    const at::Tensor payload = at::ones({2500});
    co_await c.exchange(payload, peers, got[c.rank()]);
    done[c.rank()] = c.now();
  });
  // 10 kB through two links of latency alpha, at half the bandwidth on the shared link.
  EXPECT_NEAR(done[2], 2 * kAlpha + 2 * 10000.0 / kBeta, 1e-15);
}

}  // namespace
}  // namespace dtsim::comm

namespace dtsim::comm {
namespace {

// Point-to-point: a ring of sends, each rank receiving from its left neighbour; the
// message takes alpha + S/beta; plain messages do not match exchange messages.
TEST(Emulated, SendAndReceiveAroundARing) {
  const int n = 4;
  World w(n);
  std::vector<at::Tensor> got(n);
  std::vector<double> finish(n);
  w.run([&](Communicator& c) -> sim::Task<void> {
    const int r = c.rank();
    got[r] = at::empty({100});
    const at::Tensor mine = at::full({100}, static_cast<float>(r));
    auto out = c.send(mine, (r + 1) % n);
    co_await c.recv(got[r], (r + n - 1) % n);
    co_await out;
    finish[r] = c.now();
  });
  for (int r = 0; r < n; ++r) {
    EXPECT_TRUE(at::equal(got[r], at::full({100}, static_cast<float>((r + n - 1) % n))));
    EXPECT_DOUBLE_EQ(finish[r], kAlpha + 400.0 / kBeta);
    EXPECT_EQ(w.world->communicator(r).traffic().wire_bytes, 400u);
  }
}

// Packed byte payloads travel like any tensor: rank r gathers every rank's bytes and
// exchanges its bytes with its ring neighbours.
TEST(Emulated, PackedBytePayloads) {
  const int n = 3;
  World w(n);
  std::vector<std::vector<at::Tensor>> gathered(n), exchanged(n);
  auto topo = net::Topology::ring(n);
  w.run([&](Communicator& c) -> sim::Task<void> {
    const at::Tensor bytes = at::full({c.rank() + 2}, c.rank() * 16 + 1, at::kByte);
    co_await c.all_gather(bytes, gathered[c.rank()]);
    const at::Tensor fixed = at::full({5}, 200 + c.rank(), at::kByte);
    co_await c.exchange(fixed, topo.neighbors(c.rank()), exchanged[c.rank()]);
  });
  for (int r = 0; r < n; ++r) {
    for (int j = 0; j < n; ++j) EXPECT_TRUE(at::equal(gathered[r][j], at::full({j + 2}, j * 16 + 1, at::kByte)));
    const auto& peers = topo.neighbors(r);
    for (std::size_t k = 0; k < peers.size(); ++k)
      EXPECT_TRUE(at::equal(exchanged[r][k], at::full({5}, 200 + peers[k], at::kByte)));
  }
}

}  // namespace
}  // namespace dtsim::comm
