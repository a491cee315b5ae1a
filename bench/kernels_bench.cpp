// Compression and aggregation kernels, each judged against two yardsticks timed in the
// same run, interleaved iteration by iteration, on the same thread count:
//   x_read   = time of a plain vectorized read pass over the input / kernel time
//              (1.0 = the kernel consumes its input as fast as memory can be read)
//   x_memcpy = time of a memcpy of the input's bytes / kernel time
//   x_torch  = time of the equivalent LibTorch computation / kernel time (the speedup)
//   (ratios of per-iteration medians; kernel_GBps = input bytes / median kernel time)
// bytes_per_second counts the input bytes (mean time). Args: input bytes, threads (0 = all cores);
// at::set_num_threads sets the count for dtsim's kernels and LibTorch alike.
//
// Napkin math: a read pass moves `bytes` once; sign writes bytes/32 more, the casts
// bytes/2, QSGD (s = 15, 5-bit codes) bytes*5/32 after a norm pass (two reads); top-k
// reads the input twice (histogram, compaction) plus ~2% of it at random.
#include <benchmark/benchmark.h>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <random>
#include <string_view>
#include <thread>
#include <vector>

#include "kernels/aggregation.hpp"
#include "kernels/codecs/qsgd.hpp"
#include "kernels/codecs/random_k.hpp"
#include "kernels/codecs/threshold.hpp"
#include "kernels/codecs/top_k.hpp"
#include "kernels/compressor.hpp"
#include "kernels/error_feedback.hpp"
#include "kernels/majority_vote.hpp"
#include "kernels/tensor_buffer.hpp"

