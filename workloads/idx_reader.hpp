// IDX files (the MNIST / Fashion-MNIST format), gzip-compressed or plain.
//
// Layout: magic = two zero bytes, a type byte, the number of dimensions; then each
// dimension as a big-endian uint32; then the data, row-major. Only type 0x08 (unsigned
// byte) is supported, which is what the (Fashion-)MNIST files use. The file must hold
// exactly prod(dims) data bytes after the header. zlib reads .gz files and plain files
// alike (gzread passes uncompressed input through), so both kinds work under any name.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <string>

namespace dtsim::workloads {

// The file's data as a uint8 tensor of its dimensions. Throws std::invalid_argument
// "<path>: ..." on a missing file, a bad magic number, an unsupported type, a corrupt
// gzip stream, or a data size that does not match the header.
at::Tensor read_idx(const std::string& path);

// Writes `data` (a uint8 tensor, 1 to 255 dimensions) as an IDX file, gzip-compressed
// when `gzip` is true. For tests and tools.
void write_idx(const std::string& path, const at::Tensor& data, bool gzip);

}  // namespace dtsim::workloads
