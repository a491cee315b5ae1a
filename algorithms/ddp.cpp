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

// The PowerSGD-only fields, refused under the other hooks.
const std::vector<std::string>& powersgd_fields() {
  static const std::vector<std::string> fields{"matrix_approximation_rank", "start_powerSGD_iter", "min_compression_rate",
                                               "use_error_feedback",        "warm_start",          "orthogonalization_epsilon",
                                               "random_seed"};
  return fields;
}

// PowerSGDState's own check (the buckets PyTorch rebuilds after the first iteration would
// not match the error and Q memories); dtsim's buckets never change, but the rule is
// PyTorch's.
std::string powersgd_start_problem(const AlgorithmSpec& spec) {
  if ((spec.use_error_feedback || spec.warm_start) && spec.start_powerSGD_iter <= 1)
    return fmt::format("expected > 1 with use_error_feedback or warm_start (PyTorch's PowerSGDState: PowerSGD can only "
                       "be applied after the first two iterations of DDP), got {}",
                       spec.start_powerSGD_iter);
  return {};
}

// Gram-Schmidt over a rows x r matrix reads and writes it about r + 1 times.
sim::ComputeCost orthogonalize_cost(std::int64_t rows, std::int64_t r) {
  const double e = as_double(rows * r);
  return {4.0 * e * as_double(r), 8.0 * e * as_double(r + 1)};
}

// An n x k times k x m product.
sim::ComputeCost matmul_cost(std::int64_t n, std::int64_t k, std::int64_t m) {
  return {2.0 * as_double(n) * as_double(k) * as_double(m), 4.0 * as_double(n * k + k * m + n * m)};
}

sim::ComputeCost operator+(sim::ComputeCost a, const sim::ComputeCost& b) {
  a.flops += b.flops;
  a.bytes += b.bytes;
  return a;
}

// PyTorch's _orthogonalize for one matrix (rows x r, r <= rows), in place: Gram-Schmidt,
// column by column: col /= ||col|| (+ epsilon when epsilon > 0), then the projection on
// col is removed from the later columns. A zero column with epsilon 0 becomes NaN, as in
// PyTorch.
void powersgd_orthogonalize(at::Tensor& matrix, double epsilon) {
  const std::int64_t r = matrix.size(1);
  for (std::int64_t i = 0; i < r; ++i) {
    at::Tensor col = matrix.narrow(1, i, 1);
    const at::Tensor norm = col.norm(2, {0}, true);
    if (epsilon == 0.0)
      col.div_(norm);
    else
      col.div_(norm + epsilon);
    if (i + 1 < r) {
      at::Tensor rest = matrix.narrow(1, i + 1, r - i - 1);
      rest.sub_((col * rest).sum({0}, true) * col);
    }
  }
}

}  // namespace

std::int64_t ddp_cap_bytes(double mb) { return static_cast<std::int64_t>(mb * 1024.0 * 1024.0); }

std::int64_t Ddp::Bucket::p_elements() const {
  std::int64_t n = 0;
  for (const auto& s : slots) n += s.n * s.r;
  return n;
}

std::int64_t Ddp::Bucket::q_elements() const {
  std::int64_t n = 0;
  for (const auto& s : slots) n += s.m * s.r;
  return n;
}

Ddp::Ddp(const AlgorithmSpec& spec)
    : hook_(parse_hook(spec.hook)),
      first_cap_(ddp_cap_bytes(spec.first_bucket_mb)),
      cap_(ddp_cap_bytes(spec.bucket_cap_mb)),
      rank_(spec.matrix_approximation_rank),
      start_iter_(spec.start_powerSGD_iter),
      min_rate_(spec.min_compression_rate),
      error_feedback_(spec.use_error_feedback),
      warm_start_(spec.warm_start),
      epsilon_(spec.orthogonalization_epsilon),
      generator_(at::make_generator<at::CPUGeneratorImpl>(spec.random_seed)),
      optimizer_(spec.optimizer) {
  // Preconditions: the loader (ddp_entry's parse) refuses these with their JSON path.
  if (!(spec.bucket_cap_mb >= 0.0) || !(spec.first_bucket_mb >= 0.0))
    throw std::logic_error(fmt::format("/algorithm/bucket_cap_mb: ddp needs caps >= 0, got {} and {}",
                                       spec.bucket_cap_mb, spec.first_bucket_mb));
  if (hook_ == Hook::powersgd) {
    if (rank_ < 1)
      throw std::logic_error(fmt::format("/algorithm/matrix_approximation_rank: expected >= 1, got {}", rank_));
    if (const auto problem = powersgd_start_problem(spec); !problem.empty())
      throw std::logic_error("/algorithm/start_powerSGD_iter: " + problem);
  }
}

