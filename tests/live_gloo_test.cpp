// Live over Gloo versus emulated: 4 processes of `dtsim live` on localhost and one
// emulated run of the same scenario end 20 steps with the same parameters on every
// rank (to 1e-5) and count the same bytes per step.
#include <gtest/gtest.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmath>
#include <future>
#include <vector>

#include "test_util.hpp"

namespace dtsim {
namespace {

using nlohmann::json;

// A port the kernel considers free right now.
int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

json scenario(const std::string& variant) {
  return {{"name", "live-" + variant},
          {"ranks", 4},
          {"steps", 20},
          {"seed", 11},
          {"workload", {{"kind", "logistic_regression"}, {"samples", 1024}, {"features", 16}, {"batch_size", 32}}},
          {"algorithm",
           {{"name", "parallel_sgd"},
            {"variant", variant},
            {"lr", 0.5},
            {"momentum", 0.9},
            {"nesterov", true},
            {"weight_decay", 1e-4}}},
          {"topology", {{"kind", "ring"}}},
          {"network", {{"model", "alpha_beta"}, {"latency_us", 5}, {"bandwidth_GBps", 1}}}};
}

class LiveVersusEmulated : public ::testing::TestWithParam<std::string> {};

TEST_P(LiveVersusEmulated, SameParametersAndBytes) {
  const std::string variant = GetParam();
  auto dir = testing::fresh_dir("live-" + variant);
  const auto file = dir / "s.json";
  testing::write_file(file, scenario(variant).dump());
  const std::string bin = DTSIM_BINARY;

  auto emulated = testing::run_command(bin + " run --quiet " + file.string() + " --out " + (dir / "emu").string() +
                                       " --dump-params " + (dir / "emu" / "p").string());
  ASSERT_EQ(emulated.exit_code, 0) << emulated.output;

  const int port = free_port();
  std::vector<std::future<testing::CommandResult>> ranks;
  for (int r = 0; r < 4; ++r) {
    const std::string env = "RANK=" + std::to_string(r) + " WORLD_SIZE=4 MASTER_ADDR=127.0.0.1 MASTER_PORT=" +
                            std::to_string(port) + " DTSIM_TIMEOUT_S=60 timeout 120 ";
    ranks.push_back(std::async(std::launch::async, testing::run_command,
                               env + bin + " live --quiet " + file.string() + " --out " + (dir / "live").string() +
                                   " --dump-params " + (dir / "live" / "p").string()));
  }
  for (int r = 0; r < 4; ++r) {
    auto res = ranks[r].get();
    ASSERT_EQ(res.exit_code, 0) << "rank " << r << ": " << res.output;
  }

  for (int r = 0; r < 4; ++r) {
    const auto name = "p.rank" + std::to_string(r) + ".json";
    auto live = testing::read_json(dir / "live" / name)["params"];
    auto emu = testing::read_json(dir / "emu" / name)["params"];
    ASSERT_EQ(live.size(), emu.size());
    for (auto& [key, values] : emu.items()) {
      ASSERT_EQ(live[key].size(), values.size()) << key;
      for (std::size_t i = 0; i < values.size(); ++i)
        EXPECT_NEAR(live[key][i].get<double>(), values[i].get<double>(), 1e-5) << "rank " << r << " " << key << "[" << i << "]";
    }
  }
  auto live_result = testing::read_json(dir / "live" / "s.live.result.json");
  auto emu_result = testing::read_json(dir / "emu" / "s.result.json");
  EXPECT_EQ(live_result["mode"], "live");
  EXPECT_EQ(live_result["backend"], "gloo");
  EXPECT_EQ(live_result["per_step"]["wire_bytes"], emu_result["per_step"]["wire_bytes"]);
  EXPECT_EQ(live_result["per_step"]["n_bits"], emu_result["per_step"]["n_bits"]);
  EXPECT_EQ(live_result["per_step"]["calls"], emu_result["per_step"]["calls"]);
  EXPECT_GT(emu_result["per_step"]["wire_bytes"][0].get<double>(), 0.0);
}

INSTANTIATE_TEST_SUITE_P(Gloo, LiveVersusEmulated, ::testing::Values("centralized", "decentralized"));

// A peer that never arrives ends the job within the timeout with a one-line error,
// not a hang.
TEST(Live, MissingPeerTimesOut) {
  auto dir = testing::fresh_dir("live-timeout");
  const auto file = dir / "s.json";
  testing::write_file(file, scenario("centralized").dump());
  const std::string env = "RANK=1 WORLD_SIZE=4 MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(free_port()) +
                          " DTSIM_TIMEOUT_S=2 timeout 60 ";
  auto r = testing::run_command(env + DTSIM_BINARY + " live --quiet " + file.string());
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("dtsim: run failed: gloo rendezvous at 127.0.0.1"), std::string::npos) << r.output;
}

TEST(Live, WorldSizeMustMatchTheScenario) {
  auto dir = testing::fresh_dir("live-size");
  const auto file = dir / "s.json";
  testing::write_file(file, scenario("centralized").dump());
  auto r = testing::run_command("RANK=0 WORLD_SIZE=3 " + std::string(DTSIM_BINARY) + " live " + file.string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.output, "dtsim: error: " + file.string() + ": /ranks: the scenario has 4 ranks but WORLD_SIZE is 3\n");
  r = testing::run_command("env -u RANK WORLD_SIZE=4 " + std::string(DTSIM_BINARY) + " live " + file.string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("RANK is not set"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace dtsim
