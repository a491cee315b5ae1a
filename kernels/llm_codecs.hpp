// The codecs of the low-communication LLM algorithms (shared/reference/llm-era-notes.md), as
// kernels on fp32 tensors, CPU or CUDA by the input's device (the CPU kernels,
// cpu/llm_codecs.cpp, are the oracle of the CUDA ones, cuda/llm_codecs.cu: same bytes). They
// are building blocks, not compressor kinds yet (kernels/compressor_kinds.cpp): each returns
// its payload's parts and the exact bits it would put on the wire.
//
//   fp4_e3m0        Streaming DiLoCo's outer gradients (Douillard et al. 2025): sign and a
//                   3-bit exponent per element, no mantissa, one fp32 scale s = max |x| per
//                   block. Levels 0 and s 2^-6 .. s 2^0 (exponent codes 1..7; 0 is zero):
//                   the range of one block spans 2^6; an element below s 2^-7 becomes 0.
//                   Round to the nearest level, ties to the larger (detail/llm_codecs.hpp).
//                   Wire: ceil(n / 2) bytes (element i in the low nibble of byte i / 2 when i
//                   is even, the high one when odd) + 4 bytes per block:
//                   bits = 4 n + 32 blocks (+ 4 for an odd n's padding nibble).
//   int8_codebook   INTELLECT-1's pseudo-gradients (Prime Intellect 2024): mu and sigma of
//                   the tensor (unbiased, n - 1), 256 equal bins over [mu - 6 sigma,
//                   mu + 6 sigma) (outliers clamped into the end bins), each element sent as
//                   its bin (1 byte), the bins dequantised to the mean of the values that fell
//                   in them (an empty bin: its centre), sent as a 256-entry fp32 codebook.
//                   bits = 8 n + 8192. mu, sigma and the bin means are double sums in a fixed
//                   order (chunks of 4096 / 65536 elements summed in index order, the chunks'
//                   partials in chunk order), so every device gets the same codebook. sigma
//                   0 (a constant tensor) or not finite (Inf or NaN in it): every element in
//                   bin 128, whose mean is then the decode (the constant, or NaN).
//   two_bit         SparseLoCo's Q2 (2508.15706) for the values a top-k kept: per row of a
//                   [rows, k] matrix, scale M = max |v|, levels {-M, -M/3, M/3, M} (uniform over
//                   [-M, M]), nearest level, ties to the larger. Deterministic, biased: the
//                   algorithm's error feedback keeps what it drops. Wire: ceil(rows k / 4) bytes
//                   (element j in bits 2 (j % 4) of byte j / 4, rows one after another) + 4
//                   bytes of scale per row: bits = 2 rows k + 32 rows.
//   top-k per chunk SparseLoCo's TopK_chunk and DeMo's selection: a tensor cut into chunks
//                   (ChunkLayout), the k largest magnitudes of each (ties: the lower index;
//                   NaN the largest), indices sent in ceil(log2(E)) bits each (E elements a
//                   chunk; at least 1 bit) packed LSB first in 32-bit words, values as fp32,
//                   both in ascending index order per chunk: bits = chunks k (32 + b).
//   dct             DeMo (Peng, Quesnelle, Kingma 2024): the orthonormal DCT-II of every chunk
//                   (1-D chunks of a vector, 2-D tiles of a matrix: rows then columns), then
//                   top-k per chunk of the coefficients; decode: scatter, the inverse
//                   (DCT-III), crop (on a zero-padded chunk the cropped decode is not
//                   orthogonal to the dropped coefficients: delta - decode keeps a little of
//                   the kept part, while what is subtracted is still exactly what was sent). X_k = s_k sum_n x_n cos(pi (n + 1/2) k / N), s_0 =
//                   sqrt(1 / N), s_k = sqrt(2 / N); the matrix computed in double and rounded
//                   to fp32, each coefficient an fp32 dot product in index order.
//
// Chunks (ChunkLayout): a tensor of one dimension n is cut into chunks of c = min(chunk, n)
// elements; of two dimensions r x c' (more: the first times the rest; a scalar: one
// element), into tiles of min(chunk, r) x min(chunk, c'), row-major, tiles in row-major order;
// the last chunk or tile row / column is zero-padded. A chunk holds E <= 4096 elements (a
// CUDA block's shared memory holds its keys): chunk up to 4096 for one dimension, 64 for tiles.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

