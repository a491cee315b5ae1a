// The LLM codecs' tensor-level entry points: argument checks, payload and scratch
// allocation, then the CPU kernels (cpu/llm_codecs.cpp) or, for CUDA tensors in a build
// against a CUDA LibTorch, their twins (cuda/llm_codecs.cu) on the current stream.
#include "kernels/llm_codecs.hpp"

#include <cmath>
#include <map>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "kernels/cpu/llm_codecs.hpp"
#if DTSIM_TORCH_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "kernels/cuda/llm_codecs.cuh"
#endif

namespace dtsim::kernels::llm {

namespace {

void check_input(const at::Tensor& x, const char* what) {
  if (!x.defined() || x.scalar_type() != at::kFloat)
    throw std::invalid_argument(fmt::format("{}: expected an fp32 tensor", what));
  if (!x.is_cpu() && !x.is_cuda()) throw std::invalid_argument(fmt::format("{}: expected a CPU or CUDA tensor", what));
}

void check_output(const at::Tensor& out, std::int64_t numel, const at::Device& device, const char* what) {
  if (!out.defined() || out.scalar_type() != at::kFloat || !out.is_contiguous() || out.numel() != numel ||
      out.device() != device)
    throw std::invalid_argument(
        fmt::format("{}: expected a contiguous fp32 output of {} elements on {}", what, numel, device.str()));
}

// Runs `on_cuda(stream)` for a CUDA tensor (refused in a CPU build), else `on_cpu()`.
template <class Cpu, class Cuda>
void dispatch(const at::Tensor& x, [[maybe_unused]] const char* what, Cpu&& on_cpu, Cuda&& on_cuda) {
  if (x.is_cuda()) {
#if DTSIM_TORCH_CUDA
    const c10::cuda::CUDAGuard on_device(x.device());
    on_cuda(static_cast<void*>(c10::cuda::getCurrentCUDAStream().stream()));
    return;
#else
    (void)on_cuda;
    throw std::invalid_argument(fmt::format("{}: CUDA tensor, but dtsim was built against a CPU LibTorch", what));
#endif
  }
  on_cpu();
}

at::TensorOptions like(const at::Tensor& x, at::ScalarType t) { return x.options().dtype(t); }

// The DCT matrix of size n on `device`, cached per (size, device) for the process.
const at::Tensor& dct_matrix_on(std::int64_t n, const at::Device& device) {
  static thread_local std::map<std::pair<std::int64_t, std::string>, at::Tensor> cache;  // nodes: references stay valid
  auto& m = cache[{n, device.str()}];
  if (!m.defined()) m = dct_matrix(n).to(device);
  return m;
}

}  // namespace

// --- fp4 ----------------------------------------------------------------------------------------

std::int64_t Fp4Payload::bits() const { return 8 * codes.numel() + 32 * scales.numel(); }

Fp4Payload fp4_encode(const at::Tensor& x_in, std::int64_t block) {
  check_input(x_in, "fp4_encode");
  if (block < 0) throw std::invalid_argument(fmt::format("fp4_encode: block {} < 0", block));
  const auto x = x_in.contiguous();
  Fp4Payload p;
  p.numel = x.numel();
  p.block = block == 0 ? std::max<std::int64_t>(1, p.numel) : block;
  p.codes = at::empty({(p.numel + 1) / 2}, like(x, at::kByte));
  p.scales = at::empty({(p.numel + p.block - 1) / p.block}, like(x, at::kFloat));
  const float* xp = x.data_ptr<float>();
  auto* codes = p.codes.data_ptr<std::uint8_t>();
  auto* scales = p.scales.data_ptr<float>();
  dispatch(
      x, "fp4_encode",
      [&] {
        cpu::fp4_scales(xp, p.numel, p.block, scales);
        cpu::fp4_encode(xp, p.numel, p.block, scales, codes);
      },
      [&](void* stream) {
#if DTSIM_TORCH_CUDA
        cuda::fp4_scales(xp, p.numel, p.block, scales, stream);
        cuda::fp4_encode(xp, p.numel, p.block, scales, codes, stream);
#else
        (void)stream;
#endif
      });
  return p;
}

void fp4_decode(const Fp4Payload& p, at::Tensor& out, float weight, bool accumulate) {
  check_output(out, p.numel, p.codes.device(), "fp4_decode");
  const auto* codes = p.codes.data_ptr<std::uint8_t>();
  const float* scales = p.scales.data_ptr<float>();
  float* o = out.data_ptr<float>();
  dispatch(
      out, "fp4_decode", [&] { cpu::fp4_decode(codes, scales, p.numel, p.block, weight, accumulate, o); },
      [&](void* stream) {
#if DTSIM_TORCH_CUDA
        cuda::fp4_decode(codes, scales, p.numel, p.block, weight, accumulate, o, stream);
#else
        (void)stream;
#endif
      });
}

// --- int8 codebook --------------------------------------------------------------------------------

Int8Payload int8_encode(const at::Tensor& x_in) {
  check_input(x_in, "int8_encode");
  const auto x = x_in.contiguous();
  const std::int64_t n = x.numel();
  if (n == 0) throw std::invalid_argument("int8_encode: an empty tensor");
  Int8Payload p;
  p.codes = at::empty({n}, like(x, at::kByte));
  p.codebook = at::empty({256}, like(x, at::kFloat));
  auto partials = at::empty({(n + cpu::kStatChunk - 1) / cpu::kStatChunk}, like(x, at::kDouble));
  auto mu_sigma = at::empty({2}, like(x, at::kDouble));
  const std::int64_t bin_chunks = (n + cpu::kBinChunk - 1) / cpu::kBinChunk;
  auto sums = at::empty({256 * bin_chunks}, like(x, at::kDouble));
  auto counts = at::empty({256 * bin_chunks}, like(x, at::kLong));
  const float* xp = x.data_ptr<float>();
  dispatch(
      x, "int8_encode",
      [&] {
        cpu::int8_stats(xp, n, partials.data_ptr<double>(), mu_sigma.data_ptr<double>());
        cpu::int8_encode(xp, n, mu_sigma.data_ptr<double>(), p.codes.data_ptr<std::uint8_t>(), sums.data_ptr<double>(),
                         counts.data_ptr<std::int64_t>(), p.codebook.data_ptr<float>());
      },
      [&](void* stream) {
#if DTSIM_TORCH_CUDA
        cuda::int8_stats(xp, n, partials.data_ptr<double>(), mu_sigma.data_ptr<double>(), stream);
        cuda::int8_encode(xp, n, mu_sigma.data_ptr<double>(), p.codes.data_ptr<std::uint8_t>(), sums.data_ptr<double>(),
                          counts.data_ptr<std::int64_t>(), p.codebook.data_ptr<float>(), stream);
#else
        (void)stream;
#endif
      });
  const auto host = mu_sigma.cpu();
  p.mu = host[0].item<double>();
  p.sigma = host[1].item<double>();
  return p;
}

void int8_decode(const Int8Payload& p, at::Tensor& out, float weight, bool accumulate) {
  check_output(out, p.codes.numel(), p.codes.device(), "int8_decode");
  const auto* codes = p.codes.data_ptr<std::uint8_t>();
  const float* book = p.codebook.data_ptr<float>();
  float* o = out.data_ptr<float>();
  const std::int64_t n = p.codes.numel();
  dispatch(
      out, "int8_decode", [&] { cpu::int8_decode(codes, book, n, weight, accumulate, o); },
      [&](void* stream) {
#if DTSIM_TORCH_CUDA
        cuda::int8_decode(codes, book, n, weight, accumulate, o, stream);
#else
        (void)stream;
#endif
      });
}

// --- 2-bit ----------------------------------------------------------------------------------------

TwoBitPayload two_bit_encode(const at::Tensor& values_in) {
  check_input(values_in, "two_bit_encode");
  if (values_in.dim() != 2) throw std::invalid_argument("two_bit_encode: expected values [rows, k]");
  const auto v = values_in.contiguous();
  TwoBitPayload p;
  p.rows = v.size(0);
  p.k = v.size(1);
  p.codes = at::empty({(p.rows * p.k + 3) / 4}, like(v, at::kByte));
  p.scales = at::empty({p.rows}, like(v, at::kFloat));
  const float* vp = v.data_ptr<float>();
  dispatch(
      v, "two_bit_encode",
      [&] { cpu::two_bit_encode(vp, p.rows, p.k, p.scales.data_ptr<float>(), p.codes.data_ptr<std::uint8_t>()); },
      [&](void* stream) {
#if DTSIM_TORCH_CUDA
        cuda::two_bit_encode(vp, p.rows, p.k, p.scales.data_ptr<float>(), p.codes.data_ptr<std::uint8_t>(), stream);
#else
        (void)stream;
#endif
      });
  return p;
}

at::Tensor two_bit_decode(const TwoBitPayload& p) {
  auto out = at::empty({p.rows, p.k}, p.scales.options());
  dispatch(
      out, "two_bit_decode",
      [&] { cpu::two_bit_decode(p.codes.data_ptr<std::uint8_t>(), p.scales.data_ptr<float>(), p.rows, p.k, out.data_ptr<float>()); },
      [&](void* stream) {
#if DTSIM_TORCH_CUDA
        cuda::two_bit_decode(p.codes.data_ptr<std::uint8_t>(), p.scales.data_ptr<float>(), p.rows, p.k,
                             out.data_ptr<float>(), stream);
#else
        (void)stream;
#endif
      });
  return out;
}

// --- chunks ---------------------------------------------------------------------------------------

std::int32_t ChunkLayout::index_bits() const {
  std::int32_t b = 1;
  while ((std::int64_t{1} << b) < elements()) ++b;
  return b;
}

ChunkLayout chunk_layout(at::IntArrayRef shape, std::int64_t chunk) {
  ChunkLayout l;
  l.shape.assign(shape.begin(), shape.end());
  std::int64_t rest = 1;
  for (std::size_t d = 1; d < l.shape.size(); ++d) rest *= l.shape[d];
  if (l.shape.size() >= 2) {
    l.rows = l.shape[0];
    l.cols = rest;
  } else {
    l.rows = 1;
    l.cols = l.shape.empty() ? 1 : l.shape[0];
  }
  if (chunk < 1 || l.rows < 1 || l.cols < 1)
    throw std::invalid_argument(fmt::format("chunk_layout: chunk {} for a tensor of {} x {}", chunk, l.rows, l.cols));
  l.tile_rows = l.shape.size() >= 2 ? std::min(chunk, l.rows) : 1;
  l.tile_cols = std::min(chunk, l.cols);
  if (l.elements() > 4096)
    throw std::invalid_argument(
        fmt::format("chunk_layout: chunks of {} x {} elements, at most 4096", l.tile_rows, l.tile_cols));
  l.chunk_rows = (l.rows + l.tile_rows - 1) / l.tile_rows;
  l.chunk_cols = (l.cols + l.tile_cols - 1) / l.tile_cols;
  return l;
}

at::Tensor to_chunks(const at::Tensor& x, const ChunkLayout& l) {
  const auto m = x.reshape({l.rows, l.cols});
  const auto padded = at::constant_pad_nd(m, {0, l.chunk_cols * l.tile_cols - l.cols, 0, l.chunk_rows * l.tile_rows - l.rows});
  return padded.view({l.chunk_rows, l.tile_rows, l.chunk_cols, l.tile_cols})
      .permute({0, 2, 1, 3})
      .reshape({l.chunks(), l.elements()})
      .contiguous();
}

at::Tensor from_chunks(const at::Tensor& chunks, const ChunkLayout& l) {
  const auto padded = chunks.view({l.chunk_rows, l.chunk_cols, l.tile_rows, l.tile_cols})
                          .permute({0, 2, 1, 3})
                          .reshape({l.chunk_rows * l.tile_rows, l.chunk_cols * l.tile_cols});
  return padded.narrow(0, 0, l.rows).narrow(1, 0, l.cols).contiguous().view(l.shape);
}

at::Tensor dct_matrix(std::int64_t n) {
  auto d = at::empty({n, n}, at::kFloat);
  auto* p = d.data_ptr<float>();
  const double pi = std::acos(-1.0);
  for (std::int64_t k = 0; k < n; ++k)
    for (std::int64_t i = 0; i < n; ++i) {
      const double s = k == 0 ? std::sqrt(1.0 / static_cast<double>(n)) : std::sqrt(2.0 / static_cast<double>(n));
      p[k * n + i] = static_cast<float>(s * std::cos(pi * (static_cast<double>(i) + 0.5) * static_cast<double>(k) /
                                                    static_cast<double>(n)));
    }
  return d;
}

at::Tensor dct_chunks(const at::Tensor& chunks_in, const ChunkLayout& l, bool inverse) {
  check_input(chunks_in, "dct_chunks");
  const auto chunks = chunks_in.contiguous();
  if (chunks.dim() != 2 || chunks.size(1) != l.elements())
    throw std::invalid_argument(fmt::format("dct_chunks: expected [chunks, {}]", l.elements()));
  const auto& dr = dct_matrix_on(l.tile_rows, chunks.device());
  const auto& dc = dct_matrix_on(l.tile_cols, chunks.device());
  auto out = at::empty_like(chunks);
  auto scratch = at::empty_like(chunks);
  const std::int64_t count = chunks.size(0);
  dispatch(
      chunks, "dct_chunks",
      [&] {
        cpu::dct_chunks(dr.data_ptr<float>(), dc.data_ptr<float>(), chunks.data_ptr<float>(), count, l.tile_rows,
                        l.tile_cols, inverse, scratch.data_ptr<float>(), out.data_ptr<float>());
      },
      [&](void* stream) {
#if DTSIM_TORCH_CUDA
        cuda::dct_chunks(dr.data_ptr<float>(), dc.data_ptr<float>(), chunks.data_ptr<float>(), count, l.tile_rows,
                         l.tile_cols, inverse, scratch.data_ptr<float>(), out.data_ptr<float>(), stream);
#else
        (void)stream;
#endif
      });
  return out;
}

TopKPayload topk_chunks(const at::Tensor& chunks_in, const ChunkLayout& l, std::int64_t k) {
  check_input(chunks_in, "topk_chunks");
  const auto chunks = chunks_in.contiguous();
  const std::int64_t E = l.elements(), count = chunks.size(0);
  if (chunks.dim() != 2 || chunks.size(1) != E)
    throw std::invalid_argument(fmt::format("topk_chunks: expected [chunks, {}]", E));
  if (k < 1) throw std::invalid_argument(fmt::format("topk_chunks: k {} < 1", k));
  TopKPayload p;
  p.layout = l;
  p.k = std::min(k, E);
  p.values = at::empty({count, p.k}, like(chunks, at::kFloat));
  auto indices = at::empty({count, p.k}, like(chunks, at::kInt));
  const std::int32_t bits = l.index_bits();
  p.index_words = at::empty({(count * p.k * bits + 31) / 32}, like(chunks, at::kInt));
  auto* idx = indices.data_ptr<std::int32_t>();
  auto* words = reinterpret_cast<std::uint32_t*>(p.index_words.data_ptr<std::int32_t>());
  dispatch(
      chunks, "topk_chunks",
      [&] {
        cpu::topk_chunks(chunks.data_ptr<float>(), count, E, p.k, idx, p.values.data_ptr<float>());
        cpu::pack_indices(idx, count * p.k, bits, words);
      },
      [&](void* stream) {
#if DTSIM_TORCH_CUDA
        cuda::topk_chunks(chunks.data_ptr<float>(), count, E, p.k, idx, p.values.data_ptr<float>(), stream);
        cuda::pack_indices(idx, count * p.k, bits, words, stream);
#else
        (void)stream;
#endif
      });
  return p;
}

at::Tensor topk_indices(const TopKPayload& p) {
  const std::int64_t count = p.layout.chunks() * p.k;
  auto indices = at::empty({p.layout.chunks(), p.k}, p.index_words.options());
  const auto* words = reinterpret_cast<const std::uint32_t*>(p.index_words.data_ptr<std::int32_t>());
  dispatch(
      indices, "topk_indices",
      [&] { cpu::unpack_indices(words, count, p.layout.index_bits(), indices.data_ptr<std::int32_t>()); },
      [&](void* stream) {
#if DTSIM_TORCH_CUDA
        cuda::unpack_indices(words, count, p.layout.index_bits(), indices.data_ptr<std::int32_t>(), stream);
#else
        (void)stream;
#endif
      });
  return indices;
}

at::Tensor topk_scatter(const TopKPayload& p) {
  const auto indices = topk_indices(p);
  auto dense = at::zeros({p.layout.chunks(), p.layout.elements()}, p.values.options());
  dispatch(
      dense, "topk_scatter",
      [&] {
        cpu::scatter_chunks(indices.data_ptr<std::int32_t>(), p.values.data_ptr<float>(), p.layout.chunks(),
                            p.layout.elements(), p.k, dense.data_ptr<float>());
      },
      [&](void* stream) {
#if DTSIM_TORCH_CUDA
        cuda::scatter_chunks(indices.data_ptr<std::int32_t>(), p.values.data_ptr<float>(), p.layout.chunks(),
                             p.layout.elements(), p.k, dense.data_ptr<float>(), stream);
#else
        (void)stream;
#endif
      });
  return dense;
}

namespace {

void write_decoded(const at::Tensor& decoded, at::Tensor& out, float weight, bool accumulate, const char* what) {
  check_output(out, decoded.numel(), decoded.device(), what);
  const auto flat = decoded.reshape({-1});
  auto o = out.view({-1});
  // A plain ATen add: one rounding per element on either device (out + weight * d, with the
  // product rounded first as the other codecs' decoders do).
  if (accumulate)
    o.add_(flat * weight);
  else
    o.copy_(flat);
}

}  // namespace

TopKPayload dct_encode(const at::Tensor& x, std::int64_t chunk, std::int64_t k) {
  check_input(x, "dct_encode");
  const auto layout = chunk_layout(x.sizes(), chunk);
  return topk_chunks(dct_chunks(to_chunks(x, layout), layout), layout, k);
}

void dct_decode(const TopKPayload& p, at::Tensor& out, float weight, bool accumulate) {
  const auto decoded = from_chunks(dct_chunks(topk_scatter(p), p.layout, /*inverse=*/true), p.layout);
  write_decoded(decoded, out, weight, accumulate, "dct_decode");
}

TopKPayload sparse_encode(const at::Tensor& x, std::int64_t chunk, std::int64_t k) {
  check_input(x, "sparse_encode");
  const auto layout = chunk_layout(x.sizes(), chunk);
  return topk_chunks(to_chunks(x, layout), layout, k);
}

void sparse_decode(const TopKPayload& p, at::Tensor& out, float weight, bool accumulate) {
  write_decoded(from_chunks(topk_scatter(p), p.layout), out, weight, accumulate, "sparse_decode");
}

}  // namespace dtsim::kernels::llm
