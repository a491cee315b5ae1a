// dtsim: run a scenario emulated (`dtsim run`) or as one rank of a live job (`dtsim live`).
//
// Exit codes: 0 success; 2 bad input (scenario, flags, environment), with one line
// naming what is wrong; 1 a failure during the run (e.g. a peer that died).
#include <CLI/CLI.hpp>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli/calibrate_command.hpp"
#include "cli/collective_command.hpp"
#include "cli/init_params_command.hpp"
#include "cli/list_command.hpp"
#include "cli/schema_command.hpp"
#include "cli/exit_codes.hpp"
#include "cli/sweep_command.hpp"
#include "comm/live_backend.hpp"
#include "config/closest_name.hpp"
#include "runner/progress.hpp"
#include "runner/report.hpp"
#include "runner/resource_estimate.hpp"
#include "runner/run.hpp"
#include "runner/scenario.hpp"
#include "runner/version.hpp"

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

// For a flag the command does not have: the one it has that is closest, as
// " (did you mean `--jobs`?)", or "".
std::string unknown_flag_hint(const CLI::App& command, int argc, char** argv) {
  std::vector<std::string> names;
  for (const auto* option : command.get_options()) {
    for (const auto& l : option->get_lnames()) names.push_back("--" + l);
    for (const auto& s : option->get_snames()) names.push_back("-" + s);
  }
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.size() < 2 || arg[0] != '-' || (arg[1] >= '0' && arg[1] <= '9') || arg[1] == '.') continue;  // -1.5
    arg = arg.substr(0, arg.find('='));
    if (std::find(names.begin(), names.end(), arg) != names.end()) continue;
    if (auto hint = config::did_you_mean(arg, names); !hint.empty()) return hint;
  }
  return {};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"dtsim: discrete-event simulator and benchmarking harness for communication-efficient distributed "
               "training"};
  app.require_subcommand(1);
  app.set_version_flag("--version", fmt::format("dtsim {}", runner::kDtsimVersion));
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
      "live", "Run a scenario as one rank of a live job over a live backend (--backend); the rank, world size and rendezvous come from "
              "RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT (or OMPI_COMM_WORLD_* / SLURM_*); DTSIM_TIMEOUT_S bounds "
              "the wait for a peer (default 60). Rank 0 prints the table and writes <scenario>.live.result.json");
  add_common(live, args);
  live->add_option("--backend", options.live_backend, comm::live_backends_help())
      ->check(CLI::IsMember(comm::live_backend_names()))
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

  dtsim::cli::CollectiveCommand collective_command(app);  // collective
  dtsim::cli::SweepCommands sweep_commands(app);  // sweep, merge, report
  dtsim::cli::CalibrateCommands calibrate_commands(app);  // calibrate, compare
  dtsim::cli::ListCommand list_command(app);  // list
  dtsim::cli::SchemaCommand schema_command(app);  // schema
  dtsim::cli::InitParamsCommand init_params_command(app);  // init-params
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version end here with 0; a bad flag, a missing argument or an unknown
    // command is bad input like any other: one line, exit 2 (not CLI11's own codes).
    if (e.get_exit_code() == 0) return app.exit(e);
    const auto commands = app.get_subcommands();
    if (commands.empty() && argc > 1 && argv[1][0] != '-') {
      std::vector<std::string> names;
      for (const auto* c : app.get_subcommands([](CLI::App*) { return true; })) names.push_back(c->get_name());
      fmt::print(stderr, "dtsim: error: unknown command '{}'{} (expected one of {})\n",
                 dtsim::config::one_line(argv[1]), dtsim::config::did_you_mean(argv[1], names), fmt::join(names, ", "));
      return 2;
    }
    const std::string hint = dynamic_cast<const CLI::ExtrasError*>(&e) && !commands.empty()
                                 ? unknown_flag_hint(*commands.back(), argc, argv)
                                 : std::string();
    fmt::print(stderr, "dtsim: error: {}{} (see dtsim {}--help)\n", dtsim::config::one_line(e.what()), hint,
               commands.empty() ? std::string() : commands.back()->get_name() + " ");
    return 2;
  }

  if (auto rc = sweep_commands.run()) return *rc;
  if (auto rc = calibrate_commands.run()) return *rc;
  if (auto rc = list_command.run()) return *rc;
  if (auto rc = schema_command.run()) return *rc;
  if (auto rc = init_params_command.run()) return *rc;
  if (!args.dump_params.empty()) options.dump_params_prefix = args.dump_params;
  if (!args.trace.empty()) options.trace_file = args.trace;
  if (!args.record_trace.empty()) options.record_trace_dir = args.record_trace;
  if (auto rc = collective_command.run()) return *rc;

  return cli::exit_code_of([&] {
    try {
      auto scenario = runner::load_scenario(args.scenario);
      if (args.timing_only) scenario.timing_only = true;
      // A progress line on a terminal only (runner/progress.hpp): files, pipes and --quiet
      // see nothing of it. Declared here, so that an error unwinding past it erases it first.
      std::optional<runner::ProgressLine> progress;
      if (!args.quiet && ::isatty(STDERR_FILENO) == 1) {
        progress.emplace(stderr);
        options.progress = [&progress](const runner::RunProgress& p) { progress->update(p); };
      }
      if (run->parsed()) {
        runner::check_resources(scenario);  // a refusal is the one line, without the note
        if (const auto note = runner::long_run_note(scenario)) fmt::print(stderr, "dtsim: {}\n", *note);
        const auto result = runner::run_emulated(scenario, options);
        if (progress) progress->clear();
        return finish(result, args, ".result.json", true);
      }
      if (replay->parsed()) {
        auto result = runner::replay_traces(scenario, runner::read_traces(args.traces, scenario.ranks), options);
        result.replayed_from = args.traces;
        if (progress) progress->clear();
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
      if (progress) progress->clear();
      if (env.rank == 0) return finish(result, args, ".live.result.json", true);
      return 0;
    } catch (const runner::ScenarioError& e) {  // bad input, named with its file
      throw config::InputError(fmt::format("{}: {}", args.scenario, e.what()));
    }
  });
}
