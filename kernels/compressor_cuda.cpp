// Compressor's CUDA path: host-side planning (segment tables, k per segment, random-k
// index draws) and launches of the kernels/cuda kernels on the current stream. Compiled
// only against a CUDA LibTorch (DTSIM_TORCH_CUDA), and compile-checked against the CPU
// one (cmake/DtsimTorchCudaCheck.cmake); fp32 buffers only.
//
// The planning is shared; each kind's launches are its CudaCodec below, the device twin
// of its codecs/ file (kept here, the one file the compile check sees), which the kind's
// registry entry names (codecs/cuda_codec.hpp). A kind without one is refused on CUDA
// tensors.
#include "kernels/compressor.hpp"
#include "kernels/codecs/cuda_codec.hpp"

#if DTSIM_TORCH_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

#include "kernels/codecs/codec.hpp"
#include "kernels/codecs/qsgd.hpp"
#include "kernels/codecs/random_k.hpp"
#include "kernels/codecs/threshold.hpp"
#include "kernels/compressor_kinds.hpp"
#include "kernels/cpu/common.hpp"
#include "kernels/cpu/qsgd.hpp"
#include "kernels/cpu/select.hpp"
#include "kernels/cuda/compress.cuh"
#include "kernels/detail/hash.hpp"

namespace dtsim::kernels {

// The calls a device codec (codecs/cuda_codec.hpp) takes, in the codecs namespace so that
// the twins named by the kinds' registry entries can refer to them.
namespace codecs {

using Workspace = detail::CompressorWorkspace;

// Host tables copied to the front of the device workspace, and scratch regions after them.
struct DeviceTables {
  std::int64_t offsets = 0, slot_begin = 0, keys = 0, tau = 0, partials = 0, norms = 0, counts = 0, indices = 0,
               select = 0, total = 0;
};

// A compress call on the device: the input, its segment tables (host and device) and the
// planned device workspace.
struct CudaCompress {
  const CompressorSpec& spec;
  Workspace& ws;
  const float* x;
  std::int64_t n, L, K;
  const std::int64_t* off;     // host offsets (ws.offsets)
  const std::int64_t* d_off;   // device offsets
  const std::int64_t* d_slot;  // device slot_begin
  std::int64_t slots;
  float* partials;
  std::uint8_t* dev;  // the device workspace, laid out as `t`
  const DeviceTables& t;
  at::Device device;
  cudaStream_t stream;
};

// A decode on the device: the payload's bytes, the dense output and the device scratch
// (the offsets at its front, the index check's word at flag_at, redrawn indices at idx_at).
struct CudaDecode {
  const CompressorSpec& spec;
  Workspace& ws;
  const Payload& payload;
  const std::uint8_t* base;  // payload bytes (device)
  std::int64_t n, L, K_fixed;
  const std::int64_t* off;    // host offsets
  const std::int64_t* d_off;  // device offsets
  float* o;
  float weight;
  bool accumulate;
  std::uint8_t* dev;
  std::int64_t flag_at, idx_at;
  cudaStream_t stream;
  const char* what;
};

}  // namespace codecs

namespace {

using codecs::CudaCodec;
using codecs::CudaCompress;
using codecs::CudaDecode;
using codecs::DeviceTables;

using codecs::ensure_bytes;
using Workspace = detail::CompressorWorkspace;

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(fmt::format("{}: CUDA error {}", what, cudaGetErrorString(e)));
}

std::int64_t align256(std::int64_t b) { return (b + 255) / 256 * 256; }


// --- identity, casts ---------------------------------------------------------------------

void identity_compress(const CudaCompress& c, Payload& out) {
  ensure_bytes(out, 4 * c.n, c.device);
  if (c.n > 0)
    check(cudaMemcpyAsync(out.bytes.data_ptr(), c.x, static_cast<std::size_t>(4 * c.n), cudaMemcpyDeviceToDevice,
                          c.stream),
          "Compressor::compress");
}

void identity_decode(const CudaDecode& d) {
  if (d.accumulate)
    cuda::add_scaled(reinterpret_cast<const float*>(d.base), d.n, d.weight, d.o, d.stream);
  else if (d.n > 0)
    check(cudaMemcpyAsync(d.o, d.base, static_cast<std::size_t>(4 * d.n), cudaMemcpyDeviceToDevice, d.stream),
          "Compressor::decompress");
}

template <bool half>
void cast_compress(const CudaCompress& c, Payload& out) {
  ensure_bytes(out, 2 * c.n, c.device);
  auto* h = static_cast<std::uint16_t*>(out.bytes.data_ptr());
  if constexpr (half)
    cuda::float_to_half(c.x, c.n, h, c.stream);
  else
    cuda::float_to_bfloat16(c.x, c.n, h, c.stream);
}

template <bool half>
void cast_decode(const CudaDecode& d) {
  const auto* h = reinterpret_cast<const std::uint16_t*>(d.base);
  if constexpr (half)
    cuda::half_to_float(h, d.n, d.weight, d.accumulate, d.o, d.stream);
  else
    cuda::bfloat16_to_float(h, d.n, d.weight, d.accumulate, d.o, d.stream);
}

// --- sign, scaled_sign, qsgd ----------------------------------------------------------------

template <bool scaled>
void sign_compress(const CudaCompress& c, Payload& out) {
  const std::int64_t L = c.L;
  ensure_bytes(out, (scaled ? 4 * L : 0) + 4 * ((c.n + 31) / 32), c.device);
  auto* base = static_cast<std::uint8_t*>(out.bytes.data_ptr());
  cuda::pack_signs(c.x, c.n, c.d_off, L, c.d_slot, c.slots, reinterpret_cast<std::uint32_t*>(base + (scaled ? 4 * L : 0)),
                   scaled ? reinterpret_cast<float*>(base) : nullptr, c.partials, c.stream);
}

template <bool scaled>
void sign_decode(const CudaDecode& d) {
  if constexpr (!scaled)
    cuda::decode_signs(reinterpret_cast<const std::uint32_t*>(d.base), d.n, d.d_off, d.L, nullptr, d.weight, d.accumulate,
                       d.o, d.stream);
  else
    cuda::decode_signs(reinterpret_cast<const std::uint32_t*>(d.base + 4 * d.L), d.n, d.d_off, d.L,
                       reinterpret_cast<const float*>(d.base), d.weight, d.accumulate, d.o, d.stream);
}

void qsgd_compress(const CudaCompress& c, Payload& out) {
  const std::int64_t L = c.L;
  const auto& q = compressor_settings<QsgdSettings>(c.spec);
  const int bits = cpu::qsgd_code_bits(q.levels);
  ensure_bytes(out, 4 * L + 4 * ((c.n * bits + 31) / 32), c.device);
  auto* base = static_cast<std::uint8_t*>(out.bytes.data_ptr());
  cuda::qsgd_encode(c.x, c.n, c.d_off, L, c.d_slot, c.slots, reinterpret_cast<const std::uint64_t*>(c.dev + c.t.keys),
                    q.levels, q.tau_rescale ? reinterpret_cast<const double*>(c.dev + c.t.tau) : nullptr,
                    c.partials, reinterpret_cast<float*>(c.dev + c.t.norms), reinterpret_cast<float*>(base),
                    reinterpret_cast<std::uint32_t*>(base + 4 * L), c.stream);
}

void qsgd_decode(const CudaDecode& d) {
  cuda::qsgd_decode(reinterpret_cast<const std::uint32_t*>(d.base + 4 * d.L), d.n, d.d_off, d.L,
                    reinterpret_cast<const float*>(d.base), compressor_settings<QsgdSettings>(d.spec).levels, d.weight, d.accumulate, d.o, d.stream);
}

// --- the sparse kinds ---------------------------------------------------------------------

void top_k_compress(const CudaCompress& c, Payload& out) {
  const std::int64_t K = c.K;
  const auto& k = c.ws.k;
  ensure_bytes(out, 8 * K, c.device);
  auto* base = static_cast<std::uint8_t*>(out.bytes.data_ptr());
  auto* idx = reinterpret_cast<std::uint32_t*>(base);
  auto* val = reinterpret_cast<float*>(base + 4 * K);
  std::int64_t sel = c.t.select;
  for (std::int64_t s = 0; s < c.L; ++s) {
    const std::int64_t ns = c.off[s + 1] - c.off[s];
    cuda::top_k(c.x + c.off[s], ns, k[s + 1] - k[s], c.dev + sel, idx + k[s], val + k[s], c.stream);
    sel += align256(cuda::select_workspace_bytes(ns));
  }
}

void random_k_compress(const CudaCompress& c, Payload& out) {
  const std::int64_t K = c.K, L = c.L;
  const std::int64_t* off = c.off;
  auto& ws = c.ws;
  const auto& k = ws.k;
  const auto& r = compressor_settings<RandomKSettings>(c.spec);
  const bool shared = r.shared_seed;
  ensure_bytes(out, (shared ? 0 : 4 * K) + 4 * K, c.device);
  auto* base = static_cast<std::uint8_t*>(out.bytes.data_ptr());
  ws.indices.resize(static_cast<std::size_t>(K));
  for (std::int64_t s = 0; s < L; ++s)
    cpu::random_k_indices(off[s + 1] - off[s], k[s + 1] - k[s],
                          detail::stream_key(c.spec.seed, out.round, static_cast<std::uint64_t>(s)), ws.select,
                          ws.indices.data() + k[s]);
  auto* idx = shared ? reinterpret_cast<std::uint32_t*>(c.dev + c.t.indices) : reinterpret_cast<std::uint32_t*>(base);
  auto* val = reinterpret_cast<float*>(base + (shared ? 0 : 4 * K));
  if (K > 0)
    check(cudaMemcpyAsync(idx, ws.indices.data(), static_cast<std::size_t>(4 * K), cudaMemcpyHostToDevice, c.stream),
          "Compressor::compress");
  // the host indices buffer must outlive the asynchronous copy from pageable memory
  check(cudaStreamSynchronize(c.stream), "Compressor::compress");
  for (std::int64_t s = 0; s < L; ++s) {
    const std::int64_t ns = off[s + 1] - off[s], ks = k[s + 1] - k[s];
    const float scale =
        r.unbiased && ks > 0 ? static_cast<float>(static_cast<double>(ns) / static_cast<double>(ks)) : 1.0f;
    cuda::gather(c.x + off[s], idx + k[s], ks, scale, val + k[s], c.stream);
  }
}

void threshold_compress(const CudaCompress& c, Payload& out) {
  const std::int64_t L = c.L;
  const std::int64_t* off = c.off;
  auto& k = c.ws.k;  // recomputed: the counts are the data's
  const auto thr = static_cast<float>(compressor_settings<ThresholdSettings>(c.spec).threshold);
  std::int64_t sel = c.t.select;
  for (std::int64_t s = 0; s < L; ++s) {
    const std::int64_t ns = off[s + 1] - off[s];
    k[s + 1] = k[s] + cuda::threshold_count(c.x + off[s], ns, thr, c.dev + sel, c.stream);
    sel += align256(cuda::select_workspace_bytes(ns));
  }
  const std::int64_t KK = k[L];
  ensure_bytes(out, 4 * L + 8 * KK, c.device);
  auto* base = static_cast<std::uint8_t*>(out.bytes.data_ptr());
  std::vector<std::uint32_t> counts(static_cast<std::size_t>(L));
  for (std::int64_t s = 0; s < L; ++s) counts[s] = static_cast<std::uint32_t>(k[s + 1] - k[s]);
  if (L > 0)
    check(cudaMemcpyAsync(base, counts.data(), static_cast<std::size_t>(4 * L), cudaMemcpyHostToDevice, c.stream),
          "Compressor::compress");
  auto* idx = reinterpret_cast<std::uint32_t*>(base + 4 * L);
  auto* val = reinterpret_cast<float*>(base + 4 * L + 4 * KK);
  sel = c.t.select;
  for (std::int64_t s = 0; s < L; ++s) {
    const std::int64_t ns = off[s + 1] - off[s];
    cuda::threshold_select(c.x + off[s], ns, thr, c.dev + sel, idx + k[s], val + k[s], c.stream);
    sel += align256(cuda::select_workspace_bytes(ns));
  }
  check(cudaStreamSynchronize(c.stream), "Compressor::compress");  // `counts` is pageable host memory
}

// --- one_bit, terngrad, natural --------------------------------------------------------------

void one_bit_compress(const CudaCompress& c, Payload& out) {
  const std::int64_t L = c.L;
  ensure_bytes(out, 8 * L + 4 * ((c.n + 31) / 32), c.device);
  auto* base = static_cast<std::uint8_t*>(out.bytes.data_ptr());
  cuda::one_bit_encode(c.x, c.n, c.d_off, L, c.d_slot, c.slots, c.partials,
                       reinterpret_cast<unsigned long long*>(c.dev + c.t.counts), reinterpret_cast<float*>(base),
                       reinterpret_cast<std::uint32_t*>(base + 8 * L), c.stream);
}

void one_bit_decode(const CudaDecode& d) {
  cuda::one_bit_decode(reinterpret_cast<const std::uint32_t*>(d.base + 8 * d.L), d.n, d.d_off, d.L,
                       reinterpret_cast<const float*>(d.base), d.weight, d.accumulate, d.o, d.stream);
}

void terngrad_compress(const CudaCompress& c, Payload& out) {
  const std::int64_t L = c.L;
  ensure_bytes(out, 4 * L + 4 * ((c.n + 15) / 16), c.device);
  auto* base = static_cast<std::uint8_t*>(out.bytes.data_ptr());
  cuda::terngrad_encode(c.x, c.n, c.d_off, L, reinterpret_cast<const std::uint64_t*>(c.dev + c.t.keys),
                        reinterpret_cast<float*>(base), reinterpret_cast<std::uint32_t*>(base + 4 * L), c.stream);
}

void terngrad_decode(const CudaDecode& d) {
  cuda::terngrad_decode(reinterpret_cast<const std::uint32_t*>(d.base + 4 * d.L), d.n, d.d_off, d.L,
                        reinterpret_cast<const float*>(d.base), d.weight, d.accumulate, d.o, d.stream);
}

void natural_compress(const CudaCompress& c, Payload& out) {
  const std::int64_t sign_bytes = 4 * ((c.n + 31) / 32);
  ensure_bytes(out, sign_bytes + c.n, c.device);
  auto* base = static_cast<std::uint8_t*>(out.bytes.data_ptr());
  cuda::natural_encode(c.x, c.n, c.d_off, c.L, reinterpret_cast<const std::uint64_t*>(c.dev + c.t.keys),
                       reinterpret_cast<std::uint32_t*>(base), base + sign_bytes, c.stream);
}

void natural_decode(const CudaDecode& d) {
  cuda::natural_decode(reinterpret_cast<const std::uint32_t*>(d.base), d.base + 4 * ((d.n + 31) / 32), d.n, d.weight,
                       d.accumulate, d.o, d.stream);
}

// Every index inside its segment, as the CPU decoders check before writing anything,
// then the scatter (segment s's block of indices and values is [k[s], k[s + 1])).
void scatter_segments(const CudaDecode& d, const std::uint32_t* idx, const float* val) {
  const std::int64_t L = d.L;
  const std::int64_t* off = d.off;
  const auto& k = d.ws.k;
  auto* first = reinterpret_cast<unsigned long long*>(d.dev + d.flag_at);
  check(cudaMemsetAsync(first, 0xFF, sizeof(unsigned long long), d.stream), d.what);
  for (std::int64_t s = 0; s < L; ++s)
    cuda::first_out_of_range(idx + k[s], k[s + 1] - k[s], off[s + 1] - off[s], static_cast<std::uint64_t>(k[s]), first,
                             d.stream);
  unsigned long long bad = 0;
  check(cudaMemcpyAsync(&bad, first, sizeof bad, cudaMemcpyDeviceToHost, d.stream), d.what);
  check(cudaStreamSynchronize(d.stream), d.what);
  if (bad != ~0ULL) {
    const auto j = static_cast<std::int64_t>(bad);
    const auto s = static_cast<std::int64_t>(std::upper_bound(k.begin(), k.begin() + L + 1, j) - k.begin()) - 1;
    std::uint32_t value = 0;
    check(cudaMemcpy(&value, idx + j, sizeof value, cudaMemcpyDeviceToHost), d.what);
    throw std::invalid_argument(
        fmt::format("{}: index {} out of range in segment {} of {} elements", d.what, value, s, off[s + 1] - off[s]));
  }
  if (!d.accumulate && d.n > 0) check(cudaMemsetAsync(d.o, 0, static_cast<std::size_t>(4 * d.n), d.stream), d.what);
  for (std::int64_t s = 0; s < L; ++s)
    cuda::scatter(idx + k[s], val + k[s], k[s + 1] - k[s], d.weight, d.accumulate, d.o + off[s], d.stream);
}

void indices_then_values_decode(const CudaDecode& d) {
  scatter_segments(d, reinterpret_cast<const std::uint32_t*>(d.base), reinterpret_cast<const float*>(d.base + 4 * d.K_fixed));
}

void random_k_decode(const CudaDecode& d) {
  if (!compressor_settings<RandomKSettings>(d.spec).shared_seed) return indices_then_values_decode(d);
  auto& ws = d.ws;
  const auto& k = ws.k;
  ws.indices.resize(static_cast<std::size_t>(d.K_fixed));
  for (std::int64_t s = 0; s < d.L; ++s)
    cpu::random_k_indices(d.off[s + 1] - d.off[s], k[s + 1] - k[s],
                          detail::stream_key(d.spec.seed, d.payload.round, static_cast<std::uint64_t>(s)), ws.select,
                          ws.indices.data() + k[s]);
  if (d.K_fixed > 0)
    check(cudaMemcpyAsync(d.dev + d.idx_at, ws.indices.data(), static_cast<std::size_t>(4 * d.K_fixed),
                          cudaMemcpyHostToDevice, d.stream),
          "Compressor::decompress");
  check(cudaStreamSynchronize(d.stream), "Compressor::decompress");
  scatter_segments(d, reinterpret_cast<const std::uint32_t*>(d.dev + d.idx_at), reinterpret_cast<const float*>(d.base));
}

void threshold_decode(const CudaDecode& d) {
  const std::int64_t L = d.L;
  const std::int64_t* off = d.off;
  auto& k = d.ws.k;
  std::vector<std::uint32_t> counts(static_cast<std::size_t>(L));
  if (L > 0)
    check(cudaMemcpyAsync(counts.data(), d.base, static_cast<std::size_t>(4 * L), cudaMemcpyDeviceToHost, d.stream),
          "Compressor::decompress");
  check(cudaStreamSynchronize(d.stream), "Compressor::decompress");
  for (std::int64_t s = 0; s < L; ++s) {
    if (counts[s] > static_cast<std::uint64_t>(off[s + 1] - off[s]))
      throw std::invalid_argument(fmt::format("Compressor::decompress: segment {} claims {} of its {} elements", s,
                                              counts[s], off[s + 1] - off[s]));
    k[s + 1] = k[s] + counts[s];
  }
  if (d.payload.bytes.numel() != 4 * L + 8 * k[L])
    throw std::invalid_argument("Compressor::decompress: threshold payload size disagrees with its counts");
  scatter_segments(d, reinterpret_cast<const std::uint32_t*>(d.base + 4 * L),
                   reinterpret_cast<const float*>(d.base + 4 * L + 4 * k[L]));
}

// The kind's device twin, as its registry entry names it.
const CudaCodec& cuda_codec_or_throw(const CompressorKindInfo& kind, const char* what) {
  if (const auto* codec = kind.cuda_codec; codec && codec->compress) return *codec;
  throw std::invalid_argument(fmt::format("{}: {} has no CUDA path", what, kind.name));
}

}  // namespace

