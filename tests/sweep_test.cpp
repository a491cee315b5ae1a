// Sweeps (expansion, validation, resumable parallel runs, shards and merge), tables,
// SVG reports, the scenario JSON Schema and the CI regression checks.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <iostream>
#include <map>
#include <numeric>
#include <cmath>
#include <set>
#include <thread>
#include <tuple>

#include <fmt/format.h>

#include "algorithms/lr_schedules/multistep.hpp"
#include "runner/run.hpp"
#include "runner/scenario.hpp"
#include "sweep/child_process.hpp"
#include "sweep/execute.hpp"
#include "sweep/regress.hpp"
#include "sweep/report.hpp"
#include "runner/schema.hpp"
#include "sweep/svg.hpp"
#include "sweep/sweep.hpp"
#include "sweep/table.hpp"
#include "test_util.hpp"

extern char** environ;

namespace dtsim::sweep {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using runner::validate_scenario_schema;
using runner::validate_schema;

// A scenario that runs in milliseconds: 4 ranks, 24 steps of logistic regression.
json tiny_base(int steps = 24) {
  return {{"name", "tiny"},
          {"ranks", 4},
          {"steps", steps},
          {"seed", 7},
          {"workload", {{"kind", "logistic_regression"}, {"samples", 256}, {"features", 8}, {"batch_size", 16}}},
          {"algorithm", {{"name", "parallel_sgd"}, {"variant", "decentralized"}, {"lr", 0.2}}},
          {"topology", {{"kind", "ring"}}},
          {"network", {{"model", "alpha_beta"}, {"latency_us", 2}, {"bandwidth_GBps", 1}}}};
}

// lr x topology: 3 x 2 = 6 points.
json six_point_sweep(int steps = 24) {
  return {{"name", "six"},
          {"base", tiny_base(steps)},
          {"target_loss", 0.6},
          {"axes",
           {{{"path", "/algorithm/lr"}, {"values", {0.05, 0.2, 0.5}}},
            {{"path", "/topology"},
             {"values", {{{"kind", "ring"}}, {{"kind", "complete"}}}},
             {"labels", {"ring", "complete"}}}}}};
}

std::string sweep_error(const json& doc) {
  try {
    parse_sweep(doc, ".");
  } catch (const SweepError& e) {
    return e.what();
  }
  return "(no error)";
}

std::string dtsim() { return std::string(DTSIM_BINARY); }

std::set<std::string> point_files(const fs::path& dir) {
  std::set<std::string> names;
  if (!fs::exists(dir / "points")) return names;
  for (const auto& e : fs::directory_iterator(dir / "points"))
    if (e.path().extension() == ".json") names.insert(e.path().filename().string());
  return names;
}

// ---------------------------------------------------------------------------------------
// Expansion

// Product mode is the cartesian product with the first axis outermost; each point's
// scenario is the base with the axis values put at their paths.
TEST(SweepExpansion, ProductIsCartesianFirstAxisOutermost) {
  const auto s = parse_sweep(six_point_sweep(), ".");
  ASSERT_EQ(s.points.size(), 6U);
  const std::vector<std::pair<double, std::string>> expected{{0.05, "ring"}, {0.05, "complete"}, {0.2, "ring"},
                                                             {0.2, "complete"}, {0.5, "ring"},  {0.5, "complete"}};
  std::set<std::string> ids;
  for (std::size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(s.points[i].index, i);
    EXPECT_EQ(s.points[i].scenario.algorithm.optimizer.lr, expected[i].first);
    EXPECT_EQ(s.points[i].scenario.topology.kind, expected[i].second);
    ids.insert(s.points[i].id);
  }
  EXPECT_EQ(ids.size(), 6U);
  EXPECT_EQ(s.points[1].label, "lr=0.05, topology=complete");
  // Ids are stable: the same sweep gives the same ids.
  EXPECT_EQ(parse_sweep(six_point_sweep(), ".").points[3].id, s.points[3].id);
  EXPECT_EQ(s.targets.loss, 0.6);
  EXPECT_FALSE(s.targets.accuracy);
}

// Zip mode takes the i-th value of every axis together.
TEST(SweepExpansion, ZipPairsValues) {
  json doc = {{"base", tiny_base()},
              {"mode", "zip"},
              {"axes",
               {{{"path", "/ranks"}, {"values", {2, 4, 8}}},
                {{"path", "/network/bandwidth_GBps"}, {"values", {1, 2.5, 10}}, {"name", "GBps"}}}}};
  const auto s = parse_sweep(doc, ".");
  ASSERT_EQ(s.points.size(), 3U);
  EXPECT_EQ(s.points[2].scenario.ranks, 8);
  EXPECT_EQ(s.points[2].scenario.network.nominal.bandwidth_bytes_per_s, 10e9);
  EXPECT_EQ(s.points[1].label, "ranks=4, GBps=2.5");
  // A field the base leaves to its default is a valid path too.
  doc["axes"] = {{{"path", "/network/overhead_us"}, {"values", {0, 1}}}};
  EXPECT_EQ(parse_sweep(doc, ".").points[1].scenario.network.perturbations.overhead_s, 1e-6);
}

// Axes reach into the algorithm's lr_schedule object: gamma of a multistep base, and a
// schedule field the base leaves out (the axis creates the object); a value the schedule
// refuses names the axis.
TEST(SweepExpansion, AxesSweepNestedLrScheduleFields) {
  json base = tiny_base();
  base["algorithm"]["lr_schedule"] = {{"type", "multistep"}, {"milestones", {2, 4}}};
  const json gamma = {{"base", base}, {"axes", {{{"path", "/algorithm/lr_schedule/gamma"}, {"values", {0.1, 0.5}}}}}};
  const auto s = parse_sweep(gamma, ".");
  ASSERT_EQ(s.points.size(), 2U);
  auto multistep = [&](std::size_t i) {
    return algorithms::lr_schedule_settings<algorithms::MultistepSettings>(s.points[i].scenario.algorithm.optimizer.lr_schedule);
  };
  EXPECT_EQ(multistep(0).gamma, 0.1);
  EXPECT_EQ(multistep(1).gamma, 0.5);
  EXPECT_EQ(multistep(1).milestones, (std::vector<double>{2, 4}));
  EXPECT_NE(s.points[0].id, s.points[1].id);
  const json warmup = {{"base", tiny_base()}, {"axes", {{{"path", "/algorithm/lr_schedule/warmup_epochs"}, {"values", {0, 1}}}}}};
  const auto w = parse_sweep(warmup, ".");
  ASSERT_EQ(w.points.size(), 2U);
  EXPECT_EQ(w.points[1].scenario.algorithm.optimizer.lr_schedule.warmup_epochs, 1.0);
  EXPECT_TRUE(w.points[0].scenario.algorithm.optimizer.lr_schedule.is_default());
  EXPECT_EQ(sweep_error({{"base", base}, {"axes", {{{"path", "/algorithm/lr_schedule/gamma"}, {"values", {-1}}}}}}),
            "axis /algorithm/lr_schedule/gamma value -1: /algorithm/lr_schedule/gamma: expected a number in (0, inf], got -1");
}

TEST(SweepExpansion, ValuesPrintInShortestForm) {
  EXPECT_EQ(format_value(json(5e9)), "5e9");
  EXPECT_EQ(format_value(json(0.001)), "0.001");
  EXPECT_EQ(format_value(json(1e-5)), "1e-5");
  EXPECT_EQ(format_value(json(0.1)), "0.1");
  EXPECT_EQ(format_value(json(12)), "12");
  EXPECT_EQ(format_value(json("ring")), "ring");
}

// Every malformed sweep fails up front with one line naming the axis.
TEST(SweepExpansion, MalformedSweepsNameTheAxis) {
  auto with_axes = [](json axes, const char* mode = "product") {
    return json{{"base", tiny_base()}, {"mode", mode}, {"axes", axes}};
  };
  const std::vector<std::pair<json, std::string>> cases{
      {with_axes({{{"path", "/algorithm/nonsense"}, {"values", {1}}}}), "axis /algorithm/nonsense: unknown path"},
      {with_axes({{{"path", "/workload/colour/x"}, {"values", {1}}}}), "axis /workload/colour/x: unknown path"},
      {with_axes({{{"path", "/topology/kind/x"}, {"values", {1}}}}), "axis /topology/kind/x: unknown path"},
      {with_axes({{{"path", "/algorithm/lr"}, {"values", json::array()}}}), "axis /algorithm/lr: empty axis"},
      {with_axes({{{"path", "/algorithm/lr"}, {"values", {0.1, 0.2}}}, {{"path", "/ranks"}, {"values", {2, 4, 8}}}},
                 "zip"),
       "axis /ranks: zip mode needs every axis to have the same number of values; it has 3, axis /algorithm/lr has 2"},
      {with_axes({{{"path", "/algorithm/lr"}, {"values", {0.1, -1}}}}),
       "axis /algorithm/lr value -1: /algorithm/lr: expected a number in [0, inf], got -1"},
      {with_axes({{{"path", "/network/bandwidth_GBps"}, {"values", {5, 0}}}}),
       "axis /network/bandwidth_GBps value 0: /network/bandwidth_GBps: expected a number in [1e-09, 1000000], got 0"},
      {with_axes({{{"path", "algorithm/lr"}, {"values", {1}}}}), "axis algorithm/lr: \"algorithm/lr\" is not a JSON Pointer"},
  };
  for (const auto& [doc, expected] : cases) {
    const std::string error = sweep_error(doc);
    EXPECT_EQ(error.rfind(expected, 0), 0U) << "got: " << error << "\nexpected to start with: " << expected;
    EXPECT_EQ(error.find('\n'), std::string::npos) << error;
  }
  // A value that breaks a rule involving another field names the axis and value.
  const std::string hyper = sweep_error(with_axes(
      {{{"path", "/ranks"}, {"values", {4, 6}}}, {{"path", "/topology/kind"}, {"values", {"ring", "hypercube"}}}}));
  EXPECT_EQ(hyper, "axis /topology/kind value hypercube: /topology/kind: hypercube needs a power-of-two rank count, got 6");
}

// Every example sweep under scenarios/sweeps expands, every point parses.
TEST(SweepExpansion, ExampleSweepsExpand) {
  int files = 0;
  for (const auto& e : fs::directory_iterator(fs::path(DTSIM_SOURCE_DIR) / "scenarios" / "sweeps")) {
    if (e.path().extension() != ".json") continue;
    ++files;
    Sweep s;
    ASSERT_NO_THROW(s = load_sweep(e.path())) << e.path();
    EXPECT_GE(s.points.size(), 2U) << e.path();
  }
  EXPECT_GE(files, 4);
}

// ---------------------------------------------------------------------------------------
// Running through the dtsim binary

struct SweepDirs {
  fs::path root, sweep_file, full;
};

// The uninterrupted reference run, shared by the tests below.
const SweepDirs& reference_run() {
  static const SweepDirs dirs = [] {
    SweepDirs d;
    d.root = testing::fresh_dir("sweep");
    d.sweep_file = d.root / "six.json";
    testing::write_file(d.sweep_file, six_point_sweep().dump(2));
    d.full = d.root / "full";
    const auto r = testing::run_command(dtsim() + " sweep " + d.sweep_file.string() + " --jobs 2 --out " + d.full.string());
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("ran 6, skipped 0"), std::string::npos) << r.output;
    return d;
  }();
  return dirs;
}