namespace {

using namespace dtsim::kernels;
using Clock = std::chrono::steady_clock;

double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

// Sum of the buffer with 32 independent lanes: a read pass at full vector width.
#if defined(__x86_64__)
[[gnu::target("avx2,fma")]]
#endif
float read_pass_range(const float* x, std::int64_t n) {
  float acc[32] = {};
  std::int64_t i = 0;
  for (; i + 32 <= n; i += 32)
    for (int l = 0; l < 32; ++l) acc[l] += x[i + l];
  for (; i < n; ++i) acc[0] += x[i];
  float s = 0;
  for (float a : acc) s += a;
  return s;
}

float read_pass(const float* x, std::int64_t n) {
  std::vector<float> part(static_cast<std::size_t>(at::get_num_threads()), 0.0f);
  at::parallel_for(0, n, 1 << 16, [&](std::int64_t a, std::int64_t b) {
    part[static_cast<std::size_t>(at::get_thread_num())] += read_pass_range(x + a, b - a);
  });
  float s = 0;
  for (float p : part) s += p;
  return s;
}

void parallel_memcpy(void* dst, const void* src, std::int64_t bytes) {
  at::parallel_for(0, bytes, 1 << 18, [&](std::int64_t a, std::int64_t b) {
    std::memcpy(static_cast<char*>(dst) + a, static_cast<const char*>(src) + a, static_cast<std::size_t>(b - a));
  });
}

int threads_of(const benchmark::State& state) {
  const int t = static_cast<int>(state.range(1));
  return t > 0 ? t : static_cast<int>(std::thread::hardware_concurrency());
}

at::Tensor input(std::int64_t bytes) {
  auto gen = at::detail::createCPUGenerator(42);
  return at::randn({bytes / 4}, gen, at::kFloat);
}

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

// A yardstick timed against the kernel: its counter name and the computation.
struct Yardstick {
  const char* counter;
  std::function<void()> run;
};

// Times `kernel` (the benchmark's time), and per iteration a read pass, a memcpy and
// each yardstick over the same input, then reports the ratios (yardstick time / kernel time).
template <class Kernel>
void compare(benchmark::State& state, const at::Tensor& x, Kernel&& kernel, const std::vector<Yardstick>& yardsticks) {
  const int saved = at::get_num_threads();
  at::set_num_threads(threads_of(state));
  const std::int64_t bytes = x.numel() * static_cast<std::int64_t>(x.element_size());
  at::Tensor copy = at::empty_like(x);
  kernel();  // warm-up: workspaces grow to size, pages are touched
  for (const auto& y : yardsticks) y.run();
  parallel_memcpy(copy.data_ptr(), x.data_ptr(), bytes);
  std::vector<double> t_kernel, t_read, t_copy;
  std::vector<std::vector<double>> t_yard(yardsticks.size());
  for (auto _ : state) {
    auto a = Clock::now();
    kernel();
    auto b = Clock::now();
    state.SetIterationTime(seconds(a, b));
    t_kernel.push_back(seconds(a, b));
    a = Clock::now();
    benchmark::DoNotOptimize(read_pass(x.data_ptr<float>(), x.numel()));
    b = Clock::now();
    t_read.push_back(seconds(a, b));
    a = Clock::now();
    parallel_memcpy(copy.data_ptr(), x.data_ptr(), bytes);
    benchmark::ClobberMemory();
    b = Clock::now();
    t_copy.push_back(seconds(a, b));
    for (std::size_t j = 0; j < yardsticks.size(); ++j) {
      a = Clock::now();
      yardsticks[j].run();
      b = Clock::now();
      t_yard[j].push_back(seconds(a, b));
    }
  }
  state.SetBytesProcessed(state.iterations() * bytes);
  // Ratios of per-iteration medians: a preempted iteration (a busy machine) moves a mean
  // by a lot and a median hardly at all.
  const double k = median(t_kernel);
  state.counters["x_read"] = median(t_read) / k;
  state.counters["x_memcpy"] = median(t_copy) / k;
  state.counters["kernel_GBps"] = static_cast<double>(bytes) / k / 1e9;  // from the median time
  for (std::size_t j = 0; j < yardsticks.size(); ++j) state.counters[yardsticks[j].counter] = median(t_yard[j]) / k;
  state.counters["threads"] = threads_of(state);
  at::set_num_threads(saved);
}

template <class Kernel, class Baseline>
void compare(benchmark::State& state, const at::Tensor& x, Kernel&& kernel, Baseline&& baseline, bool has_baseline) {
  std::vector<Yardstick> ys;
  if (has_baseline) ys.push_back({"x_torch", std::function<void()>(baseline)});
  compare(state, x, std::forward<Kernel>(kernel), ys);
}

void compressor_bench(benchmark::State& state, CompressorSpec spec, const std::function<void(const at::Tensor&)>& base) {
  at::Tensor x = input(state.range(0));
  Compressor c(spec);
  Payload p;
  compare(state, x, [&] { c.compress(x, {}, p); }, [&] { base(x); }, static_cast<bool>(base));
  state.counters["payload_bits"] = static_cast<double>(p.payload_bits());
}

void compressor_decode_bench(benchmark::State& state, CompressorSpec spec,
                             const std::function<void(const at::Tensor&)>& base) {
  at::Tensor x = input(state.range(0));
  Compressor c(spec);
  Payload p;
  c.compress(x, {}, p);
  at::Tensor out = at::empty_like(x);
  compare(state, x, [&] { c.decompress_add(p, 0.5, out); }, [&] { base(x); }, static_cast<bool>(base));
}

// LibTorch versions of the same computations (the reference implementation's ops).
at::Tensor torch_pack_signs(const at::Tensor& x) {
  const std::int64_t W = x.numel() / 32;
  static const at::Tensor shifts = at::arange(32, at::kInt);
  return at::sign(x).lt(0).to(at::kInt).view({W, 32}).__lshift__(shifts).sum(1, false, at::kInt);
}

void BM_TopK(benchmark::State& state) {
  CompressorSpec s{.kind = "top_k", .settings = TopKSettings{.ratio = 0.01}};
  compressor_bench(state, s, [](const at::Tensor& x) {
    const std::int64_t k = std::max<std::int64_t>(1, x.numel() / 100);
    benchmark::DoNotOptimize(at::topk(x.abs(), k, 0, true, /*sorted=*/false));
  });
}

// Per-tensor top-k as CHOCO-SGD sends it on ResNet-20 (CIFAR-10, 269,722 parameters): one
// flat buffer cut into the model's 59 tensors, k = max(1, floor(0.01 n)) each: 38 of the
// tensors have 16 to 64 elements, where a selection's fixed cost, not n, decides.
// x_torch: at::topk per tensor.
const std::vector<std::int64_t>& resnet20_tensor_sizes() {
  static const std::vector<std::int64_t> sizes = [] {
    std::vector<std::int64_t> v{432, 16, 16};  // conv1, bn1
    for (std::int64_t c : {16, 32, 64})
      for (int block = 0; block < 3; ++block) {
        const std::int64_t in = (block == 0 && c > 16) ? c / 2 : c;
        v.insert(v.end(), {9 * in * c, c, c, 9 * c * c, c, c});  // conv, bn, conv, bn
      }
    v.insert(v.end(), {640, 10});  // fc
    return v;
  }();
  return sizes;
}

void BM_TopKPerTensorResNet20(benchmark::State& state) {
  const auto& segments = resnet20_tensor_sizes();
  std::int64_t n = 0;
  for (std::int64_t s : segments) n += s;
  auto gen = at::detail::createCPUGenerator(42);
  const at::Tensor x = at::randn({n}, gen, at::kFloat);
  Compressor c(CompressorSpec{.kind = "top_k", .settings = TopKSettings{.ratio = 0.01}});
  Payload p;
  compare(state, x, [&] { c.compress(x, segments, p); },
          [&] {
            std::int64_t off = 0;
            for (std::int64_t s : segments) {
              benchmark::DoNotOptimize(at::topk(x.narrow(0, off, s).abs(), c.k_for(s), 0, true, false));
              off += s;
            }
          },
          true);
  state.counters["tensors"] = static_cast<double>(segments.size());
}

void BM_Threshold(benchmark::State& state) {
  CompressorSpec s{.kind = "threshold", .settings = ThresholdSettings{.threshold = 2.5}};
  compressor_bench(state, s, [](const at::Tensor& x) {
    at::Tensor idx = x.abs().ge(2.5).nonzero();
    benchmark::DoNotOptimize(x.index_select(0, idx.flatten()));
  });
}

void BM_RandomK(benchmark::State& state) {
  CompressorSpec s{.kind = "random_k", .seed = 1, .settings = RandomKSettings{.ratio = 0.01}};
  compressor_bench(state, s, [](const at::Tensor& x) {
    const std::int64_t k = std::max<std::int64_t>(1, x.numel() / 100);
    at::Tensor idx = at::randperm(x.numel(), at::kLong).narrow(0, 0, k);
    benchmark::DoNotOptimize(x.index_select(0, idx));
  });
}

void BM_Sign(benchmark::State& state) {
  compressor_bench(state, CompressorSpec{.kind = "sign"},
                   [](const at::Tensor& x) { benchmark::DoNotOptimize(torch_pack_signs(x)); });
}

void BM_ScaledSign(benchmark::State& state) {
  compressor_bench(state, CompressorSpec{.kind = "scaled_sign"}, [](const at::Tensor& x) {
    benchmark::DoNotOptimize(x.abs().sum() / static_cast<double>(x.numel()));
    benchmark::DoNotOptimize(torch_pack_signs(x));
  });
}

void BM_Qsgd(benchmark::State& state) {
  CompressorSpec s{.kind = "qsgd", .seed = 1, .settings = QsgdSettings{.levels = 15}};
  compressor_bench(state, s, [](const at::Tensor& x) {
    // the reference's QSGD in torch ops (its output is fp32, not packed)
    at::Tensor norm = x.norm();
    at::Tensor y = x.abs() * (15 / norm);
    at::Tensor fl = y.floor();
    at::Tensor level = fl + at::rand_like(y).lt(y - fl).to(at::kFloat);
    benchmark::DoNotOptimize(x.sign() * level * (norm / 15));
  });
}

// QSGD's bucketed variant (one norm per 512 elements, as in the QSGD paper's
// experiments): one read of the input, a block of whole buckets at a time.
void qsgd_bucket_bench(benchmark::State& state, std::int64_t bucket) {
  CompressorSpec s{.kind = "qsgd", .seed = 1, .settings = QsgdSettings{.levels = 15, .bucket = bucket}};
  compressor_bench(state, s, [bucket](const at::Tensor& x) {
    // the same in torch ops, one norm per row of `bucket` (the whole buffer when it is
    // smaller; the sizes here are powers of two, so rows are full)
    at::Tensor rows = x.view({-1, std::min<std::int64_t>(bucket, x.numel())});
    at::Tensor norm = rows.norm(2, {1}, true);
    at::Tensor y = rows.abs() * (15 / norm);
    at::Tensor fl = y.floor();
    at::Tensor level = fl + at::rand_like(y).lt(y - fl).to(at::kFloat);
    benchmark::DoNotOptimize(rows.sign() * level * (norm / 15));
  });
}
void BM_QsgdBucket512(benchmark::State& state) { qsgd_bucket_bench(state, 512); }
void BM_QsgdBucket4096(benchmark::State& state) { qsgd_bucket_bench(state, 4096); }

// at::quantize_per_tensor to 8 bits as ATen's own quantizer (deterministic, no norm).
void BM_QsgdVsQuantizePerTensor(benchmark::State& state) {
  CompressorSpec s{.kind = "qsgd", .seed = 1, .settings = QsgdSettings{.levels = 127}};
  compressor_bench(state, s, [](const at::Tensor& x) {
    benchmark::DoNotOptimize(at::quantize_per_tensor(x, 0.05, 0, at::kQInt8));
  });
}

// Identity: the payload is the input's bytes (the uncompressed baseline of every sweep).
void BM_Identity(benchmark::State& state) {
  compressor_bench(state, CompressorSpec{.kind = "identity"},
                   [](const at::Tensor& x) { benchmark::DoNotOptimize(x.clone()); });
}

void BM_Fp16(benchmark::State& state) {
  compressor_bench(state, CompressorSpec{.kind = "fp16"},
                   [](const at::Tensor& x) { benchmark::DoNotOptimize(x.to(at::kHalf)); });
}

void BM_Bf16(benchmark::State& state) {
  compressor_bench(state, CompressorSpec{.kind = "bf16"},
                   [](const at::Tensor& x) { benchmark::DoNotOptimize(x.to(at::kBFloat16)); });
}

void BM_SignDecodeAdd(benchmark::State& state) {
  compressor_decode_bench(state, CompressorSpec{.kind = "scaled_sign"}, [](const at::Tensor& x) {
    benchmark::DoNotOptimize(x.add(at::sign(x), 0.5));
  });
}

void BM_QsgdDecodeAdd(benchmark::State& state) {
  compressor_decode_bench(state, CompressorSpec{.kind = "qsgd", .settings = QsgdSettings{.levels = 15}}, {});
}

void BM_Fp16DecodeAdd(benchmark::State& state) {
  static thread_local at::Tensor h;
  compressor_decode_bench(state, CompressorSpec{.kind = "fp16"}, [](const at::Tensor& x) {
    if (!h.defined() || h.numel() != x.numel()) h = x.to(at::kHalf);
    benchmark::DoNotOptimize(x.add(h.to(at::kFloat), 0.5));
  });
}

void BM_TopKDecodeAdd(benchmark::State& state) {
  compressor_decode_bench(state, CompressorSpec{.kind = "top_k", .settings = TopKSettings{.ratio = 0.01}}, {});
}

void BM_Average4(benchmark::State& state) {
  std::vector<at::Tensor> xs;
  for (int j = 0; j < 4; ++j) xs.push_back(input(state.range(0)));
  at::Tensor out = at::empty_like(xs[0]);
  compare(state, xs[0], [&] { average(out, xs); }, [&] { benchmark::DoNotOptimize(at::stack(xs).mean(0)); }, true);
}

void BM_ScatterAdd(benchmark::State& state) {
  at::Tensor dense = input(state.range(0));
  const std::int64_t m = std::max<std::int64_t>(1, dense.numel() / 100);
  auto gen = at::detail::createCPUGenerator(3);
  at::Tensor idx = at::randint(0, dense.numel(), {m}, gen, at::kLong);
  at::Tensor val = at::randn({m}, gen, at::kFloat);
  compare(state, dense, [&] { scatter_add(val, idx, dense); }, [&] { dense.index_add_(0, idx, val); }, true);
}

void BM_MajorityVote8(benchmark::State& state) {
  at::Tensor x = input(state.range(0));
  Compressor c(CompressorSpec{.kind = "sign"});
  std::vector<Payload> ps(8);
  std::vector<at::Tensor> xs;
  auto gen = at::detail::createCPUGenerator(4);
  for (auto& p : ps) {
    xs.push_back(at::randn({x.numel()}, gen, at::kFloat));
    c.compress(xs.back(), {}, p);
  }
  at::Tensor out = at::empty_like(x);
  compare(state, x, [&] { majority_vote(ps, out); },
          [&] {
            at::Tensor s = at::zeros_like(x);
            for (auto& t : xs) s.add_(at::sign(t));
            benchmark::DoNotOptimize(s.sign());
          },
          true);
}

// Error feedback: memory += x; q = C(memory); memory -= decompress(q). The kernel is the
// fused error_feedback_step; x_unfused times the same step as the three Compressor calls
// (memory.add_, compress, decompress_add), x_torch the reference's LibTorch ops (its
// compressed message unpacked: sign(memory), the fp16 round trip, QSGD's formula).
// Napkin math: reads memory and x, writes memory (3 * bytes), plus the payload; scaled
// sign and QSGD read memory once more (the scale or norm comes first).
// `reset_every` > 0: every that many calls each variant first copies its memory back from
// the start (QSGD at s << sqrt(n) is not contractive, so error feedback's memory grows
// geometrically and would reach Inf, whose shortcut the timing would then measure); the
// copy is charged to all three variants alike.
void ef_bench(benchmark::State& state, CompressorSpec spec, const std::function<void(at::Tensor&, const at::Tensor&)>& base,
              int reset_every = 0) {
  at::Tensor x = input(state.range(0));
  auto gen = at::detail::createCPUGenerator(9);
  const at::Tensor start = at::randn({x.numel()}, gen, at::kFloat);
  at::Tensor memory = start.clone(), ref = start.clone(), tm = start.clone();
  Compressor fused(spec), manual(spec);
  Payload p, q;
  auto fresh = [&, calls = std::array<int, 3>{}](int variant, at::Tensor& m) mutable {
    if (reset_every > 0 && ++calls[static_cast<std::size_t>(variant)] % reset_every == 0) m.copy_(start);
  };
  compare(state, x,
          [&] {
            fresh(0, memory);
            error_feedback_step(fused, memory, x, {}, p);
          },
          {{"x_unfused",
            [&] {
              fresh(1, ref);
              ref.add_(x);
              manual.compress(ref, {}, q);
              manual.decompress_add(q, -1.0, ref);
            }},
           {"x_torch",
            [&] {
              fresh(2, tm);
              base(tm, x);
            }}});
  state.counters["payload_bits"] = static_cast<double>(p.payload_bits());
}

void BM_ErrorFeedbackSign(benchmark::State& state) {
  ef_bench(state, CompressorSpec{.kind = "sign"}, [](at::Tensor& m, const at::Tensor& x) {
    m.add_(x);
    m.sub_(at::where(m.lt(0), -1.0f, 1.0f));
  });
}

void BM_ErrorFeedbackScaledSign(benchmark::State& state) {
  ef_bench(state, CompressorSpec{.kind = "scaled_sign"}, [](at::Tensor& m, const at::Tensor& x) {
    m.add_(x);
    m.sub_(at::where(m.lt(0), -1.0f, 1.0f) * (m.abs().sum() / static_cast<double>(m.numel())));
  });
}

void BM_ErrorFeedbackQsgd(benchmark::State& state) {
  ef_bench(state, CompressorSpec{.kind = "qsgd", .seed = 1, .settings = QsgdSettings{.levels = 15}},
           [](at::Tensor& m, const at::Tensor& x) {
             m.add_(x);
             at::Tensor norm = m.norm();
             at::Tensor y = m.abs() * (15 / norm);
             at::Tensor fl = y.floor();
             at::Tensor level = fl + at::rand_like(y).lt(y - fl).to(at::kFloat);
             m.sub_(m.sign() * level * (norm / 15));
           },
           /*reset_every=*/8);
}

void BM_ErrorFeedbackFp16(benchmark::State& state) {
  ef_bench(state, CompressorSpec{.kind = "fp16"}, [](at::Tensor& m, const at::Tensor& x) {
    m.add_(x);
    m.sub_(m.to(at::kHalf).to(at::kFloat));
  });
}

void BM_MajorityVote32(benchmark::State& state) {
  at::Tensor x = input(state.range(0));
  Compressor c(CompressorSpec{.kind = "sign"});
  std::vector<Payload> ps(32);
  auto gen = at::detail::createCPUGenerator(4);
  for (auto& p : ps) c.compress(at::randn({x.numel()}, gen, at::kFloat), {}, p);
  at::Tensor out = at::empty_like(x);
  compare(state, x, [&] { majority_vote(ps, out); }, std::vector<Yardstick>{});
}

// The gossip mixing step of a ring: x_i' = 1/2 x_i + 1/4 x_{i-1} + 1/4 x_{i+1}. Reads three
// inputs and writes one, so x_read (one input's read pass) is at most about 1/3.
void BM_WeightedSum3(benchmark::State& state) {
  std::vector<at::Tensor> xs;
  for (int j = 0; j < 3; ++j) xs.push_back(input(state.range(0)));
  const std::vector<double> w{0.5, 0.25, 0.25};
  at::Tensor out = at::empty_like(xs[0]);
  compare(state, xs[0], [&] { weighted_sum(out, xs, w); },
          [&] {
            at::mul_out(out, xs[0], 0.5);
            out.add_(xs[1], 0.25);
            out.add_(xs[2], 0.25);
          },
          true);
}

// A model's parameters, `bytes` in all: tensors of 16 to 256 K elements, log-uniform with a
// fixed seed (biases and norms next to convolution and linear weights), the last one cut
// to fit: 2 tensors at 4 KB, 4 at 1 MB, 545 at 64 MB, 2,293 at 256 MB.
std::vector<at::Tensor> parameter_list(std::int64_t bytes) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> log2_size(4.0, 18.0);
  auto gen = at::detail::createCPUGenerator(6);
  std::vector<at::Tensor> ts;
  for (std::int64_t left = bytes / 4; left > 0;) {
    const std::int64_t n = std::min(left, static_cast<std::int64_t>(std::exp2(log2_size(rng))));
    ts.push_back(at::randn({n}, gen, at::kFloat));
    left -= n;
  }
  return ts;
}

