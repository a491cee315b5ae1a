#include "workloads/text_data.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <stdexcept>
#include <system_error>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "workloads/tensor_file.hpp"

namespace dtsim::workloads {

namespace fs = std::filesystem;

namespace {

std::string read_all(const fs::path& file, const std::string& where) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw std::invalid_argument(fmt::format("{}: cannot read {}", where, file.string()));
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw std::invalid_argument(fmt::format("{}: cannot read {}", where, file.string()));
  return bytes;
}

bool hidden(const fs::path& p) {
  const auto name = p.filename().string();
  return !name.empty() && name[0] == '.';
}

// The held-out part of a file of `size` bytes.
std::int64_t held_out(std::int64_t size, double holdout) {
  return static_cast<std::int64_t>(std::floor(holdout * static_cast<double>(size)));
}

void check_holdout(const std::string& path, double holdout) {
  if (!(holdout >= 0.0 && holdout < 1.0))
    throw std::invalid_argument(fmt::format("{}: holdout {} is not in [0, 1)", path, holdout));
}

// The candidate files of `path` in path order, each once by canonical path.
std::vector<fs::path> candidates(const std::string& path) {
  std::error_code ec;
  const auto status = fs::status(path, ec);
  if (ec || !fs::exists(status))
    throw std::invalid_argument(fmt::format("{}: no such file or folder{}", path,
                                            path == kFortunesPath ? " (apt-get install fortunes)" : ""));
  if (fs::is_regular_file(status)) return {fs::path(path)};
  if (!fs::is_directory(status))
    throw std::invalid_argument(fmt::format("{}: expected a text file or a folder of them", path));
  std::vector<fs::path> found;
  fs::recursive_directory_iterator it(path, fs::directory_options::skip_permission_denied, ec), end;
  if (ec) throw std::invalid_argument(fmt::format("{}: cannot list the folder ({})", path, ec.message()));
  for (; it != end; it.increment(ec)) {
    if (ec) throw std::invalid_argument(fmt::format("{}: cannot list the folder ({})", path, ec.message()));
    if (hidden(it->path())) {
      if (it->is_directory(ec)) it.disable_recursion_pending();
      continue;
    }
    if (it->is_regular_file(ec)) found.push_back(it->path());
  }
  std::sort(found.begin(), found.end());
  std::set<fs::path> seen;
  std::vector<fs::path> unique;
  for (const auto& f : found) {
    const auto canonical = fs::canonical(f, ec);
    if (!ec && seen.insert(canonical).second) unique.push_back(f);
  }
  return unique;
}

struct Corpus {
  TextFiles files;
  std::vector<std::string> texts;  // the files' bytes (kept only when reading)
};

Corpus scan(const std::string& path, double holdout, bool keep) {
  check_holdout(path, holdout);
  Corpus c;
  for (const auto& file : candidates(path)) {
    auto bytes = read_all(file, path);
    if (bytes.empty() || std::memchr(bytes.data(), '\0', bytes.size()) != nullptr) continue;  // empty, or binary
    const auto size = static_cast<std::int64_t>(bytes.size());
    c.files.files.push_back(file.string());
    c.files.bytes.push_back(size);
    c.files.test_bytes += held_out(size, holdout);
    c.files.train_bytes += size - held_out(size, holdout);
    if (keep) c.texts.push_back(std::move(bytes));
  }
  if (c.files.files.empty())
    throw std::invalid_argument(fmt::format("{}: expected text, found only empty or binary (NUL-holding) files", path));
  if (c.files.train_bytes < 2)
    throw std::invalid_argument(fmt::format("{}: {} bytes of training text, expected at least 2", path,
                                            c.files.train_bytes));
  return c;
}

// LabelledData views of one stream: x bytes 0 .. N-2, y bytes 1 .. N-1.
std::pair<at::Tensor, at::Tensor> shifted(const at::Tensor& stream) {
  const auto n = stream.numel();
  return {stream.narrow(0, 0, n - 1), stream.narrow(0, 1, n - 1)};
}

}  // namespace

TextFiles list_text_files(const std::string& path, double holdout) { return scan(path, holdout, false).files; }

