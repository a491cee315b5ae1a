#include "workloads/tensor_file.hpp"

#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/serialization/pickle.h>

#include <algorithm>
#include <cstring>
#include <sstream>

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

std::uint64_t little_endian(const std::uint8_t* p, int bytes) {
  std::uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// Checks that no length-prefixed opcode of the pickle `p[0, n)` claims more bytes than the
// pickle holds, and that memo indices come in order (0, 1, 2, ...: what every pickler
// writes). LibTorch's unpickler allocates what a length or a memo index says before it
// reads: one flipped byte would make it allocate gigabytes and take tens of seconds to fail.
// Throws std::invalid_argument with the pickle offset; stops at STOP or at an opcode it does
// not know (the unpickler then refuses it).
void check_pickle_lengths(const std::uint8_t* p, std::size_t n, const std::string& path) {
  std::size_t i = 0;
  std::uint64_t memo = 0;  // entries put so far
  auto put = [&](std::uint64_t index, std::size_t at) {
    if (index > memo)
      throw std::invalid_argument(fmt::format("{}: data.pkl offset {}: memo index {} after {} entries", path, at, index, memo));
    memo = std::max(memo, index + 1);
  };
  auto need = [&](std::size_t bytes, std::size_t at) {
    if (bytes > n - i)
      throw std::invalid_argument(fmt::format("{}: data.pkl offset {}: an opcode claims {} bytes, {} remain", path, at,
                                              bytes, n - i));
  };
  auto line = [&](std::size_t at) {  // a newline-terminated argument
    const void* nl = std::memchr(p + i, '\n', n - i);
    if (!nl) throw std::invalid_argument(fmt::format("{}: data.pkl offset {}: an unterminated argument", path, at));
    i = static_cast<std::size_t>(static_cast<const std::uint8_t*>(nl) - p) + 1;
  };
  while (i < n) {
    const std::size_t at = i;
    const char op = static_cast<char>(p[i++]);
    switch (op) {
      case '.': return;  // STOP
      // a fixed-size argument
      case '\x80': case 'K': case 'h': case '\x82': need(1, at); i += 1; break;
      case 'M': case '\x83': need(2, at); i += 2; break;
      case 'J': case 'j': case '\x84': need(4, at); i += 4; break;
      case 'q': need(1, at); put(p[i], at); i += 1; break;  // BINPUT
      case 'r': need(4, at); put(little_endian(p + i, 4), at); i += 4; break;  // LONG_BINPUT
      case '\x94': put(memo, at); break;  // MEMOIZE
      case 'G': case '\x95': need(8, at); i += 8; break;
      // a length, then that many bytes
      case 'U': case 'C': case '\x8c': case '\x8a': {
        need(1, at);
        const std::size_t len = p[i];
        i += 1;
        need(len, at);
        i += len;
        break;
      }
      case 'X': case 'T': case 'B': case '\x8b': {
        need(4, at);
        const std::uint64_t len = little_endian(p + i, 4);
        i += 4;
        need(len, at);
        i += len;
        break;
      }
      case '\x8d': case '\x8e': case '\x96': {
        need(8, at);
        const std::uint64_t len = little_endian(p + i, 8);
        i += 8;
        need(len, at);
        i += len;
        break;
      }
      // newline-terminated arguments
      case 'c': case 'i': line(at); line(at); break;
      case 'I': case 'L': case 'F': case 'S': case 'V': case 'p': case 'g': case 'P': line(at); break;
      // no argument
      case '(': case ')': case ']': case '}': case 'N': case '\x88': case '\x89': case 'Q': case 'R': case 'a':
      case 'e': case 's': case 'u': case 't': case '\x85': case '\x86': case '\x87': case '0': case '1': case '2':
      case 'b': case 'l': case 'd': case 'o': case '\x81': case '\x92': case '\x93': case '\x8f':
      case '\x90': case '\x91': case '\x97': case '\x98':
        break;
      default: return;
    }
  }
}

// The archive's data.pkl, when `bytes` is a zip archive that has one, length-checked.
void check_archive(const std::vector<char>& bytes, const std::string& path) {
  std::istringstream in(std::string(bytes.begin(), bytes.end()));
  at::DataPtr data;
  std::size_t size = 0;
  try {
    caffe2::serialize::PyTorchStreamReader reader(&in);
    if (!reader.hasRecord("data.pkl"))
      throw std::invalid_argument(fmt::format("{}: expected a file written by torch.save, got an archive without data.pkl",
                                              path));
    std::tie(data, size) = reader.getRecord("data.pkl");
  } catch (const std::invalid_argument&) {
    throw;
  } catch (const std::exception& e) {  // c10::Error from the zip reader
    throw std::invalid_argument(fmt::format("{}: expected a file written by torch.save, got one it cannot read ({})", path,
                                            first_line(e.what())));
  }
  check_pickle_lengths(static_cast<const std::uint8_t*>(data.get()), size, path);
}

// A tensor's storage holds every element its sizes, strides and offset reach (a file can
// claim a tensor larger than the record behind it).
void check_storage(const at::Tensor& t, const std::string& key, const std::string& path) {
  if (t.numel() == 0) return;
  std::int64_t last = t.storage_offset();
  bool bad = last < 0;
  for (std::int64_t d = 0; d < t.dim(); ++d) {
    if (t.stride(d) < 0) bad = true;
    else last += (t.size(d) - 1) * t.stride(d);
  }
  const auto needed = static_cast<std::uint64_t>(last + 1) * static_cast<std::uint64_t>(t.element_size());
  if (bad || !t.has_storage() || t.storage().data() == nullptr || needed > t.storage().nbytes())
    throw std::invalid_argument(fmt::format("{}: \"{}\" claims {} elements ({}) that its stored data does not hold",
                                            path, key, t.numel(), fmt::join(t.sizes(), " x ")));
}

const at::Tensor* find_tensor(const c10::impl::GenericDict& dict, const std::string& key, const std::string& path) {
  for (const auto& item : dict) {
    if (!item.key().isString() || item.key().toStringRef() != key) continue;
    if (!item.value().isTensor())
      throw std::invalid_argument(fmt::format("{}: expected \"{}\" to be a tensor, got {}", path, key,
                                              item.value().tagKind()));
    check_storage(item.value().toTensor(), key, path);
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

c10::impl::GenericDict read_saved_dict(const std::string& path) {
  if (const auto why = config::not_a_regular_file(path)) throw std::invalid_argument(fmt::format("{} {}", path, *why));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::invalid_argument(fmt::format("{}: cannot read", path));
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  check_archive(bytes, path);
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
  return value.toGenericDict();
}

const at::Tensor* find_saved_tensor(const c10::impl::GenericDict& dict, const std::string& key, const std::string& path) {
  return find_tensor(dict, key, path);
}

std::shared_ptr<const LabelledData> read_tensor_file(const std::string& path) {
  const auto dict = read_saved_dict(path);
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
