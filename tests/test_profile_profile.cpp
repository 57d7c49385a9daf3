#include "profile/profile.h"

#include <gtest/gtest.h>

#include "results/record.h"

namespace parity::profile {
namespace {

TEST(Profile, OptionsAreCheckedBeforeAnythingRuns) {
  ProfileOptions o;
  EXPECT_TRUE(CheckProfileOptions(o).ok());
  o.iterations = 0;
  EXPECT_EQ(CheckProfileOptions(o).error().kind, ErrorKind::kBadInput);
  o = {};
  o.kernel_options = {{"max_autotune", "True"}};
  EXPECT_NE(CheckProfileOptions(o).error().message.find("--kernel-option needs --kernel"), std::string::npos);
  o = {};
  o.trace = "/no/such/dir/trace.json";
  EXPECT_NE(CheckProfileOptions(o).error().message.find("/no/such/dir"), std::string::npos);
}

TEST(Profile, ARecordIsAProfileNotAVerification) {
  experiment::ExperimentSpec spec;
  spec.model = "mlp";
  spec.suite = "parity";
  spec.backend = "inductor";
  Report report;
  report.model = "mlp";
  const nlohmann::json rec = ProfileRecord(spec, report);
  EXPECT_TRUE(results::IsProfileRecord(rec));
  EXPECT_FALSE(rec.contains("fingerprint"));                          // verify's resume must not take it for a run experiment
  EXPECT_FALSE(results::Record::FromJson(rec, "results.jsonl").ok());  // not a verification record
  EXPECT_EQ(rec["model"]["model_name"], "mlp");
  EXPECT_EQ(rec["experiment"]["backend"], "inductor");
  EXPECT_TRUE(rec["profile"].contains("speed"));
}

}  // namespace
}  // namespace parity::profile
