#include "experiment/options.h"

#include <gtest/gtest.h>

#include "test_helpers.h"

namespace parity::experiment {
namespace {

TEST(ExperimentOptions, JsonRoundTripsWhatIsSetAndWhatIsNot) {
  ExperimentOptions o;
  EXPECT_EQ(ExperimentOptions::FromJson(o.ToJson())->ToJson(), o.ToJson());
  EXPECT_FALSE(ExperimentOptions::FromJson(o.ToJson())->device.has_value());  // unset stays unset: the dir's own
  o.backend_options = nlohmann::json{{"max_autotune", "True"}};
  o.device = "cuda:1";
  o.tol = 1e-3;
  o.cosine = true;
  o.ignore_non_fp = true;
  o.batch_size = 4;
  o.repeat = 3;
  o.iterations_per_run = 2;
  o.timeout_s = 60;
  o.jobs = 2;
  o.cache_dir = "/c";
  o.imports = {"mylib.ops"};
  auto back = ExperimentOptions::FromJson(o.ToJson());
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(back->ToJson(), o.ToJson());
  EXPECT_EQ(*back->device, "cuda:1");
  EXPECT_TRUE(testing::FailsWith(ExperimentOptions::FromJson({{"jobs", "two"}}), {"\"jobs\"", "not an integer"}));
}

TEST(ExperimentOptions, CheckNamesTheFlag) {
  ExperimentOptions o;
  EXPECT_TRUE(o.Check().ok());
  o.tol = -1;
  EXPECT_NE(o.Check().error().message.find("--tol"), std::string::npos);
  o = ExperimentOptions{};
  o.jobs = 0;
  EXPECT_NE(o.Check().error().message.find("--jobs"), std::string::npos);
  o = ExperimentOptions{};
  o.timeout_s = 0;
  EXPECT_NE(o.Check().error().message.find("--timeout"), std::string::npos);
  o = ExperimentOptions{};
  o.repeat = 0;
  EXPECT_EQ(o.Check().error().kind, ErrorKind::kBadInput);
}

}  // namespace
}  // namespace parity::experiment
