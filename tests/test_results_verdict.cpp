#include "results/verdict.h"

#include <gtest/gtest.h>

#include "ci_records.h"
#include "test_helpers.h"

namespace parity::results {
namespace {

TEST(Verdict, WhatFailsIsDecidedOnceFromThePolicy) {
  const FailPolicy lax, strict{true, false}, drift{false, true};
  for (Verdict v : {Verdict::kFail, Verdict::kImproved, Verdict::kMissing, Verdict::kNew}) EXPECT_TRUE(Fails(v, lax));
  for (Verdict v : {Verdict::kPass, Verdict::kXfail, Verdict::kFlaky, Verdict::kDrift, Verdict::kNoFp64}) EXPECT_FALSE(Fails(v, lax));
  EXPECT_TRUE(Fails(Verdict::kFlaky, strict));
  EXPECT_TRUE(Fails(Verdict::kNoFp64, strict));
  EXPECT_FALSE(Fails(Verdict::kDrift, strict));
  EXPECT_TRUE(Fails(Verdict::kDrift, drift));
  for (Verdict v : {Verdict::kPass, Verdict::kNoFp64, Verdict::kMissing}) EXPECT_EQ(*ParseVerdict(ToString(v)), v);
  EXPECT_FALSE(ParseVerdict("MAYBE").ok());
}

TEST(Verdict, EveryReportReadsTheRowsFails) {
  const Record failed = testing::Rec("m", "FAIL", "compare");
  GateRow flaky;
  flaky.verdict = Verdict::kFlaky;
  flaky.fails = false;
  EXPECT_EQ(OutcomeOf(failed, &flaky).kind, "pass");
  EXPECT_EQ(OutcomeOf(failed, &flaky).label, "FLAKY");
  flaky.fails = true;  // --strict
  EXPECT_EQ(OutcomeOf(failed, &flaky).kind, "fail");
  const Record crashed = testing::Rec("m", "VERIFIER_DIDNT_RUN", "backend");
  EXPECT_EQ(OutcomeOf(crashed, &flaky).kind, "error");
  EXPECT_EQ(OutcomeOf(crashed, nullptr).kind, "error");
  EXPECT_EQ(OutcomeOf(testing::Rec("m", "VERIFIER_SKIPPED"), nullptr).kind, "skipped");
  EXPECT_EQ(OutcomeOf(failed, nullptr).label, "FAIL");
}

TEST(Verdict, GateFileRoundTrips) {
  testing::TempDir dir;
  GateRow row;
  row.config = "cpu_fault_repro_inference";
  row.name = "m";
  row.verdict = Verdict::kNoFp64;
  row.fails = true;
  row.note = "no fp64 reference";
  row.fingerprint = "fp";
  row.culprit_op = "aten::relu";
  row.culprit_source = "File \"m.py\", line 3";
  row.compiler_culprit = "inside inductor: lowerings #9 (relu): falling back to ATen for it removes the failure";
  ASSERT_TRUE(WriteGateFile(dir / "gate.json", {false, "expected/", {row}}).ok());
  auto back = ReadGateFile(dir / "gate.json");
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_FALSE(back->passed);
  ASSERT_EQ(back->rows.size(), 1u);
  EXPECT_EQ(back->rows[0].ToJson(), row.ToJson());
  testing::Spit(dir / "bad.json", R"({"rows": [{"verdict": "SOMETIMES"}]})");
  EXPECT_TRUE(testing::FailsWith(ReadGateFile(dir / "bad.json"), {"bad.json", "rows[0]", "verdict"}));
}

}  // namespace
}  // namespace parity::results