// What PowerSGD carries from one step to the next: the error e and, with warm start, Q
// (M0, P and the uncompressed copy are rewritten every step).
std::uint64_t Ddp::state_bytes() const {
  std::uint64_t bytes = 0;
  for (const auto& b : buckets_) {
    if (b.error.defined()) bytes += static_cast<std::uint64_t>(b.error.nbytes());
    if (warm_start_ && b.have_q) bytes += static_cast<std::uint64_t>(b.q_memory.nbytes());
  }
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
      s.param = j;
      s.offset = bucket.elements;
      if (p.dim() >= 1 && p.numel() > 0) {
        s.n = p.size(0);
        s.m = p.numel() / s.n;
      } else {
        s.n = p.numel();
        s.m = 1;
      }
      if (hook_ == Hook::powersgd) {
        const std::int64_t r = std::min({s.n, s.m, rank_});
        // PyTorch's _should_compress: (n + m) r min_compression_rate < n m.
        if (r > 0 && as_double((s.n + s.m) * r) * min_rate_ < as_double(s.n * s.m)) s.r = r;
      }
      bucket_of_[j] = buckets_.size();
      slot_of_[j] = bucket.slots.size();
      bucket.slots.push_back(s);
      bucket.elements += p.numel();
    }
    bucket.buffer = at::zeros({bucket.elements}, options);
    if (hook_ == Hook::powersgd) {
      std::int64_t unc = 0;
      for (const auto& s : bucket.slots)
        if (s.r == 0) unc += s.n * s.m;
      bucket.uncompressed = at::empty({unc}, options);
      bucket.p_memory = at::empty({bucket.p_elements()}, options);
      bucket.q_memory = at::empty({bucket.q_elements()}, options);
    }
    buckets_.push_back(std::move(bucket));
  }
}

at::Tensor Ddp::matrix(Bucket& bucket, const Slot& s) const {
  return bucket.buffer.narrow(0, s.offset, s.n * s.m).view({s.n, s.m});
}

namespace {
// The compressed slots' rows x r views of a flat P or Q memory (rows = n for P, m for Q).
std::vector<at::Tensor> low_rank_views(const Ddp::Bucket& bucket, const at::Tensor& memory, bool p) {
  std::vector<at::Tensor> out;
  std::int64_t off = 0;
  for (const auto& s : bucket.slots) {
    if (s.r == 0) continue;
    const std::int64_t rows = p ? s.n : s.m;
    out.push_back(memory.narrow(0, off, rows * s.r).view({rows, s.r}));
    off += rows * s.r;
  }
  return out;
}
}  // namespace

std::vector<at::Tensor> Ddp::ps(std::size_t b) const { return low_rank_views(buckets_.at(b), buckets_.at(b).p_memory, true); }
std::vector<at::Tensor> Ddp::qs(std::size_t b) const { return low_rank_views(buckets_.at(b), buckets_.at(b).q_memory, false); }

sim::ComputeCost Ddp::powersgd_first_cost(const Bucket& bucket) const {
  const double e = as_double(bucket.elements);
  sim::ComputeCost cost{0.0, 0.0};
  if (error_feedback_) cost = cost + sim::ComputeCost{e, 12.0 * e} + copy_cost(bucket.elements);  // M = b + e; M0
  cost = cost + copy_cost(bucket.uncompressed.numel());
  for (const auto& s : bucket.slots) {
    if (s.r == 0) continue;
    cost = cost + orthogonalize_cost(s.m, s.r) + matmul_cost(s.n, s.m, s.r);
  }
  return cost;
}

