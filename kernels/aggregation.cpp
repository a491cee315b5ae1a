#include "kernels/aggregation.hpp"

#include <stdexcept>

#include <c10/util/SmallVector.h>
#include <fmt/format.h>

#include "kernels/cpu/sparse.hpp"
#include "kernels/cpu/weighted_sum.hpp"
#if DTSIM_TORCH_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "kernels/cuda/compress.cuh"

#include "kernels/cuda/weighted_sum.cuh"
#endif

namespace dtsim::kernels {

void weighted_sum(at::Tensor& out, std::span<const at::Tensor> inputs, std::span<const double> weights) {
  if (inputs.size() != weights.size())
    throw std::invalid_argument(fmt::format("weighted_sum: {} inputs, {} weights", inputs.size(), weights.size()));
  if (out.scalar_type() != at::kFloat || !out.is_contiguous())
    throw std::invalid_argument("weighted_sum: out must be contiguous fp32");
  // Up to 16 inputs (a gossip neighbourhood) on the stack: no allocation per call.
  c10::SmallVector<const float*, 16> src;
  c10::SmallVector<float, 16> w;
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    const auto& x = inputs[k];
    if (x.scalar_type() != at::kFloat || !x.is_contiguous() || x.numel() != out.numel() ||
        x.device() != out.device())
      throw std::invalid_argument(
          fmt::format("weighted_sum: input {} must be contiguous fp32 with {} elements on out's device", k,
                      out.numel()));
    if (x.data_ptr() == out.data_ptr()) throw std::invalid_argument("weighted_sum: out aliases an input");
    src.push_back(x.data_ptr<float>());
    w.push_back(static_cast<float>(weights[k]));
  }
  if (out.is_cuda()) {
#if DTSIM_TORCH_CUDA
    const c10::cuda::CUDAGuard on_device(out.device());
    cuda::weighted_sum(out.data_ptr<float>(), src.data(), w.data(), static_cast<int>(src.size()), out.numel(),
                       c10::cuda::getCurrentCUDAStream().stream());
    return;
#else
    throw std::invalid_argument("weighted_sum: CUDA tensor, but dtsim was built against a CPU LibTorch");
#endif
  }
  cpu::weighted_sum(out.data_ptr<float>(), src.data(), w.data(), src.size(), out.numel());
}

void average(at::Tensor& out, std::span<const at::Tensor> inputs) {
  if (inputs.empty()) throw std::invalid_argument("average: no inputs");
  if (out.scalar_type() != at::kFloat || !out.is_contiguous())
    throw std::invalid_argument("average: out must be contiguous fp32");
  c10::SmallVector<const float*, 16> src;
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    const auto& x = inputs[k];
    if (x.scalar_type() != at::kFloat || !x.is_contiguous() || x.numel() != out.numel() || x.device() != out.device())
      throw std::invalid_argument(
          fmt::format("average: input {} must be contiguous fp32 with {} elements on out's device", k, out.numel()));
    if (x.data_ptr() == out.data_ptr()) throw std::invalid_argument("average: out aliases an input");
    src.push_back(x.data_ptr<float>());
  }
  if (out.is_cuda()) {
#if DTSIM_TORCH_CUDA
    const c10::cuda::CUDAGuard on_device(out.device());
    cuda::average(out.data_ptr<float>(), src.data(), static_cast<int>(src.size()), out.numel(),
                  c10::cuda::getCurrentCUDAStream().stream());
    return;
#else
    throw std::invalid_argument("average: CUDA tensor, but dtsim was built against a CPU LibTorch");
#endif
  }
  cpu::average(out.data_ptr<float>(), src.data(), static_cast<std::int64_t>(src.size()), out.numel());
}

void scatter_add(const at::Tensor& values, const at::Tensor& indices, at::Tensor& dense) {
  if (!dense.defined() || dense.scalar_type() != at::kFloat || !dense.is_contiguous())
    throw std::invalid_argument("scatter_add: dense must be contiguous fp32");
  if (!values.defined() || values.scalar_type() != at::kFloat || !values.is_contiguous() ||
      values.device() != dense.device())
    throw std::invalid_argument("scatter_add: values must be contiguous fp32 on dense's device");
  if (!indices.defined() || (indices.scalar_type() != at::kLong && indices.scalar_type() != at::kInt) ||
      !indices.is_contiguous() || indices.numel() != values.numel() || indices.device() != dense.device())
    throw std::invalid_argument(fmt::format(
        "scatter_add: indices must be contiguous int64 or int32 with {} entries on dense's device", values.numel()));
  const std::int64_t m = values.numel(), n = dense.numel();
  if (dense.is_cuda()) {
#if DTSIM_TORCH_CUDA
    const c10::cuda::CUDAGuard on_device(dense.device());
    auto stream = c10::cuda::getCurrentCUDAStream().stream();
    const bool wide = indices.scalar_type() == at::kLong;
    // The indices are checked before anything is added (the CPU adds up to the first bad
    // one): the first bad j, found on the device, named with the CPU's message.
    thread_local at::Tensor first;  // one word per thread, reused: no allocation per call
    if (!first.defined() || first.device() != dense.device()) first = at::empty({1}, dense.options().dtype(at::kLong));
    auto* first_word = reinterpret_cast<unsigned long long*>(first.data_ptr<std::int64_t>());
    first.fill_(-1);  // all bits set: no bad index yet (on the current stream, as the check)
    if (wide)
      cuda::first_out_of_range(indices.data_ptr<std::int64_t>(), m, n, 0, first_word, stream);
    else
      cuda::first_out_of_range(indices.data_ptr<std::int32_t>(), m, n, 0, first_word, stream);
    const std::int64_t bad = first.item<std::int64_t>();  // synchronizes
    if (bad >= 0) {
      const std::int64_t i = indices[bad].item<std::int64_t>();
      throw std::invalid_argument(fmt::format("scatter_add: indices[{}] = {} is outside [0, {})", bad, i, n));
    }
    if (wide)
      cuda::scatter_add(values.data_ptr<float>(), indices.data_ptr<std::int64_t>(), m, dense.data_ptr<float>(), n, stream);
    else
      cuda::scatter_add(values.data_ptr<float>(), indices.data_ptr<std::int32_t>(), m, dense.data_ptr<float>(), n, stream);
    return;
#else
    throw std::invalid_argument("scatter_add: CUDA tensor, but dtsim was built against a CPU LibTorch");
#endif
  }
  const std::int64_t bad =
      indices.scalar_type() == at::kLong
          ? cpu::scatter_add(values.data_ptr<float>(), indices.data_ptr<std::int64_t>(), m, dense.data_ptr<float>(), n)
          : cpu::scatter_add(values.data_ptr<float>(), indices.data_ptr<std::int32_t>(), m, dense.data_ptr<float>(), n);
  if (bad >= 0) {
    const std::int64_t i = indices.scalar_type() == at::kLong ? indices.data_ptr<std::int64_t>()[bad]
                                                                : indices.data_ptr<std::int32_t>()[bad];
    throw std::invalid_argument(fmt::format("scatter_add: indices[{}] = {} is outside [0, {})", bad, i, n));
  }
}

}  // namespace dtsim::kernels
