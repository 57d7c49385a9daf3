#include "util/zygote.h"

#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <string_view>

#include "util/socket.h"

extern char** environ;

namespace parity {
namespace {

std::atomic<int> g_socket{-1};  // this process's end of the zygote's request socket; -1: none
pid_t g_zygote = 0;             // the zygote, in the process that started it
constexpr int kFds = 4;         // a request's status socket, stdin, stdout, stderr
constexpr size_t kMaxRequest = 1 << 20;
constexpr int kAnswerMs = 10000;  // the zygote answers at once; past this it is not used again

int Threads() {
  DIR* d = ::opendir("/proc/self/task");
  if (!d) return -1;
  int n = 0;
  while (const dirent* e = ::readdir(d))
    if (e->d_name[0] != '.') ++n;
  ::closedir(d);
  return n;
}

void CloseAll(const int* fds, int n) {
  for (int i = 0; i < n; ++i)
    if (fds[i] >= 0) ::close(fds[i]);
}

// NAME=VALUE entries as a map (the first of a name kept).
template <typename Entries>
std::map<std::string, std::string> EnvMap(const Entries& env) {
  std::map<std::string, std::string> m;
  for (std::string_view e : env)
    if (const auto eq = e.find('='); eq != std::string_view::npos) m.emplace(e.substr(0, eq), e.substr(eq + 1));
  return m;
}

// A request: the working dir, argc, argv, then the environment, NUL-separated.
std::string Encode(const std::string& cwd, const std::vector<std::string>& argv, const std::vector<std::string>& env) {
  std::string out = cwd + '\0' + std::to_string(argv.size()) + '\0';
  for (const auto& a : argv) out += a + '\0';
  for (const auto& e : env) out += e + '\0';
  return out;
}

struct Request {
  std::string cwd;
  std::vector<std::string> argv, env;
};
bool Decode(const char* data, size_t size, Request& r) {
  std::vector<std::string> parts;
  for (size_t at = 0; at < size;) {
    const void* end = std::memchr(data + at, '\0', size - at);
    if (!end) return false;
    const size_t len = static_cast<size_t>(static_cast<const char*>(end) - (data + at));
    parts.emplace_back(data + at, len);
    at += len + 1;
  }
  if (parts.size() < 2) return false;
  char* stop = nullptr;
  const unsigned long argc = std::strtoul(parts[1].c_str(), &stop, 10);
  if (*stop || argc == 0 || argc > parts.size() - 2) return false;
  r.cwd = parts[0];
  r.argv.assign(parts.begin() + 2, parts.begin() + 2 + static_cast<long>(argc));
  r.env.assign(parts.begin() + 2 + static_cast<long>(argc), parts.end());
  return true;
}

// The zygote's state (its process only).
struct Zygote {
  int socket = -1;    // the driver's requests; a server's: the connection being served
  int listener = -1;  // a server's listening socket; -1 for a driver's zygote
  int sigchld = -1;   // a signalfd: children ended (a server's: also SIGTERM and SIGINT, its end)
  ZygoteEntry entry = nullptr;
  // Whether a request may set variable `name` to `*value` (null: unset it) otherwise than this
  // process started with.
  std::function<bool(const std::string& name, const std::string* value)> may_differ;
  std::map<std::string, std::string> start_env;  // this process's as it started
  sigset_t mask{};                                // the signal mask it started with
  struct sigaction quiet[4]{};                    // the dispositions it started with, of kQuiet
  std::map<pid_t, int> children;                  // pid -> its status socket
  char* args = nullptr;                           // this process's command line (what ps shows), and its size
  size_t args_size = 0;
  std::string server_path;                        // a server's socket path
};
constexpr int kQuiet[4] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};  // the zygote ends with its process, not on these

// OpenMP reads OMP_NUM_THREADS as it loads; the child applies a request's count again (ApplyOpenMP).
constexpr const char* kOmpThreads = "OMP_NUM_THREADS";
int PositiveCount(const std::string& v) {
  if (v.empty() || v.size() > 6 || v.find_first_not_of("0123456789") != std::string::npos) return 0;
  return std::atoi(v.c_str());
}
void ApplyOpenMP() {
  const char* v = std::getenv(kOmpThreads);
  const int n = v ? PositiveCount(v) : 0;
  using SetThreads = void (*)(int);
  auto set = reinterpret_cast<SetThreads>(::dlsym(RTLD_DEFAULT, "omp_set_num_threads"));
  if (n > 0 && set) set(n);
}

bool Named(const std::vector<std::string>& may_differ, const std::string& name) {
  for (const auto& m : may_differ) {
    if (!m.empty() && m.back() == '*' ? name.rfind(m.substr(0, m.size() - 1), 0) == 0 : name == m) return true;
  }
  return false;
}

// The first variable the request sets otherwise than the zygote's start and may not; "" when none.
std::string Differs(const Zygote& z, const std::vector<std::string>& env) {
  const auto want = EnvMap(env);
  for (const auto& [k, v] : want) {
    auto it = z.start_env.find(k);
    if ((it == z.start_env.end() || it->second != v) && !z.may_differ(k, &v)) return k;
  }
  for (const auto& [k, v] : z.start_env)
    if (!want.count(k) && !z.may_differ(k, nullptr)) return k;
  return "";
}

// What an exec would have closed: every descriptor above 2 marked close-on-exec.
void CloseOnExec() {
  DIR* d = ::opendir("/proc/self/fd");
  if (!d) return;
  const int own = ::dirfd(d);
  std::vector<int> close;
  while (const dirent* e = ::readdir(d)) {
    const int fd = std::atoi(e->d_name);
    if (fd > 2 && fd != own && (::fcntl(fd, F_GETFD) & FD_CLOEXEC)) close.push_back(fd);
  }
  ::closedir(d);
  for (int fd : close) ::close(fd);
}

// Where main's argv lies (contiguous strings, as the kernel laid them out): what ps shows.
void ShowArgs(Zygote& z, int argc, char** argv) {
  if (argc > 0 && argv && argv[0]) {
    z.args = argv[0];
    z.args_size = static_cast<size_t>(argv[argc - 1] + std::strlen(argv[argc - 1]) + 1 - argv[0]);
  }
}

// The request's argv where ps reads the command line (the one this process started with, as long
// as it fits there).
void ShowCommand(Zygote& z, const std::vector<std::string>& argv) {
  if (!z.args || z.args_size == 0) return;
  std::string line;
  for (const auto& a : argv) line += a + '\0';
  line.resize(z.args_size, '\0');
  line.back() = '\0';
  std::memcpy(z.args, line.data(), z.args_size);
}

// Whether the caller has given up on its request: the status socket's other end closed (a caller
// that had no answer in time runs the binary itself; the child must then not run too). Only a
// whole close counts (POLLHUP), not a caller's shutdown of its writing side, which it never needs.
// Asked by the child, the last point before the entry: a caller that gave up before it is never
// run for twice.
bool CallerGone(int status_fd) {
  pollfd p{status_fd, 0, 0};
  return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLHUP | POLLERR));
}

