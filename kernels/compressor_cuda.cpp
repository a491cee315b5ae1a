// Compressor's CUDA path: host-side planning (segment tables, k per segment, random-k
// index draws) and launches of the kernels/cuda kernels on the current stream. Compiled
// only against a CUDA LibTorch (DTSIM_TORCH_CUDA); fp32 buffers only.
#include "kernels/compressor.hpp"

#if DTSIM_TORCH_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

#include "kernels/cpu/common.hpp"
#include "kernels/cpu/qsgd.hpp"
#include "kernels/cpu/select.hpp"
#include "kernels/cuda/compress.cuh"
#include "kernels/detail/hash.hpp"

namespace dtsim::kernels {

namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(fmt::format("{}: CUDA error {}", what, cudaGetErrorString(e)));
}

std::int64_t align256(std::int64_t b) { return (b + 255) / 256 * 256; }

// Host tables copied to the front of the device workspace, and scratch regions after them.
struct DeviceTables {
  std::int64_t offsets = 0, slot_begin = 0, keys = 0, tau = 0, partials = 0, norms = 0, indices = 0, select = 0,
               total = 0;
};

void ensure_payload(Payload& out, std::int64_t nbytes, const at::Device& device) {
  if (out.bytes.defined() && out.bytes.device() == device && out.bytes.scalar_type() == at::kByte &&
      out.bytes.dim() == 1 && out.bytes.is_contiguous() && out.bytes.storage_offset() == 0) {
    out.bytes.resize_({nbytes});
  } else {
    out.bytes = at::empty({nbytes}, at::TensorOptions().dtype(at::kByte).device(device));
  }
}

}  // namespace

