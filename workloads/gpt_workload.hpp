// The workload type "gpt": gpt_model.hpp's decoder trained on next-token prediction under
// autograd, on the data sources "text" (a byte stream, text_data.hpp) or "tokens" (rows of a
// token tensors file).
//
// Batches: rank r of R owns a contiguous shard of the training positions (text: positions
// [floor(r P / R), floor((r + 1) P / R)) of the P positions that have a next byte; tokens:
// rows [floor(r N / R), floor((r + 1) N / R))). Text: each step reads `batch_size` windows of
// context + 1 bytes starting at offsets drawn uniformly (with replacement) from the shard's
// valid starts, inputs the first context bytes and targets the next-byte shift; tokens: rows
// drawn as the image models draw samples (ShardBatches: a fresh random order each local
// epoch). Draws come from a CPU generator seeded by (seed, rank), so runs repeat.
//
// Parameters: the algorithm owns them; forward(params) makes autograd leaves that share their
// storage (Tensor::detach, no copy) and records the loss; backward stage 0 runs the one
// backward call, every stage copies its tensors' gradients into the algorithm's. Stages:
// gpt_stage_params (ln_f with the head and loss, the blocks last to first, the embeddings),
// each costing twice its part's forward.
//
// Evaluation (evaluate / evaluate_test): the mean cross-entropy per token over `eval_windows`
// windows of the training stream / the held-out stream (text: non-overlapping windows of
// context + 1 bytes, every floor(n / W)-th of the n that fit, from the start; tokens: rows
// floor(j N / W)), and as accuracy the fraction of those positions whose arg-max prediction is
// the next token. Perplexity is exp(loss).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "workloads/gpt_model.hpp"
#include "workloads/labelled_data.hpp"
#include "workloads/shard_batches.hpp"
#include "workloads/workload.hpp"

namespace dtsim::workloads {

class GptWorkload final : public Workload {
 public:
  // `data`: text (train_x 1-D uint8, train_y its next bytes) or tokens (train_x, train_y
  // int64 [N, S], S <= context); throws std::invalid_argument when a shard cannot hold a
  // window or a token is outside the vocabulary.
  GptWorkload(const GptSpec& spec, std::shared_ptr<const LabelledData> data, std::int64_t batch_size,
              std::uint64_t seed, int rank, int ranks);

  std::vector<at::Tensor> initial_parameters() const override;
  std::vector<std::string> parameter_names() const override { return names_; }
  double forward(const std::vector<at::Tensor>& params) override;
  void backward(const std::vector<at::Tensor>& params, std::vector<at::Tensor>& grads) override;
  sim::ComputeCost forward_cost() const override { return forward_cost_; }
  sim::ComputeCost backward_cost() const override;
  DataShard data_shard() const override;
  std::vector<BackwardStage> backward_stages() const override { return stages_; }
  void backward_stage(std::size_t k, const std::vector<at::Tensor>& params, std::vector<at::Tensor>& grads) override;
  Evaluation evaluate(const std::vector<at::Tensor>& params) const override;
  std::optional<Evaluation> evaluate_test(const std::vector<at::Tensor>& params) const override;

  // The last forward's inputs and targets [batch, tokens] (int64, on the data's device).
  const at::Tensor& last_tokens() const { return tokens_; }
  const at::Tensor& last_targets() const { return targets_; }
  // The rank's shard: [begin, end) of the training positions (text) or rows (tokens).
  std::int64_t shard_begin() const { return begin_; }
  std::int64_t shard_end() const { return end_; }
  bool is_stream() const { return stream_; }
  std::int64_t window() const { return window_; }  // tokens per training sequence

 private:
  void next_batch();
  Evaluation evaluate_on(const std::vector<at::Tensor>& params, const at::Tensor& x, const at::Tensor& y) const;

  GptSpec spec_;
  std::shared_ptr<const LabelledData> data_;
  bool stream_ = true;
  std::int64_t window_ = 0, batch_ = 0, begin_ = 0, end_ = 0;
  std::vector<std::string> names_;
  std::vector<at::Tensor> initial_;  // CPU fp32
  std::vector<BackwardStage> stages_;
  sim::ComputeCost forward_cost_;
  at::Generator gen_;
  ShardBatches rows_;  // tokens only
  at::Tensor tokens_, targets_, loss_;
  std::vector<at::Tensor> leaves_;  // of the last forward, until the last backward stage
};

}  // namespace dtsim::workloads
