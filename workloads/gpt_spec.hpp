// The sizes of the "gpt" workload (gpt_model.hpp), a WorkloadSpec member: kept apart so that
// workload_spec.hpp does not pull in LibTorch's autograd headers.
#pragma once

#include <cstdint>

namespace dtsim::workloads {

struct GptSpec {
  std::int64_t layers = 2;    // L: transformer blocks
  std::int64_t heads = 4;     // attention heads (width a multiple of them)
  std::int64_t width = 128;   // d: the residual stream's width
  std::int64_t context = 64;  // T: tokens per training window (and positions of wpe)
  std::int64_t vocab = 256;   // V: byte-level by default; at least the data's tokens
  // Windows (or rows) of the training and held-out sets that evaluate() / evaluate_test()
  // read, evenly spaced; 0: all of them.
  std::int64_t eval_windows = 128;
};

}  // namespace dtsim::workloads
