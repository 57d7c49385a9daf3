#include "report/reports.h"

#include <gtest/gtest.h>

#include "ci_records.h"
#include "test_helpers.h"

namespace parity::report {
namespace {

using testing::Rec;

TEST(Reports, EntriesKeepTheLastRecordOfAnExperimentAndItsVerdict) {
  auto first = Rec("a", "FAIL", "compare");
  auto again = Rec("a", "PASS");
  results::GateRow row;
  row.fingerprint = "a-fault";
  row.verdict = results::Verdict::kFlaky;
  row.note = "passed 1 of 2 runs";
  auto e = Entries({first, Rec("b", "PASS"), again}, {row});
  ASSERT_EQ(e.size(), 2u);
  EXPECT_EQ(e[0].record.code, results::Code::kPass);
  EXPECT_EQ(e[0].gate->verdict, results::Verdict::kFlaky);
  EXPECT_FALSE(e[1].gate.has_value());
}

TEST(Reports, AccuracyCsvHasTheRunnersColumns) {
  auto r = Rec("m", "EAGER_FAILED", "eager");
  r.graph_breaks = 2;
  const std::string csv = AccuracyCsv(Entries({r}));
  EXPECT_EQ(csv.substr(0, csv.find('\n')), "dev,name,batch_size,accuracy,graph_breaks,unique_graphs,compilation_latency");
  EXPECT_NE(csv.find("\ncpu,m,0,eager_1st_run_fail,2,3,"), std::string::npos) << csv;
}

TEST(Reports, JUnitEscapesAndClassifies) {
  auto fail = Rec("a<b>&\"c\"", "FAIL", "compare");
  fail.error = std::string("bad \x01 <output>");
  fail.outputs[0]["message"] = "RMSE too big";
  auto skip = Rec("s", "VERIFIER_SKIPPED", "capability");
  auto crash = Rec("c", "VERIFIER_DIDNT_RUN", "backend");
  const std::string x = JUnitXml(Entries({fail, skip, crash, Rec("p", "PASS")}));
  EXPECT_NE(x.find("tests=\"4\" failures=\"1\" errors=\"1\" skipped=\"1\""), std::string::npos) << x;
  EXPECT_NE(x.find("name=\"a&lt;b&gt;&amp;&quot;c&quot; fault eval float32\""), std::string::npos) << x;
  EXPECT_NE(x.find("bad  &lt;output&gt;"), std::string::npos) << x;  // the control character is dropped
  EXPECT_NE(x.find("<error message=\"VERIFIER_DIDNT_RUN: fail_to_run\""), std::string::npos) << x;
  EXPECT_NE(x.find("out: RMSE too big"), std::string::npos) << x;
}

TEST(Reports, SummaryCountsAndDetailsFailures) {
  auto fail = Rec("m", "FAIL", "compare");
  fail.error = "x|y";
  const std::string md = SummaryMarkdown(Entries({fail, Rec("p", "PASS")}), "T");
  EXPECT_EQ(md.substr(0, 5), "## T\n");
  EXPECT_NE(md.find("**1** FAIL, **1** PASS (2 experiments)"), std::string::npos) << md;
  EXPECT_NE(md.find("`x\\|y`"), std::string::npos) << md;
}

// Issue 21: a verdict carries whether it fails, and every report says what the gate said.
TEST(Reports, UnderStrictAFlakyExperimentIsAFailingTestcaseAndSummaryRow) {
  auto flaky = Rec("f", "FAIL", "compare");
  flaky.attempts = {{results::Code::kFail, "compare", false, "", ""}, {results::Code::kPass, "", false, "", ""}};
  results::GateRow row;
  row.fingerprint = flaky.fingerprint;
  row.verdict = results::Verdict::kFlaky;
  row.note = "passed 1 of 2 runs";
  row.fails = results::Fails(row.verdict, results::FailPolicy{/*strict=*/true, false});
  const auto entries = Entries({flaky}, {row});
  const std::string x = JUnitXml(entries);
  EXPECT_NE(x.find("failures=\"1\""), std::string::npos) << x;
  EXPECT_NE(x.find("<failure message=\"FLAKY"), std::string::npos) << x;
  const std::string md = SummaryMarkdown(entries, "T");
  EXPECT_NE(md.find("❌ FLAKY"), std::string::npos) << md;
  row.fails = results::Fails(row.verdict, results::FailPolicy{});  // without --strict it passes, with a note
  const std::string lax = JUnitXml(Entries({flaky}, {row}));
  EXPECT_NE(lax.find("failures=\"0\""), std::string::npos) << lax;
  EXPECT_NE(lax.find("<system-out>FLAKY: passed 1 of 2 runs</system-out>"), std::string::npos) << lax;
}

TEST(Reports, WriteReportsAppendsToTheStepSummary) {
  testing::TempDir dir;
  const auto step = dir / "step.md";
  testing::Spit(step, "before\n");
  ::setenv("GITHUB_STEP_SUMMARY", step.c_str(), 1);
  const Status st = WriteReports(dir.path(), Entries({Rec("p", "PASS")}), "T");
  ::unsetenv("GITHUB_STEP_SUMMARY");
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(testing::Slurp(step), "before\n" + testing::Slurp(dir / "summary.md") + "\n");
  EXPECT_TRUE(std::filesystem::exists(dir / "junit.xml"));
  EXPECT_TRUE(std::filesystem::exists(dir / "accuracy.csv"));
}

}  // namespace
}  // namespace parity::report