TEST(SweepRun, WritesPointsAndTables) {
  const auto& d = reference_run();
  EXPECT_EQ(point_files(d.full).size(), 6U);
  const json table = testing::read_json(d.full / "table.json");
  ASSERT_EQ(table["rows"].size(), 6U);
  EXPECT_EQ(table["axes"], json({"lr", "topology"}));
  const auto& row = table["rows"][0];
  EXPECT_EQ(row["axes"], json({"0.05", "ring"}));
  EXPECT_GT(row["step_mean_s"].get<double>(), 0.0);
  EXPECT_GE(row["step_p99_s"].get<double>(), row["step_p50_s"].get<double>());
  EXPECT_EQ(row["n_bits_per_step"].get<double>(), 32.0 * 9);  // D-PSGD: the 9-parameter model, once
  // The point file holds the run's full result, the same as `dtsim run` writes.
  const auto point = testing::read_json(d.full / "points" / (row["id"].get<std::string>() + ".json"));
  EXPECT_EQ(point["result"]["scenario"]["algorithm"]["lr"], 0.05);
  const std::string md = testing::read_file(d.full / "table.md");
  EXPECT_NE(md.find("| lr   | topology |"), std::string::npos) << md;
  EXPECT_NE(md.find("time to loss 0.6"), std::string::npos) << md;
  const std::string csv = testing::read_file(d.full / "table.csv");
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 7);
}

