#include "util/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "util/zygote.h"

extern char** environ;

namespace parity {

std::string SignalName(int sig) {
  switch (sig) {
    case SIGSEGV: return "SIGSEGV";
    case SIGABRT: return "SIGABRT";
    case SIGKILL: return "SIGKILL";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGILL: return "SIGILL";
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    default: return "signal " + std::to_string(sig);
  }
}

std::string ExitInfo::Describe() const {
  if (timed_out) return "timeout (killed)";
  if (exited) return "exit " + std::to_string(code);
  if (signal) return "signal " + std::to_string(signal) + " (" + SignalName(signal) + ")";
  return "unknown";
}

Expected<Child> Child::Spawn(const std::vector<std::string>& argv, const SpawnOptions& options) {
  if (argv.empty()) return Error::Internal("spawn: empty argv");
  std::vector<std::string> env_store;
  for (char** e = environ; *e; ++e) env_store.emplace_back(*e);
  for (const auto& kv : options.env) {
    const std::string key = kv.substr(0, kv.find('=') + 1);
    for (auto it = env_store.begin(); it != env_store.end();) it = it->rfind(key, 0) == 0 ? env_store.erase(it) : it + 1;
    env_store.push_back(kv);
  }
  std::vector<char*> cargv, cenv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  for (const auto& e : env_store) cenv.push_back(const_cast<char*>(e.c_str()));
  cenv.push_back(nullptr);
  // Open redirections before fork: the child must only call async-signal-safe functions.
  int out_fd = -1, err_fd = -1, in_fd = -1;
  if (options.stdout_path) out_fd = ::open(options.stdout_path->c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (options.stderr_path) err_fd = ::open(options.stderr_path->c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (options.stdin_null) in_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (!options.outlive_parent && argv[0] == SelfExe()) {
    auto forked = ZygoteSpawn(argv, env_store, in_fd >= 0 ? in_fd : 0, out_fd >= 0 ? out_fd : 1, err_fd >= 0 ? err_fd : 2);
    if (forked) {
      for (int fd : {out_fd, err_fd, in_fd})
        if (fd >= 0) ::close(fd);
      return Child(forked->pid, forked->status_fd);
    }
  }
  const pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) return Error::Runtime(std::string("fork failed: ") + std::strerror(errno));
  if (pid == 0) {
    if (options.outlive_parent) {
      ::setsid();  // its own session and process group, away from the terminal's signals
    } else {
      ::setpgid(0, 0);
      // Die with the parent: a killed `parity verify` must not leave a hung experiment behind.
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(127);
    }
    if (out_fd >= 0) ::dup2(out_fd, 1);
    if (err_fd >= 0) ::dup2(err_fd, 2);
    if (in_fd >= 0) ::dup2(in_fd, 0);
    ::execve(cargv[0], cargv.data(), cenv.data());
    ::_exit(127);
  }
  if (!options.outlive_parent) ::setpgid(pid, pid);  // also from the parent, to win the race with Kill()
  for (int fd : {out_fd, err_fd, in_fd})
    if (fd >= 0) ::close(fd);
  return Child(pid);
}

Child& Child::operator=(Child&& o) noexcept {
  if (this != &o) {
    Kill();
    CloseStatus();
    pid_ = o.pid_;
    status_fd_ = o.status_fd_;
    reported_ = std::move(o.reported_);
    o.pid_ = -1;
    o.status_fd_ = -1;
  }
  return *this;
}

Child::~Child() {
  Kill();
  CloseStatus();
}

pid_t Child::Release() {
  const pid_t pid = pid_;
  pid_ = -1;
  CloseStatus();  // the zygote still reaps it
  return pid;
}

void Child::CloseStatus() {
  if (status_fd_ >= 0) ::close(status_fd_);
  status_fd_ = -1;
}

void Child::Signal() {
  if (pid_ <= 0) return;
  ::kill(-pid_, SIGKILL);
  ::kill(pid_, SIGKILL);
}

void Child::Abandon() {
  if (Poll()) return;  // ended already (now reaped), or no child
  Signal();
  if (status_fd_ >= 0) {
    CloseStatus();  // the zygote reaps it
  } else {
    std::thread([pid = pid_] {
      int st = 0;
      while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
      }
    }).detach();
  }
  pid_ = -1;
}

void Child::Kill() {
  if (pid_ <= 0) return;
  Signal();
  if (status_fd_ >= 0) {
    (void)Reported(5000);  // the zygote reaps it at once
    CloseStatus();
  } else {
    int st = 0;
    ::waitpid(pid_, &st, 0);
  }
  pid_ = -1;
}

namespace {
ExitInfo FromStatus(int st) {
  ExitInfo info;
  if (WIFEXITED(st)) {
    info.exited = true;
    info.code = WEXITSTATUS(st);
  } else if (WIFSIGNALED(st)) {
    info.signal = WTERMSIG(st);
  }
  return info;
}
}  // namespace

std::optional<ExitInfo> Child::Reported(int wait_ms) {
  if (status_fd_ < 0) return ExitInfo{};
  while (true) {
    const auto nl = reported_.find('\n');
    if (nl != std::string::npos) {
      const std::string line = reported_.substr(0, nl);
      CloseStatus();
      ExitInfo info;
      if (line.rfind("exit ", 0) == 0) {
        info.exited = true;
        info.code = std::atoi(line.c_str() + 5);
      } else if (line.rfind("signal ", 0) == 0) {
        info.signal = std::atoi(line.c_str() + 7);
      }
      return info;
    }
    pollfd p{status_fd_, POLLIN, 0};
    const int r = ::poll(&p, 1, wait_ms);
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) return std::nullopt;
    char buf[64];
    const ssize_t n = r < 0 ? -1 : ::recv(status_fd_, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {  // the zygote died before saying: its death signal ended the child
      CloseStatus();
      return ExitInfo{};
    }
    reported_.append(buf, static_cast<size_t>(n));
  }
}

std::optional<ExitInfo> Child::Poll() {
  if (pid_ <= 0) return ExitInfo{};
  if (status_fd_ >= 0) {
    auto ended = Reported(0);
    if (ended) pid_ = -1;
    return ended;
  }
  int st = 0;
  pid_t r = ::waitpid(pid_, &st, WNOHANG);
  if (r == 0) return std::nullopt;
  pid_ = -1;
  ExitInfo info = FromStatus(st);
  return info;
}

ExitInfo Child::Wait(std::optional<std::chrono::milliseconds> timeout) {
  if (pid_ <= 0) return ExitInfo{};
  const auto deadline = std::chrono::steady_clock::now() + timeout.value_or(std::chrono::milliseconds(0));
  if (status_fd_ >= 0) {
    while (true) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (auto ended = Reported(timeout ? static_cast<int>(std::max<int64_t>(0, left.count())) : -1)) {
        ::kill(-pid_, SIGKILL);  // the group may hold grandchildren, as below
        pid_ = -1;
        return *ended;
      }
      if (timeout && std::chrono::steady_clock::now() >= deadline) break;
    }
    Kill();
    ExitInfo info;
    info.timed_out = true;
    info.signal = SIGKILL;
    return info;
  }
  auto sleep = std::chrono::milliseconds(1);
  while (true) {
    int st = 0;
    pid_t r = ::waitpid(pid_, &st, timeout ? WNOHANG : 0);
    if (r == pid_) {
      // The group may hold grandchildren (e.g. compiler workers): end them too.
      ::kill(-pid_, SIGKILL);
      pid_ = -1;
      return FromStatus(st);
    }
    if (r < 0 && errno != EINTR) {
      pid_ = -1;
      return ExitInfo{};
    }
    if (timeout && std::chrono::steady_clock::now() >= deadline) {
      Kill();
      ExitInfo info;
      info.timed_out = true;
      info.signal = SIGKILL;
      return info;
    }
    std::this_thread::sleep_for(sleep);
    sleep = std::min(sleep * 2, std::chrono::milliseconds(50));
  }
}

std::string SelfExe() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "parity";
  buf[n] = 0;
  return buf;
}

std::string ShellWord(const std::string& word) {
  const bool plain = !word.empty() && word.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                                             "0123456789@%+=:,./_-") == std::string::npos;
  if (plain) return word;
  std::string out = "'";
  for (char c : word) out += c == '\'' ? std::string("'\"'\"'") : std::string(1, c);
  return out + "'";
}

}  // namespace parity
