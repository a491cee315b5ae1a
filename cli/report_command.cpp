// `dtsim report RESULTS... --out DIR` (registered by SweepCommands).
#include <filesystem>
#include <iostream>

#include "cli/sweep_command.hpp"
#include "sweep/report.hpp"

namespace dtsim::cli {

int SweepCommands::run_report() const {
  std::vector<std::filesystem::path> inputs(inputs_.begin(), inputs_.end());
  for (const auto& file : sweep::write_report(inputs, out_)) std::cout << file.string() << "\n";
  return 0;
}

}  // namespace dtsim::cli
