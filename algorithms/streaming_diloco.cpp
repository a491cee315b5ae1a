#include "algorithms/streaming_diloco.hpp"

#include <algorithm>
#include <cctype>
#include <stdexcept>

#include <fmt/format.h>

#include "algorithms/apply_gradient.hpp"
#include "algorithms/gossip.hpp"
#include "algorithms/registry.hpp"

namespace dtsim::algorithms {

using config::ErrorKind;
using config::kIntMax;
using config::ObjectReader;
using config::ScenarioError;

std::int64_t streaming_fragment_at(std::int64_t t, std::int64_t local_steps, std::int64_t fragments) {
  for (std::int64_t p = 0; p < fragments; ++p)
    if (t % local_steps == p * local_steps / fragments) return p;
  return -1;
}

namespace {

// The block index in a parameter name ("transformer.h.3.mlp.c_fc.weight": 3), or -1.
std::int64_t block_of(const std::string& name) {
  std::vector<std::string> parts;
  std::size_t begin = 0;
  while (begin <= name.size()) {
    const auto end = std::min(name.find('.', begin), name.size());
    parts.push_back(name.substr(begin, end - begin));
    begin = end + 1;
  }
  for (std::size_t i = 0; i + 1 < parts.size(); ++i) {
    const auto& c = parts[i];
    const auto& n = parts[i + 1];
    if ((c == "h" || c == "layers" || c == "blocks" || c == "layer") && !n.empty() && n.size() < 10 &&
        std::all_of(n.begin(), n.end(), [](unsigned char ch) { return std::isdigit(ch); }))
      return std::stoll(n);
  }
  return -1;
}

}  // namespace

std::vector<std::vector<std::size_t>> streaming_fragments(const std::vector<std::string>& names, std::size_t tensors,
                                                          std::int64_t fragments) {
  const auto P = static_cast<std::size_t>(fragments);
  std::vector<std::vector<std::size_t>> out(P);
  std::vector<std::int64_t> block(tensors, -1);
  std::int64_t blocks = 0;
  if (names.size() == tensors)
    for (std::size_t i = 0; i < tensors; ++i) {
      block[i] = block_of(names[i]);
      blocks = std::max(blocks, block[i] + 1);
    }
  if (blocks == 0) {  // no blocks: strided tensors
    if (P > tensors)
      throw std::invalid_argument(fmt::format("{} fragments of a model of {} tensors (and no transformer blocks)", P, tensors));
    for (std::size_t i = 0; i < tensors; ++i) out[i % P].push_back(i);
    return out;
  }
  if (fragments > blocks)
    throw std::invalid_argument(fmt::format("{} fragments of a model of {} transformer blocks", P, blocks));
  // Tensors outside the blocks: the nearest block before them, else the first one after.
  std::int64_t previous = -1;
  for (std::size_t i = 0; i < tensors; ++i) {
    if (block[i] >= 0) previous = block[i];
    else if (previous >= 0) block[i] = previous;
  }
  std::int64_t next = -1;
  for (std::size_t i = tensors; i-- > 0;) {
    if (block[i] >= 0) next = block[i];
    else block[i] = next;
  }
  for (std::size_t i = 0; i < tensors; ++i) out[static_cast<std::size_t>(block[i]) % P].push_back(i);
  return out;
}

StreamingDiloco::StreamingDiloco(const AlgorithmSpec& spec)
    : s_(settings_of<StreamingDilocoSettings>(spec)),
      names_(spec.parameter_names),
      weight_decay_mask_(spec.optimizer.weight_decay_mask),
      inner_(make_rank_optimizer(s_.diloco.inner_optimizer, spec)) {}

std::uint64_t StreamingDiloco::state_bytes() const {
  std::uint64_t bytes = tensor_bytes(theta_) + inner_->state_bytes();
  for (const auto& o : outer_) bytes += o->state_bytes();
  return bytes;
}

void StreamingDiloco::first_step(const std::vector<at::Tensor>& params) {
  try {
    fragments_ = streaming_fragments(names_, params.size(), s_.fragments);
  } catch (const std::invalid_argument& e) {
    throw ScenarioError("/algorithm/fragments", ErrorKind::inconsistent, e.what());
  }
  for (const auto& p : params) theta_.push_back(p.detach().clone());  // theta = x_0
  for (const auto& tensors : fragments_) {
    auto config = s_.diloco.outer_optimizer;
    std::vector<at::Tensor> theta, delta;
    for (auto i : tensors) {
      theta.push_back(theta_[i]);
      delta.push_back(at::zeros_like(theta_[i]));
      if (!weight_decay_mask_.empty()) config.weight_decay_mask.push_back(weight_decay_mask_[i]);
    }
    theta_p_.push_back(std::move(theta));
    delta_p_.push_back(std::move(delta));
    outer_.push_back(optimizers::make_optimizer(config));
    exchange_.emplace_back(s_.diloco.outer_codec, s_.diloco.fp4_block);
  }
}

sim::Task<void> StreamingDiloco::join(comm::Communicator& comm) {
  const auto p = static_cast<std::size_t>(pending_);
  pending_ = -1;
  co_await exchange_[p].join(comm);
  auto& params = *params_;
  std::int64_t d = 0;
  for (auto i : fragments_[p]) d += params[i].numel();
  auto cost = outer_[p]->cost(d);
  cost.flops += 3.0 * static_cast<double>(d);  // the merge
  cost.bytes += 12.0 * static_cast<double>(d);
  co_await comm.compute(cost, [&] {
    outer_[p]->step(theta_p_[p], delta_p_[p], s_.diloco.outer_lr);
    const double alpha = s_.mixing;
    for (auto i : fragments_[p]) params[i].mul_(alpha).add_(theta_[i], 1.0 - alpha);
  });
}

sim::Task<std::uint64_t> StreamingDiloco::step(StepContext& ctx) {
  auto& comm = ctx.comm;
  params_ = &ctx.params;
  const auto t = ctx.local_index;
  {
    auto phase = ctx.timer.phase("inner/update");
    co_await comm.compute(inner_->cost(total_elements(ctx.params)), [&] {
      if (theta_.empty()) first_step(ctx.params);
      inner_->step(ctx.params, ctx.grads, ctx.lr);
    });
  }
  if (pending_ >= 0 && t >= join_at_) {
    auto phase = ctx.timer.phase("outer/join");
    co_await join(comm);
  }
  const auto p = streaming_fragment_at(t, s_.diloco.local_steps, s_.fragments);
  if (p < 0) co_return 0;
  const auto f = static_cast<std::size_t>(p);
  std::uint64_t bits = 0;
  {
    auto phase = ctx.timer.phase("outer/start");
    std::int64_t d = 0;
    for (auto i : fragments_[f]) d += ctx.params[i].numel();
    co_await comm.compute(elementwise_cost(d, 1.0, 12.0), [&] {
      for (std::size_t j = 0; j < fragments_[f].size(); ++j)
        at::sub_out(delta_p_[f][j], theta_p_[f][j], ctx.params[fragments_[f][j]]);
    });
    bits = co_await exchange_[f].start(comm, delta_p_[f]);
    pending_ = p;
    join_at_ = t + s_.overlap_steps;
  }
  if (s_.overlap_steps == 0) {
    auto phase = ctx.timer.phase("outer/join");
    co_await join(comm);
  }
  co_return bits;
}

sim::Task<void> StreamingDiloco::finish(comm::Communicator& comm) {
  if (pending_ >= 0) co_await join(comm);
}

const AlgorithmEntry& streaming_diloco_entry() {
  static const AlgorithmEntry entry{
      .name = "streaming_diloco",
      .description = "Streaming DiLoCo: DiLoCo one strided fragment of blocks at a time, staggered, its exchange "
                     "overlapped with tau inner steps and mixed in with alpha, outer gradients in FP4",
      .paper = "Douillard et al., Streaming DiLoCo with overlapping communication, arXiv 2501.18512 (2025)",
      .fields = [] {
        auto f = diloco_fields();
        for (const char* own : {"fragments", "overlap_steps", "mixing"}) f.push_back(own);
        return f;
      }(),
      .parse =
          [](ObjectReader& a, AlgorithmSpec& spec, const SpecContext&) {
            StreamingDilocoSettings s;
            parse_diloco_settings(a, s.diloco);
            const auto H = s.diloco.local_steps;
            s.fragments = a.integer("fragments", s.fragments, 1, kIntMax);
            if (s.fragments > H)
              throw ScenarioError(a.where("fragments"), ErrorKind::inconsistent,
                                  fmt::format("{} fragments need local_steps >= {} (one offset each), got {}",
                                              s.fragments, s.fragments, H));
            s.overlap_steps = a.integer("overlap_steps", s.overlap_steps, 0, kIntMax);
            if (s.overlap_steps > H / s.fragments)
              throw ScenarioError(a.where("overlap_steps"), ErrorKind::inconsistent,
                                  fmt::format("expected at most local_steps / fragments = {} (one fragment in flight "
                                              "at a time), got {}",
                                              H / s.fragments, s.overlap_steps));
            s.mixing = a.number("mixing", s.mixing, 0.0, 1.0);
            spec.settings = s;
          },
      .to_json =
          [](const AlgorithmSpec& spec, nlohmann::json& out) {
            const auto& s = settings_of<StreamingDilocoSettings>(spec);
            diloco_settings_json(s.diloco, out);
            out["fragments"] = s.fragments;
            out["overlap_steps"] = s.overlap_steps;
            out["mixing"] = s.mixing;
          },
      .make = [](const AlgorithmSpec& spec, const net::Topology&, int) -> std::unique_ptr<Algorithm> {
        return std::make_unique<StreamingDiloco>(spec);
      },
      .memory = [](const AlgorithmSpec& spec, std::span<const std::int64_t> sizes, std::int64_t steps) {
        const auto& s = settings_of<StreamingDilocoSettings>(spec);
        auto m = diloco_memory(s.diloco, sizes, steps);
        // P exchanges per H steps, each of about 1/P of the model.
        m.payload_fraction /= static_cast<double>(s.fragments);
        m.collectives_per_step *= static_cast<double>(s.fragments);
        return m;
      },
      .check_parameters =
          [](const AlgorithmSpec& spec, const std::vector<std::string>& names) {
            try {
              streaming_fragments(names, names.size(), settings_of<StreamingDilocoSettings>(spec).fragments);
            } catch (const std::invalid_argument& e) {
              throw ScenarioError("/algorithm/fragments", ErrorKind::inconsistent, e.what());
            }
          }};
  return entry;
}

}  // namespace dtsim::algorithms
