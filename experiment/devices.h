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

// A CUDA device's name as its driver gives it ("NVIDIA H200": what torch.cuda.get_device_name
// says, both asking the driver), for a process that already runs on CUDA: the driver library is
// looked up among those loaded, nothing is loaded or initialised here. "" for another device
// type, or where the driver is not loaded or does not answer (the caller then asks a worker).
std::string DriverDeviceName(c10::Device device);

void ResetPeakMemory(c10::Device device);
int64_t PeakMemory(c10::Device device);
// Hands the device memory the allocator caches but no tensor holds back to the device: a job
// server's next experiment (and its worker, on the same device) starts with all of it.
void ReleaseCachedMemory(c10::Device device);

}  // namespace parity::experiment
