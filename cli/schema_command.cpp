#include "cli/schema_command.hpp"

#include <cstdio>

#include <fmt/format.h>

#include "cli/exit_codes.hpp"
#include "runner/scenario_schema.hpp"

namespace dtsim::cli {

SchemaCommand::SchemaCommand(CLI::App& app) {
  cmd_ = app.add_subcommand("schema", "Print the scenario JSON Schema, generated from this dtsim's parse functions "
                                      "(scenarios/scenario.schema.json is its output: dtsim schema > "
                                      "scenarios/scenario.schema.json)");
}

std::optional<int> SchemaCommand::run() const {
  if (!cmd_->parsed()) return std::nullopt;
  return exit_code_of([&] {
    // A field the generator cannot state is a dtsim bug: say so rather than print a
    // schema that is silently looser.
    for (const auto& problem : runner::generated_scenario_schema().problems)
      fmt::print(stderr, "dtsim schema: warning: {}\n", problem);
    std::fputs(runner::scenario_schema_text().c_str(), stdout);
    return 0;
  });
}

}  // namespace dtsim::cli
