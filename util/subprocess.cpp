#include "util/subprocess.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

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
    pid_ = o.pid_;
    o.pid_ = -1;
  }
  return *this;
}

Child::~Child() { Kill(); }

pid_t Child::Release() {
  const pid_t pid = pid_;
  pid_ = -1;
  return pid;
}

void Child::Kill() {
  if (pid_ <= 0) return;
  ::kill(-pid_, SIGKILL);
  ::kill(pid_, SIGKILL);
  int st = 0;
  ::waitpid(pid_, &st, 0);
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

std::optional<ExitInfo> Child::Poll() {
  if (pid_ <= 0) return ExitInfo{};
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

}  // namespace parity
