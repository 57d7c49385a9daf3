#include "verify/failure_repro.h"

#include <gtest/gtest.h>

#include "repro/repro_dir.h"
#include "test_helpers.h"
#include "experiment/case.h"

namespace parity::verify {
namespace {

experiment::ExperimentSpec FailedOn(const std::string& device, const std::filesystem::path& repro) {
  experiment::ExperimentSpec spec;
  spec.model = "small";
  spec.backend = "fault";
  spec.backend_options = {{"op", "aten::relu"}};
  spec.device = device;
  spec.repro = repro.string();
  return spec;
}

TEST(FailureRepro, KeepsTheDeviceItFailedOnAndTheFailure) {
  testing::TempDir dir;
  testing::WriteSmallRepro(dir / "capture");  // captured on the CPU
  experiment::ExperimentResult r;
  r.code = results::Code::kFail;
  r.error = "y: RMSE ...";
  r.tol = 1e-4;
  r.outputs = {{{"path", "y"}, {"pass", false}}, {{"path", "s"}, {"pass", true}}};
  auto written = WriteFailureRepro(dir / "out", FailedOn("cuda:1", dir / "capture"), r);
  ASSERT_TRUE(written.ok()) << written.error().message;
  EXPECT_EQ(written->filename(), "small-fault-eval-float32-cuda_1");
  auto repro = ReproDir::Load(*written);
  ASSERT_TRUE(repro.ok()) << repro.error().message;
  const Manifest& m = repro->manifest();
  EXPECT_EQ(m.device, "cuda:1");
  EXPECT_EQ(repro->graphs()[0].device, "cpu");  // where the graph was captured
  EXPECT_EQ(m.backend, "fault");
  EXPECT_EQ(m.failure["failing_outputs"], nlohmann::json::array({"y"}));
  EXPECT_EQ(m.failure["device"], "cuda:1");
  // What minify and repro run make of it without flags: the device it failed on.
  auto spec = experiment::Case::FromRepro(*repro, std::nullopt, experiment::ExperimentOptions{});
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ(spec->device, "cuda:1");
  EXPECT_DOUBLE_EQ(*spec->tol, 1e-4);
}

}  // namespace
}  // namespace parity::verify
