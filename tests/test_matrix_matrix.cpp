#include "matrix/matrix.h"

#include <gtest/gtest.h>

#include "test_helpers.h"

namespace parity::matrix {
namespace {

nlohmann::json Listing() {
  return {{"models", {{{"name", "mlp"}, {"suite", "torchbench"}}, {{"name", "llama"}, {"suite", "huggingface"}}}}};
}

Expected<std::vector<experiment::ExperimentSpec>> Expand(const MatrixOptions& o) {
  const LoadedDirs dirs = LoadReproDirs(o);
  if (!dirs.bad.empty()) return dirs.bad.front().error;
  return ExpandMatrix(o, dirs, [] { return Expected<nlohmann::json>(Listing()); });
}

TEST(Matrix, SuiteModelsDefaultToEvalFloat32) {
  MatrixOptions o;
  o.models = {"mlp"};
  auto specs = Expand(o);
  ASSERT_TRUE(specs.ok()) << specs.error().message;
  ASSERT_EQ(specs->size(), 1u);
  EXPECT_EQ((*specs)[0].test, "eval");
  EXPECT_EQ((*specs)[0].dtype, "float32");
}

TEST(Matrix, SuiteModelsCrossTestsDtypesBackends) {
  MatrixOptions o;
  o.models = {"all"};
  o.tests = {"eval", "train"};
  o.dtypes = {"float32", "bfloat16"};
  o.backends = {"eager", "inductor"};
  auto specs = Expand(o);
  ASSERT_TRUE(specs.ok()) << specs.error().message;
  EXPECT_EQ(specs->size(), 2u * 2 * 2 * 2);
}

TEST(Matrix, AReproDirRunsAsCaptured) {
  testing::TempDir dir;
  testing::WriteSmallRepro(dir.path());  // an eval, float32 capture
  MatrixOptions o;
  o.repro_dirs = {dir.path().string()};
  auto specs = Expand(o);
  ASSERT_TRUE(specs.ok()) << specs.error().message;
  ASSERT_EQ(specs->size(), 1u);
  EXPECT_EQ((*specs)[0].test, "eval");
  o.tests = {"eval"};  // asking for what it holds is fine
  EXPECT_TRUE(Expand(o).ok());
}

TEST(Matrix, AReproDirRunsOnItsOwnDeviceUnlessAsked) {
  testing::TempDir dir;
  testing::WriteSmallRepro(dir.path());
  auto m = nlohmann::json::parse(testing::Slurp(dir / "manifest.json"));
  m["device"] = "cuda";  // captured (or failed) on CUDA
  testing::Spit(dir / "manifest.json", m.dump());
  MatrixOptions o;
  o.repro_dirs = {dir.path().string()};
  o.models = {"mlp"};
  auto specs = Expand(o);
  ASSERT_TRUE(specs.ok()) << specs.error().message;
  ASSERT_EQ(specs->size(), 2u);
  EXPECT_EQ((*specs)[0].device, "cpu");   // a suite model: the CPU by default
  EXPECT_EQ((*specs)[1].device, "cuda");  // the dir: where it was captured
  EXPECT_TRUE(UsesCuda(o, LoadReproDirs(o)));
  o.experiment.device = "cpu";
  specs = Expand(o);
  EXPECT_EQ((*specs)[1].device, "cpu");
  EXPECT_FALSE(UsesCuda(o, LoadReproDirs(o)));
}

TEST(Matrix, AReproDirRefusesAnotherTestOrDtype) {
  testing::TempDir dir;
  testing::WriteSmallRepro(dir.path());
  MatrixOptions o;
  o.repro_dirs = {dir.path().string()};
  o.tests = {"train"};
  auto specs = Expand(o);
  ASSERT_FALSE(specs.ok());
  EXPECT_EQ(specs.error().kind, ErrorKind::kBadInput);
  EXPECT_NE(specs.error().message.find("manifest.json: field \"mode\" is \"eval\""), std::string::npos) << specs.error().message;
  o.tests = {};
  o.dtypes = {"bfloat16"};
  specs = Expand(o);
  ASSERT_FALSE(specs.ok());
  EXPECT_NE(specs.error().message.find("field \"dtype\" is \"float32\""), std::string::npos) << specs.error().message;
}

}  // namespace
}  // namespace parity::matrix
