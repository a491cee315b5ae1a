// kernels::TensorBuffer: a list of tensors flattened into one contiguous buffer, with the
// shapes kept so that each tensor is a view of the buffer and can be copied back.
// The reference ChocoSGD code's TensorBuffer, used to fuse many parameters into a
// single message. pack / unpack are fused copies (kernels/cpu/flatten, kernels/cuda/
// flatten): one parallel pass, or one launch per 64 tensors, for all the tensors that are
// contiguous with the buffer's dtype and device, instead of a dispatched copy per tensor;
// any other tensor is copied on its own with at::Tensor::copy_ (converting dtype or
// device). A tensor may have any shape with its slot's element count.
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
  // Throws std::invalid_argument for a wrong tensor count or element count.
  void check(const std::vector<at::Tensor>& tensors, const char* what) const;
  // Fills parts_ for the fused copy; calls one_by_one(i, slice) for the tensors it skips.
  template <class OneByOne>
  void table(const std::vector<at::Tensor>& tensors, OneByOne&& one_by_one) const;
  // The fused copy of the tensors in parts_, into the buffer (pack) or out of it, on the
  // buffer's device.
  void fused_copy(bool into_buffer) const;

  at::Tensor buffer_;
  std::vector<std::vector<int64_t>> shapes_;
  std::vector<int64_t> offsets_;  // element offset of each tensor; offsets_[count] = total
  // The fused copies' pointer table, reused (no allocation per call): one TensorBuffer
  // must not pack or unpack from two threads at once, unpack included.
  mutable std::vector<void*> parts_;
};

}  // namespace dtsim::kernels
