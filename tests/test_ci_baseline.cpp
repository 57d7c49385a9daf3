#include "ci/baseline.h"

#include <gtest/gtest.h>

#include "ci_records.h"
#include "test_helpers.h"

namespace parity::ci {
namespace {

using testing::kConfig;
using testing::Rec;

TEST(Baseline, ReadsExpectedFilesFlakyListAndStats) {
  testing::TempDir dir;
  testing::Spit(dir / (std::string(kConfig) + ".csv"), "name,accuracy,graph_breaks\nbert,fail_accuracy,0\nmlp,pass,0\n");
  testing::Spit(dir / kFlakyFile, "# known flaky\nyolov3  # since 2024\n\n");
  testing::Spit(dir / kStatsFile, "{\"config\":\"" + std::string(kConfig) + "\",\"name\":\"mlp\",\"outputs\":[]}\n");
  auto b = Baseline::Load(dir.path(), false);
  ASSERT_TRUE(b.ok()) << b.error().message;
  ASSERT_TRUE(b->LoadConfigs({kConfig, "cpu_other_repro_inference"}).ok());
  EXPECT_EQ(b->ExpectedStatus(kConfig, "bert"), "fail_accuracy");
  EXPECT_EQ(b->ExpectedStatus(kConfig, "nope"), std::nullopt);
  EXPECT_EQ(b->ExpectedStatus("cpu_other_repro_inference", "mlp"), std::nullopt);
  EXPECT_TRUE(b->IsFlaky("yolov3"));
  EXPECT_FALSE(b->IsFlaky("mlp"));
  EXPECT_NE(b->Stats(kConfig, "mlp"), nullptr);
  EXPECT_EQ(b->Stats(kConfig, "bert"), nullptr);
}

TEST(Baseline, BadContentNamesTheFileLineAndField) {
  testing::TempDir dir;
  const auto file = dir / (std::string(kConfig) + ".csv");
  // A status parity does not know is read as it is, with a warning naming the file and line.
  testing::Spit(file, "name,accuracy\nmlp,passed\n\nbert,infra_error\n");
  auto known = Baseline::Load(dir.path(), false);
  ASSERT_TRUE(known.ok() && known->LoadConfigs({kConfig}).ok());
  ASSERT_EQ(known->Warnings().size(), 1u);
  EXPECT_NE(known->Warnings()[0].find(file.string() + ":2: accuracy \"passed\" is not a status parity knows"), std::string::npos)
      << known->Warnings()[0];
  EXPECT_EQ(*known->ExpectedStatus(kConfig, "mlp"), "passed");
  EXPECT_EQ(*known->ExpectedStatus(kConfig, "bert"), "infra_error");  // PyTorch's files hold it: no warning
  // An empty status is bad input.
  testing::Spit(file, "name,accuracy\nmlp,\n");
  auto b = Baseline::Load(dir.path(), false);
  ASSERT_TRUE(b.ok());
  auto st = b->LoadConfigs({kConfig});
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find(file.string() + ":2: field \"accuracy\" is empty"), std::string::npos) << st.error().message;
  EXPECT_EQ(st.error().kind, ErrorKind::kBadInput);
  testing::Spit(file, "model,status\nmlp,pass\n");
  EXPECT_NE(b->LoadConfigs({kConfig}).error().message.find("no \"name\" column"), std::string::npos);
  testing::Spit(file, "name,accuracy\nmlp,pass\nmlp,pass\n");
  EXPECT_NE(b->LoadConfigs({kConfig}).error().message.find("appears twice"), std::string::npos);
  testing::Spit(dir / kStatsFile, "[1]\n");
  EXPECT_TRUE(testing::FailsWith(Baseline::Load(dir.path(), false), {kStatsFile, ":1"}));
  EXPECT_TRUE(testing::FailsWith(Baseline::Load(dir / "absent", false), {"--update-expected"}));
  EXPECT_TRUE(Baseline::Load(dir / "absent", true).ok());
}

TEST(Baseline, UpdateKeepsOrderAndColumnsAndInsertsSorted) {
  testing::TempDir dir;
  const auto file = dir / (std::string(kConfig) + ".csv");
  testing::Spit(file, "name,accuracy,graph_breaks,owner\nzeta,pass,0,alice\nbert,fail_accuracy,2,bob\nmlp,pass,0,carol\n");
  auto b = Baseline::Load(dir.path(), false);
  ASSERT_TRUE(b.ok());
  auto changes = b->Update({Rec("bert", "PASS"), Rec("alpha", "FAIL", "compare"), Rec("mlp", "PASS")}, {ConfigModel{kConfig, "zeta"}});
  ASSERT_TRUE(changes.ok()) << changes.error().message;
  ASSERT_EQ(changes->size(), 1u);
  EXPECT_NE((*changes)[0].find("1 changed, 1 added, 1 removed"), std::string::npos) << (*changes)[0];
  // zeta removed; bert keeps its place and its extra column; alpha goes before bert.
  EXPECT_EQ(testing::Slurp(file),
            "name,accuracy,graph_breaks,owner\nalpha,fail_accuracy,0,\nbert,pass,2,bob\nmlp,pass,0,carol\n");
  EXPECT_EQ(b->ExpectedStatus(kConfig, "bert"), "pass");
  EXPECT_NE(b->Stats(kConfig, "alpha"), nullptr);
  // Updating again with the same results changes nothing.
  auto again = b->Update({Rec("bert", "PASS"), Rec("alpha", "FAIL", "compare"), Rec("mlp", "PASS")}, {});
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->empty());
}

