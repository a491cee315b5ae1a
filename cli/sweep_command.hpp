// `dtsim sweep`, `dtsim merge` and `dtsim report`: registered on the app before parsing;
// run() executes whichever was parsed and returns its exit code (nullopt: none was).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace dtsim::cli {

class SweepCommands {
 public:
  explicit SweepCommands(CLI::App& app);
  std::optional<int> run() const;

 private:
  int run_sweep() const;
  int run_merge() const;
  int run_report() const;

  CLI::App* sweep_ = nullptr;
  CLI::App* merge_ = nullptr;
  CLI::App* report_ = nullptr;
  std::string file_, out_, shard_;
  int jobs_ = 0;
  double point_memory_gb_ = 0.0;
  double target_loss_ = 0.0;
  double target_accuracy_ = 0.0;
  bool has_target_ = false, quiet_ = false;
  std::vector<std::string> inputs_;
};

}  // namespace dtsim::cli
