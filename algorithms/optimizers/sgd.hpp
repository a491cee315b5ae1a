// sgd's own hyper-parameters (OptimizerConfig::settings), as torch.optim.SGD names them.
#pragma once

namespace dtsim::algorithms::optimizers {

struct SgdSettings {
  double momentum = 0.0;
  double dampening = 0.0;
  bool nesterov = false;  // needs momentum > 0 and dampening 0
};

}  // namespace dtsim::algorithms::optimizers
