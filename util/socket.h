// Unix sockets: connecting; writing a whole message (every caller's rule: no SIGPIPE, a signal's
// interruption retried). Nothing parity-specific.
#pragma once

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <string_view>

namespace parity {

// `addr` set to the Unix socket at `path`; false with errno ENAMETOOLONG when `path` does not fit
// sockaddr_un's 108 bytes with its NUL (never truncated: a cut path names another socket).
inline bool UnixAddress(const std::string& path, sockaddr_un& addr) {
  addr = sockaddr_un{};
  if (path.size() >= sizeof(addr.sun_path)) {
    errno = ENAMETOOLONG;
    return false;
  }
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  return true;
}

// A Unix socket of `type` (SOCK_STREAM, SOCK_SEQPACKET; close-on-exec) listening at `path`, bound
// under path + ".tmp" and renamed into place once it listens (replacing what was there): a client
// that sees `path` exist never finds it bound and not yet listening (ECONNREFUSED). -1 with errno
// saying why, nothing left at either name.
inline int ListenUnix(const std::string& path, int type, int backlog) {
  const std::string tmp = path + ".tmp";
  sockaddr_un addr;
  if (!UnixAddress(tmp, addr)) return -1;
  const int fd = ::socket(AF_UNIX, type | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  ::unlink(tmp.c_str());
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(fd, backlog) != 0 ||
      ::rename(tmp.c_str(), path.c_str()) != 0) {
    const int saved = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    errno = saved;
    return -1;
  }
  return fd;
}

// A stream socket connected to the Unix socket at `path` (close-on-exec), or -1 with errno saying
// why (ENAMETOOLONG: `path` does not fit sockaddr_un).
inline int ConnectUnix(const std::string& path) {
  sockaddr_un addr;
  if (!UnixAddress(path, addr)) return -1;
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    const int saved = errno;
    ::close(fd);
    errno = saved;
    return -1;
  }
  return fd;
}

// Writes all of `bytes` to the socket `fd`; false when the peer is gone (errno says why).
inline bool SendAll(int fd, std::string_view bytes) {
  size_t off = 0;
  while (off < bytes.size()) {
    const ssize_t n = ::send(fd, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

// Sends `bytes` as one message on the socket `fd` with the descriptors `fds` (SCM_RIGHTS, at most
// 8); the bytes sent (`bytes.size()` when whole), or -1 (errno says why).
inline ssize_t SendWithFds(int fd, std::string_view bytes, const int* fds, int count) {
  constexpr int kMost = 8;
  if (count < 0 || count > kMost) {
    errno = EINVAL;
    return -1;
  }
  iovec iov{const_cast<char*>(bytes.data()), bytes.size()};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMost)] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  if (count > 0) {
    msg.msg_control = control;
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * static_cast<size_t>(count));
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * static_cast<size_t>(count));
    std::memcpy(CMSG_DATA(c), fds, sizeof(int) * static_cast<size_t>(count));
  }
  ssize_t n;
  do n = ::sendmsg(fd, &msg, MSG_NOSIGNAL);
  while (n < 0 && errno == EINTR);
  return n;
}

}  // namespace parity
