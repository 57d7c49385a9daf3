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
  const auto spec_on_cuda = FailedOn("cuda:1", dir / "capture");
  auto written = WriteFailureRepro(dir / "out", FailureReproNames({&spec_on_cuda})[0], spec_on_cuda, r);
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

TEST(FailureRepro, TwoCapturesUnderOneNameGetDirsOfTheirOwn) {
  // Two repro dirs captured under one model name: each failure keeps its own dir (the second
  // overwrote the first). A spec alone under its name, or two of one repro dir, keep the name.
  const auto a = FailedOn("cpu", "/caps/run1/cap"), b = FailedOn("cpu", "/caps/run2/cap"), c = FailedOn("cuda", "/caps/run1/cap");
  auto eval_of_a = a;
  eval_of_a.backend = "eager";
  const auto names = FailureReproNames({&a, &b, &c, &eval_of_a, &a});
  ASSERT_EQ(names.size(), 5u);
  EXPECT_EQ(names[0].rfind("small-fault-eval-float32-cpu-", 0), 0u) << names[0];
  EXPECT_EQ(names[0].size(), std::string("small-fault-eval-float32-cpu-").size() + 8);
  EXPECT_NE(names[0], names[1]);
  EXPECT_EQ(names[0], names[4]);  // one experiment, one dir
  EXPECT_EQ(names[2], "small-fault-eval-float32-cuda");
  EXPECT_EQ(names[3], "small-eager-eval-float32-cpu");
}

}  // namespace
}  // namespace parity::verify
