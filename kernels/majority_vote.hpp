// Majority vote over many ranks' packed signs (signSGD with majority vote, Bernstein et
// al. 2019): out = sign(sum_r decoded_r), a tie giving 0.
#pragma once

#include <ATen/ATen.h>

#include <span>

#include "kernels/payload.hpp"

namespace dtsim::kernels {

// `signs` are sign or scaled_sign payloads of one shape (same numel and segments); each
// rank has one vote per element (a scaled_sign payload's scales are ignored). `out`:
// contiguous fp32 of that numel on the payloads' device, receives -1, 0 or +1.
void majority_vote(std::span<const Payload> signs, at::Tensor& out);

}  // namespace dtsim::kernels
