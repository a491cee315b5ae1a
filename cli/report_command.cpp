// `dtsim report RESULTS... --out DIR` (registered by SweepCommands): the files written on
// stdout, one a line; each (figure, run) pair a figure leaves out on stderr, with why.
#include <filesystem>
#include <iostream>

#include <fmt/format.h>

#include "cli/sweep_command.hpp"
#include "sweep/report.hpp"

namespace dtsim::cli {

int SweepCommands::run_report() const {
  std::vector<std::filesystem::path> inputs(inputs_.begin(), inputs_.end());
  const auto report = sweep::write_report(inputs, out_);
  for (const auto& file : report.written) std::cout << file.string() << "\n";
  std::cout.flush();
  for (const auto& line : report.left_out) fmt::print(stderr, "dtsim: {}\n", line);
  return 0;
}

}  // namespace dtsim::cli
