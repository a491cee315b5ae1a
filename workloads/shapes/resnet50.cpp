// torchvision resnet50 (v1.5: stride on the 3x3 conv), 224 x 224 input, 1000 classes: 161
// tensors, 25,557,032 parameters.
#include "workloads/shape_builder.hpp"

#include <fmt/format.h>

namespace dtsim::workloads {

using namespace shapes;

namespace {

std::vector<ShapeLayer> resnet50() {
  ModelBuilder b;
  Image x{3, 224, 224};
  conv(b, "conv1", x, 64, 7, 2, 3);
  batchnorm(b, "bn1", x, true);
  const Image pooled{x.c, (x.h + 2 - 3) / 2 + 1, (x.w + 2 - 3) / 2 + 1};
  b.op(9.0 * pooled.numel(), 4.0 * (x.numel() + pooled.numel()));  // maxpool 3x3 stride 2
  x = pooled;
  const std::int64_t planes[] = {64, 128, 256, 512}, blocks[] = {3, 4, 6, 3};
  for (int stage = 0; stage < 4; ++stage) {
    for (std::int64_t block = 0; block < blocks[stage]; ++block) {
      const std::string p = fmt::format("layer{}.{}.", stage + 1, block);
      const std::int64_t stride = stage > 0 && block == 0 ? 2 : 1;
      const Image in = x;
      conv(b, p + "conv1", x, planes[stage], 1, 1, 0);
      batchnorm(b, p + "bn1", x, true);
      conv(b, p + "conv2", x, planes[stage], 3, stride, 1);
      batchnorm(b, p + "bn2", x, true);
      conv(b, p + "conv3", x, planes[stage] * 4, 1, 1, 0);
      batchnorm(b, p + "bn3", x, false);
      if (block == 0) {
        Image shortcut = in;
        conv(b, p + "downsample.0", shortcut, planes[stage] * 4, 1, stride, 0);
        batchnorm(b, p + "downsample.1", shortcut, false);
      }
      add(b, x.numel());
      b.op(x.numel(), 8.0 * x.numel());  // relu
    }
  }
  b.op(x.numel(), 4.0 * (x.numel() + static_cast<double>(x.c)));  // global average pool
  linear(b, "fc", 2048, 1000, 1.0);
  return b.done();
}

}  // namespace

const ShapeModelKind& resnet50_shape() {
  static const ShapeModelKind kind{
      .name = "resnet50",
      .description = "ResNet-50 (ImageNet, 25.6 M parameters), shapes and FLOPs only: for communication sweeps",
      .max_positions = 0,
      .layers = [](std::int64_t) { return resnet50(); }};
  return kind;
}

}  // namespace dtsim::workloads
