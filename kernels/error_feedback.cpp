#include "kernels/error_feedback.hpp"

namespace dtsim::kernels {

void error_feedback_step(Compressor& compressor, at::Tensor& memory, const at::Tensor& x,
                         std::span<const std::int64_t> segments, Payload& out) {
  compressor.compress_feedback(memory, x, segments, out);
}

}  // namespace dtsim::kernels
