#include "experiment/devices.h"

#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <dlfcn.h>

namespace parity::experiment {

namespace {
c10::DeviceAllocator* AllocatorOf(c10::Device device) {
  if (device.is_cpu() || device.is_meta()) return nullptr;
  try {
    return c10::getDeviceAllocator(device.type());
  } catch (const std::exception&) {
    return nullptr;  // no caching allocator registered for it
  }
}
c10::DeviceIndex IndexOf(c10::Device device) { return device.has_index() ? device.index() : 0; }
}  // namespace

std::string DeviceUnavailable(const std::string& device) {
  c10::Device d(c10::kCPU);
  try {
    d = c10::Device(device);
  } catch (const std::exception&) {
    return "\"" + device + "\" is not a device torch knows (cpu, cuda, cuda:1, xpu, mps, ...)";
  }
  if (d.is_cpu() || d.is_meta()) return "";
  const std::string type = c10::DeviceTypeName(d.type(), /*lower_case=*/true);
  if (!c10::impl::hasDeviceGuardImpl(d.type())) return "this torch build has no " + type + " backend";
  int64_t count = 0;
  try {
    count = c10::impl::getDeviceGuardImpl(d.type())->deviceCount();
  } catch (const std::exception&) {
    count = 0;
  }
  if (count == 0) return "this machine has no " + type + " device";
  if (d.has_index() && d.index() >= count) return "this machine has " + std::to_string(count) + " " + type + " device(s), no index " + std::to_string(d.index());
  return "";
}

std::string DriverDeviceName(c10::Device device) {
  if (device.type() != c10::kCUDA) return "";
  void* lib = ::dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
  if (!lib) return "";
  // The driver API's C signatures (CUresult and CUdevice are ints; 0 is CUDA_SUCCESS), so that no
  // CUDA header is needed: a CPU-only torch builds this too.
  using DeviceGet = int (*)(int*, int);
  using DeviceGetName = int (*)(char*, int, int);
  auto get = reinterpret_cast<DeviceGet>(::dlsym(lib, "cuDeviceGet"));
  auto get_name = reinterpret_cast<DeviceGetName>(::dlsym(lib, "cuDeviceGetName"));
  std::string name;
  int handle = 0;
  char buffer[256] = {};
  if (get && get_name && get(&handle, IndexOf(device)) == 0 && get_name(buffer, sizeof buffer - 1, handle) == 0) name = buffer;
  ::dlclose(lib);
  return name;
}

void ResetPeakMemory(c10::Device device) {
  if (auto* a = AllocatorOf(device); a && a->initialized()) {
    try {
      a->resetPeakStats(IndexOf(device));
    } catch (const std::exception&) {
    }
  }
}

int64_t PeakMemory(c10::Device device) {
  auto* a = AllocatorOf(device);
  if (!a || !a->initialized()) return 0;
  try {
    const auto stats = a->getDeviceStats(IndexOf(device));
    return stats.allocated_bytes[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)].peak;
  } catch (const std::exception&) {
    return 0;
  }
}

void ReleaseCachedMemory(c10::Device device) {
  if (auto* a = AllocatorOf(device); a && a->initialized()) {
    try {
      a->emptyCache();
    } catch (const std::exception&) {
    }
  }
}

}  // namespace parity::experiment
