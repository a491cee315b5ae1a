#include "algorithms/parallel_sgd.hpp"
#include "algorithms/registry.hpp"
#include "algorithms/spec_fields.hpp"
#include "kernels/compressor.hpp"
#include "kernels/compressor_kinds.hpp"

#include <ATen/CPUGeneratorImpl.h>

#include <fmt/format.h>

#include "kernels/aggregation.hpp"

namespace dtsim::algorithms {

namespace {
// Copying d fp32 values reads and writes 8 d bytes.
sim::ComputeCost copy_cost(std::int64_t elements) { return {0.0, 8.0 * static_cast<double>(elements)}; }
std::uint64_t fp32_bits(std::int64_t elements) { return 32ULL * static_cast<std::uint64_t>(elements); }
}  // namespace

CentralizedSgd::CentralizedSgd(const AlgorithmSpec& spec) : CentralizedSgd(spec, settings_of<ParallelSgdSettings>(spec)) {}

CentralizedSgd::CentralizedSgd(const AlgorithmSpec& spec, const ParallelSgdSettings& s)
    : update_(spec, s.optimizer),
      use_powersgd_(s.gradient_compression == "powersgd"),
      settings_(s.powersgd.group),
      start_iter_(s.powersgd.start_powerSGD_iter),
      random_(static_cast<std::uint32_t>(s.powersgd.random_seed)) {
  if (s.gradient_compression != "none" && !use_powersgd_)
    throw std::logic_error(fmt::format("parallel_sgd: unknown gradient_compression \"{}\"", s.gradient_compression));
  if (use_powersgd_ && settings_.rank < 1)
    throw std::logic_error(fmt::format("parallel_sgd: matrix_approximation_rank must be >= 1, got {}", settings_.rank));
}

// The three phases of powersgd.hpp over the whole flat gradient, each collective awaited.
sim::Task<std::uint64_t> CentralizedSgd::powersgd_all_reduce(StepContext& ctx) {
  auto& comm = ctx.comm;
  auto& buffer = flat_grads_.buffer();
  {
    auto phase = ctx.timer.phase("sync/compress");
    co_await comm.compute(powersgd_.first_cost(), [&] { powersgd_.first_half(buffer, random_); });
  }
  {
    auto phase = ctx.timer.phase("sync/sync");
    if (powersgd_.uncompressed().numel() > 0) co_await comm.all_reduce(powersgd_.uncompressed(), comm::ReduceOp::Average);
    if (powersgd_.p_memory().numel() > 0) co_await comm.all_reduce(powersgd_.p_memory(), comm::ReduceOp::Sum);
  }
  {
    auto phase = ctx.timer.phase("sync/compress");
    co_await comm.compute(powersgd_.second_cost(), [&] { powersgd_.second_half(buffer); });
  }
  if (powersgd_.q_memory().numel() > 0) {
    auto phase = ctx.timer.phase("sync/sync");
    co_await comm.all_reduce(powersgd_.q_memory(), comm::ReduceOp::Average);
  }
  {
    auto phase = ctx.timer.phase("sync/compress");
    co_await comm.compute(powersgd_.decompress_cost(), [&] { powersgd_.decompress(buffer); });
  }
  co_return powersgd_.n_bits();
}

sim::Task<std::uint64_t> CentralizedSgd::step(StepContext& ctx) {
  auto& comm = ctx.comm;
  const auto d = total_elements(ctx.grads);
  {
    auto phase = ctx.timer.phase("sync/get_data");
    co_await comm.compute(copy_cost(d), [&] {
      if (flat_grads_.count() == 0) {
        flat_grads_ = kernels::TensorBuffer(ctx.grads);
        if (use_powersgd_) {
          std::vector<PowerSgdSlot> slots;
          std::int64_t offset = 0;
          for (const auto& g : ctx.grads) {
            slots.push_back(powersgd_slot(g.sizes(), offset, settings_));
            offset += g.numel();
          }
          powersgd_ = PowerSgdGroup(std::move(slots), flat_grads_.buffer().options(), settings_);
        }
      } else {
        flat_grads_.pack(ctx.grads);
      }
    });
  }
  std::uint64_t n_bits = fp32_bits(d);
  if (use_powersgd_ && iter_ >= start_iter_) {
    n_bits = co_await powersgd_all_reduce(ctx);
  } else {
    auto phase = ctx.timer.phase("sync/sync");
    co_await comm.all_reduce(flat_grads_.buffer(), comm::ReduceOp::Average);
  }
  ++iter_;
  {
    auto phase = ctx.timer.phase("sync/unflatten_grad");
    co_await comm.compute(copy_cost(d), [&] { flat_grads_.unpack(ctx.grads); });
  }
  {
    auto phase = ctx.timer.phase("sync/apply_grad");
    co_await comm.compute(update_.cost(d), [&] { update_.apply(ctx.params, ctx.grads, ctx.lr); });
  }
  co_return n_bits;
}

DecentralizedSgd::DecentralizedSgd(const AlgorithmSpec& spec, const net::Topology& topology, int rank)
    : update_(spec, settings_of<ParallelSgdSettings>(spec).optimizer), peers_(topology.neighbors(rank)) {
  const auto& row = topology.mixing_row(rank);
  weights_.push_back(row[rank]);
  for (int peer : peers_) weights_.push_back(row[peer]);
  if (spec.compressor.kind != "identity")
    compressor_ = std::make_unique<kernels::Compressor>(make_gossip_compressor(spec.compressor, rank, "parallel_sgd"));
}

DecentralizedSgd::~DecentralizedSgd() = default;

sim::Task<std::uint64_t> DecentralizedSgd::step(StepContext& ctx) {
  auto& comm = ctx.comm;
  const auto d = total_elements(ctx.params);
  {
    auto phase = ctx.timer.phase("sync/apply_grad");
    co_await comm.compute(update_.cost(d), [&] { update_.apply(ctx.params, ctx.grads, ctx.lr); });
  }
  {
    auto phase = ctx.timer.phase("sync/get_data");
    co_await comm.compute(copy_cost(d), [&] {
      if (flat_params_.count() == 0) {
        flat_params_ = kernels::TensorBuffer(ctx.params);
        mixed_ = at::empty_like(flat_params_.buffer());
        for (const auto& p : ctx.params) segments_.push_back(p.numel());
      } else {
        flat_params_.pack(ctx.params);
      }
    });
  }
  if (compressor_) {
    auto phase = ctx.timer.phase("sync/sync");
    co_await comm.compute(elementwise_cost(d, 6.0, 16.0), [&] { message_.compress(*compressor_, flat_params_.buffer(), segments_); });
    co_await message_.exchange(comm, peers_);
    // x_i <- w_ii x_i + sum_j w_ij decompress(q_j)
    const double k = static_cast<double>(weights_.size());
    co_await comm.compute(elementwise_cost(d, 2.0 * k, 12.0 * k + 8.0), [&] {
      mixed_.copy_(flat_params_.buffer()).mul_(weights_[0]);
      for (std::size_t j = 0; j < peers_.size(); ++j) message_.add_peer(*compressor_, j, weights_[j + 1], mixed_);
      flat_params_.buffer().copy_(mixed_);
    });
  } else {
    auto phase = ctx.timer.phase("sync/sync");
    co_await comm.exchange(flat_params_.buffer(), peers_, received_);
    // x_i <- w_ii x_i + sum_j w_ij x_j
    std::vector<at::Tensor> inputs{flat_params_.buffer()};
    inputs.insert(inputs.end(), received_.begin(), received_.end());
    const double k = static_cast<double>(inputs.size());
    co_await comm.compute({2.0 * k * static_cast<double>(d), 4.0 * (k + 1.0) * static_cast<double>(d)}, [&] {
      kernels::weighted_sum(mixed_, inputs, weights_);
      flat_params_.buffer().copy_(mixed_);
    });
  }
  {
    auto phase = ctx.timer.phase("sync/update_model");
    co_await comm.compute(copy_cost(d), [&] { flat_params_.unpack(ctx.params); });
  }
  co_return compressor_ ? compressor_->reference_bits(segments_) : fp32_bits(d);
}

const AlgorithmEntry& parallel_sgd_entry() {
  static const AlgorithmEntry entry{
      .name = "parallel_sgd",
      .description = "parallel SGD: centralized (all-reduce of gradients, optionally compressed with PowerSGD) or "
                     "decentralized (gossip averaging of models, optionally compressed); each rank's update is the "
                     "reference's SGD or an optimizer object (centralized with adamw: data-parallel AdamW)",
      .paper = "the ChocoSGD reference code's sgd.py (decentralized: Lian et al., NeurIPS 2017, D-PSGD; PowerSGD: "
               "Vogels, Karimireddy, Jaggi, NeurIPS 2019)",
      .fields = with_optimizer_fields({"variant", "compressor", "gradient_compression", "matrix_approximation_rank",
                                       "start_powerSGD_iter", "min_compression_rate", "use_error_feedback", "warm_start",
                                       "orthogonalization_epsilon", "random_seed", "optimizer"}),
      .parse =
          [](config::ObjectReader& a, AlgorithmSpec& spec, const SpecContext& ctx) {
            spec.variant = a.choice("variant", std::nullopt, {"centralized", "decentralized"});
            spec.compressor = spec.variant == "decentralized" ? parse_gossip_compressor(a, ctx, "parallel_sgd decentralized")
                                                              : parse_compressor(a, ctx);
            if (spec.variant == "centralized" && spec.compressor.kind != "identity")
              throw config::ScenarioError(a.where("compressor"), config::ErrorKind::inconsistent,
                                          fmt::format("parallel_sgd variant centralized takes no compressor (got {}; only "
                                                      "the decentralized variant does)",
                                                      spec.compressor.kind));
            ParallelSgdSettings s;
            if (spec.variant == "centralized")
              s.gradient_compression = a.choice("gradient_compression", s.gradient_compression, {"none", "powersgd"});
            else if (a.value().contains("gradient_compression"))  // a look: not this variant's field
              throw config::ScenarioError(a.where("gradient_compression"), config::ErrorKind::inconsistent,
                                          "only parallel_sgd's centralized variant compresses its all-reduce (the "
                                          "decentralized one takes a compressor)");
            parse_powersgd(a, s.powersgd, s.gradient_compression == "powersgd",
                           "only parallel_sgd with gradient_compression \"powersgd\" reads it");
            s.optimizer = parse_optimizer_object(a, spec.optimizer);
            spec.settings = s;
          },
      .to_json =
          [](const AlgorithmSpec& spec, nlohmann::json& out) {
            out["variant"] = spec.variant;
            out["compressor"] = compressor_json(spec.compressor);
            const auto& s = settings_of<ParallelSgdSettings>(spec);
            if (s.optimizer) out["optimizer"] = optimizers::optimizer_json(*s.optimizer);
            if (s.gradient_compression != "powersgd") return;  // "none" is not echoed: results stay as they were
            out["gradient_compression"] = s.gradient_compression;
            powersgd_json(s.powersgd, out);
          },
      .make = [](const AlgorithmSpec& spec, const net::Topology& topology, int rank) -> std::unique_ptr<Algorithm> {
        if (spec.variant == "centralized") {
          if (spec.compressor.kind != "identity")
            throw std::logic_error("parallel_sgd: the centralized variant takes no compressor (the loader refuses one)");
          return std::make_unique<CentralizedSgd>(spec);
        }
        if (spec.variant == "decentralized") return std::make_unique<DecentralizedSgd>(spec, topology, rank);
        throw std::logic_error(fmt::format("parallel_sgd: unknown variant \"{}\"", spec.variant));
      },
      .memory = [](const AlgorithmSpec& spec, std::span<const std::int64_t>, std::int64_t) {
        const auto& s = settings_of<ParallelSgdSettings>(spec);
        MemoryFootprint f;
        const auto& object = s.optimizer;
        const double moments = object ? extra_optimizer_buffers(*object) : 0.0;
        if (spec.variant == "centralized") {
          f.model_buffers = 1 + moments;  // flat_grads_
          if (s.gradient_compression == "powersgd") {  // e and M0 (with error feedback), the uncompressed copy
            f.model_buffers += (s.powersgd.group.error_feedback ? 2.0 : 0.0) + 1.0;
            f.collectives_per_step = 3.0;
          }
          return f;
        }
        f.model_buffers = 2 + moments;  // flat_params_, mixed_
        f.gossips = true;     // identity: the model itself in received_; else GossipMessage's payloads
        f.payload_fraction =
            spec.compressor.kind == "identity" ? 1.0 : kernels::payload_fraction(spec.compressor);
        return f;
      }};
  return entry;
}

}  // namespace dtsim::algorithms
