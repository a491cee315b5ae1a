#include "algorithms/distopt.hpp"
#include "algorithms/registry.hpp"
#include "algorithms/spec_fields.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

#include "kernels/aggregation.hpp"
#include "kernels/cpu/cast.hpp"
#include "kernels/fusion_buckets.hpp"
#include "kernels/tensor_buffer.hpp"

namespace dtsim::algorithms {

namespace {

double as_double(std::int64_t n) { return static_cast<double>(n); }
sim::ComputeCost copy_cost(std::int64_t n) { return {0.0, 8.0 * as_double(n)}; }

DistOpt::Variant parse_variant(const std::string& v) {
  if (v == "sync") return DistOpt::Variant::sync;
  if (v == "half") return DistOpt::Variant::half;
  if (v == "partial") return DistOpt::Variant::partial;
  if (v == "sparse") return DistOpt::Variant::sparse;
  throw std::logic_error(
      fmt::format("/algorithm/variant: distopt has no variant \"{}\" (expected sync, half, partial or sparse)", v));
}

std::uint16_t* half_bits(at::Tensor& t) { return reinterpret_cast<std::uint16_t*>(t.data_ptr<at::Half>()); }

// The pairs rank r sent in partition `part` (sparse): its gathered count, or (exact
// threshold exchange) its block's size.
std::int64_t pairs_from(const DistOpt::Partition& part, std::size_t r) {
  return part.counts.empty() ? part.gathered[r].numel() / 2 : part.counts[r];
}

}  // namespace

std::vector<std::vector<std::size_t>> distopt_partitions(std::span<const std::int64_t> sizes, std::int64_t threshold) {
  return kernels::fusion_buckets(sizes, threshold);
}

DistOpt::DistOpt(const AlgorithmSpec& spec) : DistOpt(spec, settings_of<DistOptSettings>(spec)) {}

DistOpt::DistOpt(const AlgorithmSpec& spec, const DistOptSettings& s)
    : variant_(parse_variant(spec.variant)),
      threshold_(s.threshold),
      clipping_(s.clipping),
      clip_value_(s.clip_value),
      spars_(s.spars),
      top_k_(s.top_k),
      corr_(s.corr),
      padded_(s.padded_exchange && !s.top_k),
      optimizer_(spec.optimizer) {
  // Preconditions: the loader (distopt_entry's parse) refuses these with their JSON path.
  if (s.threshold < 0 || s.buffer_size < 0)
    throw std::logic_error(fmt::format("/algorithm/threshold: distopt needs threshold >= 0 and buffer_size >= 0, "
                                            "got {} and {}",
                                            s.threshold, s.buffer_size));
  if (s.threshold > s.buffer_size / 2)
    throw std::logic_error(fmt::format(
        "/algorithm/threshold: {} elements exceeds buffer_size / 2 = {} (a fused group holds up to 2 * threshold "
        "elements and would overflow SINGA's {}-element buffer)",
        s.threshold, s.buffer_size / 2, s.buffer_size));
  if (variant_ == Variant::sparse && (spars_ < 0.0 || (top_k_ && spars_ > 1.0)))
    throw std::logic_error(
        fmt::format("/algorithm/spars: expected a fraction in [0, 1] with top_k, or a threshold >= 0, got {}", spars_));
}

std::uint64_t DistOpt::state_bytes() const {
  std::uint64_t bytes = 0;
  for (const auto& p : partitions_)
    if (p.residual.defined()) bytes += static_cast<std::uint64_t>(p.residual.nbytes());
  return bytes;
}

void DistOpt::init(const StepContext& ctx) {
  const auto& bw = *ctx.backward;
  const std::size_t n_params = ctx.params.size();
  const std::vector<std::size_t> order = gradient_ready_order(bw, n_params, "distopt");
  std::vector<std::int64_t> sizes;
  for (std::size_t j : order) sizes.push_back(ctx.params[j].numel());

  partitions_.clear();
  partition_of_.assign(n_params, 0);
  slot_of_.assign(n_params, 0);
  offset_of_.assign(n_params, 0);
  for (const auto& bucket : distopt_partitions(sizes, threshold_)) {
    Partition part;
    for (std::size_t pos : bucket) {
      const std::size_t j = order[pos];
      partition_of_[j] = partitions_.size();
      slot_of_[j] = part.params.size();
      offset_of_[j] = part.elements;
      part.params.push_back(j);
      part.elements += sizes[pos];
    }
    if (part.params.size() == 1 && (variant_ == Variant::sync || variant_ == Variant::partial)) {
      const auto& t = variant_ == Variant::sync ? ctx.grads[part.params[0]] : ctx.params[part.params[0]];
      part.in_place = t.is_contiguous() && t.scalar_type() == at::kFloat;
    }
    // Buffers live with the parameters (on their device).
    const auto options = ctx.params.front().options();
    if (!part.in_place)
      part.buffer = at::empty({part.elements}, options.dtype(variant_ == Variant::half ? at::kHalf : at::kFloat));
    if (variant_ == Variant::sparse && corr_) part.residual = at::zeros({part.elements}, options.dtype(at::kFloat));
    partitions_.push_back(std::move(part));
  }
  if (variant_ == Variant::partial) {
    // One optimizer per tensor, stepped on that tensor alone: its weight-decay mask is the
    // tensor's own entry.
    for (std::size_t j = 0; j < n_params; ++j) {
      OptimizerSpec one = optimizer_.spec();
      if (!one.weight_decay_mask.empty()) one.weight_decay_mask = {optimizer_.spec().weight_decay_mask.at(j)};
      per_param_.emplace_back(std::move(one));
    }
  }
}

void DistOpt::stage(Partition& part, std::size_t slot, const at::Tensor& value) {
  const std::int64_t offset = offset_of_[part.params[slot]];
  const std::int64_t n = value.numel();
  if (variant_ == Variant::half) {
    at::Tensor v = clipping_ ? value.clamp(-clip_value_, clip_value_) : value;
    v = v.to(at::kFloat).contiguous();
    if (part.buffer.is_cpu())
      kernels::cpu::float_to_half(v.data_ptr<float>(), n, half_bits(part.buffer) + offset);
    else  // a GPU's cast also rounds to nearest even
      part.buffer.narrow(0, offset, n).copy_(v.reshape({-1}));
    return;
  }
  part.buffer.narrow(0, offset, n).copy_(value.reshape({-1}));
}

// m = buffer (+ e); S = top-k or threshold selection; e = m with S zeroed; packed = [S | m_S].
// The selection runs on the host with the CPU kernels: a buffer on a GPU is selected in a
// host copy (same result, not GPU speed) and the packed message is copied back.
void DistOpt::sparsify(Partition& part) {
  const std::int64_t n = part.elements;
  if (corr_) part.buffer.add_(part.residual);
  const at::Tensor host = part.buffer.to(at::kCPU);  // the buffer itself on the CPU
  const float* m = host.data_ptr<float>();
  if (top_k_) {
    const std::int64_t k = std::min<std::int64_t>(n, static_cast<std::int64_t>(std::ceil(spars_ * as_double(n))));
    idx_.resize(static_cast<std::size_t>(k));
    val_.resize(static_cast<std::size_t>(k));
    kernels::cpu::top_k<float>(m, n, k, select_, idx_.data(), val_.data());
    part.nnz = k;
  } else {
    std::vector<std::int64_t> part_counts(static_cast<std::size_t>(kernels::cpu::threshold_parts(n)) + 1);
    const float t = static_cast<float>(spars_);
    const std::int64_t k = kernels::cpu::threshold_count<float>(m, n, t, part_counts.data());
    idx_.resize(static_cast<std::size_t>(k));
    val_.resize(static_cast<std::size_t>(k));
    kernels::cpu::threshold_select<float>(m, n, t, part_counts.data(), idx_.data(), val_.data());
    part.nnz = k;
  }
  if (corr_) {
    part.residual.copy_(part.buffer);
    if (part.residual.is_cpu()) {
      float* e = part.residual.data_ptr<float>();
      for (std::int64_t j = 0; j < part.nnz; ++j) e[idx_[static_cast<std::size_t>(j)]] = 0.0f;
    } else {
      const std::vector<std::int64_t> sent(idx_.begin(), idx_.begin() + part.nnz);
      part.residual.index_fill_(0, at::tensor(sent, at::kLong).to(part.residual.device()), 0.0);
    }
  }
}

void DistOpt::pack(Partition& part, std::int64_t slots) {
  // Indices travel as their int32 bit patterns in the fp32 message, as SINGA packs them.
  part.packed = at::zeros({2 * slots}, at::kFloat);
  auto* out = part.packed.data_ptr<float>();
  static_assert(sizeof(std::uint32_t) == sizeof(float));
  std::memcpy(out, idx_.data(), sizeof(float) * static_cast<std::size_t>(part.nnz));
  std::memcpy(out + slots, val_.data(), sizeof(float) * static_cast<std::size_t>(part.nnz));
  part.packed = part.packed.to(part.buffer.device());  // no copy on the CPU
}

sim::Task<void> DistOpt::average_all(comm::Communicator& comm, std::vector<at::Tensor>& params) {
  kernels::TensorBuffer flat(params);
  co_await comm.all_reduce(flat.buffer(), comm::ReduceOp::Average);
  flat.unpack(params);
}

sim::Task<void> DistOpt::start(comm::Communicator& comm, std::vector<at::Tensor>& params) {
  if (variant_ == Variant::partial) co_await average_all(comm, params);
}

sim::Task<void> DistOpt::before_evaluation(comm::Communicator& comm, std::vector<at::Tensor>& params) {
  if (variant_ == Variant::partial) co_await average_all(comm, params);
}

sim::Task<std::uint64_t> DistOpt::step(StepContext& ctx) {
  if (!ctx.backward)
    throw std::logic_error("distopt drives the backward pass: the training loop must pass StepContext::backward");
  auto& comm = ctx.comm;
  auto& bw = *ctx.backward;
  if (partitions_.empty()) init(ctx);
  const auto K = static_cast<std::int64_t>(partitions_.size());
  const double W = static_cast<double>(comm.size());
  if (variant_ == Variant::partial) partial_ = partial_ % K + 1;
  const std::size_t chosen = static_cast<std::size_t>(partial_ - 1);  // partial: the partition averaged now

  std::vector<comm::Op> in_flight;
  std::uint64_t n_bits = 0;
  for (std::size_t k = 0; k < bw.stages(); ++k) {
    co_await bw.run_stage(k);
    for (std::size_t j : bw.stage_params(k)) {
      const std::size_t b = partition_of_[j];
      auto& part = partitions_[b];
      const std::size_t slot = slot_of_[j];
      const std::int64_t n = ctx.params[j].numel();
      if (variant_ == Variant::partial) {
        {
          auto phase = ctx.timer.phase("sync/apply_grad");
          co_await comm.compute(per_param_[j].cost(n), [&] {
            std::vector<at::Tensor> p{ctx.params[j]}, g{ctx.grads[j]};
            per_param_[j].apply_gradient(p, g, ctx.lr);
          });
        }
        if (b == chosen && !part.in_place) {
          auto phase = ctx.timer.phase("sync/get_data");
          co_await comm.compute(copy_cost(n), [&] { stage(part, slot, ctx.params[j]); });
        }
      } else if (!part.in_place) {
        auto phase = ctx.timer.phase("sync/get_data");
        sim::ComputeCost cost = copy_cost(n);  // fp32 staging: read and write 4 bytes per element
        if (variant_ == Variant::half) {
          cost = {as_double(n), 6.0 * as_double(n)};  // the fp16 cast: read 4, write 2
          if (clipping_) cost = {2.0 * as_double(n), 14.0 * as_double(n)};
        }
        co_await comm.compute(cost, [&] { stage(part, slot, ctx.grads[j]); });
      }
      if (slot + 1 != part.params.size()) continue;
      // The partition closes: its collective goes on the communication stream.
      switch (variant_) {
        case Variant::sync:
        case Variant::half:
          in_flight.push_back(comm.stream_all_reduce(part.in_place ? ctx.grads[j] : part.buffer, comm::ReduceOp::Sum));
          n_bits += (variant_ == Variant::half ? 16ULL : 32ULL) * static_cast<std::uint64_t>(part.elements);
          break;
        case Variant::partial:
          if (b == chosen) {
            in_flight.push_back(comm.stream_all_reduce(part.in_place ? ctx.params[j] : part.buffer, comm::ReduceOp::Sum));
            n_bits += 32ULL * static_cast<std::uint64_t>(part.elements);
          }
          break;
        case Variant::sparse: {
          {
            auto phase = ctx.timer.phase("sync/compress");
            const double e = as_double(part.elements);
            co_await comm.compute({4.0 * e, 16.0 * e}, [&] { sparsify(part); });
          }
          std::int64_t slots = part.nnz;
          part.counts.assign(static_cast<std::size_t>(comm.size()), part.nnz);
          if (padded_) {  // SINGA: all-gather the counts, wait, pad to the largest
            auto phase = ctx.timer.phase("sync/sparse_counts");
            at::Tensor count = at::full({1}, static_cast<std::int32_t>(part.nnz), at::kInt);
            std::vector<at::Tensor> counts;
            co_await comm.all_gather(count, counts);
            for (std::size_t r = 0; r < counts.size(); ++r) part.counts[r] = counts[r].item<std::int32_t>();
            slots = *std::max_element(part.counts.begin(), part.counts.end());
            n_bits += 32;
          } else if (!top_k_) {
            part.counts.clear();  // each rank's block says its own count
          }
          pack(part, slots);
          in_flight.push_back(comm.stream_all_gather(part.packed, part.gathered));
          n_bits += 64ULL * static_cast<std::uint64_t>(slots);
          break;
        }
      }
    }
  }
  {
    auto phase = ctx.timer.phase("sync/sync");  // the communication not hidden behind backward
    for (auto& op : in_flight) co_await op;
  }

  if (variant_ == Variant::partial) {
    auto& part = partitions_[chosen];
    auto phase = ctx.timer.phase("sync/update_model");
    const double e = as_double(part.elements);
    co_await comm.compute({e, (part.in_place ? 8.0 : 16.0) * e}, [&] {
      for (std::size_t j : part.params) {
        auto& p = ctx.params[j];
        if (!part.in_place) p.copy_(part.buffer.narrow(0, offset_of_[j], p.numel()).view(p.sizes()));
        p.div_(W);
      }
    });
    co_return n_bits;
  }

  {
    auto phase = ctx.timer.phase("sync/unflatten_grad");
    double flops = 0.0, bytes = 0.0;
    for (const auto& part : partitions_) {
      if (part.in_place) continue;
      const double e = as_double(part.elements);
      bytes += (variant_ == Variant::half ? 6.0 : 8.0) * e;
      if (variant_ == Variant::sparse) {
        double received = 0.0;
        for (std::size_t r = 0; r < part.gathered.size(); ++r) received += as_double(pairs_from(part, r));
        flops += received;
        bytes += 12.0 * received + 4.0 * e;
      }
    }
    co_await comm.compute({flops, bytes}, [&] {
      for (auto& part : partitions_) {
        if (part.in_place) continue;
        if (variant_ == Variant::sparse) {  // sum_r scatter(m^r_S) into the zeroed buffer
          part.buffer.zero_();
          for (std::size_t r = 0; r < part.gathered.size(); ++r) {
            const auto& block = part.gathered[r];
            const std::int64_t slots = block.numel() / 2, m = pairs_from(part, r);
            if (m == 0) continue;
            const at::Tensor indices = block.narrow(0, 0, m).view(at::kInt);
            const at::Tensor values = block.narrow(0, slots, m);
            kernels::scatter_add(values, indices, part.buffer);
          }
        }
        for (std::size_t j : part.params) {
          auto& g = ctx.grads[j];
          const std::int64_t off = offset_of_[j];
          if (variant_ == Variant::half && g.is_cpu() && g.is_contiguous() && g.scalar_type() == at::kFloat)
            kernels::cpu::half_to_float(half_bits(part.buffer) + off, g.numel(), 1.0f, false, g.data_ptr<float>());
          else
            g.copy_(part.buffer.narrow(0, off, g.numel()).view(g.sizes()));
        }
      }
    });
  }
  {
    auto phase = ctx.timer.phase("sync/apply_grad");
    const auto d = total_elements(ctx.params);
    auto cost = optimizer_.cost(d);
    cost.flops += as_double(d);
    cost.bytes += 8.0 * as_double(d);
    co_await comm.compute(cost, [&] {
      for (auto& g : ctx.grads) g.div_(W);
      optimizer_.apply_gradient(ctx.params, ctx.grads, ctx.lr);
    });
  }
  co_return n_bits;
}

const AlgorithmEntry& distopt_entry() {
  static const AlgorithmEntry entry{
      .name = "distopt",
      .description = "Apache SINGA's DistOpt: fused all-reduce of gradients under a size threshold, overlapping the "
                     "backward pass (variants sync, half, partial, sparse)",
      .paper = "Apache SINGA, python/singa/opt.py DistOpt (Ooi et al., ACM MM 2015; SINGA 3.x)",
      .fields = with_optimizer_fields({"variant", "threshold", "buffer_size", "clipping", "clip_value", "spars", "top_k",
                                       "corr", "exchange"}),
      .parse =
          [](config::ObjectReader& a, AlgorithmSpec& spec, const SpecContext&) {
            using config::ErrorKind;
            using config::ScenarioError;
            spec.variant = a.choice("variant", "sync", {"sync", "half", "partial", "sparse"});
            // Fields of one variant only are errors under another.
            const std::vector<std::pair<const char*, const char*>> variant_only{
                {"clipping", "half"}, {"clip_value", "half"}, {"spars", "sparse"}, {"top_k", "sparse"}, {"corr", "sparse"},
                {"exchange", "sparse"}};
            for (const auto& [key, variant] : variant_only)
              if (spec.variant != variant && a.value().contains(key))
                throw ScenarioError(a.where(key), ErrorKind::unknown_field,
                                    fmt::format("only the {} variant of distopt reads it (this one is {})", variant,
                                                spec.variant));
            DistOptSettings s;
            s.buffer_size = a.integer("buffer_size", s.buffer_size, 0, config::kIntMax);
            s.threshold = a.integer("threshold", s.threshold, 0, config::kIntMax);
            if (s.threshold > s.buffer_size / 2)
              throw ScenarioError(a.where("threshold"), ErrorKind::inconsistent,
                                  fmt::format("expected at most buffer_size / 2 = {} elements (a fused group holds up "
                                              "to 2 * threshold elements and would overflow the {}-element buffer), got {}",
                                              s.buffer_size / 2, s.buffer_size, s.threshold));
            // Each variant reads only its own fields (the others keep their defaults), so a
            // recording parse sees which variant reads which.
            if (spec.variant == "half") {
              s.clipping = a.boolean("clipping", s.clipping);
              s.clip_value = a.number("clip_value", s.clip_value, 0.0, config::kInf, true);
            }
            if (spec.variant == "sparse") {
              s.top_k = a.boolean("top_k", s.top_k);
              s.spars = a.number("spars", s.spars, 0.0, s.top_k ? 1.0 : config::kInf);
              s.corr = a.boolean("corr", s.corr);
              s.padded_exchange = a.choice("exchange", s.padded_exchange ? "padded" : "exact", {"padded", "exact"}) == "padded";
            }
            spec.settings = s;
          },
      .to_json =
          [](const AlgorithmSpec& spec, nlohmann::json& out) {
            const auto& s = settings_of<DistOptSettings>(spec);
            out["variant"] = spec.variant;
            out["threshold"] = s.threshold;
            out["buffer_size"] = s.buffer_size;
            if (spec.variant == "half") {
              out["clipping"] = s.clipping;
              out["clip_value"] = s.clip_value;
            }
            if (spec.variant == "sparse") {
              out["spars"] = s.spars;
              out["top_k"] = s.top_k;
              out["corr"] = s.corr;
              out["exchange"] = s.padded_exchange ? "padded" : "exact";
            }
          },
      .make = [](const AlgorithmSpec& spec, const net::Topology&, int) -> std::unique_ptr<Algorithm> {
        return std::make_unique<DistOpt>(spec);
      },
      .memory = [](const AlgorithmSpec& spec, std::span<const std::int64_t> sizes, std::int64_t) {
        // Partition buffers (fp32; half: fp16), sparse: residuals (corr) and packed pairs.
        const auto& s = settings_of<DistOptSettings>(spec);
        MemoryFootprint f;
        const bool sparse = spec.variant == "sparse";
        f.model_buffers = spec.variant == "half" ? 0.5 : 1.0;
        if (sparse) f.model_buffers += s.corr ? 1.0 : 0.0;
        f.gathers = sparse;
        f.payload_fraction = s.top_k ? 2.0 * s.spars : 0.2;
        const auto partitions = static_cast<double>(distopt_partitions(sizes, s.threshold).size());
        f.collectives_per_step = spec.variant == "partial" ? 1.0 : std::max(1.0, partitions);
        f.traced_ops_per_step += 6.0 * static_cast<double>(sizes.size());  // its trace grows with the tensors
        return f;
      }};
  return entry;
}

}  // namespace dtsim::algorithms
