// transformers GPT2Model, gpt2 (vocab 50257, 1024 positions, 12 layers, hidden 768; the LM
// head is tied to wte, counted once): 148 tensors, 124,439,808 parameters. Its LM head and
// loss are charged to ln_f.
#include "workloads/shape_builder.hpp"

#include <fmt/format.h>

namespace dtsim::workloads {

using namespace shapes;

namespace {

constexpr std::int64_t kHidden = 768, kFfn = 3072, kHeads = 12, kLayers = 12;
constexpr std::int64_t kGptVocab = 50257, kGptPositions = 1024;

std::vector<ShapeLayer> gpt2_small(std::int64_t s) {
  ModelBuilder b;
  const double t = static_cast<double>(s), th = t * static_cast<double>(kHidden);
  b.layer("embeddings", {{"wte.weight", {kGptVocab, kHidden}}, {"wpe.weight", {kGptPositions, kHidden}}}, th,
          12.0 * th, 0.0);
  for (std::int64_t i = 0; i < kLayers; ++i) {
    const std::string p = fmt::format("h.{}.", i);
    layernorm(b, p + "ln_1", kHidden, t);
    linear(b, p + "attn.c_attn", kHidden, 3 * kHidden, t, true);
    attention(b, s, kHidden, kHeads);
    linear(b, p + "attn.c_proj", kHidden, kHidden, t, true);
    add(b, th);
    layernorm(b, p + "ln_2", kHidden, t);
    linear(b, p + "mlp.c_fc", kHidden, kFfn, t, true);
    b.op(8.0 * t * kFfn, 8.0 * t * kFfn);  // GELU
    linear(b, p + "mlp.c_proj", kFfn, kHidden, t, true);
    add(b, th);
  }
  layernorm(b, "ln_f", kHidden, t);
  // LM head tied to wte: logits = h wte^T, then softmax cross-entropy.
  const double tv = t * static_cast<double>(kGptVocab);
  b.op(2.0 * th * kGptVocab, 4.0 * (th + tv));
  b.op(5.0 * tv, 8.0 * tv);
  return b.done();
}

}  // namespace

const ShapeModelKind& gpt2_small_shape() {
  static const ShapeModelKind kind{
      .name = "gpt2_small",
      .description = "GPT-2 small (124 M parameters), shapes and FLOPs only: for communication sweeps",
      .max_positions = kGptPositions,
      .layers = [](std::int64_t sequence_length) { return gpt2_small(sequence_length); }};
  return kind;
}

}  // namespace dtsim::workloads
