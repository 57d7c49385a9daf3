#include "ci/merge.h"

#include <gtest/gtest.h>

#include "ci_records.h"
#include "test_helpers.h"

namespace parity::ci {
namespace {

using testing::Rec;
using testing::RecJson;

std::vector<results::Record> Read(const std::filesystem::path& file) {
  return results::ReadRecords(file, results::ReadMode::kStrict).value();
}

void WriteResults(const std::filesystem::path& dir, const std::vector<nlohmann::json>& records) {
  std::filesystem::create_directories(dir);
  std::string text;
  for (const auto& r : records) text += r.dump() + "\n";
  testing::Spit(dir / "results.jsonl", text);
}

TEST(Merge, DeduplicatesByFingerprintAndKeepsConflictsAsAttempts) {
  testing::TempDir dir;
  WriteResults(dir / "s1", {RecJson("a", "PASS"), RecJson("b", "FAIL", "compare")});
  WriteResults(dir / "s2", {RecJson("c", "PASS"), RecJson("a", "PASS"), RecJson("b", "PASS")});
  auto s = Merge(dir / "out", {dir / "s1", dir / "s2" / "results.jsonl"});
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(s->records, 3);
  EXPECT_EQ(s->duplicates, 2);
  ASSERT_EQ(s->conflicts.size(), 1u);
  EXPECT_NE(s->conflicts[0].find("FAIL in"), std::string::npos) << s->conflicts[0];
  auto merged = Read(dir / "out" / "results.jsonl");
  ASSERT_EQ(merged.size(), 3u);
  EXPECT_EQ(merged[1].code, results::Code::kFail);
  ASSERT_EQ(merged[1].attempts.size(), 2u);
  EXPECT_EQ(merged[1].attempts[1].code, results::Code::kPass);
}

TEST(Merge, ProfileRecordsInTheResultsAreNotVerifications) {
  testing::TempDir dir;
  nlohmann::json profile = {{"kind", "profile"}, {"model", {{"model_name", "a"}}}, {"profile", nlohmann::json::object()}};
  WriteResults(dir / "s1", {RecJson("a", "PASS"), profile});
  auto records = Read(dir / "s1" / "results.jsonl");
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].code, results::Code::kPass);
}

TEST(Merge, CopiesReproDirsFromWhereTheShardsArtifactsAreNow) {
  testing::TempDir dir;
  auto r = RecJson("b", "FAIL", "compare");
  r["repro_dir"] = "/ci/runner-7/out/repros/b-fault";  // where the shard wrote it, elsewhere
  WriteResults(dir / "s1", {r});
  testing::WriteSmallRepro(dir / "s1" / "repros" / "b-fault");
  auto s = Merge(dir / "out", {dir / "s1"});
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(s->repros, 1);
  const std::filesystem::path copied = Read(dir / "out" / "results.jsonl")[0].repro_dir;
  EXPECT_EQ(copied, dir / "out" / "repros" / "b-fault");
  EXPECT_TRUE(std::filesystem::exists(copied / "manifest.json"));
}

TEST(Merge, BadInputNamesTheFileAndLineAndNothingIsOverwritten) {
  testing::TempDir dir;
  std::filesystem::create_directories(dir / "s1");
  testing::Spit(dir / "s1" / "results.jsonl", RecJson("a", "PASS").dump() + "\n{\"model\": 1}\n");
  EXPECT_TRUE(testing::FailsWith(Merge(dir / "out", {dir / "s1"}), {"results.jsonl:2", "verification_code"}));
  EXPECT_TRUE(testing::FailsWith(Merge(dir / "out", {dir / "nope"}), {"nope", "no such"}));
  WriteResults(dir / "s2", {RecJson("a", "PASS")});
  ASSERT_TRUE(Merge(dir / "out", {dir / "s2"}).ok());
  EXPECT_TRUE(testing::FailsWith(Merge(dir / "out", {dir / "s2"}), {"exists"}));
}

}  // namespace
}  // namespace parity::ci