// Fused flatten (TensorBuffer::pack) against one copy_ per tensor into the buffer's views
// (what pack did before, and what the reference's TensorBuffer does) and at::cat_out.
// Reads and writes every byte once: x_memcpy near 1 is the ceiling.
// The buffer's tensors as views of it, in their shapes.
std::vector<at::Tensor> views_of(const TensorBuffer& tb) {
  std::vector<at::Tensor> views;
  for (std::size_t i = 0; i < tb.count(); ++i) views.push_back(tb.view(i));
  return views;
}

void BM_Flatten(benchmark::State& state) {
  std::vector<at::Tensor> ts = parameter_list(state.range(0));
  TensorBuffer tb(ts);
  const std::vector<at::Tensor> views = views_of(tb);
  compare(state, tb.buffer(), [&] { tb.pack(ts); },
          {{"x_per_tensor",
            [&] {
              for (std::size_t i = 0; i < ts.size(); ++i) views[i].copy_(ts[i]);
            }},
           {"x_torch", [&] { at::cat_out(tb.buffer(), ts); }}});
  state.counters["tensors"] = static_cast<double>(ts.size());
}

// Fused unflatten (TensorBuffer::unpack) against one copy_ per tensor from the views.
void BM_Unflatten(benchmark::State& state) {
  std::vector<at::Tensor> ts = parameter_list(state.range(0));
  TensorBuffer tb(ts);
  const std::vector<at::Tensor> views = views_of(tb);
  compare(state, tb.buffer(), [&] { tb.unpack(ts); },
          {{"x_per_tensor", [&] {
              for (std::size_t i = 0; i < ts.size(); ++i) ts[i].copy_(views[i]);
            }}});
  state.counters["tensors"] = static_cast<double>(ts.size());
}

