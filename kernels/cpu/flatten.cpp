#include "kernels/cpu/flatten.hpp"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cstring>

namespace dtsim::kernels::cpu {

namespace {

// Calls copy(part, first element within the part, element count) for every piece of the
// parts that falls inside flat elements [begin, end).
template <class Copy>
void for_each_piece(const std::int64_t* offsets, std::size_t count, std::int64_t begin, std::int64_t end,
                    Copy&& copy) {
  // The last part starting at or before `begin` (empty parts share an offset: skip them).
  std::size_t i = static_cast<std::size_t>(std::upper_bound(offsets, offsets + count + 1, begin) - offsets) - 1;
  for (; i < count && offsets[i] < end; ++i) {
    const std::int64_t a = std::max(begin, offsets[i]);
    const std::int64_t b = std::min(end, offsets[i + 1]);
    if (b > a) copy(i, a - offsets[i], b - a);
  }
}

template <class Copy>
void over_chunks(const std::int64_t* offsets, std::size_t count, std::size_t element_size, Copy&& copy) {
  const std::int64_t total = offsets[count];
  const std::int64_t grain = std::max<std::int64_t>(1, (std::int64_t{256} << 10) / static_cast<std::int64_t>(element_size));
  at::parallel_for(0, total, grain, [&](std::int64_t begin, std::int64_t end) {
    for_each_piece(offsets, count, begin, end, copy);
  });
}

}  // namespace

void pack_parts(void* flat, const void* const* parts, const std::int64_t* offsets, std::size_t count,
                std::size_t element_size) {
  auto* out = static_cast<char*>(flat);
  const auto es = static_cast<std::int64_t>(element_size);
  over_chunks(offsets, count, element_size, [&](std::size_t i, std::int64_t first, std::int64_t n) {
    if (parts[i] == nullptr) return;
    char* dst = out + (offsets[i] + first) * es;
    const char* src = static_cast<const char*>(parts[i]) + first * es;
    if (dst != src) std::memcpy(dst, src, static_cast<std::size_t>(n * es));
  });
}

void unpack_parts(const void* flat, void* const* parts, const std::int64_t* offsets, std::size_t count,
                  std::size_t element_size) {
  const auto* in = static_cast<const char*>(flat);
  const auto es = static_cast<std::int64_t>(element_size);
  over_chunks(offsets, count, element_size, [&](std::size_t i, std::int64_t first, std::int64_t n) {
    if (parts[i] == nullptr) return;
    const char* src = in + (offsets[i] + first) * es;
    char* dst = static_cast<char*>(parts[i]) + first * es;
    if (dst != src) std::memcpy(dst, src, static_cast<std::size_t>(n * es));
  });
}

void parallel_copy(void* dst, const void* src, std::int64_t bytes) {
  const std::int64_t offsets[2] = {0, bytes};
  const void* parts[1] = {src};
  pack_parts(dst, parts, offsets, 1, 1);
}

}  // namespace dtsim::kernels::cpu
