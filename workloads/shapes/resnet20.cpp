// ResNet-20 for CIFAR-10 (He et al. 2016, option A shortcuts: no parameters), 32 x 32
// input, BN weight and bias per conv: 59 tensors, 269,722 parameters; also the cost table
// of the real ResNet-20 (resnet20_model.hpp).
#include "workloads/shape_builder.hpp"

#include <fmt/format.h>

namespace dtsim::workloads {

using namespace shapes;

std::vector<ShapeLayer> resnet20_layers(std::int64_t in_channels, std::int64_t classes) {
  ModelBuilder b;
  Image x{in_channels, 32, 32};
  conv(b, "conv1", x, 16, 3, 1, 1);
  batchnorm(b, "bn1", x, true);
  const std::int64_t widths[] = {16, 32, 64};
  for (int stage = 0; stage < 3; ++stage) {
    for (int block = 0; block < 3; ++block) {
      const std::string p = fmt::format("layer{}.{}.", stage + 1, block);
      const std::int64_t stride = stage > 0 && block == 0 ? 2 : 1;
      conv(b, p + "conv1", x, widths[stage], 3, stride, 1);
      batchnorm(b, p + "bn1", x, true);
      conv(b, p + "conv2", x, widths[stage], 3, 1, 1);
      batchnorm(b, p + "bn2", x, false);
      add(b, x.numel());  // option A shortcut: subsample and zero-pad, no parameters
      b.op(x.numel(), 8.0 * x.numel());  // relu
    }
  }
  b.op(x.numel(), 4.0 * (x.numel() + static_cast<double>(x.c)));  // global average pool
  linear(b, "fc", 64, classes, 1.0);
  return b.done();
}

const ShapeModelKind& resnet20_shape() {
  static const ShapeModelKind kind{
      .name = "resnet20",
      .description = "ResNet-20 (CIFAR-10, 0.27 M parameters), shapes and FLOPs only: for communication sweeps",
      .max_positions = 0,
      .layers = [](std::int64_t) { return resnet20_layers(); }};
  return kind;
}

}  // namespace dtsim::workloads
