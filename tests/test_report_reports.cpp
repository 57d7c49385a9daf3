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
  nlohmann::json rows = {{{"fingerprint", "a-fault"}, {"verdict", "FLAKY"}, {"note", "passed 1 of 2 runs"}}};
  auto e = Entries({first, Rec("b", "PASS"), again}, rows);
  ASSERT_EQ(e.size(), 2u);
  EXPECT_EQ(e[0].record["verification_code"], "PASS");
  EXPECT_EQ(e[0].gate["verdict"], "FLAKY");
  EXPECT_TRUE(e[1].gate.is_null());
}

TEST(Reports, AccuracyCsvHasTheRunnersColumns) {
  auto r = Rec("m", "EAGER_FAILED", "eager");
  r["graph_breaks"] = 2;
  const std::string csv = AccuracyCsv(Entries({r}, nullptr));
  EXPECT_EQ(csv.substr(0, csv.find('\n')), "dev,name,batch_size,accuracy,graph_breaks,unique_graphs,compilation_latency");
  EXPECT_NE(csv.find("\ncpu,m,0,eager_1st_run_fail,2,3,"), std::string::npos) << csv;
}

TEST(Reports, JUnitEscapesAndClassifies) {
  auto fail = Rec("a<b>&\"c\"", "FAIL", "compare");
  fail["error"] = std::string("bad \x01 <output>");
  fail["outputs"][0]["message"] = "RMSE too big";
  auto skip = Rec("s", "VERIFIER_SKIPPED", "capability");
  auto crash = Rec("c", "VERIFIER_DIDNT_RUN", "backend");
  const std::string x = JUnitXml(Entries({fail, skip, crash, Rec("p", "PASS")}, nullptr));
  EXPECT_NE(x.find("tests=\"4\" failures=\"1\" errors=\"1\" skipped=\"1\""), std::string::npos) << x;
  EXPECT_NE(x.find("name=\"a&lt;b&gt;&amp;&quot;c&quot; fault eval float32\""), std::string::npos) << x;
  EXPECT_NE(x.find("bad  &lt;output&gt;"), std::string::npos) << x;  // the control character is dropped
  EXPECT_NE(x.find("<error message=\"VERIFIER_DIDNT_RUN: fail_to_run\""), std::string::npos) << x;
  EXPECT_NE(x.find("out: RMSE too big"), std::string::npos) << x;
}

TEST(Reports, SummaryCountsAndDetailsFailures) {
  auto fail = Rec("m", "FAIL", "compare");
  fail["error"] = "x|y";
  const std::string md = SummaryMarkdown(Entries({fail, Rec("p", "PASS")}, nullptr), "T");
  EXPECT_EQ(md.substr(0, 5), "## T\n");
  EXPECT_NE(md.find("**1** FAIL, **1** PASS (2 experiments)"), std::string::npos) << md;
  EXPECT_NE(md.find("`x\\|y`"), std::string::npos) << md;
}

TEST(Reports, WriteReportsAppendsToTheStepSummary) {
  testing::TempDir dir;
  const auto step = dir / "step.md";
  testing::Spit(step, "before\n");
  ::setenv("GITHUB_STEP_SUMMARY", step.c_str(), 1);
  const Status st = WriteReports(dir.path(), Entries({Rec("p", "PASS")}, nullptr), "T");
  ::unsetenv("GITHUB_STEP_SUMMARY");
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(testing::Slurp(step), "before\n" + testing::Slurp(dir / "summary.md") + "\n");
  EXPECT_TRUE(std::filesystem::exists(dir / "junit.xml"));
  EXPECT_TRUE(std::filesystem::exists(dir / "accuracy.csv"));
}

}  // namespace
}  // namespace parity::report
