// Fused flatten / unflatten on the GPU: a batch of up to kMaxPieces (src, dst, bytes)
// copies per launch, the table passed by value as kernel arguments (~1.5 KB, under the
// 4 KB limit), blockIdx.y picking the piece and a grid-stride loop over its bytes.
//
// Napkin math: a copy reads and writes each byte once; each piece is copied in the widest
// word (16, 8, 4, 2 or 1 bytes) that its source, destination and length all allow. A flat
// buffer's parts start at element offsets, so an fp16 model's pieces may allow only 2
// bytes: slower than a 16-byte copy, but never the byte loop for 2-, 4- or 8-byte
// elements. Blocks past a short piece's end exit at once, so a batch costs about its
// largest piece.
#include "kernels/cuda/flatten.cuh"

#include <cuda_runtime.h>

#include "kernels/cuda/check.cuh"

namespace dtsim::kernels::cuda {

namespace {

constexpr int kMaxPieces = 64;

struct Pieces {
  const char* src[kMaxPieces];
  char* dst[kMaxPieces];
  std::int64_t bytes[kMaxPieces];
};

template <class Word>
__device__ void copy_words(const char* src, char* dst, std::int64_t bytes) {
  const auto* s = reinterpret_cast<const Word*>(src);
  auto* d = reinterpret_cast<Word*>(dst);
  const std::int64_t n = bytes / static_cast<std::int64_t>(sizeof(Word));
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    d[i] = s[i];
}

__global__ void copy_pieces_kernel(Pieces p) {
  const int k = static_cast<int>(blockIdx.y);
  const char* src = p.src[k];
  char* dst = p.dst[k];
  const std::int64_t bytes = p.bytes[k];
  const std::uintptr_t bits = reinterpret_cast<std::uintptr_t>(src) | reinterpret_cast<std::uintptr_t>(dst) |
                              static_cast<std::uintptr_t>(bytes);
  if ((bits & 15) == 0)
    copy_words<uint4>(src, dst, bytes);
  else if ((bits & 7) == 0)
    copy_words<unsigned long long>(src, dst, bytes);
  else if ((bits & 3) == 0)
    copy_words<unsigned int>(src, dst, bytes);
  else if ((bits & 1) == 0)
    copy_words<unsigned short>(src, dst, bytes);
  else
    copy_words<unsigned char>(src, dst, bytes);
}

// Launches the copies of `n` pieces given by piece(j) -> (src, dst, bytes), skipping empty
// pieces and those whose source is their destination.
template <class Piece>
void copy_pieces(std::size_t n, Piece&& piece, cudaStream_t stream) {
  constexpr int threads = 256;
  Pieces batch{};
  int used = 0;
  std::int64_t largest = 0;
  const auto launch = [&] {
    if (used == 0) return;
    // Enough blocks for the largest piece at 16 bytes per thread, at most 1024 per piece.
    const int blocks = grid_for((largest + 15) / 16, threads, 1024);
    copy_pieces_kernel<<<dim3(static_cast<unsigned>(blocks), static_cast<unsigned>(used)), threads, 0, stream>>>(batch);
    DTSIM_CUDA_CHECK(cudaGetLastError());
    used = 0;
    largest = 0;
  };
  for (std::size_t j = 0; j < n; ++j) {
    const auto [src, dst, bytes] = piece(j);
    if (bytes == 0 || src == nullptr || dst == nullptr || src == dst) continue;
    batch.src[used] = src;
    batch.dst[used] = dst;
    batch.bytes[used] = bytes;
    largest = bytes > largest ? bytes : largest;
    if (++used == kMaxPieces) launch();
  }
  launch();
}

struct Piece {
  const char* src;
  char* dst;
  std::int64_t bytes;
};

}  // namespace

void pack_parts(void* flat, const void* const* parts, const std::int64_t* offsets, std::size_t count,
                std::size_t element_size, void* stream) {
  const auto es = static_cast<std::int64_t>(element_size);
  copy_pieces(
      count,
      [&](std::size_t i) {
        return Piece{static_cast<const char*>(parts[i]), static_cast<char*>(flat) + offsets[i] * es,
                     (offsets[i + 1] - offsets[i]) * es};
      },
      static_cast<cudaStream_t>(stream));
}

void unpack_parts(const void* flat, void* const* parts, const std::int64_t* offsets, std::size_t count,
                  std::size_t element_size, void* stream) {
  const auto es = static_cast<std::int64_t>(element_size);
  copy_pieces(
      count,
      [&](std::size_t i) {
        return Piece{static_cast<const char*>(flat) + offsets[i] * es, static_cast<char*>(parts[i]),
                     (offsets[i + 1] - offsets[i]) * es};
      },
      static_cast<cudaStream_t>(stream));
}

}  // namespace dtsim::kernels::cuda
