// UnixAddress: a socket path whole or refused. ListenUnix: listening before its path appears.
// ConnectUnix: a connected, close-on-exec stream socket, or -1 with errno saying why.
#include "util/socket.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "test_helpers.h"

namespace parity {
namespace {
namespace fs = std::filesystem;

TEST(Socket, ConnectUnixConnectsCloseOnExecAndTheBytesArrive) {
  testing::TempDir dir;
  const std::string path = (dir / "s.sock").string();
  const int listener = testing::ListenUnix(path);
  ASSERT_GE(listener, 0) << path;
  const int fd = ConnectUnix(path);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  EXPECT_TRUE(::fcntl(fd, F_GETFD) & FD_CLOEXEC);
  const int peer = ::accept(listener, nullptr, nullptr);
  ASSERT_GE(peer, 0);
  ASSERT_TRUE(SendAll(fd, "hello"));
  char buf[8] = {};
  EXPECT_EQ(::recv(peer, buf, sizeof buf, MSG_WAITALL | MSG_DONTWAIT), 5);
  EXPECT_STREQ(buf, "hello");
  for (int d : {fd, peer, listener}) ::close(d);
}

TEST(Socket, UnixAddressTakesAPathThatFitsWholeAndRefusesOneThatDoesNot) {
  sockaddr_un addr;
  const std::string fits(sizeof(addr.sun_path) - 1, 'f');  // with its NUL, all 108 bytes
  ASSERT_TRUE(UnixAddress(fits, addr));
  EXPECT_EQ(addr.sun_family, AF_UNIX);
  EXPECT_EQ(std::string(addr.sun_path), fits);
  errno = 0;
  EXPECT_FALSE(UnixAddress(fits + "f", addr));
  EXPECT_EQ(errno, ENAMETOOLONG);
}

TEST(Socket, ListenUnixListensBeforeItsPathAppears) {
  testing::TempDir dir;
  const std::string path = (dir / "l.sock").string();
  std::ofstream(path) << "a server's that is gone";  // replaced
  const int listener = ListenUnix(path, SOCK_SEQPACKET, 4);
  ASSERT_GE(listener, 0) << std::strerror(errno);
  EXPECT_TRUE(::fcntl(listener, F_GETFD) & FD_CLOEXEC);
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  const int fd = ::socket(AF_UNIX, SOCK_SEQPACKET, 0);  // connects: listening, not only bound
  sockaddr_un addr;
  ASSERT_TRUE(UnixAddress(path, addr));
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0) << std::strerror(errno);
  for (int d : {fd, listener}) ::close(d);
  // Its bound name is path + ".tmp": a path with no room for that is refused, nothing left.
  const std::string longest = (dir / std::string(sizeof(addr.sun_path) - dir.path().string().size() - 5, 'x')).string();
  errno = 0;
  EXPECT_EQ(ListenUnix(longest, SOCK_STREAM, 1), -1);
  EXPECT_EQ(errno, ENAMETOOLONG);
  EXPECT_FALSE(fs::exists(longest));
}

TEST(Socket, ConnectUnixSaysWhyItCannot) {
  testing::TempDir dir;
  errno = 0;
  EXPECT_EQ(ConnectUnix((dir / "nobody-listens.sock").string()), -1);
  EXPECT_EQ(errno, ENOENT);
  errno = 0;
  EXPECT_EQ(ConnectUnix("/tmp/" + std::string(sizeof(sockaddr_un::sun_path), 'x')), -1);  // no room for it
  EXPECT_EQ(errno, ENAMETOOLONG);
  const std::string path = (dir / "closed.sock").string();  // a socket file whose listener is gone
  ::close(testing::ListenUnix(path));
  errno = 0;
  EXPECT_EQ(ConnectUnix(path), -1);
  EXPECT_EQ(errno, ECONNREFUSED);
}

}  // namespace
}  // namespace parity
