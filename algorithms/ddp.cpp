#include "algorithms/ddp.hpp"
#include "algorithms/registry.hpp"
#include "algorithms/spec_fields.hpp"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "kernels/ddp_buckets.hpp"

namespace dtsim::algorithms {

namespace {

double as_double(std::int64_t n) { return static_cast<double>(n); }
sim::ComputeCost copy_cost(std::int64_t n) { return {0.0, 8.0 * as_double(n)}; }

const DdpHookEntry& hook_entry(const std::string& name) {
  if (const auto* entry = find_ddp_hook(name)) return *entry;
  throw std::logic_error(fmt::format("/algorithm/hook: ddp has no hook \"{}\" (expected {})", name,
                                     fmt::join(ddp_hook_names(), ", ")));
}

// DDP's fields, then every hook's own.
std::vector<std::string> ddp_fields() {
  std::vector<std::string> fields{"bucket_cap_mb", "first_bucket_mb", "hook"};
  for (const auto& hook : ddp_hooks())
    for (const auto& f : hook.fields)
      if (std::find(fields.begin(), fields.end(), f) == fields.end()) fields.push_back(f);
  return with_optimizer_fields(fields);
}

}  // namespace

std::int64_t ddp_cap_bytes(double mb) { return static_cast<std::int64_t>(mb * 1024.0 * 1024.0); }

Ddp::Ddp(const AlgorithmSpec& spec) : Ddp(spec, settings_of<DdpSettings>(spec)) {}

Ddp::Ddp(const AlgorithmSpec& spec, const DdpSettings& s)
    : hook_(hook_entry(s.hook).make(s.hook_settings)),
      first_cap_(ddp_cap_bytes(s.first_bucket_mb)),
      cap_(ddp_cap_bytes(s.bucket_cap_mb)),
      optimizer_(spec.optimizer) {
  // Preconditions: the loader (ddp_entry's parse) refuses these with their JSON path.
  if (!(s.bucket_cap_mb >= 0.0) || !(s.first_bucket_mb >= 0.0))
    throw std::logic_error(fmt::format("/algorithm/bucket_cap_mb: ddp needs caps >= 0, got {} and {}",
                                       s.bucket_cap_mb, s.first_bucket_mb));
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
    DdpBucket bucket;
    for (std::size_t pos : indices) {
      const std::size_t j = order[pos];
      bucket_of_[j] = buckets_.size();
      slot_of_[j] = bucket.slots.size();
      bucket.slots.push_back({.param = j, .offset = bucket.elements});
      bucket.elements += ctx.params[j].numel();
    }
    bucket.buffer = at::zeros({bucket.elements}, options);
    buckets_.push_back(std::move(bucket));
  }
  hook_->init(buckets_, ctx.params);
}

sim::Task<std::uint64_t> Ddp::step(StepContext& ctx) {
  if (!ctx.backward)
    throw std::logic_error("ddp drives the backward pass: the training loop must pass StepContext::backward");
  auto& comm = ctx.comm;
  auto& bw = *ctx.backward;
  if (buckets_.empty()) init(ctx);
  DdpHookStep hook_step{.ctx = ctx, .buckets = buckets_, .iteration = iter_};

  // Per bucket, the collectives its hook issued at its close.
  std::vector<std::vector<comm::Op>> ops(buckets_.size());
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
      if (slot_of_[j] + 1 == bucket.slots.size()) n_bits += co_await hook_->bucket_ready(hook_step, bucket_of_[j], ops);
    }
  }
  co_await hook_->after_backward(hook_step, ops);

  {
    auto phase = ctx.timer.phase("sync/unflatten_grad");
    // Read the hook's result (its element size), write fp32.
    double bytes = 0.0;
    for (std::size_t b = 0; b < buckets_.size(); ++b)
      bytes += as_double(buckets_[b].elements) * (static_cast<double>(hook_->result(buckets_[b], b).element_size()) + 4.0);
    co_await comm.compute({0.0, bytes}, [&] {
      for (std::size_t b = 0; b < buckets_.size(); ++b) {
        const at::Tensor& flat = hook_->result(buckets_[b], b);
        for (const auto& s : buckets_[b].slots) {
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
      .description = fmt::format("PyTorch DistributedDataParallel: gradient buckets all-reduced as they fill, overlapping "
                                 "the backward pass, with a comm hook ({})",
                                 fmt::join(ddp_hook_names(), ", ")),
      .paper = "PyTorch DDP (Li et al., VLDB 2020) and its comm hooks; PowerSGD (Vogels et al., NeurIPS 2019)",
      .fields = ddp_fields(),
      .parse =
          [](config::ObjectReader& a, AlgorithmSpec& spec, const SpecContext&) {
            DdpSettings s;
            s.hook = a.choice("hook", s.hook, ddp_hook_names());
            const DdpHookEntry& hook = hook_entry(s.hook);
            // Another hook's field (a look, not a read: not this hook's).
            for (const auto& other : ddp_hooks())
              for (const auto& f : other.fields)
                if (std::find(hook.fields.begin(), hook.fields.end(), f) == hook.fields.end() && a.value().contains(f))
                  throw config::ScenarioError(a.where(f), config::ErrorKind::unknown_field,
                                              fmt::format("only the {} hook of ddp reads it (this one is {})", other.name,
                                                          s.hook));
            // Up to 2^20 MB: a cap of 2^40 bytes already holds any model in one bucket.
            s.bucket_cap_mb = a.number("bucket_cap_mb", s.bucket_cap_mb, 0.0, 1048576.0);
            s.first_bucket_mb = a.number("first_bucket_mb", s.first_bucket_mb, 0.0, 1048576.0);
            s.hook_settings = hook.parse(a);
            spec.settings = s;
          },
      .to_json =
          [](const AlgorithmSpec& spec, nlohmann::json& out) {
            const auto& s = settings_of<DdpSettings>(spec);
            out["hook"] = s.hook;
            out["bucket_cap_mb"] = s.bucket_cap_mb;
            out["first_bucket_mb"] = s.first_bucket_mb;
            hook_entry(s.hook).to_json(s.hook_settings, out);
          },
      .make = [](const AlgorithmSpec& spec, const net::Topology&, int) -> std::unique_ptr<Algorithm> {
        return std::make_unique<Ddp>(spec);
      },
      .memory = [](const AlgorithmSpec& spec, std::span<const std::int64_t> sizes, std::int64_t) {
        // The fp32 bucket buffers (the model), and the hook's own.
        const auto& s = settings_of<DdpSettings>(spec);
        const DdpHookEntry& hook = hook_entry(s.hook);
        MemoryFootprint f;
        f.model_buffers = 1.0;
        hook.memory(s.hook_settings, f);
        std::vector<std::int64_t> bytes;
        for (auto n : sizes) bytes.push_back(4 * n);
        const auto buckets = static_cast<double>(
            kernels::ddp_buckets(bytes, ddp_cap_bytes(s.first_bucket_mb), ddp_cap_bytes(s.bucket_cap_mb)).size());
        f.collectives_per_step = std::max(1.0, hook.collectives_per_bucket * buckets);
        return f;
      }};
  return entry;
}

}  // namespace dtsim::algorithms
