#include "kernels/error_feedback.hpp"

#include <stdexcept>

namespace dtsim::kernels {

void error_feedback_step(Compressor& compressor, at::Tensor& memory, const at::Tensor& x,
                         std::span<const std::int64_t> segments, Payload& out) {
  if (!memory.defined() || !x.defined() || !memory.is_contiguous() || memory.numel() != x.numel() ||
      memory.scalar_type() != x.scalar_type() || memory.device() != x.device())
    throw std::invalid_argument("error_feedback_step: memory and x must be contiguous, same dtype, size and device");
  memory.add_(x.view_as(memory));  // one vectorized pass, in place (no allocation)
  compressor.compress(memory, segments, out);
  compressor.decompress_add(out, -1.0, memory);
}

}  // namespace dtsim::kernels
