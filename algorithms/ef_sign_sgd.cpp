#include "algorithms/ef_sign_sgd.hpp"
#include "algorithms/gossip.hpp"
#include "algorithms/registry.hpp"
#include "algorithms/spec_fields.hpp"

namespace dtsim::algorithms {

std::uint64_t EfSignSgd::state_bytes() const { return tensor_bytes({memory_}); }

namespace {
sim::ComputeCost copy_cost(std::int64_t elements) { return {0.0, 8.0 * static_cast<double>(elements)}; }

kernels::CompressorSpec scaled_sign_spec() { return {.kind = "scaled_sign"}; }
}  // namespace

EfSignSgd::EfSignSgd(const AlgorithmSpec& spec)
    : optimizer_(spec.optimizer), compressor_(kernels::make_compressor(scaled_sign_spec())) {}

sim::Task<std::uint64_t> EfSignSgd::step(StepContext& ctx) {
  auto& comm = ctx.comm;
  const auto d = total_elements(ctx.params);
  const auto dd = static_cast<double>(d);
  const double n = static_cast<double>(comm.size());
  {
    auto phase = ctx.timer.phase("sync/apply_grad");
    co_await comm.compute(optimizer_.cost(d), [&] { optimizer_.transform_gradient(ctx.params, ctx.grads); });
  }
  {
    auto phase = ctx.timer.phase("sync/get_data");
    co_await comm.compute(copy_cost(d), [&] {
      if (flat_.count() == 0) {
        flat_ = kernels::TensorBuffer(ctx.grads);
        memory_ = at::zeros_like(flat_.buffer());
        update_ = at::zeros_like(flat_.buffer());
        for (const auto& g : ctx.grads) segments_.push_back(g.numel());
      } else {
        flat_.pack(ctx.grads);
      }
    });
  }
  {
    auto phase = ctx.timer.phase("sync/use_memory");
    co_await comm.compute({dd, 12.0 * dd}, [&] { flat_.buffer().add_(memory_); });
  }
  {
    auto phase = ctx.timer.phase("sync/compress");
    co_await comm.compute({2.0 * dd, 4.5 * dd}, [&] { compressor_.compress(flat_.buffer(), segments_, payload_); });
  }
  {
    auto phase = ctx.timer.phase("sync/sync");
    co_await comm.all_gather(payload_.bytes, gathered_);
  }
  {
    auto phase = ctx.timer.phase("sync/update_memory");
    co_await comm.compute({2.0 * dd, 12.0 * dd}, [&] {
      memory_.copy_(flat_.buffer());
      compressor_.decompress_add(payload_, -1.0, memory_);
    });
  }
  {
    auto phase = ctx.timer.phase("sync/decompress");
    co_await comm.compute({2.0 * n * dd, n * dd / 8.0 + 8.0 * dd}, [&] {
      update_.zero_();
      received_ = payload_;
      for (const auto& bytes : gathered_) {
        received_.bytes = bytes;
        compressor_.decompress_add(received_, 1.0, update_);
      }
      update_.div_(n);
    });
  }
  {
    auto phase = ctx.timer.phase("sync/apply_grad");
    co_await comm.compute({2.0 * dd, 12.0 * dd}, [&] {
      std::int64_t offset = 0;
      for (auto& p : ctx.params) {
        p.add_(update_.narrow(0, offset, p.numel()).view_as(p), -ctx.lr);
        offset += p.numel();
      }
    });
  }
  co_return static_cast<std::uint64_t>(payload_.payload_bits());
}

const AlgorithmEntry& ef_sign_sgd_entry() {
  static const AlgorithmEntry entry{
      .name = "ef_sign_sgd",
      .description = "EF-signSGD: scaled-sign compression of the gradient with error feedback, all-gathered",
      .paper = "Karimireddy, Rebjock, Stich, Jaggi, ICML 2019; the ChocoSGD reference code's ef_sign_sgd.py",
      .fields = with_optimizer_fields({}),
      .parse = [](config::ObjectReader& , AlgorithmSpec& , const SpecContext&) {},
      .to_json = [](const AlgorithmSpec& , nlohmann::json& ) {},
      .make = [](const AlgorithmSpec& spec, const net::Topology&, int) -> std::unique_ptr<Algorithm> {
        return std::make_unique<EfSignSgd>(spec);
      },
      .memory = [](const AlgorithmSpec& , std::span<const std::int64_t>, std::int64_t ) {
        MemoryFootprint f;
        f.model_buffers = 3;  // flat_, memory_, update_
        f.gathers = true;     // packed scaled signs
        f.payload_fraction = 1.0 / 32.0;
        return f;
      }};
  return entry;
}

}  // namespace dtsim::algorithms
