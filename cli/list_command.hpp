// `dtsim list [algorithms | workloads | compressors | networks | topologies]`: what this
// dtsim knows, read from the registries, as Markdown tables (the README's tables are this
// command's output, checked by tests/readme_test.cpp). Without an argument, every table.
#pragma once

#include <optional>
#include <string>

#include <CLI/CLI.hpp>

namespace dtsim::cli {

class ListCommand {
 public:
  explicit ListCommand(CLI::App& app);
  std::optional<int> run() const;

 private:
  CLI::App* cmd_ = nullptr;
  std::string what_;
};

// The table of `what` (one of the names above), or every table for "".
std::string list_tables(const std::string& what);

}  // namespace dtsim::cli
