#include "util/subprocess.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <thread>

namespace parity {
namespace {

TEST(Subprocess, ShellWordQuotesWhatAShellWouldSplit) {
  // A command parity prints for a person to copy (ci's update command): paths as one word each.
  EXPECT_EQ(ShellWord("/tmp/out/results.jsonl"), "/tmp/out/results.jsonl");
  EXPECT_EQ(ShellWord("/tmp/dir with space/x"), "'/tmp/dir with space/x'");
  EXPECT_EQ(ShellWord("it's"), "'it'\"'\"'s'");
  EXPECT_EQ(ShellWord(""), "''");
  EXPECT_EQ(ShellWord("$HOME"), "'$HOME'");
}

TEST(Subprocess, ReportsExitCodes) {
  auto c = Child::Spawn({"/bin/sh", "-c", "exit 3"});
  ASSERT_TRUE(c.ok());
  ExitInfo e = c->Wait(std::chrono::seconds(10));
  EXPECT_TRUE(e.exited);
  EXPECT_EQ(e.code, 3);
  EXPECT_EQ(e.Describe(), "exit 3");
}

TEST(Subprocess, ReportsSignals) {
  auto c = Child::Spawn({"/bin/sh", "-c", "kill -SEGV $$"});
  ASSERT_TRUE(c.ok());
  ExitInfo e = c->Wait(std::chrono::seconds(10));
  EXPECT_FALSE(e.exited);
  EXPECT_EQ(e.signal, SIGSEGV);
  EXPECT_EQ(e.Describe(), "signal 11 (SIGSEGV)");
}

TEST(Subprocess, KillsAtTheDeadlineWithItsChildren) {
  auto c = Child::Spawn({"/bin/sh", "-c", "sleep 100 & sleep 100"});
  ASSERT_TRUE(c.ok());
  auto t0 = std::chrono::steady_clock::now();
  ExitInfo e = c->Wait(std::chrono::milliseconds(300));
  EXPECT_TRUE(e.timed_out);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
}

TEST(Subprocess, SignalEndsItsGroupWithoutWaiting) {
  // Several children signalled first end side by side; each is waited for afterwards.
  std::vector<Child> children;
  for (int k = 0; k < 3; ++k) {
    auto c = Child::Spawn({"/bin/sh", "-c", "sleep 100 & sleep 100"});
    ASSERT_TRUE(c.ok());
    children.push_back(std::move(*c));
  }
  for (Child& c : children) c.Signal();
  for (Child& c : children) {
    ExitInfo e = c.Wait(std::chrono::seconds(10));
    EXPECT_FALSE(e.timed_out);
    EXPECT_EQ(e.signal, SIGKILL);
  }
}

TEST(Subprocess, AbandonKillsWithoutWaitingAndTheChildIsReapedAnyway) {
  // A child that takes long to end once killed (a shell that ignores nothing, its group's sleep
  // and a trap that sleeps on: SIGKILL ends them at once, so the end is the kernel's) is killed,
  // Abandon returns at once, and a thread reaps it: no zombie is left while this process lives.
  auto c = Child::Spawn({"/bin/sh", "-c", "sleep 100 & sleep 100"});
  ASSERT_TRUE(c.ok());
  const pid_t pid = c->pid();
  const auto t0 = std::chrono::steady_clock::now();
  c->Abandon();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(500));
  EXPECT_EQ(c->pid(), -1);
  EXPECT_TRUE(c->Poll().has_value());  // nothing left to wait for
  bool reaped = false;
  for (int i = 0; i < 500 && !reaped; ++i) {
    reaped = ::kill(pid, 0) != 0 && errno == ESRCH;  // a zombie still answers kill(pid, 0)
    if (!reaped) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(reaped);
}

TEST(Subprocess, PassesEnvironmentAndRedirects) {
  char tmpl[] = "/tmp/parity_sp_XXXXXX";
  int fd = ::mkstemp(tmpl);
  ::close(fd);
  SpawnOptions so;
  so.env = {"PARITY_TEST_VALUE=42"};
  so.stdout_path = tmpl;
  auto c = Child::Spawn({"/bin/sh", "-c", "echo $PARITY_TEST_VALUE"}, so);
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->Wait(std::chrono::seconds(10)).exited);
  FILE* f = std::fopen(tmpl, "r");
  char buf[16] = {};
  ASSERT_TRUE(std::fgets(buf, sizeof buf, f));
  std::fclose(f);
  std::remove(tmpl);
  EXPECT_STREQ(buf, "42\n");
}

}  // namespace
}  // namespace parity
