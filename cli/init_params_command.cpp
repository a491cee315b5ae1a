#include "cli/init_params_command.hpp"

#include <torch/csrc/jit/serialization/pickle.h>

#include <fstream>

#include <fmt/format.h>

#include "cli/exit_codes.hpp"
#include "runner/scenario.hpp"
#include "workloads/workload_spec.hpp"

namespace dtsim::cli {

InitParamsCommand::InitParamsCommand(CLI::App& app) {
  cmd_ = app.add_subcommand("init-params", "Write the initial parameters of SCENARIO's model (every rank's) as a "
                                           "torch.save dict of name -> tensor (torch.load reads it), for "
                                           "scripts/export_model.py");
  cmd_->add_option("scenario", scenario_, "Scenario JSON file")->required();
  cmd_->add_option("--out", out_, "The file to write (.pt)")->required();
}

std::optional<int> InitParamsCommand::run() const {
  if (!cmd_->parsed()) return std::nullopt;
  return exit_code_of([&] {
    runner::Scenario s;
    try {
      s = runner::load_scenario(scenario_);
    } catch (const runner::ScenarioError& e) {
      throw config::InputError(fmt::format("{}: {}", scenario_, e.what()));
    }
    s.workload.device = at::kCPU;
    const auto data = workloads::load_workload_data(s.workload, s.seed);
    const auto w = workloads::make_workload(s.workload, data, s.seed, 0, s.ranks);
    const auto names = w->parameter_names();
    const auto params = w->initial_parameters();
    c10::impl::GenericDict dict(c10::StringType::get(), c10::TensorType::get());
    for (std::size_t i = 0; i < names.size(); ++i) dict.insert(names[i], params[i].to(at::kCPU).contiguous());
    const auto bytes = torch::jit::pickle_save(dict);
    std::ofstream out(out_, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out) throw config::InputError(fmt::format("--out {}: cannot write", config::one_line(out_)));
    fmt::print("{}: {} tensors of {}\n", out_, names.size(), s.workload.type);
    return 0;
  });
}

}  // namespace dtsim::cli
