#include "algorithms/sparsified_sgd.hpp"
#include "algorithms/gossip.hpp"
#include "algorithms/registry.hpp"
#include "algorithms/spec_fields.hpp"

#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "kernels/compressor_kinds.hpp"
#include "kernels/error_feedback.hpp"

namespace dtsim::algorithms {

std::uint64_t SparsifiedSgd::state_bytes() const { return quantized_ ? 0 : tensor_bytes({memory_}); }

namespace {
sim::ComputeCost copy_cost(std::int64_t elements) { return {0.0, 8.0 * static_cast<double>(elements)}; }

// The paths, by what the kind does:
// - a sparsifier (sends indices): memory, all-gather of (index, value) pairs;
// - a quantizer that keeps its error in the memory as 1-bit SGD does (Seide et al. 2014:
//   quantize gradient + residual, keep the new residual): memory, all-gather of every
//   rank's quantized gradient;
// - the reference's QSGD branch, which it takes by the compressor's name: every rank
//   quantizes and decodes its gradient, then all-reduces it (no memory).
bool reference_qsgd(std::string_view kind) { return kind == "qsgd"; }

kernels::CompressorSpec rank_compressor(const AlgorithmSpec& spec, int rank) {
  const auto& s = settings_of<SparsifiedSgdSettings>(spec);
  auto c = spec.compressor;
  const auto& kind = kernels::compressor_kind_info(c.kind);
  const bool shared = kind.shares_draws && kind.shares_draws(c);
  // identity, the default kind, is refused: a scenario that names no compressor gets
  // no silent plain all-gather SGD.
  if (kind.name == "identity")
    throw std::invalid_argument(
        "sparsified_sgd: compressor.kind identity sends the gradient whole and keeps nothing back: name a compressor "
        "(top_k, random_k, threshold, a quantizer such as one_bit, or qsgd)");
  if (s.mask_momentum && shared)
    throw std::invalid_argument(fmt::format(
        "sparsified_sgd: mask_momentum needs the sent indices; {} with shared_seed sends none", kind.name));
  if (s.mask_momentum && !kind.sends_indices)
    throw std::invalid_argument(
        fmt::format("sparsified_sgd: mask_momentum needs the sent indices; {} sends every element", kind.name));
  if (s.compress_warmup_epochs > 0.0 && !kind.keeps_k())
    throw std::invalid_argument(fmt::format("sparsified_sgd: compress_warmup_epochs warms up a ratio: it needs top_k or "
                                            "random_k, got {}",
                                            kind.name));
  if (!shared) c.seed += static_cast<std::uint64_t>(rank);
  return c;
}

// "compress_warmup_ratios": fractions kept in (0, 1], strictly decreasing; absent: `fallback`.
std::vector<double> parse_warmup_ratios(config::ObjectReader& a, const std::vector<double>& fallback) {
  const auto* items = a.find("compress_warmup_ratios");
  if (!items) return fallback;
  if (!items->is_array() || items->empty())
    throw config::ScenarioError(a.where("compress_warmup_ratios"), config::ErrorKind::wrong_type,
                                "expected a non-empty array of fractions kept, got " + config::describe(*items));
  std::vector<double> out;
  for (std::size_t i = 0; i < items->size(); ++i) {
    const auto& item = (*items)[i];
    const std::string where = a.where("compress_warmup_ratios") + fmt::format("/{}", i);
    if (!item.is_number())
      throw config::ScenarioError(where, config::ErrorKind::wrong_type,
                                  "expected a fraction kept (a number), got " + config::describe(item));
    const double r = item.get<double>();
    if (!(r > 0.0 && r <= 1.0))
      throw config::ScenarioError(where, config::ErrorKind::out_of_range,
                                  fmt::format("expected a fraction kept in (0, 1], got {}", item.dump()));
    if (!out.empty() && r >= out.back())
      throw config::ScenarioError(where, config::ErrorKind::inconsistent,
                                  fmt::format("expected decreasing fractions (the warm-up sparsifies more and more), got "
                                              "{} after {}",
                                              item.dump(), nlohmann::json(out.back()).dump()));
    out.push_back(r);
  }
  return out;
}

OptimizerSpec clipped(OptimizerSpec optimizer, double clip_grad_norm, int ranks) {
  optimizer.clip_norm = clip_grad_norm / std::sqrt(static_cast<double>(ranks));
  return optimizer;
}
}  // namespace

SparsifiedSgd::SparsifiedSgd(const AlgorithmSpec& spec, int rank, int ranks)
    : optimizer_(clipped(spec.optimizer, settings_of<SparsifiedSgdSettings>(spec).clip_grad_norm, ranks)),
      compressor_(kernels::make_compressor(rank_compressor(spec, rank))),
      quantized_(reference_qsgd(spec.compressor.kind)),
      mask_momentum_(settings_of<SparsifiedSgdSettings>(spec).mask_momentum) {
  const auto& s = settings_of<SparsifiedSgdSettings>(spec);
  if (s.compress_warmup_epochs <= 0.0) return;
  std::vector<double> ratios;
  for (double r : s.compress_warmup_ratios)
    if (r >= compressor_.keep_ratio()) ratios.push_back(r);
  const auto m = static_cast<double>(ratios.size());
  for (std::size_t i = 0; i < ratios.size(); ++i) {
    warmup_.push_back(kernels::make_compressor(kernels::with_keep_ratio(rank_compressor(spec, rank), ratios[i])));
    warmup_ends_.push_back(static_cast<double>(i + 1) / m * s.compress_warmup_epochs);
  }
}

kernels::Compressor& SparsifiedSgd::compressor_at(double epoch) {
  active_.reset();
  if (!warmup_.empty() && std::isnan(epoch))
    throw std::logic_error("sparsified_sgd: the compression-ratio warm-up counts epochs, and this step has none (the "
                           "loader refuses a workload without data)");
  for (std::size_t i = 0; i < warmup_.size(); ++i)
    if (epoch < warmup_ends_[i]) {
      active_ = i;
      break;
    }
  return compressor();
}

double SparsifiedSgd::ratio_at(double epoch) const {
  for (std::size_t i = 0; i < warmup_.size(); ++i)
    if (epoch < warmup_ends_[i]) return warmup_[i].keep_ratio();
  return compressor_.keep_ratio();
}

void SparsifiedSgd::init(const std::vector<at::Tensor>& grads) {
  flat_ = kernels::TensorBuffer(grads);
  segments_.clear();
  for (const auto& g : grads) segments_.push_back(g.numel());
  memory_ = at::zeros_like(flat_.buffer());
  update_ = at::zeros_like(flat_.buffer());
}

// The momentum buffer is zeroed where this rank's payload sent a coordinate (the payload's
// indices, one segment per tensor, read on the host: a copy when it lives on a GPU).
void SparsifiedSgd::zero_momentum_at_sent() {
  auto& buffers = optimizer_.momentum_buffers();
  const auto sent = compressor().sent_indices(payload_);
  const std::uint32_t* indices = sent.indices.data();
  for (std::size_t s = 0; s < sent.counts.size(); ++s) {
    auto& buf = buffers.at(s);
    const std::int64_t count = sent.counts[s];
    if (buf.defined() && buf.is_cpu()) {
      float* b = buf.data_ptr<float>();
      for (std::int64_t j = 0; j < count; ++j) b[indices[j]] = 0.0f;
    } else if (buf.defined()) {  // on a GPU: one index_fill_ of the sent coordinates
      const std::vector<std::int64_t> coordinates(indices, indices + count);
      buf.view({-1}).index_fill_(0, at::tensor(coordinates, at::kLong).to(buf.device()), 0.0);
    }
    indices += count;
  }
}

sim::Task<std::uint64_t> SparsifiedSgd::step(StepContext& ctx) {
  auto& comm = ctx.comm;
  const auto d = total_elements(ctx.grads);
  const double n = static_cast<double>(comm.size());
  const double lr = ctx.lr;
  {
    auto phase = ctx.timer.phase("grad/apply_grad");
    co_await comm.compute(optimizer_.cost(d), [&] { optimizer_.transform_gradient(ctx.params, ctx.grads); });
  }
  {
    auto phase = ctx.timer.phase("grad/recover_hat_params");
    co_await comm.compute(copy_cost(d), [&] {
      if (flat_.count() == 0)
        init(ctx.grads);
      else
        flat_.pack(ctx.grads);
    });
  }
  std::uint64_t n_bits = 0;
  if (quantized_) {
    {
      auto phase = ctx.timer.phase("grad/compress");
      co_await comm.compute({4.0 * static_cast<double>(d), 12.0 * static_cast<double>(d)}, [&] {
        compressor_.compress(flat_.buffer(), segments_, payload_);
        compressor_.decompress(payload_, flat_.buffer());
      });
    }
    {
      auto phase = ctx.timer.phase("grad/sync");
      co_await comm.all_reduce(flat_.buffer(), comm::ReduceOp::Sum);
    }
    {
      auto phase = ctx.timer.phase("grad/recover_info");
      co_await comm.compute({static_cast<double>(d), 8.0 * static_cast<double>(d)},
                            [&] { at::div_out(update_, flat_.buffer(), n); });
    }
    n_bits = compressor_.reference_bits(segments_);
  } else {
    auto& compressor = compressor_at(ctx.epoch);
    {
      auto phase = ctx.timer.phase("grad/compress");
      co_await comm.compute({4.0 * static_cast<double>(d), 16.0 * static_cast<double>(d)}, [&] {
        kernels::error_feedback_step(compressor, memory_, flat_.buffer(), segments_, payload_);
        if (mask_momentum_) zero_momentum_at_sent();
      });
    }
    {
      auto phase = ctx.timer.phase("grad/sync");
      co_await comm.all_gather(payload_.bytes, gathered_);
    }
    const std::int64_t k = compressor.sent_count(payload_);
    {
      auto phase = ctx.timer.phase("grad/recover_info");
      const double received = static_cast<double>(k) * n;
      co_await comm.compute({received + static_cast<double>(d), 12.0 * received + 8.0 * static_cast<double>(d)}, [&] {
        received_.resize(gathered_.size());
        update_.zero_();
        for (std::size_t r = 0; r < gathered_.size(); ++r) {
          received_[r] = payload_;
          received_[r].bytes = gathered_[r];
          compressor.decompress_add(received_[r], 1.0, update_);
        }
        update_.div_(n);
      });
    }
    // The reference counts 96 bits per sent coordinate (index, value and its own
    // bookkeeping); a dense quantizer sends its payload, every bit of it.
    n_bits = compressor.kind().sends_indices ? 96ULL * static_cast<std::uint64_t>(k)
                                             : 8ULL * static_cast<std::uint64_t>(payload_.bytes.numel());
  }
  {
    auto phase = ctx.timer.phase("grad/update_model");
    co_await comm.compute(copy_cost(d), [&] {
      std::int64_t offset = 0;
      for (auto& p : ctx.params) {
        p.add_(update_.narrow(0, offset, p.numel()).view_as(p), -lr);
        offset += p.numel();
      }
    });
  }
  co_return n_bits;
}

const AlgorithmEntry& sparsified_sgd_entry() {
  static const AlgorithmEntry entry{
      .name = "sparsified_sgd",
      .description = "sparsified SGD with memory: each rank all-gathers its compressed gradient plus the residual it "
                     "kept back (top_k, random_k, threshold; a quantizer such as one_bit: 1-bit SGD with error feedback; "
                     "qsgd: all-reduced, no memory)",
      .paper = "Stich, Cordonnier, Jaggi, NeurIPS 2018; Lin et al., ICLR 2018 (DGC); the ChocoSGD reference code's dgc.py",
      .fields = with_optimizer_fields(
          {"compressor", "mask_momentum", "clip_grad_norm", "compress_warmup_epochs", "compress_warmup_ratios"}),
      .parse =
          [](config::ObjectReader& a, AlgorithmSpec& spec, const SpecContext& ctx) {
            spec.compressor = parse_compressor(a, ctx);
            SparsifiedSgdSettings s;
            s.mask_momentum = a.boolean("mask_momentum", s.mask_momentum);
            s.clip_grad_norm = a.number("clip_grad_norm", s.clip_grad_norm, 0.0, config::kInf);
            s.compress_warmup_epochs = a.number("compress_warmup_epochs", s.compress_warmup_epochs, 0.0, config::kInf);
            s.compress_warmup_ratios = parse_warmup_ratios(a, s.compress_warmup_ratios);
            spec.settings = s;
            // What the constructor refuses, refused here at the field (bad input, exit 2).
            try {
              rank_compressor(spec, 0);
            } catch (const std::invalid_argument& e) {
              const std::string_view what = e.what();
              const char* field = "compressor";
              if (s.mask_momentum && what.find("mask_momentum") != std::string_view::npos) field = "mask_momentum";
              if (what.find("compress_warmup_epochs") != std::string_view::npos) field = "compress_warmup_epochs";
              throw config::ScenarioError(a.where(field), config::ErrorKind::inconsistent, e.what());
            }
          },
      .to_json =
          [](const AlgorithmSpec& spec, nlohmann::json& out) {
            out["compressor"] = compressor_json(spec.compressor);
            const auto& s = settings_of<SparsifiedSgdSettings>(spec);
            out["mask_momentum"] = s.mask_momentum;
            out["clip_grad_norm"] = s.clip_grad_norm;
            out["compress_warmup_epochs"] = s.compress_warmup_epochs;
            out["compress_warmup_ratios"] = s.compress_warmup_ratios;
          },
      .make = [](const AlgorithmSpec& spec, const net::Topology& topology, int rank) -> std::unique_ptr<Algorithm> {
        return std::make_unique<SparsifiedSgd>(spec, rank, topology.size());
      },
      .memory = [](const AlgorithmSpec& spec, std::span<const std::int64_t>, std::int64_t) {
        MemoryFootprint f;
        f.model_buffers = 3;  // flat_, memory_, update_
        f.gathers = !reference_qsgd(spec.compressor.kind);  // qsgd all-reduces flat_
        auto largest = spec.compressor;  // the warm-up's first messages are the largest
        const auto& s = settings_of<SparsifiedSgdSettings>(spec);
        const auto* kind = kernels::find_compressor_kind(largest.kind);
        if (s.compress_warmup_epochs > 0.0 && kind && kind->keeps_k() && !s.compress_warmup_ratios.empty())
          largest =
              kernels::with_keep_ratio(largest, std::max(kind->keep_ratio(largest), s.compress_warmup_ratios.front()));
        f.payload_fraction = kernels::payload_fraction(largest);
        return f;
      },
      .epoch_schedule_field = [](const AlgorithmSpec& spec) -> std::string {
        return settings_of<SparsifiedSgdSettings>(spec).compress_warmup_epochs > 0.0 ? "compress_warmup_epochs" : "";
      }};
  return entry;
}

}  // namespace dtsim::algorithms
