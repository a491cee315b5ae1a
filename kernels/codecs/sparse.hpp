// What the sparse codecs (top_k, random_k, threshold) share: their payload is, per
// segment, local indices and their values, and decoding checks every index against its
// segment before writing anything, then scatters.
#pragma once

#include <cstdint>
#include <stdexcept>

#include <fmt/format.h>

#include "kernels/codecs/codec.hpp"
#include "kernels/cpu/sparse.hpp"

namespace dtsim::kernels::codecs {

// dense = scatter(idx, val), or dense += weight * scatter(idx, val), segment s's block of
// indices and values being [ws.k[s], ws.k[s + 1]). An index outside its segment is
// refused (std::invalid_argument naming it) before anything is written.
template <class T>
void scatter_segments(const Workspace& ws, const std::uint32_t* idx, const T* val, const Decode& call) {
  const auto L = ws.segment_count();
  const std::int64_t* off = ws.offsets.data();
  const std::int64_t* k = ws.k.data();
  for (std::int64_t s = 0; s < L; ++s)
    for (std::int64_t j = k[s]; j < k[s + 1]; ++j)
      if (idx[j] >= static_cast<std::uint64_t>(off[s + 1] - off[s]))
        throw std::invalid_argument(fmt::format("{}: index {} out of range in segment {} of {} elements", call.what,
                                                idx[j], s, off[s + 1] - off[s]));
  if (!call.accumulate) call.dense.zero_();
  T* o = static_cast<T*>(call.dense.data_ptr());
  for (std::int64_t s = 0; s < L; ++s)
    cpu::scatter(idx + k[s], val + k[s], k[s + 1] - k[s], call.weight, call.accumulate, o + off[s]);
}

// The usual layout: the K indices, then the K values.
template <class T>
void decode_indices_then_values(const Workspace& ws, const Decode& call) {
  const auto* base = static_cast<const std::uint8_t*>(call.payload.bytes.data_ptr());
  const std::int64_t K = ws.k[static_cast<std::size_t>(ws.segment_count())];
  scatter_segments(ws, reinterpret_cast<const std::uint32_t*>(base), reinterpret_cast<const T*>(base + 4 * K), call);
}

}  // namespace dtsim::kernels::codecs
