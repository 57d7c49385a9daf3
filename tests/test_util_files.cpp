#include "util/files.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_helpers.h"

namespace parity {
namespace {

TEST(Files, ReadFileRefusesWhatIsNotARegularFileWithoutBlocking) {
  testing::TempDir dir;
  ASSERT_EQ(::mkfifo((dir / "fifo").c_str(), 0644), 0);
  EXPECT_TRUE(testing::FailsWith(ReadFile(dir / "fifo"), {"fifo", "not a regular file"}));  // a FIFO would block
  EXPECT_TRUE(testing::FailsWith(ReadFile(dir.path()), {"not a regular file"}));
  EXPECT_TRUE(testing::FailsWith(ReadFile("/dev/zero"), {"/dev/zero", "not a regular file"}));
  EXPECT_TRUE(testing::FailsWith(ReadFile(dir / "absent"), {"absent", "cannot open"}));
}

TEST(Files, ReadFileHasASizeCap) {
  testing::TempDir dir;
  testing::Spit(dir / "f", "0123456789");
  EXPECT_EQ(*ReadFile(dir / "f"), "0123456789");
  EXPECT_TRUE(testing::FailsWith(ReadFile(dir / "f", 4), {"10 bytes, more than the 4"}));
}

TEST(Files, RemovesTheScratchOfDeadProcessesOnly) {
  testing::TempDir dir;
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ASSERT_GT(child, 0);
  ::waitpid(child, nullptr, 0);  // its pid is now free (and, right after, not reused)
  std::filesystem::create_directories(dir / ("scratch-" + std::to_string(child)) / "sub");
  std::filesystem::create_directories(dir / ("scratch-" + std::to_string(::getpid())));
  std::filesystem::create_directories(dir / ("scratch-" + std::to_string(::getppid())));
  std::filesystem::create_directories(dir / "scratch-notapid");
  EXPECT_EQ(RemoveDeadProcessDirs(dir.path(), "scratch-"), 1);
  EXPECT_FALSE(std::filesystem::exists(dir / ("scratch-" + std::to_string(child))));
  EXPECT_TRUE(std::filesystem::exists(dir / ("scratch-" + std::to_string(::getpid()))));
  EXPECT_TRUE(std::filesystem::exists(dir / ("scratch-" + std::to_string(::getppid()))));
  EXPECT_TRUE(std::filesystem::exists(dir / "scratch-notapid"));
}

}  // namespace
}  // namespace parity
