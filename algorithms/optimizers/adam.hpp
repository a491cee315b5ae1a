// adam's and adamw's own hyper-parameters (OptimizerConfig::settings), as torch.optim.Adam
// names them.
#pragma once

namespace dtsim::algorithms::optimizers {

struct AdamSettings {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  bool amsgrad = false;
};

}  // namespace dtsim::algorithms::optimizers