// The child: what an exec of the binary would have been, from the entry on.
[[noreturn]] void RunChild(Zygote& z, pid_t zygote, const int* fds, Request& r) {
  ::close(z.socket);
  if (z.listener >= 0) ::close(z.listener);
  ::close(z.sigchld);
  for (const auto& [pid, fd] : z.children) ::close(fd);
  for (int i = 0; i < 4; ++i) ::sigaction(kQuiet[i], &z.quiet[i], nullptr);
  ::sigprocmask(SIG_SETMASK, &z.mask, nullptr);
  ::setpgid(0, 0);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != zygote || CallerGone(fds[0])) ::_exit(127);
  for (int i = 1; i < kFds; ++i) ::dup2(fds[i], i - 1);
  CloseAll(fds, kFds);
  CloseOnExec();
  if (::chdir(r.cwd.c_str()) != 0) ::_exit(127);
  ::clearenv();
  for (const auto& e : r.env) ::putenv(::strdup(e.c_str()));
  ApplyOpenMP();
  ::prctl(PR_SET_NAME, "parity");
  ShowCommand(z, r.argv);
  std::vector<char*> argv;
  for (auto& a : r.argv) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::exit(z.entry(static_cast<int>(r.argv.size()), argv.data()));
}

// One request; false when the driver has gone.
bool Serve(Zygote& z) {
  static std::vector<char> buffer(kMaxRequest);
  iovec iov{buffer.data(), buffer.size()};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kFds)];
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  const ssize_t n = ::recvmsg(z.socket, &msg, MSG_CMSG_CLOEXEC);
  if (n == 0) return false;
  if (n < 0) return errno == EINTR || errno == EAGAIN;
  int fds[kFds] = {-1, -1, -1, -1};
  int got = 0;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c))
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
      got = static_cast<int>((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
      std::memcpy(fds, CMSG_DATA(c), sizeof(int) * static_cast<size_t>(std::min(got, kFds)));
    }
  Request r;
  std::string refused;
  if (got != kFds || (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) || !Decode(buffer.data(), static_cast<size_t>(n), r))
    refused = "a malformed request";
  else if (std::string name = Differs(z, r.env); !name.empty())
    refused = "the environment's " + name + " differs from what the binary read as it loaded";
  if (!refused.empty()) {
    if (fds[0] >= 0) SendAll(fds[0], "refused " + refused + "\n");
    CloseAll(fds, kFds);
    return true;
  }
  const pid_t zygote = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) RunChild(z, zygote, fds, r);
  if (pid < 0) {
    SendAll(fds[0], std::string("refused fork: ") + std::strerror(errno) + "\n");
    CloseAll(fds, kFds);
    return true;
  }
  ::setpgid(pid, pid);  // also here, so that the group exists when the caller may kill it
  SendAll(fds[0], "pid " + std::to_string(pid) + "\n");
  CloseAll(fds + 1, kFds - 1);
  z.children[pid] = fds[0];
  return true;
}

