// A stand-in for the CUDA driver library (libcuda.so.1) for test_experiment_devices.cpp: two
// devices, named as the driver's cuDeviceGetName names them; any other ordinal is the driver's
// CUDA_ERROR_INVALID_DEVICE (101).
#include <cstdio>

extern "C" {
int cuDeviceGet(int* device, int ordinal) {
  if (ordinal < 0 || ordinal > 1) return 101;
  *device = 100 + ordinal;  // a handle, not the ordinal
  return 0;
}
int cuDeviceGetName(char* name, int length, int device) {
  std::snprintf(name, static_cast<size_t>(length), "Fake GPU %d", device - 100);
  return 0;
}
}
