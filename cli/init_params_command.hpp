// `dtsim init-params SCENARIO.json --out FILE.pt`: the initial parameters of the
// scenario's model (rank 0's, which every rank starts from) as a dict of name -> tensor in
// torch.save's format (containers untagged, so torch.load reads it with weights_only), for
// scripts/export_model.py to put the built-in models' initial weights into a TorchScript
// export. Builds the workload as a run would (loads its data).
#pragma once

#include <optional>
#include <string>

#include <CLI/CLI.hpp>

namespace dtsim::cli {

class InitParamsCommand {
 public:
  explicit InitParamsCommand(CLI::App& app);
  std::optional<int> run() const;

 private:
  CLI::App* cmd_ = nullptr;
  std::string scenario_, out_;
};

}  // namespace dtsim::cli
