// experiment/devices.h: which devices can run here, and a CUDA device's name from a driver this
// process already loaded (a fake driver library, tests/fakes/fake_cuda_driver.cpp, stands in).
#include "experiment/devices.h"

#include <dlfcn.h>
#include <gtest/gtest.h>

namespace parity::experiment {
namespace {

TEST(Devices, UnavailableSaysWhy) {
  EXPECT_EQ(DeviceUnavailable("cpu"), "");
  EXPECT_NE(DeviceUnavailable("gpu0").find("not a device torch knows"), std::string::npos);
  if (!DeviceUnavailable("cuda").empty()) {  // a CPU-only build or machine: it names the device type
    EXPECT_NE(DeviceUnavailable("cuda").find("cuda"), std::string::npos) << DeviceUnavailable("cuda");
  }
  EXPECT_EQ(PeakMemory(c10::Device("cpu")), 0);
}

bool DriverLoaded() {
  void* lib = ::dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
  if (lib) ::dlclose(lib);
  return lib != nullptr;
}

TEST(Devices, DriverDeviceNameAsksOnlyADriverAlreadyLoaded) {
  EXPECT_EQ(DriverDeviceName(c10::Device("cpu")), "");
  if (DriverLoaded()) GTEST_SKIP() << "this process has the real CUDA driver loaded";
  EXPECT_EQ(DriverDeviceName(c10::Device("cuda")), "");
  EXPECT_FALSE(DriverLoaded());  // asking loaded nothing
  void* fake = ::dlopen(PARITY_FAKE_CUDA_DRIVER, RTLD_NOW | RTLD_GLOBAL);
  ASSERT_NE(fake, nullptr) << ::dlerror();
  ASSERT_TRUE(DriverLoaded());
  EXPECT_EQ(DriverDeviceName(c10::Device("cuda")), "Fake GPU 0");  // no index: the process's first device
  EXPECT_EQ(DriverDeviceName(c10::Device("cuda:1")), "Fake GPU 1");
  EXPECT_EQ(DriverDeviceName(c10::Device("cuda:7")), "");  // the driver's error
  EXPECT_EQ(DriverDeviceName(c10::Device("cpu")), "");
  ::dlclose(fake);
}

}  // namespace
}  // namespace parity::experiment
