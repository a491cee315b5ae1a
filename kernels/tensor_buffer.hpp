// kernels::TensorBuffer: a list of tensors flattened into one contiguous buffer, with the
// shapes kept so that each tensor is a view of the buffer and can be copied back.
// The reference ChocoSGD code's TensorBuffer, used to fuse many parameters into a
// single message. pack / unpack are fused copies (kernels/cpu/flatten, kernels/cuda/
// flatten): one parallel pass or one launch per 64 tensors, not a dispatched copy per
// tensor, whenever the tensors are contiguous with the buffer's dtype and device; other
// tensors are copied one by one with at::Tensor::copy_ (converting dtype or device).
#pragma once

#include <ATen/ATen.h>

#include <vector>

namespace dtsim::kernels {

class TensorBuffer {
 public:
  TensorBuffer() = default;
  // Copies `tensors` (any shapes, one dtype and device) into one flat buffer.
  explicit TensorBuffer(const std::vector<at::Tensor>& tensors);

  at::Tensor& buffer() { return buffer_; }
  const at::Tensor& buffer() const { return buffer_; }
  std::size_t count() const { return shapes_.size(); }
  // The i-th tensor as a view of the buffer, in its original shape.
  at::Tensor view(std::size_t i) const;
  // Copies the buffer back into `tensors` (each with its element count at construction).
  void unpack(std::vector<at::Tensor>& tensors) const;
  // Copies `tensors` into the existing buffer (no allocation once the pointer table has
  // grown). Both throw std::invalid_argument naming the first tensor whose count or
  // element count differs.
  void pack(const std::vector<at::Tensor>& tensors);

 private:
  // True when every tensor can take part in the fused copy; throws for a wrong count.
  bool fusable(const std::vector<at::Tensor>& tensors, const char* what) const;

  at::Tensor buffer_;
  mutable std::vector<void*> parts_;  // pointer table of the fused copies, reused
  std::vector<std::vector<int64_t>> shapes_;
  std::vector<int64_t> offsets_;  // element offset of each tensor; offsets_[count] = total
};

}  // namespace dtsim::kernels
