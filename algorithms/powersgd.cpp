#include "algorithms/powersgd.hpp"

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <tuple>
#include <utility>

namespace dtsim::algorithms {

namespace {

double as_double(std::int64_t n) { return static_cast<double>(n); }
sim::ComputeCost copy_cost(std::int64_t n) { return {0.0, 8.0 * as_double(n)}; }

sim::ComputeCost operator+(sim::ComputeCost a, const sim::ComputeCost& b) {
  a.flops += b.flops;
  a.bytes += b.bytes;
  return a;
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

}  // namespace

PowerSgdSlot powersgd_slot(at::IntArrayRef shape, std::int64_t offset, const PowerSgdSettings& settings) {
  PowerSgdSlot s;
  s.offset = offset;
  std::int64_t numel = 1;
  for (auto d : shape) numel *= d;
  if (!shape.empty() && numel > 0) {
    s.n = shape[0];
    s.m = numel / s.n;
  } else {
    s.n = numel;
    s.m = 1;
  }
  const std::int64_t r = std::min({s.n, s.m, settings.rank});
  // PyTorch's _should_compress: (n + m) r min_compression_rate < n m.
  if (r > 0 && as_double((s.n + s.m) * r) * settings.min_compression_rate < as_double(s.n * s.m)) s.r = r;
  return s;
}

// Column by column: col /= ||col|| (+ epsilon when epsilon > 0), then the projection on
// col is removed from the later columns. A zero column with epsilon 0 becomes NaN, as in
// PyTorch.
void powersgd_gram_schmidt(at::Tensor& matrix, double epsilon) {
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

// Gram-Schmidt loses orthogonality on ill-conditioned matrices, which at ranks above 2
// keeps the approximation from the average; the hook uses QR there (and epsilon does not
// apply), Gram-Schmidt for ranks 1 and 2 and for half precision, which QR does not take.
void powersgd_orthogonalize(at::Tensor& matrix, double epsilon) {
  const bool half = matrix.scalar_type() == at::kHalf || matrix.scalar_type() == at::kBFloat16;
  if (matrix.size(1) <= 2 || half) {
    powersgd_gram_schmidt(matrix, epsilon);
    return;
  }
  matrix.copy_(std::get<0>(at::linalg_qr(matrix)));
}

PowerSgdGroup::PowerSgdGroup(std::vector<PowerSgdSlot> slots, const at::TensorOptions& options,
                             const PowerSgdSettings& settings)
    : slots_(std::move(slots)), settings_(settings) {
  std::int64_t unc = 0, p = 0, q = 0;
  for (const auto& s : slots_) {
    if (s.r == 0) unc += s.n * s.m;
    p += s.n * s.r;
    q += s.m * s.r;
  }
  uncompressed_ = at::empty({unc}, options);
  p_memory_ = at::empty({p}, options);
  q_memory_ = at::empty({q}, options);
  // The hook's order: shapes in order of first appearance, each shape's tensors in order.
  std::vector<std::pair<std::int64_t, std::int64_t>> shapes;
  for (const auto& s : slots_)
    if (s.r != 0 && std::find(shapes.begin(), shapes.end(), std::pair{s.n, s.m}) == shapes.end())
      shapes.emplace_back(s.n, s.m);
  for (const auto& shape : shapes)
    for (std::size_t i = 0; i < slots_.size(); ++i)
      if (slots_[i].r != 0 && std::pair{slots_[i].n, slots_[i].m} == shape) compressed_.push_back(i);
}

std::int64_t PowerSgdGroup::elements() const {
  std::int64_t e = 0;
  for (const auto& s : slots_) e += s.n * s.m;
  return e;
}

std::vector<at::Tensor> PowerSgdGroup::low_rank_views(const at::Tensor& memory, bool p) const {
  std::vector<at::Tensor> out;
  std::int64_t off = 0;
  for (const std::size_t i : compressed_) {
    const auto& s = slots_[i];
    const std::int64_t rows = p ? s.n : s.m;
    out.push_back(memory.narrow(0, off, rows * s.r).view({rows, s.r}));
    off += rows * s.r;
  }
  return out;
}

std::uint64_t PowerSgdGroup::n_bits() const {
  return 32ULL * static_cast<std::uint64_t>(uncompressed_.numel() + p_memory_.numel() + q_memory_.numel());
}

std::uint64_t PowerSgdGroup::state_bytes() const {
  std::uint64_t bytes = 0;
  if (error_.defined()) bytes += static_cast<std::uint64_t>(error_.nbytes());
  if (settings_.warm_start && have_q_) bytes += static_cast<std::uint64_t>(q_memory_.nbytes());
  return bytes;
}

sim::ComputeCost PowerSgdGroup::first_cost() const {
  const double e = as_double(elements());
  sim::ComputeCost cost{0.0, 0.0};
  if (settings_.error_feedback) cost = cost + sim::ComputeCost{e, 12.0 * e} + copy_cost(elements());  // M = b + e; M0
  cost = cost + copy_cost(uncompressed_.numel());
  for (const auto& s : slots_)
    if (s.r != 0) cost = cost + orthogonalize_cost(s.m, s.r) + matmul_cost(s.n, s.m, s.r);
  return cost;
}

sim::ComputeCost PowerSgdGroup::second_cost() const {
  sim::ComputeCost cost = copy_cost(uncompressed_.numel());
  for (const auto& s : slots_)
    if (s.r != 0) cost = cost + orthogonalize_cost(s.n, s.r) + matmul_cost(s.m, s.n, s.r);
  return cost;
}

sim::ComputeCost PowerSgdGroup::decompress_cost() const {
  sim::ComputeCost cost{0.0, 0.0};
  for (const auto& s : slots_)
    if (s.r != 0) cost = cost + matmul_cost(s.n, s.r, s.m);
  if (settings_.error_feedback) cost = cost + sim::ComputeCost{as_double(elements()), 12.0 * as_double(elements())};
  return cost;
}

void PowerSgdGroup::first_half(at::Tensor& buffer, NumpyRandomState& random) {
  if (settings_.error_feedback) {
    if (error_.defined())
      buffer.add_(error_);
    else
      error_ = at::zeros_like(buffer);
    input_copy_ = buffer.clone();
  }
  std::int64_t off = 0;
  for (const auto& s : slots_) {
    if (s.r != 0) continue;
    uncompressed_.narrow(0, off, s.n * s.m).copy_(buffer.narrow(0, s.offset, s.n * s.m));
    off += s.n * s.m;
  }
  const bool draw = !settings_.warm_start || !have_q_;
  const auto p_views = ps();
  const auto q_views = qs();
  // As the hook: torch.manual_seed(rng.randint(1e9)), then randn for each Q in turn, on the
  // CPU; a group with nothing to compress draws its seed all the same.
  at::Generator generator;
  if (draw)
    generator = at::make_generator<at::CPUGeneratorImpl>(static_cast<std::uint64_t>(random.randint(1'000'000'000)));
  for (std::size_t k = 0; k < compressed_.size(); ++k) {
    const auto& s = slots_[compressed_[k]];
    at::Tensor q = q_views[k];
    if (draw) q.copy_(at::randn({s.m, s.r}, generator, at::TensorOptions().dtype(at::kFloat)));
    powersgd_orthogonalize(q, settings_.epsilon);
    p_views[k].copy_(at::mm(matrix(buffer, s), q));
  }
  have_q_ = true;
}

void PowerSgdGroup::second_half(at::Tensor& buffer) {
  std::int64_t off = 0;
  for (const auto& s : slots_) {
    if (s.r != 0) continue;
    buffer.narrow(0, s.offset, s.n * s.m).copy_(uncompressed_.narrow(0, off, s.n * s.m));
    off += s.n * s.m;
  }
  auto p_views = ps();
  const auto q_views = qs();
  for (std::size_t k = 0; k < compressed_.size(); ++k) {
    powersgd_orthogonalize(p_views[k], settings_.epsilon);
    q_views[k].copy_(at::mm(matrix(buffer, slots_[compressed_[k]]).t(), p_views[k]));
  }
}

void PowerSgdGroup::decompress(at::Tensor& buffer) {
  const auto p_views = ps();
  const auto q_views = qs();
  for (std::size_t k = 0; k < compressed_.size(); ++k)
    matrix(buffer, slots_[compressed_[k]]).copy_(at::mm(p_views[k], q_views[k].t()));
  if (settings_.error_feedback) at::sub_out(error_, input_copy_, buffer);
  if (!settings_.warm_start) have_q_ = false;
}

}  // namespace dtsim::algorithms