// Every child that ended: how, on its status socket. False when a server was told to end
// (SIGTERM or SIGINT, read from the same signalfd).
bool Reap(Zygote& z) {
  bool go_on = true;
  signalfd_siginfo info;
  while (::read(z.sigchld, &info, sizeof info) == static_cast<ssize_t>(sizeof info))
    if (info.ssi_signo != SIGCHLD) go_on = false;
  int st = 0;
  pid_t pid;
  while ((pid = ::waitpid(-1, &st, WNOHANG)) > 0) {
    auto it = z.children.find(pid);
    if (it == z.children.end()) continue;
    const std::string line = WIFEXITED(st)     ? "exit " + std::to_string(WEXITSTATUS(st))
                             : WIFSIGNALED(st) ? "signal " + std::to_string(WTERMSIG(st))
                                               : "exit 255";
    SendAll(it->second, line + "\n");
    ::close(it->second);
    z.children.erase(it);
  }
  return go_on;
}

// A server's connection: its one request, from a process of this user only. The connection is
// closed after it (a child's status goes to the status socket the request passed).
void ServeConnection(Zygote& z) {
  const int conn = ::accept4(z.listener, nullptr, nullptr, SOCK_CLOEXEC);
  if (conn < 0) return;
  ucred peer{};
  socklen_t len = sizeof peer;
  const timeval wait{2, 0};  // a client that connected sends its request at once
  if (::getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &peer, &len) == 0 && peer.uid == ::getuid() &&
      ::setsockopt(conn, SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof wait) == 0) {
    z.socket = conn;
    Serve(z);
    z.socket = -1;
  }
  ::close(conn);
}

