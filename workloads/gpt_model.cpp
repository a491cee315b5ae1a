#include "workloads/gpt_model.hpp"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/grad_mode.h>

#include <cmath>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

namespace dtsim::workloads {

namespace {

constexpr std::size_t kPerBlock = 12;  // tensors per block
constexpr double kLayerNormEps = 1e-5;

std::string block(std::int64_t l, const char* tensor) { return fmt::format("transformer.h.{}.{}", l, tensor); }

}  // namespace

std::vector<GptTensor> gpt_tensors(const GptSpec& s) {
  const std::int64_t d = s.width;
  std::vector<GptTensor> t{{"transformer.wte.weight", {s.vocab, d}}, {"transformer.wpe.weight", {s.context, d}}};
  for (std::int64_t l = 0; l < s.layers; ++l) {
    t.push_back({block(l, "ln_1.weight"), {d}});
    t.push_back({block(l, "ln_1.bias"), {d}});
    t.push_back({block(l, "attn.c_attn.weight"), {3 * d, d}});
    t.push_back({block(l, "attn.c_attn.bias"), {3 * d}});
    t.push_back({block(l, "attn.c_proj.weight"), {d, d}});
    t.push_back({block(l, "attn.c_proj.bias"), {d}});
    t.push_back({block(l, "ln_2.weight"), {d}});
    t.push_back({block(l, "ln_2.bias"), {d}});
    t.push_back({block(l, "mlp.c_fc.weight"), {4 * d, d}});
    t.push_back({block(l, "mlp.c_fc.bias"), {4 * d}});
    t.push_back({block(l, "mlp.c_proj.weight"), {d, 4 * d}});
    t.push_back({block(l, "mlp.c_proj.bias"), {d}});
  }
  t.push_back({"transformer.ln_f.weight", {d}});
  t.push_back({"transformer.ln_f.bias", {d}});
  return t;
}

std::int64_t gpt_parameter_count(const GptSpec& s) {
  const std::int64_t d = s.width;
  return s.vocab * d + s.context * d + s.layers * (12 * d * d + 13 * d) + 2 * d;
}

std::vector<at::Tensor> gpt_initial_parameters(const GptSpec& s, std::uint64_t seed) {
  auto gen = at::detail::createCPUGenerator(seed * 0x9e3779b97f4a7c15ULL + 0x6A7ULL);
  const double proj_std = 0.02 / std::sqrt(2.0 * static_cast<double>(s.layers));
  std::vector<at::Tensor> params;
  for (const auto& t : gpt_tensors(s)) {
    auto p = at::empty(t.shape, at::kFloat);
    const auto ends = [&](const char* suffix) { return t.name.ends_with(suffix); };
    if (ends("ln_1.weight") || ends("ln_2.weight") || ends("ln_f.weight"))
      p.fill_(1.0);
    else if (ends(".bias"))
      p.zero_();
    else if (ends("c_proj.weight"))
      p.normal_(0.0, proj_std, gen);
    else
      p.normal_(0.0, 0.02, gen);
    params.push_back(p);
  }
  return params;
}

at::Tensor gpt_loss(const GptSpec& s, const std::vector<at::Tensor>& p, const at::Tensor& tokens,
                    const at::Tensor& targets, at::Tensor* correct) {
  if (p.size() != 4 + kPerBlock * static_cast<std::size_t>(s.layers))
    throw std::invalid_argument(fmt::format("gpt: {} parameter tensors for {} layers", p.size(), s.layers));
  const std::int64_t B = tokens.size(0), S = tokens.size(1), d = s.width, H = s.heads, hd = d / H;
  if (S > s.context) throw std::invalid_argument(fmt::format("gpt: {} tokens, the context is {}", S, s.context));
  const auto& wte = p[0];
  auto pos = at::arange(S, tokens.options());
  auto x = at::embedding(wte, tokens) + at::embedding(p[1], pos);
  // Entries above the diagonal: position i does not see j > i.
  const auto future = at::ones({S, S}, tokens.options().dtype(at::kBool)).triu(1);
  const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
  for (std::int64_t l = 0; l < s.layers; ++l) {
    const auto* w = &p[2 + kPerBlock * static_cast<std::size_t>(l)];
    auto h = at::layer_norm(x, {d}, w[0], w[1], kLayerNormEps);
    const auto qkv = at::linear(h, w[2], w[3]).split(d, 2);
    const auto heads = [&](const at::Tensor& t) { return t.view({B, S, H, hd}).transpose(1, 2); };
    const auto q = heads(qkv[0]), k = heads(qkv[1]), v = heads(qkv[2]);
    auto att = at::matmul(q, k.transpose(-2, -1)) * scale;
    att = at::softmax(att.masked_fill(future, -std::numeric_limits<double>::infinity()), -1);
    const auto y = at::matmul(att, v).transpose(1, 2).contiguous().view({B, S, d});
    x = x + at::linear(y, w[4], w[5]);
    h = at::layer_norm(x, {d}, w[6], w[7], kLayerNormEps);
    x = x + at::linear(at::gelu(at::linear(h, w[8], w[9])), w[10], w[11]);
  }
  const std::size_t f = p.size() - 2;
  x = at::layer_norm(x, {d}, p[f], p[f + 1], kLayerNormEps);
  const auto logits = at::linear(x, wte).view({B * S, s.vocab});
  const auto flat_targets = targets.reshape({B * S});
  if (correct) {
    at::NoGradGuard no_grad;
    *correct = logits.argmax(1).eq(flat_targets).sum();
  }
  return at::cross_entropy_loss(logits, flat_targets);
}

std::vector<std::vector<std::size_t>> gpt_stage_params(const GptSpec& s) {
  const std::size_t n = 4 + kPerBlock * static_cast<std::size_t>(s.layers);
  std::vector<std::vector<std::size_t>> stages{{n - 2, n - 1}};
  for (std::int64_t l = s.layers - 1; l >= 0; --l) {
    std::vector<std::size_t> b;
    for (std::size_t i = 0; i < kPerBlock; ++i) b.push_back(2 + kPerBlock * static_cast<std::size_t>(l) + i);
    stages.push_back(b);
  }
  stages.push_back({1, 0});
  return stages;
}

std::vector<sim::ComputeCost> gpt_stage_forward_costs(const GptSpec& s, std::int64_t batch, std::int64_t tokens) {
  const double n = static_cast<double>(batch) * static_cast<double>(tokens);  // tokens in the batch
  const double d = static_cast<double>(s.width), V = static_cast<double>(s.vocab), T = static_cast<double>(tokens);
  const double H = static_cast<double>(s.heads), B = static_cast<double>(batch);
  auto linear = [&](double in, double out) {
    return sim::ComputeCost{n * (2.0 * in * out + out), 4.0 * n * (in + out) + 4.0 * (in * out + out)};
  };
  auto layernorm = [&]() { return sim::ComputeCost{8.0 * n * d, 8.0 * n * d + 8.0 * d}; };
  auto add = [](sim::ComputeCost& a, const sim::ComputeCost& b) {
    a.flops += b.flops;
    a.bytes += b.bytes;
  };
  std::vector<sim::ComputeCost> costs;
  // ln_f, the tied head (h wte^T; wte read once) and the softmax cross-entropy.
  sim::ComputeCost head = layernorm();
  add(head, {2.0 * n * d * V, 4.0 * (n * d + n * V) + 4.0 * V * d});
  add(head, {5.0 * n * V, 8.0 * n * V});
  costs.push_back(head);
  sim::ComputeCost blk;
  add(blk, layernorm());
  add(blk, linear(d, 3.0 * d));
  const double scores = B * H * T * T;  // per head, T x T
  add(blk, {2.0 * B * T * T * d, 4.0 * (2.0 * n * d + scores)});  // q k^T: read q, k; write the scores
  add(blk, {5.0 * scores, 8.0 * scores});                          // mask and softmax
  add(blk, {2.0 * B * T * T * d, 4.0 * (scores + 2.0 * n * d)});  // att v: read att, v; write y
  add(blk, linear(d, d));
  add(blk, {n * d, 12.0 * n * d});  // residual
  add(blk, layernorm());
  add(blk, linear(d, 4.0 * d));
  add(blk, {8.0 * 4.0 * n * d, 8.0 * 4.0 * n * d});  // GELU
  add(blk, linear(4.0 * d, d));
  add(blk, {n * d, 12.0 * n * d});  // residual
  for (std::int64_t l = 0; l < s.layers; ++l) costs.push_back(blk);
  // Two look-ups and their sum: read two rows, write one, per token.
  costs.push_back({n * d, 12.0 * n * d});
  return costs;
}

}  // namespace dtsim::workloads
