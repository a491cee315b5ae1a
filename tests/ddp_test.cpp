// PyTorch DDP (algorithms/ddp.hpp): the bucket assignment on ResNet-50 and BERT-base
// against a closed computation and on hand cases; the allreduce hook equal to centralized
// parallel SGD bit for bit (test-local model and a whole Fashion-MNIST MLP run); the
// fp16 / bf16 hooks against the rounding sequence PyTorch's hooks define; PowerSGD
// against a plain LibTorch reimplementation written here (P, Q and the parameters over
// 20 steps, world sizes 1 and 4), its compression rule, its start iteration and n_bits;
// the overlap of bucket all-reduces with backward in closed form; scenario validation.
#include <gtest/gtest.h>

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "algorithms/ddp.hpp"
#include "algorithms/ddp_hooks/powersgd.hpp"
#include "algorithms/parallel_sgd.hpp"
#include "comm/emulated.hpp"
#include "comm/phase_timer.hpp"
#include "kernels/ddp_buckets.hpp"
#include "network_models/network.hpp"
#include "network_models/topology_spec.hpp"
#include "runner/run.hpp"
#include "runner/scenario.hpp"
#include "sim/engine.hpp"
#include "staged_backward.hpp"
#include "python_torch.hpp"
#include "test_util.hpp"
#include "workloads/shape_models.hpp"
#include "workloads/sources/fashion_mnist.hpp"