// DTSIM_BENCH_SMOKE=1 in the environment (the test suite's KernelsBench.Smoke): every
// benchmark at 4 KB and 1 MB, one thread and all cores, two iterations each; the test
// checks that each runs and reports finite ratios, not how fast.
bool smoke_run() {
  const char* v = std::getenv("DTSIM_BENCH_SMOKE");
  return v != nullptr && std::string_view(v) == "1";
}

// 4 KB .. 256 MB, one thread and all cores.
void sizes(benchmark::internal::Benchmark* b) {
  if (smoke_run()) {
    for (std::int64_t bytes : {std::int64_t{4} << 10, std::int64_t{1} << 20})
      for (int threads : {1, 0}) b->Args({bytes, threads});
    b->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(2);
    return;
  }
  for (std::int64_t bytes : {std::int64_t{4} << 10, std::int64_t{256} << 10, std::int64_t{1} << 20,
                             std::int64_t{4} << 20, std::int64_t{16} << 20, std::int64_t{64} << 20,
                             std::int64_t{256} << 20})
    for (int threads : {1, 0}) b->Args({bytes, threads});
  b->UseManualTime()->Unit(benchmark::kMillisecond)->MinTime(0.2);
}

BENCHMARK(BM_TopK)->Apply(sizes);
void one_model(benchmark::internal::Benchmark* b) {
  b->Args({269722 * 4, 1})->Args({269722 * 4, 0})->UseManualTime()->Unit(benchmark::kMillisecond);
  if (smoke_run()) b->Iterations(2);
}