// The zygote's life: requests served and children reaped until the driver has gone (its socket
// closed), or, for a server (z.listener), until SIGTERM or SIGINT, or `idle_ms` without a request
// while no child of its runs (-1: never).
[[noreturn]] void ZygoteMain(Zygote& z, int idle_ms) {
  const bool server = z.listener >= 0;
  ::prctl(PR_SET_NAME, "parity-zygote");
  // 0, 1 and 2 open (on /dev/null where the process started without one): the descriptors a
  // request passes then come above them, and a child's dup2 onto 0-2 cannot overwrite one of them.
  for (int fd = 0; fd < 3; ++fd)
    if (::fcntl(fd, F_GETFD) < 0 && ::open("/dev/null", O_RDWR) != fd) ::_exit(0);
  std::vector<std::string_view> start;
  for (char** e = environ; *e; ++e) start.emplace_back(*e);
  z.start_env = EnvMap(start);
  // A driver's zygote ignores what a terminal sends its process group (it ends with its driver);
  // a server ends on SIGTERM and SIGINT, read below. The children get the dispositions back.
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  for (int i = 0; i < 4; ++i) ::sigaction(kQuiet[i], server ? nullptr : &ignore, &z.quiet[i]);
  sigset_t watched;
  sigemptyset(&watched);
  sigaddset(&watched, SIGCHLD);
  if (server) {
    sigaddset(&watched, SIGTERM);
    sigaddset(&watched, SIGINT);
  }
  ::sigprocmask(SIG_BLOCK, &watched, &z.mask);
  z.sigchld = ::signalfd(-1, &watched, SFD_CLOEXEC | SFD_NONBLOCK);
  if (z.sigchld < 0) ::_exit(0);
  while (true) {
    pollfd p[2] = {{server ? z.listener : z.socket, POLLIN, 0}, {z.sigchld, POLLIN, 0}};
    const int n = ::poll(p, 2, server && z.children.empty() ? idle_ms : -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (n == 0) break;  // a server, idle
    if ((p[1].revents & POLLIN) && !Reap(z)) break;
    if (server) {
      if (p[0].revents & POLLIN) ServeConnection(z);
    } else if ((p[0].revents & (POLLIN | POLLHUP | POLLERR)) && !Serve(z)) {
      break;
    }
  }
  for (const auto& [pid, fd] : z.children) ::kill(-pid, SIGKILL);  // their death signal would too
  if (server) ::unlink(z.server_path.c_str());
  ::_exit(0);
}

void Disable() {
  const int fd = g_socket.exchange(-1);
  if (fd >= 0) ::close(fd);
}

// At this process's exit: the zygote told to end (its socket closed) and reaped, so that it is not
// left to an init that may never reap it (a container's first process). Its children ended before.
void StopZygote() {
  if (g_zygote <= 0) return;
  Disable();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  int st = 0;
  while (::waitpid(g_zygote, &st, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() >= deadline) {
      ::kill(g_zygote, SIGKILL);
      ::waitpid(g_zygote, &st, 0);
      break;
    }
    ::usleep(1000);
  }
  g_zygote = 0;
}

// The zygote's first line on a status socket, read a byte at a time (what follows is the caller's).
std::optional<std::string> FirstLine(int fd) {
  std::string line;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kAnswerMs);
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) return std::nullopt;
    pollfd p{fd, POLLIN, 0};
    const int r = ::poll(&p, 1, static_cast<int>(left));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return std::nullopt;
    char c;
    const ssize_t n = ::recv(fd, &c, 1, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return std::nullopt;
    if (c == '\n') return line;
    line += c;
  }
}

}  // namespace

bool ZygoteMayDiffer(const std::vector<std::string>& may_differ, const std::string& name, const std::string& value) {
  return Named(may_differ, name) || (name == kOmpThreads && PositiveCount(value) > 0);
}

