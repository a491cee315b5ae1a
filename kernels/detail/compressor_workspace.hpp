// kernels::detail::CompressorWorkspace: what a Compressor (compressor.hpp) and its kind's
// codec (codecs/codec.hpp) share between calls.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "kernels/cpu/select.hpp"

namespace dtsim::kernels {

namespace detail {

// A Compressor's workspaces, reused across calls (once grown, a step allocates nothing),
// shared by the Compressor and its kind's codec (codecs/codec.hpp).
struct CompressorWorkspace {
  // Segment tables of the current call: element offsets (offsets.size() - 1 segments,
  // buckets already cut), running totals of kept elements (segment s's block is
  // [k[s], k[s + 1])), and cpu::partial_slots' slot layout.
  std::vector<std::int64_t> offsets, k, slot_begin;
  std::vector<std::int64_t> bucket_offsets;  // with buckets: scratch for the cut offsets
  std::vector<std::uint64_t> keys;           // qsgd, terngrad, natural: per-segment stream keys
  std::vector<float> partials, scalars;      // canonical partial sums; scales or norms
  std::vector<std::uint32_t> max_keys;       // terngrad: per-(segment, chunk) maxima of the magnitude keys
  std::vector<std::uint32_t> indices;        // random_k with shared_seed: the redrawn indices
  cpu::SelectWorkspace select;
  struct Block {  // per thread, for qsgd's bucketed block encoder
    std::vector<std::int64_t> offsets, slot_begin;
    std::vector<float> partials;
  };
  std::vector<Block> blocks;
#if DTSIM_TORCH_CUDA
  at::Tensor device;  // device scratch, grown as needed
  // The segment offsets at the front of `device` (and the buffer they were written to):
  // a decode with the same segments, the common case, uploads nothing.
  std::vector<std::int64_t> device_offsets;
  const void* device_offsets_in = nullptr;
#endif

  std::int64_t segment_count() const { return static_cast<std::int64_t>(offsets.size()) - 1; }
};

}  // namespace detail

}  // namespace dtsim::kernels