namespace dtsim {
namespace {

using nlohmann::json;
using Buckets = std::vector<std::vector<std::size_t>>;
constexpr std::int64_t kMB = 1024 * 1024;

// ---------------------------------------------------------------------------------------
// Bucket assignment

TEST(DdpBuckets, HandCases) {
  using kernels::ddp_buckets;
  const std::vector<std::int64_t> four{4, 4, 4, 4};
  EXPECT_EQ(ddp_buckets(four, 8, 8), (Buckets{{0, 1}, {2, 3}}));  // exactly at the cap closes
  EXPECT_EQ(ddp_buckets(four, 4, 12), (Buckets{{0}, {1, 2, 3}}));  // the first cap, then the cap
  EXPECT_EQ(ddp_buckets(four, 9, 9), (Buckets{{0, 1, 2}, {3}}));  // the crossing tensor is included; leftover last
  const std::vector<std::int64_t> big{100, 1, 1};
  EXPECT_EQ(ddp_buckets(big, 8, 8), (Buckets{{0}, {1, 2}}));  // one tensor above the cap is a bucket alone
  const std::vector<std::int64_t> tail{3, 5};
  EXPECT_EQ(ddp_buckets(tail, 4, 4), (Buckets{{0, 1}}));  // no empty bucket at the end
  EXPECT_EQ(ddp_buckets(tail, 0, 0), (Buckets{{0}, {1}}));  // cap 0: one tensor per bucket
  EXPECT_EQ(ddp_buckets({}, 4, 4), Buckets{});
  const std::vector<std::int64_t> bad{3, -1};
  EXPECT_THROW(ddp_buckets(bad, 4, 4), std::invalid_argument);
  // PyTorch converts with int(mb * 1024 * 1024).
  EXPECT_EQ(algorithms::ddp_cap_bytes(25.0), 25 * kMB);
  EXPECT_EQ(algorithms::ddp_cap_bytes(0.0009765625), 1024);
}

// An independent closed form: with prefix sums S (S_0 = 0, S_i the bytes of the first i
// tensors), a bucket starting at tensor s ends at the first e with S_{e+1} - S_s >= its
// limit (a binary search over S), or at the last tensor.
Buckets closed_buckets(const std::vector<std::int64_t>& bytes, std::int64_t first_cap, std::int64_t cap) {
  std::vector<std::int64_t> S(bytes.size() + 1, 0);
  std::partial_sum(bytes.begin(), bytes.end(), S.begin() + 1);
  Buckets out;
  std::size_t s = 0;
  while (s < bytes.size()) {
    const std::int64_t limit = out.empty() ? first_cap : cap;
    const auto it = std::lower_bound(S.begin() + static_cast<std::ptrdiff_t>(s) + 1, S.end(), S[s] + limit);
    const std::size_t end = it == S.end() ? bytes.size() : static_cast<std::size_t>(it - S.begin());  // exclusive
    std::vector<std::size_t> b(end - s);
    std::iota(b.begin(), b.end(), s);
    out.push_back(std::move(b));
    s = end;
  }
  return out;
}

TEST(DdpBuckets, ResNet50AndBertBaseAt25MBFirst1MB) {
  for (const std::string model : {"resnet50", "bert_base"}) {
    SCOPED_TRACE(model);
    std::vector<std::int64_t> bytes;  // backward order, fp32
    for (const auto& t : workloads::shape_model_tensors(model)) bytes.push_back(4 * t.numel());
    const auto got = kernels::ddp_buckets(bytes, 1 * kMB, 25 * kMB);
    EXPECT_EQ(got, closed_buckets(bytes, 1 * kMB, 25 * kMB));
    // Every bucket but the last reaches its limit and would not without its last tensor.
    ASSERT_GE(got.size(), 3u);
    for (std::size_t b = 0; b + 1 < got.size(); ++b) {
      std::int64_t sum = 0;
      for (auto i : got[b]) sum += bytes[i];
      const std::int64_t limit = b == 0 ? kMB : 25 * kMB;
      EXPECT_GE(sum, limit);
      EXPECT_LT(sum - bytes[got[b].back()], limit);
    }
    std::size_t tensors = 0;
    for (const auto& b : got) tensors += b.size();
    EXPECT_EQ(tensors, bytes.size());
  }
}

// ---------------------------------------------------------------------------------------
// The staged-backward model (staged_backward.hpp), with PowerSGD's factors recorded too

using testing::FakeModel;
using testing::gradient;
using testing::initial_params;
using testing::make_scenario;
using testing::Net;
using testing::numel_of;

struct Trace : testing::Trace {
  std::vector<std::vector<std::map<std::size_t, std::pair<at::Tensor, at::Tensor>>>> pq;  // [step][rank]: param -> (P, Q)
};

// P and Q of every compressed tensor after step t, by parameter index.
void record_pq(algorithms::Algorithm& algorithm, std::map<std::size_t, std::pair<at::Tensor, at::Tensor>>& pq) {
  if (auto* centralized = dynamic_cast<algorithms::CentralizedSgd*>(&algorithm)) {
    const auto ps = centralized->ps(), qs = centralized->qs();
    const auto tensors = centralized->compressed_tensors();
    for (std::size_t i = 0; i < tensors.size(); ++i) pq[tensors[i]] = {ps[i].clone(), qs[i].clone()};
  }
  const auto* ddp = dynamic_cast<algorithms::Ddp*>(&algorithm);
  if (const auto* hook = ddp ? dynamic_cast<const algorithms::PowerSgdHook*>(&ddp->hook()) : nullptr) {
    for (std::size_t b = 0; b < ddp->buckets().size(); ++b) {
      const auto ps = hook->group(b).ps(), qs = hook->group(b).qs();
      const auto& bucket = ddp->buckets()[b];
      const auto& order = hook->group(b).compressed_order();
      for (std::size_t i = 0; i < order.size(); ++i) pq[bucket.slots[order[i]].param] = {ps[i].clone(), qs[i].clone()};
    }
  }
}

Trace run(const json& algorithm, const FakeModel& m, int ranks, int steps, const Net& net = {}) {
  Trace trace;
  trace.pq.assign(steps, std::vector<std::map<std::size_t, std::pair<at::Tensor, at::Tensor>>>(ranks));
  static_cast<testing::Trace&>(trace) =
      testing::run_staged(algorithm, m, ranks, steps, net, [&](algorithms::Algorithm& a, int rank, std::int64_t t) {
        record_pq(a, trace.pq[t - 1][rank]);
      });
  return trace;
}

// Eight tensors over four stages, 177 elements (708 bytes), some of them matrices.
FakeModel small_model() {
  return {{{7}, {8, 5}, {3}, {4, 3}, {5, 5}, {1}, {6, 2, 5}, {29}},
          {{6, 7}, {4, 5}, {2, 3}, {0, 1}},
          {1e3, 1e3, 1e3, 1e3}};
}

// MB values that are exact binary fractions, so int(mb * 2^20) is the byte count.
double mb(std::int64_t bytes) { return static_cast<double>(bytes) / static_cast<double>(kMB); }

json with(json base, const json& extra) {
  for (auto& [k, v] : extra.items()) base[k] = v;
  return base;
}

const json kOptimizer = {{"lr", 0.1}, {"momentum", 0.9}, {"weight_decay", 1e-3}};

void expect_identical(const Trace& a, const Trace& b, std::size_t steps) {
  for (std::size_t t = 0; t < steps; ++t)
    for (std::size_t r = 0; r < a.params[t].size(); ++r)
      for (std::size_t j = 0; j < a.params[t][r].size(); ++j)
        ASSERT_TRUE(at::equal(a.params[t][r][j], b.params[t][r][j])) << "step " << t + 1 << " rank " << r << " tensor " << j;
}

// ---------------------------------------------------------------------------------------
// allreduce hook = centralized parallel SGD

// Bucketing only regroups the same element-wise averages (sum in rank order, then / W, as
// parallel SGD's ReduceOp::Average): for any caps the parameters are equal bit for bit,
// at 32 bits per element; W = 3 so that the division rounds.
TEST(DdpAllreduce, IsCentralizedParallelSgdForAnyBuckets) {
  const auto m = small_model();
  for (int W : {3, 4}) {
    const auto reference = run(with({{"name", "parallel_sgd"}, {"variant", "centralized"}}, kOptimizer), m, W, 5);
    for (std::int64_t cap : {0, 100, 256, 4096}) {
      SCOPED_TRACE(cap);
      const auto ddp = run(with({{"name", "ddp"}, {"bucket_cap_mb", mb(cap)}, {"first_bucket_mb", mb(cap / 2)}}, kOptimizer),
                           m, W, 5);
      expect_identical(ddp, reference, 5);
      for (const auto& step : ddp.n_bits)
        for (auto bits : step) EXPECT_EQ(bits, 32u * 177u);
    }
  }
  // The buckets at first 64 B / cap 256 B, backward order 6, 7, 4, 5, 2, 3, 0, 1 (bytes
  // 240, 116, 100, 4, 12, 48, 28, 160): 240 >= 64 closes {6}; 116 + 100 + 4 + 12 + 48 =
  // 280 >= 256 closes {7, 4, 5, 2, 3}; {0, 1} is left over.
  const auto ddp = run(with({{"name", "ddp"}, {"bucket_cap_mb", mb(256)}, {"first_bucket_mb", mb(64)}}, kOptimizer), m, 2, 1);
  std::vector<std::vector<std::size_t>> got;
  for (const auto& b : dynamic_cast<algorithms::Ddp&>(*ddp.algorithms[0]).buckets()) {
    got.emplace_back();
    for (const auto& s : b.slots) got.back().push_back(s.param);
  }
  EXPECT_EQ(got, (Buckets{{6}, {7, 4, 5, 2, 3}, {0, 1}}));
}

json fashion_doc(const json& algorithm, int steps) {
  return {{"name", "t"},
          {"ranks", 4},
          {"steps", steps},
          {"seed", 3},
          {"workload",
           {{"type", "mlp"}, {"data_dir", "/usr/share/datasets/fashion-mnist"}, {"batch_size", 16},
            {"train_samples", 1024}, {"test_samples", 64}}},
          {"algorithm", algorithm},
          {"topology", {{"kind", "ring"}}},
          {"network", {{"model", "alpha_beta"}, {"latency_us", 5}, {"bandwidth_GBps", 1.25}}}};
}

// A whole run through the training loop (forward only; the step runs the MLP's backward
// stages, each weight's gradient before its bias's): the MLP (784-256-128-10) at first
// bucket 4 KB, cap 64 KB has four buckets ({fc3.weight} of 5,120 bytes; {fc3.bias,
// fc2.weight}; {fc2.bias, fc1.weight}; {fc1.bias} left over); losses and every rank's
// final parameters equal parallel SGD's.
TEST(DdpAllreduce, FashionMnistMlpRunEqualsParallelSgdBitForBit) {
  const auto ddp_doc = fashion_doc(with({{"name", "ddp"}, {"bucket_cap_mb", 0.0625}, {"first_bucket_mb", 0.00390625}}, kOptimizer), 8);
  const auto s = runner::parse_scenario(ddp_doc);
  if (!std::filesystem::exists(std::filesystem::path(workloads::data_settings<workloads::FashionMnistSettings>(s.workload.data).files.data_dir) / "train-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "no Fashion-MNIST at " << workloads::data_settings<workloads::FashionMnistSettings>(s.workload.data).files.data_dir;
  const auto dir = testing::fresh_dir("ddp-fashion");
  runner::RunOptions a_opts, b_opts;
  a_opts.dump_params_prefix = dir / "ddp";
  b_opts.dump_params_prefix = dir / "psgd";
  const auto a = runner::run_emulated(s, a_opts);
  const auto b = runner::run_emulated(
      runner::parse_scenario(fashion_doc(with({{"name", "parallel_sgd"}, {"variant", "centralized"}}, kOptimizer), 8)), b_opts);
  EXPECT_EQ(a.loss, b.loss);
  EXPECT_EQ(a.final_loss, b.final_loss);
  EXPECT_EQ(a.final_test_accuracy, b.final_test_accuracy);
  EXPECT_EQ(a.mean_calls(), 4.0);
  EXPECT_EQ(a.n_bits, b.n_bits);
  for (int r = 0; r < 4; ++r) {
    const auto name = ".rank" + std::to_string(r) + ".json";
    EXPECT_EQ(testing::read_json(dir / ("ddp" + name)), testing::read_json(dir / ("psgd" + name))) << "rank " << r;
  }
}

// The same through the training loop where no dataset is needed: logistic regression (a
// weight of 12 and a bias, each its own bucket at caps of 0 bytes), 4 ranks, 20 steps.
TEST(DdpAllreduce, LogisticRegressionRunEqualsParallelSgdBitForBit) {
  auto doc = [](const json& algorithm) {
    return runner::parse_scenario(
        {{"name", "t"},
         {"ranks", 4},
         {"steps", 20},
         {"seed", 7},
         {"workload", {{"type", "logistic_regression"}, {"samples", 512}, {"features", 12}, {"batch_size", 16}}},
         {"algorithm", algorithm},
         {"topology", {{"kind", "ring"}}},
         {"network", {{"model", "alpha_beta"}, {"latency_us", 5}, {"bandwidth_GBps", 1}}}});
  };
  const auto dir = testing::fresh_dir("ddp-logistic");
  runner::RunOptions a_opts, b_opts;
  a_opts.dump_params_prefix = dir / "ddp";
  b_opts.dump_params_prefix = dir / "psgd";
  const auto a = runner::run_emulated(doc(with({{"name", "ddp"}, {"bucket_cap_mb", 0}, {"first_bucket_mb", 0}}, kOptimizer)), a_opts);
  const auto b = runner::run_emulated(doc(with({{"name", "parallel_sgd"}, {"variant", "centralized"}}, kOptimizer)), b_opts);
  EXPECT_EQ(a.loss, b.loss);
  EXPECT_EQ(a.final_loss, b.final_loss);
  EXPECT_EQ(a.mean_calls(), 2.0);
  for (int r = 0; r < 4; ++r) {
    const auto name = ".rank" + std::to_string(r) + ".json";
    EXPECT_EQ(testing::read_json(dir / ("ddp" + name)), testing::read_json(dir / ("psgd" + name))) << "rank " << r;
  }
}

// ---------------------------------------------------------------------------------------
// fp16 / bf16 hooks

// PyTorch's fp16_compress_hook: h = fp16(b).div_(W) (the cast rounds to nearest even, the
// division rounds again), the all-reduce sums fp16 values in rank order with each addition
// rounded to fp16 (the emulated backend), b = fp32(h). Reference loop without momentum:
// x <- x - lr fp32(h), every rank alike. bf16_compress_hook the same in bfloat16.
TEST(DdpHalfHooks, AreTheRoundedSumOfTheRoundedShares) {
  const auto m = small_model();
  for (const std::string hook : {"fp16_compress", "bf16_compress"}) {
    const auto dtype = hook == "fp16_compress" ? at::kHalf : at::kBFloat16;
    for (int W : {3, 4}) {
      SCOPED_TRACE(hook + " W=" + std::to_string(W));
      const auto trace = run({{"name", "ddp"}, {"hook", hook}, {"bucket_cap_mb", mb(256)}, {"first_bucket_mb", mb(64)},
                              {"lr", 0.1}},
                             m, W, 3);
      auto x = initial_params(m);
      for (std::int64_t t = 1; t <= 3; ++t) {
        for (std::size_t j = 0; j < x.size(); ++j) {
          at::Tensor sum;
          for (int r = 0; r < W; ++r) {
            const at::Tensor h = gradient(x[j], r, t, j).to(dtype).div(W);
            sum = r == 0 ? h : (sum.to(at::kFloat) + h.to(at::kFloat)).to(dtype);
          }
          x[j] = x[j] - sum.to(at::kFloat).mul(0.1);
        }
        for (int r = 0; r < W; ++r)
          for (std::size_t j = 0; j < x.size(); ++j)
            ASSERT_LE((trace.params[t - 1][r][j] - x[j]).abs().max().item<double>(), 1e-6)
                << "step " << t << " rank " << r << " tensor " << j;
        EXPECT_EQ(trace.n_bits[t - 1][0], 16u * 177u);
      }
    }
  }
}

// ---------------------------------------------------------------------------------------
// PowerSGD against a reimplementation with plain LibTorch ops

// Gram-Schmidt transcribed from PyTorch's _orthogonalize (powerSGD_hook.py) for one
// matrix: for each column i, col /= torch.norm(col) (+ epsilon), then rest -= torch.sum(col
// * rest, dim) * col over the columns after it.
void gram_schmidt(at::Tensor& a, double eps) {
  const std::int64_t cols = a.size(1);
  for (std::int64_t i = 0; i < cols; ++i) {
    at::Tensor col = a.slice(1, i, i + 1);
    const at::Tensor norm = at::norm(col, 2, {0}, true);
    col.copy_(col / (eps == 0.0 ? norm : norm + eps));
    if (i + 1 == cols) continue;
    at::Tensor rest = a.slice(1, i + 1, cols);
    rest.copy_(rest - at::sum(col * rest, {0}, true) * col);
  }
}

struct PowerSgdSettings {
  std::int64_t rank = 1;
  std::int64_t start = 2;
  double min_rate = 2.0;
  bool error_feedback = true;
  bool warm_start = true;
  double eps = 0.0;
  std::uint64_t seed = 0;
};

json powersgd_json(const PowerSgdSettings& p) {
  return {{"name", "ddp"},
          {"hook", "powersgd"},
          {"bucket_cap_mb", mb(256)},
          {"first_bucket_mb", mb(64)},
          {"lr", 0.1},
          {"matrix_approximation_rank", p.rank},
          {"start_powerSGD_iter", p.start},
          {"min_compression_rate", p.min_rate},
          {"use_error_feedback", p.error_feedback},
          {"warm_start", p.warm_start},
          {"orthogonalization_epsilon", p.eps},
          {"random_seed", p.seed}};
}

// The reference, per tensor j (the element-wise recurrences do not see the buckets):
// every rank has the same x (the update is the same everywhere); per rank an error e_rj.
// Q's are drawn as powerSGD_hook draws them: per group (a DDP bucket, in the order the
// buckets close; the whole model for parallel_sgd) that needs a draw (its first PowerSGD
// step, or every step without warm start), one randint(1e9) from a NumPy
// RandomState(seed) that the groups share, a CPU generator seeded with it, and randn for
// each compressed tensor of the group, grouped by matrix shape in order of first
// appearance. Orthogonalization: Gram-Schmidt at ranks 1 and 2, Householder QR above.
// Returns P, Q per step and tensor and x per step. x - lr g is rounded once, as the
// optimizer's add_(g, -lr) does: a one-ulp difference in x (x - lr * g rounds twice)
// changes the next gradients, and PowerSGD's power iteration on these small, changing
// matrices amplifies it to about 1e-5 in Q within 20 steps.
struct Reference {
  std::vector<std::map<std::size_t, std::pair<at::Tensor, at::Tensor>>> pq;
  std::vector<std::vector<at::Tensor>> x;
};

void orthogonalize(at::Tensor& a, double eps) {
  if (a.size(1) <= 2) gram_schmidt(a, eps);
  else a.copy_(std::get<0>(at::linalg_qr(a)));
}

// The 32-bit words of MT19937 seeded with init_genrand(seed), masked and rejected as
// NumPy's legacy randint(1e9) (the reference's own transcription of the draw).
std::int64_t numpy_randint_1e9(std::mt19937& mt) {
  for (;;) {
    const std::uint32_t v = mt() & ((1u << 30) - 1);
    if (v < 1'000'000'000u) return v;
  }
}

// `groups`: the groups' tensors, each in buffer order, in the order their draws happen.
// `nudged`: every initial parameter one float step up (the rounding-sensitivity probe below).
Reference powersgd_reference(const FakeModel& m, int W, int steps, const PowerSgdSettings& p, double lr,
                             const std::vector<std::vector<std::size_t>>& groups, bool nudged = false) {
  auto x = initial_params(m);
  if (nudged)
    for (auto& xj : x) xj = at::nextafter(xj, at::full_like(xj, std::numeric_limits<float>::infinity()));
  const std::size_t J = x.size();
  std::vector<std::vector<at::Tensor>> e(W, std::vector<at::Tensor>(J));
  std::vector<at::Tensor> Q(J);
  std::mt19937 numpy_state(static_cast<std::uint32_t>(p.seed));
  auto shape_of = [&](std::size_t j) {
    const std::int64_t n = x[j].dim() == 0 ? 1 : x[j].size(0), cols = x[j].numel() / n;
    return std::pair{n, cols};
  };
  auto compressed = [&](std::size_t j) {
    const auto [n, cols] = shape_of(j);
    const std::int64_t rk = std::min({n, cols, p.rank});
    return static_cast<double>((n + cols) * rk) * p.min_rate < static_cast<double>(n * cols);
  };
  Reference ref;
  bool drawn = false;
  for (std::int64_t t = 1; t <= steps; ++t) {
    std::vector<at::Tensor> g(J);
    std::map<std::size_t, std::pair<at::Tensor, at::Tensor>> pq;
    const bool active = t - 1 >= p.start;
    if (active && (!drawn || !p.warm_start)) {
      for (const auto& group : groups) {
        at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(numpy_randint_1e9(numpy_state));
        std::vector<std::pair<std::int64_t, std::int64_t>> shapes;
        for (std::size_t j : group)
          if (compressed(j) && std::find(shapes.begin(), shapes.end(), shape_of(j)) == shapes.end())
            shapes.push_back(shape_of(j));
        for (const auto& shape : shapes)
          for (std::size_t j : group)
            if (compressed(j) && shape_of(j) == shape)
              Q[j] = at::randn({shape.second, std::min({shape.first, shape.second, p.rank})}, gen, at::kFloat);
      }
      drawn = true;
    }
    for (std::size_t j = 0; j < J; ++j) {
      std::vector<at::Tensor> M(W);
      for (int r = 0; r < W; ++r) M[r] = gradient(x[j], r, t, j).reshape({-1});
      if (!active) {
        at::Tensor sum = M[0].clone();
        for (int r = 1; r < W; ++r) sum += M[r];
        g[j] = (sum / W).view(x[j].sizes());
        continue;
      }
      if (p.error_feedback)
        for (int r = 0; r < W; ++r)
          if (e[r][j].defined()) M[r] = M[r] + e[r][j];
      const auto [n, cols] = shape_of(j);
      const std::int64_t rk = std::min({n, cols, p.rank});
      at::Tensor approx;
      if (compressed(j)) {
        orthogonalize(Q[j], p.eps);
        at::Tensor P = at::zeros({n, rk});
        for (int r = 0; r < W; ++r) P += at::mm(M[r].view({n, cols}), Q[j]);
        orthogonalize(P, p.eps);
        at::Tensor Qsum = at::zeros({cols, rk});
        for (int r = 0; r < W; ++r) Qsum += at::mm(M[r].view({n, cols}).t(), P);
        Q[j] = Qsum / W;
        approx = at::mm(P, Q[j].t()).reshape({-1});
        pq[j] = {P, Q[j].clone()};
      } else {
        at::Tensor sum = M[0].clone();
        for (int r = 1; r < W; ++r) sum += M[r];
        approx = sum / W;
      }
      if (p.error_feedback)
        for (int r = 0; r < W; ++r) e[r][j] = M[r] - approx;
      g[j] = approx.view(x[j].sizes());
    }
    for (std::size_t j = 0; j < J; ++j) x[j] = x[j].add(g[j], -lr);  // x - lr g rounded once, as the optimizer
    ref.pq.push_back(pq);
    ref.x.push_back(x);
  }
  return ref;
}

double max_abs_diff(const at::Tensor& a, const at::Tensor& b) { return (a - b).abs().max().item<double>(); }
// Relative to the reference's largest magnitude (at least 1): Q = M^T P grows with the
// gradients' size (entries up to about 10 here), P's orthonormal columns and the
// parameters stay below 1 or near it, where this is the absolute difference.
double scaled_diff(const at::Tensor& a, const at::Tensor& ref) {
  return max_abs_diff(a, ref) / std::max(1.0, ref.abs().max().item<double>());
}

// The groups the run drew Q's in: ddp's buckets in bucket order (each in buffer order), or
// parallel_sgd's one group in parameter order.
std::vector<std::vector<std::size_t>> draw_groups(const algorithms::Algorithm& algorithm, const FakeModel& m) {
  std::vector<std::vector<std::size_t>> groups;
  if (const auto* ddp = dynamic_cast<const algorithms::Ddp*>(&algorithm)) {
    for (const auto& bucket : ddp->buckets()) {
      groups.emplace_back();
      for (const auto& s : bucket.slots) groups.back().push_back(s.param);
    }
    return groups;
  }
  groups.emplace_back(m.shapes.size());
  std::iota(groups.back().begin(), groups.back().end(), std::size_t{0});
  return groups;
}

// How far rounding alone moves the reference by step t: the largest difference up to t
// between the reference and itself started one float step away. dtsim and the reference
// compute the same math in other orders (summation, BLAS kernels that depend on layout),
// so they may part by as much as this; the tolerance is 4 times it, at least 1e-5. The
// power iteration on these small, changing matrices amplifies a one-ulp start to 1e-6 -
// 5e-4 within 20 steps, by setting. dtsim's largest difference is under 0.005 of the
// tolerance with OpenBLAS (LibTorch 1.13) and 0.33 of it with MKL (2.15), each run printing
// its figure. An error in the math (a draw, an order, a missing memory) parts them by 1e-2
// or more.
std::vector<double> rounding_tolerance(const Reference& ref, const Reference& nudged) {
  std::vector<double> tolerance;
  double spread = 0;
  for (std::size_t t = 0; t < ref.x.size(); ++t) {
    for (std::size_t j = 0; j < ref.x[t].size(); ++j) spread = std::max(spread, scaled_diff(nudged.x[t][j], ref.x[t][j]));
    for (const auto& [j, pq] : ref.pq[t]) {
      spread = std::max(spread, scaled_diff(nudged.pq[t].at(j).first, pq.first));
      spread = std::max(spread, scaled_diff(nudged.pq[t].at(j).second, pq.second));
    }
    tolerance.push_back(std::max(1e-5, 4 * spread));
  }
  return tolerance;
}

// `algorithm`: the run's algorithm (ddp's powersgd hook when null).
void expect_matches_reference(const FakeModel& m, int W, const PowerSgdSettings& p, const json& algorithm = nullptr) {
  const int steps = 20;
  const auto trace = run(algorithm.is_null() ? powersgd_json(p) : algorithm, m, W, steps);
  const auto groups = draw_groups(*trace.algorithms[0], m);
  const auto ref = powersgd_reference(m, W, steps, p, 0.1, groups);
  const auto tolerance = rounding_tolerance(ref, powersgd_reference(m, W, steps, p, 0.1, groups, true));
  std::size_t compared = 0;
  double worst = 0;  // the largest difference over its step's tolerance
  auto check = [&](double diff, double tol) {
    worst = std::max(worst, diff / tol);
    return diff;
  };
  for (int t = 0; t < steps; ++t) {
    const double tol = tolerance[t];
    for (int r = 0; r < W; ++r) {
      for (std::size_t j = 0; j < ref.x[t].size(); ++j)
        ASSERT_LE(check(scaled_diff(trace.params[t][r][j], ref.x[t][j]), tol), tol)
            << "step " << t + 1 << " rank " << r << " tensor " << j;
      if (t < p.start) continue;  // P and Q are not touched before PowerSGD starts
      ASSERT_EQ(trace.pq[t][r].size(), ref.pq[t].size()) << "step " << t + 1;
      for (const auto& [j, pq] : ref.pq[t]) {
        ASSERT_LE(check(scaled_diff(trace.pq[t][r].at(j).first, pq.first), tol), tol) << "P, step " << t + 1 << " tensor " << j;
        ASSERT_LE(check(scaled_diff(trace.pq[t][r].at(j).second, pq.second), tol), tol) << "Q, step " << t + 1 << " tensor " << j;
        ++compared;
      }
    }
  }
  EXPECT_GT(compared, 0u);
  std::printf("W=%d rank %lld: tolerance at step %d %.3g, largest difference %.2f of its step's tolerance\n", W,
              static_cast<long long>(p.rank), steps, tolerance.back(), worst);
}

// With error feedback and warm start (the defaults), ranks 1 and 2, world sizes 1 and 4.
TEST(DdpPowerSgd, MatchesAPlainReimplementation) {
  const auto m = small_model();
  for (int W : {1, 4})
    for (std::int64_t rank : {1, 2}) {
      SCOPED_TRACE("W=" + std::to_string(W) + " rank=" + std::to_string(rank));
      PowerSgdSettings p;
      p.rank = rank;
      p.min_rate = rank == 2 ? 1.0 : 2.0;  // at rank 2 and rate 2 none of these small matrices would be compressed
      p.seed = 5;
      expect_matches_reference(m, W, p);
    }
}

json centralized_powersgd_json(const PowerSgdSettings& p);  // below, with parallel_sgd's tests

// Ranks above 2 orthogonalize with QR, as the hook does (Gram-Schmidt there loses
// orthogonality on ill-conditioned P); tensors of one shape are drawn together.
TEST(DdpPowerSgd, QrAboveRankTwoAndDrawsGroupedByShape) {
  const FakeModel wide{{{20, 12}, {9}, {16, 16}, {20, 12}, {16, 4, 4}, {30}},
                       {{4, 5}, {2, 3}, {0, 1}},
                       {1e3, 1e3, 1e3}};
  for (std::int64_t rank : {3, 4})
    for (bool warm : {true, false}) {
      SCOPED_TRACE(fmt::format("rank={} warm_start={}", rank, warm));
      PowerSgdSettings p;
      p.rank = rank;
      p.min_rate = 1.0;
      p.warm_start = warm;
      p.seed = 11;
      expect_matches_reference(wide, 4, p);
      expect_matches_reference(wide, 4, p, centralized_powersgd_json(p));
    }
}

// Without warm start Q is drawn again every step; without error feedback there is no
// memory (and then start_powerSGD_iter may be 0); epsilon enters the normalisation.
TEST(DdpPowerSgd, WithoutWarmStartOrErrorFeedback) {
  const auto m = small_model();
  PowerSgdSettings p;
  p.warm_start = false;
  p.error_feedback = false;
  p.start = 0;
  p.eps = 1e-3;
  expect_matches_reference(m, 4, p);
}

// The rule: an n x m view with r = min(n, m, rank) is compressed iff n m > (n + m) r rate.
// small_model at rank 1: 8 x 5 (40 > 26), 5 x 5 (25 > 20), 6 x 10 (60 > 32), 4 x 3 (12 <
// 14: not), 1-D and 1 x 1 tensors never. n_bits is 32 ((n + m) r summed, plus the
// uncompressed elements) once PowerSGD runs, 32 per element before.
TEST(DdpPowerSgd, CompressionRuleAndNBits) {
  const auto m = small_model();
  for (double rate : {2.0, 1.5, 100.0}) {
    SCOPED_TRACE(rate);
    PowerSgdSettings p;
    p.min_rate = rate;
    const auto trace = run(powersgd_json(p), m, 2, 3);
    const auto& ddp = dynamic_cast<algorithms::Ddp&>(*trace.algorithms[0]);
    std::uint64_t expected = 0;
    std::set<std::size_t> compressed;
    for (std::size_t j = 0; j < m.shapes.size(); ++j) {
      const auto& shape = m.shapes[j];
      const std::int64_t n = shape[0], cols = numel_of(shape) / n, r = std::min<std::int64_t>({n, cols, 1});
      if (static_cast<double>(n * cols) > static_cast<double>((n + cols) * r) * rate) {
        compressed.insert(j);
        expected += 32u * static_cast<std::uint64_t>((n + cols) * r);
      } else {
        expected += 32u * static_cast<std::uint64_t>(n * cols);
      }
    }
    std::set<std::size_t> got;
    const auto& hook = dynamic_cast<const algorithms::PowerSgdHook&>(ddp.hook());
    for (std::size_t b = 0; b < ddp.buckets().size(); ++b)
      for (std::size_t i = 0; i < ddp.buckets()[b].slots.size(); ++i)
        if (hook.group(b).slots()[i].r > 0) got.insert(ddp.buckets()[b].slots[i].param);
    EXPECT_EQ(got, compressed);
    if (rate == 2.0) {
      EXPECT_EQ(compressed, (std::set<std::size_t>{1, 4, 6}));
    }
    if (rate == 1.5) {
      EXPECT_EQ(compressed, (std::set<std::size_t>{1, 3, 4, 6}));  // 4 x 3: 12 > 10.5
    }
    EXPECT_EQ(trace.n_bits[0][0], 32u * 177u);
    EXPECT_EQ(trace.n_bits[1][0], 32u * 177u);
    EXPECT_EQ(trace.n_bits[2][1], expected);
  }
}

// Before start_powerSGD_iter (iterations counted from 0) the hook is the plain all-reduce:
// the first `start` steps equal the allreduce hook bit for bit; the next one differs.
TEST(DdpPowerSgd, PlainAllReduceBeforeTheStartIteration) {
  const auto m = small_model();
  PowerSgdSettings p;
  p.start = 4;
  const auto powersgd = run(powersgd_json(p), m, 4, 5);
  const auto plain = run({{"name", "ddp"}, {"bucket_cap_mb", mb(256)}, {"first_bucket_mb", mb(64)}, {"lr", 0.1}}, m, 4, 5);
  expect_identical(powersgd, plain, 4);
  EXPECT_GT(max_abs_diff(powersgd.params[4][0][1], plain.params[4][0][1]), 1e-4);
  EXPECT_EQ(dynamic_cast<algorithms::Ddp&>(*powersgd.algorithms[0]).iteration(), 5);
}

// ---------------------------------------------------------------------------------------
// Timing: bucket all-reduces overlap backward on the communication stream

double lone_all_reduce_time(std::int64_t elements, int ranks, const Net& net) {
  return testing::lone_all_reduce_time(elements, ranks, net, comm::ReduceOp::Average);
}

// Three backward stages of c seconds each produce one 64 Ki-element tensor (256 KB, a
// bucket of its own at 256 KB caps; a seconds per all-reduce). Bucket k is issued at
// (k+1) c and starts at max((k+1) c, end of bucket k-1), so the exposed wait after
// backward is a when a <= c and 3a - 2c when a > c: less than the 3a of communication.
TEST(DdpTiming, BucketAllReducesOverlapBackward) {
  const Net net{10.0, 1.0, 1.0};
  const std::int64_t n = 65536;
  const double a = lone_all_reduce_time(n, 2, net);
  for (double c : {400e-6, 150e-6}) {
    SCOPED_TRACE(c);
    const FakeModel m{{{n}, {n}, {n}}, {{2}, {1}, {0}}, {c * 1e9, c * 1e9, c * 1e9}};
    const auto trace = run({{"name", "ddp"}, {"bucket_cap_mb", 0.25}, {"first_bucket_mb", 0.25}, {"lr", 0.1}}, m, 2, 2, net);
    const double exposed = a <= c ? a : 3.0 * a - 2.0 * c;
    for (std::size_t t = 0; t < 2; ++t) {
      EXPECT_NEAR(trace.phases[t].at("sync/sync"), exposed, 1e-9);
      EXPECT_LT(trace.phases[t].at("sync/sync"), 3.0 * a - 1e-6);
    }
  }
}

// PowerSGD, each tensor a 256 x 256 matrix (a bucket of its own) at rank 4: P and Q are
// 1 Ki elements, pq seconds per all-reduce. One bucket: nothing is left to overlap, so
// both all-reduces are exposed (sync/sync = 2 pq) and the compute between them (the
// orthogonalisation and Q = M^T P, then P Q^T) is charged to the rank (sync/compress).
// Three buckets: each P all-reduce is issued at its bucket's close and hides behind the
// rest of backward or the second half of the buckets before it (over 0.5 ms of compute
// each here, against pq of about 24 us), and each Q behind the next bucket's compute or
// the decompression of the earlier ones: nothing is exposed, of 6 pq of communication.
TEST(DdpTiming, PowerSgdAllReducesAndTheComputeBetweenThem) {
  const Net net{10.0, 1.0, 1.0};
  const double pq = lone_all_reduce_time(1024, 2, net);
  PowerSgdSettings p;
  p.rank = 4;
  json alg = powersgd_json(p);
  alg["bucket_cap_mb"] = 0.25;
  alg["first_bucket_mb"] = 0.25;
  const FakeModel one{{{256, 256}}, {{0}}, {150e3}};
  const auto single = run(alg, one, 2, 3, net);
  EXPECT_NEAR(single.phases[2].at("sync/sync"), 2.0 * pq, 1e-12);
  EXPECT_GT(single.phases[2].at("sync/compress"), 1e-3);  // two 2 n m r matrix products and more, at 1 GFLOPS
  const FakeModel three{{{256, 256}, {256, 256}, {256, 256}}, {{2}, {1}, {0}}, {150e3, 150e3, 150e3}};
  const auto trace = run(alg, three, 2, 3, net);
  EXPECT_EQ(trace.n_bits[2][0], 3u * 32u * 2u * 1024u);
  EXPECT_NEAR(trace.phases[2].at("sync/sync"), 0.0, 1e-12);
  EXPECT_GT(pq, 20e-6);
}

// ---------------------------------------------------------------------------------------
// Scenario validation

std::string error_path(const json& algorithm) {
  try {
    make_scenario(algorithm, 2);
  } catch (const runner::ScenarioError& e) {
    return e.path() + " | " + e.what();
  }
  return "accepted";
}

// The noop hook communicates nothing: no bits, nothing exposed (sync/sync 0), and each
// rank steps with its own gradient, so the ranks' models part; the allreduce hook's step
// takes longer by its exposed communication.
TEST(DdpNoop, EachRankStepsAlone) {
  const auto m = small_model();
  const auto noop = run({{"name", "ddp"}, {"hook", "noop"}, {"lr", 0.1}}, m, 2, 3);
  const auto plain = run({{"name", "ddp"}, {"hook", "allreduce"}, {"lr", 0.1}}, m, 2, 3);
  for (const auto& step : noop.n_bits)
    for (auto bits : step) EXPECT_EQ(bits, 0u);
  for (std::size_t t = 0; t < 3; ++t) {
    EXPECT_EQ(noop.phases[t].count("sync/sync") ? noop.phases[t].at("sync/sync") : 0.0, 0.0);
    EXPECT_LT(noop.step_time[t], plain.step_time[t]);
  }
  bool parted = false;
  for (std::size_t j = 0; j < m.shapes.size(); ++j) parted = parted || !noop.params[2][0][j].equal(noop.params[2][1][j]);
  EXPECT_TRUE(parted);
  for (std::size_t j = 0; j < m.shapes.size(); ++j) EXPECT_TRUE(plain.params[2][0][j].equal(plain.params[2][1][j]));
}

TEST(DdpScenario, PowerSgdFieldsOnlyWithItsHookAndPyTorchsStartRule) {
  EXPECT_EQ(error_path({{"name", "ddp"}, {"lr", 0.1}, {"matrix_approximation_rank", 2}}).rfind("/algorithm/matrix_approximation_rank | ", 0), 0u);
  EXPECT_EQ(error_path({{"name", "ddp"}, {"lr", 0.1}, {"hook", "fp16_compress"}, {"warm_start", false}}).rfind("/algorithm/warm_start | ", 0), 0u);
  EXPECT_EQ(error_path({{"name", "ddp"}, {"lr", 0.1}, {"hook", "topk"}}).rfind("/algorithm/hook | ", 0), 0u);
  EXPECT_EQ(error_path({{"name", "ddp"}, {"lr", 0.1}, {"bucket_cap_mb", -1}}).rfind("/algorithm/bucket_cap_mb | ", 0), 0u);
  const auto start = error_path({{"name", "ddp"}, {"lr", 0.1}, {"hook", "powersgd"}, {"start_powerSGD_iter", 1}});
  EXPECT_EQ(start.rfind("/algorithm/start_powerSGD_iter | ", 0), 0u) << start;
  EXPECT_EQ(error_path({{"name", "ddp"}, {"lr", 0.1}, {"hook", "powersgd"}, {"start_powerSGD_iter", 1}, {"use_error_feedback", false},
                        {"warm_start", false}}),
            "accepted");
  // The algorithm refuses too, as a broken precondition.
  algorithms::AlgorithmSpec spec;
  spec.name = "ddp";
  algorithms::PowerSgdOptions options;
  options.start_powerSGD_iter = 0;
  algorithms::DdpSettings settings{.hook = "powersgd", .hook_settings = options};
  spec.settings = settings;
  EXPECT_THROW(algorithms::Ddp{spec}, std::logic_error);
}

TEST(DdpScenario, EchoesItsFields) {
  const auto s = make_scenario({{"name", "ddp"}, {"hook", "powersgd"}, {"lr", 0.1}, {"matrix_approximation_rank", 4}}, 2);
  const auto j = s.to_json()["algorithm"];
  EXPECT_EQ(j["hook"], "powersgd");
  EXPECT_EQ(j["bucket_cap_mb"], 25.0);
  EXPECT_EQ(j["first_bucket_mb"], 1.0);
  EXPECT_EQ(j["matrix_approximation_rank"], 4);
  EXPECT_EQ(j["start_powerSGD_iter"], 1000);
  EXPECT_EQ(j["min_compression_rate"], 2.0);
  EXPECT_EQ(j["use_error_feedback"], true);
  EXPECT_EQ(j["warm_start"], true);
  EXPECT_EQ(j["orthogonalization_epsilon"], 0.0);
  EXPECT_EQ(j["random_seed"], 0);
  EXPECT_EQ(runner::parse_scenario(s.to_json()).to_json(), s.to_json());
  const auto plain = make_scenario({{"name", "ddp"}, {"lr", 0.1}}, 2).to_json()["algorithm"];
  EXPECT_EQ(plain["hook"], "allreduce");
  EXPECT_FALSE(plain.contains("warm_start"));
}

// ---------------------------------------------------------------------------------------
// PowerSGD as the centralized family's compressor: parallel_sgd, gradient_compression
// "powersgd" (one group over the whole model, Q drawn in parameter order)

json centralized_powersgd_json(const PowerSgdSettings& p) {
  json a = powersgd_json(p);
  a.erase("hook");
  a.erase("bucket_cap_mb");
  a.erase("first_bucket_mb");
  a["name"] = "parallel_sgd";
  a["variant"] = "centralized";
  a["gradient_compression"] = "powersgd";
  return a;
}

TEST(ParallelSgdPowerSgd, MatchesAPlainReimplementation) {
  const auto m = small_model();
  for (int W : {1, 4})
    for (std::int64_t rank : {1, 2}) {
      SCOPED_TRACE("W=" + std::to_string(W) + " rank=" + std::to_string(rank));
      PowerSgdSettings p;
      p.rank = rank;
      p.min_rate = rank == 2 ? 1.0 : 2.0;
      p.seed = 7;
      expect_matches_reference(m, W, p, centralized_powersgd_json(p));
    }
  PowerSgdSettings plain;  // no warm start, no error feedback, from the first step
  plain.warm_start = false;
  plain.error_feedback = false;
  plain.start = 0;
  plain.eps = 1e-3;
  expect_matches_reference(m, 4, plain, centralized_powersgd_json(plain));
}

// Before start_powerSGD_iter it is parallel SGD bit for bit (32 bits per element); from it
// on, 32 (n + m) r per compressed matrix plus 32 per uncompressed element, the same count
// as ddp's hook (the compression rule does not see buckets).
TEST(ParallelSgdPowerSgd, PlainPhaseThenPowerSgdBits) {
  const auto m = small_model();
  PowerSgdSettings p;
  p.start = 3;
  p.min_rate = 1.0;
  const auto plain = run(with({{"name", "parallel_sgd"}, {"variant", "centralized"}}, kOptimizer), m, 4, 3);
  const auto compressed = run(with(centralized_powersgd_json(p), kOptimizer), m, 4, 5);
  const auto hook = run(with(powersgd_json(p), kOptimizer), m, 4, 5);
  for (int t = 0; t < 3; ++t)
    for (int r = 0; r < 4; ++r) {
      EXPECT_EQ(compressed.n_bits[t][r], 32u * 177u);
      for (std::size_t j = 0; j < m.shapes.size(); ++j)
        EXPECT_TRUE(at::equal(compressed.params[t][r][j], plain.params[t][r][j])) << "step " << t + 1 << " tensor " << j;
    }
  std::uint64_t expected = 0;
  for (const auto& shape : m.shapes) {
    std::int64_t numel = 1;
    for (auto d : shape) numel *= d;
    const std::int64_t n = shape.empty() ? 1 : shape[0], cols = numel / n;
    const bool squeezed = static_cast<double>(n + cols) * 1.0 < static_cast<double>(n * cols);  // r = 1, rate 1
    expected += 32u * static_cast<std::uint64_t>(squeezed ? n + cols : numel);
  }
  for (int t = 3; t < 5; ++t) {
    EXPECT_EQ(compressed.n_bits[t][0], expected);
    EXPECT_EQ(hook.n_bits[t][0], expected);
  }
  EXPECT_LT(expected, 32u * 177u);
}

// A function, not a macro: the text (a parse's error) is computed once.
void expect_contains(const std::string& text, const std::string& part) {
  EXPECT_NE(text.find(part), std::string::npos) << text << "\n  expected to contain: " << part;
}

TEST(ParallelSgdPowerSgd, FieldsOnlyWhereTheyApply) {
  auto doc = [](const json& algorithm) {
    return json{{"name", "t"}, {"ranks", 2}, {"steps", 1}, {"workload", {{"type", "logistic_regression"}}},
                {"algorithm", algorithm}, {"topology", {{"kind", "ring"}}},
                {"network", {{"model", "alpha_beta"}, {"latency_us", 5}, {"bandwidth_GBps", 1}}}};
  };
  auto error = [&](const json& algorithm) {
    try {
      runner::parse_scenario(doc(algorithm));
    } catch (const config::ScenarioError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  expect_contains(error({{"name", "parallel_sgd"}, {"variant", "centralized"}, {"lr", 0.1}, {"matrix_approximation_rank", 2}}),
              ("/algorithm/matrix_approximation_rank"));
  expect_contains(error({{"name", "parallel_sgd"}, {"variant", "decentralized"}, {"lr", 0.1}, {"gradient_compression", "powersgd"}}),
              ("/algorithm/gradient_compression"));
  expect_contains(error({{"name", "parallel_sgd"}, {"variant", "centralized"}, {"lr", 0.1}, {"gradient_compression", "powersgd"},
                     {"start_powerSGD_iter", 1}}),
              ("/algorithm/start_powerSGD_iter"));
  expect_contains(error({{"name", "parallel_sgd"}, {"variant", "centralized"}, {"lr", 0.1}, {"gradient_compression", "top_k"}}),
              ("/algorithm/gradient_compression"));
  EXPECT_EQ(error({{"name", "parallel_sgd"}, {"variant", "centralized"}, {"lr", 0.1}, {"gradient_compression", "powersgd"},
                   {"matrix_approximation_rank", 2}}),
            "accepted");
}

// ---------------------------------------------------------------------------------------
// Against PyTorch itself: DDP over Gloo with its own hooks (tests/pytorch/ddp_hooks_reference.py,
// run by the PyTorch whose LibTorch these tests were built against: tests/python_torch.hpp),
// dtsim's `cnn` on the same data, initial parameters, shards and batch order, 12 steps of
// plain SGD.

struct HookCase {
  std::string name;  // also the output files' stem
  json algorithm;    // dtsim's /algorithm
  json reference;    // the script's case
};

// Largest difference between two parameter dumps ({"params": {name: [values]}}), relative
// to the largest magnitude of b's tensor (at least 1).
double params_diff(const json& a, const json& b) {
  double worst = 0.0;
  for (const auto& [name, values] : b["params"].items()) {
    const auto& other = a["params"].at(name);
    double diff = 0.0, scale = 1.0;
    for (std::size_t i = 0; i < values.size(); ++i) {
      diff = std::max(diff, std::abs(other[i].get<double>() - values[i].get<double>()));
      scale = std::max(scale, std::abs(values[i].get<double>()));
    }
    worst = std::max(worst, diff / scale);
  }
  return worst;
}

// Runs every case in dtsim and in PyTorch with `ranks` ranks; returns name -> (dtsim's
// distance to PyTorch, PyTorch's distance to its plain all-reduce).
std::map<std::string, std::pair<double, double>> against_pytorch(const std::string& python, int ranks,
                                                                 const std::vector<HookCase>& cases) {
  const auto dir = testing::fresh_dir(fmt::format("ddp-pytorch-{}", ranks));
  const std::string data = (dir / "data.pt").string();
  // 64 samples of 1 x 8 x 8 a rank, 10 classes, drawn by PyTorch.
  auto r = testing::run_command(fmt::format(
      "{} -c \"import torch; g = torch.Generator().manual_seed(0); n = {}; "
      "torch.save({{'x': torch.randn(n, 1, 8, 8, generator=g), 'y': torch.randint(0, 10, (n,), generator=g)}}, '{}')\"",
      python, 64 * ranks, data));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  auto scenario = [&](const json& algorithm) {
    return json{{"name", "pytorch"}, {"ranks", ranks}, {"steps", 12}, {"seed", 3},
                {"workload", {{"type", "cnn"}, {"tensors_file", data}, {"batch_size", 64}, {"partition", "iid"}}},
                {"algorithm", algorithm}, {"topology", {{"kind", "ring"}}},
                {"network", {{"model", "alpha_beta"}, {"latency_us", 5}, {"bandwidth_GBps", 1.25}}}};
  };
  const json plain = {{"name", "ddp"}, {"hook", "allreduce"}, {"lr", 0.1}};
  testing::write_file(dir / "init.json", scenario(plain).dump());
  r = testing::run_command(std::string(DTSIM_BINARY) + " init-params " + (dir / "init.json").string() + " --out " +
                           (dir / "init.pt").string());
  EXPECT_EQ(r.exit_code, 0) << r.output;
  json spec = {{"ranks", ranks}, {"steps", 12}, {"seed", 3}, {"lr", 0.1}, {"data", data},
               {"init", (dir / "init.pt").string()}, {"cases", json::array()}};
  auto all = cases;
  all.push_back({"allreduce", plain, {{"hook", "allreduce"}}});
  for (auto& c : all) {
    c.reference["out"] = (dir / (c.name + ".pytorch.json")).string();
    spec["cases"].push_back(c.reference);
    runner::RunOptions options;
    options.dump_params_prefix = dir / (c.name + ".dtsim");
    runner::run_emulated(runner::parse_scenario(scenario(c.algorithm)), options);
  }
  testing::write_file(dir / "cases.json", spec.dump());
  r = testing::run_command(python + " " + DTSIM_SOURCE_DIR + "/tests/pytorch/ddp_hooks_reference.py " +
                           (dir / "cases.json").string() + " 2>&1");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  std::map<std::string, std::pair<double, double>> out;
  const json plain_reference = testing::read_json(dir / "allreduce.pytorch.json");
  for (const auto& c : all) {
    const json reference = testing::read_json(dir / (c.name + ".pytorch.json"));
    const json ours = testing::read_json(dir / (c.name + ".dtsim.rank0.json"));
    out[c.name] = {params_diff(ours, reference), params_diff(reference, plain_reference)};
    std::printf("%d ranks, %-28s dtsim - PyTorch %.3g   PyTorch's hook - its all-reduce %.3g\n", ranks, c.name.c_str(),
                out[c.name].first, out[c.name].second);
  }
  return out;
}

HookCase powersgd_case(std::int64_t rank, bool warm_start_and_error_feedback) {
  const std::string name = fmt::format("powersgd_rank{}_{}", rank, warm_start_and_error_feedback ? "ef_ws" : "plain");
  const json settings = {{"matrix_approximation_rank", rank}, {"start_powerSGD_iter", 2},
                         {"use_error_feedback", warm_start_and_error_feedback},
                         {"warm_start", warm_start_and_error_feedback}, {"random_seed", 5}};
  json algorithm = {{"name", "ddp"}, {"hook", "powersgd"}, {"lr", 0.1}};
  json reference = {{"hook", "powersgd"}};
  for (const auto& [k, v] : settings.items()) algorithm[k] = reference[k] = v;
  return {name, algorithm, reference};
}

// PowerSGD at ranks 1, 2 and 4 (Gram-Schmidt, then QR), with and without warm start and
// error feedback, on 4 ranks (fp32 sums, whose order Gloo and dtsim choose differently:
// rounding), and the fp16 / bf16 hooks on 2 ranks (two addends: one rounding whatever the
// order, so bit for bit where the model's own arithmetic is PyTorch's; below), and the noop
// hook (no communication: rank 0 steps with its own gradient) on 2 ranks. PowerSGD's
// own effect, its distance to the plain all-reduce,
// is 10^3 to 10^5 times what separates dtsim from PyTorch.
TEST(DdpAgainstPyTorch, PowerSgdAndHalfPrecisionHooks) {
  const auto python = testing::python_with_torch();
  if (python.empty() && testing::python_with_torch_required()) FAIL() << testing::no_python_with_torch();
  if (python.empty()) GTEST_SKIP() << testing::no_python_with_torch();
  std::vector<HookCase> powersgd;
  for (std::int64_t rank : {1, 2, 4})
    for (bool on : {true, false}) powersgd.push_back(powersgd_case(rank, on));
  for (const auto& [name, d] : against_pytorch(python, 4, powersgd)) {
    EXPECT_LE(d.first, 1e-6) << name;
    if (name != "allreduce") {
      EXPECT_GE(d.second, 1e3 * std::max(d.first, 1e-9)) << name;
    }
  }
  const std::vector<HookCase> half{
      {"fp16_compress", {{"name", "ddp"}, {"hook", "fp16_compress"}, {"lr", 0.1}}, {{"hook", "fp16_compress"}}},
      {"bf16_compress", {{"name", "ddp"}, {"hook", "bf16_compress"}, {"lr", 0.1}}, {{"hook", "bf16_compress"}}},
      {"noop", {{"name", "ddp"}, {"hook", "noop"}, {"lr", 0.1}}, {{"hook", "noop"}}}};
  // Bit for bit where dtsim's `cnn` and PyTorch's module compute the same float operations,
  // which the plain all-reduce (no hook) shows: so with LibTorch 1.13. With 2.15 they part
  // by an ulp or so in the model's own arithmetic (6e-8 after 12 steps without a hook), the
  // fp16 / bf16 roundings carry that further (4e-7, 8e-7), and the hooks are held to
  // PowerSGD's bound, far below the hooks' own effect (5e-4).
  const auto results = against_pytorch(python, 2, half);
  const bool same_arithmetic = results.at("allreduce").first == 0.0;
  for (const auto& [name, d] : results) {
    if (same_arithmetic)
      EXPECT_EQ(d.first, 0.0) << name;
    else
      EXPECT_LE(d.first, 1e-6) << name;
    if (name != "allreduce") {
      EXPECT_GT(d.second, 100 * d.first) << name;  // the hook does change the training, by far more
    }
  }
}

}  // namespace
}  // namespace dtsim
