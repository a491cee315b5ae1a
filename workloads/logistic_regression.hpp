// Binary logistic regression on a binary data source (data_source.hpp: the seeded
// synthetic set of sources/synthetic.cpp, or a LIBSVM file), partitioned across ranks.
//
// Model: p(y=1|x) = sigmoid(x.w + b); loss = mean over the batch of
// softplus(z) - y z with z = x.w + b; gradients in closed form:
// dw = X^T (sigmoid(z) - y) / B, db = mean(sigmoid(z) - y).
// Partition "iid": a seeded permutation of the samples cut into contiguous shards
// (sizes differ by at most one); "sorted": samples sorted by label, then cut (non-iid).
// Each rank draws mini-batches by reshuffling its shard every local epoch, from a
// generator seeded by (seed, rank).
// Full batch (batch_size 0, "full" in a scenario): every step uses the rank's whole shard
// in shard order, never reshuffled; with the zero-initialised parameters the run is then
// exactly reproducible and each step's gradient is the shard's full gradient.
// The LIBSVM reader below is the data source "libsvm"'s (sources/libsvm.cpp).
#pragma once

#include <cstdint>
#include <istream>
#include <memory>
#include <string>

#include "workloads/labelled_data.hpp"
#include "workloads/workload.hpp"

namespace dtsim::workloads {

struct LogisticRegressionSpec {
  std::int64_t batch_size = 32;   // 0: full batch (the whole shard, in shard order)
  std::string partition = "iid";  // "iid" or "sorted"
};

// The full dataset, shared by all ranks of an emulated run.
struct SyntheticDataset {
  at::Tensor x;  // [samples, features] fp32
  at::Tensor y;  // [samples] fp32 in {0, 1}
};

// The model's view of a binary data source's data (data_source.hpp): x as is, labels as
// fp32 0 / 1.
std::shared_ptr<const SyntheticDataset> logistic_dataset(const LabelledData& data);

// LIBSVM text: one sample a line, `label index:value index:value ...`, indices 1-based and
// ascending (absent ones are 0); labels +1 / 1 -> 1, -1 / 0 -> 0; everything after '#' and
// blank lines ignored. features = the largest index when `features` is 0, else `features`
// (a larger index is an error). Malformed input throws std::invalid_argument
// "<name>:<line>: expected ..., got ...". `name` is only used in messages.
// The data is dense (samples x features float32): a matrix over 1 TiB is refused, one that
// cannot be allocated is an std::invalid_argument too.
std::shared_ptr<const SyntheticDataset> parse_libsvm(std::istream& in, const std::string& name, std::int64_t features = 0);
std::shared_ptr<const SyntheticDataset> load_libsvm(const std::string& path, std::int64_t features = 0);

// What parse_libsvm / load_libsvm would return, as a shape: the same checks and messages
// for every line, without building the data (the scenario parser's view of a file).
struct LibsvmShape {
  std::int64_t samples = 0;
  std::int64_t features = 0;
};
LibsvmShape libsvm_shape(std::istream& in, const std::string& name, std::int64_t features = 0);
LibsvmShape libsvm_shape(const std::string& path, std::int64_t features = 0);

std::unique_ptr<Workload> make_logistic_regression(const LogisticRegressionSpec& spec,
                                                   std::shared_ptr<const SyntheticDataset> data, std::uint64_t seed,
                                                   int rank, int ranks);

}  // namespace dtsim::workloads
