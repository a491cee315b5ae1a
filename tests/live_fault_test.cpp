// Faults in a live job over Gloo: 4 `dtsim live` processes on localhost.
//
// - A rank killed with SIGKILL mid-run: every other rank exits with status 1 well within
//   the timeout, its one-line error names the killed rank ("rank 2 is gone (no heartbeat
//   for ...)"), and it leaves its per-step records so far in
//   <scenario>.live.rank<r>.partial.json. Killing rank 0, which serves the store, is
//   named too.
// - A peer that never arrives (WORLD_SIZE=4, 3 processes started): the three exit with
//   status 1 naming rank 3.
//
// "Mid-run" is observed, not guessed: the test reads every rank's heartbeat in the
// rendezvous store (comm/live_job.hpp: "dtsim/hb/<rank>" = "<beat> <operations done>")
// and kills only once every rank has completed 30 operations.
#include <gtest/gtest.h>

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <sstream>
#include <thread>

#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "comm/live_env.hpp"
#include "test_util.hpp"

extern char** environ;

namespace dtsim {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

// A long run (it would take minutes): it is killed long before it ends.
json long_scenario() {
  return {{"name", "fault"},
          {"ranks", 4},
          {"steps", 1000000},
          {"seed", 3},
          {"workload", {{"kind", "logistic_regression"}, {"samples", 256}, {"features", 8}, {"batch_size", 16}}},
          {"algorithm", {{"name", "parallel_sgd"}, {"variant", "centralized"}, {"lr", 0.1}}},
          {"topology", {{"kind", "ring"}}},
          {"network", {{"model", "alpha_beta"}, {"latency_us", 5}, {"bandwidth_GBps", 1}}}};
}

// A `dtsim live` rank as a child process (its pid is dtsim's: the shell execs it),
// stdout and stderr into `log`.
pid_t start_rank(int rank, int port, const std::filesystem::path& scenario, const std::filesystem::path& out,
                 const std::filesystem::path& log, int timeout_s) {
  const std::string command = "exec env RANK=" + std::to_string(rank) + " WORLD_SIZE=4 MASTER_ADDR=127.0.0.1 MASTER_PORT=" +
                              std::to_string(port) + " DTSIM_TIMEOUT_S=" + std::to_string(timeout_s) + " " +
                              DTSIM_BINARY + " live --quiet " + scenario.string() + " --out " + out.string() + " >" +
                              log.string() + " 2>&1";
  const char* argv[] = {"/bin/sh", "-c", command.c_str(), nullptr};
  pid_t pid = -1;
  if (posix_spawn(&pid, "/bin/sh", nullptr, nullptr, const_cast<char**>(argv), environ) != 0) return -1;
  return pid;
}

// Waits for `pid` until `deadline`; returns its exit status, or -1 (and kills it) past it.
int wait_exit(pid_t pid, Clock::time_point deadline) {
  int status = 0;
  while (Clock::now() < deadline) {
    if (::waitpid(pid, &status, WNOHANG) == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, &status, 0);
  return -1;
}

// Operations rank `rank` has completed, from its heartbeat in the store (0 before its first).
std::uint64_t ops_done(c10d::TCPStore& store, int rank) {
  const std::string key = "dtsim/hb/" + std::to_string(rank);
  if (!store.check({key})) return 0;
  const auto value = store.get(key);
  std::istringstream in(std::string(value.begin(), value.end()));
  std::uint64_t beat = 0, ops = 0;
  in >> beat >> ops;
  return ops;
}

class KilledRank : public ::testing::TestWithParam<int> {};

TEST_P(KilledRank, SurvivorsNameItAndKeepTheirRecords) {
  const int victim = GetParam();
  auto dir = testing::fresh_dir("live-fault-" + std::to_string(victim));
  const auto scenario = dir / "s.json";
  testing::write_file(scenario, long_scenario().dump());
  const int port = comm::free_loopback_port(), timeout_s = 10;
  std::vector<pid_t> pids;
  for (int r = 0; r < 4; ++r)
    pids.push_back(start_rank(r, port, scenario, dir / "out", dir / ("rank" + std::to_string(r) + ".log"), timeout_s));
  for (pid_t p : pids) ASSERT_GT(p, 0);

  // Every rank is training: 30 operations done each, seen in their heartbeats.
  c10d::TCPStoreOptions opts;
  opts.port = static_cast<std::uint16_t>(port);
  opts.isServer = false;
  opts.waitWorkers = false;
  opts.timeout = std::chrono::seconds(60);
  bool training = false;
  {
    c10d::TCPStore store("127.0.0.1", opts);
    const auto until = Clock::now() + std::chrono::seconds(120);
    while (!training && Clock::now() < until) {
      training = true;
      for (int r = 0; r < 4; ++r) training = training && ops_done(store, r) >= 30;
      if (!training) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  ASSERT_TRUE(training) << "the ranks did not get going";
  ASSERT_EQ(::kill(pids[victim], SIGKILL), 0);
  const auto killed_at = Clock::now();
  wait_exit(pids[victim], Clock::now() + std::chrono::seconds(10));

  // The survivors end with status 1 within the timeout (plus the heartbeat window).
  const auto deadline = killed_at + std::chrono::seconds(2 * timeout_s);
  for (int r = 0; r < 4; ++r) {
    if (r == victim) continue;
    const int code = wait_exit(pids[r], deadline);
    const std::string log = testing::read_file(dir / ("rank" + std::to_string(r) + ".log"));
    EXPECT_EQ(code, 1) << "rank " << r << " (-1: still running " << 2 * timeout_s << " s after the kill): " << log;
    EXPECT_NE(log.find("dtsim: run failed: rank " + std::to_string(r) + ": "), std::string::npos) << log;
    EXPECT_NE(log.find("rank " + std::to_string(victim) + " is gone"), std::string::npos) << log;
    EXPECT_EQ(std::count(log.begin(), log.end(), '\n'), 1) << "one line: " << log;

    const auto partial_file = dir / "out" / ("s.live.rank" + std::to_string(r) + ".partial.json");
    ASSERT_TRUE(std::filesystem::exists(partial_file)) << partial_file;
    const json partial = testing::read_json(partial_file);
    EXPECT_EQ(partial["rank"], r);
    EXPECT_EQ(partial["backend"], "gloo");
    EXPECT_NE(partial["error"].get<std::string>().find("rank " + std::to_string(victim) + " is gone"), std::string::npos);
    // 30 operations, a few per step: several steps ended, each timed.
    const auto& times = partial["per_step"]["time_s"];
    EXPECT_GE(times.size(), 5u);
    EXPECT_GE(partial["steps_started"].get<std::size_t>(), times.size());
    for (const auto& t : times) EXPECT_GT(t.get<double>(), 0.0);
    EXPECT_EQ(partial["per_step"]["phases_s"]["forward_pass"].size(), partial["steps_started"]);
    EXPECT_GT(partial["wire_bytes_so_far"].get<double>(), 0.0);
  }
  EXPECT_FALSE(std::filesystem::exists(dir / "out" / "s.live.result.json"));
}

std::string victim_name(const ::testing::TestParamInfo<int>& param) { return "rank" + std::to_string(param.param); }
INSTANTIATE_TEST_SUITE_P(Gloo, KilledRank, ::testing::Values(2, 0), victim_name);

// WORLD_SIZE=4 but rank 3 never starts: the others end within the timeout naming it.
TEST(LiveFault, NeverArrivingPeerIsNamed) {
  auto dir = testing::fresh_dir("live-never");
  const auto scenario = dir / "s.json";
  testing::write_file(scenario, long_scenario().dump());
  const int port = comm::free_loopback_port();
  std::vector<std::future<testing::CommandResult>> ranks;
  for (int r = 0; r < 3; ++r)
    ranks.push_back(std::async(std::launch::async, testing::run_command,
                               "RANK=" + std::to_string(r) + " WORLD_SIZE=4 MASTER_ADDR=127.0.0.1 MASTER_PORT=" +
                                   std::to_string(port) + " DTSIM_TIMEOUT_S=3 timeout 60 " + DTSIM_BINARY +
                                   " live --quiet " + scenario.string()));
  for (int r = 0; r < 3; ++r) {
    auto res = ranks[r].get();
    EXPECT_EQ(res.exit_code, 1) << "rank " << r << ": " << res.output;
    EXPECT_NE(res.output.find("rank 3 never joined (waited 3 s)"), std::string::npos) << "rank " << r << ": " << res.output;
    EXPECT_EQ(std::count(res.output.begin(), res.output.end(), '\n'), 1) << res.output;
  }
}

}  // namespace
}  // namespace dtsim
