// The gate flow over results already produced (--results): no experiment runs.
#include "ci/ci.h"

#include <gtest/gtest.h>

#include <sstream>

#include "ci_records.h"
#include "test_helpers.h"

namespace parity::ci {
namespace {

using testing::kConfig;
using testing::Rec;

struct CiTest : ::testing::Test {
  void SetUp() override {
    std::string text;
    for (const auto& r : {Rec("a", "PASS"), Rec("b", "FAIL", "compare"), Rec("c", "PASS")}) text += r.ToJson().dump() + "\n";
    testing::Spit(dir_ / "results.jsonl", text);
  }
  CiOptions Options() {
    CiOptions o;
    o.expected = dir_ / "expected";
    o.results = {dir_ / "results.jsonl"};
    o.verify.output_dir = dir_ / "out";
    return o;
  }
  testing::TempDir dir_;
};

TEST_F(CiTest, UpdateThenGateRoundTrips) {
  std::ostringstream log;
  CiOptions o = Options();
  auto bad = RunCi(o, log);
  EXPECT_TRUE(testing::FailsWith(bad, {"--update-expected"}));  // no baseline yet
  o.update_expected = true;
  std::ostringstream update_log;
  auto updated = RunCi(o, update_log);
  ASSERT_TRUE(updated.ok()) << updated.error().message;
  EXPECT_EQ(updated->exit_code, 0);
  // Every row NEW against the empty baseline: counted, but an update claims no gate outcome.
  EXPECT_NE(update_log.str().find("gate: 3 NEW (against the baseline before this update)"), std::string::npos)
      << update_log.str();
  EXPECT_EQ(update_log.str().find("FAILED"), std::string::npos) << update_log.str();
  EXPECT_EQ(testing::Slurp(dir_ / "expected" / (std::string(kConfig) + ".csv")),
            "name,accuracy,graph_breaks\na,pass,0\nb,fail_accuracy,0\nc,pass,0\n");
  o.update_expected = false;
  std::ostringstream gate_log;
  auto gated = RunCi(o, gate_log);
  ASSERT_TRUE(gated.ok());
  EXPECT_EQ(gated->exit_code, 0) << gate_log.str();
  EXPECT_EQ(gated->gate.counts[Verdict::kPass], 2);
  EXPECT_EQ(gated->gate.counts[Verdict::kXfail], 1);
  EXPECT_NE(testing::Slurp(dir_ / "out" / "gate.json").find("\"XFAIL\""), std::string::npos);
}

TEST_F(CiTest, AFailureExitsOneWithTheUpdateCommand) {
  std::filesystem::create_directories(dir_ / "expected");
  testing::Spit(dir_ / "expected" / (std::string(kConfig) + ".csv"),
                "name,accuracy,graph_breaks\na,pass,0\nb,pass,0\nc,pass,0\n");
  std::ostringstream log;
  auto r = RunCi(Options(), log);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit_code, 1);
  EXPECT_NE(log.str().find("b                                  FAIL"), std::string::npos) << log.str();
  EXPECT_NE(log.str().find(UpdateCommand(Options())), std::string::npos) << log.str();
  EXPECT_EQ(UpdateCommand(Options()), "parity ci --expected " + (dir_ / "expected").string() + " --results " +
                                          (dir_ / "results.jsonl").string() + " --update-expected");
}

TEST_F(CiTest, MissingIsReportedOverWholeResultsButNotOutsideTheFilter) {
  std::filesystem::create_directories(dir_ / "expected");
  testing::Spit(dir_ / "expected" / (std::string(kConfig) + ".csv"),
                "name,accuracy,graph_breaks\na,pass,0\nb,fail_accuracy,0\nc,pass,0\nzzz,pass,0\n");
  std::ostringstream log;
  auto r = RunCi(Options(), log);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->gate.counts[Verdict::kMissing], 1);
  CiOptions filtered = Options();
  filtered.verify.exclude = "^zzz$";
  auto f = RunCi(filtered, log);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->gate.counts.count(Verdict::kMissing), 0u);
  EXPECT_EQ(f->exit_code, 0);
}

}  // namespace
}  // namespace parity::ci