BENCHMARK(BM_TopKPerTensorResNet20)->Apply(one_model);
BENCHMARK(BM_Threshold)->Apply(sizes);
BENCHMARK(BM_RandomK)->Apply(sizes);
BENCHMARK(BM_Sign)->Apply(sizes);
BENCHMARK(BM_ScaledSign)->Apply(sizes);
BENCHMARK(BM_Qsgd)->Apply(sizes);
BENCHMARK(BM_QsgdBucket512)->Apply(sizes);
BENCHMARK(BM_QsgdBucket4096)->Apply(sizes);
BENCHMARK(BM_QsgdVsQuantizePerTensor)->Apply(sizes);
BENCHMARK(BM_Identity)->Apply(sizes);
BENCHMARK(BM_Fp16)->Apply(sizes);
BENCHMARK(BM_Bf16)->Apply(sizes);
BENCHMARK(BM_SignDecodeAdd)->Apply(sizes);
BENCHMARK(BM_QsgdDecodeAdd)->Apply(sizes);
BENCHMARK(BM_Fp16DecodeAdd)->Apply(sizes);
BENCHMARK(BM_TopKDecodeAdd)->Apply(sizes);
BENCHMARK(BM_Average4)->Apply(sizes);
BENCHMARK(BM_WeightedSum3)->Apply(sizes);
BENCHMARK(BM_Flatten)->Apply(sizes);
BENCHMARK(BM_Unflatten)->Apply(sizes);
BENCHMARK(BM_ScatterAdd)->Apply(sizes);
BENCHMARK(BM_MajorityVote8)->Apply(sizes);
BENCHMARK(BM_MajorityVote32)->Apply(sizes);
BENCHMARK(BM_ErrorFeedbackSign)->Apply(sizes);
BENCHMARK(BM_ErrorFeedbackScaledSign)->Apply(sizes);
BENCHMARK(BM_ErrorFeedbackQsgd)->Apply(sizes);
BENCHMARK(BM_ErrorFeedbackFp16)->Apply(sizes);

}  // namespace