// M = b + e, M0 = M, the uncompressed tensors packed, Q drawn or orthogonalized, P = M Q.
void Ddp::powersgd_first_half(Bucket& bucket) {
  if (error_feedback_) {
    if (bucket.error.defined())
      bucket.buffer.add_(bucket.error);
    else
      bucket.error = at::zeros_like(bucket.buffer);
    bucket.input_copy = bucket.buffer.clone();
  }
  std::int64_t off = 0;
  for (const auto& s : bucket.slots) {
    if (s.r != 0) continue;
    bucket.uncompressed.narrow(0, off, s.n * s.m).copy_(bucket.buffer.narrow(0, s.offset, s.n * s.m));
    off += s.n * s.m;
  }
  const bool draw = !warm_start_ || !bucket.have_q;
  std::size_t i = 0;
  const auto p_views = ps(index_of(bucket));
  const auto q_views = qs(index_of(bucket));
  for (const auto& s : bucket.slots) {
    if (s.r == 0) continue;
    at::Tensor q = q_views[i];
    if (draw) q.copy_(at::randn({s.m, s.r}, generator_, at::TensorOptions().dtype(at::kFloat)));
    powersgd_orthogonalize(q, epsilon_);
    p_views[i].copy_(at::mm(matrix(bucket, s), q));
    ++i;
  }
  bucket.have_q = true;
}

// P arrived (summed): the uncompressed average goes back into b; P orthogonalized; Q = M^T P.
void Ddp::powersgd_second_half(Bucket& bucket) {
  std::int64_t off = 0;
  for (const auto& s : bucket.slots) {
    if (s.r != 0) continue;
    bucket.buffer.narrow(0, s.offset, s.n * s.m).copy_(bucket.uncompressed.narrow(0, off, s.n * s.m));
    off += s.n * s.m;
  }
  const std::size_t b = index_of(bucket);
  auto p_views = ps(b);
  const auto q_views = qs(b);
  std::size_t i = 0;
  for (const auto& s : bucket.slots) {
    if (s.r == 0) continue;
    powersgd_orthogonalize(p_views[i], epsilon_);
    q_views[i].copy_(at::mm(matrix(bucket, s).t(), p_views[i]));
    ++i;
  }
}

