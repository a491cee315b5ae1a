// The element-wise decode loop the quantizing codecs share (one_bit, terngrad, natural):
// each element's value comes from its own bits (and its piece's scalars), so the payload
// is decoded in parallel chunks, and written (decompress) or added times the weight
// (decompress_add) into the dense buffer, in its dtype. Internal to kernels/.
#pragma once

#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdint>

#include "kernels/codecs/codec.hpp"
#include "kernels/cpu/common.hpp"

namespace dtsim::kernels::codecs {

// dense[i] = value(i, s) or dense[i] += weight * value(i, s) for every element i, s
// being the segment (ws.offsets) that holds i.
template <class Value>
void decode_each_in_segment(const Workspace& ws, const Decode& call, Value&& value) {
  const auto L = ws.segment_count();
  const std::int64_t* off = ws.offsets.data();
  with_dtype(call.payload.dtype, call.what, [&](auto tag) {
    using T = decltype(tag);
    T* o = static_cast<T*>(call.dense.data_ptr());
    at::parallel_for(0, call.payload.numel, 1 << 14, [&](std::int64_t i0, std::int64_t i1) {
      std::int64_t s = std::upper_bound(off, off + L + 1, i0) - off - 1;
      for (std::int64_t i = i0; i < i1; ++i) {
        while (off[s + 1] <= i) ++s;
        const float v = value(i, s);
        o[i] = call.accumulate ? static_cast<T>(cpu::to_float(o[i]) + call.weight * v) : static_cast<T>(v);
      }
    });
  });
}

// The same for a codec without segments: value(i).
template <class Value>
void decode_each(const Decode& call, Value&& value) {
  with_dtype(call.payload.dtype, call.what, [&](auto tag) {
    using T = decltype(tag);
    T* o = static_cast<T*>(call.dense.data_ptr());
    at::parallel_for(0, call.payload.numel, 1 << 14, [&](std::int64_t i0, std::int64_t i1) {
      for (std::int64_t i = i0; i < i1; ++i) {
        const float v = value(i);
        o[i] = call.accumulate ? static_cast<T>(cpu::to_float(o[i]) + call.weight * v) : static_cast<T>(v);
      }
    });
  });
}

}  // namespace dtsim::kernels::codecs
