#include "matrix/shard.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "test_helpers.h"

namespace parity::matrix {
namespace {

GetEnv EnvOf(std::map<std::string, std::string> vars) {
  auto store = std::make_shared<std::map<std::string, std::string>>(std::move(vars));
  return [store](const char* name) -> const char* {
    auto it = store->find(name);
    return it == store->end() ? nullptr : it->second.c_str();
  };
}

TEST(Shard, ParsesOneBasedIOfN) {
  auto s = ParseShard("2/3");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->index, 1);
  EXPECT_EQ(s->count, 3);
  EXPECT_EQ(s->Text(), "2/3");
  for (const char* bad : {"0/3", "4/3", "3", "a/b", "1/0", "-1/2", "1/2/3", ""}) EXPECT_FALSE(ParseShard(bad).ok()) << bad;
}

TEST(Shard, FlagWinsOverEnvironment) {
  auto s = ResolveShard("1/2", 0, EnvOf({{"CI_NODE_INDEX", "2"}, {"CI_NODE_TOTAL", "2"}}));
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->index, 0);
  EXPECT_EQ(s->source, "--shard");
}

TEST(Shard, KubernetesIndexedJobIsZeroBasedWithCountFromFlagOrEnv) {
  auto s = ResolveShard("", 4, EnvOf({{"JOB_COMPLETION_INDEX", "3"}}));
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->index, 3);
  EXPECT_EQ(s->count, 4);
  EXPECT_EQ(s->source, "JOB_COMPLETION_INDEX");
  s = ResolveShard("", 0, EnvOf({{"JOB_COMPLETION_INDEX", "0"}, {"PARITY_SHARDS", "2"}}));
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->count, 2);
  EXPECT_TRUE(testing::FailsWith(ResolveShard("", 0, EnvOf({{"JOB_COMPLETION_INDEX", "0"}})), {"--shards N"}));
  EXPECT_TRUE(testing::FailsWith(ResolveShard("", 2, EnvOf({{"JOB_COMPLETION_INDEX", "2"}})), {"out of range"}));
  EXPECT_TRUE(testing::FailsWith(ResolveShard("", 2, EnvOf({{"JOB_COMPLETION_INDEX", "x"}})), {"$JOB_COMPLETION_INDEX"}));
}

TEST(Shard, SlurmArrayCountsFromTheArraysMinimum) {
  auto s =
      ResolveShard("", 0, EnvOf({{"SLURM_ARRAY_TASK_ID", "5"}, {"SLURM_ARRAY_TASK_MIN", "4"}, {"SLURM_ARRAY_TASK_COUNT", "3"}}));
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->index, 1);
  EXPECT_EQ(s->count, 3);
  s = ResolveShard("", 0, EnvOf({{"SLURM_ARRAY_TASK_ID", "0"}, {"SLURM_ARRAY_TASK_COUNT", "2"}}));
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->index, 0);
  EXPECT_TRUE(testing::FailsWith(ResolveShard("", 0, EnvOf({{"SLURM_ARRAY_TASK_ID", "0"}})), {"SLURM_ARRAY_TASK_COUNT"}));
}

TEST(Shard, CiNodeIndexIsOneBased) {
  auto s = ResolveShard("", 0, EnvOf({{"CI_NODE_INDEX", "1"}, {"CI_NODE_TOTAL", "3"}}));
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->index, 0);
  EXPECT_EQ(s->count, 3);
  EXPECT_TRUE(testing::FailsWith(ResolveShard("", 0, EnvOf({{"CI_NODE_INDEX", "0"}, {"CI_NODE_TOTAL", "3"}})), {"out of range"}));
}

TEST(Shard, NoEnvironmentIsOneShard) {
  auto s = ResolveShard("", 0, EnvOf({}));
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->count, 1);
}

TEST(Shard, ShardsCoverEveryItemExactlyOnceBalancedByCount) {
  std::vector<std::string> keys;
  for (int i = 0; i < 10; ++i) keys.push_back("k" + std::to_string(i));
  const std::vector<double> costs(keys.size(), 1.0);
  std::multiset<size_t> seen;
  for (int i = 0; i < 3; ++i) {
    auto mine = ShardItems(keys, costs, Shard{i, 3, ""});
    EXPECT_GE(mine.size(), 3u);
    EXPECT_LE(mine.size(), 4u);
    EXPECT_TRUE(std::is_sorted(mine.begin(), mine.end()));
    seen.insert(mine.begin(), mine.end());
  }
  EXPECT_EQ(seen.size(), keys.size());
  EXPECT_EQ(std::set<size_t>(seen.begin(), seen.end()).size(), keys.size());
}

TEST(Shard, KnownCostsBalanceTheLoad) {
  // One long experiment and four short ones: the long one gets a shard to itself.
  const std::vector<std::string> keys = {"a", "b", "c", "d", "e"};
  const std::vector<double> costs = {100, 10, 10, 10, 10};
  EXPECT_EQ(ShardItems(keys, costs, Shard{0, 2, ""}), (std::vector<size_t>{0}));
  EXPECT_EQ(ShardItems(keys, costs, Shard{1, 2, ""}), (std::vector<size_t>{1, 2, 3, 4}));
}

TEST(Shard, CostsComeFromEarlierResultsElseTheMedian) {
  testing::TempDir dir;
  testing::Spit(dir / "results.jsonl",
                "{\"fingerprint\":\"a\",\"metrics\":{\"wall_time_s\":5}}\n"
                "{\"fingerprint\":\"b\",\"wall_time_s\":7}\n"
                "not json\n"
                "{\"fingerprint\":\"c\",\"metrics\":{\"wall_time_s\":9}}\n");
  auto known = KnownCosts({dir / "results.jsonl", dir / "absent.jsonl"});
  EXPECT_EQ(known.size(), 3u);
  EXPECT_EQ(CostsFor({"a", "b", "z"}, known), (std::vector<double>{5, 7, 7}));
  EXPECT_EQ(CostsFor({"z"}, {}), (std::vector<double>{1}));
}

}  // namespace
}  // namespace parity::matrix
