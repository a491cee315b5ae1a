// comm::wait_for_device: measured compute of tensors on a GPU. Kernels run
// asynchronously, so a measured phase waits for the device before it starts (work queued
// earlier is not this phase's) and before it stops. It waits only once this process has
// a CUDA context (some tensor went to the GPU), so a CPU run on a GPU machine neither
// creates one nor pays for the waits; without a CUDA LibTorch it does nothing.
#pragma once

namespace dtsim::comm {

void wait_for_device();

}  // namespace dtsim::comm
