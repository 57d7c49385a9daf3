// The caching allocator's peak of an accelerator device, in this process: how much memory the
// reference runs held at once (the worker reports its own). Generic over accelerators (CUDA,
// XPU, ...: at::getDeviceAllocator); 0 on the CPU and where the allocator keeps no statistics.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>

namespace parity::verifier {

void ResetPeakMemory(c10::Device device);
int64_t PeakMemory(c10::Device device);
// Hands the device memory the allocator caches but no tensor holds back to the device: a job
// server's next experiment (and its worker, on the same device) starts with all of it.
void ReleaseCachedMemory(c10::Device device);

}  // namespace parity::verifier
