// Unix sockets: writing a whole message (every caller's rule: no SIGPIPE, a signal's interruption
// retried). Nothing parity-specific.
#pragma once

#include <sys/socket.h>

#include <cerrno>
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

}  // namespace parity
