// Resource limits up front (runner/resource_estimate.hpp, runner/progress.hpp): a scenario
// that cannot fit in memory is refused before anything large is allocated, with one line
// naming the JSON path, the estimate and the way out; the estimate is close to what runs
// really use; a long run says so; a progress line appears on a terminal only and changes
// nothing in the results.
#include <gtest/gtest.h>

#include <pty.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "network_models/ring_wavefront.hpp"
#include "network_models/topology.hpp"
#include "network_models/topology_spec.hpp"
#include "runner/progress.hpp"
#include "runner/resource_estimate.hpp"
#include "runner/run.hpp"
#include "runner/scenario.hpp"
#include "test_util.hpp"

namespace dtsim {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// Sets an environment variable for one test.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) ::setenv(name, value, 1);
    else ::unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_) ::setenv(name_, old_->c_str(), 1);
    else ::unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

json base(int ranks, json workload, json algorithm, json topology = {{"kind", "ring"}}, std::int64_t steps = 10) {
  return {{"name", "limits"},
          {"ranks", ranks},
          {"steps", steps},
          {"seed", 1},
          {"workload", workload},
          {"algorithm", algorithm},
          {"topology", topology},
          {"network", {{"model", "alpha_beta"}, {"latency_us", 5}, {"bandwidth_GBps", 1.25}}}};
}

const json kCentralized = {{"name", "parallel_sgd"}, {"variant", "centralized"}, {"lr", 0.1}, {"momentum", 0.9}};
const json kResnet50 = {{"type", "resnet50"}, {"batch_size", 32}};