// scripts/study_table.py (docs/compression_pays.md's table) on a sweep's output: a row per
// value of the axes that vary besides the algorithm (here the ranks; the link, one value,
// is left out), each algorithm's last step time and, in brackets, that step's time minus
// its compute, and the fastest algorithm, all as the point files say.
TEST(StudyScripts, StudyTableIsTheLastStepsOfThePointFiles) {
  const auto dir = testing::fresh_dir("study-table");
  json base = tiny_base(4);
  base["algorithm"] = {{"name", "parallel_sgd"}, {"variant", "centralized"}, {"lr", 0.2}};
  base["workload"]["features"] = 20000;  // 80 KB messages on 10 MB/s links: steps of milliseconds
  const json sweep = {
      {"name", "study"},
      {"base", base},
      {"axes",
       {{{"path", "/ranks"}, {"name", "ranks"}, {"values", {2, 4}}},
        {{"path", "/network/bandwidth_GBps"}, {"name", "link"}, {"values", {0.01}}},
        {{"path", "/algorithm"},
         {"name", "algorithm"},
         {"values",
          {{{"name", "parallel_sgd"}, {"variant", "centralized"}, {"lr", 0.2}},
           {{"name", "parallel_sgd"}, {"variant", "decentralized"}, {"lr", 0.2}}}},
         {"labels", {"centralized", "gossip"}}}}}};
  testing::write_file(dir / "study.json", sweep.dump());
  auto r = testing::run_command(dtsim() + " sweep " + (dir / "study.json").string() + " --out " + (dir / "o").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = testing::run_command("python3 " + std::string(DTSIM_SOURCE_DIR) + "/scripts/study_table.py " + (dir / "o").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;

  auto human = [](double s) {
    if (s < 1e-12) return std::string("0");
    if (s >= 1) return fmt::format("{:.2f} s", s);
    return fmt::format("{:.1f} ms", s * 1e3);
  };
  std::map<std::string, std::map<std::string, std::pair<double, double>>> cells;  // ranks -> algorithm -> (step, exposed)
  for (const auto& name : point_files(dir / "o")) {
    const json point = testing::read_json(dir / "o" / "points" / name);
    const auto& steps = point["result"]["per_step"];
    const double step = steps["time_s"].back().get<double>(), compute = steps["compute_time_s"].back().get<double>();
    const json& ranks = point["values"][0];  // as the script prints it: str() of the value
    cells[ranks.is_string() ? ranks.get<std::string>() : ranks.dump()][point["values"][2].get<std::string>()] = {
        step, step - compute};
  }
  ASSERT_EQ(cells.size(), 2U);
  std::string expected = "| ranks | centralized | gossip | fastest |\n|---|---|---|---|\n";
  for (const auto& [ranks, by_algorithm] : cells) {
    std::string line = "| " + ranks;
    for (const char* a : {"centralized", "gossip"}) {
      const auto [step, exposed] = by_algorithm.at(a);
      line += fmt::format(" | {} ({})", human(step), human(exposed));
    }
    const bool gossip_faster = by_algorithm.at("gossip").first < by_algorithm.at("centralized").first;
    expected += line + " | " + (gossip_faster ? "gossip" : "centralized") + " |\n";
  }
  EXPECT_EQ(r.output, expected);
  fs::remove_all(dir);
}

// scripts/time_to_target.py: one convergence sweep (full runs) and one timing-only sweep of
// the same algorithms on two links. The script's own check passes (on the convergence
// sweep's link the timing-only step times and evaluation clocks are the full runs' bit for
// bit), and each time to target is the timing run's clock at the first evaluation whose
// accuracy reaches the target, the fastest per link in bold.
TEST(StudyScripts, TimeToTargetIsTheTimingRunsClockAtTheTargetStep) {
  const auto dir = testing::fresh_dir("time-to-target");
  json base = tiny_base(24);
  base["eval_every"] = 4;
  base["network"]["bandwidth_GBps"] = 1e-6;  // 1 KB/s: steps of milliseconds
  const json algorithms = {{"path", "/algorithm"},
                           {"name", "algorithm"},
                           {"values",
                            {{{"name", "parallel_sgd"}, {"variant", "centralized"}, {"lr", 0.02}},
                             {{"name", "parallel_sgd"}, {"variant", "decentralized"}, {"lr", 0.5}}}},
                           {"labels", {"centralized", "gossip"}}};
  const json convergence = {{"name", "convergence"}, {"base", base}, {"axes", {algorithms}}};
  const json timing = {{"name", "timing"},
                       {"base", base},
                       {"axes",
                        {{{"path", "/timing_only"}, {"values", {true}}},
                         {{"path", "/network/bandwidth_GBps"}, {"name", "link"}, {"values", {1e-6, 1e-7}},
                          {"labels", {"fast", "slow"}}},
                         algorithms}}};
  testing::write_file(dir / "convergence.json", convergence.dump());
  testing::write_file(dir / "timing.json", timing.dump());
  for (const char* name : {"convergence", "timing"}) {
    const auto r = testing::run_command(dtsim() + " sweep " + (dir / (std::string(name) + ".json")).string() + " --out " +
                                        (dir / name).string());
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  // Each point's result, by its labels.
  auto results = [&](const std::string& name) {
    std::vector<std::pair<std::vector<std::string>, json>> out;
    const json manifest = testing::read_json(dir / name / "sweep.json");
    for (const auto& p : manifest["points"]) {
      const json point = testing::read_json(dir / name / "points" / (p["id"].get<std::string>() + ".json"));
      std::vector<std::string> labels;
      for (const auto& v : point["values"]) labels.push_back(v.is_string() ? v.get<std::string>() : v.dump());
      out.emplace_back(labels, point["result"]);
    }
    return out;
  };
  std::map<std::string, json> curves;  // algorithm -> full run
  for (const auto& [labels, result] : results("convergence")) curves[labels.back()] = result;
  ASSERT_EQ(curves.size(), 2U);
  // A target both algorithms reach: the lower of their best accuracies.
  double target = 1.0;
  for (const auto& [alg, result] : curves) {
    double best = 0.0;
    for (const auto& e : result["eval"]) best = std::max(best, e["train_accuracy"].get<double>());
    target = std::min(target, best);
  }
  auto first_step = [&](const json& full) {
    for (const auto& e : full["eval"])
      if (e["train_accuracy"].get<double>() >= target) return e["step"].get<int>();
    return -1;
  };
  const auto r = testing::run_command("python3 " + std::string(DTSIM_SOURCE_DIR) + "/scripts/time_to_target.py " +
                                      (dir / "convergence").string() + " " + (dir / "timing").string() +
                                      fmt::format(" --target-accuracy {} --convergence-link fast", json(target).dump()));
  ASSERT_EQ(r.exit_code, 0) << r.output;  // the timing-only runs' clocks are the full runs'
  std::printf("%s", r.output.c_str());

  auto human = [](double s) { return s >= 1 ? fmt::format("{:.2f} s", s) : fmt::format("{:.1f} ms", s * 1e3); };
  const std::vector<std::string> links{"fast", "slow"};
  std::map<std::string, std::map<std::string, double>> time_to;  // algorithm -> link -> seconds
  std::vector<std::string> order;
  for (const auto& [labels, result] : results("timing")) {
    const std::string& link = labels[1];
    const std::string& alg = labels[2];
    if (std::find(order.begin(), order.end(), alg) == order.end()) order.push_back(alg);
    const int step = first_step(curves.at(alg));
    ASSERT_GT(step, 0);
    for (const auto& e : result["eval"])
      if (e["step"].get<int>() == step) time_to[alg][link] = e["time_s"].get<double>();
  }
  const std::string pct = fmt::format("{:g}", 100 * target);
  std::string expected = fmt::format("| algorithm | test accuracy after 24 steps | step to {} % | time to {} %, fast | "
                                     "time to {} %, slow |\n|---|---:|---:|---:|---:|\n",
                                     pct, pct, pct);
  for (const auto& alg : order) {
    expected += fmt::format("| {} | - | {} |", alg, first_step(curves.at(alg)));
    for (const auto& link : links) {
      bool fastest = true;
      for (const auto& other : order)
        if (time_to[other][link] < time_to[alg][link] ||
            (time_to[other][link] == time_to[alg][link] && std::find(order.begin(), order.end(), other) <
                                                               std::find(order.begin(), order.end(), alg)))
          fastest = false;
      const std::string cell = human(time_to[alg][link]);
      expected += " " + (fastest ? "**" + cell + "**" : cell) + " |";
    }
    expected += "\n";
  }
  EXPECT_EQ(r.output.substr(0, expected.size()), expected);
  EXPECT_GT(time_to["gossip"]["slow"], time_to["gossip"]["fast"]);  // the links differ
  fs::remove_all(dir);
}

// scripts/lm_study.py (docs/low_communication_lm.md) on a small version of its three sweeps
// (a 1-layer GPT, 12 steps): data-parallel AdamW and 1-bit Adam in full on the datacenter
// links; a timing-only WAN run of AdamW and a timing-only check run on the datacenter
// links; 1-bit Adam in full for 8 steps (freeze_step 4) on both networks. The script's
// checks pass, each method's end-of-run times are the runs' clocks (1-bit Adam's WAN clock
// built from its 8-step run: the clock at 8 plus 4 of its compressed steps' mean), and a
// check run on other links is reported (exit 1).
TEST(StudyScripts, LmStudyTimesAreTheRunsClocks) {
  const auto dir = testing::fresh_dir("lm-study");
  const std::string wan = "WAN 1 Gb/s 20 ms", dc = "100 Gb/s 5 us";
  const json wan_net = {{"model", "alpha_beta"}, {"latency_us", 20000}, {"bandwidth_GBps", 0.125}};
  const json dc_net = {{"model", "alpha_beta"}, {"latency_us", 5}, {"bandwidth_GBps", 12.5}};
  const json adamw = {{"name", "parallel_sgd"}, {"variant", "centralized"}, {"lr", 0.003},
                      {"optimizer", {{"name", "adamw"}, {"weight_decay", 0.01}}}};
  const json one_bit = {{"name", "one_bit_adam"}, {"lr", 0.003}, {"freeze_step", 4}};
  const json base = {{"name", "lm"},
                     {"ranks", 4},
                     {"steps", 12},
                     {"seed", 1},
                     {"eval_every", 2},
                     {"workload",
                      {{"type", "gpt"}, {"data", "text"}, {"layers", 1}, {"heads", 2}, {"width", 16}, {"context", 16},
                       {"batch_size", 2}, {"eval_windows", 4}}},
                     {"algorithm", adamw},
                     {"topology", {{"kind", "ring"}}},
                     {"network", dc_net},
                     {"compute", {{"timing", "cost_model"}, {"gflops", 100}, {"memory_GBps", 20}}}};
  auto methods = [](const json& values, const json& labels) {
    return json{{"path", "/algorithm"}, {"name", "method"}, {"values", values}, {"labels", labels}};
  };
  auto networks = [&](const json& values, const json& labels) {
    return json{{"path", "/network"}, {"name", "network"}, {"values", values}, {"labels", labels}};
  };
  const json timing_only = {{"path", "/timing_only"}, {"values", {true}}};
  const std::map<std::string, json> sweeps{
      {"full", {{"name", "full"}, {"base", base}, {"axes", {methods({adamw, one_bit}, {"DP AdamW", "1-bit Adam"})}}}},
      {"timing",
       {{"name", "timing"},
        {"base", base},
        {"axes", {timing_only, methods(json::array({adamw}), json::array({"DP AdamW"})), networks(json::array({wan_net}), json::array({wan}))}}}},
      {"check",
       {{"name", "check"},
        {"base", base},
        {"axes", {timing_only, methods(json::array({adamw}), json::array({"DP AdamW"})), networks(json::array({dc_net}), json::array({dc}))}}}},
      {"other_links",  // labelled as the datacenter links, but 10 us
       {{"name", "other"},
        {"base", base},
        {"axes",
         {timing_only, methods(json::array({adamw}), json::array({"DP AdamW"})),
          networks(json::array({{{"model", "alpha_beta"}, {"latency_us", 10}, {"bandwidth_GBps", 12.5}}}),
                   json::array({dc}))}}}},
      {"onebit",
       {{"name", "onebit"},
        {"base", base},
        {"axes",
         {{{"path", "/steps"}, {"values", json::array({8})}}, methods(json::array({one_bit}), json::array({"1-bit Adam"})),
          networks({wan_net, dc_net}, {wan, dc})}}}}};
  for (const auto& [name, sweep] : sweeps) {
    testing::write_file(dir / (name + ".json"), sweep.dump());
    const auto r =
        testing::run_command(dtsim() + " sweep " + (dir / (name + ".json")).string() + " --out " + (dir / name).string());
    ASSERT_EQ(r.exit_code, 0) << name << ": " << r.output;
  }
  auto result = [&](const std::string& sweep, std::size_t index) {
    const json manifest = testing::read_json(dir / sweep / "sweep.json");
    const auto id = manifest["points"].at(index)["id"].get<std::string>();
    return testing::read_json(dir / sweep / "points" / (id + ".json"))["result"];
  };
  const std::string script = "python3 " + std::string(DTSIM_SOURCE_DIR) + "/scripts/lm_study.py " +
                             (dir / "full").string() + " " + (dir / "timing").string() + " " + (dir / "onebit").string();
  const auto r = testing::run_command(script + " --check " + (dir / "check").string() + " --target-loss 5");
  ASSERT_EQ(r.exit_code, 0) << r.output;

  auto human = [](double s) { return s >= 1 ? fmt::format("{:.2f} s", s) : fmt::format("{:.1f} ms", s * 1e3); };
  // The first table's row of `method`: its cells, trimmed.
  auto row = [&](const std::string& method) {
    const auto at = r.output.find("| " + method + " | ");
    EXPECT_NE(at, std::string::npos) << r.output;
    std::vector<std::string> cells;
    std::string line = r.output.substr(at, r.output.find('\n', at) - at), cell;
    for (std::size_t i = 1; i < line.size(); ++i) {
      if (line[i] == '|') {
        cells.push_back(cell.substr(1, cell.size() - 2));
        cell.clear();
      } else {
        cell += line[i];
      }
    }
    return cells;
  };
  const json dp_full = result("full", 0), one_bit_full = result("full", 1);
  const json dp_wan = result("timing", 0), one_bit_wan = result("onebit", 0);
  auto dp_row = row("DP AdamW");
  ASSERT_EQ(dp_row.size(), 10U);
  EXPECT_EQ(dp_row[8], human(dp_full["simulated_time_s"].get<double>()));
  EXPECT_EQ(dp_row[9], human(dp_wan["simulated_time_s"].get<double>()));
  auto one_bit_row = row("1-bit Adam");
  ASSERT_EQ(one_bit_row.size(), 10U);
  EXPECT_EQ(one_bit_row[8], human(one_bit_full["simulated_time_s"].get<double>()));
  const auto short_steps = one_bit_wan["per_step"]["time_s"].get<std::vector<double>>();
  ASSERT_EQ(short_steps.size(), 8U);
  const double compressed = (short_steps[4] + short_steps[5] + short_steps[6] + short_steps[7]) / 4;
  const double wan_end = one_bit_wan["simulated_time_s"].get<double>() + 4 * compressed;
  EXPECT_EQ(one_bit_row[9], human(wan_end));
  EXPECT_GT(wan_end, 10 * one_bit_full["simulated_time_s"].get<double>());  // the WAN's 20 ms latency shows

  // Time to a held-out loss of 5: each method's first evaluation at or below it, and the
  // clocks there (1-bit Adam's WAN clock: its 8-step run's, or built past step 8).
  auto clock_at = [](const json& run, int step) {
    for (const auto& e : run["eval"])
      if (e["step"].get<int>() == step) return e["time_s"].get<double>();
    return run["simulated_time_s"].get<double>();  // the last step's
  };
  for (const auto& [method, full, wan_run] : {std::tuple{"DP AdamW", dp_full, dp_wan},
                                              std::tuple{"1-bit Adam", one_bit_full, one_bit_wan}}) {
    int step = 0;
    for (const auto& e : full["eval"])
      if (step == 0 && e["test_loss"].get<double>() <= 5.0) step = e["step"].get<int>();
    ASSERT_GT(step, 0) << method;
    const double wan_clock = std::string(method) == "1-bit Adam" && step > 8
                                 ? one_bit_wan["simulated_time_s"].get<double>() + (step - 8) * compressed
                                 : clock_at(wan_run, step);
    const auto table = r.output.find("Time to a held-out loss of 5.0");
    ASSERT_NE(table, std::string::npos) << r.output;
    const auto line_at = r.output.find("| " + std::string(method) + " | " + std::to_string(step) + " | ", table);
    ASSERT_NE(line_at, std::string::npos) << method << " step " << step << "\n" << r.output;
    const std::string line = r.output.substr(line_at, r.output.find('\n', line_at) - line_at);
    EXPECT_NE(line.find(human(clock_at(full, step))), std::string::npos) << line;
    EXPECT_NE(line.find(human(wan_clock)), std::string::npos) << line;
  }

  const auto other = testing::run_command(script + " --check " + (dir / "other_links").string() + " --target-loss 5");
  EXPECT_EQ(other.exit_code, 1) << other.output;
  EXPECT_NE(other.output.find("lm_study: DP AdamW: the 100 Gb/s timing-only step times differ from the full run's"),
            std::string::npos)
      << other.output;
  fs::remove_all(dir);
}

// scripts/reuse_hit_rates.py: per sweep, the collectives its points scheduled and replayed
// (result.collective_reuse), the hit rate over the sweep and per point, the restarts.
TEST(StudyScripts, ReuseHitRatesAreThePointsCounts) {
  const auto dir = testing::fresh_dir("reuse-hit-rates");
  json base = tiny_base(12);
  base["algorithm"] = {{"name", "parallel_sgd"}, {"variant", "centralized"}, {"lr", 0.2}};
  base["network"]["model"] = "flow";
  const json sweep = {{"name", "reuse"},
                      {"base", base},
                      {"axes", {{{"path", "/ranks"}, {"values", {2, 4}}}, {{"path", "/topology/kind"}, {"values", {"ring", "star"}}}}}};
  testing::write_file(dir / "reuse.json", sweep.dump());
  auto r = testing::run_command(dtsim() + " sweep " + (dir / "reuse.json").string() + " --out " + (dir / "o").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = testing::run_command("python3 " + std::string(DTSIM_SOURCE_DIR) + "/scripts/reuse_hit_rates.py " + (dir / "o").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::int64_t collectives = 0, replayed = 0, restarts = 0, points = 0;
  double lowest = 1.0, highest = 0.0;
  for (const auto& name : point_files(dir / "o")) {
    const json reuse = testing::read_json(dir / "o" / "points" / name)["result"]["collective_reuse"];
    ++points;
    ASSERT_TRUE(reuse["enabled"].get<bool>()) << name;
    collectives += reuse["collectives"].get<std::int64_t>();
    replayed += reuse["replayed"].get<std::int64_t>();
    restarts += reuse["restarts"].get<std::int64_t>();
    const double rate = reuse["replayed"].get<double>() / reuse["collectives"].get<double>();
    lowest = std::min(lowest, rate);
    highest = std::max(highest, rate);
  }
  ASSERT_EQ(points, 4);
  ASSERT_GT(replayed, 0);  // the steps after the first replay their all-reduce
  EXPECT_EQ(r.output, fmt::format("| sweep | points | model | collectives | replayed | hit rate | per point | restarts |\n"
                                  "|---|---:|---|---:|---:|---:|---|---:|\n"
                                  "| reuse | 4 | flow | {} | {} | {:.1f} % | {:.1f} to {:.1f} % | {} |\n",
                                  collectives, replayed, 100.0 * static_cast<double>(replayed) / static_cast<double>(collectives),
                                  100 * lowest, 100 * highest, restarts));
  fs::remove_all(dir);
}

// A sweep run again skips every finished point; one whose file is gone runs again, and
// the tables are unchanged.
TEST(SweepRun, RerunSkipsFinishedPoints) {
  const auto& d = reference_run();
  const fs::path dir = d.root / "rerun";
  fs::create_directories(dir);
  fs::copy(d.full, dir, fs::copy_options::recursive);
  const auto files = point_files(dir);
  fs::remove(dir / "points" / *files.begin());
  const auto kept = dir / "points" / *files.rbegin();
  const auto mtime = fs::last_write_time(kept);
  const auto r = testing::run_command(dtsim() + " sweep " + d.sweep_file.string() + " --out " + dir.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("ran 1, skipped 5"), std::string::npos) << r.output;
  EXPECT_EQ(fs::last_write_time(kept), mtime);
  EXPECT_EQ(testing::read_file(dir / "table.json"), testing::read_file(d.full / "table.json"));
}

// Kill a sweep with SIGKILL while it runs, then rerun it: only the points without a
// file run, and the result equals the uninterrupted run's.
TEST(SweepRun, KilledSweepResumesWithNothingLost) {
  const auto& d = reference_run();
  const fs::path dir = d.root / "killed";
  std::vector<std::string> args{dtsim(), "sweep", d.sweep_file.string(), "--jobs", "1", "--quiet", "--out", dir.string()};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  pid_t pid = 0;
  ASSERT_EQ(posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ), 0);
  posix_spawn_file_actions_destroy(&actions);
  // Wait for the first finished point (or the end), then kill.
  int status = 0;
  bool exited = false;
  for (int i = 0; i < 20000 && point_files(dir).empty(); ++i) {
    if (waitpid(pid, &status, WNOHANG) == pid) {
      exited = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (!exited) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
  }
  const std::size_t done = point_files(dir).size();
  ASSERT_GE(done, 1U);
  std::cout << (exited ? "the sweep finished before the kill" : fmt::format("killed after {} of 6 points", done)) << "\n";
  const auto r = testing::run_command(dtsim() + " sweep " + d.sweep_file.string() + " --quiet --out " + dir.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find(fmt::format("ran {}, skipped {}", 6 - done, done)), std::string::npos) << r.output;
  EXPECT_EQ(point_files(dir), point_files(d.full));
  for (const auto& f : point_files(dir))
    EXPECT_EQ(testing::read_file(dir / "points" / f), testing::read_file(d.full / "points" / f)) << f;
  EXPECT_EQ(testing::read_file(dir / "table.json"), testing::read_file(d.full / "table.json"));
  EXPECT_EQ(testing::read_file(dir / "table.csv"), testing::read_file(d.full / "table.csv"));
}

// Two shards, merged, give exactly the unsharded sweep's files; merging an incomplete
// or conflicting set is a one-line error.
TEST(SweepRun, ShardsMergeToTheUnshardedSweep) {
  const auto& d = reference_run();
  const fs::path s1 = d.root / "shard1", s2 = d.root / "shard2", merged = d.root / "merged";
  for (const auto& [shard, dir] : {std::pair{"1/2", s1}, std::pair{"2/2", s2}}) {
    const auto r = testing::run_command(dtsim() + " sweep " + d.sweep_file.string() + " --quiet --shard " + shard +
                                        " --out " + dir.string());
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("ran 3, skipped 0"), std::string::npos) << r.output;
  }
  EXPECT_EQ(point_files(s1).size(), 3U);
  auto r = testing::run_command(dtsim() + " merge " + s1.string() + " " + s2.string() + " --out " + merged.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* f : {"sweep.json", "table.json", "table.csv", "table.md"})
    EXPECT_EQ(testing::read_file(merged / f), testing::read_file(d.full / f)) << f;
  EXPECT_EQ(point_files(merged), point_files(d.full));

  r = testing::run_command(dtsim() + " merge " + s1.string() + " --out " + (d.root / "incomplete").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("merge: 3 of 6 points are in none of the inputs"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(d.root / "incomplete"));

  // The same point with a different result in two inputs.
  const fs::path altered = d.root / "altered";
  fs::copy(s2, altered, fs::copy_options::recursive);
  const auto first = *point_files(s1).begin();
  auto doc = testing::read_json(s1 / "points" / first);
  doc["result"]["final"]["loss"] = 1.0;
  testing::write_file(altered / "points" / first, doc.dump());
  r = testing::run_command(dtsim() + " merge " + s1.string() + " " + altered.string() + " --out " +
                           (d.root / "conflict").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("has different results in"), std::string::npos) << r.output;
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
}

// Bad input to `dtsim sweep` exits 2 with one line naming the axis.
TEST(SweepCli, BadSweepExitsTwoWithOneLine) {
  const auto dir = testing::fresh_dir("sweep-bad");
  json doc = six_point_sweep();
  doc["axes"][0]["values"] = {0.1, "fast"};
  testing::write_file(dir / "bad.json", doc.dump());
  auto r = testing::run_command(dtsim() + " sweep " + (dir / "bad.json").string() + " --out " + (dir / "o").string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.output, "dtsim: error: axis /algorithm/lr value fast: /algorithm/lr: expected a number, got string "
                      "\"fast\"\n");
  r = testing::run_command(dtsim() + " sweep " + (dir / "bad.json").string() + " --shard 3/2");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("--shard: expected i/N"), std::string::npos) << r.output;
  // --target-accuracy is a fraction in (0, 1], as the sweep file's target_accuracy.
  for (const char* bad : {"0", "75", "-0.5", "high"}) {
    r = testing::run_command(dtsim() + " sweep " + (dir / "bad.json").string() + " --target-accuracy " + bad);
    EXPECT_EQ(r.exit_code, 2) << bad << ": " << r.output;
    EXPECT_NE(r.output.find("--target-accuracy"), std::string::npos) << r.output;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  }
}

// A point's file does not depend on how many points ran beside it: real-data models (an
// MLP on Fashion-MNIST, whose matrix products go through OpenBLAS), several algorithms,
// `--jobs 2` against `--jobs 1`, byte for byte. Run as threads of one process, the points
// shared Debian's serial OpenBLAS, and their losses differed from run to run.
TEST(SweepRun, PointFilesDoNotDependOnJobs) {
  const fs::path dir = testing::fresh_dir("sweep-jobs");
  const json base = {{"name", "mlp"},
                     {"ranks", 8},
                     {"steps", 60},
                     {"seed", 1},
                     {"workload", {{"type", "mlp"}, {"batch_size", 32}}},
                     {"algorithm", {{"name", "parallel_sgd"}, {"variant", "centralized"}, {"lr", 0.05}, {"momentum", 0.9}}},
                     {"topology", {{"kind", "ring"}}},
                     {"network", {{"model", "flow"}, {"latency_us", 5}, {"bandwidth_GBps", 1.25}}}};
  const json top1 = {{"kind", "top_k"}, {"ratio", 0.01}};
  const json algorithms = {
      {{"name", "parallel_sgd"}, {"variant", "centralized"}, {"lr", 0.05}, {"momentum", 0.9}},
      {{"name", "parallel_sgd"}, {"variant", "centralized"}, {"lr", 0.051}, {"momentum", 0.9}},
      {{"name", "ddp"}, {"hook", "fp16_compress"}, {"lr", 0.05}, {"momentum", 0.9}},
      {{"name", "sparsified_sgd"}, {"lr", 0.05}, {"momentum", 0.9}, {"compressor", top1}},
      {{"name", "choco_sgd"}, {"lr", 0.05}, {"momentum", 0.9}, {"consensus_stepsize", 0.1}, {"compressor", top1}}};
  testing::write_file(dir / "jobs.json",
                      json({{"name", "jobs"},
                            {"base", base},
                            {"axes",
                             {{{"path", "/algorithm"},
                               {"values", algorithms},
                               {"labels", {"sgd", "sgd lr .051", "ddp fp16", "sparsified", "choco"}}}}}})
                          .dump(2));
  for (const char* jobs : {"1", "2"}) {
    const auto r = testing::run_command(dtsim() + " sweep " + (dir / "jobs.json").string() + " --quiet --jobs " + jobs +
                                        " --out " + (dir / jobs).string());
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("ran 5, skipped 0"), std::string::npos) << r.output;
  }
  const auto files = point_files(dir / "1");
  ASSERT_EQ(files.size(), 5U);
  EXPECT_EQ(point_files(dir / "2"), files);
  for (const auto& f : files) {
    const std::string one = testing::read_file(dir / "1" / "points" / f);
    EXPECT_EQ(one, testing::read_file(dir / "2" / "points" / f)) << f;
    // Real training happened: a finite loss below the untrained model's ln 10.
    const double loss = json::parse(one)["result"]["final"]["train_loss"].get<double>();
    EXPECT_LT(loss, 1.5) << f;
  }
}

// A child process reports how its work ended: returned, threw (the first line), crashed
// (the signal), or ran past its memory limit; its siblings are unaffected.
TEST(SweepChild, ReportsHowEachChildEnded) {
  std::vector<Child> children;
  children.push_back(start_child({}, [] {}));
  children.push_back(start_child({}, [] { throw std::runtime_error("bad point\nsecond line"); }));
  children.push_back(start_child({}, [] { ::raise(SIGSEGV); }));
  children.push_back(start_child(
      {}, [] { std::vector<char> big(std::size_t{1} << 30, 1); if (big[12345] != 1) throw std::logic_error("?"); },
      std::uint64_t{1} << 28));
  std::vector<pid_t> pids;
  for (const auto& c : children) pids.push_back(c.pid);
  std::map<pid_t, std::string> ends;
  while (!children.empty()) {
    const auto end = wait_any_child(children);
    ends[end.pid] = end.error;
    std::erase_if(children, [&](const Child& c) { return c.pid == end.pid; });
  }
  ASSERT_EQ(ends.size(), 4U);
  EXPECT_EQ(ends[pids[0]], "");
  EXPECT_EQ(ends[pids[1]], "bad point");
  EXPECT_NE(ends[pids[2]].find("crashed: signal 11"), std::string::npos) << ends[pids[2]];
  EXPECT_NE(ends[pids[3]].find("out of memory (the limit is 0.268 GB a point)"), std::string::npos) << ends[pids[3]];
}

// ---------------------------------------------------------------------------------------
// Tables and figures

// Figures from a result JSON: nearest-rank percentiles, time to target (the end of the
// first step whose loss is at or below it), and absent fields as absent.
TEST(SweepTable, FiguresFromResultJson) {
  json result = {{"per_step",
                  {{"time_s", {1.0, 2.0, 3.0, 4.0}},
                   {"n_bits", {10, 10, 10, 10}},
                   {"loss", {0.9, 0.7, 0.5, 0.6}}}},
                 {"step_mean_s", 2.5},
                 {"n_bits_per_step", 10},
                 {"final", {{"loss", 0.55}, {"accuracy", 0.8}}}};
  auto f = figures_of(result, {.loss = 0.7});
  EXPECT_EQ(f.step_p50_s, 2.0);
  EXPECT_EQ(f.step_p99_s, 4.0);
  EXPECT_EQ(f.best_loss, 0.5);
  EXPECT_EQ(f.time_to_target_s, 3.0);  // steps 1 and 2
  EXPECT_FALSE(f.compute_mean_s);
  EXPECT_FALSE(f.test_accuracy);
  EXPECT_FALSE(figures_of(result, {.loss = 0.1}).time_to_target_s);
  // With per-step compute time and a test set.
  result["per_step"]["compute_time_s"] = {0.5, 0.5, 0.5, 0.5};
  result["final"]["test_accuracy"] = 0.75;
  result["final"]["test_loss"] = nullptr;  // NaN is written as null
  f = figures_of(result, {});
  EXPECT_EQ(f.compute_mean_s, 0.5);
  EXPECT_EQ(f.exposed_comm_s, 2.0);
  EXPECT_EQ(f.test_accuracy, 0.75);
  EXPECT_FALSE(f.test_loss);
  EXPECT_FALSE(f.time_to_target_s);
  EXPECT_FALSE(f.reuse_hit_rate);  // a result from before collective reuse
  result["collective_reuse"] = {{"enabled", true}, {"collectives", 8}, {"replayed", 6}, {"hit_rate", 0.75}};
  EXPECT_EQ(figures_of(result, {}).reuse_hit_rate, 0.75);
  result["collective_reuse"]["enabled"] = false;
  EXPECT_FALSE(figures_of(result, {}).reuse_hit_rate);
  result["collective_reuse"] = {{"enabled", true}, {"collectives", 0}, {"replayed", 0}, {"hit_rate", 0.0}};
  EXPECT_FALSE(figures_of(result, {}).reuse_hit_rate);  // gossip only: no rate, not 0 %
}

// Time to a target accuracy: the clock and step of the first evaluation whose test
// accuracy reaches it (an evaluation later falling back below does not matter); the
// training accuracy where a run has no test set; none when never reached or no curve.
TEST(SweepTable, TimeToTargetAccuracyFromTheEvaluationCurve) {
  const json eval = {{{"step", 16}, {"time_s", 1.5}, {"train_accuracy", 0.5}, {"test_accuracy", 0.45}},
                     {{"step", 32}, {"time_s", 3.25}, {"train_accuracy", 0.8}, {"test_accuracy", 0.7}},
                     {{"step", 48}, {"time_s", 5.0}, {"train_accuracy", 0.9}, {"test_accuracy", 0.8}},
                     {{"step", 64}, {"time_s", 6.5}, {"train_accuracy", 0.7}, {"test_accuracy", 0.6}}};
  json result = {{"per_step", {{"time_s", {1.0}}}}, {"eval", eval}};
  auto f = figures_of(result, {.accuracy = 0.7});
  EXPECT_EQ(f.time_to_accuracy_s, 3.25);
  EXPECT_EQ(f.step_to_accuracy, 32);
  f = figures_of(result, {.accuracy = 0.75});
  EXPECT_EQ(f.time_to_accuracy_s, 5.0);
  EXPECT_EQ(f.step_to_accuracy, 48);
  EXPECT_FALSE(figures_of(result, {.accuracy = 0.85}).time_to_accuracy_s);
  EXPECT_FALSE(figures_of(result, {}).time_to_accuracy_s);
  // No test set: test accuracy null (NaN), the training accuracy counts.
  for (auto& e : result["eval"]) e["test_accuracy"] = nullptr;
  f = figures_of(result, {.accuracy = 0.85});
  EXPECT_EQ(f.time_to_accuracy_s, 5.0);
  // A timing-only result has no curve.
  result.erase("eval");
  EXPECT_FALSE(figures_of(result, {.accuracy = 0.1}).time_to_accuracy_s);
}

// The sweep file's target_accuracy is a fraction; the table and manifest carry it, and
// the Markdown table shows its columns only when there is one.
// A run without losses (timing-only, a shape-only workload) reaches no target and shows
// no loss; a diverged run gets the "diverged at step" column and a note in Markdown.
TEST(SweepTable, NoLossReachesNoTargetAndDivergenceIsMarked) {
  json no_loss = {{"per_step", {{"time_s", {1.0, 1.0}}, {"n_bits", {8, 8}}, {"loss", {nullptr, nullptr}}}},
                  {"final", {{"train_loss", nullptr}, {"train_accuracy", nullptr}}},
                  {"eval", {{{"step", 2}, {"time_s", 2.0}, {"train_accuracy", nullptr}, {"test_accuracy", nullptr}}}},
                  {"no_loss_reason", "workload resnet20 has no real math (a shape-only model)"}};
  const auto f = figures_of(no_loss, {.loss = 10.0, .accuracy = 0.01});
  EXPECT_FALSE(f.time_to_target_s);
  EXPECT_FALSE(f.time_to_accuracy_s);
  EXPECT_FALSE(f.final_loss);
  EXPECT_FALSE(f.best_loss);
  json diverged = {{"per_step", {{"time_s", {1.0, 1.0}}, {"n_bits", {8, 8}}, {"loss", {0.7, 9.0}}}},
                   {"final", {{"train_loss", 2.31}, {"train_accuracy", 0.11}}},
                   {"diverged_at_step", 2}};
  EXPECT_EQ(figures_of(diverged, {}).diverged_at_step, 2);
  const json manifest = {{"name", "m"}, {"axes", {{{"name", "lr"}}}}};
  auto point = [](const char* label, const json& result) {
    return json{{"id", label}, {"label", label}, {"values", {label}}, {"result", result}};
  };
  const json table = make_table(manifest, {point("0.1", no_loss), point("1000", diverged)}, {.loss = 1.0});
  EXPECT_TRUE(table["rows"][0]["diverged_at_step"].is_null());
  EXPECT_EQ(table["rows"][1]["diverged_at_step"], 2);
  EXPECT_EQ(table["rows"][1]["final_loss"], 2.31);  // train_loss, the version-2 name
  const std::string md = table_markdown(table);
  EXPECT_NE(md.find("diverged at step"), std::string::npos) << md;
  EXPECT_NE(md.find("Diverged (training loss not finite or over 10x its first step's): 1000 at step 2."),
            std::string::npos)
      << md;
  EXPECT_NE(table_csv(table).find("diverged_at_step"), std::string::npos);
  // Without a diverged row, no column and no note.
  const std::string calm = table_markdown(make_table(manifest, {point("0.1", no_loss)}, {}));
  EXPECT_EQ(calm.find("diverged"), std::string::npos) << calm;
}

TEST(SweepTable, TargetAccuracyInSweepFileManifestAndTable) {
  json doc = six_point_sweep();
  doc["target_accuracy"] = 0.75;
  const auto s = parse_sweep(doc, ".");
  EXPECT_EQ(s.targets.accuracy, 0.75);
  EXPECT_EQ(s.manifest()["target_accuracy"], 0.75);
  for (const json& bad : {json(75), json(0), json("0.7"), json(-0.1)}) {
    doc["target_accuracy"] = bad;
    EXPECT_EQ(sweep_error(doc), "sweep: /target_accuracy: expected a fraction in (0, 1] (0.75 for 75 %), got " + bad.dump());
  }
  const json point = {{"id", "p"},
                      {"label", "lr=0.1"},
                      {"values", {"0.1"}},
                      {"result",
                       {{"per_step", {{"time_s", {1.0, 1.0}}}},
                        {"eval", {{{"step", 2}, {"time_s", 2.0}, {"test_accuracy", 0.8}}}}}}};
  const json manifest = {{"name", "t"}, {"axes", {{{"name", "lr"}}}}};
  json table = make_table(manifest, {point}, {.accuracy = 0.75});
  EXPECT_EQ(table["target_accuracy"], 0.75);
  EXPECT_EQ(table["rows"][0]["time_to_accuracy_s"], 2.0);
  EXPECT_EQ(table["rows"][0]["step_to_accuracy"], 2);
  const std::string md = table_markdown(table);
  EXPECT_NE(md.find("time to 75% accuracy"), std::string::npos) << md;
  EXPECT_NE(md.find("step to accuracy"), std::string::npos) << md;
  const std::string plain = table_markdown(make_table(manifest, {point}, {}));
  EXPECT_EQ(plain.find("to accuracy"), std::string::npos) << plain;
  EXPECT_EQ(plain.find("% accuracy"), std::string::npos) << plain;
  EXPECT_NE(table_csv(make_table(manifest, {point}, {})).find("time_to_accuracy_s,step_to_accuracy"), std::string::npos);
}

TEST(SweepReport, DrawsSvgFigures) {
  const auto& d = reference_run();
  const fs::path out = d.root / "report";
  const auto r = testing::run_command(dtsim() + " report " + d.full.string() + " --out " + out.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* f : {"loss_vs_time.svg", "loss_vs_bits.svg", "step_time_vs_lr.svg", "step_time_vs_topology.svg"}) {
    const std::string svg = testing::read_file(out / f);
    ASSERT_EQ(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0), 0U) << f;
    EXPECT_NE(svg.find("</svg>\n"), std::string::npos) << f;
  }
  auto count = [](const std::string& s, const std::string& what) {
    std::size_t n = 0;
    for (auto at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
    return n;
  };
  // One line per run; step time against lr: one line per topology.
  EXPECT_EQ(count(testing::read_file(out / "loss_vs_time.svg"), "<polyline"), 6U);
  const std::string by_lr = testing::read_file(out / "step_time_vs_lr.svg");
  EXPECT_EQ(count(by_lr, "<polyline"), 2U);
  EXPECT_NE(by_lr.find(">complete<"), std::string::npos);  // the value, its axis named once above
  EXPECT_NE(by_lr.find(">topology<"), std::string::npos);
  // Topology is categorical: its labels are the ticks.
  const std::string by_topology = testing::read_file(out / "step_time_vs_topology.svg");
  EXPECT_NE(by_topology.find(">ring</text>"), std::string::npos);
  EXPECT_NE(by_topology.find(">complete</text>"), std::string::npos);
  // Part of a sweep (its ring points): topology has one value there and names no line.
  const fs::path part = d.root / "ring-only";
  fs::create_directories(part / "points");
  fs::copy_file(d.full / "sweep.json", part / "sweep.json", fs::copy_options::overwrite_existing);
  for (const auto& name : point_files(d.full))
    if (testing::read_json(d.full / "points" / name)["values"][1] == "ring")
      fs::copy_file(d.full / "points" / name, part / "points" / name, fs::copy_options::overwrite_existing);
  ASSERT_EQ(testing::run_command(dtsim() + " report " + part.string() + " --out " + (d.root / "report-part").string())
                .exit_code,
            0);
  const std::string part_by_lr = testing::read_file(d.root / "report-part" / "step_time_vs_lr.svg");
  EXPECT_EQ(count(part_by_lr, "<polyline"), 1U);
  EXPECT_EQ(part_by_lr.find("topology="), std::string::npos);
  // A result file from `dtsim run` works too; garbage is a one-line error.
  const auto point = *point_files(d.full).begin();
  const auto result = testing::read_json(d.full / "points" / point)["result"];
  testing::write_file(d.root / "one.result.json", result.dump());
  EXPECT_EQ(testing::run_command(dtsim() + " report " + (d.root / "one.result.json").string() + " --out " +
                                 (d.root / "report1").string()).exit_code, 0);
  // Timing-only results have no losses (null): no loss figures, and no failure.
  auto timing = result;
  for (auto& l : timing["per_step"]["loss"]) l = nullptr;
  testing::write_file(d.root / "timing.result.json", timing.dump());
  const auto no_loss = testing::run_command(dtsim() + " report " + (d.root / "timing.result.json").string() +
                                            " --out " + (d.root / "report3").string());
  EXPECT_EQ(no_loss.exit_code, 0) << no_loss.output;
  EXPECT_FALSE(fs::exists(d.root / "report3" / "loss_vs_time.svg"));
  testing::write_file(d.root / "junk.json", "{\"a\": 1}");
  const auto bad = testing::run_command(dtsim() + " report " + (d.root / "junk.json").string() + " --out " +
                                        (d.root / "report2").string());
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.output.find("not a result file"), std::string::npos) << bad.output;
}

// A figure's legend names a sweep point by the axes that vary: an axis with one value
// (a fixed step count) is left out, and one varying axis gives its value alone.
TEST(SweepReport, LegendsNameTheAxesThatVary) {
  const auto dir = testing::fresh_dir("legends");
  fs::create_directories(dir / "points");
  const json manifest = {{"dtsim_sweep_version", 1},
                         {"name", "legends"},
                         {"axes",
                          {{{"path", "/steps"}, {"name", "steps"}, {"values", {160}}, {"labels", {"160"}}},
                           {{"path", "/algorithm"}, {"name", "algorithm"}, {"values", {1, 2}}, {"labels", {"SGD", "CHOCO"}}}}},
                         {"points",
                          {{{"index", 0}, {"id", "a"}, {"label", "steps=160, algorithm=SGD"}, {"values", {"160", "SGD"}}},
                           {{"index", 1}, {"id", "b"}, {"label", "steps=160, algorithm=CHOCO"}, {"values", {"160", "CHOCO"}}}}}};
  testing::write_file(dir / "sweep.json", manifest.dump());
  for (const auto& p : manifest["points"]) {
    json point = p;
    point["result"] = {{"per_step", {{"time_s", {1.0}}, {"loss", {0.5}}}},
                       {"eval", {{{"step", 1}, {"time_s", 1.0}, {"test_accuracy", 0.5}}, {{"step", 2}, {"time_s", 2.0}, {"test_accuracy", 0.7}}}}};
    testing::write_file(dir / "points" / (p["id"].get<std::string>() + ".json"), point.dump());
  }
  const auto runs = read_runs(dir);
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].label, "SGD");
  EXPECT_EQ(runs[1].label, "CHOCO");
  // With evaluations on a test set: test accuracy against simulated time, a curve each.
  const auto written = write_report({dir}, dir / "figures").written;
  const std::string svg = testing::read_file(dir / "figures" / "accuracy_vs_time.svg");
  ASSERT_FALSE(svg.empty());
  EXPECT_NE(std::find(written.begin(), written.end(), dir / "figures" / "accuracy_vs_time.svg"), written.end());
  EXPECT_NE(svg.find(">SGD<"), std::string::npos) << svg;
  EXPECT_NE(svg.find(">CHOCO<"), std::string::npos) << svg;
}

