// Devices, generically over every backend torch knows (CPU, CUDA, XPU, MPS, HPU, PrivateUse1):
// whether this build and machine can run on one, and an accelerator's caching-allocator peak in
// this process (how much memory the reference runs held at once; the worker reports its own:
// 0 on the CPU and where the allocator keeps no statistics).
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <string>

namespace parity::experiment {

// Why `device` cannot run here ("" when it can): not a device string torch knows, or a device
// type this torch build has no backend for, or one with no such device on this machine.
std::string DeviceUnavailable(const std::string& device);

void ResetPeakMemory(c10::Device device);
int64_t PeakMemory(c10::Device device);
// Hands the device memory the allocator caches but no tensor holds back to the device: a job
// server's next experiment (and its worker, on the same device) starts with all of it.
void ReleaseCachedMemory(c10::Device device);

}  // namespace parity::experiment
