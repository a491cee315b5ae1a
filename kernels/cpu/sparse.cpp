#include "kernels/cpu/sparse.hpp"

#include <ATen/Parallel.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include "kernels/cpu/common.hpp"

namespace dtsim::kernels::cpu {

template <class T>
void gather(const T* x, const std::uint32_t* idx, std::int64_t m, float scale, T* val) {
  at::parallel_for(0, m, 1 << 15, [&](std::int64_t a, std::int64_t b) {
    if (scale == 1.0f) {
      for (std::int64_t j = a; j < b; ++j) val[j] = x[idx[j]];
    } else {
      for (std::int64_t j = a; j < b; ++j) val[j] = static_cast<T>(to_float(x[idx[j]]) * scale);
    }
  });
}

template <class T>
void scatter(const std::uint32_t* idx, const T* val, std::int64_t m, float weight, bool accumulate, T* out) {
  // Sequential: indices from one payload are distinct, but this keeps the order defined
  // for any input, and m is small (k elements) next to the dense buffer.
  if (accumulate) {
    for (std::int64_t j = 0; j < m; ++j) out[idx[j]] = static_cast<T>(to_float(out[idx[j]]) + weight * to_float(val[j]));
  } else {
    for (std::int64_t j = 0; j < m; ++j) out[idx[j]] = val[j];
  }
}

template <class I>
std::int64_t scatter_add(const float* values, const I* idx, std::int64_t m, float* dense, std::int64_t n) {
  for (std::int64_t j = 0; j < m; ++j) {
    const auto i = static_cast<std::int64_t>(idx[j]);
    if (i < 0 || i >= n) return j;
    dense[i] += values[j];
  }
  return -1;
}

template std::int64_t scatter_add<std::int64_t>(const float*, const std::int64_t*, std::int64_t, float*, std::int64_t);
template std::int64_t scatter_add<std::int32_t>(const float*, const std::int32_t*, std::int64_t, float*, std::int64_t);
#define DTSIM_SPARSE_INSTANTIATE(T)                                                        \
  template void gather<T>(const T*, const std::uint32_t*, std::int64_t, float, T*); \
  template void scatter<T>(const std::uint32_t*, const T*, std::int64_t, float, bool, T*);
DTSIM_SPARSE_INSTANTIATE(float)
DTSIM_SPARSE_INSTANTIATE(c10::Half)
DTSIM_SPARSE_INSTANTIATE(c10::BFloat16)
#undef DTSIM_SPARSE_INSTANTIATE

}  // namespace dtsim::kernels::cpu
