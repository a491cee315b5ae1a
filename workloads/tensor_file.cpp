#include "workloads/tensor_file.hpp"

#include <torch/csrc/jit/serialization/pickle.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "config/json_input.hpp"

namespace dtsim::workloads {

namespace {

std::string first_line(const std::string& text) { return config::one_line(text.substr(0, text.find('\n'))); }

const at::Tensor* find_tensor(const c10::impl::GenericDict& dict, const std::string& key, const std::string& path) {
  for (const auto& item : dict) {
    if (!item.key().isString() || item.key().toStringRef() != key) continue;
    if (!item.value().isTensor())
      throw std::invalid_argument(fmt::format("{}: expected \"{}\" to be a tensor, got {}", path, key,
                                              item.value().tagKind()));
    return &item.value().toTensor();
  }
  return nullptr;
}

// One split's samples and labels, checked and converted.
std::pair<at::Tensor, at::Tensor> split(const at::Tensor& x_in, const at::Tensor& y_in, const std::string& xs,
                                        const std::string& ys, const std::string& path) {
  if (!at::isFloatingType(x_in.scalar_type()) || (x_in.dim() != 3 && x_in.dim() != 4) || x_in.size(0) < 1)
    throw std::invalid_argument(fmt::format("{}: expected \"{}\" of floating samples [N, C, H, W] or [N, H, W], got {} "
                                            "{}",
                                            path, xs, c10::toString(x_in.scalar_type()), fmt::join(x_in.sizes(), " x ")));
  if (y_in.scalar_type() != at::kLong || y_in.dim() != 1 || y_in.size(0) != x_in.size(0))
    throw std::invalid_argument(fmt::format("{}: expected \"{}\" of {} int64 labels, got {} {}", path, ys, x_in.size(0),
                                            c10::toString(y_in.scalar_type()), fmt::join(y_in.sizes(), " x ")));
  if (y_in.min().item<std::int64_t>() < 0)
    throw std::invalid_argument(fmt::format("{}: expected labels >= 0 in \"{}\", got {}", path, ys, y_in.min().item<std::int64_t>()));
  auto x = x_in.to(at::kCPU, at::kFloat).contiguous();
  if (x.dim() == 3) x = x.unsqueeze(1);
  if (!at::isfinite(x).all().item<bool>())
    throw std::invalid_argument(fmt::format("{}: expected finite samples in \"{}\"", path, xs));
  return {x, y_in.to(at::kCPU).contiguous()};
}

}  // namespace

std::shared_ptr<const LabelledData> read_tensor_file(const std::string& path) {
  if (const auto why = config::not_a_regular_file(path)) throw std::invalid_argument(fmt::format("{} {}", path, *why));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::invalid_argument(fmt::format("{}: cannot read", path));
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  c10::IValue value;
  try {
    value = torch::jit::pickle_load(bytes);
  } catch (const std::exception& e) {
    throw std::invalid_argument(fmt::format("{}: expected a file written by torch.save, got one it cannot read ({})", path,
                                            first_line(e.what())));
  }
  if (!value.isGenericDict())
    throw std::invalid_argument(
        fmt::format("{}: expected a dict of tensors (torch.save({{\"x\": X, \"y\": Y}})), got {}", path, value.tagKind()));
  const auto dict = value.toGenericDict();
  const auto* x = find_tensor(dict, "x", path);
  const auto* y = find_tensor(dict, "y", path);
  if (!x || !y) throw std::invalid_argument(fmt::format("{}: expected tensors \"x\" and \"y\" in the dict", path));
  auto data = std::make_shared<LabelledData>();
  std::tie(data->train_x, data->train_y) = split(*x, *y, "x", "y", path);
  const auto* tx = find_tensor(dict, "test_x", path);
  const auto* ty = find_tensor(dict, "test_y", path);
  if ((tx == nullptr) != (ty == nullptr))
    throw std::invalid_argument(fmt::format("{}: expected both \"test_x\" and \"test_y\", or neither", path));
  std::int64_t top = data->train_y.max().item<std::int64_t>();
  if (tx) {
    std::tie(data->test_x, data->test_y) = split(*tx, *ty, "test_x", "test_y", path);
    if (data->test_x.sizes().slice(1) != data->train_x.sizes().slice(1))
      throw std::invalid_argument(fmt::format("{}: expected test samples of {} like the training ones, got {}", path,
                                              fmt::join(data->train_x.sizes().slice(1), " x "),
                                              fmt::join(data->test_x.sizes().slice(1), " x ")));
    top = std::max(top, data->test_y.max().item<std::int64_t>());
  }
  data->classes = std::max<std::int64_t>(2, top + 1);
  return data;
}

}  // namespace dtsim::workloads
