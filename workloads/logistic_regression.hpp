// Binary logistic regression on a seeded synthetic dataset, partitioned across ranks.
//
// Data: x ~ N(0, I_d); a hidden w* ~ N(0, 9 I_d / d) (so |x.w*| is about 3) and b* = 0.1; labels
// y ~ Bernoulli(sigmoid(x.w* + b*)). Every process generates the same dataset from the
// seed, so emulated and live runs see identical data.
// Model: p(y=1|x) = sigmoid(x.w + b); loss = mean over the batch of
// softplus(z) - y z with z = x.w + b; gradients in closed form:
// dw = X^T (sigmoid(z) - y) / B, db = mean(sigmoid(z) - y).
// Partition "iid": a seeded permutation of the samples cut into contiguous shards
// (sizes differ by at most one); "sorted": samples sorted by label, then cut (non-iid).
// Each rank draws mini-batches by reshuffling its shard every local epoch, from a
// generator seeded by (seed, rank).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "workloads/workload.hpp"

namespace dtsim::workloads {

struct LogisticRegressionSpec {
  std::int64_t samples = 4096;
  std::int64_t features = 32;
  std::int64_t batch_size = 32;
  std::string partition = "iid";  // "iid" or "sorted"
};

// The full dataset, shared by all ranks of an emulated run.
struct SyntheticDataset {
  at::Tensor x;  // [samples, features] fp32
  at::Tensor y;  // [samples] fp32 in {0, 1}
  static std::shared_ptr<const SyntheticDataset> generate(const LogisticRegressionSpec& spec, std::uint64_t seed);
};

std::unique_ptr<Workload> make_logistic_regression(const LogisticRegressionSpec& spec,
                                                   std::shared_ptr<const SyntheticDataset> data, std::uint64_t seed,
                                                   int rank, int ranks);

}  // namespace dtsim::workloads
