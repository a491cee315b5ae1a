// Compressor's CUDA path: host-side planning (segment tables, k per segment, the device
// workspace) shared by every kind, then the kind's launches on the current stream: its
// CudaCodec, the device twin defined beside its CPU codec in codecs/ and named by its
// registry entry (codecs/cuda_codec.hpp, codecs/cuda_calls.hpp). A kind without one is
// refused on CUDA tensors. Compiled only against a CUDA LibTorch (DTSIM_TORCH_CUDA), and
// compile-checked against the CPU one, as the codecs are (cmake/DtsimTorchCudaCheck.cmake);
// fp32 buffers only.
#include "kernels/compressor.hpp"
#include "kernels/codecs/cuda_codec.hpp"

#if DTSIM_TORCH_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

#include "kernels/codecs/codec.hpp"
#include "kernels/codecs/cuda_calls.hpp"
#include "kernels/compressor_kinds.hpp"
#include "kernels/cpu/common.hpp"
#include "kernels/cuda/compress.cuh"
#include "kernels/detail/hash.hpp"

namespace dtsim::kernels {

namespace {

using codecs::CudaCodec;
using codecs::CudaCompress;
using codecs::CudaDecode;
using codecs::DeviceTables;

using codecs::align256;
using codecs::cuda_check;
using Workspace = detail::CompressorWorkspace;

// The kind's device twin, as its registry entry names it.
const CudaCodec& cuda_codec_or_throw(const CompressorKindInfo& kind, const char* what) {
  if (const auto* codec = kind.cuda_codec; codec && codec->compress) return *codec;
  throw std::invalid_argument(fmt::format("{}: {} has no CUDA path", what, kind.name));
}

}  // namespace

namespace codecs {

void scatter_segments(const CudaDecode& d, const std::uint32_t* idx, const float* val) {
  const std::int64_t L = d.L;
  const std::int64_t* off = d.off;
  const auto& k = d.ws.k;
  auto* first = reinterpret_cast<unsigned long long*>(d.dev + d.flag_at);
  cuda_check(cudaMemsetAsync(first, 0xFF, sizeof(unsigned long long), d.stream), d.what);
  for (std::int64_t s = 0; s < L; ++s)
    cuda::first_out_of_range(idx + k[s], k[s + 1] - k[s], off[s + 1] - off[s], static_cast<std::uint64_t>(k[s]), first,
                             d.stream);
  unsigned long long bad = 0;
  cuda_check(cudaMemcpyAsync(&bad, first, sizeof bad, cudaMemcpyDeviceToHost, d.stream), d.what);
  cuda_check(cudaStreamSynchronize(d.stream), d.what);
  if (bad != ~0ULL) {
    const auto j = static_cast<std::int64_t>(bad);
    const auto s = static_cast<std::int64_t>(std::upper_bound(k.begin(), k.begin() + L + 1, j) - k.begin()) - 1;
    std::uint32_t value = 0;
    cuda_check(cudaMemcpy(&value, idx + j, sizeof value, cudaMemcpyDeviceToHost), d.what);
    throw std::invalid_argument(
        fmt::format("{}: index {} out of range in segment {} of {} elements", d.what, value, s, off[s + 1] - off[s]));
  }
  if (!d.accumulate && d.n > 0) cuda_check(cudaMemsetAsync(d.o, 0, static_cast<std::size_t>(4 * d.n), d.stream), d.what);
  for (std::int64_t s = 0; s < L; ++s)
    cuda::scatter(idx + k[s], val + k[s], k[s + 1] - k[s], d.weight, d.accumulate, d.o + off[s], d.stream);
}

void indices_then_values_decode(const CudaDecode& d) {
  scatter_segments(d, reinterpret_cast<const std::uint32_t*>(d.base), reinterpret_cast<const float*>(d.base + 4 * d.K_fixed));
}

}  // namespace codecs

void Compressor::check_cuda_path(const char* what) const { cuda_codec_or_throw(*info_, what); }

void Compressor::compress_cuda(const at::Tensor& flat, Payload& out) {
  if (flat.scalar_type() != at::kFloat)
    throw std::invalid_argument("Compressor::compress: the CUDA path compresses fp32 buffers only");
  const CudaCodec& codec = cuda_codec_or_throw(*info_, "Compressor::compress");
  const auto device = flat.device();
  const c10::cuda::CUDAGuard on_device(device);  // the launches go to flat's device
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream(device.index()).stream();
  const std::int64_t n = flat.numel();
  const auto L = ws_.segment_count();
  const std::int64_t* off = ws_.offsets.data();
  const std::int64_t K = ws_.k[static_cast<std::size_t>(L)];
  const float* x = flat.data_ptr<float>();

  // Plan the workspace: tables first (copied from the host), then scratch.
  ws_.slot_begin.resize(static_cast<std::size_t>(L) + 1);
  const std::int64_t slots = cpu::partial_slots(off, L, ws_.slot_begin.data());
  // Selection scratch (one region per segment: threshold counts, then selects) only for
  // the kinds that select, and device indices only for shared-seed random-k (the only
  // kind that reads shared_seed): sized for every kind, they were about 8 KB per QSGD
  // bucket and 4 n bytes (1 GiB at 2^28).
  const bool device_indices = info_->shares_draws && info_->shares_draws(spec_);
  std::int64_t select_total = 0;
  for (std::int64_t s = 0; codec.selects && s < L; ++s)
    select_total += align256(cuda::select_workspace_bytes(off[s + 1] - off[s]));
  DeviceTables t;
  t.offsets = 0;
  t.slot_begin = align256(t.offsets + 8 * (L + 1));
  t.keys = align256(t.slot_begin + 8 * (L + 1));
  t.segment_factors = align256(t.keys + 8 * L);
  const std::int64_t table_bytes = align256(t.segment_factors + 8 * L);
  t.partials = table_bytes;
  t.norms = align256(t.partials + 4 * 2 * slots);
  t.counts = align256(t.norms + 4 * L);
  t.indices = align256(t.counts + (codec.counts ? 8 * L : 0));
  t.select = align256(t.indices + (device_indices ? 4 * K : 0));
  t.total = t.select + select_total;
  if (!ws_.device.defined() || ws_.device.device() != device || ws_.device.numel() < t.total)
    ws_.device = at::empty({t.total}, at::TensorOptions().dtype(at::kByte).device(device));
  auto* dev = static_cast<std::uint8_t*>(ws_.device.data_ptr());

  std::vector<std::uint8_t> host(static_cast<std::size_t>(table_bytes), 0);
  std::memcpy(host.data() + t.offsets, off, static_cast<std::size_t>(8 * (L + 1)));
  std::memcpy(host.data() + t.slot_begin, ws_.slot_begin.data(), static_cast<std::size_t>(8 * (L + 1)));
  for (std::int64_t s = 0; s < L; ++s) {
    const std::uint64_t key = detail::stream_key(spec_.seed, out.round, static_cast<std::uint64_t>(s));
    const double factor = codec.segment_factor ? codec.segment_factor(spec_, off[s + 1] - off[s]) : 0.0;
    std::memcpy(host.data() + t.keys + 8 * s, &key, 8);
    std::memcpy(host.data() + t.segment_factors + 8 * s, &factor, 8);
  }
  // From pageable memory: the call returns once the bytes are staged, so `host` may go.
  cuda_check(cudaMemcpyAsync(dev, host.data(), host.size(), cudaMemcpyHostToDevice, stream), "Compressor::compress");
  ws_.device_offsets.assign(off, off + L + 1);  // what decode_cuda finds at the front of the workspace
  ws_.device_offsets_in = dev;

  codec.compress(CudaCompress{.spec = spec_,
                              .ws = ws_,
                              .x = x,
                              .n = n,
                              .L = L,
                              .K = K,
                              .off = off,
                              .d_off = reinterpret_cast<const std::int64_t*>(dev + t.offsets),
                              .d_slot = reinterpret_cast<const std::int64_t*>(dev + t.slot_begin),
                              .slots = slots,
                              .partials = reinterpret_cast<float*>(dev + t.partials),
                              .dev = dev,
                              .t = t,
                              .device = device,
                              .stream = stream},
                 out);
}

void Compressor::decode_cuda(const Payload& payload, float weight, bool accumulate, at::Tensor& dense) {
  if (payload.dtype != at::kFloat)
    throw std::invalid_argument("Compressor::decompress: the CUDA path decodes fp32 buffers only");
  const char* what = accumulate ? "Compressor::decompress_add" : "Compressor::decompress";
  const CudaCodec& codec = cuda_codec_or_throw(*info_, what);
  const auto device = dense.device();
  const c10::cuda::CUDAGuard on_device(device);
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream(device.index()).stream();
  const auto L = ws_.segment_count();
  const std::int64_t* off = ws_.offsets.data();

  // Device copy of the offsets, the index check's word and, for shared-seed random-k,
  // the redrawn indices.
  const std::int64_t K_fixed = ws_.k[static_cast<std::size_t>(L)];
  const std::int64_t flag_at = align256(8 * (L + 1));
  const std::int64_t idx_at = flag_at + 256;
  const bool device_indices = info_->shares_draws && info_->shares_draws(spec_);
  const std::int64_t need = idx_at + (device_indices ? 4 * K_fixed : 0);
  if (!ws_.device.defined() || ws_.device.device() != device || ws_.device.numel() < need)
    ws_.device = at::empty({need}, at::TensorOptions().dtype(at::kByte).device(device));
  auto* dev = static_cast<std::uint8_t*>(ws_.device.data_ptr());
  if (ws_.device_offsets_in != dev || ws_.device_offsets != ws_.offsets) {
    // From pageable memory: staged before the call returns (and, there, after a stream
    // synchronization), so the host offsets may change afterwards.
    cuda_check(cudaMemcpyAsync(dev, off, static_cast<std::size_t>(8 * (L + 1)), cudaMemcpyHostToDevice, stream), what);
    ws_.device_offsets = ws_.offsets;
    ws_.device_offsets_in = dev;
  }

  codec.decode(CudaDecode{.spec = spec_,
                          .ws = ws_,
                          .payload = payload,
                          .base = static_cast<const std::uint8_t*>(payload.bytes.data_ptr()),
                          .n = payload.numel,
                          .L = L,
                          .K_fixed = K_fixed,
                          .off = off,
                          .d_off = reinterpret_cast<const std::int64_t*>(dev),
                          .o = dense.data_ptr<float>(),
                          .weight = weight,
                          .accumulate = accumulate,
                          .dev = dev,
                          .flag_at = flag_at,
                          .idx_at = idx_at,
                          .stream = stream,
                          .what = what});
}

}  // namespace dtsim::kernels
#endif  // DTSIM_TORCH_CUDA
