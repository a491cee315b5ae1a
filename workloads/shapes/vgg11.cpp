// VGG-11 with BatchNorm for 32 x 32 images (the CHOCO-SGD reference's vgg11_bn): the cost
// table of vgg11_real (vgg11_model.hpp); not a shape-only workload of its own.
#include "workloads/shape_builder.hpp"

#include <fmt/format.h>

namespace dtsim::workloads {

using namespace shapes;

std::vector<ShapeLayer> vgg11_layers(std::int64_t in_channels, std::int64_t classes) {
  ModelBuilder b;
  Image x{in_channels, 32, 32};
  int index = 0;  // the module's position in `features`: conv, bn, relu, then maxpool after some
  for (const std::int64_t width : {64, 0, 128, 0, 256, 256, 0, 512, 512, 0, 512, 512, 0}) {
    if (width == 0) {  // maxpool 2x2 stride 2: 4 comparisons per output
      const Image pooled{x.c, x.h / 2, x.w / 2};
      b.op(4.0 * pooled.numel(), 4.0 * (x.numel() + pooled.numel()));
      x = pooled;
      ++index;
      continue;
    }
    conv(b, fmt::format("features.{}", index), x, width, 3, 1, 1, /*bias=*/true);
    batchnorm(b, fmt::format("features.{}", index + 1), x, true);
    index += 3;
  }
  // classifier: dropout, fc 512, relu, dropout, fc 512, relu, fc; a dropout is a mask
  // multiply (1 FLOP, 12 bytes per element).
  const double hidden = 512;
  b.op(x.numel(), 12.0 * x.numel());
  linear(b, "classifier.1", x.c * x.h * x.w, 512, 1.0);
  b.op(hidden, 8.0 * hidden);
  b.op(hidden, 12.0 * hidden);
  linear(b, "classifier.4", 512, 512, 1.0);
  b.op(hidden, 8.0 * hidden);
  linear(b, "classifier.6", 512, classes, 1.0);
  return b.done();
}

}  // namespace dtsim::workloads
