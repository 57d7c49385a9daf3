// UnixAddress: a socket path whole or refused. ConnectUnix: a connected, close-on-exec stream
// socket, or -1 with errno saying why.
#include "util/socket.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "test_helpers.h"

namespace parity {
namespace {

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
