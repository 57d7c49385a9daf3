#include "verify/matrix.h"

#include <gtest/gtest.h>

#include "test_helpers.h"
#include "verify/verify.h"

namespace parity::verify {
namespace {

nlohmann::json Listing() {
  return {{"models", {{{"name", "mlp"}, {"suite", "torchbench"}}, {{"name", "llama"}, {"suite", "huggingface"}}}}};
}

Expected<std::vector<verifier::ExperimentSpec>> Expand(const VerifyOptions& o) {
  return ExpandMatrix(o, [] { return Expected<nlohmann::json>(Listing()); });
}

TEST(Matrix, SuiteModelsDefaultToEvalFloat32) {
  VerifyOptions o;
  o.models = {"mlp"};
  auto specs = Expand(o);
  ASSERT_TRUE(specs.ok()) << specs.error().message;
  ASSERT_EQ(specs->size(), 1u);
  EXPECT_EQ((*specs)[0].test, "eval");
  EXPECT_EQ((*specs)[0].dtype, "float32");
}

TEST(Matrix, SuiteModelsCrossTestsDtypesBackends) {
  VerifyOptions o;
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
  VerifyOptions o;
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
  VerifyOptions o;
  o.repro_dirs = {dir.path().string()};
  o.models = {"mlp"};
  auto specs = Expand(o);
  ASSERT_TRUE(specs.ok()) << specs.error().message;
  ASSERT_EQ(specs->size(), 2u);
  EXPECT_EQ((*specs)[0].device, "cpu");   // a suite model: the CPU by default
  EXPECT_EQ((*specs)[1].device, "cuda");  // the dir: where it was captured
  EXPECT_TRUE(UsesCuda(o));
  o.experiment.device = "cpu";
  specs = Expand(o);
  EXPECT_EQ((*specs)[1].device, "cpu");
  EXPECT_FALSE(UsesCuda(o));
}

TEST(Matrix, AReproDirRefusesAnotherTestOrDtype) {
  testing::TempDir dir;
  testing::WriteSmallRepro(dir.path());
  VerifyOptions o;
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
}  // namespace parity::verify