namespace dtsim::kernels::llm {

// --- FP4 E3M0 -------------------------------------------------------------------------------
struct Fp4Payload {
  at::Tensor codes;   // uint8 [ceil(n / 2)]
  at::Tensor scales;  // fp32 [blocks]
  std::int64_t numel = 0;
  std::int64_t block = 0;  // elements per scale (the last block may be shorter)
  std::int64_t bits() const;
};
// `block` 0: one block for the whole tensor.
Fp4Payload fp4_encode(const at::Tensor& x, std::int64_t block = 0);
// out (fp32, numel elements, x's device) = decode, or out += weight * decode.
void fp4_decode(const Fp4Payload& p, at::Tensor& out, float weight = 1.0f, bool accumulate = false);

// --- int8 codebook ----------------------------------------------------------------------------
struct Int8Payload {
  at::Tensor codes;     // uint8 [n]
  at::Tensor codebook;  // fp32 [256]
  double mu = 0.0, sigma = 0.0;  // not sent: the receiver needs only the codebook
  std::int64_t bits() const { return 8 * codes.numel() + 256 * 32; }
};
Int8Payload int8_encode(const at::Tensor& x);
void int8_decode(const Int8Payload& p, at::Tensor& out, float weight = 1.0f, bool accumulate = false);

// --- 2-bit values ---------------------------------------------------------------------------
struct TwoBitPayload {
  at::Tensor codes;   // uint8 [ceil(rows k / 4)]
  at::Tensor scales;  // fp32 [rows]
  std::int64_t rows = 0, k = 0;
  std::int64_t bits() const { return 2 * rows * k + 32 * rows; }
};
// values: fp32 [rows, k].
TwoBitPayload two_bit_encode(const at::Tensor& values);
at::Tensor two_bit_decode(const TwoBitPayload& p);  // fp32 [rows, k]

// --- chunks, top-k per chunk, DCT -------------------------------------------------------------
struct ChunkLayout {
  std::vector<std::int64_t> shape;  // the tensor's
  std::int64_t rows = 1, cols = 1;  // the tensor as a matrix (1 x n for one dimension)
  std::int64_t tile_rows = 1, tile_cols = 1;  // a chunk's (tile_rows 1 for one dimension)
  std::int64_t chunk_rows = 1, chunk_cols = 1;  // chunks down and across
  std::int64_t chunks() const { return chunk_rows * chunk_cols; }
  std::int64_t elements() const { return tile_rows * tile_cols; }  // E
  std::int32_t index_bits() const;  // max(1, ceil(log2 E))
};
ChunkLayout chunk_layout(at::IntArrayRef shape, std::int64_t chunk = 64);
// The tensor's chunks as rows of a [chunks, E] matrix (zero-padded), and back (cropped).
at::Tensor to_chunks(const at::Tensor& x, const ChunkLayout& layout);
at::Tensor from_chunks(const at::Tensor& chunks, const ChunkLayout& layout);

// The orthonormal DCT-II of every chunk of `chunks` [count, E] (E = tile_rows x tile_cols,
// row-major), or its inverse; a new tensor.
at::Tensor dct_chunks(const at::Tensor& chunks, const ChunkLayout& layout, bool inverse = false);
// The DCT-II matrix of size N (D[k][n], fp32 rounded from double), on the CPU.
at::Tensor dct_matrix(std::int64_t n);

struct TopKPayload {
  ChunkLayout layout;
  std::int64_t k = 0;       // per chunk (at most E)
  at::Tensor values;        // fp32 [chunks, k], ascending index order per chunk
  at::Tensor index_words;   // int32 storage of the packed uint32 words [ceil(chunks k b / 32)]
  std::int64_t bits() const { return layout.chunks() * k * (32 + layout.index_bits()); }
};
// The k largest magnitudes of each row of `chunks` [count, E].
TopKPayload topk_chunks(const at::Tensor& chunks, const ChunkLayout& layout, std::int64_t k);
// The indices [chunks, k] (int32) of a payload, unpacked.
at::Tensor topk_indices(const TopKPayload& p);
// The [chunks, E] matrix holding the payload's values at their indices, 0 elsewhere.
at::Tensor topk_scatter(const TopKPayload& p);

// DeMo's codec: the DCT of every chunk of x, top-k per chunk.
TopKPayload dct_encode(const at::Tensor& x, std::int64_t chunk = 64, std::int64_t k = 32);
// out (x's shape) = IDCT of the kept coefficients, or out += weight * that.
void dct_decode(const TopKPayload& p, at::Tensor& out, float weight = 1.0f, bool accumulate = false);
// SparseLoCo's TopK_chunk of x (no transform), and its decode.
TopKPayload sparse_encode(const at::Tensor& x, std::int64_t chunk, std::int64_t k);
void sparse_decode(const TopKPayload& p, at::Tensor& out, float weight = 1.0f, bool accumulate = false);

}  // namespace dtsim::kernels::llm
