// Calibration: the least-squares fit of alpha and beta, the network model file,
// `dtsim calibrate` on local processes producing a model a scenario can use, and
// `dtsim compare` predicting a live run.
#include <gtest/gtest.h>

#include <future>

#include <fmt/format.h>

#include "calibration/calibration.hpp"
#include "comm/live_env.hpp"
#include "runner/scenario.hpp"
#include "test_util.hpp"

namespace dtsim::calibration {
namespace {

using nlohmann::json;

// Timings exactly as the closed forms give them, for every probe and 8 B to 32 MB.
std::vector<Sample> synthetic(double alpha, double beta, int ranks) {
  std::vector<Sample> samples;
  for (const Probe p : {Probe::AllReduce, Probe::AllGather, Probe::PointToPoint})
    for (const auto bytes : geometric_sizes(8, 32 << 20, 4.0)) {
      Sample s;
      s.probe = p;
      s.ranks = p == Probe::PointToPoint ? 2 : ranks;
      s.bytes = static_cast<double>(bytes);
      s.seconds = predict(s, {alpha, beta});
      samples.push_back(s);
    }
  return samples;
}

// The closed forms the fit inverts, by hand: ring all-reduce 2(n-1)(alpha + S/(n beta)),
// ring all-gather (n-1)(alpha + b/beta), a message alpha + S/beta.
TEST(Calibration, CoefficientsAreTheClosedForms) {
  Sample ar{Probe::AllReduce, 4, 4096.0, 0.0};
  EXPECT_DOUBLE_EQ(coefficients(ar).first, 6.0);
  EXPECT_DOUBLE_EQ(coefficients(ar).second, 6.0 * 4096.0 / 4.0);
  Sample ag{Probe::AllGather, 4, 4096.0, 0.0};
  EXPECT_DOUBLE_EQ(coefficients(ag).first, 3.0);
  EXPECT_DOUBLE_EQ(coefficients(ag).second, 3.0 * 4096.0);
  Sample p2p{Probe::PointToPoint, 2, 4096.0, 0.0};
  EXPECT_DOUBLE_EQ(coefficients(p2p).first, 1.0);
  EXPECT_DOUBLE_EQ(coefficients(p2p).second, 4096.0);
}

// Exact closed-form timings: the fit recovers alpha and beta to rounding, with any mix
// of probes and rank counts.
TEST(Calibration, FitRecoversAlphaAndBetaExactly) {
  for (const auto& [alpha, beta, ranks] : std::vector<std::tuple<double, double, int>>{
           {7e-6, 2.5e9, 4}, {45e-6, 1.1e8, 3}, {1.3e-6, 40e9, 8}}) {
    const auto fitted = fit(synthetic(alpha, beta, ranks));
    EXPECT_NEAR(fitted.alpha_s / alpha, 1.0, 1e-9);
    EXPECT_NEAR(fitted.beta_bytes_per_s / beta, 1.0, 1e-9);
  }
  // Point-to-point alone, too.
  auto samples = synthetic(3e-6, 5e9, 4);
  std::erase_if(samples, [](const Sample& s) { return s.probe != Probe::PointToPoint; });
  const auto fitted = fit(samples);
  EXPECT_NEAR(fitted.alpha_s / 3e-6, 1.0, 1e-9);
  EXPECT_NEAR(fitted.beta_bytes_per_s / 5e9, 1.0, 1e-9);
}

// Noise of +-5% around the closed form moves the fit by about that much, not more.
TEST(Calibration, FitIsStableUnderNoise) {
  auto samples = synthetic(10e-6, 1e9, 4);
  for (std::size_t i = 0; i < samples.size(); ++i) samples[i].seconds *= i % 2 ? 1.05 : 0.95;
  const auto fitted = fit(samples);
  EXPECT_NEAR(fitted.alpha_s / 10e-6, 1.0, 0.1);
  EXPECT_NEAR(fitted.beta_bytes_per_s / 1e9, 1.0, 0.1);
}

TEST(Calibration, FitNeedsTwoSizes) {
  auto samples = synthetic(1e-6, 1e9, 4);
  samples.resize(1);
  EXPECT_THROW(fit(samples), std::runtime_error);
}

// Two link classes (point-to-point on the same host and to another host) get a fit
// each; the nominal link comes from the collectives.
TEST(Calibration, ModelPerLinkClass) {
  auto samples = synthetic(5e-6, 2e9, 4);
  std::erase_if(samples, [](const Sample& s) { return s.probe == Probe::PointToPoint; });
  for (const auto& [cls, alpha, beta] :
       std::vector<std::tuple<std::string, double, double>>{{"same_host", 1e-6, 10e9}, {"other_host", 20e-6, 1e9}})
    for (const auto bytes : geometric_sizes(8, 1 << 20, 8.0)) {
      Sample s{Probe::PointToPoint, 2, static_cast<double>(bytes), 0.0, cls};
      s.seconds = predict(s, {alpha, beta});
      samples.push_back(s);
    }
  const auto model = fit_model(samples);
  EXPECT_NEAR(model.nominal.alpha_s / 5e-6, 1.0, 1e-9);
  ASSERT_EQ(model.links.size(), 2u);
  EXPECT_NEAR(model.links.at("same_host").beta_bytes_per_s / 10e9, 1.0, 1e-9);
  EXPECT_NEAR(model.links.at("other_host").alpha_s / 20e-6, 1.0, 1e-9);
}

TEST(Calibration, ModelFileRoundTripsAndBadFilesAreNamed) {
  auto dir = testing::fresh_dir("calibration-model");
  const auto samples = synthetic(4e-6, 3e9, 4);
  const auto model = fit_model(samples);
  const json doc = model_json(model, samples, "gloo");
  EXPECT_EQ(doc["calibration"]["samples"].size(), samples.size());
  EXPECT_NEAR(doc["calibration"]["median_abs_relative_error"].get<double>(), 0.0, 1e-9);
  testing::write_file(dir / "m.json", doc.dump());
  const auto loaded = load_model(dir / "m.json");
  EXPECT_NEAR(loaded.nominal.alpha_s / 4e-6, 1.0, 1e-9);
  EXPECT_NEAR(loaded.nominal.beta_bytes_per_s / 3e9, 1.0, 1e-9);

  testing::write_file(dir / "bad.json", R"({"latency_us": 3, "bandwidth_GBps": 0})");
  try {
    load_model(dir / "bad.json");
    ADD_FAILURE() << "no error";
  } catch (const config::InputError& e) {
    EXPECT_EQ(std::string(e.what()), (dir / "bad.json").string() + ": /bandwidth_GBps: expected a number > 0, got 0");
  }
}

// A fit that describes its samples poorly says so in the model file (and `dtsim calibrate`
// prints it): samples whose time grows with the square of the size are no alpha-beta line.
TEST(Calibration, PoorFitIsFlagged) {
  const auto good = synthetic(4e-6, 3e9, 4);
  EXPECT_FALSE(model_json(fit_model(good), good, "gloo")["calibration"].contains("warning"));
  auto bad = good;
  for (auto& s : bad) s.seconds = 1e-6 + s.bytes * s.bytes * 1e-15;
  const json doc = model_json(fit_model(bad), bad, "gloo");
  const double median_error = doc["calibration"]["median_abs_relative_error"].get<double>();
  ASSERT_GT(median_error, kPoorFitMedianError);
  ASSERT_TRUE(doc["calibration"].contains("warning"));
  EXPECT_EQ(doc["calibration"]["warning"].get<std::string>(), fit_warning(median_error));
  EXPECT_NE(fit_warning(median_error).find(fmt::format("{:.0f}%", 100 * median_error)), std::string::npos);
  EXPECT_EQ(fit_warning(kPoorFitMedianError), "");
}

// `dtsim calibrate` on 3 local processes writes a model file (sizes up to 16 MB, so that
// bandwidth, not scheduling noise, decides the largest times even on a loaded machine);
// a scenario referencing it with "network": {"calibrated": ...} loads with the fitted
// figures and runs.
TEST(CalibrateCli, ThreeLocalRanksWriteAModelAScenarioCanUse) {
  if (!testing::kHaveGloo) GTEST_SKIP() << testing::kNoGloo;
  auto dir = testing::fresh_dir("calibrate-cli");
  const int port = comm::free_loopback_port();
  std::vector<std::future<testing::CommandResult>> ranks;
  for (int r = 0; r < 3; ++r)
    ranks.push_back(std::async(std::launch::async, testing::run_command,
                               "RANK=" + std::to_string(r) + " WORLD_SIZE=3 MASTER_ADDR=127.0.0.1 MASTER_PORT=" +
                                   std::to_string(port) + " DTSIM_TIMEOUT_S=60 timeout 300 " + DTSIM_BINARY +
                                   " calibrate -b 4K -e 16M -f 4 -n 3 --out " + (dir / "model.json").string()));
  for (int r = 0; r < 3; ++r) {
    auto res = ranks[r].get();
    ASSERT_EQ(res.exit_code, 0) << "rank " << r << ": " << res.output;
    if (r == 0) {
      EXPECT_NE(res.output.find("3 ranks over gloo: alpha"), std::string::npos) << res.output;
    }
  }
  const json model = testing::read_json(dir / "model.json");
  EXPECT_EQ(model["model"], "alpha_beta");
  EXPECT_GE(model["latency_us"].get<double>(), 0.0);
  EXPECT_GT(model["bandwidth_GBps"].get<double>(), 0.0);
  // all_reduce, all_gather and p2p (one link class here) at 4 KB, 16 KB, ..., 16 MB.
  EXPECT_EQ(model["calibration"]["samples"].size(), 21u);
  for (const auto& s : model["calibration"]["samples"]) EXPECT_GT(s["measured_s"].get<double>(), 0.0);

  json scenario = {{"name", "calibrated"},
                   {"ranks", 3},
                   {"steps", 3},
                   {"workload", {{"kind", "logistic_regression"}, {"samples", 64}, {"features", 4}, {"batch_size", 8}}},
                   {"algorithm", {{"name", "parallel_sgd"}, {"variant", "centralized"}, {"lr", 0.1}}},
                   {"topology", {{"kind", "ring"}}},
                   {"network", {{"calibrated", "model.json"}}}};
  testing::write_file(dir / "s.json", scenario.dump());
  const auto loaded = runner::load_scenario(dir / "s.json");
  EXPECT_EQ(loaded.network.model, "alpha_beta");
  EXPECT_DOUBLE_EQ(loaded.network.nominal.latency_s, model["latency_us"].get<double>() * 1e-6);
  EXPECT_DOUBLE_EQ(loaded.network.nominal.bandwidth_bytes_per_s, model["bandwidth_GBps"].get<double>() * 1e9);
  auto run = testing::run_command(std::string(DTSIM_BINARY) + " run --quiet " + (dir / "s.json").string());
  EXPECT_EQ(run.exit_code, 0) << run.output;
  // A scenario field wins over the model file's.
  scenario["network"]["model"] = "flow";
  testing::write_file(dir / "s.json", scenario.dump());
  EXPECT_EQ(runner::load_scenario(dir / "s.json").network.model, "flow");
  scenario["network"]["calibrated"] = "missing.json";
  testing::write_file(dir / "s.json", scenario.dump());
  EXPECT_THROW(runner::load_scenario(dir / "s.json"), runner::ScenarioError);
  // /dev/stdin would block and /dev/zero be read forever: only regular files are read.
  for (const char* device : {"/dev/stdin", "/dev/zero"}) {
    scenario["network"]["calibrated"] = device;
    testing::write_file(dir / "s.json", scenario.dump());
    try {
      runner::load_scenario(dir / "s.json");
      ADD_FAILURE() << device << " was read";
    } catch (const runner::ScenarioError& e) {
      EXPECT_EQ(std::string(e.what()),
                "/network/calibrated: " + std::string(device) + " is not a regular file (a device, FIFO or socket)");
    }
  }
}

// `dtsim compare` on 2 local Gloo ranks (CHOCO-SGD with its overlapped exchange): the
// live run is predicted twice, emulated and by replaying both ranks' recorded traces.
// What the recording promises holds per step: the replayed compute is the live compute
// plus the host work between calls, so it is at least the live compute, and over the
// run it is no more than the live steps' wall time, which also holds the communication.
TEST(CompareCli, TwoLocalRanksPredictAndReplayTheRun) {
  if (!testing::kHaveGloo) GTEST_SKIP() << testing::kNoGloo;
  auto dir = testing::fresh_dir("compare-cli");
  testing::write_file(dir / "model.json", json{{"model", "alpha_beta"}, {"latency_us", 80}, {"bandwidth_GBps", 2}}.dump());
  const json scenario = {
      {"name", "choco_compare"},
      {"ranks", 2},
      {"steps", 8},
      {"workload", {{"kind", "logistic_regression"}, {"samples", 256}, {"features", 4096}, {"batch_size", 16}}},
      {"algorithm",
       {{"name", "choco_sgd"}, {"lr", 0.1}, {"compressor", {{"kind", "identity"}}}, {"consensus_stepsize", 0.4}}},
      {"topology", {{"kind", "ring"}}},
      {"network", {{"model", "alpha_beta"}, {"latency_us", 5}, {"bandwidth_GBps", 1}}}};
  testing::write_file(dir / "choco.json", scenario.dump());
  const int port = comm::free_loopback_port();
  std::vector<std::future<testing::CommandResult>> ranks;
  for (int r = 0; r < 2; ++r)
    ranks.push_back(std::async(std::launch::async, testing::run_command,
                               "RANK=" + std::to_string(r) + " WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=" +
                                   std::to_string(port) + " DTSIM_TIMEOUT_S=60 timeout 300 " + DTSIM_BINARY +
                                   " compare " + (dir / "choco.json").string() + " --model " +
                                   (dir / "model.json").string() + " --sweep-min 1K --sweep-max 8K -n 2"));
  for (int r = 0; r < 2; ++r) {
    auto res = ranks[r].get();
    ASSERT_EQ(res.exit_code, 0) << "rank " << r << ": " << res.output;
    if (r == 0) {
      EXPECT_NE(res.output.find("replayed"), std::string::npos) << res.output;
    }
  }
  const json c = testing::read_json(dir / "choco.compare.json");
  ASSERT_EQ(c["steps"].size(), 8u);
  double replayed_compute = 0.0, measured = 0.0;
  for (const auto& step : c["steps"]) {
    EXPECT_GE(step["replayed_compute_s"].get<double>(), step["measured_compute_s"].get<double>() * (1 - 1e-9));
    EXPECT_GE(step["replayed_s"].get<double>(), step["replayed_compute_s"].get<double>() * (1 - 1e-9));
    EXPECT_GT(step["predicted_s"].get<double>(), 0.0);
    replayed_compute += step["replayed_compute_s"].get<double>();
    measured += step["measured_s"].get<double>();
  }
  EXPECT_LE(replayed_compute, measured * 1.05);
  EXPECT_GE(c["step"]["host_outside_compute_s"].get<double>(), 0.0);
  bool exchange_phase = false;
  for (const auto& phase : c["phases"]) {
    EXPECT_TRUE(phase.contains("replayed_s")) << phase.dump();
    exchange_phase = exchange_phase || phase["name"] == "grad/sync";
  }
  EXPECT_TRUE(exchange_phase) << c["phases"].dump();
  EXPECT_EQ(c["all_reduce_sweep"].size(), 4u);  // 1, 2, 4, 8 KB
}

}  // namespace
}  // namespace dtsim::calibration
