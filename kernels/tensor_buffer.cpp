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

void TensorBuffer::check(const std::vector<at::Tensor>& tensors, const char* what) const {
  if (tensors.size() != count())
    throw std::invalid_argument(fmt::format("TensorBuffer::{}: {} tensors, the buffer holds {}", what, tensors.size(),
                                            count()));
  for (std::size_t i = 0; i < count(); ++i) {
    const at::Tensor& t = tensors[i];
    const std::int64_t want = offsets_[i + 1] - offsets_[i];
    if (!t.defined() || t.numel() != want)
      throw std::invalid_argument(fmt::format("TensorBuffer::{}: tensor {} has {} elements, the buffer holds {}",
                                              what, i, t.defined() ? t.numel() : 0, want));
  }
}

// The pointer table of the fused copy: a tensor's data, or null for one the fused copy
// cannot take (another dtype or device, or strided), which `one_by_one` then copies.
template <class OneByOne>
void TensorBuffer::table(const std::vector<at::Tensor>& tensors, OneByOne&& one_by_one) const {
  parts_.resize(count());
  for (std::size_t i = 0; i < count(); ++i) {
    const at::Tensor& t = tensors[i];
    const bool fused =
        t.scalar_type() == buffer_.scalar_type() && t.device() == buffer_.device() && t.is_contiguous();
    parts_[i] = fused ? t.data_ptr() : nullptr;
    if (!fused) one_by_one(i, buffer_.narrow(0, offsets_[i], offsets_[i + 1] - offsets_[i]));
  }
}

void TensorBuffer::pack(const std::vector<at::Tensor>& tensors) {
  check(tensors, "pack");
  if (count() == 0) return;
  table(tensors, [&](std::size_t i, at::Tensor slice) { slice.copy_(tensors[i].reshape({-1})); });
  fused_copy(/*into_buffer=*/true);
}

void TensorBuffer::unpack(std::vector<at::Tensor>& tensors) const {
  check(tensors, "unpack");
  if (count() == 0) return;
  table(tensors, [&](std::size_t i, const at::Tensor& slice) { tensors[i].copy_(slice.view(tensors[i].sizes())); });
  fused_copy(/*into_buffer=*/false);
}

void TensorBuffer::fused_copy(bool into_buffer) const {
  void* flat = buffer_.data_ptr();
  const std::size_t element_size = buffer_.element_size();
  if (buffer_.is_cuda()) {
#if DTSIM_TORCH_CUDA
    const c10::cuda::CUDAGuard on_device(buffer_.device());
    void* stream = c10::cuda::getCurrentCUDAStream().stream();
    if (into_buffer)
      cuda::pack_parts(flat, parts_.data(), offsets_.data(), count(), element_size, stream);
    else
      cuda::unpack_parts(flat, parts_.data(), offsets_.data(), count(), element_size, stream);
    return;
#else
    throw std::invalid_argument("TensorBuffer: CUDA tensors, but dtsim was built against a CPU LibTorch");
#endif
  }
  if (into_buffer)
    cpu::pack_parts(flat, parts_.data(), offsets_.data(), count(), element_size);
  else
    cpu::unpack_parts(flat, parts_.data(), offsets_.data(), count(), element_size);
}

}  // namespace dtsim::kernels
