#include "algorithms/demo.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "algorithms/apply_gradient.hpp"
#include "algorithms/gossip.hpp"
#include "algorithms/registry.hpp"

namespace dtsim::algorithms {

namespace llm = kernels::llm;

Demo::Demo(const AlgorithmSpec& spec)
    : settings_(settings_of<DemoSettings>(spec)),
      weight_decay_(spec.optimizer.weight_decay),
      weight_decay_mask_(spec.optimizer.weight_decay_mask) {}

std::uint64_t Demo::state_bytes() const { return tensor_bytes(deltas_); }

// The layouts, message offsets and bit counts depend on the shapes only: fixed at the first step.
void Demo::prepare(const std::vector<at::Tensor>& params) {
  for (const auto& p : params) {
    const auto layout = llm::chunk_layout(p.sizes(), settings_.compression_chunk);
    const std::int64_t k = std::min(settings_.compression_topk, layout.elements());
    const std::int64_t pairs = layout.chunks() * k;
    layouts_.push_back(layout);
    k_.push_back(k);
    value_words_.push_back(pairs);
    index_words_.push_back((pairs * layout.index_bits() + 31) / 32);
    n_bits_ += static_cast<std::uint64_t>(pairs * (32 + layout.index_bits()));
    const double padded = static_cast<double>(layout.chunks() * layout.elements());
    padded_elements_ += padded;
    // A 2-D DCT of a tr x tc tile: tr + tc multiply-adds per element.
    transform_flops_ += 2.0 * padded * static_cast<double>(layout.tile_rows + layout.tile_cols);
    deltas_.push_back(at::zeros_like(p, at::MemoryFormat::Contiguous));
    averages_.push_back(at::zeros_like(p, at::MemoryFormat::Contiguous));
  }
  sent_.resize(params.size());
}

sim::Task<std::uint64_t> Demo::step(StepContext& ctx) {
  auto& comm = ctx.comm;
  if (layouts_.empty()) prepare(ctx.params);
  const std::size_t tensors = ctx.params.size();
  const double d = static_cast<double>(total_elements(ctx.params));
  const double ranks = static_cast<double>(comm.size());
  const double lr = ctx.lr;
  {
    auto phase = ctx.timer.phase("sync/apply_grad");
    co_await comm.compute({3.0 * d, 20.0 * d}, [&] {
      for (std::size_t i = 0; i < tensors; ++i) {
        const bool decays = weight_decay_ != 0.0 && (weight_decay_mask_.empty() || weight_decay_mask_[i]);
        if (decays) ctx.params[i].mul_(1.0 - lr * weight_decay_);
        deltas_[i].mul_(settings_.compression_decay).add_(ctx.grads[i], lr);
      }
    });
  }
  {
    // The forward transform, the top-k, the inverse of what is kept; the delta read and written.
    auto phase = ctx.timer.phase("sync/compress");
    co_await comm.compute({2.0 * transform_flops_ + 8.0 * padded_elements_, 24.0 * padded_elements_}, [&] {
      std::vector<at::Tensor> parts;
      for (std::size_t i = 0; i < tensors; ++i) {
        sent_[i] = llm::dct_encode(deltas_[i], settings_.compression_chunk, settings_.compression_topk);
        llm::dct_decode(sent_[i], deltas_[i], -1.0f, /*accumulate=*/true);
        parts.push_back(sent_[i].values.reshape({-1}).view(at::kInt));
        parts.push_back(sent_[i].index_words);
      }
      message_ = at::cat(parts);
    });
  }
  {
    auto phase = ctx.timer.phase("sync/sync");
    co_await comm.all_gather(message_, gathered_);
  }
  {
    // Every rank's pairs scattered and summed, one inverse transform of the average.
    auto phase = ctx.timer.phase("sync/decompress");
    const double pairs = static_cast<double>(message_.numel());
    co_await comm.compute({ranks * pairs + transform_flops_, ranks * 12.0 * pairs + 12.0 * padded_elements_}, [&] {
      std::vector<at::Tensor> coefficients(tensors);
      for (const auto& words : gathered_) {
        std::int64_t offset = 0;
        for (std::size_t i = 0; i < tensors; ++i) {
          llm::TopKPayload q;
          q.layout = layouts_[i];
          q.k = k_[i];
          q.values = words.narrow(0, offset, value_words_[i]).view(at::kFloat).view({layouts_[i].chunks(), k_[i]});
          q.index_words = words.narrow(0, offset + value_words_[i], index_words_[i]);
          offset += value_words_[i] + index_words_[i];
          if (coefficients[i].defined())
            coefficients[i].add_(llm::topk_scatter(q));
          else
            coefficients[i] = llm::topk_scatter(q);
        }
      }
      for (std::size_t i = 0; i < tensors; ++i) {
        coefficients[i].div_(ranks);
        averages_[i] = llm::from_chunks(llm::dct_chunks(coefficients[i], layouts_[i], /*inverse=*/true), layouts_[i]);
      }
    });
  }
  {
    auto phase = ctx.timer.phase("sync/apply_grad");
    co_await comm.compute({2.0 * d, 12.0 * d}, [&] {
      for (std::size_t i = 0; i < tensors; ++i) ctx.params[i].add_(at::sign(averages_[i]), -lr);
    });
  }
  co_return n_bits_;
}

namespace {

using config::ErrorKind;
using config::ScenarioError;

void parse_demo(config::ObjectReader& a, AlgorithmSpec& spec, const SpecContext&) {
  DemoSettings s;
  s.compression_decay = a.number_below("compression_decay", s.compression_decay, 0.0, 1.0);
  // A tile of chunk x chunk elements must fit the kernels' 4096 (kernels/llm_codecs.hpp).
  s.compression_chunk = a.integer("compression_chunk", s.compression_chunk, 1, 64);
  s.compression_topk = a.integer("compression_topk", s.compression_topk, 1, config::kIntMax);
  const std::int64_t tile = s.compression_chunk * s.compression_chunk;
  if (s.compression_topk > tile)
    throw ScenarioError(a.where("compression_topk"), ErrorKind::out_of_range,
                        fmt::format("expected at most the {} coefficients of a {} x {} chunk, got {}", tile,
                                    s.compression_chunk, s.compression_chunk, s.compression_topk));
  spec.settings = s;
}

void demo_json(const AlgorithmSpec& spec, nlohmann::json& out) {
  const auto& s = settings_of<DemoSettings>(spec);
  out["compression_decay"] = s.compression_decay;
  out["compression_topk"] = s.compression_topk;
  out["compression_chunk"] = s.compression_chunk;
}

// An upper bound that needs only the tensors' sizes: every tensor taken as a vector, whose
// chunks keep the largest share (min(k, c) of c values, with b-bit indices).
MemoryFootprint demo_memory(const AlgorithmSpec& spec, std::span<const std::int64_t>, std::int64_t) {
  const auto& s = settings_of<DemoSettings>(spec);
  const double c = static_cast<double>(s.compression_chunk);
  const double kept = static_cast<double>(std::min(s.compression_topk, s.compression_chunk));
  const double index_bits = std::max(1.0, std::ceil(std::log2(c)));
  MemoryFootprint f;
  f.model_buffers = 4;  // delta, Q, the summed coefficients and the transform's scratch
  f.gathers = true;     // every rank's payload
  f.payload_fraction = std::min(1.0, kept * (32.0 + index_bits) / (32.0 * c));
  return f;
}

}  // namespace

const AlgorithmEntry& demo_entry() {
  static const AlgorithmEntry entry{
      .name = "demo",
      .description = "DeMo: local momentum, DCT of each chunk, top-k coefficients all-gathered and removed from the "
                     "momentum, sign step on their average, decoupled weight decay",
      .paper = "Peng, Quesnelle, Kingma, arXiv 2411.19870, 2024 (DeMo: Decoupled Momentum Optimization); the authors' demo.py",
      .fields = {"lr", "weight_decay", "lr_schedule", "compression_decay", "compression_topk", "compression_chunk"},
      .parse = parse_demo,
      .to_json = demo_json,
      .make = [](const AlgorithmSpec& spec, const net::Topology&, int) -> std::unique_ptr<Algorithm> {
        return std::make_unique<Demo>(spec);
      },
      .memory = demo_memory};
  return entry;
}

}  // namespace dtsim::algorithms
