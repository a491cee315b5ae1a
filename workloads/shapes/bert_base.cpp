// transformers BertModel, bert-base-uncased (vocab 30522, 512 positions, 12 layers, hidden
// 768, FFN 3072, pooler): 199 tensors, 109,482,240 parameters.
#include "workloads/shape_builder.hpp"

#include <fmt/format.h>

namespace dtsim::workloads {

using namespace shapes;

namespace {

constexpr std::int64_t kHidden = 768, kFfn = 3072, kHeads = 12, kLayers = 12;
constexpr std::int64_t kBertVocab = 30522, kBertPositions = 512;

std::vector<ShapeLayer> bert_base(std::int64_t s) {
  ModelBuilder b;
  const double t = static_cast<double>(s), th = t * static_cast<double>(kHidden);
  b.layer("embeddings",
          {{"embeddings.word_embeddings.weight", {kBertVocab, kHidden}},
           {"embeddings.position_embeddings.weight", {kBertPositions, kHidden}},
           {"embeddings.token_type_embeddings.weight", {2, kHidden}}},
          2.0 * th, 16.0 * th, 0.0);  // three look-ups summed
  layernorm(b, "embeddings.LayerNorm", kHidden, t);
  for (std::int64_t i = 0; i < kLayers; ++i) {
    const std::string p = fmt::format("encoder.layer.{}.", i);
    linear(b, p + "attention.self.query", kHidden, kHidden, t);
    linear(b, p + "attention.self.key", kHidden, kHidden, t);
    linear(b, p + "attention.self.value", kHidden, kHidden, t);
    attention(b, s, kHidden, kHeads);
    linear(b, p + "attention.output.dense", kHidden, kHidden, t);
    add(b, th);
    layernorm(b, p + "attention.output.LayerNorm", kHidden, t);
    linear(b, p + "intermediate.dense", kHidden, kFfn, t);
    b.op(8.0 * t * kFfn, 8.0 * t * kFfn);  // GELU
    linear(b, p + "output.dense", kFfn, kHidden, t);
    add(b, th);
    layernorm(b, p + "output.LayerNorm", kHidden, t);
  }
  linear(b, "pooler.dense", kHidden, kHidden, 1.0);  // on the [CLS] token
  b.op(4.0 * kHidden, 8.0 * kHidden);                 // tanh
  return b.done();
}

}  // namespace

const ShapeModelKind& bert_base_shape() {
  static const ShapeModelKind kind{
      .name = "bert_base",
      .description = "BERT-base (110 M parameters), shapes and FLOPs only: for communication sweeps",
      .max_positions = kBertPositions,
      .layers = [](std::int64_t sequence_length) { return bert_base(sequence_length); }};
  return kind;
}

}  // namespace dtsim::workloads
