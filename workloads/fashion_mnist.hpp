// Fashion-MNIST: 28x28 grey-scale images of 10 clothing classes, 60,000 for training and
// 10,000 for testing, read from the IDX files (gzip-compressed or plain) of Debian's
// dataset-fashion-mnist package (/usr/share/datasets/fashion-mnist).
//
// Pixels are normalised to (x / 255 - kMean) / kStd with Fashion-MNIST's training-set
// mean and standard deviation; images are [N, 1, 28, 28] fp32, labels [N] int64 in 0..9.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <string>

#include "workloads/labelled_data.hpp"

namespace dtsim::workloads {

// The data source "fashion_mnist" (sources/fashion_mnist.cpp) reads it.
struct FashionMnist : LabelledData {
  static constexpr double kMean = 0.2860;
  static constexpr double kStd = 0.3530;

  // Reads <dir>/{train,t10k}-{images-idx3,labels-idx1}-ubyte, each as the plain file when
  // it exists, else with a .gz suffix. train_samples / test_samples > 0 keep only the first
  // N images (0: all). Throws std::invalid_argument naming the file that is missing or
  // malformed (wrong magic, dimensions other than N x 28 x 28 / N, image and label counts
  // that differ, a label above 9) or the field that is out of range.
  static std::shared_ptr<const FashionMnist> load(const std::string& dir, std::int64_t train_samples = 0,
                                                  std::int64_t test_samples = 0);
};

// The sample indices of rank `rank` of `ranks` over a dataset with `labels` ([N] int64):
// "iid": a permutation seeded by `seed`, cut into contiguous shards; "by_label": the
// samples sorted (stably) by label, then cut, so each rank sees few classes (non-iid).
// Shard sizes differ by at most one. Throws std::invalid_argument on an unknown partition
// or fewer samples than ranks.
at::Tensor partition_indices(const at::Tensor& labels, const std::string& partition, std::uint64_t seed, int rank,
                             int ranks);

}  // namespace dtsim::workloads
