#include "workloads/gpt_workload.hpp"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/grad_mode.h>
#include <torch/autograd.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "workloads/workload_registry.hpp"

namespace dtsim::workloads {

namespace {

// Whole windows of `len` tokens that fit in `positions`, and the `count` of them spread evenly
// (0: all): their first positions.
std::vector<std::int64_t> eval_offsets(std::int64_t positions, std::int64_t len, std::int64_t count) {
  const std::int64_t n = positions / len;
  const std::int64_t w = count == 0 ? n : std::min(count, n);
  std::vector<std::int64_t> out;
  for (std::int64_t j = 0; j < w; ++j) out.push_back(j * n / w * len);
  return out;
}

constexpr std::int64_t kEvalChunk = 64;  // sequences per evaluation forward

}  // namespace

GptWorkload::GptWorkload(const GptSpec& spec, std::shared_ptr<const LabelledData> data, std::int64_t batch_size,
                         std::uint64_t seed, int rank, int ranks)
    : spec_(spec),
      data_(std::move(data)),
      batch_(batch_size),
      gen_(at::detail::createCPUGenerator(seed * 1000003ULL + 7919ULL * static_cast<std::uint64_t>(rank + 1) + 0x67ULL)) {
  if (batch_size < 1) throw std::invalid_argument(fmt::format("/workload/batch_size: expected >= 1, got {}", batch_size));
  if (spec.width % spec.heads != 0)
    throw std::invalid_argument(fmt::format("/workload/heads: {} heads do not divide width {}", spec.heads, spec.width));
  stream_ = data_->train_x.dim() == 1;
  const std::int64_t total = data_->train_x.size(0);
  begin_ = total * rank / ranks;
  end_ = total * (rank + 1) / ranks;
  if (stream_) {
    window_ = spec.context;
    if (end_ - begin_ < window_)
      throw std::invalid_argument(fmt::format("/workload/context: rank {}'s shard holds {} positions, fewer than a window "
                                              "of context {}",
                                              rank, end_ - begin_, window_));
  } else {
    window_ = data_->train_x.size(1);
    if (window_ > spec.context)
      throw std::invalid_argument(
          fmt::format("/workload/context: rows of {} tokens, longer than the context {}", window_, spec.context));
    rows_ = ShardBatches(at::arange(begin_, end_, at::kLong), batch_size);
  }
  if (data_->classes > spec.vocab)
    throw std::invalid_argument(
        fmt::format("/workload/vocab: the data has tokens up to {}, the vocabulary {}", data_->classes - 1, spec.vocab));
  for (const auto& t : gpt_tensors(spec)) names_.push_back(t.name);
  initial_ = gpt_initial_parameters(spec, seed);
  const auto forward = gpt_stage_forward_costs(spec, stream_ ? batch_ : rows_.batch(), window_);
  const auto params = gpt_stage_params(spec);
  for (std::size_t k = 0; k < params.size(); ++k) {
    stages_.push_back({params[k], {2.0 * forward[k].flops, 2.0 * forward[k].bytes}});
    forward_cost_.flops += forward[k].flops;
    forward_cost_.bytes += forward[k].bytes;
  }
}

std::vector<at::Tensor> GptWorkload::initial_parameters() const {
  std::vector<at::Tensor> out;
  for (const auto& p : initial_) out.push_back(p.to(data_->train_x.device(), /*non_blocking=*/false, /*copy=*/true));
  return out;
}

sim::ComputeCost GptWorkload::backward_cost() const {
  sim::ComputeCost c;
  for (const auto& s : stages_) {
    c.flops += s.cost.flops;
    c.bytes += s.cost.bytes;
  }
  return c;
}

DataShard GptWorkload::data_shard() const {
  // An epoch of text: the shard's positions read once, a window's worth per sample.
  if (stream_) return {(end_ - begin_) / window_, batch_};
  return {rows_.samples(), rows_.batch()};
}

void GptWorkload::next_batch() {
  const auto device = data_->train_x.device();
  at::Tensor rows;
  if (stream_) {
    const auto starts = at::randint(begin_, end_ - window_ + 1, {batch_}, gen_, at::kLong);
    const auto idx = (starts.unsqueeze(1) + at::arange(window_, at::kLong)).view({-1}).to(device);
    tokens_ = data_->train_x.index_select(0, idx).view({batch_, window_}).to(at::kLong);
    targets_ = data_->train_y.index_select(0, idx).view({batch_, window_}).to(at::kLong);
  } else {
    const auto idx = rows_.next(gen_, device);
    tokens_ = data_->train_x.index_select(0, idx);
    targets_ = data_->train_y.index_select(0, idx);
  }
}

double GptWorkload::forward(const std::vector<at::Tensor>& params) {
  next_batch();
  leaves_.clear();
  for (const auto& p : params) leaves_.push_back(p.detach().requires_grad_(true));
  loss_ = gpt_loss(spec_, leaves_, tokens_, targets_);
  return loss_.item<double>();
}

void GptWorkload::backward(const std::vector<at::Tensor>& params, std::vector<at::Tensor>& grads) {
  for (std::size_t k = 0; k < stages_.size(); ++k) backward_stage(k, params, grads);
}

void GptWorkload::backward_stage(std::size_t k, const std::vector<at::Tensor>&, std::vector<at::Tensor>& grads) {
  if (k >= stages_.size()) throw std::out_of_range(fmt::format("gpt: backward stage {} of {}", k, stages_.size()));
  if (k == 0) {
    if (!loss_.defined()) throw std::logic_error("gpt: backward before forward");
    loss_.backward();
    loss_ = at::Tensor();
  }
  if (leaves_.empty()) throw std::logic_error("gpt: a backward stage after the last");
  for (auto i : stages_[k].params) grads[i].copy_(leaves_[i].grad());
  if (k + 1 == stages_.size()) leaves_.clear();
}

Evaluation GptWorkload::evaluate_on(const std::vector<at::Tensor>& params, const at::Tensor& x,
                                    const at::Tensor& y) const {
  at::NoGradGuard no_grad;
  const auto device = x.device();
  std::vector<std::int64_t> offsets;
  if (stream_) {
    offsets = eval_offsets(x.size(0), window_, spec_.eval_windows);
  } else {
    const std::int64_t n = x.size(0), w = spec_.eval_windows == 0 ? n : std::min(spec_.eval_windows, n);
    for (std::int64_t j = 0; j < w; ++j) offsets.push_back(j * n / w);
  }
  double loss_sum = 0.0, correct = 0.0, positions = 0.0;
  for (std::size_t a = 0; a < offsets.size(); a += kEvalChunk) {
    const auto b = std::min(offsets.size(), a + static_cast<std::size_t>(kEvalChunk));
    const auto starts = at::tensor(std::vector<std::int64_t>(offsets.begin() + static_cast<std::ptrdiff_t>(a),
                                                             offsets.begin() + static_cast<std::ptrdiff_t>(b)),
                                   at::kLong);
    const auto rows = static_cast<std::int64_t>(b - a);
    at::Tensor tokens, targets;
    if (stream_) {
      const auto idx = (starts.unsqueeze(1) + at::arange(window_, at::kLong)).view({-1}).to(device);
      tokens = x.index_select(0, idx).view({rows, window_}).to(at::kLong);
      targets = y.index_select(0, idx).view({rows, window_}).to(at::kLong);
    } else {
      tokens = x.index_select(0, starts.to(device));
      targets = y.index_select(0, starts.to(device));
    }
    at::Tensor right;
    const auto loss = gpt_loss(spec_, params, tokens, targets, &right);
    const double count = static_cast<double>(tokens.numel());
    loss_sum += loss.item<double>() * count;
    correct += static_cast<double>(right.item<std::int64_t>());
    positions += count;
  }
  if (positions == 0.0) return {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::quiet_NaN()};
  return {loss_sum / positions, correct / positions};
}

Evaluation GptWorkload::evaluate(const std::vector<at::Tensor>& params) const {
  return evaluate_on(params, data_->train_x, data_->train_y);
}

std::optional<Evaluation> GptWorkload::evaluate_test(const std::vector<at::Tensor>& params) const {
  if (!data_->has_test()) return std::nullopt;
  if (stream_ && data_->test_x.size(0) < window_) return std::nullopt;
  return evaluate_on(params, data_->test_x, data_->test_y);
}

// --- the registry entry of "gpt" (workload_registry.hpp) ---------------------------------

namespace {

using config::ErrorKind;
using config::ScenarioError;

struct GptData : WorkloadData {
  std::shared_ptr<const LabelledData> data;
};

void parse(config::ObjectReader& w, WorkloadSpec& spec, const WorkloadContext& ctx) {
  GptSpec g;
  g.layers = w.integer("layers", g.layers, 1, 1024);
  g.heads = w.integer("heads", g.heads, 1, 1 << 16);
  g.width = w.integer("width", g.width, 1, 1 << 20);
  if (g.width % g.heads != 0)
    throw ScenarioError(w.where("heads"), ErrorKind::inconsistent,
                        fmt::format("expected a divisor of width ({}), got {}", g.width, g.heads));
  g.context = w.integer("context", g.context, 1, 1 << 20);
  g.vocab = w.integer("vocab", g.vocab, 2, std::int64_t{1} << 31);
  g.eval_windows = w.integer("eval_windows", g.eval_windows, 0, config::kIntMax);
  spec.batch_size = w.integer("batch_size", 16, 1, config::kIntMax);
  const auto& data = spec.data;
  const auto shape = data_source_entry(data.source).shape(data);
  if (shape.classes > g.vocab)
    throw ScenarioError(w.where("vocab"), ErrorKind::inconsistent,
                        fmt::format("expected at least the data's {} tokens, got {}", shape.classes, g.vocab));
  if (data.source == "text") {
    const std::int64_t shard = shape.train / ctx.ranks;
    if (shard < g.context)
      throw ScenarioError(w.where("context"), ErrorKind::inconsistent,
                          fmt::format("expected at most a rank's shard of the text ({} bytes over {} ranks: {}), got {}",
                                      shape.train + 1, ctx.ranks, shard, g.context));
    if (shape.test > 0 && shape.test < g.context)
      throw ScenarioError(w.where("context"), ErrorKind::inconsistent,
                          fmt::format("expected at most the held-out text's {} positions (raise holdout), got {}",
                                      shape.test, g.context));
  } else if (!shape.sample.empty() && shape.sample[0] > g.context) {
    throw ScenarioError(w.where("context"), ErrorKind::inconsistent,
                        fmt::format("expected at least the tokens file's rows of {} tokens, got {}",
                                    shape.sample[0], g.context));
  }
  spec.settings = g;
}

void to_json(const WorkloadSpec& spec, nlohmann::json& out) {
  const auto& g = settings_of<GptSpec>(spec);
  out["layers"] = g.layers;
  out["heads"] = g.heads;
  out["width"] = g.width;
  out["context"] = g.context;
  out["vocab"] = g.vocab;
  out["batch_size"] = spec.batch_size;
  out["eval_windows"] = g.eval_windows;
}

std::shared_ptr<const WorkloadData> load(const WorkloadSpec& spec, std::uint64_t seed) {
  auto d = std::make_shared<GptData>();
  d->data = on_device(load_data_source(workload_data(spec), seed), spec.device,
                      [](const LabelledData& from, LabelledData& to, at::Device device) {
                        to = from;
                        if (from.train_x.dim() == 1) {  // two views of one stream: move it once
                          const auto stream = at::cat({from.train_x, from.train_y.narrow(0, from.train_y.size(0) - 1, 1)})
                                                  .to(device);
                          to.train_x = stream.narrow(0, 0, from.train_x.size(0));
                          to.train_y = stream.narrow(0, 1, from.train_x.size(0));
                          if (from.has_test()) {
                            const auto test = at::cat({from.test_x, from.test_y.narrow(0, from.test_y.size(0) - 1, 1)})
                                                  .to(device);
                            to.test_x = test.narrow(0, 0, from.test_x.size(0));
                            to.test_y = test.narrow(0, 1, from.test_x.size(0));
                          }
                          return;
                        }
                        to.train_x = from.train_x.to(device);
                        to.train_y = from.train_y.to(device);
                        to.test_x = from.test_x.defined() ? from.test_x.to(device) : at::Tensor();
                        to.test_y = from.test_y.defined() ? from.test_y.to(device) : at::Tensor();
                      });
  return d;
}

std::unique_ptr<Workload> make(const WorkloadSpec& spec, std::shared_ptr<const WorkloadData> data, std::uint64_t seed,
                               int rank, int ranks) {
  return std::make_unique<GptWorkload>(settings_of<GptSpec>(spec), data_for<GptData>(data, spec.type).data, spec.batch_size, seed, rank,
                                       ranks);
}

WorkloadFootprint footprint(const WorkloadSpec& spec, int ranks) {
  const auto& g = settings_of<GptSpec>(spec);
  const auto tensors = gpt_tensors(g);
  WorkloadFootprint w;
  w.elements = static_cast<double>(gpt_parameter_count(g));
  for (const auto& stage : gpt_stage_params(g))
    for (auto i : stage) {
      std::int64_t n = 1;
      for (auto s : tensors[i].shape) n *= s;
      w.sizes_backward.push_back(n);
    }
  const auto data = workload_data(spec);
  const auto shape = data_source_entry(data.source).shape(data);
  const double d = static_cast<double>(g.width), T = static_cast<double>(g.context), V = static_cast<double>(g.vocab);
  const double tokens_per_row = shape.sample.empty() ? 1.0 : static_cast<double>(shape.sample_elements());
  w.data_bytes = shape.file_bytes + static_cast<double>(shape.train + shape.test) * tokens_per_row * 8;
  // What autograd keeps per sequence (about 20 d + 3 heads T floats a token per block, and
  // the logits twice), times two for the gradients; the evaluation's chunk of 64 sequences.
  const double per_sequence = T * (static_cast<double>(g.layers) * (20.0 * d + 3.0 * static_cast<double>(g.heads) * T) +
                                   2.0 * V) * 4.0;
  w.per_rank_bytes = 2.0 * static_cast<double>(std::max<std::int64_t>(spec.batch_size, kEvalChunk)) * per_sequence +
                     2.0 * w.elements * 4.0;
  (void)ranks;
  return w;
}

}  // namespace

const WorkloadEntry& gpt_entry() {
  static const WorkloadEntry entry{
      .name = "gpt",
      .description = "a GPT-2-style decoder (nanoGPT's shape: learned positions, pre-LayerNorm blocks, tied head) "
                     "under autograd, next-token loss on text bytes or token rows (real data, held-out loss)",
      .fields = with_data_fields({"layers", "heads", "width", "context", "vocab", "batch_size", "eval_windows"},
                                 sources_yielding(SampleKind::token_windows, "text")),
      .data_sources = sources_yielding(SampleKind::token_windows, "text"),
      .parse = parse,
      .to_json = to_json,
      .load_data = load,
      .make = make,
      .footprint = footprint};
  return entry;
}

}  // namespace dtsim::workloads
