#include "workloads/fashion_mnist.hpp"

#include <ATen/CPUGeneratorImpl.h>

#include <filesystem>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "workloads/idx_reader.hpp"

namespace dtsim::workloads {

namespace {

std::string find_file(const std::string& dir, const std::string& stem) {
  const std::filesystem::path plain = std::filesystem::path(dir) / stem;
  if (std::filesystem::is_regular_file(plain)) return plain.string();
  const std::filesystem::path gz = std::filesystem::path(dir) / (stem + ".gz");
  if (std::filesystem::is_regular_file(gz)) return gz.string();
  throw std::invalid_argument(fmt::format("Fashion-MNIST file {} not found (nor {}.gz); set /workload/data_dir",
                                          plain.string(), plain.string()));
}

// One split: images normalised to [N, 1, 28, 28] fp32, labels int64.
std::pair<at::Tensor, at::Tensor> load_split(const std::string& dir, const std::string& prefix, std::int64_t keep,
                                             const char* field) {
  const std::string image_path = find_file(dir, prefix + "-images-idx3-ubyte");
  const std::string label_path = find_file(dir, prefix + "-labels-idx1-ubyte");
  auto images = read_idx(image_path);
  auto labels = read_idx(label_path);
  if (images.dim() != 3 || images.size(1) != 28 || images.size(2) != 28)
    throw std::invalid_argument(
        fmt::format("{}: expected images of dimensions N x 28 x 28, got {}", image_path, fmt::join(images.sizes(), " x ")));
  if (labels.dim() != 1)
    throw std::invalid_argument(fmt::format("{}: expected labels of dimension N, got {} dimensions", label_path, labels.dim()));
  if (labels.size(0) != images.size(0))
    throw std::invalid_argument(fmt::format("{}: expected {} labels (as many as images in {}), got {}", label_path,
                                            images.size(0), image_path, labels.size(0)));
  if (labels.numel() > 0 && labels.max().item<int>() > 9)
    throw std::invalid_argument(
        fmt::format("{}: expected labels 0..9, got {}", label_path, labels.max().item<int>()));
  const std::int64_t n = images.size(0);
  if (keep < 0 || keep > n)
    throw std::invalid_argument(fmt::format("/workload/{}: expected 0 (all) to {}, got {}", field, n, keep));
  const std::int64_t count = keep == 0 ? n : keep;
  auto x = images.narrow(0, 0, count).to(at::kFloat).div_(255.0).sub_(FashionMnist::kMean).div_(FashionMnist::kStd);
  return {x.reshape({count, 1, 28, 28}).contiguous(), labels.narrow(0, 0, count).to(at::kLong)};
}

}  // namespace

std::shared_ptr<const FashionMnist> FashionMnist::load(const std::string& dir, std::int64_t train_samples,
                                                       std::int64_t test_samples) {
  auto data = std::make_shared<FashionMnist>();
  std::tie(data->train_x, data->train_y) = load_split(dir, "train", train_samples, "train_samples");
  std::tie(data->test_x, data->test_y) = load_split(dir, "t10k", test_samples, "test_samples");
  data->classes = 10;
  return data;
}

at::Tensor partition_indices(const at::Tensor& labels, const std::string& partition, std::uint64_t seed, int rank,
                             int ranks) {
  const std::int64_t n = labels.size(0);
  if (ranks < 1 || rank < 0 || rank >= ranks)
    throw std::invalid_argument(fmt::format("partition: rank {} of {} ranks", rank, ranks));
  if (n < ranks) throw std::invalid_argument(fmt::format("partition: {} samples for {} ranks", n, ranks));
  at::Tensor order;
  if (partition == "iid") {
    order = at::randperm(n, at::detail::createCPUGenerator(seed ^ 0x5eed5eedULL), at::kLong);
  } else if (partition == "by_label") {
    order = std::get<1>(labels.sort(/*stable=*/true, 0, false));
  } else {
    throw std::invalid_argument(
        fmt::format("/workload/partition: expected \"iid\" or \"by_label\", got \"{}\"", partition));
  }
  const std::int64_t base = n / ranks, extra = n % ranks;
  const std::int64_t begin = rank * base + std::min<std::int64_t>(rank, extra);
  const std::int64_t count = base + (rank < extra ? 1 : 0);
  return order.narrow(0, begin, count).clone();
}

}  // namespace dtsim::workloads