json resnet50_4096() { return base(4096, kResnet50, kCentralized); }
json logistic_terabyte() {
  return base(8, {{"type", "logistic_regression"}, {"samples", 4096}, {"features", 1000000000000}}, kCentralized);
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The refusal run_emulated throws, within a second (nothing large is allocated first).
runner::ScenarioError refusal(const runner::Scenario& s) {
  const auto t0 = std::chrono::steady_clock::now();
  try {
    runner::run_emulated(s);
  } catch (const runner::ScenarioError& e) {
    EXPECT_LT(seconds_since(t0), 1.0) << e.what();
    EXPECT_EQ(e.kind(), runner::ErrorKind::too_large) << e.what();
    return e;
  }
  ADD_FAILURE() << "the run was not refused";
  return runner::ScenarioError("", runner::ErrorKind::syntax, "");
}

TEST(ResourceLimits, RefusesThousandsOfEmulatedResnet50RanksAndTimingOnlyFits) {
  ScopedEnv limit("DTSIM_MEMORY_LIMIT", "24G");
  auto s = runner::parse_scenario(resnet50_4096());
  const auto e = refusal(s);
  EXPECT_EQ(e.path(), "/ranks");
  const std::string what = e.what();
  EXPECT_NE(what.find("/ranks: 4096 emulated ranks of resnet50 need about 2.7 TiB"), std::string::npos) << what;
  EXPECT_NE(what.find("per rank"), std::string::npos) << what;
  EXPECT_NE(what.find("more than the 24 GiB DTSIM_MEMORY_LIMIT allows"), std::string::npos) << what;
  EXPECT_NE(what.find("use \"timing_only\": true (memory of one rank) or fewer ranks"), std::string::npos) << what;
  EXPECT_EQ(what.find('\n'), std::string::npos);
  // The way out: one rank's memory (the run itself would take minutes on 4096 ranks).
  s.timing_only = true;
  EXPECT_NO_THROW(runner::check_resources(s));
  EXPECT_LT(runner::estimate_resources(s).total_bytes(), 4.0 * (1 << 30));
}

TEST(ResourceLimits, RefusesATerabyteLogisticRegressionEvenInTimingOnlyMode) {
  ScopedEnv limit("DTSIM_MEMORY_LIMIT", "24G");
  auto s = runner::parse_scenario(logistic_terabyte());
  for (bool timing_only : {false, true}) {
    s.timing_only = timing_only;
    const auto e = refusal(s);
    EXPECT_EQ(e.path(), "/workload/features");
    const std::string what = e.what();
    EXPECT_NE(what.find("the logistic_regression data set (4096 samples x 1000000000000 features, fp32, one copy "
                        "shared by the ranks) needs about 1"),
              std::string::npos)
        << what;
    EXPECT_NE(what.find(" PiB, more than the 24 GiB DTSIM_MEMORY_LIMIT allows: use fewer samples or features"),
              std::string::npos)
        << what;
  }
}

// Products of int64 fields (samples x features here, 2^62 each) must not overflow.
TEST(ResourceLimits, HugeFieldsSaturateInsteadOfWrapping) {
  ScopedEnv limit("DTSIM_MEMORY_LIMIT", "24G");
  auto doc = base(8, {{"type", "logistic_regression"}, {"samples", std::int64_t{1} << 62}, {"features", std::int64_t{1} << 62}},
                  kCentralized, {{"kind", "ring"}}, std::int64_t{1} << 62);
  const auto s = runner::parse_scenario(doc);
  const auto e = runner::estimate_resources(s);
  EXPECT_TRUE(std::isfinite(e.total_bytes()));
  EXPECT_GT(e.total_bytes(), 1e37);
  EXPECT_THROW(runner::check_resources(s), runner::ScenarioError);
}

// A torus of 10^9 ranks is refused by the rank range; dimensions whose product overflows
// int64 are refused without overflowing; a topology that is itself too large (a complete
// graph of 2^20 ranks: 5.5e11 cables) is refused before parse_scenario builds it.
TEST(ResourceLimits, RefusesHugeTopologiesBeforeBuildingThem) {
  ScopedEnv limit("DTSIM_MEMORY_LIMIT", "24G");
  auto torus = base(1000000000, kResnet50, kCentralized, {{"kind", "torus"}, {"dims", {1000, 1000, 1000}}});
  try {
    runner::parse_scenario(torus);
    ADD_FAILURE() << "a torus of 10^9 ranks was accepted";
  } catch (const runner::ScenarioError& e) {
    EXPECT_EQ(e.path(), "/ranks") << e.what();
  }
  auto overflow = base(1 << 20, kResnet50, kCentralized, {{"kind", "torus"}, {"dims", {1 << 20, 1 << 20, 1 << 20, 1 << 20}}});
  EXPECT_THROW(runner::parse_scenario(overflow), runner::ScenarioError);

  const auto t0 = std::chrono::steady_clock::now();
  try {
    runner::parse_scenario(base(1 << 20, kResnet50, kCentralized, {{"kind", "complete"}}));
    ADD_FAILURE() << "a complete graph of 2^20 ranks was accepted";
  } catch (const runner::ScenarioError& e) {
    EXPECT_EQ(e.path(), "/topology");
    const std::string what = e.what();
    EXPECT_NE(what.find("a complete topology of 1048576 ranks (5.5e11 cables) needs about"), std::string::npos) << what;
    EXPECT_NE(what.find("use fewer ranks or a sparser topology"), std::string::npos) << what;
  }
  EXPECT_LT(seconds_since(t0), 1.0);

  // A torus of 2^18 ranks fits in timing-only mode, and says it will take long: its
  // all-reduces are rings under alpha_beta, computed from their recurrence (1.4e11
  // messages each, bookkeeping rather than events), or simulated message by message.
  auto big = base(1 << 18, kResnet50, kCentralized, {{"kind", "torus"}, {"dims", {512, 512}}}, 3);
  big["timing_only"] = true;
  auto s = runner::parse_scenario(big);
  EXPECT_NO_THROW(runner::check_resources(s));
  const auto note = runner::long_run_note(s);
  ASSERT_TRUE(note);
  EXPECT_EQ(note->rfind("note: about ", 0), 0u) << *note;
  EXPECT_NE(note->find("steps of bookkeeping (routes, the gossip graph, collective schedules and ring recurrences"),
            std::string::npos)
      << *note;
  EXPECT_NE(note->find("this run may take hours"), std::string::npos) << *note;
  s.network.evaluate_rings = false;
  const auto simulated = runner::long_run_note(s);
  ASSERT_TRUE(simulated);
  EXPECT_NE(simulated->find("simulated network events; this run may take hours"), std::string::npos) << *simulated;
  EXPECT_FALSE(runner::long_run_note(runner::parse_scenario(base(8, kResnet50, kCentralized))));
}

// SINGA's sync step over 4,096 ranks on a torus, 20 steps, its rings simulated message by
// message: 1.5e10 events if every step is simulated (hours), a tenth if reuse replays
// every step after the second (it does: about two minutes, bench/results/engine-and-flow.md).
// The note gives both; without reuse, one. With the rings computed (the default: all but
// two senders per ring are alone on a torus) it is no long run, and gets no note (23 s),
// with reuse on or off.
TEST(ResourceLimits, LongRunNoteCountsOnReuseWhereItCan) {
  auto s = runner::load_scenario(std::filesystem::path(DTSIM_SOURCE_DIR) / "scenarios" /
                                 "singa_resnet50_sync_torus4096_flow_timing.json");
  EXPECT_FALSE(runner::long_run_note(s));
  auto computed_without_reuse = s;
  computed_without_reuse.network.reuse_collectives = false;
  EXPECT_FALSE(runner::long_run_note(computed_without_reuse));
  s.network.evaluate_rings = false;
  const auto note = runner::long_run_note(s);
  ASSERT_TRUE(note);
  EXPECT_NE(note->find("simulated network events; this run may take hours, or many minutes if collective reuse "
                       "replays every step after the second"),
            std::string::npos)
      << *note;
  s.network.reuse_collectives = false;
  const auto without = runner::long_run_note(s);
  ASSERT_TRUE(without);
  EXPECT_NE(without->find("simulated network events; this run may take hours; the alpha_beta"), std::string::npos)
      << *without;
}

// On the flow model a ring's coupled senders (whose routes share a link) are still
// simulated: the estimate counts their share of the ring's messages as events, the rest
// as bookkeeping. Its shares per topology kind must be those of the routes dtsim builds
// (net::coupled_ring_senders): 3 in 8 on a hypercube, 2 per 2-D torus, none on a ring;
// on a 3-D torus it may count more (2 per 4 x 4 slice, 7 of 64 coupled), not fewer.
TEST(ResourceLimits, CountsTheCoupledRingSendersMessagesAsEvents) {
  auto s = runner::load_scenario(std::filesystem::path(DTSIM_SOURCE_DIR) / "scenarios" /
                                 "singa_resnet50_sync_torus4096_flow_timing.json");
  s.ranks = 64;
  const auto events = [&](const std::string& topology, bool evaluate) {
    auto t = s;
    t.topology = net::parse_topology(topology);
    t.network.evaluate_rings = evaluate;
    return runner::estimate_resources(t).network_events;
  };
  const double none = events("ring", true);  // no ring message simulated: the other events
  const double all = events("hypercube", false);
  ASSERT_GT(all, 10 * none);
  EXPECT_DOUBLE_EQ(events("ring", false), all);  // every message, whatever the topology
  const auto estimated_share = [&](const std::string& topology) { return (events(topology, true) - none) / (all - none); };
  const auto routed_share = [](const net::Topology& topology) {
    const auto coupled = net::coupled_ring_senders(topology);
    return static_cast<double>(std::count(coupled.begin(), coupled.end(), 1)) / static_cast<double>(coupled.size());
  };
  EXPECT_DOUBLE_EQ(routed_share(net::Topology::hypercube(64)), 0.375);
  EXPECT_NEAR(estimated_share("hypercube"), routed_share(net::Topology::hypercube(64)), 1e-12);
  EXPECT_NEAR(estimated_share("torus:8x8"), routed_share(net::Topology::torus({8, 8})), 1e-12);
  EXPECT_NEAR(estimated_share("torus:16x4"), routed_share(net::Topology::torus({16, 4})), 1e-12);
  EXPECT_EQ(routed_share(net::Topology::ring(64)), 0.0);
  EXPECT_GE(estimated_share("torus:4x4x4"), routed_share(net::Topology::torus({4, 4, 4})));
  EXPECT_LT(estimated_share("torus:4x4x4"), 0.15);

  // At 4,096 ranks the hypercube's simulated share makes a long run, unlike the torus's.
  s.ranks = 4096;
  EXPECT_FALSE(runner::long_run_note(s));
  s.topology = net::parse_topology("hypercube");
  EXPECT_TRUE(runner::long_run_note(s));
}

// Gossip on a dense topology keeps a message per neighbour: the way out is the topology.
TEST(ResourceLimits, NamesTheTopologyWhenNeighbourMessagesDominate) {
  ScopedEnv limit("DTSIM_MEMORY_LIMIT", "8G");
  const json dpsgd = {{"name", "parallel_sgd"}, {"variant", "decentralized"}, {"lr", 0.1}};
  const auto s = runner::parse_scenario(base(256, kResnet50, dpsgd, {{"kind", "star"}}));
  const auto e = refusal(s);
  EXPECT_EQ(e.path(), "/topology") << e.what();
  EXPECT_NE(std::string(e.what()).find("a message or replica per gossip neighbour: 255 each"), std::string::npos)
      << e.what();
}

// A live process is one rank: refused before it connects to any peer.
TEST(ResourceLimits, LiveRunsCheckOneRank) {
  const auto s = runner::parse_scenario(resnet50_4096());
  const auto one = runner::estimate_resources(s, runner::RunKind::Live);
  EXPECT_EQ(one.tensor_ranks, 1.0);
  EXPECT_LT(one.total_bytes(), 2.0 * (1 << 30));
  ScopedEnv limit("DTSIM_MEMORY_LIMIT", "256M");
  comm::LiveEnv env;
  env.world_size = 4096;
  env.timeout = std::chrono::milliseconds(100);
  const auto t0 = std::chrono::steady_clock::now();
  try {
    runner::run_live(s, env);
    ADD_FAILURE() << "not refused";
  } catch (const runner::ScenarioError& e) {
    EXPECT_EQ(e.path(), "/workload/type") << e.what();
    EXPECT_NE(std::string(e.what()).find("one rank of resnet50 with 25557032 parameters needs about"), std::string::npos)
        << e.what();
  }
  EXPECT_LT(seconds_since(t0), 1.0);
}

TEST(ResourceLimits, MemoryLimitFromTheEnvironment) {
  EXPECT_EQ(runner::parse_memory_size("8G"), 8.0 * (1 << 30));
  EXPECT_EQ(runner::parse_memory_size("1.5T"), 1.5 * 1024 * 1024 * 1024 * 1024);
  EXPECT_EQ(runner::parse_memory_size("512MiB"), 512.0 * (1 << 20));
  EXPECT_EQ(runner::parse_memory_size("1000"), 1000.0);
  for (const char* bad : {"", "G", "-1G", "8X", "8GG", "nan"}) {
    try {
      runner::parse_memory_size(bad);
      ADD_FAILURE() << bad;
    } catch (const config::InputError& e) {
      EXPECT_EQ(std::string(e.what()).rfind("DTSIM_MEMORY_LIMIT: ", 0), 0u) << e.what();
    }
  }
  {
    ScopedEnv limit("DTSIM_MEMORY_LIMIT", "unlimited");
    EXPECT_FALSE(runner::memory_limit());
    EXPECT_NO_THROW(runner::check_resources(runner::parse_scenario(resnet50_4096())));
  }
  ScopedEnv unset("DTSIM_MEMORY_LIMIT", nullptr);
  const auto machine = runner::memory_limit();  // MemAvailable, or the cgroup's limit
  ASSERT_TRUE(machine);
  EXPECT_GT(machine->bytes, 0.0);
  EXPECT_NE(machine->source, "DTSIM_MEMORY_LIMIT");
}

TEST(ResourceLimits, FormatsBytes) {
  EXPECT_EQ(runner::format_bytes(12), "12 B");
  EXPECT_EQ(runner::format_bytes(3 * 1024), "3.0 KiB");
  EXPECT_EQ(runner::format_bytes(512.0 * (1 << 20)), "512 MiB");
  EXPECT_EQ(runner::format_bytes(24.0 * (1 << 30)), "24 GiB");
  EXPECT_EQ(runner::format_bytes(1.6 * 1024 * 1024 * 1024 * 1024), "1.6 TiB");
}

// --- the dtsim binary -------------------------------------------------------------------

struct Child {
  int exit_code = -1;
  std::string output;    // stdout and stderr together
  double max_rss = 0.0;    // bytes (ru_maxrss)
  double peak_anon = 0.0;  // bytes: the largest anonymous resident set sampled (RssAnon, every millisecond)
  double seconds = 0.0;
};

// Runs the dtsim binary with `args` (and `env` added), stdout and stderr into a pipe, under
// an address-space limit when `address_space` > 0; waits for it with wait4 for its peak RSS,
// and samples its anonymous resident set meanwhile.
Child run_dtsim(const std::vector<std::string>& args, const std::vector<std::string>& env = {},
                double address_space = 0) {
  int fds[2];
  if (::pipe(fds) != 0) return {};
  const auto t0 = std::chrono::steady_clock::now();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(fds[1], 1);
    ::dup2(fds[1], 2);
    ::close(fds[0]);
    ::close(fds[1]);
    for (const auto& e : env) ::putenv(const_cast<char*>(e.c_str()));
    ::setenv("OMP_NUM_THREADS", "1", 1);
    if (address_space > 0) {
      const rlimit lim{static_cast<rlim_t>(address_space), static_cast<rlim_t>(address_space)};
      ::setrlimit(RLIMIT_AS, &lim);
    }
    std::vector<char*> argv{const_cast<char*>(DTSIM_BINARY)};
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  Child c;
  std::atomic<bool> ended{false};
  std::thread sampler([&] {
    const std::string status_file = "/proc/" + std::to_string(pid) + "/status";
    while (!ended) {
      std::ifstream in(status_file);
      for (std::string line; std::getline(in, line);)
        if (line.rfind("RssAnon:", 0) == 0) c.peak_anon = std::max(c.peak_anon, std::stod(line.substr(8)) * 1024);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) c.output.append(buf, static_cast<std::size_t>(n));
  ::close(fds[0]);
  ended = true;  // its output is closed: it is exiting (and not reaped yet, so the pid is still its)
  sampler.join();
  int status = 0;
  rusage usage{};
  ::wait4(pid, &status, 0, &usage);
  c.seconds = seconds_since(t0);
  c.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  c.max_rss = static_cast<double>(usage.ru_maxrss) * 1024;
  return c;
}

fs::path write_scenario(const fs::path& dir, const std::string& name, const json& doc) {
  const auto file = dir / (name + ".json");
  testing::write_file(file, doc.dump(1));
  return file;
}

// Exit status 2 and one line, under a 6 GiB address space: the refusal comes before any
// large allocation (without it the run would fail allocating, status 1).
TEST(ResourceLimitsBinary, RefusesWithStatus2AndOneLine) {
  const auto dir = testing::fresh_dir("limits-binary");
  const std::vector<std::pair<json, std::string>> cases{
      {resnet50_4096(), "/ranks: 4096 emulated ranks of resnet50 need about"},
      {logistic_terabyte(), "/workload/features: the logistic_regression data set"},
      {base(1 << 20, kResnet50, kCentralized, {{"kind", "complete"}}), "/topology: a complete topology of 1048576 ranks"}};
  int i = 0;
  for (const auto& [doc, expected] : cases) {
    const auto file = write_scenario(dir, "refused" + std::to_string(i++), doc);
    const auto r = run_dtsim({"run", file.string(), "--out", (dir / "out").string()}, {"DTSIM_MEMORY_LIMIT=24G"},
                             6.0 * (1 << 30));
    SCOPED_TRACE(r.output);
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_EQ(r.output.rfind("dtsim: error: " + file.string() + ": " + expected, 0), 0u);
    ASSERT_FALSE(r.output.empty());
    EXPECT_EQ(r.output.find('\n'), r.output.size() - 1) << "more than one line";
  }
  EXPECT_FALSE(fs::exists(dir / "out" / "refused0.result.json"));
  // A bad DTSIM_MEMORY_LIMIT is bad input too.
  const auto r = run_dtsim({"run", (dir / "refused0.json").string()}, {"DTSIM_MEMORY_LIMIT=lots"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_EQ(r.output.rfind("dtsim: error: DTSIM_MEMORY_LIMIT: expected a number of bytes", 0), 0u) << r.output;
}

// The way out works: refused emulated, the same scenario runs in timing-only mode.
TEST(ResourceLimitsBinary, TimingOnlyRunsWhereEmulatedIsRefused) {
  const auto dir = testing::fresh_dir("limits-timing-only");
  const json choco = {{"name", "choco_sgd"}, {"lr", 0.1}, {"compressor", {{"kind", "top_k"}, {"ratio", 0.01}}},
                      {"consensus_stepsize", 0.4}};
  const auto file = write_scenario(dir, "r20", base(64, {{"type", "resnet20"}, {"batch_size", 8}}, choco, {{"kind", "ring"}}, 3));
  const std::vector<std::string> env{"DTSIM_MEMORY_LIMIT=300M"};
  const auto refused = run_dtsim({"run", file.string(), "--quiet", "--out", dir.string()}, env);
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_NE(refused.output.find("/ranks: 64 emulated ranks of resnet20"), std::string::npos) << refused.output;
  const auto timed = run_dtsim({"run", file.string(), "--quiet", "--timing-only", "--out", dir.string()}, env);
  EXPECT_EQ(timed.exit_code, 0) << timed.output;
  EXPECT_EQ(testing::read_json(dir / "r20.result.json")["timing_only"]["representative_rank"], 0);
}

// A refused sweep point is one failure line for that point; the others run.
TEST(ResourceLimitsBinary, SweepRefusesOnePoint) {
  const auto dir = testing::fresh_dir("limits-sweep");
  json sweep = {{"base", base(2, {{"type", "resnet20"}, {"batch_size", 8}}, kCentralized, {{"kind", "ring"}}, 2)},
                {"axes", {{{"path", "/ranks"}, {"values", {2, 4096}}}}}};
  testing::write_file(dir / "sweep.json", sweep.dump(1));
  const auto r = run_dtsim({"sweep", (dir / "sweep.json").string(), "--out", (dir / "out").string(), "--jobs", "1",
                            "--quiet"},
                           {"DTSIM_MEMORY_LIMIT=1G"});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("ran 1, skipped 0, failed 1"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("/ranks: 4096 emulated ranks of resnet20 need about"), std::string::npos) << r.output;
}

json tiny_model(int ranks, json topology, const char* model, const char* all_reduce) {
  auto doc = base(ranks, {{"type", "logistic_regression"}, {"samples", 4096}, {"features", 2}},
                  {{"name", "parallel_sgd"}, {"variant", "centralized"}, {"lr", 0.1}}, topology, 1);
  doc["network"]["model"] = model;
  doc["network"]["algorithms"] = {{"all_reduce", all_reduce}};
  return doc;
}

// The estimate against what runs use: the peak anonymous resident set of a dtsim run minus
// that of a one-rank run of a two-feature model (LibTorch, the binary), over the estimate
// minus that run's. Anonymous memory, not the whole RSS: the libraries' pages count in the
// RSS once touched, and with LibTorch 2.15 about 120 MiB of them become resident only as
// the run goes on (file-backed RSS 180 MiB while complete_2048 builds its routes, 300 MiB
// at its end and at the baseline's), so a run that peaks early peaks with fewer of them
// than the baseline did. The peak RSS is printed too.
TEST(ResourceLimitsBinary, EstimateIsWithinAFactorOfThePeakAnonymousMemory) {
  const auto dir = testing::fresh_dir("limits-rss");
  ScopedEnv unset("DTSIM_MEMORY_LIMIT", nullptr);
  const json choco = {{"name", "choco_sgd"}, {"lr", 0.1}, {"momentum", 0.9},
                      {"compressor", {{"kind", "top_k"}, {"ratio", 0.01}}}, {"consensus_stepsize", 0.4}};
  const json sign = {{"name", "sign_sgd"}, {"lr", 0.01}};
  const json dpsgd = {{"name", "parallel_sgd"}, {"variant", "decentralized"}, {"lr", 0.1}};
  const json r20 = {{"type", "resnet20"}, {"batch_size", 32}};
  const std::vector<std::pair<std::string, json>> cases{
      {"resnet20_choco_64", base(64, r20, choco, {{"kind", "ring"}}, 3)},
      {"resnet20_sign_64", base(64, r20, sign, {{"kind", "ring"}}, 3)},
      {"logistic_full_batch_4",
       base(4, {{"type", "logistic_regression"}, {"samples", 1000}, {"features", 100000}, {"batch_size", "full"}}, dpsgd,
            {{"kind", "ring"}}, 3)},
      {"mlp_8", base(8, {{"type", "mlp"}, {"batch_size", 32}}, kCentralized, {{"kind", "ring"}}, 3)},
      {"resnet50_dpsgd_2", base(2, kResnet50, dpsgd, {{"kind", "ring"}}, 2)},
      // The topology and the routes: 2.1e6 cables; the direct all-reduce's 261,632 routes
      // of 128 hops on average.
      {"complete_2048", tiny_model(2048, {{"kind", "complete"}}, "analytical", "ring")},
      {"direct_512", tiny_model(512, {{"kind", "ring"}}, "alpha_beta", "direct")}};
  const auto tiny_doc =
      base(1, {{"type", "logistic_regression"}, {"samples", 16}, {"features", 2}}, kCentralized, {{"kind", "ring"}}, 1);
  const auto tiny = run_dtsim({"run", write_scenario(dir, "tiny", tiny_doc).string(), "--quiet", "--out", dir.string()});
  ASSERT_EQ(tiny.exit_code, 0) << tiny.output;
  const double tiny_estimate = runner::estimate_resources(runner::parse_scenario(tiny_doc)).total_bytes();
  for (const auto& [name, doc] : cases) {
    if (name == "mlp_8" && !fs::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")) continue;
    const auto r = run_dtsim({"run", write_scenario(dir, name, doc).string(), "--quiet", "--out", dir.string()});
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const double measured = r.peak_anon - tiny.peak_anon;
    const double estimated = runner::estimate_resources(runner::parse_scenario(doc)).total_bytes() - tiny_estimate;
    const double ratio = estimated / measured;
    std::printf("%-24s estimate %9s  peak anonymous - baseline %9s  ratio %.2f  (peak RSS - baseline %9s; %.1f s)\n",
                name.c_str(), runner::format_bytes(estimated).c_str(), runner::format_bytes(measured).c_str(), ratio,
                runner::format_bytes(r.max_rss - tiny.max_rss).c_str(), r.seconds);
    EXPECT_GE(ratio, 0.5) << name;
    EXPECT_LE(ratio, 1.5) << name;
  }
}

// --- the progress line -------------------------------------------------------------------

TEST(Progress, LineText) {
  EXPECT_EQ(runner::ProgressLine::text({"", 120, 2000, 1.23}, 45),
            "step 120/2000 (6%), simulated 1.23 s, 45 s elapsed, ETA 12 min");
  EXPECT_EQ(runner::ProgressLine::text({"replay", 2000, 2000, 61.5}, 7300), "replay: step 2000/2000 (100%), simulated "
                                                                           "61.5 s, 2.0 h elapsed");
  EXPECT_EQ(runner::ProgressLine::text({"", 1, 4, 0.0117}, 0), "step 1/4 (25%), simulated 11.7 ms, 0 s elapsed, ETA 0 s");
}

json quick_long_run() {
  json doc = base(8, {{"type", "logistic_regression"}, {"samples", 4096}, {"features", 32}},
                  {{"name", "parallel_sgd"}, {"variant", "decentralized"}, {"lr", 0.1}}, {{"kind", "ring"}}, 400);
  doc["eval_every"] = 100;
  return doc;
}

// In process: the callback sees every step of rank 0, and the result is the same.
TEST(Progress, CallbackSeesEveryStepAndChangesNothing) {
  for (bool timing_only : {false, true}) {
    SCOPED_TRACE(timing_only);
    auto s = runner::parse_scenario(quick_long_run());
    s.steps = 40;
    s.timing_only = timing_only;
    const auto plain = runner::run_emulated(s).to_json();
    std::vector<runner::RunProgress> seen;
    runner::RunOptions options;
    options.progress = [&](const runner::RunProgress& p) { seen.push_back(p); };
    EXPECT_EQ(runner::run_emulated(s, options).to_json(), plain);
    const std::size_t kernels = 40, replay = timing_only ? 39 : 0;  // the replay's last step ends unseen
    ASSERT_EQ(seen.size(), kernels + replay);
    EXPECT_EQ(seen[0].step, 1);
    EXPECT_EQ(seen[39].step, 40);
    EXPECT_EQ(seen[39].stage, timing_only ? "rank 0's kernels" : "");
    if (timing_only) {
      EXPECT_EQ(seen.back().stage, "replay");
      EXPECT_EQ(seen.back().step, 39);
    }
    for (const auto& p : seen) EXPECT_EQ(p.steps, 40);
  }
}

// Runs dtsim on a pseudo-terminal (stdout and stderr), returning everything it wrote.
std::string run_on_terminal(const std::vector<std::string>& args, int* exit_code) {
  int master = -1;
  const pid_t pid = ::forkpty(&master, nullptr, nullptr, nullptr);
  if (pid == 0) {
    ::setenv("DTSIM_PROGRESS_AFTER_S", "0", 1);
    ::setenv("OMP_NUM_THREADS", "1", 1);
    std::vector<char*> argv{const_cast<char*>(DTSIM_BINARY)};
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::read(master, buf, sizeof buf)) > 0;) out.append(buf, static_cast<std::size_t>(n));  // EIO at the end
  ::close(master);
  int status = 0;
  ::waitpid(pid, &status, 0);
  *exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

TEST(Progress, OnlyOnATerminalAndTheResultIsByteIdentical) {
  const auto dir = testing::fresh_dir("limits-progress");
  const auto file = write_scenario(dir, "long", quick_long_run());
  int rc = -1;
  const auto tty = run_on_terminal({"run", file.string(), "--out", (dir / "tty").string()}, &rc);
  EXPECT_EQ(rc, 0) << tty;
  EXPECT_NE(tty.find("\rstep "), std::string::npos) << tty;
  EXPECT_NE(tty.find("/400 ("), std::string::npos) << tty;
  EXPECT_NE(tty.find("simulated "), std::string::npos) << tty;
  EXPECT_NE(tty.find("result: "), std::string::npos) << tty;  // the table follows the erased line

  const auto quiet = run_on_terminal({"run", file.string(), "--quiet", "--out", (dir / "quiet").string()}, &rc);
  EXPECT_EQ(rc, 0) << quiet;
  EXPECT_EQ(quiet.find("/400 ("), std::string::npos) << quiet;

  const auto piped = run_dtsim({"run", file.string(), "--out", (dir / "pipe").string()}, {"DTSIM_PROGRESS_AFTER_S=0"});
  EXPECT_EQ(piped.exit_code, 0) << piped.output;
  EXPECT_EQ(piped.output.find('\r'), std::string::npos);
  EXPECT_EQ(piped.output.find("/400 ("), std::string::npos);

  const auto expected = testing::read_file(dir / "pipe" / "long.result.json");
  ASSERT_FALSE(expected.empty());
  EXPECT_EQ(testing::read_file(dir / "tty" / "long.result.json"), expected);
  EXPECT_EQ(testing::read_file(dir / "quiet" / "long.result.json"), expected);
}

}  // namespace
}  // namespace dtsim
