#include "kernels/tensor_buffer.hpp"

#include <stdexcept>

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

void TensorBuffer::pack(const std::vector<at::Tensor>& tensors) {
  if (tensors.size() != count()) throw std::invalid_argument("TensorBuffer::pack: tensor count differs");
  for (std::size_t i = 0; i < count(); ++i) view(i).copy_(tensors[i]);
}

void TensorBuffer::unpack(std::vector<at::Tensor>& tensors) const {
  if (tensors.size() != count()) throw std::invalid_argument("TensorBuffer::unpack: tensor count differs");
  for (std::size_t i = 0; i < count(); ++i) tensors[i].copy_(view(i));
}

}  // namespace dtsim::kernels