std::shared_ptr<const LabelledData> read_text_corpus(const std::string& path, double holdout) {
  const auto c = scan(path, holdout, true);
  auto train = at::empty({c.files.train_bytes}, at::kByte);
  auto test = at::empty({c.files.test_bytes}, at::kByte);
  auto* tr = train.data_ptr<std::uint8_t>();
  auto* te = test.data_ptr<std::uint8_t>();
  for (std::size_t f = 0; f < c.texts.size(); ++f) {
    const auto& text = c.texts[f];
    const auto size = static_cast<std::int64_t>(text.size());
    const auto keep = size - held_out(size, holdout);
    std::memcpy(tr, text.data(), static_cast<std::size_t>(keep));
    std::memcpy(te, text.data() + keep, static_cast<std::size_t>(size - keep));
    tr += keep;
    te += size - keep;
  }
  auto data = std::make_shared<LabelledData>();
  std::tie(data->train_x, data->train_y) = shifted(train);
  if (test.numel() >= 2) std::tie(data->test_x, data->test_y) = shifted(test);
  data->classes = 256;
  return data;
}

namespace {

std::pair<at::Tensor, at::Tensor> token_split(const at::Tensor& x, const at::Tensor& y, const std::string& xs,
                                              const std::string& ys, const std::string& path) {
  auto check = [&](const at::Tensor& t, const std::string& key) {
    if (!at::isIntegralType(t.scalar_type(), /*includeBool=*/false) || t.dim() != 2 || t.size(0) < 1 || t.size(1) < 1)
      throw std::invalid_argument(fmt::format("{}: expected \"{}\" of integer tokens [N, T], got {} {}", path, key,
                                              c10::toString(t.scalar_type()), fmt::join(t.sizes(), " x ")));
  };
  check(x, xs);
  check(y, ys);
  if (x.sizes() != y.sizes())
    throw std::invalid_argument(fmt::format("{}: expected \"{}\" of {} like \"{}\", got {}", path, ys,
                                            fmt::join(x.sizes(), " x "), xs, fmt::join(y.sizes(), " x ")));
  auto xl = x.to(at::kCPU, at::kLong).contiguous(), yl = y.to(at::kCPU, at::kLong).contiguous();
  for (const auto& [t, key] : {std::pair{xl, xs}, std::pair{yl, ys}})
    if (t.min().item<std::int64_t>() < 0)
      throw std::invalid_argument(
          fmt::format("{}: expected tokens >= 0 in \"{}\", got {}", path, key, t.min().item<std::int64_t>()));
  return {xl, yl};
}

}  // namespace

std::shared_ptr<const LabelledData> read_token_file(const std::string& path) {
  const auto dict = read_saved_dict(path);
  const auto* x = find_saved_tensor(dict, "x", path);
  const auto* y = find_saved_tensor(dict, "y", path);
  if (!x || !y) throw std::invalid_argument(fmt::format("{}: expected tensors \"x\" and \"y\" in the dict", path));
  auto data = std::make_shared<LabelledData>();
  std::tie(data->train_x, data->train_y) = token_split(*x, *y, "x", "y", path);
  const auto* tx = find_saved_tensor(dict, "test_x", path);
  const auto* ty = find_saved_tensor(dict, "test_y", path);
  if ((tx == nullptr) != (ty == nullptr))
    throw std::invalid_argument(fmt::format("{}: expected both \"test_x\" and \"test_y\", or neither", path));
  std::int64_t top = std::max(data->train_x.max().item<std::int64_t>(), data->train_y.max().item<std::int64_t>());
  if (tx) {
    std::tie(data->test_x, data->test_y) = token_split(*tx, *ty, "test_x", "test_y", path);
    if (data->test_x.size(1) != data->train_x.size(1))
      throw std::invalid_argument(fmt::format("{}: expected test rows of {} tokens like the training ones, got {}", path,
                                              data->train_x.size(1), data->test_x.size(1)));
    top = std::max({top, data->test_x.max().item<std::int64_t>(), data->test_y.max().item<std::int64_t>()});
  }
  if (top >= (std::int64_t{1} << 31))
    throw std::invalid_argument(fmt::format("{}: a token of {}, expected fewer than 2^31 tokens", path, top));
  data->classes = top + 1;
  return data;
}

}  // namespace dtsim::workloads
