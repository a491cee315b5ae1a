#include "kernels/cpu/weighted_sum.hpp"

#include <ATen/Parallel.h>

namespace dtsim::kernels::cpu {

void weighted_sum(float* out, const float* const* in, const float* w, std::size_t k, int64_t n) {
  // Blocks of 32K elements keep small tensors on one thread; each element's sum runs in
  // input order whatever the split, so the result does not depend on the thread count.
  at::parallel_for(0, n, 32768, [&](int64_t begin, int64_t end) {
    if (k == 0) {
      for (int64_t i = begin; i < end; ++i) out[i] = 0.0f;
      return;
    }
    const float w0 = w[0];
    const float* x0 = in[0];
    for (int64_t i = begin; i < end; ++i) out[i] = w0 * x0[i];
    for (std::size_t j = 1; j < k; ++j) {
      const float wj = w[j];
      const float* xj = in[j];
      for (int64_t i = begin; i < end; ++i) out[i] += wj * xj[i];
    }
  });
}

}  // namespace dtsim::kernels::cpu
