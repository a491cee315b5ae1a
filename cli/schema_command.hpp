// `dtsim schema`: prints the scenario JSON Schema, generated from the parse functions and
// each folder's docs table (runner/scenario_schema.hpp). scenarios/scenario.schema.json is
// its output: `dtsim schema > scenarios/scenario.schema.json` after changing a section's
// fields (tests/registry_test.cpp fails until the copy is current).
#pragma once

#include <optional>

#include <CLI/CLI.hpp>

namespace dtsim::cli {

class SchemaCommand {
 public:
  explicit SchemaCommand(CLI::App& app);
  std::optional<int> run() const;

 private:
  CLI::App* cmd_ = nullptr;
};

}  // namespace dtsim::cli
