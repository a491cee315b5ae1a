// Malformed scenarios: the parser names the JSON path and what it expected, and the
// dtsim binary turns that into one line on stderr and exit status 2.
#include <gtest/gtest.h>

#include <algorithm>

#include <fmt/format.h>

#include "algorithms/registry.hpp"
#include "config/closest_name.hpp"
#include "runner/scenario.hpp"
#include "runner/version.hpp"
#include "workloads/logistic_regression.hpp"
#include "test_util.hpp"

namespace dtsim::runner {
namespace {

using nlohmann::json;

json valid() {
  return json::parse(R"({
    "name": "t", "ranks": 4, "steps": 3, "seed": 1,
    "workload": {"kind": "logistic_regression", "samples": 64, "features": 4, "batch_size": 8},
    "algorithm": {"name": "parallel_sgd", "variant": "centralized", "lr": 0.1},
    "topology": {"kind": "ring"},
    "network": {"model": "alpha_beta", "latency_us": 1, "bandwidth_GBps": 10}
  })");
}

std::string error_of(const json& doc) {
  try {
    parse_scenario(doc);
  } catch (const ScenarioError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Scenario, ValidScenarioParsesWithDefaults) {
  auto s = parse_scenario(valid());
  EXPECT_EQ(s.ranks, 4);
  EXPECT_EQ(s.algorithm.variant, "centralized");
  EXPECT_DOUBLE_EQ(s.network.nominal.latency_s, 1e-6);
  EXPECT_DOUBLE_EQ(s.network.nominal.bandwidth_bytes_per_s, 1e10);
  EXPECT_EQ(s.compute.kind, comm::ComputeTiming::Kind::CostModel);  // the deterministic default
  EXPECT_EQ(workloads::settings_of<workloads::LogisticRegressionSpec>(s.workload).partition, "iid");
  // The resolved form parses back to the same scenario.
  EXPECT_EQ(parse_scenario(s.to_json()).to_json(), s.to_json());
}

// The clock's tick: a power of two at or below what the scenario asks (sim/time_grid.hpp),
// echoed as the tick used; 0 is plain doubles.
TEST(Scenario, TimeResolutionIsAPowerOfTwo) {
  auto doc = valid();
  EXPECT_EQ(parse_scenario(doc).time_resolution_s, 0x1p-47);  // the default, 1e-14
  EXPECT_EQ(parse_scenario(doc).time_grid().horizon(), 64.0);
  doc["time_resolution_s"] = 1e-12;
  const auto ps = parse_scenario(doc);
  EXPECT_EQ(ps.time_resolution_s, 0x1p-40);
  EXPECT_EQ(ps.to_json()["time_resolution_s"], 0x1p-40);
  EXPECT_EQ(parse_scenario(ps.to_json()).time_resolution_s, 0x1p-40);
  doc["time_resolution_s"] = 0;
  EXPECT_FALSE(parse_scenario(doc).time_grid().on());
}

struct BadCase {
  const char* what;
  std::function<void(json&)> edit;
  std::string message;
};

std::string algorithm_list() {
  std::string list;
  for (const auto& name : algorithms::algorithm_names()) list += (list.empty() ? "" : ", ") + name;
  return list;
}

// Each case breaks one thing; the message starts with its JSON path.
const std::vector<BadCase>& bad_cases() {
  static const std::vector<BadCase> cases{
      {"wrong type", [](json& d) { d["algorithm"]["lr"] = "fast"; },
       "/algorithm/lr: expected a number, got string \"fast\""},
      {"missing field", [](json& d) { d.erase("steps"); }, "/steps: missing required field (expected an integer)"},
      {"unknown algorithm", [](json& d) { d["algorithm"]["name"] = "adam"; },
       "/algorithm/name: expected one of " + algorithm_list() + ", got \"adam\""},
      {"zero ranks", [](json& d) { d["ranks"] = 0; },
       "/ranks: expected an integer >= 1 and <= 1048576, got 0"},
      {"negative ranks", [](json& d) { d["ranks"] = -3; },
       "/ranks: expected an integer >= 1 and <= 1048576, got -3"},
      {"unknown topology", [](json& d) { d["topology"]["kind"] = "moebius"; },
       "/topology/kind: expected one of ring, complete, torus, hypercube, exponential, star, fat_tree, "
       "hierarchical, edges, got \"moebius\""},
      {"torus dims", [](json& d) { d["topology"] = {{"kind", "torus"}, {"dims", {2, 3}}}; },
       "/topology/dims: expected dimensions whose product is ranks (4), got 2x3"},
      {"fat-tree too small", [](json& d) { d["ranks"] = 20; d["workload"]["samples"] = 64; d["topology"] = {{"kind", "fat_tree"}, {"k", 4}}; },
       "/topology: fat_tree: a 4-ary fat-tree holds at most 16 ranks, got 20"},
      {"failure of a missing link", [](json& d) { d["network"]["failures"] = {{{"time_s", 1}, {"a", 0}, {"b", 2}}}; },
       "/network/failures/0: expected a link of the topology, but there is none between nodes 0 and 2"},
      {"unknown network model", [](json& d) { d["network"]["model"] = "packet"; },
       "/network/model: expected one of analytical, alpha_beta, flow, nccl, got \"packet\""},
      {"algorithm for the wrong collective", [](json& d) { d["network"]["algorithms"] = {{"broadcast", "ring"}}; },
       "/network/algorithms/broadcast: expected one of auto, binomial, got \"ring\""},
      {"straggler out of range", [](json& d) { d["compute"] = {{"stragglers", {{{"rank", 9}, {"slowdown", 2}}}}}; },
       "/compute/stragglers/0/rank: expected an integer >= 0 and <= 3, got 9"},
      {"unknown key", [](json& d) { d["network"]["latency_ms"] = 1; },
       "/network/latency_ms: unknown field (did you mean `latency_us`?)"},
      {"unknown key close to no field", [](json& d) { d["network"]["colour"] = 1; }, "/network/colour: unknown field"},
      // A misspelt required field is named as what was typed, before the field is missing.
      {"misspelt required field", [](json& d) { d["network"].erase("bandwidth_GBps"); d["network"]["bandwith_GBps"] = 1; },
       "/network/bandwith_GBps: unknown field (did you mean `bandwidth_GBps`?)"},
      {"misspelt required top-level field", [](json& d) { d.erase("steps"); d["step"] = 100; },
       "/step: unknown field (did you mean `steps`?)"},
      {"unknown key beside a missing field", [](json& d) { d["network"].erase("bandwidth_GBps"); d["network"]["bw"] = 1; },
       "/network/bw: unknown field"},
      {"misspelt name", [](json& d) { d["network"]["model"] = "flwo"; },
       "/network/model: expected one of analytical, alpha_beta, flow, nccl, got \"flwo\" (did you mean `flow`?)"},
      {"misspelt field of the algorithm", [](json& d) { d["algorithm"]["momentun"] = 0.9; },
       "/algorithm/momentun: not a field of algorithm parallel_sgd (did you mean `momentum`?) (its fields: lr, "
       "momentum, dampening, weight_decay, nesterov, lr_schedule, variant, compressor, gradient_compression, "
       "matrix_approximation_rank, start_powerSGD_iter, min_compression_rate, use_error_feedback, warm_start, "
       "orthogonalization_epsilon, random_seed, optimizer)"},
      // A compressor the algorithm cannot use is refused at load, with its path.
      {"data-dependent compressor on gossip", [](json& d) {
         d["algorithm"]["variant"] = "decentralized";
         d["algorithm"]["compressor"] = {{"kind", "threshold"}, {"threshold", 0.01}}; },
       "/algorithm/compressor/kind: parallel_sgd decentralized gossips equal-size messages, and compressor threshold "
       "sends as many values as the data passes (use top_k or random_k for a fixed share)"},
      {"field of another algorithm", [](json& d) { d["algorithm"]["consensus_stepsize"] = 0.5; },
       "/algorithm/consensus_stepsize: not a field of algorithm parallel_sgd (its fields: lr, momentum, dampening, "
       "weight_decay, nesterov, lr_schedule, variant, compressor, gradient_compression, matrix_approximation_rank, "
       "start_powerSGD_iter, min_compression_rate, use_error_feedback, warm_start, orthogonalization_epsilon, "
       "random_seed, optimizer)"},
      {"fractional steps", [](json& d) { d["steps"] = 2.5; }, "/steps: expected an integer, got number 2.5"},
      {"zero bandwidth", [](json& d) { d["network"]["bandwidth_GBps"] = 0; },
       "/network/bandwidth_GBps: expected a number in [1e-09, 1000000], got 0"},
      {"bandwidth that makes every message take forever", [](json& d) { d["network"]["bandwidth_GBps"] = 1e-320; },
       "/network/bandwidth_GBps: expected a number in [1e-09, 1000000], got 1e-320"},
      {"latency beyond 1,000 s", [](json& d) { d["network"]["latency_us"] = 1e300; },
       "/network/latency_us: expected a number in [0, 1000000000], got 1e+300"},
      {"object expected", [](json& d) { d["workload"] = 3; }, "/workload: expected an object, got number 3"},
      {"missing variant", [](json& d) { d["algorithm"].erase("variant"); },
       "/algorithm/variant: missing required field (expected a string)"},
      {"fewer samples than ranks", [](json& d) { d["workload"]["samples"] = 2; },
       "/workload/samples: expected at least one sample per rank (4), got 2"},
      {"negative time resolution", [](json& d) { d["time_resolution_s"] = -1e-12; },
       "/time_resolution_s: expected a number in [0, 1e-09], got -1e-12"},
      {"time resolution that rounds latencies away", [](json& d) { d["time_resolution_s"] = 1e-6; },
       "/time_resolution_s: expected a number in [0, 1e-09], got 1e-06"},
      {"time resolution below doubles' reach", [](json& d) { d["time_resolution_s"] = 1e-20; },
       "/time_resolution_s: expected 0 (plain doubles) or a tick of 1e-18 to 1e-09 s, got 1e-20"},
  };
  return cases;
}

TEST(Scenario, ErrorsNameThePathAndTheExpectation) {
  for (const auto& c : bad_cases()) {
    json doc = valid();
    c.edit(doc);
    EXPECT_EQ(error_of(doc), c.message) << c.what;
  }
  EXPECT_EQ(error_of(json::array()), "/: expected an object, got array []");
}

// The binary: one line on stderr naming file, path and expectation; exit status 2;
// no result file written.
TEST(ScenarioCli, BinaryExitsNonZeroWithOneLine) {
  auto dir = testing::fresh_dir("scenario");
  for (const auto& c : bad_cases()) {
    json doc = valid();
    c.edit(doc);
    const auto file = dir / "bad.json";
    testing::write_file(file, doc.dump());
    auto r = testing::run_command(std::string(DTSIM_BINARY) + " run " + file.string());
    EXPECT_EQ(r.exit_code, 2) << c.what << ": " << r.output;
    EXPECT_EQ(r.output, "dtsim: error: " + file.string() + ": " + c.message + "\n") << c.what;
    EXPECT_FALSE(std::filesystem::exists(dir / "bad.result.json")) << c.what;
  }
  const auto broken = dir / "broken.json";
  testing::write_file(broken, "{\n  \"ranks\": 4,\n  \"steps\": ,\n}\n");
  auto r = testing::run_command(std::string(DTSIM_BINARY) + " run " + broken.string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.output, "dtsim: error: " + broken.string() + ": /: invalid JSON at line 3, column 12\n");
  r = testing::run_command(std::string(DTSIM_BINARY) + " run " + (dir / "missing.json").string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
}

// A command line CLI11 refuses (an unknown command or flag, a missing argument, a value
// outside a list) is bad input like a bad scenario: exit 2, one line naming it.
TEST(ScenarioCli, BadCommandLineExitsTwoWithOneLine) {
  const std::vector<std::pair<std::string, std::string>> cases{
      {"list foo", "dtsim: error: what: foo not in {"},
      {"run", "dtsim: error: scenario is required (see dtsim run --help)"},
      {"run --no-such-flag x.json", "dtsim: error: The following argument was not expected: --no-such-flag (see dtsim run --help)"},
      {"run --qiuet x.json", "dtsim: error: The following argument was not expected: --qiuet (did you mean `--quiet`?) "
                             "(see dtsim run --help)"},
      {"swep x.json", "dtsim: error: unknown command 'swep' (did you mean `sweep`?) (expected one of run, live, "},
      {"collective --algo rnig", "dtsim: error: --algo: unknown collective algorithm \"rnig\" (did you mean `ring`?)"},
      {"collective --model flwo", "dtsim: error: --model: expected one of analytical, alpha_beta, flow, nccl, got "
                                  "\"flwo\" (did you mean `flow`?)"},
      {"collective --topology ringg", "dtsim: error: --topology: topology \"ringg\" (did you mean `ring`?): expected "},
      {"frobnicate", "dtsim: error: unknown command 'frobnicate' (expected one of run, live, "}};
  for (const auto& [args, starts] : cases) {
    // Appended, not `std::string(DTSIM_BINARY) + " " + args`: GCC 12 at -O1 warns about
    // the temporaries of that expression here (a false -Warray-bounds).
    std::string command = DTSIM_BINARY;
    command.append(" ").append(args);
    const auto r = testing::run_command(command);
    EXPECT_EQ(r.exit_code, 2) << args << ": " << r.output;
    EXPECT_EQ(r.output.rfind(starts, 0), 0u) << args << ": " << r.output;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << args << ": " << r.output;
  }
}

// "Did you mean": the closest name within a third of its characters' edits.
TEST(ClosestName, EditsAndThreshold) {
  EXPECT_EQ(config::edit_distance("bandwith_GBps", "bandwidth_GBps"), 1U);
  EXPECT_EQ(config::edit_distance("momnetum", "momentum"), 1U);  // a swap is one edit
  EXPECT_EQ(config::edit_distance("FLOW", "flow"), 0U);
  EXPECT_EQ(config::edit_distance("", "abc"), 3U);
  EXPECT_EQ(config::edit_distance("kitten", "sitting"), 3U);
  const std::vector<std::string> names{"steps", "seed", "ranks", "eval_every"};
  EXPECT_EQ(config::closest_name("step", names), "steps");
  EXPECT_EQ(config::closest_name("eval_evry", names), "eval_every");
  EXPECT_EQ(config::closest_name("colour", names), std::nullopt);
  EXPECT_EQ(config::closest_name("steps", names), std::nullopt);  // not a typo
  EXPECT_EQ(config::did_you_mean("rank", names), " (did you mean `ranks`?)");
  EXPECT_EQ(config::did_you_mean("xyz", names), "");
}

TEST(ScenarioCli, VersionFlag) {
  const auto r = testing::run_command(std::string(DTSIM_BINARY) + " --version");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.output, fmt::format("dtsim {}\n", kDtsimVersion));
}

TEST(ScenarioCli, HelpOnEveryCommand) {
  for (const char* cmd : {"--help", "run --help", "live --help"}) {
    auto r = testing::run_command(std::string(DTSIM_BINARY) + " " + cmd);
    EXPECT_EQ(r.exit_code, 0) << cmd;
    EXPECT_NE(r.output.find("Usage"), std::string::npos) << cmd << ": " << r.output;
  }
}

}  // namespace
}  // namespace dtsim::runner
