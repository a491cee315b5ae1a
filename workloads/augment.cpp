#include "workloads/augment.hpp"

#include <stdexcept>

namespace dtsim::workloads {

at::Tensor augment_batch(const at::Tensor& x, at::Generator& gen) {
  if (x.dim() != 4) throw std::logic_error("augment_batch: expected a [B, C, H, W] batch");
  const std::int64_t batch = x.size(0), h = x.size(2), w = x.size(3), p = kAugmentPadding;
  // Per image: row and column offsets (0 .. 2p), then whether to flip (0 or 1).
  const auto offsets = at::randint(0, 2 * p + 1, {batch, 2}, gen, at::kLong);
  const auto flips = at::randint(0, 2, {batch}, gen, at::kLong);
  const auto d = offsets.accessor<std::int64_t, 2>();
  const auto f = flips.accessor<std::int64_t, 1>();
  const auto padded = at::constant_pad_nd(x, {p, p, p, p}, 0.0);
  auto out = at::empty_like(x);
  for (std::int64_t i = 0; i < batch; ++i) {
    auto window = padded[i].narrow(1, d[i][0], h).narrow(2, d[i][1], w);
    if (f[i] == 1) window = window.flip({2});
    out[i].copy_(window);
  }
  return out;
}

}  // namespace dtsim::workloads
