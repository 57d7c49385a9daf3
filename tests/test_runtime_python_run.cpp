// runtime/python_run.h: a module's main forked from the pool's fork server while workers are kept
// (a fake server here; when none is kept, ForkServerBase is nullopt: test_runtime_fork_server.cpp),
// else, or when that server fails before forking it, a fresh interpreter (one test: it imports
// torch; parity_capture.forkserver without its arguments is argparse's exit 2).
#include "runtime/python_run.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <thread>

#include "runtime/fork_server.h"
#include "runtime/worker_pool.h"
#include "test_helpers.h"
#include "util/files.h"

namespace parity::runtime {
namespace {
namespace fs = std::filesystem;
using namespace std::chrono_literals;

ExitInfo Ended(PythonRun& run) {
  for (int i = 0; i < 3000; ++i) {
    if (auto how = run.Poll()) return *how;
    std::this_thread::sleep_for(10ms);
  }
  ADD_FAILURE() << "the run did not end within 30 s";
  run.Kill();
  return {};
}

// A fake server at the pool's fork server path for this process's runs: one connection, its
// request read, then `reply` written (empty: closed unanswered).
class PoolWithFakeServer {
 public:
  explicit PoolWithFakeServer(std::string reply, std::chrono::milliseconds hold = 0ms) {
    ::setenv(kWorkerPoolEnv, (tmp_.path() / "pool").c_str(), 1);
    SetKeepWorkers(30);
    const std::string sock = *ForkServerBase({}) + ".sock";
    fd_ = testing::ListenUnix(sock, 4);
    EXPECT_GE(fd_, 0) << sock;
    thread_ = std::thread([this, reply, hold] {
      const int c = ::accept(fd_, nullptr, nullptr);
      char ch;
      while (::read(c, &ch, 1) == 1 && ch != '\n') {
      }
      if (!reply.empty()) {
        EXPECT_EQ(::write(c, reply.data(), reply.size()), static_cast<ssize_t>(reply.size()));
      }
      pollfd p{c, POLLIN, 0};
      ::poll(&p, 1, static_cast<int>(hold.count()));  // until the client closes, or `hold` passed
      ::close(c);
    });
  }
  ~PoolWithFakeServer() {
    thread_.join();
    ::close(fd_);
    SetKeepWorkers(0);
    ::unsetenv(kWorkerPoolEnv);
  }
  const fs::path& dir() const { return tmp_.path(); }

 private:
  testing::TempDir tmp_;
  int fd_ = -1;
  std::thread thread_;
};

TEST(PythonRun, WhileWorkersAreKeptItIsForkedFromThePoolsServer) {
  PoolWithFakeServer pool("{\"pid\": 99999999}\n{\"exit\": 0}\n");
  auto run = PythonRun::Start("rank_replay", {"req.json"}, {}, (pool.dir() / "run.log").string());
  ASSERT_TRUE(run.ok()) << run.error().message;
  EXPECT_TRUE(run->forked());
  const ExitInfo how = Ended(*run);
  EXPECT_TRUE(how.exited);
  EXPECT_EQ(how.code, 0);
}

TEST(PythonRun, ARunPastItsDeadlineIsKilledAndSaysSo) {
  PoolWithFakeServer pool("{\"pid\": 99999999}\n", 10s);  // forked, never ends
  auto run = PythonRun::Start("profiling", {"req.json", "res.json"}, {}, (pool.dir() / "run.log").string());
  ASSERT_TRUE(run.ok()) << run.error().message;
  const ExitInfo how = run->Wait(200ms);
  EXPECT_TRUE(how.timed_out);
  EXPECT_TRUE(run->Poll()->timed_out);  // and stays so
}

TEST(PythonRun, AServerThatFailsBeforeForkingItLeavesAFreshInterpreterToRunIt) {
  PoolWithFakeServer pool("");  // closes unanswered
  const std::string log = (pool.dir() / "run.log").string();
  auto run = PythonRun::Start("forkserver", {}, {}, log);
  ASSERT_TRUE(run.ok()) << run.error().message;
  const ExitInfo how = Ended(*run);
  EXPECT_FALSE(run->forked());
  EXPECT_TRUE(how.exited);
  EXPECT_EQ(how.code, 2);  // argparse's: it ran
  EXPECT_NE(ReadFile(log)->find("--socket"), std::string::npos);
}

}  // namespace
}  // namespace parity::runtime
