#include "ci/gate.h"

#include <gtest/gtest.h>

#include "ci_records.h"
#include "test_helpers.h"

namespace parity::ci {
namespace {

using testing::kConfig;
using testing::Rec;

class GateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::Spit(dir_ / (std::string(kConfig) + ".csv"),
                  "name,accuracy,graph_breaks\n"
                  "pass_ok,pass,0\nxfail,fail_accuracy,0\nregressed,pass,0\nimproved,eager_1st_run_fail,0\n"
                  "missing,pass,0\nflaky_rerun,pass,0\nflaky_listed,pass,0\ndrift,pass,0\nmissing_filtered,pass,0\n");
    testing::Spit(dir_ / kFlakyFile, "flaky_listed\n");
    testing::Spit(dir_ / kStatsFile, "{\"config\":\"" + std::string(kConfig) +
                                         "\",\"name\":\"drift\",\"outputs\":[{\"path\":\"out\",\"rmse_res_vs_fp64\":1e-8,"
                                         "\"max_abs_err\":1e-8}]}\n");
  }
  Baseline Load() {
    auto b = Baseline::Load(dir_.path(), false);
    EXPECT_TRUE(b.ok());
    EXPECT_TRUE(b->LoadConfigs({kConfig}).ok());
    return std::move(*b);
  }
  std::vector<results::Record> Records() {
    auto flaky = Rec("flaky_rerun", "FAIL", "compare");
    flaky.attempts = {{results::Code::kFail, "compare", false, "", ""}, {results::Code::kPass, "", false, "", ""}};
    return {Rec("pass_ok", "PASS"),
            Rec("xfail", "FAIL", "compare"),
            Rec("regressed", "EXCEPTION_RAISED", "backend"),
            Rec("improved", "PASS"),
            flaky,
            Rec("flaky_listed", "FAIL", "compare"),
            Rec("drift", "PASS", "", 5e-7),
            Rec("brand_new", "PASS")};
  }
  static std::map<std::string, Verdict> ByName(const GateResult& g) {
    std::map<std::string, Verdict> m;
    for (const auto& r : g.rows) m[r.name] = r.verdict;
    return m;
  }
  testing::TempDir dir_;
};

TEST_F(GateTest, EveryVerdict) {
  Baseline b = Load();
  auto records = Records();
  GateScope scope;
  scope.wanted = [](const std::string& n) { return n != "missing_filtered"; };
  GateResult g = Gate(records, b, GateOptions{}, scope);
  const std::map<std::string, Verdict> want = {
      {"pass_ok", Verdict::kPass},       {"xfail", Verdict::kXfail},     {"regressed", Verdict::kFail},
      {"improved", Verdict::kImproved},  {"missing", Verdict::kMissing}, {"flaky_rerun", Verdict::kFlaky},
      {"flaky_listed", Verdict::kFlaky}, {"drift", Verdict::kDrift},     {"brand_new", Verdict::kNew}};
  EXPECT_EQ(ByName(g), want);
  EXPECT_TRUE(g.failed);
  for (const auto& r : g.rows) {
    if (r.name == "flaky_rerun") {
      EXPECT_EQ(r.note, "passed 1 of 2 runs");
    } else if (r.name == "drift") {
      EXPECT_NE(r.note.find("5.00e+01x"), std::string::npos) << r.note;
    } else if (r.name == "regressed") {
      EXPECT_EQ(r.status, "fail_to_run");
    }
  }
}

TEST_F(GateTest, OnlyFailImprovedMissingAndNewFailByDefault) {
  Baseline b = Load();
  auto records = Records();
  GateResult g = Gate({records[0], records[1], records[4], records[6]}, b, GateOptions{}, GateScope{false, nullptr});
  EXPECT_FALSE(g.failed);  // PASS, XFAIL, FLAKY, DRIFT
  GateOptions strict;
  strict.policy.strict = true;
  EXPECT_TRUE(Gate({records[4]}, b, strict, GateScope{false, nullptr}).failed);
  GateOptions drift;
  drift.policy.fail_on_drift = true;
  EXPECT_TRUE(Gate({records[6]}, b, drift, GateScope{false, nullptr}).failed);
  drift.drift_factor = 100;
  EXPECT_EQ(Gate({records[6]}, b, drift, GateScope{false, nullptr}).rows[0].verdict, Verdict::kPass);
}

