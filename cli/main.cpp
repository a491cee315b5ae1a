// dtsim: run a scenario emulated (`dtsim run`) or as one rank of a live job (`dtsim live`).
//
// Exit codes: 0 success; 2 bad input (scenario, flags, environment), with one line
// naming what is wrong; 1 a failure during the run (e.g. a peer that died).
#include <CLI/CLI.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>

#include <fmt/format.h>

#include "cli/calibrate_command.hpp"
#include "cli/exit_codes.hpp"
#include "cli/sweep_command.hpp"
#include "runner/collective_table.hpp"
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
  std::string trace;
  std::string record_trace;  // run, live: where each rank writes its operation trace
  std::string traces;        // replay: where the traces are
  bool quiet = false;
  bool timing_only = false;
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
  runner::RunOptions options;
  auto* run = app.add_subcommand("run", "Run a scenario emulated: all ranks in this process, time from the network "
                                        "model; prints the latency/bits table and writes <scenario>.result.json");
  add_common(run, args);
  run->add_option("--trace", args.trace,
                  "Write the run's timeline (phases per rank, every message) as Chrome/Perfetto trace JSON "
                  "(open in ui.perfetto.dev)");
  run->add_flag("--timing-only", args.timing_only,
                "Run the kernels on rank 0 only and replay its operations on every rank with size-only tensors "
                "(the scenario's timing_only): times and bits for thousands of ranks, no loss");
  auto* live = app.add_subcommand(
      "live", "Run a scenario as one rank of a live job over Gloo; the rank, world size and rendezvous come from "
              "RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT (or OMPI_COMM_WORLD_* / SLURM_*); DTSIM_TIMEOUT_S bounds "
              "the wait for a peer (default 60). Rank 0 prints the table and writes <scenario>.live.result.json");
  add_common(live, args);
  live->add_option("--backend", options.live_backend, "gloo (CPU tensors) or nccl (CUDA tensors; a CUDA build)")
      ->check(CLI::IsMember({"gloo", "nccl"}))
      ->capture_default_str();
  for (auto* cmd : {run, live})
    cmd->add_option("--record-trace", args.record_trace,
                    "Also write each rank's operations, compute seconds and waits to DIR/rank<r>.trace, for "
                    "`dtsim replay`");
  auto* replay = app.add_subcommand(
      "replay", "Replay the traces of a recorded run (dtsim run/live --record-trace DIR) on SCENARIO's network: "
                "every rank's recorded operations and compute, the network's time; prints the table and writes "
                "<scenario>.replay.result.json. The scenario may change the network, not the ranks or the program");
  replay->add_option("scenario", args.scenario, "Scenario JSON file (its network times the replay)")->required();
  replay->add_option("--traces", args.traces, "Directory of rank<r>.trace files")->required();
  replay->add_option("--out", args.out_dir, "Directory for the result JSON (default: next to the scenario)");
  replay->add_option("--trace", args.trace, "Write the replay's timeline as Chrome/Perfetto trace JSON");
  replay->add_flag("--quiet", args.quiet, "Do not print the table");

  struct CollectiveArgs {
    std::string op = "allreduce", algo = "auto", topology = "ring", model = "flow", min = "8", max = "128M", json;
    double factor = 2.0, latency_us = 5.0, bandwidth_GBps = 12.5;
    std::string step;
    int ranks = 0, root = 0;
  } coll;
  auto* collective = app.add_subcommand(
      "collective", "Simulate one collective over a range of sizes and print the nccl-tests table (size, count, type, "
                    "redop, root, time, algbw, busbw) for the simulated network");
  collective->add_option("--op", coll.op, "allreduce, reducescatter, allgather or broadcast")->capture_default_str();
  collective->add_option("--algo", coll.algo, "auto, ring, halving_doubling, tree, direct, ps or binomial")
      ->capture_default_str();
  collective->add_option("-b,--minbytes", coll.min, "Smallest size (bytes; K, M, G suffixes)")->capture_default_str();
  collective->add_option("-e,--maxbytes", coll.max, "Largest size")->capture_default_str();
  collective->add_option("-f,--stepfactor", coll.factor, "Multiply the size by this between rows")->capture_default_str();
  collective->add_option("-i,--stepbytes", coll.step, "Add this many bytes between rows instead");
  collective->add_option("--topology", coll.topology,
                         "ring, complete, star, hypercube, exponential, torus:AxB[xC], fat_tree:K, hierarchical:G[:direct]")
      ->capture_default_str();
  collective->add_option("-n,--ranks", coll.ranks, "Rank count (default: the torus's size; required otherwise)");
  collective->add_option("--model", coll.model, "analytical, alpha_beta or flow")->capture_default_str();
  collective->add_option("--latency-us", coll.latency_us, "Per-link latency")->capture_default_str();
  collective->add_option("--bandwidth-GBps", coll.bandwidth_GBps, "Per-link bandwidth (1e9 bytes/s)")->capture_default_str();
  collective->add_option("-r,--root", coll.root, "Broadcast root")->capture_default_str();
  collective->add_option("--json", coll.json, "Also write the table as JSON to this file");

  dtsim::cli::SweepCommands sweep_commands(app);  // sweep, merge, report
  dtsim::cli::CalibrateCommands calibrate_commands(app);  // calibrate, compare
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }

  if (auto rc = sweep_commands.run()) return *rc;
  if (auto rc = calibrate_commands.run()) return *rc;
  if (!args.dump_params.empty()) options.dump_params_prefix = args.dump_params;
  if (!args.trace.empty()) options.trace_file = args.trace;
  if (!args.record_trace.empty()) options.record_trace_dir = args.record_trace;
  if (collective->parsed()) {
    return cli::exit_code_of([&] {
      runner::CollectiveSweep sweep;
      sweep.kind = runner::parse_collective(coll.op);
      sweep.algorithm = net::parse_algorithm(coll.algo);
      sweep.topology = net::parse_topology(coll.topology);
      sweep.ranks = coll.ranks;
      if (sweep.ranks == 0 && sweep.topology.kind == "torus") {
        sweep.ranks = 1;
        for (int d : sweep.topology.dims) sweep.ranks *= d;
      }
      if (sweep.ranks < 1) throw std::invalid_argument("--ranks: expected a rank count >= 1");
      if (coll.model != "analytical" && coll.model != "alpha_beta" && coll.model != "flow")
        throw std::invalid_argument(fmt::format("--model: expected analytical, alpha_beta or flow, got \"{}\"", coll.model));
      sweep.model = coll.model;
      sweep.link = {coll.latency_us * 1e-6, coll.bandwidth_GBps * 1e9};
      if (!(sweep.link.bandwidth_bytes_per_s > 0) || !(sweep.link.latency_s >= 0))
        throw std::invalid_argument("--latency-us must be >= 0 and --bandwidth-GBps > 0");
      sweep.min_bytes = runner::parse_size(coll.min);
      sweep.max_bytes = runner::parse_size(coll.max);
      sweep.factor = coll.factor;
      if (!coll.step.empty()) sweep.step_bytes = runner::parse_size(coll.step);
      sweep.root = coll.root;
      if (sweep.root < 0 || sweep.root >= sweep.ranks) throw std::invalid_argument("--root: expected a rank of the job");
      const auto rows = runner::run_collective_sweep(sweep);
      std::cout << runner::format_collective_table(sweep, rows);
      if (!coll.json.empty()) {
        std::ofstream out(coll.json);
        out << runner::collective_table_json(sweep, rows).dump(2) << '\n';
        if (!out) throw std::runtime_error("cannot write " + coll.json);
      }
      return 0;
    });
  }

  return cli::exit_code_of([&] {
    try {
      auto scenario = runner::load_scenario(args.scenario);
      if (args.timing_only) scenario.timing_only = true;
      if (run->parsed()) return finish(runner::run_emulated(scenario, options), args, ".result.json", true);
      if (replay->parsed()) {
        auto result = runner::replay_traces(scenario, runner::read_traces(args.traces, scenario.ranks), options);
        result.replayed_from = args.traces;
        return finish(result, args, ".replay.result.json", true);
      }
      const auto env = comm::LiveEnv::from_environment();
      const auto result = [&] {
        try {
          return runner::run_live(scenario, env, options);
        } catch (const runner::LiveRunFailed& e) {  // keep what was measured: <scenario>.live.rank<r>.partial.json
          std::ofstream(result_path(args, fmt::format(".live.rank{}.partial.json", env.rank))) << e.partial().dump(1)
                                                                                              << '\n';
          throw;
        }
      }();
      if (env.rank == 0) return finish(result, args, ".live.result.json", true);
      return 0;
    } catch (const runner::ScenarioError& e) {  // bad input, named with its file
      throw std::invalid_argument(fmt::format("{}: {}", args.scenario, e.what()));
    }
  });
}