// What the report tests below build by hand: result JSONs as `dtsim run` writes them (a
// null loss where the run has none), sweep directories of such results, and ways to read
// an SVG's text back.

// A result: per-step times (s) and losses (null: none), 64 bits a step.
json hand_result(const std::string& name, const std::vector<double>& times, const json& losses) {
  const double mean = times.empty() ? 0.0 : std::accumulate(times.begin(), times.end(), 0.0) / static_cast<double>(times.size());
  return {{"dtsim_result_version", 1},
          {"mode", "emulated"},
          {"timing_only", false},
          {"scenario", {{"name", name}}},
          {"step_mean_s", mean},
          {"per_step", {{"time_s", times}, {"n_bits", std::vector<double>(times.size(), 64.0)}, {"loss", losses}}},
          {"final", {{"loss", losses.empty() ? json(nullptr) : losses.back()}}},
          {"eval", json::array()},
          {"diverged_at_step", nullptr}};
}

// A timing-only result: the losses are null, and it says whose operations it replayed.
json timing_only_result(const std::string& name, const std::vector<double>& times) {
  json r = hand_result(name, times, std::vector<json>(times.size(), nullptr));
  r["timing_only"] = {{"representative_rank", 0}};
  return r;
}

// A sweep output directory: sweep.json with `axes` ({name, values, labels}) in product
// order and one point file per combination, whose result `result_of(indices)` makes.
void write_hand_sweep(const fs::path& dir, const std::string& name, const json& axes,
                      const std::function<json(const std::vector<std::size_t>&)>& result_of) {
  fs::create_directories(dir / "points");
  json manifest = {{"dtsim_sweep_version", 1}, {"name", name}, {"mode", "product"}, {"axes", json::array()},
                   {"points", json::array()}};
  std::size_t count = 1;
  for (const auto& a : axes) {
    manifest["axes"].push_back({{"path", "/" + a["name"].get<std::string>()}, {"name", a["name"]}, {"values", a["values"]},
                                {"labels", a["labels"]}});
    count *= a["values"].size();
  }
  for (std::size_t index = 0; index < count; ++index) {
    std::vector<std::size_t> at(axes.size());
    std::size_t rest = index;
    for (std::size_t k = axes.size(); k-- > 0;) at[k] = rest % axes[k]["values"].size(), rest /= axes[k]["values"].size();
    json values = json::array();
    std::string label;
    for (std::size_t k = 0; k < axes.size(); ++k) {
      values.push_back(axes[k]["labels"][at[k]]);
      label += fmt::format("{}{}={}", k ? ", " : "", axes[k]["name"].get<std::string>(), axes[k]["labels"][at[k]].get<std::string>());
    }
    const json point = {{"index", index}, {"id", fmt::format("p{}", index)}, {"label", label}, {"values", values}};
    manifest["points"].push_back(point);
    json file = point;
    file["result"] = result_of(at);
    testing::write_file(dir / "points" / fmt::format("p{}.json", index), file.dump());
  }
  testing::write_file(dir / "sweep.json", manifest.dump(2));
}

