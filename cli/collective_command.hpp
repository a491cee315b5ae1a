// `dtsim collective`: registered on the app before parsing; sweep() turns the parsed
// flags into a runner::CollectiveSweep, checking every flag (a bad one throws
// config::InputError, one line starting with the flag's name: "--topology: ...");
// run() executes it when the command was parsed and returns its exit code (nullopt: it
// was not). With --against FILE (nccl-tests' output) the operation, ranks, GPUs per thread
// and sizes are the measured run's, and run() prints the model beside each measured size
// (runner/measured_comparison.hpp). tests/fuzz/ feeds sweep() mutated command lines.
#pragma once

#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "network_models/nccl_tests_output.hpp"
#include "runner/collective_table.hpp"

namespace dtsim::cli {

class CollectiveCommand {
 public:
  explicit CollectiveCommand(CLI::App& app);
  bool parsed() const { return cmd_->parsed(); }
  runner::CollectiveSweep sweep() const;
  std::optional<int> run() const;

 private:
  // --against's run, read and parsed (InputError naming the flag and the line otherwise).
  std::optional<net::NcclTestsRun> measured_run() const;
  runner::CollectiveSweep sweep(const net::NcclTestsRun* against) const;
  runner::CollectiveSweep machine_sweep(runner::CollectiveSweep sweep, int ranks, const net::NcclTestsRun* against) const;
  void reconcile_nccl_release(const net::NcclTestsRun& against, net::nccl::System& system) const;
  std::string against_setting(bool algo, const std::string& flag_value, const std::string& printed, int line) const;
  net::nccl::NcclEnv nccl_env(const net::NcclTestsRun* against) const;
  CLI::App* cmd_ = nullptr;
  std::string op_ = "allreduce", algo_ = "auto", topology_ = "ring", model_ = "flow", min_ = "8", max_ = "128M", json_;
  double factor_ = 2.0, latency_us_ = 5.0, bandwidth_GBps_ = 12.5;
  std::string step_, against_, svg_;
  int ranks_ = 0, root_ = 0;
  // The nccl model: --system NAME|FILE.json, --nodes, --nccl-algo, --nccl-proto, --nccl-version,
  // the channel bounds (--nccl-min-nchannels ...), -g.
  std::string system_, nccl_algo_, nccl_proto_, nccl_version_;
  net::nccl::NcclEnv env_;
  int nodes_ = 0, gpus_per_thread_ = 1;
};

}  // namespace dtsim::cli
