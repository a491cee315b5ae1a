// kernels::Payload: one compressed message, exactly the bytes that go on the wire, and
// what its receiver knows without being told (the kind, dtype, segment sizes and round).
// Its wire layouts are listed in compressor.hpp.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <string_view>
#include <vector>

namespace dtsim::kernels {

struct Payload {
  at::Tensor bytes;                    // uint8, 1-D, on the input's device: exactly what goes on the wire
  std::string_view kind = "identity";  // the compressor kind's name, its registry entry's (static storage)
  at::ScalarType dtype = at::kFloat;   // the dense buffer's element type
  std::int64_t numel = 0;
  std::vector<std::int64_t> segments;  // per-tensor element counts
  std::uint64_t round = 0;             // the compress() call that produced it

  std::int64_t payload_bits() const { return bytes.defined() ? 8 * bytes.numel() : 0; }
};

}  // namespace dtsim::kernels
