// Every Gloo collective against the emulated backend. The test re-runs this binary
// as 3 live ranks (DTSIM_LIVE_CHILD=1 with torchrun variables); each child runs the same
// program on the Gloo communicator and writes what it received; the parent runs the
// program emulated and compares: variable-size all-gather, packed bytes, broadcast,
// all-reduce (sum and average; fp32, fp64, fp16 and bf16) and ring exchange.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <future>

#include "comm/emulated.hpp"
#include "comm/gloo.hpp"
#include "network_models/network.hpp"
#include "network_models/topology.hpp"
#include "sim/engine.hpp"
#include "comm/live_env.hpp"
#include "test_util.hpp"

namespace dtsim::comm {
namespace {

using nlohmann::json;
constexpr int kRanks = 3;

json to_json(const at::Tensor& t) {
  auto d = t.to(at::kDouble).contiguous();
  return std::vector<double>(d.data_ptr<double>(), d.data_ptr<double>() + d.numel());
}

// The program every rank runs; `out` collects what the rank ended up with.
sim::Task<void> program(Communicator& c, json& out) {
  const int r = c.rank();
  const at::Tensor mine = at::arange(r + 1, at::kFloat) + 10.0f * static_cast<float>(r);
  std::vector<at::Tensor> gathered;
  co_await c.all_gather(mine, gathered);
  for (auto& g : gathered) out["all_gather"].push_back(to_json(g));

  const at::Tensor bytes = at::full({2 * r + 1}, 7 * r + 3, at::kByte);
  std::vector<at::Tensor> gathered_bytes;
  co_await c.all_gather(bytes, gathered_bytes);
  for (auto& g : gathered_bytes) out["all_gather_bytes"].push_back(to_json(g));

  at::Tensor b = at::full({4}, static_cast<float>(r + 1));
  co_await c.broadcast(b, 2);
  out["broadcast"] = to_json(b);

  at::Tensor s = at::arange(5, at::kDouble) * (r + 1);
  co_await c.all_reduce(s, ReduceOp::Sum);
  out["sum"] = to_json(s);
  at::Tensor a = at::arange(5, at::kFloat) * static_cast<float>(r);
  co_await c.all_reduce(a, ReduceOp::Average);
  out["average"] = to_json(a);
  // 16-bit payloads (ddp's fp16 / bf16 hooks): small integers, exact in any summation order.
  for (const auto dtype : {at::kHalf, at::kBFloat16}) {
    at::Tensor h = (at::arange(5, at::kFloat) * static_cast<float>(r + 1)).to(dtype);
    co_await c.all_reduce(h, ReduceOp::Sum);
    out[dtype == at::kHalf ? "sum_fp16" : "sum_bf16"] = to_json(h);
  }

  auto topo = net::Topology::ring(c.size());
  std::vector<at::Tensor> received;
  const at::Tensor payload = at::full({6}, static_cast<float>(r) + 0.5f);
  co_await c.exchange(payload, topo.neighbors(r), received);
  for (auto& x : received) out["exchange"].push_back(to_json(x));
  // Point-to-point around the ring, received in order from the left neighbour.
  const at::Tensor note = at::full({3}, 100.0 + r, at::kDouble);
  at::Tensor heard = at::empty({3}, at::kDouble);
  auto sent = c.send(note, (r + 1) % c.size());
  co_await c.recv(heard, (r + c.size() - 1) % c.size());
  co_await sent;
  out["recv"] = to_json(heard);
  out["wire_bytes"] = c.traffic().wire_bytes;
  out["calls"] = c.traffic().calls;
}

// Child side: runs only inside the processes the parent test starts.
TEST(LiveCommChild, Rank) {
  const char* out_dir = std::getenv("DTSIM_LIVE_CHILD");
  if (!out_dir) GTEST_SKIP() << "runs only as a child of LiveComm.CollectivesMatchEmulated";
  auto comm = make_gloo_communicator(LiveEnv::from_environment());
  json out;
  sim::run_blocking(program(*comm, out));
  testing::write_file(std::string(out_dir) + "/rank" + std::to_string(comm->rank()) + ".json", out.dump());
}

TEST(LiveComm, CollectivesMatchEmulated) {
  auto dir = testing::fresh_dir("live-comm");
  const int port = comm::free_loopback_port();
  std::vector<std::future<testing::CommandResult>> children;
  for (int r = 0; r < kRanks; ++r)
    children.push_back(std::async(std::launch::async, testing::run_command,
                                  "DTSIM_LIVE_CHILD=" + dir.string() + " RANK=" + std::to_string(r) + " WORLD_SIZE=" +
                                      std::to_string(kRanks) + " MASTER_ADDR=127.0.0.1 MASTER_PORT=" +
                                      std::to_string(port) + " DTSIM_TIMEOUT_S=60 timeout 120 /proc/" +
                                      std::to_string(::getpid()) + "/exe --gtest_filter=LiveCommChild.Rank"));
  for (auto& c : children) {
    auto res = c.get();
    ASSERT_EQ(res.exit_code, 0) << res.output;
  }

  sim::Engine engine;
  net::NetworkConfig config;
  config.nominal = {1e-6, 1e9};
  EmulatedWorld world(engine, std::make_shared<net::Network>(engine, net::Topology::ring(kRanks, config.nominal), config),
                      ComputeTiming{});
  std::vector<json> emulated(kRanks);
  for (int r = 0; r < kRanks; ++r) engine.spawn(program(world.communicator(r), emulated[r]), "rank");
  engine.run();
  for (int r = 0; r < kRanks; ++r) {
    auto live = testing::read_json(dir / ("rank" + std::to_string(r) + ".json"));
    EXPECT_EQ(live, emulated[r]) << "rank " << r << "\nlive:     " << live.dump() << "\nemulated: " << emulated[r].dump();
  }
  // Spot-check the emulated side against the definition, so both cannot be wrong alike.
  EXPECT_EQ(emulated[1]["all_gather"][2], json({20.0, 21.0, 22.0}));
  EXPECT_EQ(emulated[0]["broadcast"], json({3.0, 3.0, 3.0, 3.0}));
  EXPECT_EQ(emulated[2]["sum"], json({0.0, 6.0, 12.0, 18.0, 24.0}));
  EXPECT_EQ(emulated[1]["sum_bf16"], json({0.0, 6.0, 12.0, 18.0, 24.0}));
  EXPECT_EQ(emulated[1]["sum_fp16"], emulated[1]["sum_bf16"]);
}

}  // namespace
}  // namespace dtsim::comm
