#include "algorithms/sparseloco.hpp"

#include <algorithm>
#include <cmath>

#include "algorithms/apply_gradient.hpp"
#include "algorithms/diloco.hpp"
#include "algorithms/gossip.hpp"
#include "algorithms/registry.hpp"

namespace dtsim::algorithms {

namespace llm = kernels::llm;
using config::kInf;
using config::ObjectReader;

namespace {

// chunk_layout's argument: a vector's chunk holds as many elements as a matrix's tile.
std::int64_t chunk_parameter(const SparseLocoSettings& s, at::IntArrayRef shape) {
  return shape.size() >= 2 ? s.chunk : s.chunk * s.chunk;
}

}  // namespace

llm::ChunkLayout sparseloco_layout(const SparseLocoSettings& s, at::IntArrayRef shape) {
  return llm::chunk_layout(shape, chunk_parameter(s, shape));
}

std::int64_t sparseloco_k(const SparseLocoSettings& s, const llm::ChunkLayout& layout) {
  const auto E = layout.elements();
  return std::clamp<std::int64_t>(std::llround(s.density * static_cast<double>(E)), 1, E);
}

std::uint64_t sparseloco_bits(const SparseLocoSettings& s, const std::vector<std::vector<std::int64_t>>& shapes) {
  std::uint64_t bits = 0;
  for (const auto& shape : shapes) {
    const auto layout = sparseloco_layout(s, shape);
    const auto chunks = static_cast<std::uint64_t>(layout.chunks());
    const auto k = static_cast<std::uint64_t>(sparseloco_k(s, layout));
    bits += chunks * k * (2 + static_cast<std::uint64_t>(layout.index_bits())) + 32 * chunks;
  }
  return bits;
}

namespace {

at::Tensor bytes_as(const at::Tensor& bytes, at::ScalarType type) { return bytes.clone().view(type); }

std::int64_t index_word_count(const llm::ChunkLayout& l, std::int64_t k) {
  return (l.chunks() * k * l.index_bits() + 31) / 32;
}

}  // namespace

SparseLoco::SparseLoco(const AlgorithmSpec& spec)
    : s_(settings_of<SparseLocoSettings>(spec)), inner_(make_rank_optimizer(s_.inner_optimizer, spec)) {}

std::uint64_t SparseLoco::state_bytes() const { return tensor_bytes(theta_) + tensor_bytes(e_) + inner_->state_bytes(); }

void SparseLoco::first_step(const std::vector<at::Tensor>& params) {
  for (const auto& p : params) {  // theta = x_0, e_r = 0
    theta_.push_back(p.detach().clone());
    e_.push_back(at::zeros_like(p));
    delta_.push_back(at::zeros_like(p));
    sent_.push_back(at::zeros_like(p));
    mean_.push_back(at::zeros_like(p));
    layouts_.push_back(sparseloco_layout(s_, p.sizes()));
    k_.push_back(sparseloco_k(s_, layouts_.back()));
  }
}

std::int64_t SparseLoco::message_bytes(std::size_t i) const {
  const auto& l = layouts_[i];
  return 4 * l.chunks() + 4 * index_word_count(l, k_[i]) + (l.chunks() * k_[i] + 3) / 4;
}

// [scales][index words][2-bit codes]
at::Tensor SparseLoco::encode(std::size_t i) {
  auto top = llm::sparse_encode(e_[i], chunk_parameter(s_, e_[i].sizes()), k_[i]);
  const auto q = llm::two_bit_encode(top.values);
  top.values = llm::two_bit_decode(q);
  llm::sparse_decode(top, sent_[i]);
  return at::cat({q.scales.view(at::kByte), top.index_words.view(at::kByte), q.codes});
}

void SparseLoco::decode_add(const at::Tensor& m, std::size_t i, at::Tensor& out, bool accumulate) const {
  const auto& l = layouts_[i];
  const auto k = k_[i];
  const auto words = index_word_count(l, k);
  llm::TwoBitPayload q;
  q.rows = l.chunks();
  q.k = k;
  q.scales = bytes_as(m.narrow(0, 0, 4 * l.chunks()), at::kFloat);
  q.codes = m.narrow(0, 4 * l.chunks() + 4 * words, (l.chunks() * k + 3) / 4);
  llm::TopKPayload top;
  top.layout = l;
  top.k = k;
  top.index_words = bytes_as(m.narrow(0, 4 * l.chunks(), 4 * words), at::kInt);
  top.values = llm::two_bit_decode(q);
  llm::sparse_decode(top, out, 1.0f, accumulate);
}

sim::Task<std::uint64_t> SparseLoco::step(StepContext& ctx) {
  auto& comm = ctx.comm;
  const auto d = total_elements(ctx.params);
  const auto dd = static_cast<double>(d);
  {
    auto phase = ctx.timer.phase("inner/update");
    co_await comm.compute(inner_->cost(d), [&] {
      if (theta_.empty()) first_step(ctx.params);
      inner_->step(ctx.params, ctx.grads, ctx.lr);
    });
  }
  if (ctx.local_index % s_.local_steps != 0) co_return 0;
  {
    auto phase = ctx.timer.phase("outer/pseudo_gradient");
    co_await comm.compute(elementwise_cost(d, 3.0, 24.0), [&] {
      for (std::size_t i = 0; i < theta_.size(); ++i) {
        at::sub_out(delta_[i], theta_[i], ctx.params[i]);
        e_[i].mul_(s_.error_decay).add_(delta_[i]);
      }
    });
  }
  std::vector<std::vector<std::int64_t>> shapes;
  {
    auto phase = ctx.timer.phase("outer/compress");
    // Top-k per chunk reads every element a few times; the decode of what is sent and
    // e_r -= Delta_hat_r are two more passes.
    co_await comm.compute(elementwise_cost(d, 12.0, 28.0), [&] {
      std::vector<at::Tensor> parts;
      for (std::size_t i = 0; i < theta_.size(); ++i) {
        parts.push_back(encode(i));
        e_[i].sub_(sent_[i]);
        shapes.push_back(theta_[i].sizes().vec());
      }
      message_ = at::cat(parts);
    });
  }
  {
    auto phase = ctx.timer.phase("outer/exchange");
    co_await comm.all_gather(message_, gathered_);
  }
  {
    auto phase = ctx.timer.phase("outer/update");
    const double R = static_cast<double>(comm.size());
    co_await comm.compute({2.0 * R * dd + 2.0 * dd, R * 8.0 * dd + 20.0 * dd}, [&] {
      for (std::size_t r = 0; r < gathered_.size(); ++r) {
        std::int64_t byte = 0;
        for (std::size_t i = 0; i < theta_.size(); ++i) {
          const auto bytes = message_bytes(i);
          decode_add(gathered_[r].narrow(0, byte, bytes), i, mean_[i], r > 0);
          byte += bytes;
        }
      }
      for (std::size_t i = 0; i < theta_.size(); ++i) {
        mean_[i].div_(R);
        theta_[i].add_(mean_[i], -s_.outer_lr);
        ctx.params[i].copy_(theta_[i]);
      }
    });
  }
  co_return sparseloco_bits(s_, shapes);
}

const AlgorithmEntry& sparseloco_entry() {
  static const AlgorithmEntry entry{
      .name = "sparseloco",
      .description = "SparseLoCo: H inner AdamW steps, then the outer gradient's top-k per chunk in 2 bits with error "
                     "feedback, all-gathered and averaged (no outer momentum)",
      .paper = "Communication Efficient LLM Pre-training with SparseLoCo, arXiv 2508.15706 (2025)",
      .fields = {"lr", "lr_schedule", "local_steps", "inner_optimizer", "outer_lr", "error_decay", "chunk", "density"},
      .parse =
          [](ObjectReader& a, AlgorithmSpec& spec, const SpecContext&) {
            SparseLocoSettings s;
            parse_inner_fields(a, s.local_steps, s.inner_optimizer);
            s.outer_lr = a.number("outer_lr", s.outer_lr, 0.0, kInf, true);
            s.error_decay = a.number("error_decay", s.error_decay, 0.0, 1.0);
            s.chunk = a.integer("chunk", s.chunk, 1, 64);
            s.density = a.number("density", s.density, 0.0, 1.0, true);
            spec.settings = s;
          },
      .to_json =
          [](const AlgorithmSpec& spec, nlohmann::json& out) {
            const auto& s = settings_of<SparseLocoSettings>(spec);
            inner_fields_json(s.local_steps, s.inner_optimizer, out);
            out["outer_lr"] = s.outer_lr;
            out["error_decay"] = s.error_decay;
            out["chunk"] = s.chunk;
            out["density"] = s.density;
          },
      .make = [](const AlgorithmSpec& spec, const net::Topology&, int) -> std::unique_ptr<Algorithm> {
        return std::make_unique<SparseLoco>(spec);
      },
      .memory = [](const AlgorithmSpec& spec, std::span<const std::int64_t>, std::int64_t steps) {
        const auto& s = settings_of<SparseLocoSettings>(spec);
        MemoryFootprint f;
        // theta, e_r, Delta_r, Delta_hat_r, the mean of the Delta_hat, the inner optimizer's
        // extra moments; the chunked copies top-k makes are scratch of one tensor.
        f.model_buffers = 5.0 + extra_optimizer_buffers(s.inner_optimizer);
        f.gathers = true;
        f.payload_fraction = (2.0 + 12.0) * s.density / 32.0 + 1.0 / (32.0 * static_cast<double>(s.chunk * s.chunk));
        f.collectives_per_step = outer_step_share(s.local_steps, steps);
        return f;
      }};
  return entry;
}

}  // namespace dtsim::algorithms
