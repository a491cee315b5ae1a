// The kernels' promise: no allocation per call on the hot path. Once a Compressor's
// workspaces and a Payload's storage have grown, compress, decompress(_add), error
// feedback and the aggregation kernels allocate nothing: no tensor storage (c10's CPU
// allocator takes it from posix_memalign) and no C++ heap object (operator new: a
// tensor view is one, and so is a std::vector that grows).
//
// This binary replaces both functions with counting ones, so it is a test executable of
// its own, and stays out of the sanitizer run (ASan intercepts the same functions).
#include <gtest/gtest.h>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <dlfcn.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <string>
#include <vector>

#include "kernels/aggregation.hpp"
#include "kernels/compressor.hpp"
#include "kernels/error_feedback.hpp"
#include "kernels/majority_vote.hpp"
#include "kernels/tensor_buffer.hpp"
#include "kernels/codecs/one_bit.hpp"
#include "kernels/codecs/qsgd.hpp"
#include "kernels/codecs/random_k.hpp"
#include "kernels/codecs/terngrad.hpp"
#include "kernels/codecs/threshold.hpp"
#include "kernels/codecs/top_k.hpp"

namespace {
std::atomic<long> g_allocations{0};   // both kinds
std::atomic<long> g_aligned{0};       // posix_memalign alone (tensor storage)
std::atomic<bool> g_counting{false};

void count() {
  if (g_counting.load(std::memory_order_relaxed)) g_allocations.fetch_add(1, std::memory_order_relaxed);
}
}  // namespace

// The replacements pair with each other (malloc / free); GCC 11+ sees only the free.
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 11
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
void* operator new(std::size_t n) {
  count();
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) { return operator new(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 11
#pragma GCC diagnostic pop
#endif

extern "C" int posix_memalign(void** p, std::size_t alignment, std::size_t n) {
  using Real = int (*)(void**, std::size_t, std::size_t);
  static const Real real = reinterpret_cast<Real>(dlsym(RTLD_NEXT, "posix_memalign"));
  if (real == nullptr) std::abort();  // no C library's posix_memalign behind this one
  if (g_counting.load(std::memory_order_relaxed)) g_aligned.fetch_add(1, std::memory_order_relaxed);
  count();
  return real(p, alignment, n);
}

namespace dtsim::kernels {
namespace {

// Allocations made (on any thread) while `work` runs.
template <class Work>
long allocations_in(Work&& work) {
  g_allocations = 0;
  g_aligned = 0;
  g_counting = true;
  work();
  g_counting = false;
  return g_allocations.load();
}

// The counters see what they should: a tensor is a storage (posix_memalign, through c10's
// CPU allocator) and heap objects, a growing vector is a heap object. Else every zero
// below would prove nothing.
TEST(NoAllocation, TheCountersSeeTensorsAndVectors) {
  EXPECT_GE(allocations_in([] { at::Tensor t = at::empty({1000}); }), 2);
  EXPECT_GE(g_aligned.load(), 1) << "tensor storage was not counted: posix_memalign is not intercepted";
  EXPECT_GE(allocations_in([] {
              std::vector<int> v;
              v.push_back(1);
            }),
            1);
}

struct Case {
  std::string name;
  CompressorSpec spec;
};

std::vector<Case> cases() {
  return {{"identity", {.kind = "identity"}},
          {"top_k", {.kind = "top_k", .settings = TopKSettings{.ratio = 0.01}}},
          {"random_k", {.kind = "random_k", .seed = 3, .settings = RandomKSettings{.ratio = 0.01}}},
          {"random_k shared seed", {.kind = "random_k", .seed = 3, .settings = RandomKSettings{.ratio = 0.01, .shared_seed = true}}},
          {"threshold", {.kind = "threshold", .settings = ThresholdSettings{.threshold = 2.0}}},
          {"sign", {.kind = "sign"}},
          {"scaled_sign", {.kind = "scaled_sign"}},
          {"qsgd", {.kind = "qsgd", .seed = 1, .settings = QsgdSettings{.levels = 15}}},
          {"qsgd bucketed", {.kind = "qsgd", .seed = 1, .settings = QsgdSettings{.levels = 15, .bucket = 512}}},
          {"fp16", {.kind = "fp16"}},
          {"bf16", {.kind = "bf16"}},
          {"one_bit", {.kind = "one_bit"}},
          {"one_bit bucketed", {.kind = "one_bit", .settings = OneBitSettings{.bucket = 512}}},
          {"terngrad", {.kind = "terngrad", .seed = 1}},
          {"terngrad bucketed", {.kind = "terngrad", .seed = 1, .settings = TernGradSettings{.bucket = 512}}},
          {"natural", {.kind = "natural", .seed = 1}}};
}

// A model's flat gradient (three tensors, 300 K elements: several threads' worth), on one
// thread and on two.
TEST(NoAllocation, CompressorsOnceGrown) {
  const int saved = at::get_num_threads();
  auto gen = at::detail::createCPUGenerator(21);
  const at::Tensor x = at::randn({300000}, gen, at::kFloat);
  const std::vector<std::int64_t> segments{100000, 150000, 50000};
  at::Tensor dense = at::zeros({300000});
  at::Tensor memory = at::randn({300000}, gen, at::kFloat) * 0.1;
  for (int threads : {1, 2})
  for (const auto& c : cases()) {
    at::set_num_threads(threads);
    Compressor compressor(c.spec);
    Payload p;
    const auto step = [&] {
      compressor.compress(x, segments, p);
      compressor.decompress(p, dense);
      compressor.decompress_add(p, 0.5, dense);
      error_feedback_step(compressor, memory, x, segments, p);
    };
    // Five steps to grow: error feedback's memory drifts, and top-k's candidate count
    // with it (its buffers grow to twice the largest count seen).
    for (int i = 0; i < 5; ++i) step();
    EXPECT_EQ(allocations_in([&] {
                for (int i = 0; i < 3; ++i) step();
              }),
              0)
        << c.name << " on " << threads << " threads";
  }
  at::set_num_threads(saved);
}

TEST(NoAllocation, AggregationKernels) {
  auto gen = at::detail::createCPUGenerator(22);
  std::vector<at::Tensor> xs;
  for (int j = 0; j < 5; ++j) xs.push_back(at::randn({200000}, gen, at::kFloat));
  const std::vector<double> w{0.5, 0.125, 0.125, 0.125, 0.125};
  at::Tensor out = at::empty({200000});
  const at::Tensor idx = at::randint(0, 200000, {2000}, gen, at::kLong);
  const at::Tensor val = at::randn({2000}, gen, at::kFloat);
  Compressor sign(CompressorSpec{.kind = "sign"});
  std::vector<Payload> signs(5);
  for (int j = 0; j < 5; ++j) sign.compress(xs[static_cast<std::size_t>(j)], {}, signs[static_cast<std::size_t>(j)]);
  std::vector<at::Tensor> parts{at::randn({3, 1000}, gen, at::kFloat), at::randn({50000}, gen, at::kFloat),
                                at::randn({7}, gen, at::kFloat)};
  TensorBuffer flat(parts);
  const auto step = [&] {
    weighted_sum(out, xs, w);
    average(out, xs);
    scatter_add(val, idx, out);
    majority_vote(signs, out);
    flat.pack(parts);
    flat.unpack(parts);
  };
  step();
  EXPECT_EQ(allocations_in([&] {
              for (int i = 0; i < 3; ++i) step();
            }),
            0);
}

}  // namespace
}  // namespace dtsim::kernels