TEST(Baseline, AFlakyRecordThatMatchedKeepsTheBaseline) {
  testing::TempDir dir;
  testing::Spit(dir / (std::string(kConfig) + ".csv"), "name,accuracy,graph_breaks\nmlp,pass,0\n");
  auto b = Baseline::Load(dir.path(), false);
  ASSERT_TRUE(b.ok());
  auto r = Rec("mlp", "FAIL", "compare");
  r.attempts = {{results::Code::kFail, "compare", false, "", ""}, {results::Code::kPass, "", false, "", ""}};
  ASSERT_TRUE(b->Update({r}, {}).ok());
  EXPECT_EQ(b->ExpectedStatus(kConfig, "mlp"), "pass");
}

TEST(Baseline, TwoRecordsOfOneModelMakeOneRow) {
  testing::TempDir dir;
  auto b = Baseline::Load(dir.path(), true);
  ASSERT_TRUE(b.ok());
  ASSERT_TRUE(b->Update({Rec("a", "FAIL", "compare"), Rec("a", "PASS")}, {}).ok());
  EXPECT_EQ(testing::Slurp(dir / (std::string(kConfig) + ".csv")), "name,accuracy,graph_breaks\na,pass,0\n");
}

TEST(Baseline, ARowIsOneProgram) {
  // Two repro dirs captured under one name (dump_backend's old default, "program"): the last
  // record would have hidden the other's status (a FAIL gated as PASS). A rerun of one dir, the
  // same dir by another spelling, and one name in two configurations are one program per row.
  auto from = [](const std::string& dir, const char* code, const char* backend = "fault") {
    results::Record r = Rec("program", code, "", 0, backend);
    r.repro_input = dir;
    return r;
  };
  EXPECT_TRUE(OneProgramPerRow({from("/caps/a", "FAIL"), from("/caps/a/", "PASS"), from("/caps/b", "PASS", "eager")}).ok());
  const auto st = OneProgramPerRow({from("/caps/a", "FAIL"), from("/caps/b", "PASS")});
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().kind, ErrorKind::kBadInput);
  for (const char* needle : {"\"program\"", kConfig, "/caps/a and /caps/b", "dump_backend(out, \"name\")"})
    EXPECT_NE(st.error().message.find(needle), std::string::npos) << st.error().message;
  const auto suite_and_dir = OneProgramPerRow({Rec("program", "PASS"), from("/caps/a", "PASS")});
  ASSERT_FALSE(suite_and_dir.ok());
  EXPECT_NE(suite_and_dir.error().message.find("the suite model program and /caps/a"), std::string::npos);
  EXPECT_EQ(LatestPerRow({from("/caps/a", "FAIL"), from("/caps/a", "PASS")}).size(), 1u);
}

TEST(Baseline, OneFileHoldsOneConfiguration) {
  testing::TempDir dir;
  auto b = Baseline::Load(dir / "mine.csv", true);
  ASSERT_TRUE(b.ok());
  EXPECT_TRUE(
      testing::FailsWith(b->Update({Rec("a", "PASS"), Rec("b", "PASS", "", 0, "eager")}, {}), {"one file", "2 configurations"}));
  ASSERT_TRUE(b->Update({Rec("a", "PASS")}, {}).ok());
  EXPECT_EQ(testing::Slurp(dir / "mine.csv"), "name,accuracy,graph_breaks\na,pass,0\n");
}

}  // namespace
}  // namespace parity::ci
