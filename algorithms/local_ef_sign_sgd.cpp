#include "algorithms/local_ef_sign_sgd.hpp"
#include "algorithms/gossip.hpp"
#include "algorithms/registry.hpp"
#include "algorithms/spec_fields.hpp"

namespace dtsim::algorithms {

std::uint64_t LocalEfSignSgd::state_bytes() const { return tensor_bytes({consensus_.buffer(), memory_}); }

namespace {
kernels::CompressorSpec sign_spec() { return {.kind = "sign"}; }
}  // namespace

LocalEfSignSgd::LocalEfSignSgd(const AlgorithmSpec& spec)
    : optimizer_(spec.optimizer),
      schedule_(settings_of<LocalEfSignSgdSettings>(spec).schedule),
      packed_(settings_of<LocalEfSignSgdSettings>(spec).packed_signs),
      compressor_(kernels::make_compressor(sign_spec())) {}

sim::Task<std::uint64_t> LocalEfSignSgd::step(StepContext& ctx) {
  auto& comm = ctx.comm;
  const auto d = total_elements(ctx.params);
  const auto dd = static_cast<double>(d);
  const auto L = static_cast<std::int64_t>(ctx.params.size());
  const double n = static_cast<double>(comm.size());
  {
    auto phase = ctx.timer.phase("sync/local_update");
    co_await comm.compute(optimizer_.cost(d), [&] {
      if (consensus_.count() == 0) {  // x_bar = x_0, e = 0
        consensus_ = kernels::TensorBuffer(ctx.params);
        flat_params_ = kernels::TensorBuffer(ctx.params);
        offsets_ = flat_offsets(ctx.params);
        for (const auto& p : ctx.params) segments_.push_back(p.numel());
        memory_ = at::zeros_like(consensus_.buffer());
        input_ = at::zeros_like(memory_);
        own_signs_ = at::zeros_like(memory_);
        signs_ = at::zeros_like(memory_);
        own_scales_ = at::zeros({L}, memory_.options());
        scales_ = at::zeros({L}, memory_.options());
      }
      optimizer_.apply_gradient(ctx.params, ctx.grads, ctx.lr);
    });
  }
  if (!schedule_.sync_step(ctx.local_index)) co_return 0;
  {
    auto phase = ctx.timer.phase("sync/get_params");
    co_await comm.compute({0.0, 8.0 * dd}, [&] { flat_params_.pack(ctx.params); });
  }
  {
    auto phase = ctx.timer.phase("sync/memory_and_compress");
    co_await comm.compute({6.0 * dd, 40.0 * dd}, [&] {
      at::sub_out(input_, consensus_.buffer(), flat_params_.buffer());
      memory_.add_(input_);
      if (packed_) {
        compressor_.compress(memory_, segments_, payload_);
        compressor_.decompress(payload_, own_signs_);
      } else {
        at::sign_out(own_signs_, memory_);
      }
      // Scales are computed on the host and copied in: own_scales_ may live on a GPU.
      std::vector<float> s(static_cast<std::size_t>(L));
      for (std::int64_t l = 0; l < L; ++l) {
        auto e = memory_.narrow(0, offsets_[l], offsets_[l + 1] - offsets_[l]);
        const float scale = e.abs().sum().item<float>() / static_cast<float>(e.numel());
        s[static_cast<std::size_t>(l)] = scale;
        e.sub_(own_signs_.narrow(0, offsets_[l], offsets_[l + 1] - offsets_[l]) * scale);
      }
      own_scales_.copy_(at::from_blob(s.data(), {L}, at::kFloat));
      scales_.copy_(own_scales_);
      if (!packed_) signs_.copy_(own_signs_);
    });
  }
  if (packed_) {
    auto phase = ctx.timer.phase("sync/directions_1bit");
    co_await comm.all_gather(payload_.bytes, gathered_);
    co_await comm.compute({2.0 * n * dd, n * dd / 8.0 + 8.0 * dd}, [&] {
      signs_.zero_();
      received_ = payload_;
      for (const auto& bytes : gathered_) {
        received_.bytes = bytes;
        compressor_.decompress_add(received_, 1.0, signs_);
      }
      signs_.div_(n);
    });
  } else {
    auto phase = ctx.timer.phase("sync/directions");
    co_await comm.all_reduce(signs_, comm::ReduceOp::Average);
  }
  {
    auto phase = ctx.timer.phase("sync/magnitudes");
    co_await comm.all_reduce(scales_, comm::ReduceOp::Average);
  }
  {
    auto phase = ctx.timer.phase("sync/update_consensus");
    co_await comm.compute({2.0 * dd, 20.0 * dd},
                          [&] { apply_scaled_signs(consensus_, signs_, scales_, offsets_, ctx.params); });
  }
  const auto sign_bits = packed_ ? static_cast<std::uint64_t>(payload_.payload_bits()) : 32ULL * static_cast<std::uint64_t>(d);
  co_return sign_bits + 32ULL * static_cast<std::uint64_t>(L);
}

const AlgorithmEntry& local_ef_sign_sgd_entry() {
  static const AlgorithmEntry entry{
      .name = "local_ef_sign_sgd",
      .description = "local SGD whose periodic synchronisation sends error-feedback scaled signs of the model difference",
      .paper = "Lin, Stich, Patel, Jaggi, ICLR 2020; Karimireddy et al., ICML 2019; the LocalSGD-Code repository's local_ef_sign_sgd.py",
      .fields = with_optimizer_fields({"local_steps", "turn_on_local_steps_from", "packed_signs"}),
      .parse =
          [](config::ObjectReader& a, AlgorithmSpec& spec, const SpecContext&) {
            LocalEfSignSgdSettings s;
            parse_local_schedule(a, s.schedule);
            s.packed_signs = a.boolean("packed_signs", s.packed_signs);
            spec.settings = s;
          },
      .to_json =
          [](const AlgorithmSpec& spec, nlohmann::json& out) {
            const auto& s = settings_of<LocalEfSignSgdSettings>(spec);
            local_schedule_json(s.schedule, out);
            out["packed_signs"] = s.packed_signs;
          },
      .make = [](const AlgorithmSpec& spec, const net::Topology&, int) -> std::unique_ptr<Algorithm> {
        return std::make_unique<LocalEfSignSgd>(spec);
      },
      .memory = [](const AlgorithmSpec& spec, std::span<const std::int64_t>, std::int64_t steps) {
        MemoryFootprint f;
        f.model_buffers = 6;  // consensus_, flat_params_, memory_, input_, own_signs_, signs_
        const auto& s = settings_of<LocalEfSignSgdSettings>(spec);
        f.gathers = s.packed_signs;
        f.payload_fraction = 1.0 / 32.0;
        f.collectives_per_step = 2.0 * s.schedule.sync_share(steps);  // signs (or their gather), scales
        return f;
      }};
  return entry;
}

}  // namespace dtsim::algorithms
