#include "kernels/compressor_docs.hpp"

namespace dtsim::kernels {

std::span<const config::FieldDoc> compressor_docs() {
  static constexpr config::FieldDoc docs[] = {
    {"compressor", "", "The compressor C applied to each message (per parameter tensor for gossip algorithms); each kind "
        "reads only its own fields (kernels/compressor_kinds.cpp), any other is an error."},
    {"compressor", "kind", "identity: none; top_k / random_k: keep a ratio of the elements (largest / random); threshold: "
        "elements with |x| >= threshold (sparsified_sgd only); sign: 1-bit signs; scaled_sign: signs "
        "times mean |x|; qsgd: stochastic quantization to `levels` levels; fp16 / bf16: 16-bit floats; "
        "one_bit: 1-bit signs decoded as the mean of the tensor's (or bucket's) elements on that side of "
        "0 (1-bit SGD; biased, for algorithms with error feedback); terngrad: stochastic ternary levels "
        "{-s, 0, +s}, s the tensor's (or bucket's) max |x| (unbiased); natural: stochastic rounding to "
        "powers of two, sign + 8-bit exponent (unbiased)"},
    {"compressor", "ratio", "top_k, random_k: fraction of the elements kept"},
    {"compressor", "threshold", "threshold: magnitude at or above which an element is sent"},
    {"compressor", "levels", "qsgd: quantization levels s"},
    {"compressor", "seed", "random_k, qsgd, terngrad, natural: random stream seed (default: the scenario seed)"},
    {"compressor", "shared_seed", "random_k: every rank draws the same coordinates"},
    {"compressor", "unbiased", "random_k: scale the kept elements by numel/k (the reference never does)"},
    {"compressor", "tau_rescale", "qsgd: rescale by 1 / (1 + min(d/s^2, sqrt(d)/s)) (the reference's tau)"},
    {"compressor", "bucket", "qsgd, one_bit, terngrad: 0 for one norm (one_bit: pair of means; terngrad: scale) per tensor "
        "(qsgd: the reference), or a power of two in [32, 2^30]: one per bucket of that many elements "
        "(tensors also cut at the flat buffer's multiples of it)"},
  };
  return docs;
}

}  // namespace dtsim::kernels
