#include "cli/init_params_command.hpp"

#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/serialization/export.h>
#include <torch/csrc/jit/serialization/pickler.h>

#include <fstream>

#include <fmt/format.h>

#include "cli/exit_codes.hpp"
#include "runner/scenario.hpp"
#include "workloads/workload_spec.hpp"

namespace dtsim::cli {

namespace {

// torch.save's zip format, its containers untagged: torch::jit::pickle_save tags a typed
// dict with torch.jit._pickle.restore_type_tag, a global torch.load refuses under its
// weights_only default (PyTorch 2.6 on); a plain dict of tensors loads in every version.
std::vector<char> save_for_torch_load(const c10::IValue& value) {
  std::vector<char> pickled;
  torch::jit::Pickler pickler([&](const char* bytes, std::size_t n) { pickled.insert(pickled.end(), bytes, bytes + n); },
                              nullptr, nullptr, nullptr, nullptr, /*tag_aggregates=*/false);
  pickler.protocol();
  pickler.pushIValue(value);
  pickler.stop();
  std::vector<char> file;
  caffe2::serialize::PyTorchStreamWriter writer([&](const void* data, std::size_t n) {
    const char* bytes = static_cast<const char*>(data);
    file.insert(file.end(), bytes, bytes + n);
    return n;
  });
  torch::jit::writeArchiveAndTensors("data", pickled.data(), pickled.size(), pickler.tensorData(), writer);
  writer.writeEndOfFile();
  return file;
}

}  // namespace

InitParamsCommand::InitParamsCommand(CLI::App& app) {
  cmd_ = app.add_subcommand("init-params", "Write the initial parameters of SCENARIO's model (every rank's) as a "
                                           "torch.save dict of name -> tensor (torch.load reads it, weights_only or not), for "
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
    const auto bytes = save_for_torch_load(dict);
    std::ofstream out(out_, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out) throw config::InputError(fmt::format("--out {}: cannot write", config::one_line(out_)));
    fmt::print("{}: {} tensors of {}\n", out_, names.size(), s.workload.type);
    return 0;
  });
}

}  // namespace dtsim::cli