TEST_F(GateTest, APassWithoutAnFp64ReferenceIsNoFp64AndFailsUnderStrict) {
  Baseline b = Load();
  auto weak = Rec("pass_ok", "PASS");
  weak.fp64_reference = false;
  weak.cosine = true;
  weak.reference_error = "node \"view_4\" (aten::view): view size is not compatible";
  GateResult g = Gate({weak}, b, GateOptions{}, GateScope{false, nullptr});
  ASSERT_EQ(g.rows.size(), 1u);
  EXPECT_EQ(g.rows[0].verdict, Verdict::kNoFp64);
  EXPECT_NE(g.rows[0].note.find("cosine similarity"), std::string::npos) << g.rows[0].note;
  EXPECT_NE(g.rows[0].note.find("view_4"), std::string::npos) << g.rows[0].note;
  EXPECT_FALSE(g.failed);
  GateOptions strict;
  strict.policy.strict = true;
  g = Gate({weak}, b, strict, GateScope{false, nullptr});
  EXPECT_TRUE(g.failed);
  EXPECT_TRUE(g.rows[0].fails);
  EXPECT_NE(FailureMessage(g, "update").find("without an fp64 reference"), std::string::npos);
  auto with_ref = Rec("pass_ok", "PASS");
  with_ref.fp64_reference = true;
  EXPECT_EQ(Gate({with_ref}, b, strict, GateScope{false, nullptr}).rows[0].verdict, Verdict::kPass);
}

TEST_F(GateTest, AnIncompleteRunReportsNothingMissing) {
  Baseline b = Load();
  GateResult g = Gate({Rec("pass_ok", "PASS")}, b, GateOptions{}, GateScope{false, nullptr});
  ASSERT_EQ(g.rows.size(), 1u);
  EXPECT_FALSE(g.failed);
}

TEST_F(GateTest, DriftHasAFloorAtATenThousandthOfTheTolerance) {
  Baseline b = Load();
  // baseline 1e-8, floor 1e-8 (tol 1e-4): 9e-8 is under 10x.
  EXPECT_EQ(Gate({Rec("drift", "PASS", "", 9e-8)}, b, GateOptions{}, GateScope{false, nullptr}).rows[0].verdict, Verdict::kPass);
}

TEST(Gate, RetriesOnlyFailuresThatDoNotMatchYet) {
  EXPECT_TRUE(ShouldRetry({"fail_accuracy"}, "pass", false, 2));
  EXPECT_TRUE(ShouldRetry({"fail_accuracy", "fail_to_run"}, "pass", false, 2));
  EXPECT_FALSE(ShouldRetry({"fail_accuracy", "fail_accuracy", "fail_accuracy"}, "pass", false, 2));
  EXPECT_FALSE(ShouldRetry({"fail_accuracy", "pass"}, "pass", false, 2));
  EXPECT_FALSE(ShouldRetry({"fail_accuracy"}, "fail_accuracy", false, 2));  // XFAIL
  EXPECT_FALSE(ShouldRetry({"pass"}, "fail_accuracy", false, 2));           // IMPROVED
  EXPECT_FALSE(ShouldRetry({"fail_accuracy"}, std::nullopt, false, 2));     // NEW
  EXPECT_FALSE(ShouldRetry({"fail_accuracy"}, "pass", true, 2));            // in the flaky list
  EXPECT_FALSE(ShouldRetry({"fail_accuracy"}, "pass", false, 0));
}

TEST_F(GateTest, TheMessageNamesTheModelsAndTheUpdateCommand) {
  Baseline b = Load();
  GateResult g =
      Gate({Rec("regressed", "FAIL", "compare"), Rec("improved", "PASS")}, b, GateOptions{}, GateScope{false, nullptr});
  const std::string msg = FailureMessage(g, "parity ci --expected X --results r.jsonl --update-expected");
  EXPECT_NE(msg.find("FAIL: 1 model(s) have accuracy status regressed"), std::string::npos) << msg;
  EXPECT_NE(msg.find("IMPROVED: 1 model(s)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("parity ci --expected X --results r.jsonl --update-expected"), std::string::npos) << msg;
}

}  // namespace
}  // namespace parity::ci
