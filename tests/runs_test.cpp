// Whole emulated runs: reproducibility, and properties of the algorithms that hold
// exactly whatever the data.
#include <gtest/gtest.h>

#include <cmath>

#include "runner/report.hpp"
#include "runner/run.hpp"
#include "test_util.hpp"

namespace dtsim::runner {
namespace {

using nlohmann::json;

Scenario small(const std::string& variant, const std::string& topology = "ring", int ranks = 4) {
  return parse_scenario(json{
      {"name", "small"},
      {"ranks", ranks},
      {"steps", 30},
      {"seed", 3},
      {"workload", {{"kind", "logistic_regression"}, {"samples", 512}, {"features", 8}, {"batch_size", 16}}},
      {"algorithm",
       {{"name", "parallel_sgd"}, {"variant", variant}, {"lr", 0.2}, {"momentum", 0.9}, {"weight_decay", 1e-4}}},
      {"topology", {{"kind", topology}}},
      {"network", {{"model", "alpha_beta"}, {"latency_us", 3}, {"bandwidth_GBps", 2}}}});
}

// Same scenario and seed: the result files are identical byte for byte (the default
// compute timing is the deterministic cost model).
TEST(Runs, SameSeedGivesBitIdenticalOutput) {
  auto dir = testing::fresh_dir("determinism");
  const std::string scenario = std::string(DTSIM_SOURCE_DIR) + "/scenarios/quickstart.json";
  for (const char* out : {"a", "b"}) {
    auto r = testing::run_command(std::string(DTSIM_BINARY) + " run --quiet " + scenario + " --out " +
                                  (dir / out).string() + " --dump-params " + (dir / out / "params").string());
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  const auto a = testing::read_file(dir / "a" / "quickstart.result.json");
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(a, testing::read_file(dir / "b" / "quickstart.result.json"));
  for (int r = 0; r < 8; ++r) {
    const auto name = "params.rank" + std::to_string(r) + ".json";
    EXPECT_EQ(testing::read_file(dir / "a" / name), testing::read_file(dir / "b" / name));
  }
  // A different seed changes the trajectory.
  auto other = small("decentralized");
  auto base = run_emulated(other);
  other.seed = 4;
  EXPECT_NE(run_emulated(other).loss, base.loss);
}

// Centralized SGD averages gradients with an all-reduce: every rank applies the same
// update, so the models never drift apart; 32 d bits per step; 2 (n-1)/n * 4d wire
// bytes per rank per step on average.
TEST(Runs, CentralizedSgdKeepsRanksIdentical) {
  auto r = run_emulated(small("centralized"));
  EXPECT_EQ(r.consensus_distance, 0.0);
  const double d = 9;  // 8 weights + 1 bias
  for (double bits : r.n_bits) EXPECT_EQ(bits, 32 * d);
  for (double bytes : r.wire_bytes) EXPECT_DOUBLE_EQ(bytes, 2.0 * 3 / 4 * 4 * d);
  EXPECT_LT(r.final_loss, r.loss.front());  // it learns
}

// D-PSGD on a ring: each rank sends its 4d-byte model to both neighbours; the
// phases are the reference's names; the step's time is the sum of its phases.
TEST(Runs, DecentralizedSgdOnARing) {
  auto r = run_emulated(small("decentralized"));
  for (double bytes : r.wire_bytes) EXPECT_EQ(bytes, 2 * 4 * 9);
  EXPECT_EQ(r.phase_names, (std::vector<std::string>{"forward_pass", "backward_pass", "sync/apply_grad",
                                                     "sync/get_data", "sync/sync", "sync/update_model"}));
  double phases = 0.0;
  for (double t : r.phase_mean_s) phases += t;
  EXPECT_NEAR(phases, r.mean_step_time_s(), 1e-12 * r.mean_step_time_s());
  EXPECT_GT(r.consensus_distance, 0.0);  // gossip only approximates the average
  EXPECT_LT(r.final_loss, r.loss.front());
}

// On a complete graph with W = 1/n, gossip is exact averaging: D-PSGD keeps every
// rank's model identical, up to float rounding of the weighted sums.
TEST(Runs, DecentralizedSgdOnCompleteGraphIsExactAveraging) {
  auto r = run_emulated(small("decentralized", "complete"));
  EXPECT_LT(r.consensus_distance, 1e-10);
}

TEST(Runs, TableNamesEveryPhase) {
  auto r = run_emulated(small("centralized"));
  const auto table = format_table(r);
  for (const auto& name : r.phase_names) EXPECT_NE(table.find("| " + name), std::string::npos) << table;
  EXPECT_NE(table.find("bits/step/rank (n_bits): 288"), std::string::npos) << table;
}

}  // namespace
}  // namespace dtsim::runner