// ===== CUDA kernels =========================================================================
// The same kernels on a CUDA tensor (the kernels dispatch by device), registered only when
// LibTorch sees a CUDA device, so a CPU machine's runs and `make regress` are unchanged.
// Each is timed with CUDA events on the current stream, as are its yardsticks on the same
// input on the same device, interleaved iteration by iteration:
//   x_copy  = time of a device-to-device copy of the input's bytes / kernel time
//             (1.0 = the kernel runs at the speed of copying its input once)
//   x_torch = time of the LibTorch computation on the device / kernel time (at::topk for
//             top-k; the reference's ops otherwise)
//   kernel_GBps = input bytes / median kernel time; copy_GBps likewise for the copy.
// Ratios of per-iteration medians. Args: input bytes (1 MB .. 256 MB). scripts/gpu-check.sh
// runs them with --benchmark_filter=Cuda. Without CUDA (a CPU LibTorch) this section still
// compiles, and DeviceTimer falls back to the host clock, unused.

#if DTSIM_TORCH_CUDA
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#endif

namespace {

// Seconds the work takes on the device's current stream.
class DeviceTimer {
 public:
#if DTSIM_TORCH_CUDA
  DeviceTimer() {
    check(cudaEventCreate(&begin_));
    check(cudaEventCreate(&end_));
  }
  ~DeviceTimer() {
    cudaEventDestroy(begin_);
    cudaEventDestroy(end_);
  }
  DeviceTimer(const DeviceTimer&) = delete;
  DeviceTimer& operator=(const DeviceTimer&) = delete;

  double time(const std::function<void()>& work) {
    const cudaStream_t stream = c10::cuda::getCurrentCUDAStream().stream();
    check(cudaEventRecord(begin_, stream));
    work();
    check(cudaEventRecord(end_, stream));
    check(cudaEventSynchronize(end_));
    float ms = 0.0f;
    check(cudaEventElapsedTime(&ms, begin_, end_));
    return 1e-3 * ms;
  }