// Each kind's device twin, named by its registry entry (beside its codec in codecs/).
namespace codecs {
extern const CudaCodec identity_cuda_codec{.compress = identity_compress, .decode = identity_decode};
extern const CudaCodec fp16_cuda_codec{.compress = cast_compress<true>, .decode = cast_decode<true>};
extern const CudaCodec bf16_cuda_codec{.compress = cast_compress<false>, .decode = cast_decode<false>};
extern const CudaCodec sign_cuda_codec{.compress = sign_compress<false>, .decode = sign_decode<false>};
extern const CudaCodec scaled_sign_cuda_codec{.compress = sign_compress<true>, .decode = sign_decode<true>};
extern const CudaCodec qsgd_cuda_codec{.compress = qsgd_compress, .decode = qsgd_decode};
extern const CudaCodec top_k_cuda_codec{.selects = true, .compress = top_k_compress, .decode = indices_then_values_decode};
extern const CudaCodec random_k_cuda_codec{.compress = random_k_compress, .decode = random_k_decode};
extern const CudaCodec threshold_cuda_codec{.selects = true, .compress = threshold_compress, .decode = threshold_decode};
extern const CudaCodec one_bit_cuda_codec{.counts = true, .compress = one_bit_compress, .decode = one_bit_decode};
extern const CudaCodec terngrad_cuda_codec{.compress = terngrad_compress, .decode = terngrad_decode};
extern const CudaCodec natural_cuda_codec{.compress = natural_compress, .decode = natural_decode};
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
  t.tau = align256(t.keys + 8 * L);
  const std::int64_t table_bytes = align256(t.tau + 8 * L);
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
  // Only qsgd reads the tau table; the other kinds get the default levels' values.
  const auto* qsgd = std::any_cast<QsgdSettings>(&spec_.settings);
  const double tau_levels = qsgd ? qsgd->levels : QsgdSettings{}.levels;
  for (std::int64_t s = 0; s < L; ++s) {
    const std::uint64_t key = detail::stream_key(spec_.seed, out.round, static_cast<std::uint64_t>(s));
    const double d = static_cast<double>(off[s + 1] - off[s]), sl = tau_levels;
    const double tau_den = std::min(d / (sl * sl), std::sqrt(d) / sl) + 1.0;
    std::memcpy(host.data() + t.keys + 8 * s, &key, 8);
    std::memcpy(host.data() + t.tau + 8 * s, &tau_den, 8);
  }
  // From pageable memory: the call returns once the bytes are staged, so `host` may go.
  check(cudaMemcpyAsync(dev, host.data(), host.size(), cudaMemcpyHostToDevice, stream), "Compressor::compress");
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
    check(cudaMemcpyAsync(dev, off, static_cast<std::size_t>(8 * (L + 1)), cudaMemcpyHostToDevice, stream), what);
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
#else
// Without CUDA the twins launch nothing (a CPU tensor never takes the CUDA path), so the
// registry names the same objects in every build.
namespace dtsim::kernels::codecs {
extern const CudaCodec identity_cuda_codec{}, fp16_cuda_codec{}, bf16_cuda_codec{}, sign_cuda_codec{}, scaled_sign_cuda_codec{},
    qsgd_cuda_codec{}, top_k_cuda_codec{}, random_k_cuda_codec{}, threshold_cuda_codec{}, one_bit_cuda_codec{},
    terngrad_cuda_codec{}, natural_cuda_codec{};
}  // namespace dtsim::kernels::codecs
#endif  // DTSIM_TORCH_CUDA
