// `dtsim calibrate` and `dtsim compare`: registered on the app before parsing; run()
// executes whichever was parsed and returns its exit code (nullopt: neither was).
// Both run as one rank of a live job (the same variables as `dtsim live`).
#pragma once

#include <optional>
#include <string>

#include <CLI/CLI.hpp>

namespace dtsim::cli {

class CalibrateCommands {
 public:
  explicit CalibrateCommands(CLI::App& app);
  std::optional<int> run() const;

 private:
  int run_calibrate() const;
  int run_compare() const;

  CLI::App* calibrate_ = nullptr;
  CLI::App* compare_ = nullptr;
  std::string out_ = "model.json", backend_ = "gloo", min_ = "8", max_ = "32M", scenario_, model_, out_dir_;
  std::string sweep_min_ = "1K", sweep_max_ = "64M";
  double factor_ = 4.0;
  int warmup_ = 2, iters_ = 5;
  bool quiet_ = false;
};

}  // namespace dtsim::cli
