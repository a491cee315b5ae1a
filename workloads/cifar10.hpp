// CIFAR-10 in its binary format (cifar-10-batches-bin: data_batch_1.bin .. data_batch_5.bin
// for training, test_batch.bin for testing; each record one label byte 0..9, then the
// 32 x 32 red, green and blue planes, row-major, 3,073 bytes). The data set cannot be
// downloaded by dtsim: users put the extracted files in a directory and name it
// (/workload/data_dir).
//
// Pixels are normalised per channel with the training set's mean and standard deviation
// (the usual constants, computed over the 50,000 training images); images are
// [N, 3, 32, 32] fp32, labels [N] int64.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "workloads/labelled_data.hpp"

namespace dtsim::workloads {

struct Cifar10 {
  static constexpr std::int64_t kRecordBytes = 1 + 3 * 32 * 32;
  static constexpr double kMean[3] = {0.4914, 0.4822, 0.4465};
  static constexpr double kStd[3] = {0.2470, 0.2435, 0.2616};

  // The five training files then the test file under `dir`; train_samples / test_samples
  // > 0 keep only the first N records (0: all). Throws std::invalid_argument naming the
  // file and byte offset of what is wrong (a missing file, a truncated record, a label
  // above 9) or the field that is out of range.
  static std::shared_ptr<const LabelledData> load(const std::string& dir, std::int64_t train_samples = 0,
                                                  std::int64_t test_samples = 0);
};

}  // namespace dtsim::workloads