 private:
  static void check(cudaError_t e) {
    if (e != cudaSuccess) throw std::runtime_error(std::string("CUDA event: ") + cudaGetErrorString(e));
  }
  cudaEvent_t begin_ = nullptr, end_ = nullptr;
#else
  double time(const std::function<void()>& work) {
    const auto a = Clock::now();
    work();
    return seconds(a, Clock::now());
  }
#endif
};

// Drawn on the device: a gigabyte of normal values takes seconds on the CPU's generator.
at::Tensor cuda_input(std::int64_t bytes) {
  return at::randn({bytes / 4}, at::TensorOptions().dtype(at::kFloat).device(at::kCUDA));
}

void compare_cuda(benchmark::State& state, const at::Tensor& x, const std::function<void()>& kernel,
                  const std::function<void()>& torch_version) {
  const std::int64_t bytes = x.numel() * static_cast<std::int64_t>(x.element_size());
  at::Tensor copy = at::empty_like(x);
  DeviceTimer timer;
  kernel();  // warm-up: workspaces grow, the allocator caches, libraries load their kernels
  if (torch_version) torch_version();
  copy.copy_(x);
  std::vector<double> t_kernel, t_copy, t_torch;
  for (auto _ : state) {
    const double k = timer.time(kernel);
    state.SetIterationTime(k);
    t_kernel.push_back(k);
    t_copy.push_back(timer.time([&] { copy.copy_(x); }));
    if (torch_version) t_torch.push_back(timer.time(torch_version));
  }
  state.SetBytesProcessed(state.iterations() * bytes);
  const double k = median(t_kernel);
  state.counters["x_copy"] = median(t_copy) / k;
  if (torch_version) state.counters["x_torch"] = median(t_torch) / k;
  state.counters["kernel_GBps"] = static_cast<double>(bytes) / k / 1e9;
  state.counters["copy_GBps"] = static_cast<double>(bytes) / median(t_copy) / 1e9;
}

void cuda_compressor_bench(benchmark::State& state, CompressorSpec spec, const std::function<void(const at::Tensor&)>& base) {
  const at::Tensor x = cuda_input(state.range(0));
  Compressor c(spec);
  Payload p;
  compare_cuda(state, x, [&] { c.compress(x, {}, p); }, base ? std::function<void()>([&] { base(x); }) : nullptr);
  state.counters["payload_bits"] = static_cast<double>(p.payload_bits());
}

at::Tensor cuda_torch_pack_signs(const at::Tensor& x) {
  const std::int64_t W = x.numel() / 32;
  const at::Tensor shifts = at::arange(32, x.options().dtype(at::kInt));
  return at::sign(x).lt(0).to(at::kInt).view({W, 32}).__lshift__(shifts).sum(1, false, at::kInt);
}

void BM_CudaTopK(benchmark::State& state) {
  cuda_compressor_bench(state, CompressorSpec{.kind = "top_k", .settings = TopKSettings{.ratio = 0.01}}, [](const at::Tensor& x) {
    const std::int64_t k = std::max<std::int64_t>(1, x.numel() / 100);
    benchmark::DoNotOptimize(at::topk(x.abs(), k, 0, true, /*sorted=*/false));
  });
}

void BM_CudaThreshold(benchmark::State& state) {
  cuda_compressor_bench(state, CompressorSpec{.kind = "threshold", .settings = ThresholdSettings{.threshold = 2.5}},
                        [](const at::Tensor& x) {
                          at::Tensor idx = x.abs().ge(2.5).nonzero();
                          benchmark::DoNotOptimize(x.index_select(0, idx.flatten()));
                        });
}

void BM_CudaRandomK(benchmark::State& state) {
  cuda_compressor_bench(state, CompressorSpec{.kind = "random_k", .seed = 1, .settings = RandomKSettings{.ratio = 0.01}},
                        [](const at::Tensor& x) {
                          const std::int64_t k = std::max<std::int64_t>(1, x.numel() / 100);
                          at::Tensor idx = at::randperm(x.numel(), x.options().dtype(at::kLong)).narrow(0, 0, k);
                          benchmark::DoNotOptimize(x.index_select(0, idx));
                        });
}

void BM_CudaSign(benchmark::State& state) {
  cuda_compressor_bench(state, CompressorSpec{.kind = "sign"},
                        [](const at::Tensor& x) { benchmark::DoNotOptimize(cuda_torch_pack_signs(x)); });
}

void BM_CudaScaledSign(benchmark::State& state) {
  cuda_compressor_bench(state, CompressorSpec{.kind = "scaled_sign"}, [](const at::Tensor& x) {
    benchmark::DoNotOptimize(x.abs().sum() / static_cast<double>(x.numel()));
    benchmark::DoNotOptimize(cuda_torch_pack_signs(x));
  });
}

void BM_CudaQsgd(benchmark::State& state) {
  cuda_compressor_bench(state, CompressorSpec{.kind = "qsgd", .seed = 1, .settings = QsgdSettings{.levels = 15}},
                        [](const at::Tensor& x) {
                          at::Tensor norm = x.norm();
                          at::Tensor y = x.abs() * (15 / norm);
                          at::Tensor fl = y.floor();
                          at::Tensor level = fl + at::rand_like(y).lt(y - fl).to(at::kFloat);
                          benchmark::DoNotOptimize(x.sign() * level * (norm / 15));
                        });
}

void BM_CudaFp16(benchmark::State& state) {
  cuda_compressor_bench(state, CompressorSpec{.kind = "fp16"},
                        [](const at::Tensor& x) { benchmark::DoNotOptimize(x.to(at::kHalf)); });
}

void BM_CudaSignDecodeAdd(benchmark::State& state) {
  const at::Tensor x = cuda_input(state.range(0));
  Compressor c(CompressorSpec{.kind = "scaled_sign"});
  Payload p;
  c.compress(x, {}, p);
  at::Tensor out = at::empty_like(x);
  compare_cuda(state, x, [&] { c.decompress_add(p, 0.5, out); },
               [&] { benchmark::DoNotOptimize(x.add(at::sign(x), 0.5)); });
}

void BM_CudaAverage4(benchmark::State& state) {
  std::vector<at::Tensor> xs;
  for (int j = 0; j < 4; ++j) xs.push_back(cuda_input(state.range(0)));
  at::Tensor out = at::empty_like(xs[0]);
  compare_cuda(state, xs[0], [&] { average(out, xs); }, [&] { benchmark::DoNotOptimize(at::stack(xs).mean(0)); });
}

void BM_CudaScatterAdd(benchmark::State& state) {
  at::Tensor dense = cuda_input(state.range(0));
  const std::int64_t m = std::max<std::int64_t>(1, dense.numel() / 100);
  const at::Tensor idx = at::randint(0, dense.numel(), {m}, dense.options().dtype(at::kLong));
  const at::Tensor val = at::randn({m}, dense.options());
  compare_cuda(state, dense, [&] { scatter_add(val, idx, dense); }, [&] { dense.index_add_(0, idx, val); });
}

void BM_CudaMajorityVote8(benchmark::State& state) {
  const at::Tensor x = cuda_input(state.range(0));
  Compressor c(CompressorSpec{.kind = "sign"});
  std::vector<Payload> ps(8);
  std::vector<at::Tensor> xs;
  for (auto& p : ps) {
    xs.push_back(at::randn_like(x));
    c.compress(xs.back(), {}, p);
  }
  at::Tensor out = at::empty_like(x);
  compare_cuda(state, x, [&] { majority_vote(ps, out); }, [&] {
    at::Tensor s = at::zeros_like(x);
    for (auto& t : xs) s.add_(at::sign(t));
    benchmark::DoNotOptimize(s.sign());
  });
}

void BM_CudaFlatten(benchmark::State& state) {
  std::vector<at::Tensor> ts = parameter_list(state.range(0));
  for (auto& t : ts) t = t.to(at::kCUDA);
  TensorBuffer tb(ts);
  // x_torch: at::cat_out, LibTorch's batched copy kernel.
  compare_cuda(state, tb.buffer(), [&] { tb.pack(ts); }, [&] { at::cat_out(tb.buffer(), ts); });
  state.counters["tensors"] = static_cast<double>(ts.size());
}

void cuda_sizes(benchmark::internal::Benchmark* b) {
  if (smoke_run()) {
    b->Arg(std::int64_t{1} << 20)->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(2);
    return;
  }
  for (std::int64_t bytes : {std::int64_t{1} << 20, std::int64_t{16} << 20, std::int64_t{64} << 20,
                             std::int64_t{256} << 20})
    b->Arg(bytes);
  // 0.05 s of kernel time per case: the yardsticks and the event waits come on top.
  b->UseManualTime()->Unit(benchmark::kMicrosecond)->MinTime(0.05);
}

// Registered at start-up only where a CUDA device is visible.
[[maybe_unused]] const bool cuda_benchmarks_registered = [] {
  if (!at::hasCUDA()) return false;
  const std::pair<const char*, void (*)(benchmark::State&)> cases[] = {
      {"BM_CudaTopK", BM_CudaTopK},       {"BM_CudaThreshold", BM_CudaThreshold},
      {"BM_CudaRandomK", BM_CudaRandomK}, {"BM_CudaSign", BM_CudaSign},
      {"BM_CudaScaledSign", BM_CudaScaledSign}, {"BM_CudaQsgd", BM_CudaQsgd},
      {"BM_CudaFp16", BM_CudaFp16},       {"BM_CudaSignDecodeAdd", BM_CudaSignDecodeAdd},
      {"BM_CudaAverage4", BM_CudaAverage4}, {"BM_CudaScatterAdd", BM_CudaScatterAdd},
      {"BM_CudaMajorityVote8", BM_CudaMajorityVote8}, {"BM_CudaFlatten", BM_CudaFlatten}};
  for (const auto& [name, fn] : cases) benchmark::RegisterBenchmark(name, fn)->Apply(cuda_sizes);
  return true;
}();

}  // namespace
