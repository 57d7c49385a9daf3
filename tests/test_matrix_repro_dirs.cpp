// Repro dirs read once and checked: a bad dir is set aside with its error (the others still
// run), a good one is found again by the absolute path a spec names it by.
#include "matrix/repro_dirs.h"

#include <gtest/gtest.h>

#include "test_helpers.h"

namespace parity::matrix {
namespace {

TEST(ReproDirs, ABadDirIsSetAsideAndTheOthersLoad) {
  testing::TempDir good, bad;
  testing::WriteSmallRepro(good.path());
  testing::WriteSmallRepro(bad.path());
  testing::Spit(bad / "manifest.json", "{\"version\": ");
  MatrixOptions o;
  o.repro_dirs = {bad.path().string(), good.path().string()};
  const LoadedDirs dirs = LoadReproDirs(o);
  ASSERT_EQ(dirs.good.size(), 1u);
  ASSERT_EQ(dirs.bad.size(), 1u);
  EXPECT_EQ(dirs.bad[0].dir, bad.path().string());
  EXPECT_EQ(dirs.bad[0].error.kind, ErrorKind::kBadInput);
  EXPECT_NE(dirs.bad[0].error.message.find("manifest.json"), std::string::npos) << dirs.bad[0].error.message;
  EXPECT_EQ(dirs.Find(good.path().string()), dirs.good[0].repro);
  EXPECT_EQ(dirs.Find(std::filesystem::absolute(good.path()).string()), dirs.good[0].repro);
  EXPECT_EQ(dirs.Find(bad.path().string()), nullptr);
}

TEST(ReproDirs, ManyDirsReadAtOnceKeepTheOrderGiven) {
  // Read on several threads: each dir's outcome is its own, both lists in the order given.
  std::vector<testing::TempDir> dirs(7);
  MatrixOptions o;
  for (size_t k = 0; k < dirs.size(); ++k) {
    testing::WriteSmallRepro(dirs[k].path());
    if (k % 3 == 1) testing::Spit(dirs[k] / "manifest.json", "{}");
    o.repro_dirs.push_back(dirs[k].path().string());
  }
  const LoadedDirs read = LoadReproDirs(o);
  ASSERT_EQ(read.good.size(), 5u);
  ASSERT_EQ(read.bad.size(), 2u);
  const std::vector<size_t> good = {0, 2, 3, 5, 6}, bad = {1, 4};
  for (size_t k = 0; k < good.size(); ++k) {
    EXPECT_EQ(read.good[k].dir, o.repro_dirs[good[k]]);
    EXPECT_EQ(read.good[k].repro->root(), dirs[good[k]].path());
    EXPECT_FALSE(read.good[k].repro->verified_tensors().empty());  // its digest checked, for the experiments' children
  }
  for (size_t k = 0; k < bad.size(); ++k) EXPECT_EQ(read.bad[k].dir, o.repro_dirs[bad[k]]);
}

TEST(ReproDirs, ADirAskedForAnotherTestIsBadInputNamingTheField) {
  testing::TempDir dir;
  testing::WriteSmallRepro(dir.path());  // an eval, float32 capture
  MatrixOptions o;
  o.repro_dirs = {dir.path().string()};
  o.tests = {"train"};
  const LoadedDirs dirs = LoadReproDirs(o);
  ASSERT_EQ(dirs.bad.size(), 1u);
  EXPECT_NE(dirs.bad[0].error.message.find("field \"mode\" is \"eval\""), std::string::npos) << dirs.bad[0].error.message;
}

TEST(ReproDirs, CudaWhenAskedOrWhereADirWasCaptured) {
  testing::TempDir dir;
  testing::WriteSmallRepro(dir.path());
  MatrixOptions o;
  o.repro_dirs = {dir.path().string()};
  EXPECT_FALSE(UsesCuda(o, LoadReproDirs(o)));
  o.experiment.device = "cuda:1";
  EXPECT_TRUE(UsesCuda(o, LoadReproDirs(o)));
}

TEST(ReproDirs, BeforeReadingTheDeviceComesFromTheOptionOrTheManifestsAlone) {
  testing::TempDir cpu, cuda;
  testing::WriteSmallRepro(cpu.path());
  testing::WriteSmallRepro(cuda.path());
  auto manifest = nlohmann::json::parse(testing::Slurp(cuda / "manifest.json"));
  manifest["device"] = "cuda:0";
  testing::Spit(cuda / "manifest.json", manifest.dump());
  testing::Spit(cuda / "tensors.safetensors", "not read");  // before the read: the manifest only
  MatrixOptions o;
  o.repro_dirs = {cpu.path().string()};
  EXPECT_EQ(UsesCudaBeforeReading(o), std::optional<bool>(false));
  o.repro_dirs.push_back(cuda.path().string());
  EXPECT_EQ(UsesCudaBeforeReading(o), std::optional<bool>(true));
  // The read finds the cuda dir bad, so UsesCuda after it says otherwise: the caller asks again.
  EXPECT_FALSE(UsesCuda(o, LoadReproDirs(o)));
  o.experiment.device = "cpu";
  EXPECT_EQ(UsesCudaBeforeReading(o), std::optional<bool>(false));
  o.experiment.device.reset();
  testing::Spit(cpu / "manifest.json", "{\"version\": ");  // does not parse: cannot say
  EXPECT_EQ(UsesCudaBeforeReading(o), std::nullopt);
  o.repro_dirs = {(cpu / "missing").string()};
  EXPECT_EQ(UsesCudaBeforeReading(o), std::nullopt);
}

}  // namespace
}  // namespace parity::matrix
