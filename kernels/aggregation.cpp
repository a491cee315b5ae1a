#include "kernels/aggregation.hpp"

#include <stdexcept>
#include <vector>

#include <fmt/format.h>

#include "kernels/cpu/weighted_sum.hpp"
#if DTSIM_TORCH_CUDA
#include <c10/cuda/CUDAStream.h>

#include "kernels/cuda/weighted_sum.cuh"
#endif

namespace dtsim::kernels {

void weighted_sum(at::Tensor& out, std::span<const at::Tensor> inputs, std::span<const double> weights) {
  if (inputs.size() != weights.size())
    throw std::invalid_argument(fmt::format("weighted_sum: {} inputs, {} weights", inputs.size(), weights.size()));
  if (out.scalar_type() != at::kFloat || !out.is_contiguous())
    throw std::invalid_argument("weighted_sum: out must be contiguous fp32");
  std::vector<const float*> src;
  std::vector<float> w;
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
    cuda::weighted_sum(out.data_ptr<float>(), src.data(), w.data(), static_cast<int>(src.size()), out.numel(),
                       c10::cuda::getCurrentCUDAStream().stream());
    return;
#else
    throw std::invalid_argument("weighted_sum: CUDA tensor, but dtsim was built against a CPU LibTorch");
#endif
  }
  cpu::weighted_sum(out.data_ptr<float>(), src.data(), w.data(), src.size(), out.numel());
}

}  // namespace dtsim::kernels