void Compressor::compress_cuda(const at::Tensor& flat, Payload& out) {
  if (flat.scalar_type() != at::kFloat)
    throw std::invalid_argument("Compressor::compress: the CUDA path compresses fp32 buffers only");
  const auto device = flat.device();
  const c10::cuda::CUDAGuard on_device(device);  // the launches go to flat's device
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream(device.index()).stream();
  const std::int64_t n = flat.numel();
  const auto L = static_cast<std::int64_t>(offsets_.size()) - 1;
  const std::int64_t* off = offsets_.data();
  const std::int64_t K = k_[static_cast<std::size_t>(L)];
  const float* x = flat.data_ptr<float>();
  const auto kind = spec_.kind;

  // Plan the workspace: tables first (copied from the host), then scratch.
  slot_begin_.resize(static_cast<std::size_t>(L) + 1);
  const std::int64_t slots = cpu::partial_slots(off, L, slot_begin_.data());
  // Selection scratch (one region per segment: threshold counts, then selects) only for
  // the kinds that select, and device indices only for shared-seed random-k: sized for
  // every kind, they were about 8 KB per QSGD bucket and 4 n bytes (1 GiB at 2^28).
  const bool selects = kind == CompressorKind::top_k || kind == CompressorKind::threshold;
  const bool device_indices = kind == CompressorKind::random_k && spec_.shared_seed;
  std::int64_t select_total = 0;
  for (std::int64_t s = 0; selects && s < L; ++s) select_total += align256(cuda::select_workspace_bytes(off[s + 1] - off[s]));
  DeviceTables t;
  t.offsets = 0;
  t.slot_begin = align256(t.offsets + 8 * (L + 1));
  t.keys = align256(t.slot_begin + 8 * (L + 1));
  t.tau = align256(t.keys + 8 * L);
  const std::int64_t table_bytes = align256(t.tau + 8 * L);
  t.partials = table_bytes;
  t.norms = align256(t.partials + 4 * 2 * slots);
  t.indices = align256(t.norms + 4 * L);
  t.select = align256(t.indices + (device_indices ? 4 * K : 0));
  t.total = t.select + select_total;
  if (!device_ws_.defined() || device_ws_.device() != device || device_ws_.numel() < t.total)
    device_ws_ = at::empty({t.total}, at::TensorOptions().dtype(at::kByte).device(device));
  auto* ws = static_cast<std::uint8_t*>(device_ws_.data_ptr());

  std::vector<std::uint8_t> host(static_cast<std::size_t>(table_bytes), 0);
  std::memcpy(host.data() + t.offsets, off, static_cast<std::size_t>(8 * (L + 1)));
  std::memcpy(host.data() + t.slot_begin, slot_begin_.data(), static_cast<std::size_t>(8 * (L + 1)));
  for (std::int64_t s = 0; s < L; ++s) {
    const std::uint64_t key = detail::stream_key(spec_.seed, out.round, static_cast<std::uint64_t>(s));
    const double d = static_cast<double>(off[s + 1] - off[s]), sl = spec_.levels;
    const double tau_den = std::min(d / (sl * sl), std::sqrt(d) / sl) + 1.0;
    std::memcpy(host.data() + t.keys + 8 * s, &key, 8);
    std::memcpy(host.data() + t.tau + 8 * s, &tau_den, 8);
  }
  // From pageable memory: the call returns once the bytes are staged, so `host` may go.
  check(cudaMemcpyAsync(ws, host.data(), host.size(), cudaMemcpyHostToDevice, stream), "Compressor::compress");
  device_offsets_.assign(off, off + L + 1);  // what decode_cuda finds at the front of ws
  device_offsets_in_ = ws;
  const auto* d_off = reinterpret_cast<const std::int64_t*>(ws + t.offsets);
  const auto* d_slot = reinterpret_cast<const std::int64_t*>(ws + t.slot_begin);
  auto* partials = reinterpret_cast<float*>(ws + t.partials);

  switch (kind) {
    case CompressorKind::identity:
      ensure_payload(out, 4 * n, device);
      if (n > 0)
        check(cudaMemcpyAsync(out.bytes.data_ptr(), x, static_cast<std::size_t>(4 * n), cudaMemcpyDeviceToDevice, stream),
              "Compressor::compress");
      return;
    case CompressorKind::fp16:
    case CompressorKind::bf16: {
      ensure_payload(out, 2 * n, device);
      auto* h = static_cast<std::uint16_t*>(out.bytes.data_ptr());
      if (kind == CompressorKind::fp16)
        cuda::float_to_half(x, n, h, stream);
      else
        cuda::float_to_bfloat16(x, n, h, stream);
      return;
    }
    case CompressorKind::sign:
    case CompressorKind::scaled_sign: {
      const bool scaled = kind == CompressorKind::scaled_sign;
      ensure_payload(out, (scaled ? 4 * L : 0) + 4 * ((n + 31) / 32), device);
      auto* base = static_cast<std::uint8_t*>(out.bytes.data_ptr());
      cuda::pack_signs(x, n, d_off, L, d_slot, slots, reinterpret_cast<std::uint32_t*>(base + (scaled ? 4 * L : 0)),
                       scaled ? reinterpret_cast<float*>(base) : nullptr, partials, stream);
      return;
    }
    case CompressorKind::qsgd: {
      const int bits = cpu::qsgd_code_bits(spec_.levels);
      ensure_payload(out, 4 * L + 4 * ((n * bits + 31) / 32), device);
      auto* base = static_cast<std::uint8_t*>(out.bytes.data_ptr());
      cuda::qsgd_encode(x, n, d_off, L, d_slot, slots, reinterpret_cast<const std::uint64_t*>(ws + t.keys),
                        spec_.levels, spec_.tau_rescale ? reinterpret_cast<const double*>(ws + t.tau) : nullptr,
                        partials, reinterpret_cast<float*>(ws + t.norms), reinterpret_cast<float*>(base),
                        reinterpret_cast<std::uint32_t*>(base + 4 * L), stream);
      return;
    }
    case CompressorKind::top_k: {
      ensure_payload(out, 8 * K, device);
      auto* base = static_cast<std::uint8_t*>(out.bytes.data_ptr());
      auto* idx = reinterpret_cast<std::uint32_t*>(base);
      auto* val = reinterpret_cast<float*>(base + 4 * K);
      std::int64_t sel = t.select;
      for (std::int64_t s = 0; s < L; ++s) {
        const std::int64_t ns = off[s + 1] - off[s];
        cuda::top_k(x + off[s], ns, k_[s + 1] - k_[s], ws + sel, idx + k_[s], val + k_[s], stream);
        sel += align256(cuda::select_workspace_bytes(ns));
      }
      return;
    }
    case CompressorKind::random_k: {
      const bool shared = spec_.shared_seed;
      ensure_payload(out, (shared ? 0 : 4 * K) + 4 * K, device);
      auto* base = static_cast<std::uint8_t*>(out.bytes.data_ptr());
      indices_.resize(static_cast<std::size_t>(K));
      for (std::int64_t s = 0; s < L; ++s)
        cpu::random_k_indices(off[s + 1] - off[s], k_[s + 1] - k_[s],
                              detail::stream_key(spec_.seed, out.round, static_cast<std::uint64_t>(s)), select_,
                              indices_.data() + k_[s]);
      auto* idx = shared ? reinterpret_cast<std::uint32_t*>(ws + t.indices) : reinterpret_cast<std::uint32_t*>(base);
      auto* val = reinterpret_cast<float*>(base + (shared ? 0 : 4 * K));
      if (K > 0)
        check(cudaMemcpyAsync(idx, indices_.data(), static_cast<std::size_t>(4 * K), cudaMemcpyHostToDevice, stream),
              "Compressor::compress");
      // the host indices_ buffer must outlive the asynchronous copy from pageable memory
      check(cudaStreamSynchronize(stream), "Compressor::compress");
      for (std::int64_t s = 0; s < L; ++s) {
        const std::int64_t ns = off[s + 1] - off[s], ks = k_[s + 1] - k_[s];
        const float scale =
            spec_.unbiased && ks > 0 ? static_cast<float>(static_cast<double>(ns) / static_cast<double>(ks)) : 1.0f;
        cuda::gather(x + off[s], idx + k_[s], ks, scale, val + k_[s], stream);
      }
      return;
    }
    case CompressorKind::threshold: {
      const auto thr = static_cast<float>(spec_.threshold);
      std::int64_t sel = t.select;
      for (std::int64_t s = 0; s < L; ++s) {
        const std::int64_t ns = off[s + 1] - off[s];
        k_[s + 1] = k_[s] + cuda::threshold_count(x + off[s], ns, thr, ws + sel, stream);
        sel += align256(cuda::select_workspace_bytes(ns));
      }
      const std::int64_t KK = k_[L];
      ensure_payload(out, 4 * L + 8 * KK, device);
      auto* base = static_cast<std::uint8_t*>(out.bytes.data_ptr());
      std::vector<std::uint32_t> counts(static_cast<std::size_t>(L));
      for (std::int64_t s = 0; s < L; ++s) counts[s] = static_cast<std::uint32_t>(k_[s + 1] - k_[s]);
      if (L > 0)
        check(cudaMemcpyAsync(base, counts.data(), static_cast<std::size_t>(4 * L), cudaMemcpyHostToDevice, stream),
              "Compressor::compress");
      auto* idx = reinterpret_cast<std::uint32_t*>(base + 4 * L);
      auto* val = reinterpret_cast<float*>(base + 4 * L + 4 * KK);
      sel = t.select;
      for (std::int64_t s = 0; s < L; ++s) {
        const std::int64_t ns = off[s + 1] - off[s];
        cuda::threshold_select(x + off[s], ns, thr, ws + sel, idx + k_[s], val + k_[s], stream);
        sel += align256(cuda::select_workspace_bytes(ns));
      }
      check(cudaStreamSynchronize(stream), "Compressor::compress");  // `counts` is pageable host memory
      return;
    }
  }
}

