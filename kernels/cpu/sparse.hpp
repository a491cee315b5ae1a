// CPU gather / scatter for sparse (values, indices) payloads and the dense
// scatter-add aggregation.
#pragma once

#include <cstdint>

namespace dtsim::kernels::cpu {

// val[j] = x[idx[j]] * scale (scale == 1 copies exactly).
template <class T>
void gather(const T* x, const std::uint32_t* idx, std::int64_t m, float scale, T* val);

// accumulate = false: out[idx[j]] = val[j]; true: out[idx[j]] = out[idx[j]] + weight * val[j]
// (in fp32, in j order; repeated indices accumulate).
template <class T>
void scatter(const std::uint32_t* idx, const T* val, std::int64_t m, float weight, bool accumulate, T* out);

// dense[idx[j]] += values[j] for j in order (so repeated indices add up
// deterministically). Returns -1, or the first j whose index is outside [0, n), in
// which case nothing from j on was added.
template <class I>
std::int64_t scatter_add(const float* values, const I* idx, std::int64_t m, float* dense, std::int64_t n);

}  // namespace dtsim::kernels::cpu
