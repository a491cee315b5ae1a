#include "comm/device_sync.hpp"

#if DTSIM_TORCH_CUDA
#include <ATen/ATen.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <c10/cuda/CUDAFunctions.h>
#endif

namespace dtsim::comm {

void wait_for_device() {
#if DTSIM_TORCH_CUDA
  if (at::hasCUDA() && at::detail::getCUDAHooks().hasPrimaryContext(c10::cuda::current_device()))
    c10::cuda::device_synchronize();
#endif
}

}  // namespace dtsim::comm
