#include "runtime/fork_server.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstring>
#include <functional>
#include <thread>

#include "runtime/worker_pool.h"
#include "test_helpers.h"
#include "util/files.h"

namespace parity::runtime {
namespace {
namespace fs = std::filesystem;
using namespace std::chrono_literals;

// A fake fork server at `<base>.sock`: takes one connection, reads its request line, then does
// `answer` with the connection (and the request it read).
class FakeServer {
 public:
  FakeServer(const std::string& base, std::function<void(int, const nlohmann::json&)> answer) {
    fd_ = testing::ListenUnix(base + ".sock", 4);
    EXPECT_GE(fd_, 0) << base;
    thread_ = std::thread([this, answer] {
      const int c = ::accept(fd_, nullptr, nullptr);
      std::string line;
      char ch;
      while (::read(c, &ch, 1) == 1 && ch != '\n') line.push_back(ch);
      request = nlohmann::json::parse(line, nullptr, false);
      answer(c, request);
      ::close(c);
    });
  }
  ~FakeServer() {
    Join();
    ::close(fd_);
  }
  // Waits until it has answered; `request` is then the line it read.
  void Join() {
    if (thread_.joinable()) thread_.join();
  }
  nlohmann::json request;

 private:
  int fd_ = -1;
  std::thread thread_;
};

void Write(int fd, const std::string& s) { ASSERT_EQ(::write(fd, s.data(), s.size()), static_cast<ssize_t>(s.size())); }

TEST(ForkServer, TheWorkersPidComesOnceTheServerAnswers) {
  testing::TempDir tmp;
  const std::string base = (tmp.path() / "k-fs").string();
  FakeServer server(base, [](int c, const nlohmann::json&) {
    std::this_thread::sleep_for(200ms);  // its imports
    Write(c, "{\"pid\": 4242}\n");
  });
  auto pending = RequestFork(base, {"--socket", "w.sock", "--warm", "cpu"}, {"PARITY_TEST_ONLY=1"}, "w.log");
  ASSERT_TRUE(pending.ok()) << pending.error().message;
  auto first = pending->Poll(0ms);
  ASSERT_TRUE(first.ok());
  EXPECT_FALSE(first->has_value());  // not answered yet: still starting
  auto answer = pending->Poll(10s);
  ASSERT_TRUE(answer.ok()) << answer.error().message;
  EXPECT_EQ(**answer, 4242);
}

TEST(ForkServer, AskingAServerNotUpStartsOneAndNeverWaitsForItToListen) {
  // A server takes seconds to listen (its package's imports, torch among them): asking starts it
  // and returns at once; the request goes once it listens. A second request of this process meanwhile
  // starts no second server. The "interpreter" here is a script that counts its starts and sleeps.
  testing::TempDir tmp;
  const std::string base = (tmp.path() / "k-fs").string();
  const fs::path starts = tmp.path() / "starts", python = tmp.path() / "python";
  ASSERT_TRUE(WriteFileAtomic(python, "#!/bin/sh\necho $$ >> " + starts.string() + "\nexec sleep 30\n").ok());
  fs::permissions(python, fs::perms::owner_all);
  const char* had = std::getenv("PARITY_PYTHON");
  const std::string saved = had ? had : "";
  ::setenv("PARITY_PYTHON", python.c_str(), 1);
  const auto t0 = std::chrono::steady_clock::now();
  auto first = RequestFork(base, {"--socket", "w1.sock"}, {}, "w1.log");
  auto second = RequestRun(base, "rank_replay", {}, {}, "r.log");
  const auto asked = std::chrono::steady_clock::now() - t0;
  if (had) ::setenv("PARITY_PYTHON", saved.c_str(), 1); else ::unsetenv("PARITY_PYTHON");
  ASSERT_TRUE(first.ok()) << first.error().message;
  ASSERT_TRUE(second.ok()) << second.error().message;
  EXPECT_LT(asked, 1s);
  auto polled = first->Poll(0ms);
  ASSERT_TRUE(polled.ok());
  EXPECT_FALSE(polled->has_value());  // its server does not listen yet
  for (int i = 0; i < 500 && !fs::exists(starts); ++i) std::this_thread::sleep_for(10ms);
  std::this_thread::sleep_for(100ms);
  const std::string pids = *ReadFile(starts);
  EXPECT_EQ(std::count(pids.begin(), pids.end(), '\n'), 1) << pids;  // one server for both requests
  const pid_t stand_in = std::atoi(pids.c_str());
  ::kill(stand_in, SIGKILL);        // it outlives this process, as a pool's server does;
  ::waitpid(stand_in, nullptr, 0);  // ended, it is this process's child to reap (no zombie for a later test's waitpid(-1))
  FakeServer server(base, [](int c, const nlohmann::json&) { Write(c, "{\"pid\": 4242}\n"); });
  auto answer = first->Poll(10s);
  ASSERT_TRUE(answer.ok()) << answer.error().message;
  EXPECT_EQ(**answer, 4242);
  server.Join();
  EXPECT_EQ(server.request["argv"], nlohmann::json({"--socket", "w1.sock"}));
}

TEST(ForkServer, TheRequestCarriesArgumentsTheMergedEnvironmentTheWorkingDirAndTheLog) {
  testing::TempDir tmp;
  const std::string base = (tmp.path() / "k-fs").string();
  FakeServer server(base, [](int c, const nlohmann::json&) { Write(c, "{\"pid\": 7}\n"); });
  auto pending = RequestFork(base, {"--socket", "w.sock"}, {"PARITY_TEST_ONLY=1"}, "w.log");
  ASSERT_TRUE(pending.ok());
  ASSERT_TRUE(pending->Poll(10s).ok());
  server.Join();
  const nlohmann::json& req = server.request;
  EXPECT_EQ(req["argv"], nlohmann::json({"--socket", "w.sock"}));
  EXPECT_EQ(req["env"]["PARITY_TEST_ONLY"], "1");
  EXPECT_TRUE(req["env"].contains("PYTHONPATH"));  // parity's Python environment over it
  EXPECT_EQ(req["log"], "w.log");
  EXPECT_EQ(req["cwd"], fs::current_path().string());
}

TEST(ForkServer, AServerThatEndsOrAnswersNonsenseIsAnErrorNamingItsLog) {
  testing::TempDir tmp;
  const std::string base = (tmp.path() / "k-fs").string();
  {
    FakeServer server(base, [](int, const nlohmann::json&) {});  // closes unanswered
    auto pending = RequestFork(base, {"--socket", "w.sock"}, {}, "w.log");
    ASSERT_TRUE(pending.ok());
    auto answer = pending->Poll(10s);
    ASSERT_FALSE(answer.ok());
    EXPECT_NE(answer.error().message.find(base + ".log"), std::string::npos) << answer.error().message;
  }
  fs::remove(base + ".sock");
  FakeServer server(base, [](int c, const nlohmann::json&) { Write(c, "{\"pid\": \"x\"}\n"); });
  auto pending = RequestFork(base, {"--socket", "w.sock"}, {}, "w.log");
  ASSERT_TRUE(pending.ok());
  auto answer = pending->Poll(10s);
  ASSERT_FALSE(answer.ok());
  EXPECT_NE(answer.error().message.find("not {\"pid\": N}"), std::string::npos) << answer.error().message;
}

TEST(ForkServer, AServerThatRefusedToServeIsNotAskedAgain) {
  testing::TempDir tmp;
  const std::string base = (tmp.path() / "k-fs").string();
  ASSERT_TRUE(WriteFileAtomic(base + ".refused", "RuntimeError: CUDA was initialised while importing\n").ok());
  auto pending = RequestFork(base, {"--socket", "w.sock"}, {}, "w.log");
  ASSERT_FALSE(pending.ok());
  EXPECT_NE(pending.error().message.find("CUDA was initialised"), std::string::npos) << pending.error().message;
  EXPECT_FALSE(fs::exists(base + ".sock"));  // no server started
  EXPECT_FALSE(RequestRun(base, "rank_replay", {}, {}, "r.log").ok());
}

TEST(ForkServer, StopForkServersRemovesTheFilesOfOneNoLongerUp) {
  testing::TempDir tmp;
  for (const char* ext : {".sock", ".lock", ".log", ".refused"}) ASSERT_TRUE(WriteFileAtomic(tmp.path() / (std::string("k-fs") + ext), "1").ok());
  EXPECT_EQ(StopForkServers(tmp.path()), 0);  // its lock is free: nobody to end
  EXPECT_FALSE(fs::exists(tmp.path() / "k-fs.sock"));
  EXPECT_FALSE(fs::exists(tmp.path() / "k-fs.lock"));
  EXPECT_FALSE(fs::exists(tmp.path() / "k-fs.refused"));
}

TEST(ForkServer, AServerUpIsListedByTheKeyAndPidItsHeldLockNames) {
  testing::TempDir tmp;
  ASSERT_TRUE(WriteFileAtomic(tmp.path() / "abc-fs.lock", "12345").ok());
  ASSERT_TRUE(WriteFileAtomic(tmp.path() / "def-fs.lock", "777").ok());  // its lock free: not up
  const int held = ::open((tmp.path() / "abc-fs.lock").c_str(), O_RDONLY);
  ASSERT_EQ(::flock(held, LOCK_EX | LOCK_NB), 0);
  const auto up = ListForkServers(tmp.path());
  ::close(held);
  ASSERT_EQ(up.size(), 1u);
  EXPECT_EQ(up[0].first, "abc");
  EXPECT_EQ(up[0].second, 12345);
}

// Polls `run` until it ended (10 s at most).
Expected<std::optional<ExitInfo>> Ended(ForkedRun& run) {
  for (int i = 0; i < 1000; ++i) {
    auto how = run.Poll();
    if (!how.ok() || how->has_value()) return how;
    std::this_thread::sleep_for(10ms);
  }
  return std::optional<ExitInfo>();
}

TEST(ForkServer, ARunsPidThenHowItEndedComeBackOverItsConnection) {
  testing::TempDir tmp;
  const std::string base = (tmp.path() / "k-fs").string();
  FakeServer server(base, [](int c, const nlohmann::json&) {
    Write(c, "{\"pid\": 4242}\n");
    std::this_thread::sleep_for(100ms);
    Write(c, "{\"exit\": 3}\n");
  });
  auto run = RequestRun(base, "rank_replay", {"req.json"}, {"PARITY_TEST_ONLY=1"}, "r.log");
  ASSERT_TRUE(run.ok()) << run.error().message;
  auto how = Ended(*run);
  ASSERT_TRUE(how.ok()) << how.error().message;
  ASSERT_TRUE(how->has_value());
  EXPECT_EQ(run->pid(), 4242);
  EXPECT_TRUE((*how)->exited);
  EXPECT_EQ((*how)->code, 3);
  server.Join();
  EXPECT_EQ(server.request["run"], "rank_replay");
  EXPECT_EQ(server.request["argv"], nlohmann::json({"req.json"}));
  EXPECT_EQ(server.request["env"]["PARITY_TEST_ONLY"], "1");
  EXPECT_EQ(server.request["log"], "r.log");
}

TEST(ForkServer, ARunKilledByASignalSaysWhich) {
  testing::TempDir tmp;
  const std::string base = (tmp.path() / "k-fs").string();
  FakeServer server(base, [](int c, const nlohmann::json&) { Write(c, "{\"pid\": 99999999}\n{\"signal\": 11}\n"); });
  auto run = RequestRun(base, "rank_replay", {}, {}, "r.log");
  ASSERT_TRUE(run.ok());
  auto how = Ended(*run);
  ASSERT_TRUE(how.ok() && how->has_value());
  EXPECT_FALSE((*how)->exited);
  EXPECT_EQ((*how)->signal, 11);
}

TEST(ForkServer, ARunTheServerNeverForkedIsAnErrorSoTheCallerCanStartItElsewhere) {
  testing::TempDir tmp;
  const std::string base = (tmp.path() / "k-fs").string();
  FakeServer server(base, [](int, const nlohmann::json&) {});  // closes unanswered
  auto run = RequestRun(base, "rank_replay", {}, {}, "r.log");
  ASSERT_TRUE(run.ok());
  auto how = Ended(*run);
  ASSERT_FALSE(how.ok());
  EXPECT_NE(how.error().message.find("without forking the run"), std::string::npos) << how.error().message;
}

TEST(ForkServer, ForkedRunsComeFromThePoolsServerOnlyWhileWorkersAreKept) {
  testing::TempDir tmp;
  ::setenv(kWorkerPoolEnv, (tmp.path() / "pool").c_str(), 1);
  SetKeepWorkers(0);
  EXPECT_FALSE(ForkServerBase({}).has_value());
  SetKeepWorkers(30);
  auto base = ForkServerBase({});
  ASSERT_TRUE(base.has_value());
  EXPECT_EQ(fs::path(*base).parent_path(), tmp.path() / "pool");
  EXPECT_EQ(fs::path(*base).filename().string(), ForkServerKey({}) + "-fs");
  ::setenv(kForkServerEnv, "0", 1);
  EXPECT_FALSE(ForkServerBase({}).has_value());
  ::unsetenv(kForkServerEnv);
  SetKeepWorkers(0);
  ::unsetenv(kWorkerPoolEnv);
}

TEST(ForkServer, TheSwitchTurnsForkingOff) {
  ::setenv(kForkServerEnv, "0", 1);
  EXPECT_FALSE(ForkServersEnabled());
  ::unsetenv(kForkServerEnv);
  EXPECT_TRUE(ForkServersEnabled());
}

}  // namespace
}  // namespace parity::runtime
