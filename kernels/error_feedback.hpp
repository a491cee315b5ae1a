// Error feedback (Seide et al. 2014; Karimireddy et al. 2019, EF-SignSGD; DeepSqueeze):
//
//   memory += x ;  q = C(memory) ;  memory -= decompress(q)
//
// so that what compression drops is carried to the next step.
#pragma once

#include <ATen/ATen.h>

#include <span>

#include "kernels/compressor.hpp"

namespace dtsim::kernels {

// memory and x: contiguous, same dtype, numel and device. The result equals the three
// steps done one by one (memory + x in fp32 elementwise, then compress, then
// decompress_add(q, -1, memory)); for the sparse kinds the last step touches only the k
// sent coordinates. The elementwise kinds run fused on fp32 CPU buffers (one pass over
// memory for identity, sign, fp16, bf16; two for scaled_sign and qsgd, whose scale or
// norm must be known before the rest): Compressor::compress_feedback.
void error_feedback_step(Compressor& compressor, at::Tensor& memory, const at::Tensor& x,
                         std::span<const std::int64_t> segments, Payload& out);

}  // namespace dtsim::kernels