// Q arrived (averaged): M = P Q^T into b; e = M0 - b.
void Ddp::powersgd_decompress(Bucket& bucket) {
  const std::size_t b = index_of(bucket);
  const auto p_views = ps(b);
  const auto q_views = qs(b);
  std::size_t i = 0;
  for (const auto& s : bucket.slots) {
    if (s.r == 0) continue;
    matrix(bucket, s).copy_(at::mm(p_views[i], q_views[i].t()));
    ++i;
  }
  if (error_feedback_) at::sub_out(bucket.error, bucket.input_copy, bucket.buffer);
  if (!warm_start_) bucket.have_q = false;
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
          co_await comm.compute(powersgd_first_cost(bucket), [&] { powersgd_first_half(bucket); });
        }
        if (bucket.uncompressed.numel() > 0)
          ops.push_back(comm.stream_all_reduce(bucket.uncompressed, comm::ReduceOp::Average));
        if (bucket.p_memory.numel() > 0) ops.push_back(comm.stream_all_reduce(bucket.p_memory, comm::ReduceOp::Sum));
        n_bits += 32ULL * static_cast<std::uint64_t>(bucket.uncompressed.numel() + bucket.p_elements() +
                                                     bucket.q_elements());
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
        sim::ComputeCost cost = copy_cost(bucket.uncompressed.numel());
        for (const auto& s : bucket.slots)
          if (s.r != 0) cost = cost + orthogonalize_cost(s.n, s.r) + matmul_cost(s.m, s.n, s.r);
        co_await comm.compute(cost, [&] { powersgd_second_half(bucket); });
      }
      if (bucket.q_memory.numel() > 0) second[b] = comm.stream_all_reduce(bucket.q_memory, comm::ReduceOp::Average);
    }
    for (std::size_t b = 0; b < buckets_.size(); ++b) {
      auto& bucket = buckets_[b];
      {
        auto phase = ctx.timer.phase("sync/sync");
        co_await second[b];
      }
      auto phase = ctx.timer.phase("sync/compress");
      sim::ComputeCost cost{0.0, 0.0};
      for (const auto& s : bucket.slots)
        if (s.r != 0) cost = cost + matmul_cost(s.n, s.r, s.m);
      if (error_feedback_) cost = cost + sim::ComputeCost{as_double(bucket.elements), 12.0 * as_double(bucket.elements)};
      co_await comm.compute(cost, [&] { powersgd_decompress(bucket); });
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
            using config::ErrorKind;
            using config::ScenarioError;
            spec.hook = a.choice("hook", "allreduce", hook_names());
            if (spec.hook != "powersgd")
              for (const auto& key : powersgd_fields())
                if (a.find(key))
                  throw ScenarioError(a.where(key), ErrorKind::unknown_field,
                                      fmt::format("only the powersgd hook of ddp reads it (this one is {})", spec.hook));
            // Up to 2^20 MB: a cap of 2^40 bytes already holds any model in one bucket.
            spec.bucket_cap_mb = a.number("bucket_cap_mb", 25.0, 0.0, 1048576.0);
            spec.first_bucket_mb = a.number("first_bucket_mb", 1.0, 0.0, 1048576.0);
            if (spec.hook != "powersgd") return;
            spec.matrix_approximation_rank = a.integer("matrix_approximation_rank", 1, 1, config::kIntMax);
            spec.use_error_feedback = a.boolean("use_error_feedback", true);
            spec.warm_start = a.boolean("warm_start", true);
            spec.start_powerSGD_iter = a.integer("start_powerSGD_iter", 1000, 0, config::kIntMax);
            if (const auto problem = powersgd_start_problem(spec); !problem.empty())
              throw ScenarioError(a.where("start_powerSGD_iter"), ErrorKind::inconsistent, problem);
            spec.min_compression_rate = a.number("min_compression_rate", 2.0, 0.0, config::kInf);
            spec.orthogonalization_epsilon = a.number("orthogonalization_epsilon", 0.0, 0.0, config::kInf);
            spec.random_seed = static_cast<std::uint64_t>(a.integer("random_seed", 0, 0, config::kIntMax));
          },
      .to_json =
          [](const AlgorithmSpec& spec, nlohmann::json& out) {
            out["hook"] = spec.hook;
            out["bucket_cap_mb"] = spec.bucket_cap_mb;
            out["first_bucket_mb"] = spec.first_bucket_mb;
            if (spec.hook != "powersgd") return;
            out["matrix_approximation_rank"] = spec.matrix_approximation_rank;
            out["start_powerSGD_iter"] = spec.start_powerSGD_iter;
            out["min_compression_rate"] = spec.min_compression_rate;
            out["use_error_feedback"] = spec.use_error_feedback;
            out["warm_start"] = spec.warm_start;
            out["orthogonalization_epsilon"] = spec.orthogonalization_epsilon;
            out["random_seed"] = spec.random_seed;
          },
      .make = [](const AlgorithmSpec& spec, const net::Topology&, int) -> std::unique_ptr<Algorithm> {
        return std::make_unique<Ddp>(spec);
      },
      .memory = [](const AlgorithmSpec& spec, std::span<const std::int64_t> sizes, std::int64_t) {
        // Bucket buffers (fp32), the fp16 / bf16 payloads; PowerSGD: error, M0 and the
        // uncompressed copy (at most the model each; P and Q are smaller).
        MemoryFootprint f;
        f.model_buffers = 1.0;
        if (spec.hook == "fp16_compress" || spec.hook == "bf16_compress") {
          f.model_buffers += 0.5;
          f.payload_fraction = 0.5;
        }
        if (spec.hook == "powersgd") f.model_buffers += (spec.use_error_feedback ? 2.0 : 0.0) + 1.0;
        std::vector<std::int64_t> bytes;
        for (auto n : sizes) bytes.push_back(4 * n);
        const auto buckets = static_cast<double>(
            kernels::ddp_buckets(bytes, ddp_cap_bytes(spec.first_bucket_mb), ddp_cap_bytes(spec.bucket_cap_mb)).size());
        f.collectives_per_step = std::max(1.0, (spec.hook == "powersgd" ? 3.0 : 1.0) * buckets);
        return f;
      }};
  return entry;
}

}  // namespace dtsim::algorithms
