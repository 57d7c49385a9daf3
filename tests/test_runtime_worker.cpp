// The worker client against a fake worker on a Unix socket: a Python exception comes back typed
// (type, message, traceback apart), a dead worker as kWorkerLost, plan repeats as frames.
#include "runtime/worker.h"

#include <gtest/gtest.h>

#include <thread>

#include "test_helpers.h"

namespace parity::runtime {
namespace {

TEST(WorkerClient, PythonExceptionIsTyped) {
  testing::TempDir dir;
  const std::string sock = (dir / "w.sock").string();
  auto server = testing::FakeWorkerSocket(sock, {R"({"ok": true, "pong": 1})",
                                  R"({"ok": false, "error_type": "BackendCompilerFailed", "error": "inductor raised: boom", )"
                                  R"("traceback": "Traceback (most recent call last):\n  ..."})"});
  auto client = WorkerClient::Connect(sock);
  ASSERT_TRUE(client.ok()) << client.error().message;
  auto ok = client->Call({{"cmd", "ping"}});
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ((*ok)["pong"], 1);
  auto bad = client->Call({{"cmd", "run"}});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().kind, ErrorKind::kRuntime);
  EXPECT_EQ(bad.error().exception_type, "BackendCompilerFailed");
  EXPECT_EQ(bad.error().message, "inductor raised: boom");  // not folded with the type
  EXPECT_NE(bad.error().traceback.find("Traceback"), std::string::npos);
  EXPECT_FALSE(IsWorkerLost(bad.error()));
  // The fake closes after its answers: the next call finds the worker gone.
  auto lost = client->Call({{"cmd", "ping"}});
  ASSERT_FALSE(lost.ok());
  EXPECT_TRUE(IsWorkerLost(lost.error()));
  server.join();
}

TEST(WorkerClient, MalformedAnswerIsALostWorker) {
  testing::TempDir dir;
  const std::string sock = (dir / "w.sock").string();
  auto server = testing::FakeWorkerSocket(sock, {"not json"});
  auto client = WorkerClient::Connect(sock);
  ASSERT_TRUE(client.ok());
  auto r = client->Call({{"cmd", "ping"}});
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(IsWorkerLost(r.error()));
  server.join();
}

// A host op plan repeat ({"cmd", "plan"} and nothing else) travels as an 8-byte frame; the frame
// answer means {"same": true}; a line answers it too (an error stays typed); a frame answer that
// is not the one known is a lost worker. Any other request stays a JSON line.
TEST(WorkerClient, PlanRepeatsTravelAsFrames) {
  testing::TempDir dir;
  const std::string sock = (dir / "w.sock").string();
  const std::string same("\x01\0\0\0\0\0\0\0", 8);
  std::vector<std::string> seen;
  auto server = testing::FakeWorkerSocket(sock,
                           {same, R"({"ok": false, "error_type": "UnknownPlan", "error": "plan 7 is unknown"})",
                            R"({"ok": true, "same": true})", std::string("\x01\0\0\0\x05\0\0\0", 8)},
                           &seen);
  auto client = WorkerClient::Connect(sock);
  ASSERT_TRUE(client.ok());
  auto r = client->Call({{"cmd", "host_call"}, {"plan", 258}});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(*r, (nlohmann::json{{"ok", true}, {"same", true}}));
  auto unknown = client->Call({{"cmd", "host_batch"}, {"plan", 7}});
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error().exception_type, "UnknownPlan");
  auto whole = client->Call({{"cmd", "host_call"}, {"plan", 1}, {"op", "ns::op"}});  // not a bare repeat: a line
  ASSERT_TRUE(whole.ok());
  auto bad = client->Call({{"cmd", "host_call"}, {"plan", 3}});
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(IsWorkerLost(bad.error()));
  server.join();
  ASSERT_EQ(seen.size(), 4u);
  EXPECT_EQ(seen[0], std::string("\x01\0\0\0\x02\x01\0\0", 8));  // 258, little-endian
  EXPECT_EQ(seen[1], std::string("\x01\0\0\0\x07\0\0\0", 8));
  EXPECT_EQ(seen[2].front(), '{');
  EXPECT_EQ(seen[2].back(), '\n');
}

TEST(WorkerProcess, ASocketDeepInALongDirLivesInTheTempDir) {
  const std::string deep = "/tmp/" + std::string(120, 'd') + "/work/worker0.sock";  // past sun_path's 108 bytes
  WorkerProcess far(deep, "/dev/null");
  EXPECT_LT(far.socket_path().size(), 108u);
  EXPECT_EQ(far.socket_path().rfind(std::filesystem::temp_directory_path().string(), 0), 0u) << far.socket_path();
  EXPECT_NE(WorkerProcess(deep + "2", "/dev/null").socket_path(), far.socket_path());  // one per path asked for
  EXPECT_EQ(WorkerProcess("/tmp/w.sock", "/dev/null").socket_path(), "/tmp/w.sock");  // short: as asked
}

TEST(NamedWorkerListening, TheNamedSocketListensOnceItExists) {
  testing::TempDir dir;
  const std::string path = (dir / "worker.sock").string();
  ::unsetenv("PARITY_WORKER_SOCKET");
  EXPECT_FALSE(NamedWorkerListening());  // none named
  ::setenv("PARITY_WORKER_SOCKET", path.c_str(), 1);
  EXPECT_FALSE(NamedWorkerListening());  // still starting: no socket yet
  std::thread fake = testing::FakeWorkerSocket(path, {});
  EXPECT_TRUE(NamedWorkerListening());
  ::unsetenv("PARITY_WORKER_SOCKET");
  (void)WorkerClient::Connect(path);  // lets the fake worker end
  fake.join();
}

}  // namespace
}  // namespace parity::runtime
