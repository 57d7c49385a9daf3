// Unix sockets: writing a whole message (every caller's rule: no SIGPIPE, a signal's interruption
// retried). Nothing parity-specific.
#pragma once

#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <string_view>

namespace parity {

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
