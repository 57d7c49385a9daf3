#include "matrix/captures.h"

#include <gtest/gtest.h>

#include <fstream>

#include "test_helpers.h"

namespace parity::matrix {
namespace {
namespace fs = std::filesystem;

TEST(ModelListing, AskedOnceThenReadFromTheCacheDir) {
  testing::TempDir tmp;
  EXPECT_FALSE(CachedModelListing(tmp.path()).has_value());
  int asked = 0;
  auto ask = [&asked]() -> Expected<nlohmann::json> {
    ++asked;
    return nlohmann::json{{"models", {{{"name", "mlp"}, {"suite", "toy"}}}}};
  };
  auto first = ModelListing(tmp.path(), ask);
  ASSERT_TRUE(first.ok()) << first.error().message;
  auto second = ModelListing(tmp.path(), ask);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(asked, 1);
  EXPECT_EQ(*first, *second);
  ASSERT_TRUE(CachedModelListing(tmp.path()).has_value());
}

TEST(ModelListing, AFailedAskIsNotCached) {
  testing::TempDir tmp;
  auto r = ModelListing(tmp.path(), []() -> Expected<nlohmann::json> { return Error::Runtime("worker gone"); });
  EXPECT_FALSE(r.ok());
  EXPECT_FALSE(CachedModelListing(tmp.path()).has_value());
}

TEST(CaptureCache, HasOnlyWhatGetWouldFindWithoutAsking) {
  testing::TempDir tmp;
  int asked = 0;
  CaptureCache cache(tmp.path(), [&asked](const nlohmann::json&) -> Expected<nlohmann::json> {
    ++asked;
    return Error::Runtime("no worker here");
  });
  experiment::ExperimentSpec spec;
  spec.model = "mlp";
  spec.test = "eval";
  spec.dtype = "float32";
  spec.device = "cpu";
  EXPECT_FALSE(cache.Has(spec));
  EXPECT_FALSE(cache.Get(spec).ok());
  EXPECT_EQ(asked, 1);
  // A worker that writes the capture: Get stores it, Has finds it, and a second Get asks nothing.
  CaptureCache working(tmp.path(), [&asked](const nlohmann::json& req) -> Expected<nlohmann::json> {
    ++asked;
    fs::create_directories(req["out"].get<std::string>());
    std::ofstream(fs::path(req["out"].get<std::string>()) / "manifest.json") << "{}";
    return nlohmann::json::object();
  });
  ASSERT_TRUE(working.Get(spec).ok());
  EXPECT_TRUE(working.Has(spec));
  ASSERT_TRUE(working.Get(spec).ok());
  EXPECT_EQ(asked, 2);
}

}  // namespace
}  // namespace parity::matrix
