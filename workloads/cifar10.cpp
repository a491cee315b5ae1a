#include "workloads/cifar10.hpp"

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>

#include "config/json_input.hpp"

namespace dtsim::workloads {

namespace {

// The records of one file, checked: whole records only, labels 0..9.
std::vector<std::uint8_t> read_records(const std::filesystem::path& file) {
  if (!std::filesystem::exists(file))
    throw std::invalid_argument(fmt::format("CIFAR-10 file {} not found; set /workload/data_dir to the directory of "
                                            "data_batch_1.bin .. data_batch_5.bin and test_batch.bin",
                                            file.string()));
  if (const auto why = config::not_a_regular_file(file)) throw std::invalid_argument(fmt::format("{} {}", file.string(), *why));
  const auto size = static_cast<std::int64_t>(std::filesystem::file_size(file));
  if (size % Cifar10::kRecordBytes != 0)
    throw std::invalid_argument(fmt::format("{}: truncated record at byte offset {} (records are {} bytes, the file has {})",
                                            file.string(), size / Cifar10::kRecordBytes * Cifar10::kRecordBytes,
                                            Cifar10::kRecordBytes, size));
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(size));
  std::ifstream in(file, std::ios::binary);
  if (!in.read(reinterpret_cast<char*>(bytes.data()), size))
    throw std::invalid_argument(fmt::format("{}: read error", file.string()));
  for (std::int64_t offset = 0; offset < size; offset += Cifar10::kRecordBytes)
    if (bytes[static_cast<std::size_t>(offset)] > 9)
      throw std::invalid_argument(fmt::format("{}: byte offset {}: expected a label 0..9, got {}", file.string(), offset,
                                              bytes[static_cast<std::size_t>(offset)]));
  return bytes;
}

// The records of `files`, in order, cut to the first `keep` (0: all), as normalised
// images and labels.
std::pair<at::Tensor, at::Tensor> load_split(const std::filesystem::path& dir, const std::vector<std::string>& files,
                                             std::int64_t keep, const char* field) {
  std::vector<std::uint8_t> all;
  for (const auto& name : files) {
    const auto bytes = read_records(dir / name);
    all.insert(all.end(), bytes.begin(), bytes.end());
  }
  const std::int64_t n = static_cast<std::int64_t>(all.size()) / Cifar10::kRecordBytes;
  if (keep < 0 || keep > n)
    throw std::invalid_argument(fmt::format("/workload/{}: expected 0 (all) to {}, got {}", field, n, keep));
  const std::int64_t count = keep == 0 ? n : keep;
  const auto records = at::from_blob(all.data(), {n, Cifar10::kRecordBytes}, at::kByte).narrow(0, 0, count);
  const auto labels = records.select(1, 0).to(at::kLong);
  auto images = records.narrow(1, 1, 3 * 32 * 32).to(at::kFloat).div_(255.0).reshape({count, 3, 32, 32});
  const auto mean = at::tensor({Cifar10::kMean[0], Cifar10::kMean[1], Cifar10::kMean[2]}, at::kFloat).view({1, 3, 1, 1});
  const auto std = at::tensor({Cifar10::kStd[0], Cifar10::kStd[1], Cifar10::kStd[2]}, at::kFloat).view({1, 3, 1, 1});
  images.sub_(mean).div_(std);
  return {images.contiguous(), labels.clone()};
}

}  // namespace

std::shared_ptr<const LabelledData> Cifar10::load(const std::string& dir, std::int64_t train_samples,
                                                  std::int64_t test_samples) {
  auto data = std::make_shared<LabelledData>();
  std::tie(data->train_x, data->train_y) =
      load_split(dir, {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin", "data_batch_5.bin"},
                 train_samples, "train_samples");
  std::tie(data->test_x, data->test_y) = load_split(dir, {"test_batch.bin"}, test_samples, "test_samples");
  data->classes = 10;
  return data;
}

}  // namespace dtsim::workloads
