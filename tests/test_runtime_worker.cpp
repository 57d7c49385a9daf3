// The worker client against a fake worker on a Unix socket: a Python exception comes back typed
// (type, message, traceback apart), a dead worker as kWorkerLost.
#include "runtime/worker.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <thread>

#include "test_helpers.h"

namespace parity::runtime {
namespace {

// Listens on `path`, accepts one connection, answers each line with the next of `answers`, then
// closes.
std::thread FakeWorker(const std::string& path, std::vector<std::string> answers) {
  int srv = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  EXPECT_EQ(::bind(srv, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  EXPECT_EQ(::listen(srv, 1), 0);
  return std::thread([srv, answers] {
    int c = ::accept(srv, nullptr, nullptr);
    std::string buf;
    char tmp[4096];
    for (const auto& a : answers) {
      while (buf.find('\n') == std::string::npos) {
        ssize_t n = ::recv(c, tmp, sizeof tmp, 0);
        if (n <= 0) break;
        buf.append(tmp, static_cast<size_t>(n));
      }
      buf.erase(0, buf.find('\n') + 1);
      std::string line = a + "\n";
      (void)!::send(c, line.data(), line.size(), MSG_NOSIGNAL);
    }
    ::close(c);
    ::close(srv);
  });
}

TEST(WorkerClient, PythonExceptionIsTyped) {
  testing::TempDir dir;
  const std::string sock = (dir / "w.sock").string();
  auto server = FakeWorker(sock, {R"({"ok": true, "pong": 1})",
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
  auto server = FakeWorker(sock, {"not json"});
  auto client = WorkerClient::Connect(sock);
  ASSERT_TRUE(client.ok());
  auto r = client->Call({{"cmd", "ping"}});
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(IsWorkerLost(r.error()));
  server.join();
}

TEST(WorkerProcess, ASocketDeepInALongDirLivesInTheTempDir) {
  const std::string deep = "/tmp/" + std::string(120, 'd') + "/work/worker0.sock";  // past sun_path's 108 bytes
  WorkerProcess far(deep, "/dev/null");
  EXPECT_LT(far.socket_path().size(), 108u);
  EXPECT_EQ(far.socket_path().rfind(std::filesystem::temp_directory_path().string(), 0), 0u) << far.socket_path();
  EXPECT_NE(WorkerProcess(deep + "2", "/dev/null").socket_path(), far.socket_path());  // one per path asked for
  EXPECT_EQ(WorkerProcess("/tmp/w.sock", "/dev/null").socket_path(), "/tmp/w.sock");  // short: as asked
}

}  // namespace
}  // namespace parity::runtime
