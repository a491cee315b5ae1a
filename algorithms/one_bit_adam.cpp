#include "algorithms/one_bit_adam.hpp"

#include <cmath>

#include <fmt/format.h>

#include "algorithms/apply_gradient.hpp"
#include "algorithms/gossip.hpp"
#include "algorithms/optimizers/adam_moments.hpp"
#include "algorithms/registry.hpp"

namespace dtsim::algorithms {

namespace {

kernels::CompressorSpec sign_spec() { return {.kind = "sign"}; }

// A sign payload of `numel` elements around words the network delivered (int32, contiguous).
kernels::Payload sign_payload(const at::Tensor& words, std::int64_t numel) {
  kernels::Payload p;
  p.kind = "sign";
  p.dtype = at::kFloat;
  p.numel = numel;
  p.segments = {numel};
  p.bytes = words.view(at::kByte);
  return p;
}

}  // namespace

OneBitAdam::OneBitAdam(const AlgorithmSpec& spec)
    : settings_(settings_of<OneBitAdamSettings>(spec)),
      weight_decay_(spec.optimizer.weight_decay),
      weight_decay_mask_(spec.optimizer.weight_decay_mask),
      signs_(sign_spec()) {}

std::uint64_t OneBitAdam::state_bytes() const {
  return tensor_bytes(m_) + tensor_bytes(v_) + tensor_bytes({worker_error_, server_error_});
}

at::Tensor OneBitAdam::worker_error(std::size_t i) const {
  if (!worker_error_.defined()) return {};
  return worker_error_.narrow(0, worker_offset_.at(i), padded_.at(i));
}

at::Tensor OneBitAdam::server_error(std::size_t i) const {
  if (!server_error_.defined()) return {};
  return server_error_.narrow(0, server_offset_.at(i), padded_.at(i) / ranks_);
}

void OneBitAdam::prepare(const std::vector<at::Tensor>& params, int ranks) {
  ranks_ = ranks;
  const std::int64_t unit = 32 * static_cast<std::int64_t>(ranks_);
  for (const auto& p : params) {
    m_.push_back(at::zeros_like(p, at::MemoryFormat::Contiguous));
    v_.push_back(at::zeros_like(p, at::MemoryFormat::Contiguous));
    const std::int64_t padded = (p.numel() + unit - 1) / unit * unit;
    padded_.push_back(padded);
    worker_offset_.push_back(worker_elements_);
    server_offset_.push_back(server_elements_);
    worker_elements_ += padded;
    server_elements_ += padded / ranks_;
  }
}

// optimizers/adam.cpp's update, operation by operation (AdamW's decay when it decays).
void OneBitAdam::adam_update(std::size_t i, at::Tensor& p, const at::Tensor& g, double lr, std::int64_t t, bool decays) {
  const auto& s = settings_;
  if (decays) p.mul_(1.0 - lr * weight_decay_);
  optimizers::adam_first_moment_(m_[i], g, s.beta1);
  v_[i].mul_(s.beta2).addcmul_(g, g, 1.0 - s.beta2);
  const double bias_correction1 = 1.0 - std::pow(s.beta1, static_cast<double>(t));
  const double bias_correction2 = 1.0 - std::pow(s.beta2, static_cast<double>(t));
  const double step_size = lr / bias_correction1;
  const at::Tensor denom = (v_[i].sqrt() / optimizers::adam_bias_correction2_sqrt(bias_correction2)).add_(s.eps);
  p.addcdiv_(m_[i], denom, -step_size);
}

// The same update with v and its bias correction frozen at step T_w.
void OneBitAdam::apply_frozen(std::size_t i, at::Tensor& p, double lr, std::int64_t t) {
  const auto& s = settings_;
  const double bias_correction1 = 1.0 - std::pow(s.beta1, static_cast<double>(t));
  const double bias_correction2 = 1.0 - std::pow(s.beta2, static_cast<double>(s.freeze_step));
  const at::Tensor denom = (v_[i].sqrt() / optimizers::adam_bias_correction2_sqrt(bias_correction2)).add_(s.eps);
  p.addcdiv_(m_[i], denom, -(lr / bias_correction1));
}

sim::Task<std::uint64_t> OneBitAdam::step(StepContext& ctx) {
  auto& comm = ctx.comm;
  if (m_.empty()) prepare(ctx.params, comm.size());
  if (ctx.local_index > settings_.freeze_step) co_return co_await compressed_step(ctx);
  const auto d = total_elements(ctx.params);
  const double dd = static_cast<double>(d);
  {
    auto phase = ctx.timer.phase("sync/get_data");
    co_await comm.compute({0.0, 8.0 * dd}, [&] {
      if (flat_grads_.count() == 0)
        flat_grads_ = kernels::TensorBuffer(ctx.grads);
      else
        flat_grads_.pack(ctx.grads);
    });
  }
  {
    auto phase = ctx.timer.phase("sync/sync");
    co_await comm.all_reduce(flat_grads_.buffer(), comm::ReduceOp::Average);
  }
  {
    auto phase = ctx.timer.phase("sync/apply_grad");
    co_await comm.compute({12.0 * dd, 36.0 * dd}, [&] {
      for (std::size_t i = 0; i < ctx.params.size(); ++i) {
        const bool decays = weight_decay_ != 0.0 && (weight_decay_mask_.empty() || weight_decay_mask_[i]);
        adam_update(i, ctx.params[i], flat_grads_.view(i), ctx.lr, ctx.local_index, decays);
      }
    });
  }
  co_return 32 * static_cast<std::uint64_t>(d);
}

sim::Task<std::uint64_t> OneBitAdam::compressed_step(StepContext& ctx) {
  auto& comm = ctx.comm;
  const std::size_t tensors = ctx.params.size();
  const auto T = static_cast<std::int64_t>(tensors);
  const int rank = comm.rank();
  const double dd = static_cast<double>(total_elements(ctx.params));
  const double nw = static_cast<double>(worker_elements_), ns = static_cast<double>(server_elements_);
  const double lr = ctx.lr;
  {
    auto phase = ctx.timer.phase("sync/apply_grad");
    co_await comm.compute({4.0 * dd, 20.0 * dd}, [&] {
      for (std::size_t i = 0; i < tensors; ++i) {
        const bool decays = weight_decay_ != 0.0 && (weight_decay_mask_.empty() || weight_decay_mask_[i]);
        if (decays) ctx.params[i].mul_(1.0 - lr * weight_decay_);
        optimizers::adam_first_moment_(m_[i], ctx.grads[i], settings_.beta1);
      }
    });
  }
  if (ranks_ == 1) {
    auto phase = ctx.timer.phase("sync/apply_grad");
    co_await comm.compute({4.0 * dd, 16.0 * dd}, [&] {
      for (std::size_t i = 0; i < tensors; ++i) apply_frozen(i, ctx.params[i], lr, ctx.local_index);
    });
    co_return 0;
  }
  // Words per server chunk of each tensor, and in a whole phase-1 message after the scales.
  std::vector<std::int64_t> chunk_words(tensors);
  std::int64_t message_words = T;
  for (std::size_t i = 0; i < tensors; ++i) {
    chunk_words[i] = padded_[i] / (32 * ranks_);
    message_words += chunk_words[i];
  }
  {
    auto phase = ctx.timer.phase("sync/compress");
    co_await comm.compute({4.0 * nw, 24.0 * nw}, [&] {
      if (!x_.defined()) {
        const auto options = m_[0].options();
        x_ = at::zeros({worker_elements_}, options);
        worker_error_ = at::zeros({worker_elements_}, options);
        server_error_ = at::zeros({server_elements_}, options);
        y_ = at::zeros({server_elements_}, options);
        decoded_ = at::zeros({worker_elements_}, options);
        outgoing_.assign(static_cast<std::size_t>(ranks_), at::Tensor());
        incoming_.assign(static_cast<std::size_t>(ranks_), at::Tensor());
        for (auto& in : incoming_) in = at::empty({message_words}, options.dtype(at::kInt));
      }
      // x = [m, 0] + e_w, as DeepSpeed pads and adds.
      for (std::size_t i = 0; i < tensors; ++i) {
        const std::int64_t n = m_[i].numel();
        x_.narrow(0, worker_offset_[i], n).copy_(m_[i].reshape({-1}));
        x_.narrow(0, worker_offset_[i] + n, padded_[i] - n).zero_();
      }
      x_.add_(worker_error_);
      signs_.compress(x_, {}, worker_payload_);
      signs_.decompress(worker_payload_, decoded_);
      std::vector<at::Tensor> scales;
      for (std::size_t i = 0; i < tensors; ++i) {
        const auto x = x_.narrow(0, worker_offset_[i], padded_[i]);
        scales.push_back(x.norm().div(std::sqrt(static_cast<double>(padded_[i]))));
        worker_error_.narrow(0, worker_offset_[i], padded_[i])
            .copy_(x - scales.back() * decoded_.narrow(0, worker_offset_[i], padded_[i]));
      }
      worker_scales_ = at::stack(scales);
      const auto words = worker_payload_.bytes.view(at::kInt);
      for (int j = 0; j < ranks_; ++j) {
        std::vector<at::Tensor> parts{worker_scales_.view(at::kInt)};
        for (std::size_t i = 0; i < tensors; ++i)
          parts.push_back(words.narrow(0, worker_offset_[i] / 32 + j * chunk_words[i], chunk_words[i]));
        outgoing_[static_cast<std::size_t>(j)] = at::cat(parts);
      }
      incoming_[static_cast<std::size_t>(rank)].copy_(outgoing_[static_cast<std::size_t>(rank)]);
    });
  }
  {
    auto phase = ctx.timer.phase("sync/phase1");
    std::vector<comm::Op> ops;
    for (int j = 0; j < ranks_; ++j)
      if (j != rank) ops.push_back(comm.send(outgoing_[static_cast<std::size_t>(j)], j));
    for (int s = 0; s < ranks_; ++s)
      if (s != rank) ops.push_back(comm.recv(incoming_[static_cast<std::size_t>(s)], s));
    for (auto& op : ops) co_await op;
  }
  {
    // The server of chunk `rank`: y = sum_s (s_s / R) sign_s + e_s, compressed again.
    auto phase = ctx.timer.phase("sync/server");
    co_await comm.compute({(2.0 * ranks_ + 6.0) * ns, (4.5 * ranks_ + 24.0) * ns}, [&] {
      auto signs = at::empty({ranks_, server_elements_}, x_.options());
      std::vector<at::Tensor> scales;
      for (int s = 0; s < ranks_; ++s) {
        const auto& in = incoming_[static_cast<std::size_t>(s)];
        auto row = signs[s];
        signs_.decompress(sign_payload(in.narrow(0, T, message_words - T), server_elements_), row);
        scales.push_back(in.narrow(0, 0, T).view(at::kFloat));
      }
      const auto worker_scales = at::stack(scales);  // [R, T]
      std::vector<at::Tensor> server_scales;
      for (std::size_t i = 0; i < tensors; ++i) {
        const std::int64_t c = padded_[i] / ranks_;
        auto y = y_.narrow(0, server_offset_[i], c);
        const auto weights = worker_scales.narrow(1, static_cast<std::int64_t>(i), 1).mul(1.0 / ranks_);  // [R, 1]
        y.copy_(signs.narrow(1, server_offset_[i], c).mul(weights).sum(0));
        y.add_(server_error_.narrow(0, server_offset_[i], c));
        server_scales.push_back(y.norm().div(std::sqrt(static_cast<double>(c))));
      }
      signs_.compress(y_, {}, server_payload_);
      auto decoded = decoded_.narrow(0, 0, server_elements_);
      signs_.decompress(server_payload_, decoded);
      for (std::size_t i = 0; i < tensors; ++i) {
        const std::int64_t c = padded_[i] / ranks_;
        server_error_.narrow(0, server_offset_[i], c)
            .copy_(y_.narrow(0, server_offset_[i], c) - server_scales[i] * decoded.narrow(0, server_offset_[i], c));
      }
      server_scales_ = at::stack(server_scales);
      outgoing_[static_cast<std::size_t>(rank)] = at::cat({server_scales_.view(at::kInt), server_payload_.bytes.view(at::kInt)});
    });
  }
  {
    auto phase = ctx.timer.phase("sync/phase2");
    co_await comm.all_gather(outgoing_[static_cast<std::size_t>(rank)], gathered_);
  }
  {
    auto phase = ctx.timer.phase("sync/decompress");
    co_await comm.compute({ranks_ * ns + dd, ranks_ * 4.5 * ns + 8.0 * dd}, [&] {
      auto signs = at::empty({ranks_, server_elements_}, x_.options());
      for (int j = 0; j < ranks_; ++j) {
        auto row = signs[j];
        signs_.decompress(sign_payload(gathered_[static_cast<std::size_t>(j)].narrow(0, T, message_words - T),
                                       server_elements_),
                          row);
      }
      for (std::size_t i = 0; i < tensors; ++i) {
        const std::int64_t c = padded_[i] / ranks_;
        std::vector<at::Tensor> scales;
        for (int j = 0; j < ranks_; ++j)
          scales.push_back(gathered_[static_cast<std::size_t>(j)].narrow(0, static_cast<std::int64_t>(i), 1).view(at::kFloat));
        const auto chunks = signs.narrow(1, server_offset_[i], c).mul(at::stack(scales));  // [R, c] * [R, 1]
        m_[i].copy_(chunks.reshape({-1}).narrow(0, 0, m_[i].numel()).view(m_[i].sizes()));
      }
    });
  }
  {
    auto phase = ctx.timer.phase("sync/apply_grad");
    co_await comm.compute({4.0 * dd, 16.0 * dd}, [&] {
      for (std::size_t i = 0; i < tensors; ++i) apply_frozen(i, ctx.params[i], lr, ctx.local_index);
    });
  }
  std::uint64_t n_bits = 0;
  for (const auto padded : padded_) n_bits += static_cast<std::uint64_t>(padded);
  co_return n_bits + 32 * static_cast<std::uint64_t>(ranks_) * static_cast<std::uint64_t>(T);
}

namespace {

void parse_one_bit_adam(config::ObjectReader& a, AlgorithmSpec& spec, const SpecContext&) {
  OneBitAdamSettings s;
  s.beta1 = a.number_below("beta1", s.beta1, 0.0, 1.0);
  s.beta2 = a.number_below("beta2", s.beta2, 0.0, 1.0);
  s.eps = a.number("eps", s.eps, 0.0, config::kInf);
  // 0 would freeze v = 0 with the bias correction 1 - b2^0 = 0: no step is defined.
  s.freeze_step = a.integer("freeze_step", s.freeze_step, 1, config::kIntMax);
  spec.settings = s;
}

void one_bit_adam_json(const AlgorithmSpec& spec, nlohmann::json& out) {
  const auto& s = settings_of<OneBitAdamSettings>(spec);
  out["beta1"] = s.beta1;
  out["beta2"] = s.beta2;
  out["eps"] = s.eps;
  out["freeze_step"] = s.freeze_step;
}

MemoryFootprint one_bit_adam_memory(const AlgorithmSpec& spec, std::span<const std::int64_t>, std::int64_t steps) {
  const auto& s = settings_of<OneBitAdamSettings>(spec);
  MemoryFootprint f;
  // m, v, e_w, x, the decoded signs, the warm-up's flat gradients; e_s, y and the server's
  // sign matrix are R times smaller or R rows of 1 / R.
  f.model_buffers = 8;
  f.gathers = steps > s.freeze_step;  // phase 2's all-gather of the server chunks
  f.payload_fraction = 1.0 / 32.0;
  f.collectives_per_step = 2.0;  // phase 1's messages, phase 2's all-gather (warm-up: one all-reduce)
  return f;
}

}  // namespace

const AlgorithmEntry& one_bit_adam_entry() {
  static const AlgorithmEntry entry{
      .name = "one_bit_adam",
      .description = "1-bit Adam: Adam warm-up on all-reduced gradients, then frozen variance and the momentum averaged "
                     "by a two-phase 1-bit all-reduce with worker and server error compensation",
      .paper = "Tang, Gan, Awan et al., ICML 2021, arXiv 2102.02888 (1-bit Adam); DeepSpeed's OnebitAdam and "
               "NcclBackend.compressed_allreduce",
      .fields = {"lr", "weight_decay", "lr_schedule", "beta1", "beta2", "eps", "freeze_step"},
      .parse = parse_one_bit_adam,
      .to_json = one_bit_adam_json,
      .make = [](const AlgorithmSpec& spec, const net::Topology&, int) -> std::unique_ptr<Algorithm> {
        return std::make_unique<OneBitAdam>(spec);
      },
      .memory = one_bit_adam_memory,
      .replays_from_one_rank = false};
  return entry;
}

}  // namespace dtsim::algorithms
