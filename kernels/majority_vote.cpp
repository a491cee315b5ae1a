#include "kernels/majority_vote.hpp"

#include <stdexcept>
#include <vector>

#include <fmt/format.h>

#include "kernels/cpu/sign.hpp"
#if DTSIM_TORCH_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "kernels/cuda/compress.cuh"
#endif

namespace dtsim::kernels {

void majority_vote(std::span<const Payload> signs, at::Tensor& out) {
  if (signs.empty()) throw std::invalid_argument("majority_vote: no payloads");
  if (!out.defined() || out.scalar_type() != at::kFloat || !out.is_contiguous())
    throw std::invalid_argument("majority_vote: out must be contiguous fp32");
  const std::int64_t n = signs[0].numel;
  const std::int64_t words = (n + 31) / 32;
  thread_local std::vector<const std::uint32_t*> ptrs;  // reused: no allocation once grown
  ptrs.clear();
  for (std::size_t r = 0; r < signs.size(); ++r) {
    const Payload& p = signs[r];
    if (p.kind != "sign" && p.kind != "scaled_sign")
      throw std::invalid_argument(fmt::format("majority_vote: payload {} is {}, not sign or scaled_sign", r, p.kind));
    const std::int64_t L = p.kind == "scaled_sign" ? static_cast<std::int64_t>(p.segments.size()) : 0;
    if (p.numel != n || !p.bytes.defined() || p.bytes.numel() != 4 * L + 4 * words ||
        p.bytes.device() != out.device())
      throw std::invalid_argument(fmt::format(
          "majority_vote: payload {} must hold {} elements ({} bytes of signs) on out's device", r, n, 4 * words));
    ptrs.push_back(reinterpret_cast<const std::uint32_t*>(static_cast<const std::uint8_t*>(p.bytes.data_ptr()) + 4 * L));
  }
  if (out.numel() != n) throw std::invalid_argument(fmt::format("majority_vote: out must have {} elements", n));
  if (out.is_cuda()) {
#if DTSIM_TORCH_CUDA
    const c10::cuda::CUDAGuard on_device(out.device());
    // the kernel reads the pointer table from device memory
    std::vector<std::int64_t> addresses(ptrs.size());
    for (std::size_t r = 0; r < ptrs.size(); ++r) addresses[r] = reinterpret_cast<std::int64_t>(ptrs[r]);
    at::Tensor table = at::tensor(addresses, at::kLong).to(out.device());
    cuda::majority_vote(reinterpret_cast<const std::uint32_t* const*>(table.data_ptr<std::int64_t>()),
                        static_cast<int>(ptrs.size()), n, out.data_ptr<float>(),
                        c10::cuda::getCurrentCUDAStream().stream());
    return;
#else
    throw std::invalid_argument("majority_vote: CUDA tensor, but dtsim was built against a CPU LibTorch");
#endif
  }
  cpu::majority_vote(ptrs.data(), static_cast<std::int64_t>(ptrs.size()), n, out.data_ptr<float>());
}

}  // namespace dtsim::kernels