void Compressor::decode_cuda(const Payload& payload, float weight, bool accumulate, at::Tensor& dense) {
  if (payload.dtype != at::kFloat)
    throw std::invalid_argument("Compressor::decompress: the CUDA path decodes fp32 buffers only");
  const char* what = accumulate ? "Compressor::decompress_add" : "Compressor::decompress";
  const auto device = dense.device();
  const c10::cuda::CUDAGuard on_device(device);
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream(device.index()).stream();
  const std::int64_t n = payload.numel;
  const auto L = static_cast<std::int64_t>(offsets_.size()) - 1;
  const std::int64_t* off = offsets_.data();
  const auto* base = static_cast<const std::uint8_t*>(payload.bytes.data_ptr());
  float* o = dense.data_ptr<float>();
  const auto kind = spec_.kind;

  // Device copy of the offsets, the index check's word and, for shared-seed random-k,
  // the redrawn indices.
  const std::int64_t K_fixed = k_[static_cast<std::size_t>(L)];
  const std::int64_t flag_at = align256(8 * (L + 1));
  const std::int64_t idx_at = flag_at + 256;
  const bool device_indices = kind == CompressorKind::random_k && spec_.shared_seed;
  const std::int64_t need = idx_at + (device_indices ? 4 * K_fixed : 0);
  if (!device_ws_.defined() || device_ws_.device() != device || device_ws_.numel() < need)
    device_ws_ = at::empty({need}, at::TensorOptions().dtype(at::kByte).device(device));
  auto* ws = static_cast<std::uint8_t*>(device_ws_.data_ptr());
  if (device_offsets_in_ != ws || device_offsets_ != offsets_) {
    // From pageable memory: staged before the call returns (and, there, after a stream
    // synchronization), so offsets_ may change afterwards.
    check(cudaMemcpyAsync(ws, off, static_cast<std::size_t>(8 * (L + 1)), cudaMemcpyHostToDevice, stream), what);
    device_offsets_ = offsets_;
    device_offsets_in_ = ws;
  }
  const auto* d_off = reinterpret_cast<const std::int64_t*>(ws);

  switch (kind) {
    case CompressorKind::identity:
      if (accumulate)
        cuda::add_scaled(reinterpret_cast<const float*>(base), n, weight, o, stream);
      else if (n > 0)
        check(cudaMemcpyAsync(o, base, static_cast<std::size_t>(4 * n), cudaMemcpyDeviceToDevice, stream),
              "Compressor::decompress");
      return;
    case CompressorKind::fp16:
      return cuda::half_to_float(reinterpret_cast<const std::uint16_t*>(base), n, weight, accumulate, o, stream);
    case CompressorKind::bf16:
      return cuda::bfloat16_to_float(reinterpret_cast<const std::uint16_t*>(base), n, weight, accumulate, o, stream);
    case CompressorKind::sign:
      return cuda::decode_signs(reinterpret_cast<const std::uint32_t*>(base), n, d_off, L, nullptr, weight, accumulate,
                                o, stream);
    case CompressorKind::scaled_sign:
      return cuda::decode_signs(reinterpret_cast<const std::uint32_t*>(base + 4 * L), n, d_off, L,
                                reinterpret_cast<const float*>(base), weight, accumulate, o, stream);
    case CompressorKind::qsgd:
      return cuda::qsgd_decode(reinterpret_cast<const std::uint32_t*>(base + 4 * L), n, d_off, L,
                               reinterpret_cast<const float*>(base), spec_.levels, weight, accumulate, o, stream);
    case CompressorKind::top_k:
    case CompressorKind::random_k:
    case CompressorKind::threshold: {
      const std::uint32_t* idx = nullptr;
      const float* val = nullptr;
      if (kind == CompressorKind::threshold) {
        std::vector<std::uint32_t> counts(static_cast<std::size_t>(L));
        if (L > 0)
          check(cudaMemcpyAsync(counts.data(), base, static_cast<std::size_t>(4 * L), cudaMemcpyDeviceToHost, stream),
                "Compressor::decompress");
        check(cudaStreamSynchronize(stream), "Compressor::decompress");
        for (std::int64_t s = 0; s < L; ++s) {
          if (counts[s] > static_cast<std::uint64_t>(off[s + 1] - off[s]))
            throw std::invalid_argument(fmt::format("Compressor::decompress: segment {} claims {} of its {} elements", s,
                                                    counts[s], off[s + 1] - off[s]));
          k_[s + 1] = k_[s] + counts[s];
        }
        if (payload.bytes.numel() != 4 * L + 8 * k_[L])
          throw std::invalid_argument("Compressor::decompress: threshold payload size disagrees with its counts");
        idx = reinterpret_cast<const std::uint32_t*>(base + 4 * L);
        val = reinterpret_cast<const float*>(base + 4 * L + 4 * k_[L]);
      } else if (kind == CompressorKind::random_k && spec_.shared_seed) {
        indices_.resize(static_cast<std::size_t>(K_fixed));
        for (std::int64_t s = 0; s < L; ++s)
          cpu::random_k_indices(off[s + 1] - off[s], k_[s + 1] - k_[s],
                                detail::stream_key(spec_.seed, payload.round, static_cast<std::uint64_t>(s)), select_,
                                indices_.data() + k_[s]);
        if (K_fixed > 0)
          check(cudaMemcpyAsync(ws + idx_at, indices_.data(), static_cast<std::size_t>(4 * K_fixed),
                                cudaMemcpyHostToDevice, stream),
                "Compressor::decompress");
        check(cudaStreamSynchronize(stream), "Compressor::decompress");
        idx = reinterpret_cast<const std::uint32_t*>(ws + idx_at);
        val = reinterpret_cast<const float*>(base);
      } else {
        idx = reinterpret_cast<const std::uint32_t*>(base);
        val = reinterpret_cast<const float*>(base + 4 * K_fixed);
      }
      // Every index inside its segment, as decode_cpu checks before writing anything.
      auto* first = reinterpret_cast<unsigned long long*>(ws + flag_at);
      check(cudaMemsetAsync(first, 0xFF, sizeof(unsigned long long), stream), what);
      for (std::int64_t s = 0; s < L; ++s)
        cuda::first_out_of_range(idx + k_[s], k_[s + 1] - k_[s], off[s + 1] - off[s], static_cast<std::uint64_t>(k_[s]),
                                 first, stream);
      unsigned long long bad = 0;
      check(cudaMemcpyAsync(&bad, first, sizeof bad, cudaMemcpyDeviceToHost, stream), what);
      check(cudaStreamSynchronize(stream), what);
      if (bad != ~0ULL) {
        const auto j = static_cast<std::int64_t>(bad);
        const auto s = static_cast<std::int64_t>(std::upper_bound(k_.begin(), k_.begin() + L + 1, j) - k_.begin()) - 1;
        std::uint32_t value = 0;
        check(cudaMemcpy(&value, idx + j, sizeof value, cudaMemcpyDeviceToHost), what);
        throw std::invalid_argument(
            fmt::format("{}: index {} out of range in segment {} of {} elements", what, value, s, off[s + 1] - off[s]));
      }
      if (!accumulate && n > 0) check(cudaMemsetAsync(o, 0, static_cast<std::size_t>(4 * n), stream), what);
      for (std::int64_t s = 0; s < L; ++s)
        cuda::scatter(idx + k_[s], val + k_[s], k_[s + 1] - k_[s], weight, accumulate, o + off[s], stream);
      return;
    }
  }
}

}  // namespace dtsim::kernels
#endif  // DTSIM_TORCH_CUDA