std::size_t occurrences(const std::string& s, const std::string& what) {
  std::size_t n = 0;
  for (auto at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

// The text of each <text> element, in order (entities left as written).
std::vector<std::string> svg_texts(const std::string& svg) {
  std::vector<std::string> texts;
  for (auto at = svg.find("<text"); at != std::string::npos; at = svg.find("<text", at + 1)) {
    const auto open = svg.find('>', at), close = svg.find("</text>", at);
    texts.push_back(svg.substr(open + 1, close - open - 1));
  }
  return texts;
}

// Topology (categories, two long labels) x network model (categories, one long label) x
// ranks (numbers): 12 points of 6 steps, step times 10 to 14 ms; the point (ring, flow,
// 8 ranks) diverges at step 3 (its loss past 1e3, then NaN, written null).
const std::string kLongTopology = "exponential graph with one peer per power of two";
const std::string kLongModel = "alpha_beta latency 2 us bandwidth 1 GB/s";

const fs::path& hand_sweep() {
  static const fs::path dir = [] {
    const fs::path d = testing::fresh_dir("report-hand") / "hand";
    const json axes = {
        {{"name", "topology"},
         {"values", {{{"kind", "torus"}}, {{"kind", "ring"}}, {{"kind", "exponential"}}}},
         {"labels", {"torus 4x4", "ring", kLongTopology}}},
        {{"name", "network model"}, {"values", {{{"model", "alpha_beta"}}, {{"model", "flow"}}}}, {"labels", {kLongModel, "flow"}}},
        {{"name", "ranks"}, {"values", {4, 8}}, {"labels", {"4", "8"}}}};
    write_hand_sweep(d, "hand", axes, [](const std::vector<std::size_t>& at) {
      std::vector<double> times;
      json losses = json::array();
      for (int s = 0; s < 6; ++s) {
        times.push_back(1e-3 * (10.0 + static_cast<double>(at[0]) + 0.5 * static_cast<double>(at[1]) +
                                0.5 * static_cast<double>(at[2]) + 0.1 * (s % 2)));
        losses.push_back(0.7 - 0.05 * s);
      }
      json r = hand_result("hand", times, losses);
      if (at == std::vector<std::size_t>{1, 1, 1}) {
        r["per_step"]["loss"] = {0.7, 0.65, 2.5e3, nullptr, nullptr, nullptr};
        r["diverged_at_step"] = 3;
      }
      return r;
    });
    return d;
  }();
  return dir;
}

// A timing-only result has step times and no loss: `dtsim report` draws its step time at
// every step, leaves it out of both loss figures and says so, one line each, and lists
// the files it wrote. Beside a run with losses, the loss figures show that run alone.
TEST(SweepReport, TimingOnlyResultGetsStepTimesAndSaysWhatItLeavesOut) {
  const auto dir = testing::fresh_dir("report-timing");
  testing::write_file(dir / "timing.result.json", timing_only_result("wide", {0.02, 0.021, 0.02}).dump());
  testing::write_file(dir / "trained.result.json", hand_result("trained", {0.01, 0.01, 0.01}, {0.7, 0.6, 0.5}).dump());
  auto r = testing::run_command(dtsim() + " report " + (dir / "timing.result.json").string() + " --out " + (dir / "a").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, (dir / "a" / "step_time_vs_step.svg").string() + "\n" +
                          "dtsim: loss_vs_time.svg: left out wide: no loss (timing-only run)\n"
                          "dtsim: loss_vs_bits.svg: left out wide: no loss (timing-only run)\n");
  const std::string svg = testing::read_file(dir / "a" / "step_time_vs_step.svg");
  EXPECT_EQ(occurrences(svg, "<polyline"), 1U);
  EXPECT_NE(svg.find(">wide</text>"), std::string::npos) << svg;
  EXPECT_FALSE(fs::exists(dir / "a" / "loss_vs_time.svg"));

  r = testing::run_command(dtsim() + " report " + (dir / "timing.result.json").string() + " " +
                           (dir / "trained.result.json").string() + " --out " + (dir / "b").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(occurrences(r.output, "left out wide: no loss (timing-only run)"), 2U) << r.output;
  EXPECT_EQ(occurrences(r.output, "left out trained"), 0U) << r.output;
  EXPECT_EQ(occurrences(testing::read_file(dir / "b" / "step_time_vs_step.svg"), "<polyline"), 2U);
  const std::string loss = testing::read_file(dir / "b" / "loss_vs_time.svg");
  EXPECT_EQ(occurrences(loss, "<polyline"), 1U);
  EXPECT_NE(loss.find(">trained</text>"), std::string::npos);
  EXPECT_EQ(loss.find(">wide</text>"), std::string::npos);

  // A full and a timing-only run of one scenario: their file tells them apart.
  const fs::path twin = dir / "twin" / "trained.result.json";
  fs::create_directories(twin.parent_path());
  testing::write_file(twin, timing_only_result("trained", {0.01, 0.01, 0.01}).dump());
  r = testing::run_command(dtsim() + " report " + (dir / "trained.result.json").string() + " " + twin.string() +
                           " --out " + (dir / "c").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("left out trained (" + twin.string() + "): no loss (timing-only run)"), std::string::npos)
      << r.output;
}

// Inputs with runs but nothing a figure can show (no steps) are bad input: exit 2, one
// line naming why, and no output directory.
TEST(SweepReport, NothingToDrawExitsTwoWithOneLine) {
  const auto dir = testing::fresh_dir("report-empty");
  testing::write_file(dir / "empty.result.json", hand_result("empty", {}, json::array()).dump());
  const auto r = testing::run_command(dtsim() + " report " + (dir / "empty.result.json").string() + " --out " +
                                      (dir / "out").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_EQ(r.output, "dtsim: error: report: nothing to draw: empty has no step times, losses or evaluations\n");
  EXPECT_FALSE(fs::exists(dir / "out"));
}

// Step times are magnitudes: their axis starts at 0, whatever the range of the values
// (10 to 14 ms here, where a fitted axis would start at 10).
TEST(SweepReport, StepTimeAxesStartAtZero) {
  const fs::path out = hand_sweep().parent_path() / "zero";
  const auto report = write_report({hand_sweep()}, out);
  for (const char* figure : {"step_time_vs_step.svg", "step_time_vs_ranks.svg", "step_time_vs_topology.svg"}) {
    const std::string svg = testing::read_file(out / figure);
    EXPECT_NE(svg.find("text-anchor=\"end\">0</text>"), std::string::npos) << figure;
    EXPECT_NE(svg.find("(ms)"), std::string::npos) << figure;
  }
  // Losses are not magnitudes: their axis fits them (0.45 to 0.7), no 0.
  EXPECT_EQ(testing::read_file(out / "loss_vs_time.svg").find("text-anchor=\"end\">0</text>"), std::string::npos);
}

// Categories have no order: against topology each run is a marker, no line joins them
// (the one path is the axes); against ranks, a number, each series is a line.
TEST(SweepReport, CategoricalAxesDrawMarkersWithoutLines) {
  const fs::path out = hand_sweep().parent_path() / "categories";
  write_report({hand_sweep()}, out);
  const std::string by_topology = testing::read_file(out / "step_time_vs_topology.svg");
  EXPECT_EQ(occurrences(by_topology, "<polyline"), 0U);
  EXPECT_EQ(occurrences(by_topology, "<path d="), 1U);            // the axes
  EXPECT_EQ(occurrences(by_topology, "<circle"), 11U + 4U);       // 11 runs, 4 legend swatches
  EXPECT_EQ(occurrences(by_topology, "class=\"diverged\""), 1U);  // the 12th run
  const std::string by_ranks = testing::read_file(out / "step_time_vs_ranks.svg");
  EXPECT_EQ(occurrences(by_ranks, "<polyline"), 6U);  // topology x network model
}

// A legend entry lists the values of the axes that vary, whole (long ones wrap onto a
// second line, never cut with '~'); the axes' names appear once, as its heading.
TEST(SweepReport, LegendEntriesListValuesWhole) {
  const fs::path out = hand_sweep().parent_path() / "legends";
  write_report({hand_sweep()}, out);
  const std::string loss = testing::read_file(out / "loss_vs_time.svg");
  const auto texts = svg_texts(loss);
  std::string joined;
  for (const auto& t : texts) joined += t + " ";
  EXPECT_EQ(loss.find('~'), std::string::npos);
  EXPECT_EQ(occurrences(joined, "topology, network model, ranks"), 1U) << joined;
  EXPECT_EQ(occurrences(joined, "topology="), 0U) << joined;
  EXPECT_EQ(occurrences(joined, "network model="), 0U) << joined;
  EXPECT_NE(joined.find(kLongTopology + ", " + kLongModel + ", 8"), std::string::npos) << joined;
  // Every legend line fits in the figure (6 px a character is a wide 12 px sans-serif).
  const double width = std::stod(loss.substr(loss.find("width=\"") + 7));
  for (auto at = loss.find("<text x=\""); at != std::string::npos; at = loss.find("<text x=\"", at + 1)) {
    const auto tag_end = loss.find('>', at);
    if (loss.substr(at, tag_end - at).find("text-anchor") != std::string::npos) continue;
    const double x = std::stod(loss.substr(at + 9));
    const auto text = loss.substr(tag_end + 1, loss.find("</text>", at) - tag_end - 1);
    EXPECT_LE(x + 6.0 * static_cast<double>(text.size()), width) << text;
  }
  // Against topology the entries list the other two axes; the heading names them.
  const auto by_topology = svg_texts(testing::read_file(out / "step_time_vs_topology.svg"));
  EXPECT_EQ(std::count(by_topology.begin(), by_topology.end(), "network model, ranks"), 1);
  EXPECT_EQ(std::count(by_topology.begin(), by_topology.end(), "flow, 8"), 1);
  for (const auto& t : by_topology) EXPECT_EQ(t.find("ranks="), std::string::npos) << t;
}

// A diverged run: in the loss figures its curve ends in an 'x' at the divergence step
// and its legend entry says where; in step-time figures its point is an 'x', and a note
// says what an 'x' means.
TEST(SweepReport, DivergedRunsAreMarked) {
  const fs::path out = hand_sweep().parent_path() / "diverged";
  write_report({hand_sweep()}, out);
  for (const char* figure : {"loss_vs_time.svg", "loss_vs_bits.svg", "step_time_vs_step.svg"}) {
    const std::string svg = testing::read_file(out / figure);
    EXPECT_EQ(occurrences(svg, "class=\"diverged\""), 1U) << figure;
    std::string legend;
    for (const auto& t : svg_texts(svg)) legend += t + "\n";
    EXPECT_EQ(occurrences(legend, "ring, flow, 8 (diverged at step 3)\n"), 1U) << figure << legend;
    EXPECT_NE(svg.find("x: "), std::string::npos) << figure;
  }
  for (const char* figure : {"step_time_vs_topology.svg", "step_time_vs_ranks.svg", "step_time_vs_network_model.svg"}) {
    const std::string svg = testing::read_file(out / figure);
    EXPECT_EQ(occurrences(svg, "class=\"diverged\""), 1U) << figure;
    EXPECT_NE(svg.find("x: a run that diverged"), std::string::npos) << figure;
  }
  // The loss curve stops before step 3 (2.5e3, then null) and the 'x' ends it: the loss
  // axis stays on the other runs' scale (below 1).
  const std::string loss = testing::read_file(out / "loss_vs_time.svg");
  EXPECT_EQ(loss.find(">2500<"), std::string::npos);
  EXPECT_EQ(loss.find(">1000<"), std::string::npos);
}

TEST(SweepReport, NiceTicks) {
  const auto unit = nice_ticks(0, 1);
  ASSERT_EQ(unit.size(), 6U);
  EXPECT_NEAR(unit[3], 0.6, 1e-12);
  EXPECT_EQ(unit.back(), 1.0);
  EXPECT_EQ(nice_ticks(3, 97).front(), 0.0);
  EXPECT_EQ(nice_ticks(3, 97).back(), 100.0);
}

// ---------------------------------------------------------------------------------------
// Scenario JSON Schema

std::vector<fs::path> scenario_files() {
  std::vector<fs::path> files;
  for (const auto& e : fs::recursive_directory_iterator(fs::path(DTSIM_SOURCE_DIR) / "scenarios")) {
    const std::string name = e.path().filename().string();
    if (e.path().extension() != ".json" || name.ends_with(".result.json") || name.ends_with(".schema.json")) continue;
    // Sweep files, and the nccl model's example machines (NcclSystems.ExampleFilesRead reads those).
    if (e.path().parent_path().filename() == "sweeps" || e.path().parent_path().filename() == "systems") continue;
    files.push_back(e.path());
  }
  return files;
}

TEST(ScenarioSchema, EveryScenarioFileValidates) {
  const auto files = scenario_files();
  ASSERT_GE(files.size(), 10U);
  for (const auto& file : files) {
    const json doc = testing::read_json(file);
    const auto error = validate_scenario_schema(doc);
    EXPECT_FALSE(error) << file << ": " << *error;
    EXPECT_NO_THROW(runner::load_scenario(file)) << file;
  }
}

// Malformed documents: the schema and the loader both reject each one.
TEST(ScenarioSchema, MalformedScenariosAreRejectedByBoth) {
  const json base = tiny_base();
  auto with = [&](const std::string& pointer, json value) {
    json d = base;
    d[json::json_pointer(pointer)] = std::move(value);
    return d;
  };
  auto without = [&](const std::string& parent, const std::string& key) {
    json d = base;
    d[json::json_pointer(parent)].erase(key);
    return d;
  };
  const std::vector<std::pair<json, std::string>> cases{
      {with("/ranks", 0), "/ranks"},
      {with("/ranks", "4"), "/ranks"},
      {with("/steps", 1.5), "/steps"},
      {with("/colour", 1), "/colour"},
      {without("", "network"), "/network"},
      {with("/algorithm/lr", -0.1), "/algorithm/lr"},
      {with("/algorithm/momentum", 1.5), "/algorithm/momentum"},
      {with("/algorithm/name", "adam"), "/algorithm/name"},
      {with("/algorithm/variant", "both"), "/algorithm/variant"},
      {without("/algorithm", "variant"), "/algorithm/variant"},
      {with("/algorithm/local_steps", 4), "/algorithm/local_steps"},
      {with("/algorithm/compressor", json{{"kind", "top_k"}}), "/algorithm/compressor"},  // parallel_sgd decentralized accepts it
      {with("/algorithm/nesterov", true), "/algorithm/momentum"},  // the loader names /algorithm/nesterov
      {with("/workload/partition", "random"), "/workload/partition"},
      {with("/workload/batch_size", "half"), "/workload/batch_size"},
      {with("/workload/features", 0), "/workload/features"},
      {with("/topology/kind", "torus"), "/topology/dims"},
      {with("/topology/dims", json{2, 2}), "/topology/dims"},
      {with("/topology", json{{"kind", "fat_tree"}, {"k", 3}}), "/topology/k"},
      {with("/topology", json{{"kind", "hierarchical"}, {"gpus_per_node", 2}}), "/topology/intra_latency_us"},
      {with("/topology", json{{"kind", "edges"}, {"edges", json::array()}}), "/topology/edges"},
      {with("/network/model", "magic"), "/network/model"},
      {with("/network/bandwidth_GBps", 0), "/network/bandwidth_GBps"},
      {with("/network/latency_us", -1), "/network/latency_us"},
      {with("/network/algorithms", json{{"all_reduce", "butterfly"}}), "/network/algorithms/all_reduce"},
      {with("/network/failures", json{{{"time_s", 1}, {"a", 0}}}), "/network/failures/0/b"},
      {with("/compute", json{{"timing", "wall"}}), "/compute/timing"},
      {with("/compute", json{{"gflops", 0}}), "/compute/gflops"},
      {with("/compute", json{{"stragglers", json{{{"rank", 1}}}}}), "/compute/stragglers/0/slowdown"},
      // Fields a choice's value turns off, as the generator recorded them from the parse.
      {with("/algorithm", json{{"name", "distopt"}, {"lr", 0.1}, {"variant", "sync"}, {"clipping", true}}),
       "/algorithm/clipping"},
      {with("/workload", json{{"type", "logistic_regression"}, {"data", "synthetic"}, {"libsvm_file", "x.libsvm"}}),
       "/workload/libsvm_file"},
      {with("/network", json{{"model", "nccl"}, {"system", "h100_8x"}, {"latency_us", 1}}), "/network/latency_us"},
      // ... also where the recording parse stops at the value's placeholder file: each
      // data source owns its fields.
      {with("/workload", json{{"type", "mlp"}, {"data", "cifar10"}, {"data_dir", "cifar"}, {"image_size", 32}}),
       "/workload/image_size"},
      {with("/workload", json{{"type", "logistic_regression"}, {"data", "libsvm"}, {"libsvm_file", "x.libsvm"}, {"samples", 64}}),
       "/workload/samples"},
      // ... also where the choice is left to a default that does not read them.
      {with("/algorithm", json{{"name", "ddp"}, {"lr", 0.1}, {"matrix_approximation_rank", 2}}),
       "/algorithm/matrix_approximation_rank"},
      {with("/algorithm", json{{"name", "parallel_sgd"}, {"variant", "centralized"}, {"lr", 0.1}, {"start_powerSGD_iter", 2}}),
       "/algorithm/start_powerSGD_iter"},
  };
  for (const auto& [doc, path] : cases) {
    const auto schema_error = validate_scenario_schema(doc);
    bool loader_rejects = false;
    try {
      runner::parse_scenario(doc);
    } catch (const runner::ScenarioError&) {
      loader_rejects = true;
    }
    if (path == "/algorithm/compressor") {  // a valid case among the invalid: both accept
      EXPECT_FALSE(schema_error) << *schema_error;
      EXPECT_FALSE(loader_rejects);
      continue;
    }
    ASSERT_TRUE(schema_error) << "schema accepts a document with a bad " << path;
    EXPECT_EQ(schema_error->rfind(path, 0), 0U) << *schema_error;
    EXPECT_TRUE(loader_rejects) << "loader accepts a document with a bad " << path;
  }
}

TEST(ScenarioSchema, ValidatorKeywords) {
  const json schema = json::parse(R"({
    "$defs": {"positive": {"type": "number", "exclusiveMinimum": 0}},
    "type": "object",
    "required": ["a"],
    "additionalProperties": false,
    "properties": {
      "a": {"$ref": "#/$defs/positive"},
      "b": {"anyOf": [{"type": "integer"}, {"const": "full"}]},
      "c": {"type": "array", "items": {"enum": ["x", "y"]}, "minItems": 1}
    },
    "if": {"properties": {"b": {"const": "full"}}, "required": ["b"]},
    "then": {"properties": {"c": false}}
  })");
  EXPECT_FALSE(validate_schema(schema, json{{"a", 1}, {"b", 3}, {"c", {"x"}}}));
  EXPECT_EQ(validate_schema(schema, json{{"b", 3}}), "/a: missing required field");
  EXPECT_EQ(validate_schema(schema, json{{"a", 0}}), "/a: expected a number > 0, got 0");
  EXPECT_EQ(validate_schema(schema, json{{"a", 1}, {"d", 0}}), "/d: unknown field (expected one of: a, b, c)");
  EXPECT_EQ(validate_schema(schema, json{{"a", 1}, {"c", {"x", "z"}}}), "/c/1: expected one of x, y, got \"z\"");
  EXPECT_EQ(validate_schema(schema, json{{"a", 1}, {"c", json::array()}}), "/c: expected at least 1 items, got 0");
  EXPECT_EQ(validate_schema(schema, json{{"a", 1}, {"b", "full"}, {"c", {"x"}}}), "/c: not allowed here");
  EXPECT_EQ(validate_schema(schema, json{{"a", 1}, {"b", 1.5}})->rfind("/b: matches none of the allowed forms", 0), 0U);
  EXPECT_EQ(validate_schema(schema, json::array()), "/: expected object, got array []");
  EXPECT_THROW(validate_schema(json{{"pattern", "x"}}, json("x")), std::invalid_argument);
}

// ---------------------------------------------------------------------------------------
// CI regression checks

json bench_run(double engine_ratio, double topk_memcpy, double allreduce_us, double heap_ms) {
  return {{"context", {{"num_cpus", 2}}},
          {"benchmarks",
           {{{"name", "BM_Engine/1024"}, {"run_name", "BM_Engine/1024"}, {"run_type", "iteration"}, {"cpu_time", 10.0},
             {"time_unit", "ms"}, {"vs_baseline", engine_ratio}},
            {{"name", "BM_BaselineHeap/1024"}, {"run_type", "iteration"}, {"cpu_time", heap_ms}, {"time_unit", "ms"}},
            {{"name", "BM_EmulatedAllReduce/8/4096"}, {"run_type", "iteration"}, {"cpu_time", allreduce_us},
             {"time_unit", "us"}},
            {{"name", "BM_TopK/262144/1"}, {"run_type", "iteration"}, {"cpu_time", 1.0}, {"time_unit", "ms"},
             {"x_memcpy", topk_memcpy}}}}};
}

const json kBenchBaseline = {
    {"margin", 0.25},
    {"benchmarks",
     {{{"name", "BM_Engine/1024"}, {"counter", "vs_baseline"}, {"ratio", 1.0}},
      {{"name", "BM_EmulatedAllReduce/8/4096"}, {"reference", "BM_BaselineHeap/1024"}, {"ratio", 100.0}},
      {{"name", "BM_TopK/262144/1"}, {"counter", "x_memcpy"}, {"ratio", 0.5}}}}};

TEST(Regress, BenchmarkRatiosWithinMarginPass) {
  // A machine twice as slow: every time doubles, every ratio stays.
  const auto slow = check_benchmarks(kBenchBaseline, {bench_run(0.9, 0.45, 20.0, 2.0)});
  EXPECT_TRUE(slow.ok) << slow.table;
  EXPECT_TRUE(check_benchmarks(kBenchBaseline, {bench_run(1.0, 0.5, 10.0, 1.0)}).ok);
  // Refreshing takes the measured ratios.
  const auto fresh = refresh_benchmarks(kBenchBaseline, {bench_run(1.2, 0.6, 10.0, 2.0)});
  EXPECT_DOUBLE_EQ(fresh["benchmarks"][1]["ratio"].get<double>(), 200.0);
  EXPECT_EQ(fresh["benchmarks"][0]["ratio"], 1.2);
}

TEST(Regress, BenchmarkRatioDropFails) {
  // The all-reduce got 40% slower against the heap baseline of the same run.
  const auto out = check_benchmarks(kBenchBaseline, {bench_run(1.0, 0.5, 14.0, 1.0)});
  EXPECT_FALSE(out.ok);
  ASSERT_EQ(out.failures.size(), 1U);
  EXPECT_EQ(out.failures[0].rfind("BM_EmulatedAllReduce/8/4096: time vs BM_BaselineHeap/1024 ratio 71.43", 0), 0U)
      << out.failures[0];
  EXPECT_NE(out.table.find("| BM_EmulatedAllReduce/8/4096 | time vs BM_BaselineHeap/1024 | 100 | 71.43 | -28.6% | **SLOWER** |"),
            std::string::npos)
      << out.table;
  // An entry's own margin overrides the file's.
  json lenient = kBenchBaseline;
  lenient["benchmarks"][1]["margin"] = 0.5;
  EXPECT_TRUE(check_benchmarks(lenient, {bench_run(1.0, 0.5, 14.0, 1.0)}).ok);
  // A counter ratio drop, and a benchmark missing from the run.
  EXPECT_FALSE(check_benchmarks(kBenchBaseline, {bench_run(1.0, 0.3, 10.0, 1.0)}).ok);
  json partial = bench_run(1.0, 0.5, 10.0, 1.0);
  partial["benchmarks"].erase(3);
  const auto missing = check_benchmarks(kBenchBaseline, {partial});
  EXPECT_FALSE(missing.ok);
  EXPECT_EQ(missing.failures[0], "BM_TopK/262144/1: missing from the run");
}

// The committed simulated baseline matches this build exactly; the same baseline with a
// scenario whose bandwidth was changed fails, naming the figures that moved.
TEST(Regress, SimulatedFiguresMatchTheCommittedBaseline) {
  const fs::path baseline_file = fs::path(DTSIM_SOURCE_DIR) / "bench" / "baselines" / "simulated.json";
  const json baseline = testing::read_json(baseline_file);
  const auto out = check_simulated(baseline, baseline_file.parent_path());
  EXPECT_TRUE(out.ok) << out.table;

  const auto dir = testing::fresh_dir("regress");
  json changed = baseline;
  const fs::path first = baseline_file.parent_path() / baseline["scenarios"][0]["file"].get<std::string>();
  json scenario = testing::read_json(first);
  scenario["network"]["bandwidth_GBps"] = scenario["network"]["bandwidth_GBps"].get<double>() * 1.01;
  testing::write_file(dir / "changed.json", scenario.dump());
  changed["scenarios"] = {baseline["scenarios"][0]};
  changed["scenarios"][0]["file"] = "changed.json";
  const auto bad = check_simulated(changed, dir);
  EXPECT_FALSE(bad.ok);
  ASSERT_FALSE(bad.failures.empty());
  EXPECT_NE(bad.failures[0].find("changed.json: step_mean_s is"), std::string::npos) << bad.failures[0];
  EXPECT_NE(bad.table.find("**CHANGED**"), std::string::npos);
}

// The two kinds of figure (sweep/regress.hpp): an exact one fails on its last bit, a
// floating-point one passes within its tolerance (the entry's over the file's) and fails
// beyond it.
TEST(Regress, ExactFiguresFailOnTheLastBitFloatFiguresWithinTheirTolerance) {
  const fs::path baseline_file = fs::path(DTSIM_SOURCE_DIR) / "bench" / "baselines" / "simulated.json";
  const json committed = testing::read_json(baseline_file);
  const fs::path dir = baseline_file.parent_path();
  json one = committed;
  one["scenarios"] = {committed["scenarios"][0]};
  one["float_tolerance"] = 1e-4;
  // This machine's own figures, so that only the edits below differ.
  json base = refresh_simulated(one, dir);
  ASSERT_TRUE(check_simulated(base, dir).ok);

  json step = base;
  const double t = step["scenarios"][0]["step_mean_s"].get<double>();
  step["scenarios"][0]["step_mean_s"] = std::nextafter(t, 1.0);
  const auto step_out = check_simulated(step, dir);
  EXPECT_FALSE(step_out.ok);
  ASSERT_EQ(step_out.failures.size(), 1U);
  EXPECT_NE(step_out.failures[0].find("step_mean_s is"), std::string::npos);
  EXPECT_NE(step_out.failures[0].find("an exact figure"), std::string::npos) << step_out.failures[0];

  const double loss = base["scenarios"][0]["final_loss"].get<double>();
  json near = base;
  near["scenarios"][0]["final_loss"] = loss * (1 + 0.5e-4);
  EXPECT_TRUE(check_simulated(near, dir).ok);
  json far = base;
  far["scenarios"][0]["final_loss"] = loss * (1 + 2e-4);
  const auto far_out = check_simulated(far, dir);
  EXPECT_FALSE(far_out.ok);
  ASSERT_EQ(far_out.failures.size(), 1U);
  EXPECT_NE(far_out.failures[0].find("final_loss is"), std::string::npos) << far_out.failures[0];
  // The entry's own tolerance overrides the file's.
  far["scenarios"][0]["final_loss_tolerance"] = 1e-3;
  EXPECT_TRUE(check_simulated(far, dir).ok);
  // The old single tolerance is refused by name rather than silently ignored.
  json old = base;
  old["tolerance"] = 1e-9;
  EXPECT_THROW(check_simulated(old, dir), SweepError);
}

}  // namespace
}  // namespace dtsim::sweep
