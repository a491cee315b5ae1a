// dtsim: run a scenario emulated (`dtsim run`) or as one rank of a live job (`dtsim live`).
//
// Exit codes: 0 success; 2 bad input (scenario, flags, environment), with one line
// naming what is wrong; 1 a failure during the run (e.g. a peer that died).
#include <CLI/CLI.hpp>

#include <cstdio>
#include <filesystem>
#include <iostream>

#include <fmt/format.h>

#include "runner/report.hpp"
#include "runner/run.hpp"
#include "runner/scenario.hpp"

namespace {

namespace fs = std::filesystem;
using namespace dtsim;

struct Args {
  std::string scenario;
  std::string out_dir;
  std::string dump_params;
  bool quiet = false;
};

void add_common(CLI::App* cmd, Args& args) {
  cmd->add_option("scenario", args.scenario, "Scenario JSON file (see scenarios/README.md)")->required();
  cmd->add_option("--out", args.out_dir, "Directory for the result JSON (default: next to the scenario)");
  cmd->add_option("--dump-params", args.dump_params,
                  "Write each rank's final parameters to PREFIX.rank<r>.json");
  cmd->add_flag("--quiet", args.quiet, "Do not print the table");
}

fs::path result_path(const Args& args, const std::string& suffix) {
  const fs::path scenario(args.scenario);
  const fs::path dir = args.out_dir.empty() ? scenario.parent_path() : fs::path(args.out_dir);
  if (!dir.empty()) fs::create_directories(dir);
  return dir / (scenario.stem().string() + suffix);
}

int finish(const runner::RunResult& result, const Args& args, const std::string& suffix, bool print) {
  const auto file = result_path(args, suffix);
  runner::write_json(result, file);
  if (print && !args.quiet) {
    std::cout << runner::format_table(result);
    std::cout << "result: " << file.string() << "\n";
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"dtsim: discrete-event simulator and benchmarking harness for communication-efficient distributed "
               "training"};
  app.require_subcommand(1);
  Args args;
  auto* run = app.add_subcommand("run", "Run a scenario emulated: all ranks in this process, time from the network "
                                        "model; prints the latency/bits table and writes <scenario>.result.json");
  add_common(run, args);
  auto* live = app.add_subcommand(
      "live", "Run a scenario as one rank of a live job over Gloo; the rank, world size and rendezvous come from "
              "RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT (or OMPI_COMM_WORLD_* / SLURM_*); DTSIM_TIMEOUT_S bounds "
              "the wait for a peer (default 60). Rank 0 prints the table and writes <scenario>.live.result.json");
  add_common(live, args);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }

  runner::RunOptions options;
  if (!args.dump_params.empty()) options.dump_params_prefix = args.dump_params;
  try {
    const auto scenario = runner::load_scenario(args.scenario);
    if (run->parsed()) return finish(runner::run_emulated(scenario, options), args, ".result.json", true);
    const auto env = comm::LiveEnv::from_environment();
    const auto result = runner::run_live(scenario, env, options);
    if (env.rank == 0) return finish(result, args, ".live.result.json", true);
    return 0;
  } catch (const runner::ScenarioError& e) {
    fmt::print(stderr, "dtsim: error: {}: {}\n", args.scenario, e.what());
    return 2;
  } catch (const std::invalid_argument& e) {
    fmt::print(stderr, "dtsim: error: {}\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::string what = e.what();
    if (auto nl = what.find('\n'); nl != std::string::npos) what.resize(nl);  // c10 appends backtraces
    fmt::print(stderr, "dtsim: run failed: {}\n", what);
    return 1;
  }
}
