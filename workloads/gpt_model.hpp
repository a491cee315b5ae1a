// A GPT-2-style decoder (Radford et al. 2019; nanoGPT's shape and parameter names) written with
// ATen operations under autograd: the workload type "gpt" (gpt_workload.cpp).
//
//   x = wte[idx] + wpe[0..T)                                       token + learned positions
//   L blocks:  x = x + c_proj(attn(ln_1(x)))                       causal self-attention
//              x = x + mlp.c_proj(gelu(mlp.c_fc(ln_2(x))))         MLP 4d, exact (erf) GELU
//   logits = ln_f(x) wte^T                                         head tied to wte, no bias
//   loss = mean over the B T positions of -log softmax(logits)[target]
//
// attn: qkv = c_attn(h) (fused, [3d, d]), split into q, k, v of `heads` heads of d / heads;
// softmax(q k^T / sqrt(d / heads)) with the future masked (-inf above the diagonal), times v,
// heads concatenated. LayerNorms: eps 1e-5, weight and bias; every Linear has a bias.
//
// Parameters, in this order (nanoGPT's named_parameters(); lm_head.weight is wte, counted once):
//   transformer.wte.weight [V, d], transformer.wpe.weight [T, d], for each block l
//   transformer.h.l.{ln_1.weight, ln_1.bias, attn.c_attn.weight, attn.c_attn.bias,
//   attn.c_proj.weight, attn.c_proj.bias, ln_2.weight, ln_2.bias, mlp.c_fc.weight,
//   mlp.c_fc.bias, mlp.c_proj.weight, mlp.c_proj.bias}, transformer.ln_f.weight, .bias:
//   2 + 12 L + 2 tensors, V d + T d + L (12 d^2 + 13 d) + 2 d parameters.
// Initialisation (nanoGPT's _init_weights): Linear and Embedding weights N(0, 0.02^2), the two
// c_proj weights per block N(0, (0.02 / sqrt(2 L))^2), biases 0, LayerNorm weight 1 and bias 0,
// drawn in parameter order from a CPU generator seeded by the scenario's seed.
//
// Costs (per sequence of T tokens, forward; backward twice the forward, stage by stage) in
// the shape models' conventions (shape_models.hpp): a Linear 2 in out + out FLOPs per token
// and its fp32 input and output bytes, weights read once per batch; LayerNorm 8 FLOPs and 8
// bytes per element; attention 2 T^2 d FLOPs each for the scores and the context (the masked
// half computed too), softmax 5 per score; GELU 8 FLOPs and 8 bytes per element; residual adds
// 1 FLOP and 12 bytes per element; the head 2 d V per token and the loss 5 V per token.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <vector>

#include "sim/compute_cost.hpp"
#include "workloads/gpt_spec.hpp"

namespace dtsim::workloads {

struct GptTensor {
  std::string name;
  std::vector<std::int64_t> shape;
};

// The parameters' names and shapes, in order (above).
std::vector<GptTensor> gpt_tensors(const GptSpec& spec);
// V d + T d + L (12 d^2 + 13 d) + 2 d.
std::int64_t gpt_parameter_count(const GptSpec& spec);
// The initial parameters (fp32, CPU), from `seed`.
std::vector<at::Tensor> gpt_initial_parameters(const GptSpec& spec, std::uint64_t seed);

// The mean cross-entropy of predicting targets [B, S] from tokens [B, S] (int64, S <= T,
// values < V) with `params` (any floating dtype, one device), recorded by autograd when the
// params require gradients. `correct`, when given, receives the number of positions whose
// arg-max logit is the target (a 0-dim int64 tensor).
at::Tensor gpt_loss(const GptSpec& spec, const std::vector<at::Tensor>& params, const at::Tensor& tokens,
                    const at::Tensor& targets, at::Tensor* correct = nullptr);

// The backward pass's stages in the order autograd produces their gradients: ln_f (with
// the head and the loss), block L-1, ..., block 0, then the embeddings (wte's gradient is
// complete only once the embedding look-up's part is added): L + 2 stages of parameter
// indices.
std::vector<std::vector<std::size_t>> gpt_stage_params(const GptSpec& spec);
// The forward cost of each stage's part of the model for a batch of `batch` sequences of
// `tokens` tokens, in stage order (its backward costs twice as much).
std::vector<sim::ComputeCost> gpt_stage_forward_costs(const GptSpec& spec, std::int64_t batch, std::int64_t tokens);

}  // namespace dtsim::workloads
