#include "verify/record.h"

#include <gtest/gtest.h>

namespace parity::verify {
namespace {

TEST(VerifyRecord, TheDriversTimeCompletesTheSplitAndTheWallTimeIsItsSum) {
  experiment::ExperimentSpec spec;
  spec.model = "bert";
  spec.backend = "inductor";
  experiment::ExperimentResult r;
  r.code = results::Code::kPass;
  r.phase_seconds = {{"load", 0.2}, {"eager", 1.0}, {"compile", 2.0}};
  r.peak_memory_bytes = {{"reference", 100}};
  RecordContext c;
  c.job_wall_s = 3.5;  // 0.3 s more than the job's own phases: its process's start and end
  c.capture_s = 4.0;
  c.reports_s = 0.1;
  const results::Record rec = RecordOf(spec, r, c);
  const auto& p = rec.metrics.phase_seconds;
  EXPECT_DOUBLE_EQ(p.at("capture"), 4.0);
  EXPECT_NEAR(p.at("process"), 0.3, 1e-9);
  EXPECT_DOUBLE_EQ(p.at("reports"), 0.1);
  double sum = 0;
  for (const auto& [name, s] : p) sum += s;
  EXPECT_NEAR(sum, rec.metrics.wall_time_s, 1e-9);
  EXPECT_NEAR(rec.metrics.wall_time_s, 7.6, 1e-9);
  EXPECT_EQ(rec.metrics.peak_memory_bytes.at("reference"), 100);
}

TEST(VerifyRecord, AJobThatNeverReportedItsPhasesIsAllProcess) {
  experiment::ExperimentSpec spec;
  experiment::ExperimentResult r;  // a child that crashed: no phase_seconds came back
  r.code = results::Code::kVerifierDidntRun;
  RecordContext c;
  c.job_wall_s = 2.0;
  const results::Record rec = RecordOf(spec, r, c);
  EXPECT_DOUBLE_EQ(rec.metrics.phase_seconds.at("process"), 2.0);
  EXPECT_DOUBLE_EQ(rec.metrics.wall_time_s, 2.0);
  EXPECT_EQ(rec.metrics.phase_seconds.count("capture"), 0u);
}

TEST(VerifyRecord, ARankVerifiedOnItsOwnSaysSo) {
  experiment::ExperimentSpec spec;
  experiment::ExperimentResult r;
  r.code = results::Code::kPass;
  EXPECT_FALSE(RecordOf(spec, r, RecordContext{}).distributed);  // a plain dir's record
  spec.rank = 1;
  spec.world_size = 4;
  const results::Record rec = RecordOf(spec, r, RecordContext{});
  ASSERT_TRUE(rec.distributed);
  EXPECT_EQ(rec.distributed->ToJson(), (nlohmann::json{{"rank", 1}, {"world_size", 4}, {"replay", "per-rank"}}));
}

}  // namespace
}  // namespace parity::verify