void StartZygote(int argc, char** argv, ZygoteEntry entry, std::vector<std::string> may_differ) {
  if (g_socket.load() >= 0 || !entry) return;
  if (const char* e = std::getenv("PARITY_ZYGOTE"); e && std::string(e) == "0") return;
  if (Threads() != 1) return;  // a fork of a process with other threads may hold their locks
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) return;
  const int size = static_cast<int>(kMaxRequest);
  ::setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &size, sizeof size);  // capped by the system: a larger request is refused
  std::fflush(nullptr);
  const pid_t driver = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    CloseAll(sv, 2);
    return;
  }
  if (pid == 0) {
    ::close(sv[0]);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != driver) ::_exit(0);
    static Zygote z;
    z.socket = sv[1];
    z.entry = entry;
    z.may_differ = [list = std::move(may_differ)](const std::string& name, const std::string* value) {
      return value ? ZygoteMayDiffer(list, name, *value) : Named(list, name);
    };
    ShowArgs(z, argc, argv);
    ZygoteMain(z, -1);
  }
  ::close(sv[1]);
  g_socket.store(sv[0]);
  g_zygote = pid;
  std::atexit(StopZygote);
}

void ServeZygote(const std::string& socket_path, int argc, char** argv, ZygoteEntry entry,
                 std::vector<std::string> read_at_load, int idle_seconds) {
  auto fail = [&socket_path](const std::string& why) {
    std::fprintf(stderr, "parity: zygote server at %s: %s\n", socket_path.c_str(), why.c_str());
    std::fflush(stderr);
    ::_exit(2);
  };
  if (!entry) fail("no entry");
  if (Threads() != 1) fail("another thread runs in this process (a fork would not have it)");
  sockaddr_un addr;
  if (socket_path.empty() || !UnixAddress(socket_path, addr)) fail("the path is empty or too long for a socket");
  const auto* a = reinterpret_cast<const sockaddr*>(&addr);
  if (const int probe = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0); probe >= 0) {
    const bool live = ::connect(probe, a, sizeof addr) == 0;
    ::close(probe);
    if (live) ::_exit(0);  // one serves there already
  }
  // Listening before its path appears (a server's that is gone replaced): a client that saw the
  // path and connected at once was refused while the server was bound and not yet listening.
  const mode_t mask = ::umask(077);  // the socket this user's only
  const int listener = ListenUnix(socket_path, SOCK_SEQPACKET, 64);
  ::umask(mask);
  if (listener < 0) fail(std::string("cannot listen: ") + std::strerror(errno));
  static Zygote z;
  z.listener = listener;
  z.server_path = socket_path;
  z.entry = entry;
  z.may_differ = [fixed = std::move(read_at_load)](const std::string& name, const std::string* value) {
    return !Named(fixed, name) || (value && name == kOmpThreads && PositiveCount(*value) > 0);
  };
  ShowArgs(z, argc, argv);
  std::fflush(nullptr);
  ZygoteMain(z, idle_seconds > 0 ? idle_seconds * 1000 : -1);
}

std::optional<ZygoteChild> ZygoteSpawn(const std::vector<std::string>& argv, const std::vector<std::string>& env, int in_fd,
                                       int out_fd, int err_fd) {
  const int sock = g_socket.load();
  if (sock < 0 || argv.empty()) return std::nullopt;
  char cwd[PATH_MAX];
  if (!::getcwd(cwd, sizeof cwd)) return std::nullopt;
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return std::nullopt;
  const std::string payload = Encode(cwd, argv, env);
  const int fds[kFds] = {sv[1], in_fd, out_fd, err_fd};
  const ssize_t n = SendWithFds(sock, payload, fds, kFds);
  ::close(sv[1]);
  if (n != static_cast<ssize_t>(payload.size())) {
    ::close(sv[0]);
    if (n < 0 && errno != EMSGSIZE) Disable();  // the zygote is gone
    return std::nullopt;
  }
  const auto line = FirstLine(sv[0]);
  if (line && line->rfind("pid ", 0) == 0) {
    const long pid = std::strtol(line->c_str() + 4, nullptr, 10);
    if (pid > 0) return ZygoteChild{static_cast<pid_t>(pid), sv[0]};
  }
  ::close(sv[0]);
  if (!line) Disable();  // no answer: the zygote is not used again
  return std::nullopt;
}

}  // namespace parity
