// Shape-only models for communication sweeps: the real parameter tensors (names and
// shapes as in torchvision / Hugging Face transformers) of ResNet-20 (CIFAR-10), ResNet-50
// (ImageNet), BERT-base uncased and GPT-2 small, with per-layer compute costs from the
// shapes, but no real data or math: gradients are seeded pseudo-random tensors.
//
//   resnet20    CIFAR-10 ResNet-20 (He et al. 2016, option A shortcuts: no parameters),
//               32x32 input, BN weight+bias per conv: 59 tensors, 269,722 parameters.
//   resnet50    torchvision resnet50 (v1.5: stride on the 3x3 conv), 224x224 input, 1000
//               classes: 161 tensors, 25,557,032 parameters.
//   bert_base   transformers BertModel, bert-base-uncased (vocab 30522, 512 positions,
//               12 layers, hidden 768, FFN 3072, pooler): 199 tensors, 109,482,240.
//   gpt2_small  transformers GPT2Model, gpt2 (vocab 50257, 1024 positions, 12 layers,
//               hidden 768; the LM head is tied to wte, counted once): 148 tensors,
//               124,439,808 parameters.
//
// Costs (per image, or per sequence of sequence_length tokens, times the batch):
// conv 2*Cin*Cout*k*k*Hout*Wout FLOPs; linear 2*in*out FLOPs per token; attention
// 2*S*S*hidden FLOPs each for the scores and the context per layer (no causal saving);
// GPT-2's LM head 2*hidden*vocab per token. BatchNorm, LayerNorm, ReLU, GELU, softmax,
// residual adds, pooling and embedding look-ups count a few FLOPs per element and mostly
// bytes (fp32 activations read plus written; weights once per batch). Backward costs twice
// the forward, layer by layer. Parameter-free operations are charged to the preceding
// parametrised layer (whose backward stage runs right after theirs); GPT-2's LM head and
// loss are charged to ln_f.
//
// Workload behaviour: forward() computes no loss (NaN; computes_loss() is false, so runs
// report null loss and accuracy) and costs the forward pass;
// backward stages fill their gradients from a process-wide pool of N(0, 0.01^2) values at
// offsets drawn from (seed, rank, step, tensor), so they differ between ranks and steps and
// cost one copy; initial parameters come from the same pool at offsets drawn from the seed
// (identical on all ranks). evaluate() returns NaN loss and accuracy: there is no data.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "workloads/workload.hpp"

namespace dtsim::workloads {

// The shape-only transformers' own setting (WorkloadSpec::settings): the sequence
// length, which with the batch sets the per-layer FLOPs of the cost model.
struct ShapeModelSpec {
  std::int64_t sequence_length = 128;
};

struct TensorShape {
  std::string name;
  std::vector<std::int64_t> shape;
  std::int64_t numel() const;
};

// One parametrised layer with the parameter-free operations that follow it.
struct ShapeLayer {
  std::string name;
  std::vector<TensorShape> tensors;  // forward (state_dict) order
  double flops = 0.0;                // forward, per sample
  double bytes = 0.0;                // forward activation bytes, per sample
  double fixed_bytes = 0.0;          // forward weight bytes, per batch
};

struct ShapeModel {
  std::string name;
  std::vector<ShapeLayer> layers;  // forward order
  std::int64_t sequence_length = 0;  // transformers; 0 for the CNNs
};

struct WorkloadEntry;  // workload_registry.hpp

// A shape-only model: its layers (shape_builder.hpp) in a file of its own under shapes/,
// and one line in shape_models.cpp's table; its workload type, its fields and its row in
// `dtsim list workloads` follow from the entry.
struct ShapeModelKind {
  std::string_view name;
  std::string_view description;    // one line
  std::int64_t max_positions = 0;  // a transformer's longest sequence; 0: a CNN (no sequence_length)
  std::vector<ShapeLayer> (*layers)(std::int64_t sequence_length);
};

// In table order: resnet20, resnet50, bert_base, gpt2_small.
std::span<const ShapeModelKind* const> shape_model_kinds();
// Their workload types' entries (workload_registry.hpp), in the same order.
std::span<const WorkloadEntry* const> shape_workload_entries();

// The kinds' names.
const std::vector<std::string>& shape_model_types();
bool is_shape_model(const std::string& model);

// The model's layers at `sequence_length` (ignored by the CNNs). Throws
// std::invalid_argument on an unknown model or a sequence length outside 1..max positions.
ShapeModel shape_model(const std::string& model, std::int64_t sequence_length = 128);

// ResNet-20's layers for in_channels x 32 x 32 images in `classes` classes (the shape
// model is 3 and 10): the cost table of the real ResNet-20 too (resnet20_model.hpp).
std::vector<ShapeLayer> resnet20_layers(std::int64_t in_channels = 3, std::int64_t classes = 10);

// VGG-11 with BatchNorm for in_channels x 32 x 32 images in `classes` classes, the CHOCO-SGD
// reference's vgg11_bn (eight 3x3 convs with biases, each followed by BatchNorm and ReLU,
// five 2x2 max-pools, classifier dropout - fc 512 - relu - dropout - fc 512 - relu - fc),
// under its nn.Sequential names (features.0.weight, features.1.weight, ...,
// classifier.6.bias): the cost table of vgg11_real (vgg11_model.hpp).
std::vector<ShapeLayer> vgg11_layers(std::int64_t in_channels = 3, std::int64_t classes = 10);

// The model's tensors (name, shape) in backward order (the reverse of forward order).
std::vector<TensorShape> shape_model_tensors(const std::string& model);

// The pool the workloads draw values from (N(0, 0.01^2), seeded), shared by all ranks.
at::Tensor make_shape_pool(std::uint64_t seed);

// Rank `rank`'s workload of `model` at per-rank batch `batch_size` (images or sequences).
std::unique_ptr<Workload> make_shape_workload(const std::string& model, std::int64_t batch_size,
                                              std::int64_t sequence_length, at::Tensor pool, std::uint64_t seed,
                                              int rank);

}  // namespace dtsim::workloads
