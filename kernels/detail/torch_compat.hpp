// Where LibTorch 1.13 (Debian's, the default build) and 2.x (PyTorch's wheels, the GPU
// machines': `make test-torch2`) differ in what dtsim relies on, the one way that holds on
// both. Each entry says what differs and how it was found.
#pragma once

#include <ATen/ATen.h>
#include <ATen/core/LegacyTypeDispatch.h>
#include <torch/version.h>

namespace dtsim::kernels::detail {

// t.resize_(sizes) without autograd's bookkeeping, for dtsim's own buffers (a payload's
// bytes), which are never autograd inputs. Since 2.x, resize_'s ADInplaceOrView kernel
// copies the old sizes into a std::vector on every call, to bump the version counter
// when they change: a heap allocation per call on the kernels' hot path, where 1.13
// made none (tests/kernels_alloc_test.cpp, NoAllocation.CompressorsOnceGrown: 2 per
// compress + error-feedback step under 2.15). Below ADInplaceOrView the call goes
// straight to the CPU or CUDA resize, on both versions.
inline void resize_untracked(at::Tensor& t, at::IntArrayRef sizes) {
  at::AutoDispatchBelowADInplaceOrView guard;
  t.resize_(sizes);
}

// LibTorch's unpickler (torch::jit::pickle_load) refuses a tensor whose sizes reach past
// its stored data itself, naming sizes, strides and bytes, before dtsim's own check
// (workloads/tensor_file.cpp: check_storage) sees it; 1.13's loads it and leaves the check
// to dtsim (tests/data_sources_test.cpp, TensorFile.MalformedFilesAreOneLineErrorsNamingTheFile).
// Checked on 1.13 (no) and 2.15 (yes); the 2.x release that added it was not pinned down.
inline constexpr bool kUnpicklerChecksTensorStorage = TORCH_VERSION_MAJOR >= 2;

}  // namespace dtsim::kernels::detail
