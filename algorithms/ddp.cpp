#include "algorithms/ddp.hpp"
#include "algorithms/registry.hpp"
#include "algorithms/spec_fields.hpp"

#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "kernels/ddp_buckets.hpp"

namespace dtsim::algorithms {

namespace {

double as_double(std::int64_t n) { return static_cast<double>(n); }
sim::ComputeCost copy_cost(std::int64_t n) { return {0.0, 8.0 * as_double(n)}; }

const std::vector<std::string>& hook_names() {
  static const std::vector<std::string> names{"allreduce", "fp16_compress", "bf16_compress", "powersgd"};
  return names;
}

Ddp::Hook parse_hook(const std::string& h) {
  if (h == "allreduce") return Ddp::Hook::allreduce;
  if (h == "fp16_compress") return Ddp::Hook::fp16_compress;
  if (h == "bf16_compress") return Ddp::Hook::bf16_compress;
  if (h == "powersgd") return Ddp::Hook::powersgd;
  throw std::logic_error(fmt::format(
      "/algorithm/hook: ddp has no hook \"{}\" (expected allreduce, fp16_compress, bf16_compress or powersgd)", h));
}

}  // namespace

std::int64_t ddp_cap_bytes(double mb) { return static_cast<std::int64_t>(mb * 1024.0 * 1024.0); }

Ddp::Ddp(const AlgorithmSpec& spec) : Ddp(spec, settings_of<DdpSettings>(spec)) {}

Ddp::Ddp(const AlgorithmSpec& spec, const DdpSettings& s)
    : hook_(parse_hook(s.hook)),
      first_cap_(ddp_cap_bytes(s.first_bucket_mb)),
      cap_(ddp_cap_bytes(s.bucket_cap_mb)),
      powersgd_(s.powersgd.group),
      start_iter_(s.powersgd.start_powerSGD_iter),
      random_(static_cast<std::uint32_t>(s.powersgd.random_seed)),
      optimizer_(spec.optimizer) {
  // Preconditions: the loader (ddp_entry's parse) refuses these with their JSON path.
  if (!(s.bucket_cap_mb >= 0.0) || !(s.first_bucket_mb >= 0.0))
    throw std::logic_error(fmt::format("/algorithm/bucket_cap_mb: ddp needs caps >= 0, got {} and {}",
                                       s.bucket_cap_mb, s.first_bucket_mb));
  if (hook_ == Hook::powersgd) {
    if (powersgd_.rank < 1)
      throw std::logic_error(
          fmt::format("/algorithm/matrix_approximation_rank: expected >= 1, got {}", powersgd_.rank));
    if (const auto problem = powersgd_start_problem(s.powersgd); !problem.empty())
      throw std::logic_error("/algorithm/start_powerSGD_iter: " + problem);
  }
}

// What PowerSGD carries from one step to the next: the error e and, with warm start, Q
// (M0, P and the uncompressed copy are rewritten every step).
std::uint64_t Ddp::state_bytes() const {
  std::uint64_t bytes = 0;
  for (const auto& b : buckets_) bytes += b.powersgd.state_bytes();
  return bytes;
}

void Ddp::init(const StepContext& ctx) {
  const auto& bw = *ctx.backward;
  const std::size_t n_params = ctx.params.size();
  const std::vector<std::size_t> order = gradient_ready_order(bw, n_params, "ddp");
  std::vector<std::int64_t> bytes;
  for (std::size_t j : order) bytes.push_back(4 * ctx.params[j].numel());  // fp32 gradients

  buckets_.clear();
  bucket_of_.assign(n_params, 0);
  slot_of_.assign(n_params, 0);
  const auto options = ctx.params.front().options().dtype(at::kFloat);
  for (const auto& indices : kernels::ddp_buckets(bytes, first_cap_, cap_)) {
    Bucket bucket;
    for (std::size_t pos : indices) {
      const std::size_t j = order[pos];
      const auto& p = ctx.params[j];
      Slot s;
      static_cast<PowerSgdSlot&>(s) = powersgd_slot(p.sizes(), bucket.elements, powersgd_);
      if (hook_ != Hook::powersgd) s.r = 0;
      s.param = j;
      bucket_of_[j] = buckets_.size();
      slot_of_[j] = bucket.slots.size();
      bucket.slots.push_back(s);
      bucket.elements += p.numel();
    }
    bucket.buffer = at::zeros({bucket.elements}, options);
    if (hook_ == Hook::powersgd)
      bucket.powersgd = PowerSgdGroup({bucket.slots.begin(), bucket.slots.end()}, options, powersgd_);
    buckets_.push_back(std::move(bucket));
  }
}

sim::Task<std::uint64_t> Ddp::step(StepContext& ctx) {
  if (!ctx.backward)
    throw std::logic_error("ddp drives the backward pass: the training loop must pass StepContext::backward");
  auto& comm = ctx.comm;
  auto& bw = *ctx.backward;
  if (buckets_.empty()) init(ctx);
  const double W = static_cast<double>(comm.size());
  const bool powersgd = hook_ == Hook::powersgd && iter_ >= start_iter_;
  const bool half = hook_ == Hook::fp16_compress || hook_ == Hook::bf16_compress;

  // Per bucket, the collectives issued at its close (PowerSGD: uncompressed, P).
  std::vector<std::vector<comm::Op>> first(buckets_.size());
  std::uint64_t n_bits = 0;
  for (std::size_t k = 0; k < bw.stages(); ++k) {
    co_await bw.run_stage(k);
    for (std::size_t j : bw.stage_params(k)) {
      auto& bucket = buckets_[bucket_of_[j]];
      const auto& slot = bucket.slots[slot_of_[j]];
      {
        auto phase = ctx.timer.phase("sync/get_data");
        const auto& g = ctx.grads[j];
        co_await comm.compute(copy_cost(g.numel()),
                              [&] { bucket.buffer.narrow(0, slot.offset, g.numel()).copy_(g.reshape({-1})); });
      }
      if (slot_of_[j] + 1 != bucket.slots.size()) continue;
      // The bucket is full: its hook.
      auto& ops = first[bucket_of_[j]];
      if (half) {
        {
          auto phase = ctx.timer.phase("sync/compress");
          const double e = as_double(bucket.elements);
          co_await comm.compute({e, 8.0 * e}, [&] {  // cast (read 4, write 2), divide (read 2, write 2)
            bucket.wire = bucket.buffer.to(hook_ == Hook::fp16_compress ? at::kHalf : at::kBFloat16).div_(W);
          });
        }
        ops.push_back(comm.stream_all_reduce(bucket.wire, comm::ReduceOp::Sum));
        n_bits += 16ULL * static_cast<std::uint64_t>(bucket.elements);
      } else if (powersgd) {
        {
          auto phase = ctx.timer.phase("sync/compress");
          co_await comm.compute(bucket.powersgd.first_cost(),
                                [&] { bucket.powersgd.first_half(bucket.buffer, random_); });
        }
        auto& group = bucket.powersgd;
        if (group.uncompressed().numel() > 0)
          ops.push_back(comm.stream_all_reduce(group.uncompressed(), comm::ReduceOp::Average));
        if (group.p_memory().numel() > 0) ops.push_back(comm.stream_all_reduce(group.p_memory(), comm::ReduceOp::Sum));
        n_bits += group.n_bits();
      } else {
        ops.push_back(comm.stream_all_reduce(bucket.buffer, comm::ReduceOp::Average));
        n_bits += 32ULL * static_cast<std::uint64_t>(bucket.elements);
      }
    }
  }

  if (powersgd) {
    // The second half, bucket by bucket: P's sum, then Q = M^T P and Q's all-reduce.
    std::vector<comm::Op> second(buckets_.size());
    for (std::size_t b = 0; b < buckets_.size(); ++b) {
      auto& bucket = buckets_[b];
      {
        auto phase = ctx.timer.phase("sync/sync");
        for (auto& op : first[b]) co_await op;
      }
      {
        auto phase = ctx.timer.phase("sync/compress");
        co_await comm.compute(bucket.powersgd.second_cost(), [&] { bucket.powersgd.second_half(bucket.buffer); });
      }
      if (bucket.powersgd.q_memory().numel() > 0)
        second[b] = comm.stream_all_reduce(bucket.powersgd.q_memory(), comm::ReduceOp::Average);
    }
    for (std::size_t b = 0; b < buckets_.size(); ++b) {
      auto& bucket = buckets_[b];
      {
        auto phase = ctx.timer.phase("sync/sync");
        co_await second[b];
      }
      auto phase = ctx.timer.phase("sync/compress");
      co_await comm.compute(bucket.powersgd.decompress_cost(), [&] { bucket.powersgd.decompress(bucket.buffer); });
    }
  } else {
    auto phase = ctx.timer.phase("sync/sync");  // the communication not hidden behind backward
    for (auto& ops : first)
      for (auto& op : ops) co_await op;
  }

  {
    auto phase = ctx.timer.phase("sync/unflatten_grad");
    const auto d = total_elements(ctx.grads);
    co_await comm.compute({0.0, (half ? 6.0 : 8.0) * as_double(d)}, [&] {
      for (auto& bucket : buckets_) {
        const at::Tensor& flat = half ? bucket.wire : bucket.buffer;
        for (const auto& s : bucket.slots) {
          auto& g = ctx.grads[s.param];
          g.copy_(flat.narrow(0, s.offset, g.numel()).view(g.sizes()));
        }
      }
    });
  }
  {
    auto phase = ctx.timer.phase("sync/apply_grad");
    const auto d = total_elements(ctx.params);
    co_await comm.compute(optimizer_.cost(d), [&] { optimizer_.apply_gradient(ctx.params, ctx.grads, ctx.lr); });
  }
  ++iter_;
  co_return n_bits;
}

const AlgorithmEntry& ddp_entry() {
  static const AlgorithmEntry entry{
      .name = "ddp",
      .description = "PyTorch DistributedDataParallel: gradient buckets all-reduced as they fill, overlapping the "
                     "backward pass, with a comm hook (allreduce, fp16_compress, bf16_compress, powersgd)",
      .paper = "PyTorch DDP (Li et al., VLDB 2020) and its comm hooks; PowerSGD (Vogels et al., NeurIPS 2019)",
      .fields = with_optimizer_fields({"bucket_cap_mb", "first_bucket_mb", "hook", "matrix_approximation_rank",
                                       "start_powerSGD_iter", "min_compression_rate", "use_error_feedback", "warm_start",
                                       "orthogonalization_epsilon", "random_seed"}),
      .parse =
          [](config::ObjectReader& a, AlgorithmSpec& spec, const SpecContext&) {
            DdpSettings s;
            s.hook = a.choice("hook", s.hook, hook_names());
            // Up to 2^20 MB: a cap of 2^40 bytes already holds any model in one bucket.
            s.bucket_cap_mb = a.number("bucket_cap_mb", s.bucket_cap_mb, 0.0, 1048576.0);
            s.first_bucket_mb = a.number("first_bucket_mb", s.first_bucket_mb, 0.0, 1048576.0);
            parse_powersgd(a, s.powersgd, s.hook == "powersgd",
                           fmt::format("only the powersgd hook of ddp reads it (this one is {})", s.hook));
            spec.settings = s;
          },
      .to_json =
          [](const AlgorithmSpec& spec, nlohmann::json& out) {
            const auto& s = settings_of<DdpSettings>(spec);
            out["hook"] = s.hook;
            out["bucket_cap_mb"] = s.bucket_cap_mb;
            out["first_bucket_mb"] = s.first_bucket_mb;
            if (s.hook == "powersgd") powersgd_json(s.powersgd, out);
          },
      .make = [](const AlgorithmSpec& spec, const net::Topology&, int) -> std::unique_ptr<Algorithm> {
        return std::make_unique<Ddp>(spec);
      },
      .memory = [](const AlgorithmSpec& spec, std::span<const std::int64_t> sizes, std::int64_t) {
        // Bucket buffers (fp32), the fp16 / bf16 payloads; PowerSGD: error, M0 and the
        // uncompressed copy (at most the model each; P and Q are smaller).
        const auto& s = settings_of<DdpSettings>(spec);
        MemoryFootprint f;
        f.model_buffers = 1.0;
        if (s.hook == "fp16_compress" || s.hook == "bf16_compress") {
          f.model_buffers += 0.5;
          f.payload_fraction = 0.5;
        }
        if (s.hook == "powersgd") f.model_buffers += (s.powersgd.group.error_feedback ? 2.0 : 0.0) + 1.0;
        std::vector<std::int64_t> bytes;
        for (auto n : sizes) bytes.push_back(4 * n);
        const auto buckets = static_cast<double>(
            kernels::ddp_buckets(bytes, ddp_cap_bytes(s.first_bucket_mb), ddp_cap_bytes(s.bucket_cap_mb)).size());
        f.collectives_per_step = std::max(1.0, (s.hook == "powersgd" ? 3.0 : 1.0) * buckets);
        return f;
      }};
  return entry;
}

}  // namespace dtsim::algorithms
