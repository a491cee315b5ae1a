#include "workloads/workload_docs.hpp"

namespace dtsim::workloads {

std::span<const config::FieldDoc> workload_docs() {
  static constexpr config::FieldDoc docs[] = {
    {"workload", "", "What each rank trains; each type reads only its own fields.",
     R"json({"allOf": [{"if": {"required": ["kind"]}, "then": {"properties": {"type": false}}}]})json"},
    {"workload", "type", "logistic_regression (synthetic or LIBSVM data); mlp, cnn (Fashion-MNIST); shape-only models for "
        "communication sweeps: resnet20, resnet50, bert_base, gpt2_small; resnet20_real, vgg11_real (a "
        "real ResNet-20 / VGG-11 with BatchNorm under autograd, 32 x 32 images); torchscript (your own "
        "TorchScript module under autograd, costs estimated from its ops); gpt (a GPT-2-style decoder "
        "under autograd on text bytes or token rows: held-out loss, next-token accuracy)"},
    {"workload", "kind", "older name of type (not both)"},
    {"workload", "data", "the data set (dtsim list data); default: the type's first, or the source a field selects "
        "(libsvm_file, tensors_file, text_path, tokens_file). logistic_regression: synthetic, libsvm; "
        "mlp, cnn: fashion_mnist, cifar10, tensors; resnet20_real, vgg11_real: cifar10 (default), "
        "fashion_mnist (image_size 32), tensors (C x 32 x 32); torchscript: fashion_mnist (default), "
        "cifar10, tensors; gpt: text (default), tokens"},
    {"workload", "samples", "data synthetic: training set size (at least ranks)"},
    {"workload", "features", "data synthetic: input dimension d (the model has d + 1 parameters); data libsvm: default the "
        "file's largest index"},
    {"workload", "unit_norm", "data synthetic: scale every sample to unit L2 norm after its label is drawn (epsilon-like)"},
    {"workload", "batch_size", "per-rank mini-batch; logistic_regression also \"full\" or 0: the rank's whole shard every step",
     R"json({"anyOf": [{"type": "integer", "minimum": 0}, {"const": "full"}], "default": 32})json"},
    {"workload", "partition", "logistic_regression: iid or sorted (by label); mlp, cnn, resnet20_real, vgg11_real, torchscript: "
        "iid or by_label"},
    {"workload", "libsvm_file", "data libsvm: the LIBSVM file (relative to the scenario file); selects data libsvm when data is "
        "absent",
     R"json({"type": "string", "minLength": 1})json"},
    {"workload", "data_dir", "data fashion_mnist: directory of the Fashion-MNIST IDX files (default Debian's); data cifar10 "
        "(required): directory of data_batch_1.bin .. data_batch_5.bin and test_batch.bin; relative to "
        "the scenario file"},
    {"workload", "train_samples", "data fashion_mnist, cifar10: use the first N training images; 0: all (else at least ranks)"},
    {"workload", "test_samples", "data fashion_mnist, cifar10: use the first N test images; 0: all"},
    {"workload", "sequence_length", "bert_base, gpt2_small: tokens per sequence (sets the cost model's FLOPs)"},
    {"workload", "augment", "data cifar10: random crop (4-pixel padding) and horizontal flip of every training batch",
     R"json({"type": "boolean", "default": true})json"},
    {"workload", "tensors_file", "data tensors: a torch.save({\"x\": X, \"y\": Y}) file (optional test_x, test_y; relative to the "
        "scenario file); selects data tensors when data is absent"},
    {"workload", "image_size", "data fashion_mnist: 28 (as stored) or 32 (padded by 2 background pixels on every side, for 32 x "
        "32 models); resnet20_real, vgg11_real: 32 only (its default there)",
     R"json({"type": "integer", "enum": [28, 32], "default": 28})json"},
    {"workload", "model_file", "torchscript (required): a module saved with torch.jit.save (scripted or traced), relative to the "
        "scenario file; forward(x) -> logits, or forward(x, y) -> loss with loss module",
     R"json({"type": "string", "minLength": 1})json"},
    {"workload", "input_shape", "torchscript (required): the per-sample shape the module takes, e.g. [1, 28, 28]; must be the "
        "data source's",
     R"json({"type": "array", "items": {"type": "integer", "minimum": 1}, "minItems": 1, "maxItems": 4})json"},
    {"workload", "loss", "torchscript: cross_entropy (softmax cross-entropy on forward(x)'s logits) or module (forward(x, "
        "y) returns the mean loss, or (loss, logits))"},
    {"workload", "cost", "torchscript: where its compute costs come from (echoed; the one choice): its convolutions' and "
        "matrix products' FLOPs and bytes in a probe forward"},
    {"workload", "layers", "gpt: transformer blocks L"},
    {"workload", "heads", "gpt: attention heads (a divisor of width)"},
    {"workload", "width", "gpt: the residual stream's width d (MLP 4 d)"},
    {"workload", "context", "gpt: T, tokens per training window and learned positions; text: at most a rank's shard and the "
        "held-out part; tokens: at least the rows' length"},
    {"workload", "vocab", "gpt: V, the token vocabulary (byte-level 256 by default), at least the data's tokens"},
    {"workload", "eval_windows", "gpt: windows (text) or rows (tokens) of the training and held-out sets evaluated, evenly spaced; "
        "0: all"},
    {"workload", "text_path", "data text: a text file or a folder of them (recursively, path order; hidden and NUL-holding "
        "files skipped, each file once; relative to the scenario file); selects data text when data is "
        "absent"},
    {"workload", "holdout", "data text: the fraction of every file (its last bytes) held out for the test loss"},
    {"workload", "tokens_file", "data tokens: a torch.save({\"x\": X, \"y\": Y}) file of int64 [N, T] input tokens and targets "
        "(optional test_x, test_y; relative to the scenario file); selects data tokens when data is "
        "absent"},
  };
  return docs;
}

}  // namespace dtsim::workloads
