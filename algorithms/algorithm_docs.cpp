#include "algorithms/algorithm_docs.hpp"

#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "algorithms/ddp_hook.hpp"
#include "algorithms/lr_schedule.hpp"

namespace dtsim::algorithms {

namespace {

constexpr config::FieldDoc kDocs[] = {
    {"algorithm", "", "The distributed algorithm; each reads only its own fields (algorithms/README.md), any other is "
        "an error.",
     R"json({"allOf": [{"if": {"properties": {"nesterov": {"const": true}}, "required": ["nesterov"]}, "then": {"required": ["momentum"], "properties": {"momentum": {"exclusiveMinimum": 0}, "dampening": {"maximum": 0}}}}]})json"},
    {"algorithm", "name", "the algorithm"},
    {"algorithm", "variant", "parallel_sgd (required): centralized (all-reduce of gradients) or decentralized (D-PSGD gossip "
        "of models); distopt: sync, half (fp16), partial (partial model averaging) or sparse (default "
        "sync)"},
    {"algorithm", "lr", "learning rate"},
    {"algorithm", "momentum", "SGD momentum"},
    {"algorithm", "dampening", "momentum dampening"},
    {"algorithm", "weight_decay", "L2 weight decay"},
    {"algorithm", "nesterov", "Nesterov momentum (needs momentum > 0 and dampening 0)"},
    {"algorithm", "lr_schedule", ""},
    {"algorithm", "compressor", ""},
    {"algorithm", "consensus_stepsize", "choco_sgd, deepsqueeze: consensus step size gamma"},
    {"algorithm", "overlap", "choco_sgd: overlap round t's exchange with step t+1's compute"},
    {"algorithm", "local_steps", "local SGD family: H, sync every H-th step; diloco, streaming_diloco, sparseloco: H inner steps "
        "per outer step (their defaults: 500, 100, 50)"},
    {"algorithm", "turn_on_local_steps_from", "local SGD family: every step before this one syncs (post-local SGD)"},
    {"algorithm", "majority_vote", "sign_sgd: sign of the sum of signs (true) or the mean of the signs"},
    {"algorithm", "mask_momentum", "sparsified_sgd: zero the momentum buffer at the sent coordinates"},
    {"algorithm", "clip_grad_norm", "sparsified_sgd: clip each tensor's gradient (after weight decay, before momentum) to L2 norm "
        "clip_grad_norm / sqrt(ranks), as the reference's clip_grad_val; 0: no clipping"},
    {"algorithm", "compress_warmup_epochs", "sparsified_sgd with top_k or random_k: epochs of compression-ratio warm-up (the reference's "
        "compress_warmup_epochs); 0: none"},
    {"algorithm", "compress_warmup_ratios", "sparsified_sgd: fractions kept during the warm-up, decreasing; those at least the compressor's "
        "ratio are used, each for an equal share of the warm-up epochs (the reference's "
        "compress_warmup_values are the fractions dropped)",
     R"json({"type": "array", "items": {"type": "number", "exclusiveMinimum": 0, "maximum": 1}, "minItems": 1, "default": [0.25, 0.0625, 0.015625, 0.004, 0.001]})json"},
    {"algorithm", "packed_signs", "local_ef_sign_sgd: 1-bit packed signs (all-gather) instead of an fp32 all-reduce"},
    {"algorithm", "threshold", "distopt: tensors with more elements are reduced alone, smaller ones fused (at most buffer_size / "
        "2)"},
    {"algorithm", "buffer_size", "distopt: elements of the fusion buffer"},
    {"algorithm", "clipping", "distopt half: clip gradients to clip_value before the fp16 cast"},
    {"algorithm", "clip_value", "distopt half: clipping bound"},
    {"algorithm", "spars", "distopt sparse: fraction kept (top_k true, at most 1) or magnitude threshold (top_k false)"},
    {"algorithm", "top_k", "distopt sparse: keep the top fraction spars (true) or elements with |g| >= spars (false)"},
    {"algorithm", "corr", "distopt sparse: accumulate the unsent residual (error feedback)"},
    {"algorithm", "exchange", "distopt sparse, threshold mode: padded (SINGA's: all-gather the counts, then blocks padded to "
        "the largest) or exact (each rank's own pairs)"},
    {"algorithm", "hook", ""},  // each hook's line, from its entry (below)
    {"algorithm", "bucket_cap_mb", "ddp: every bucket after the first closes when it holds at least this many MB (2^20 bytes) of "
        "fp32 gradients"},
    {"algorithm", "first_bucket_mb", "ddp: the first bucket's cap in MB (PyTorch's _DEFAULT_FIRST_BUCKET_BYTES)"},
    {"algorithm", "gradient_compression", "parallel_sgd centralized: \"none\" (plain all-reduce of the gradients) or \"powersgd\" (PowerSGD "
        "as PyTorch's PowerSGDState, over the whole model)"},
    {"algorithm", "matrix_approximation_rank", "ddp powersgd and parallel_sgd powersgd: r, the rank of each compressed matrix's approximation"},
    {"algorithm", "start_powerSGD_iter", "ddp powersgd and parallel_sgd powersgd: plain all-reduce for the first this many steps (> 1 with "
        "use_error_feedback or warm_start)"},
    {"algorithm", "min_compression_rate", "ddp powersgd and parallel_sgd powersgd: an n x m matrix is compressed only when n m > (n + m) r "
        "min_compression_rate"},
    {"algorithm", "use_error_feedback", "ddp powersgd and parallel_sgd powersgd: add the previous step's compression error to the "
        "gradients"},
    {"algorithm", "warm_start", "ddp powersgd and parallel_sgd powersgd: reuse the previous step's Q instead of drawing a new one"},
    {"algorithm", "orthogonalization_epsilon", "ddp powersgd and parallel_sgd powersgd: added to each column norm in Gram-Schmidt (ranks 1 and "
        "2; QR above, as PyTorch)"},
    {"algorithm", "random_seed", "ddp powersgd and parallel_sgd powersgd: seeds Q's draws as PowerSGDState's "
        "np.random.RandomState(random_seed) does (the same on every rank)"},
    {"algorithm", "optimizer", "parallel_sgd: an optimizer object each rank applies to its gradient (the all-reduced average "
        "when centralized: with adamw, data-parallel AdamW) instead of the algorithm-level SGD fields, which then keep "
        "their defaults; its lr is the algorithm's lr and lr_schedule",
     R"json({"$ref": "#/$defs/optimizer"})json"},
    {"algorithm", "inner_optimizer", "diloco, streaming_diloco, sparseloco: the inner optimizer (default adamw, weight_decay 0.01); "
        "its lr is the algorithm's lr and lr_schedule",
     R"json({"$ref": "#/$defs/optimizer"})json"},
    {"algorithm", "outer_optimizer", "diloco, streaming_diloco: the outer optimizer on the averaged outer gradient (default sgd, "
        "momentum 0.9, nesterov)",
     R"json({"$ref": "#/$defs/optimizer"})json"},
    {"algorithm", "outer_lr", "diloco, streaming_diloco: the outer optimizer's lr (default 0.7); sparseloco: alpha (default 1)"},
    {"algorithm", "outer_codec", "diloco, streaming_diloco: the outer gradient on the wire: fp32 all-reduce, or bf16 / int8 "
        "codebook / FP4 E3M0 all-gathered and averaged in fp32 (default none; streaming_diloco fp4)"},
    {"algorithm", "fp4_block", "diloco, streaming_diloco with outer_codec fp4: elements per fp32 scale (0: one per tensor)"},
    {"algorithm", "fragments", "streaming_diloco: P, fragments of strided transformer blocks (at most local_steps and the "
        "blocks)"},
    {"algorithm", "overlap_steps", "streaming_diloco: tau, inner steps a fragment's exchange overlaps (at most local_steps / "
        "fragments)"},
    {"algorithm", "mixing", "streaming_diloco: alpha, theta_local <- alpha theta_local + (1 - alpha) theta_global"},
    {"algorithm", "error_decay", "sparseloco: beta of the error feedback e <- beta e + Delta"},
    {"algorithm", "chunk", "sparseloco: top-k chunks of chunk x chunk (matrices) or chunk^2 elements (vectors)"},
    {"algorithm", "density", "sparseloco: fraction kept per chunk, k = round(density E) (at least 1)"},
    {"algorithm", "compression_decay", "demo: beta, the momentum's decay (delta <- beta delta + lr g), in [0, 1)"},
    {"algorithm", "compression_topk", "demo: DCT coefficients kept per chunk (all of a chunk with fewer elements), at most "
        "compression_chunk^2"},
    {"algorithm", "compression_chunk", "demo: chunk length along each dimension (vectors in chunks of c, matrices in c x c tiles)"},
    {"algorithm", "beta1", "one_bit_adam: Adam's b1",
     R"json({"type": "number", "minimum": 0, "exclusiveMaximum": 1, "default": 0.9})json"},
    {"algorithm", "beta2", "one_bit_adam: Adam's b2",
     R"json({"type": "number", "minimum": 0, "exclusiveMaximum": 1, "default": 0.999})json"},
    {"algorithm", "eps", "one_bit_adam: Adam's eps, outside the square root"},
    {"algorithm", "freeze_step", "one_bit_adam: warm-up steps of Adam on all-reduced gradients; then v freezes and the momentum is "
        "averaged by the 1-bit compressed all-reduce (DeepSpeed's default 100000)"},
    {"lr_schedule", "", "The learning rate of each step (algorithms/lr_schedule.hpp), as the ChocoSGD reference code's "
        "scheduler: step t (from 1) is at epoch t / S, S = ceil(shard / batch) steps per epoch; the peak "
        "lr L is lr, times the scale-up; warm-up, milestones and cosine count epochs (warmup_cosine "
        "counts steps). Absent (or constant without warm-up or scale-up): every step at lr, as before. "
        "Each type reads only its own fields besides warmup_epochs, warmup_init_lr and lr_scaleup; any "
        "other is an error."},
    {"lr_schedule", "type", ""},  // each type's own line, from its entry (below)
    {"lr_schedule", "warmup_epochs", "E: the lr grows linearly from warmup_init_lr to the schedule's value at epoch E over the first E "
        "epochs"},
    {"lr_schedule", "warmup_init_lr", "the warm-up's starting lr; default: lr (unscaled) with a graph scale-up, as the reference, 0 "
        "otherwise"},
    {"lr_schedule", "lr_scaleup", ""},
    {"lr_schedule", "milestones", "multistep (required): epochs, strictly ascending; the lr is multiplied by gamma from step t = M "
        "S on",
     R"json({"type": "array", "minItems": 1, "items": {"type": "number", "exclusiveMinimum": 0}})json"},
    {"lr_schedule", "gamma", "multistep: factor per milestone",
     R"json({"type": "number", "exclusiveMinimum": 0, "default": 0.1})json"},
    {"lr_schedule", "total_epochs", "cosine: epochs at which the lr reaches lr_min (more than warmup_epochs); default: the run's "
        "steps"},
    {"lr_schedule", "lr_min", "cosine, warmup_cosine, wsd: the final lr"},
    {"lr_schedule", "a", "convex_decay (required): numerator"},
    {"lr_schedule", "b", "convex_decay (required): offset of the step index t - 1"},
    {"lr_schedule", "warmup_steps", "warmup_cosine, wsd: W, steps of linear warm-up to the peak (warmup_epochs must stay 0)"},
    {"lr_schedule", "total_steps", "warmup_cosine, wsd: T, the step at which the lr reaches lr_min (more than warmup_steps); 0 (the "
        "default): the run's steps"},
    {"lr_schedule", "decay_fraction", "wsd: D / T, the share of the T steps that decays (the last D steps; the stable phase "
        "before it starts after the warm-up)"},
    {"lr_schedule", "decay_shape", "wsd: the decay from the peak to lr_min over p in [0, 1]: linear 1 - p, cosine "
        "(1 + cos(pi p)) / 2, 1-sqrt 1 - sqrt(p) (the paper's best cooldown)"},
    {"lr_scaleup", "", "The reference's lr scale-up (--lr_scaleup_factor): none, or graph: lr times the rank's "
        "neighbourhood in the topology, self included (3 on a ring, n on a complete graph), times batch / "
        "base_batch_size"},
    {"lr_scaleup", "factor", ""},
    {"lr_scaleup", "base_batch_size", "graph (required): the batch the lr was tuned for"},
    {"optimizer", "", "An optimizer of the registry (algorithms/optimizers/): sgd (torch.optim.SGD), adam, adamw "
        "(torch.optim.Adam / AdamW); each reads only its own fields."},
    {"optimizer", "name", ""},
    {"optimizer", "weight_decay", ""},
    {"optimizer", "momentum", ""},
    {"optimizer", "dampening", ""},
    {"optimizer", "nesterov", ""},
    {"optimizer", "beta1", "",
     R"json({"type": "number", "minimum": 0, "exclusiveMaximum": 1})json"},
    {"optimizer", "beta2", "",
     R"json({"type": "number", "minimum": 0, "exclusiveMaximum": 1})json"},
    {"optimizer", "eps", ""},
    {"optimizer", "amsgrad", ""},
};

// lr_schedule.type: each type and its one line, from the schedule entries.
std::string lr_schedule_types_text() {
  std::vector<std::string> parts;
  for (const auto* e : lr_schedule_entries()) parts.push_back(fmt::format("{}: {}", e->name, e->description));
  return fmt::format("{}", fmt::join(parts, "; "));
}

// algorithm.hook: each DDP comm hook and its one line, from the hook entries.
std::string ddp_hooks_text() {
  std::vector<std::string> parts;
  for (const auto& e : ddp_hooks()) parts.push_back(fmt::format("{}: {}", e.name, e.description));
  return fmt::format("ddp: the comm hook run on each full bucket ({})", fmt::join(parts, "; "));
}

}  // namespace

std::span<const config::FieldDoc> algorithm_docs() {
  static const std::string types_text = lr_schedule_types_text();
  static const std::string hooks_text = ddp_hooks_text();
  static const std::vector<config::FieldDoc> docs = [] {
    std::vector<config::FieldDoc> d(std::begin(kDocs), std::end(kDocs));
    for (auto& doc : d) {
      if (doc.section == "lr_schedule" && doc.field == "type") doc.description = types_text;
      if (doc.section == "algorithm" && doc.field == "hook") doc.description = hooks_text;
    }
    return d;
  }();
  return docs;
}

}  // namespace dtsim::algorithms
