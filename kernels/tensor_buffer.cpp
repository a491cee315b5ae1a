#include "kernels/tensor_buffer.hpp"

#include <stdexcept>

#include <fmt/format.h>

#include "kernels/cpu/flatten.hpp"
#if DTSIM_TORCH_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "kernels/cuda/flatten.cuh"
#endif

namespace dtsim::kernels {

TensorBuffer::TensorBuffer(const std::vector<at::Tensor>& tensors) {
  if (tensors.empty()) throw std::invalid_argument("TensorBuffer: no tensors");
  offsets_.push_back(0);
  for (const auto& t : tensors) {
    shapes_.emplace_back(t.sizes().begin(), t.sizes().end());
    offsets_.push_back(offsets_.back() + t.numel());
  }
  buffer_ = at::empty({offsets_.back()}, tensors.front().options());
  pack(tensors);
}

at::Tensor TensorBuffer::view(std::size_t i) const {
  return buffer_.narrow(0, offsets_.at(i), offsets_.at(i + 1) - offsets_.at(i)).view(shapes_.at(i));
}

bool TensorBuffer::fusable(const std::vector<at::Tensor>& tensors, const char* what) const {
  if (tensors.size() != count())
    throw std::invalid_argument(fmt::format("TensorBuffer::{}: {} tensors, the buffer holds {}", what, tensors.size(),
                                            count()));
  bool fused = true;
  for (std::size_t i = 0; i < count(); ++i) {
    const at::Tensor& t = tensors[i];
    const std::int64_t want = offsets_[i + 1] - offsets_[i];
    if (!t.defined() || t.numel() != want)
      throw std::invalid_argument(fmt::format("TensorBuffer::{}: tensor {} has {} elements, the buffer holds {}",
                                              what, i, t.defined() ? t.numel() : 0, want));
    fused = fused && t.scalar_type() == buffer_.scalar_type() && t.device() == buffer_.device() && t.is_contiguous();
  }
  return fused;
}

void TensorBuffer::pack(const std::vector<at::Tensor>& tensors) {
  if (!fusable(tensors, "pack")) {
    for (std::size_t i = 0; i < count(); ++i) view(i).copy_(tensors[i]);
    return;
  }
  parts_.resize(count());
  for (std::size_t i = 0; i < count(); ++i) parts_[i] = tensors[i].data_ptr();
  const std::size_t element_size = buffer_.element_size();
  if (buffer_.is_cuda()) {
#if DTSIM_TORCH_CUDA
    const c10::cuda::CUDAGuard on_device(buffer_.device());
    cuda::gather(buffer_.data_ptr(), parts_.data(), offsets_.data(), count(), element_size,
                 c10::cuda::getCurrentCUDAStream().stream());
    return;
#else
    throw std::invalid_argument("TensorBuffer: CUDA tensors, but dtsim was built against a CPU LibTorch");
#endif
  }
  cpu::gather(buffer_.data_ptr(), parts_.data(), offsets_.data(), count(), element_size);
}

void TensorBuffer::unpack(std::vector<at::Tensor>& tensors) const {
  if (!fusable(tensors, "unpack")) {
    for (std::size_t i = 0; i < count(); ++i) tensors[i].copy_(view(i));
    return;
  }
  parts_.resize(count());
  for (std::size_t i = 0; i < count(); ++i) parts_[i] = tensors[i].data_ptr();
  const std::size_t element_size = buffer_.element_size();
  if (buffer_.is_cuda()) {
#if DTSIM_TORCH_CUDA
    const c10::cuda::CUDAGuard on_device(buffer_.device());
    cuda::scatter(buffer_.data_ptr(), parts_.data(), offsets_.data(), count(), element_size,
                  c10::cuda::getCurrentCUDAStream().stream());
    return;
#else
    throw std::invalid_argument("TensorBuffer: CUDA tensors, but dtsim was built against a CPU LibTorch");
#endif
  }
  cpu::scatter(buffer_.data_ptr(), parts_.data(), offsets_.data(), count(), element_size);
}

}  // namespace dtsim::kernels
