#include "verifier/device_memory.h"

#include <c10/core/CachingDeviceAllocator.h>

namespace parity::verifier {

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

}  // namespace parity::verifier
