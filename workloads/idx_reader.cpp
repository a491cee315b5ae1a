#include "workloads/idx_reader.hpp"

#include <zlib.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace dtsim::workloads {

namespace {

struct GzCloser {
  void operator()(gzFile f) const { gzclose(f); }
};
using GzFile = std::unique_ptr<std::remove_pointer_t<gzFile>, GzCloser>;

constexpr std::int64_t kMaxDataBytes = std::int64_t{1} << 40;

// Reads up to `n` bytes; returns how many were read (fewer only at end of file).
std::size_t read_bytes(gzFile f, const std::string& path, void* out, std::size_t n) {
  auto* p = static_cast<unsigned char*>(out);
  std::size_t done = 0;
  while (done < n) {
    const std::size_t chunk = std::min<std::size_t>(n - done, 1u << 30);
    const int got = gzread(f, p + done, static_cast<unsigned>(chunk));
    if (got < 0) {
      int errnum = 0;
      const char* msg = gzerror(f, &errnum);
      throw std::invalid_argument(fmt::format("{}: cannot read: {}", path, msg ? msg : "zlib error"));
    }
    if (got == 0) break;
    done += static_cast<std::size_t>(got);
  }
  return done;
}

}  // namespace

at::Tensor read_idx(const std::string& path) {
  GzFile f(gzopen(path.c_str(), "rb"));
  if (!f) throw std::invalid_argument(fmt::format("{}: cannot open file", path));
  std::array<unsigned char, 4> magic{};
  if (read_bytes(f.get(), path, magic.data(), 4) != 4)
    throw std::invalid_argument(fmt::format("{}: expected a 4-byte IDX magic number, got a shorter file", path));
  if (magic[0] != 0 || magic[1] != 0)
    throw std::invalid_argument(fmt::format("{}: expected an IDX magic number 00 00 <type> <ndims>, got {:02x} {:02x} {:02x} {:02x}",
                                            path, magic[0], magic[1], magic[2], magic[3]));
  if (magic[2] != 0x08)
    throw std::invalid_argument(
        fmt::format("{}: expected IDX data type 0x08 (unsigned byte), got 0x{:02x}", path, magic[2]));
  const int ndims = magic[3];
  if (ndims < 1) throw std::invalid_argument(fmt::format("{}: expected at least one IDX dimension, got 0", path));
  std::vector<std::int64_t> dims(static_cast<std::size_t>(ndims));
  std::int64_t total = 1;
  for (int i = 0; i < ndims; ++i) {
    std::array<unsigned char, 4> b{};
    if (read_bytes(f.get(), path, b.data(), 4) != 4)
      throw std::invalid_argument(fmt::format("{}: header ends inside dimension {} of {}", path, i, ndims));
    const std::uint32_t d = (std::uint32_t{b[0]} << 24) | (std::uint32_t{b[1]} << 16) | (std::uint32_t{b[2]} << 8) | b[3];
    dims[static_cast<std::size_t>(i)] = d;
    // Checked before multiplying: a product of 32-bit dimensions overflows 64 bits.
    if (d != 0 && total > kMaxDataBytes / static_cast<std::int64_t>(d))
      throw std::invalid_argument(fmt::format("{}: IDX dimensions are implausibly large", path));
    total *= static_cast<std::int64_t>(d);
  }
  // The data is read in chunks before the tensor is allocated, so a header that claims
  // gigabytes costs memory only when the file holds them.
  std::vector<std::uint8_t> data;
  std::size_t got = 0;
  while (got < static_cast<std::size_t>(total)) {
    const std::size_t chunk = std::min<std::size_t>(static_cast<std::size_t>(total) - got, std::max<std::size_t>(got, 1u << 20));
    data.resize(got + chunk);
    const std::size_t n = read_bytes(f.get(), path, data.data() + got, chunk);
    got += n;
    if (n < chunk) break;
  }
  if (got != static_cast<std::size_t>(total))
    throw std::invalid_argument(fmt::format("{}: expected {} data bytes for dimensions {}, got {}", path, total,
                                            fmt::join(dims, "x"), got));
  auto out = at::empty(dims, at::kByte);
  if (total > 0) std::memcpy(out.data_ptr<std::uint8_t>(), data.data(), static_cast<std::size_t>(total));
  unsigned char extra = 0;
  if (read_bytes(f.get(), path, &extra, 1) != 0)
    throw std::invalid_argument(
        fmt::format("{}: expected {} data bytes for dimensions {}, got more", path, total, fmt::join(dims, "x")));
  return out;
}

void write_idx(const std::string& path, const at::Tensor& data, bool gzip) {
  if (data.scalar_type() != at::kByte || data.dim() < 1 || data.dim() > 255)
    throw std::invalid_argument(fmt::format("write_idx {}: expected a uint8 tensor with 1 to 255 dimensions", path));
  std::vector<unsigned char> bytes{0, 0, 0x08, static_cast<unsigned char>(data.dim())};
  for (auto d : data.sizes())
    for (int shift = 24; shift >= 0; shift -= 8) bytes.push_back(static_cast<unsigned char>((d >> shift) & 0xff));
  const auto c = data.contiguous();
  const auto* p = c.data_ptr<std::uint8_t>();
  bytes.insert(bytes.end(), p, p + c.numel());
  GzFile f(gzopen(path.c_str(), gzip ? "wb" : "wbT"));
  if (!f) throw std::invalid_argument(fmt::format("write_idx {}: cannot open for writing", path));
  if (gzwrite(f.get(), bytes.data(), static_cast<unsigned>(bytes.size())) != static_cast<int>(bytes.size()))
    throw std::invalid_argument(fmt::format("write_idx {}: write failed", path));
}

}  // namespace dtsim::workloads
