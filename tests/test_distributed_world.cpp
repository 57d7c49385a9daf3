#include "distributed/world.h"

#include <gtest/gtest.h>

#include <fstream>

#include "tests/test_helpers.h"

namespace parity::distributed {
namespace {

namespace fs = std::filesystem;

void Write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

TEST(World, ATopManifestThatDoesNotHoldIsExit2NamingItsField) {
  const fs::path d = fs::temp_directory_path() / ("parity-world-" + std::to_string(::getpid()));
  fs::remove_all(d);
  Write(d / "manifest.json", R"({"format": "parity.distributed", "version": 1, "world_size": 2, "ranks": ["rank0"]})");
  EXPECT_TRUE(World::IsWorldDir(d));
  auto w = World::Load(d);
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.error().kind, ErrorKind::kBadInput);
  EXPECT_NE(w.error().message.find("field \"ranks\" is not an array of 2 rank dirs"), std::string::npos) << w.error().message;
  Write(d / "manifest.json", R"({"format": "parity.distributed", "version": 1, "world_size": 1, "ranks": ["../x"]})");
  w = World::Load(d);
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.error().message.find("leaves the multi-rank dir"), std::string::npos) << w.error().message;
  Write(d / "manifest.json", R"({"format": "parity.distributed", "version": 9, "world_size": 1, "ranks": ["rank0"]})");
  w = World::Load(d);
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.error().message.find("field \"version\" is 9"), std::string::npos) << w.error().message;
  Write(d / "manifest.json", R"({"format": "parity.repro"})");
  EXPECT_FALSE(World::IsWorldDir(d));
  fs::remove_all(d);
}

}  // namespace
}  // namespace parity::distributed
