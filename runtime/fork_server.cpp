#include "runtime/fork_server.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <map>
#include <mutex>
#include <thread>

#include "runtime/python_env.h"
#include "runtime/worker.h"
#include "runtime/worker_pool.h"
#include "util/files.h"
#include "util/socket.h"
#include "util/subprocess.h"

namespace parity::runtime {
namespace fs = std::filesystem;

namespace {

// How long a started server may take to listen (it listens before its own preparation, after
// the package's imports: parity_capture/forkserver.py).
constexpr std::chrono::seconds kListenSeconds{20};

// Starts the key's server at `base` without waiting for it to listen; it outlives this process.
Expected<Child> StartServer(const std::string& base, const std::vector<std::string>& env) {
  SpawnOptions so;
  so.env = env;
  for (auto& e : PythonEnv()) so.env.push_back(e);
  so.stdout_path = base + ".log";
  so.stderr_path = base + ".log";
  so.outlive_parent = true;
  std::vector<std::string> argv = PackageModuleCommand(WorkerPython(), "forkserver");
  argv.insert(argv.end(), {"--socket", base + ".sock", "--lock", base + ".lock", "--keep-idle", std::to_string(KeepWorkers())});
  return Child::Spawn(argv, so);
}

Status Send(int fd, const std::string& bytes) {
  if (SendAll(fd, bytes)) return Status::Ok();
  return Error::Runtime(std::string("fork server: send: ") + std::strerror(errno));
}

}  // namespace

bool ForkServersEnabled() {
  const char* e = std::getenv(kForkServerEnv);
  return !(e && std::string(e) == "0");
}

std::optional<std::string> ForkServerBase(const std::vector<std::string>& extra_env) {
  if (!ForkServersEnabled() || KeepWorkers() <= 0) return std::nullopt;
  auto dir = PoolDir(true);
  if (!dir.ok()) return std::nullopt;
  return (*dir / (ForkServerKey(extra_env) + "-fs")).string();
}

namespace {
// The next line the server sent on `fd` (read into `buffer`, its rest kept there), waiting up to
// `wait`: the line without its newline, nullopt while none has come, kRuntime once the server's
// end is closed.
Expected<std::optional<std::string>> NextLine(int fd, std::string& buffer, std::chrono::milliseconds wait) {
  const auto deadline = std::chrono::steady_clock::now() + wait;
  for (;;) {
    if (const auto nl = buffer.find('\n'); nl != std::string::npos) {
      std::string line = buffer.substr(0, nl);
      buffer.erase(0, nl + 1);
      return std::optional<std::string>(std::move(line));
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    pollfd p{fd, POLLIN, 0};
    const int r = ::poll(&p, 1, static_cast<int>(std::max<int64_t>(0, left.count())));
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) return std::optional<std::string>();
    char chunk[256];
    const ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Error::Runtime("closed");
    buffer.append(chunk, static_cast<size_t>(n));
  }
}

// The process group of `pid` (its session: it and what it started), and `pid` itself in case it
// has not made its group yet.
void KillGroup(pid_t pid) {
  ::kill(-pid, SIGKILL);
  ::kill(pid, SIGKILL);
}
}  // namespace

Unsent::~Unsent() {
  if (server && server->pid() > 0) server->Release();  // a pool's server outlives this process
}

Expected<int> Unsent::Deliver() {
  const int fd = ConnectUnix(base + ".sock");
  if (fd < 0) {
    if (server && server->pid() > 0)
      if (auto ended = server->Poll(); ended && !(ended->exited && ended->code == 0))  // 0: another of its key is up
        return Error::Runtime("fork server ended at start-up (" + ended->Describe() + "); see " + base + ".log");
    if (!server && starting > 0 && ::kill(starting, 0) != 0 && errno == ESRCH)  // another request's server, gone
      return Error::Runtime("fork server ended at start-up; see " + base + ".log");
    if (std::chrono::steady_clock::now() > deadline)
      return Error::Runtime("fork server did not listen at " + base + ".sock within " + std::to_string(kListenSeconds.count()) +
                            " s; see " + base + ".log");
    return -1;
  }
  if (!SendAll(fd, line)) {
    ::close(fd);
    return Error::Runtime(std::string("fork server: send: ") + std::strerror(errno));
  }
  if (server && server->pid() > 0) server->Release();
  server.reset();
  return fd;
}

PendingFork::~PendingFork() {
  if (fd_ >= 0) ::close(fd_);
}

Expected<std::optional<pid_t>> PendingFork::Poll(std::chrono::milliseconds wait) {
  if (unsent_) {
    const auto until = std::chrono::steady_clock::now() + wait;
    for (;;) {
      auto fd = unsent_->Deliver();
      if (!fd.ok()) {
        unsent_.reset();
        return fd.error();
      }
      if (*fd >= 0) {
        fd_ = *fd;
        unsent_.reset();
        const auto left = std::max(until - std::chrono::steady_clock::now(), std::chrono::steady_clock::duration::zero());
        wait = std::chrono::duration_cast<std::chrono::milliseconds>(left);  // what is left of it for the answer
        break;
      }
      if (std::chrono::steady_clock::now() >= until) return std::optional<pid_t>();  // its server does not listen yet
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  if (fd_ < 0) return Error::Runtime("fork server: no request pending");
  auto line = NextLine(fd_, buffer_, wait);
  if (line.ok() && !line->has_value()) return std::optional<pid_t>();  // not answered yet
  ::close(fd_);
  fd_ = -1;
  if (!line.ok()) return Error::Runtime("fork server ended without forking the worker; see " + log_);
  const auto answer = nlohmann::json::parse(**line, nullptr, false);
  if (answer.is_object() && answer.contains("pid") && answer["pid"].is_number_integer() && answer["pid"].get<pid_t>() > 0)
    return std::optional<pid_t>(answer["pid"].get<pid_t>());
  return Error::Runtime("fork server: answer is not {\"pid\": N}: " + **line + "; see " + log_);
}

namespace {
// The server at `base` started now (the child), or, where this process started it less than
// kListenSeconds ago, that one's pid (it may still be starting): a run's slots, asking side by
// side, start one server (a second would import torch before finding the first's lock, and exit).
Expected<std::pair<std::optional<Child>, pid_t>> StartOnce(const std::string& base, const std::vector<std::string>& env) {
  static std::mutex mu;
  static std::map<std::string, std::pair<std::chrono::steady_clock::time_point, pid_t>> started;
  std::lock_guard<std::mutex> lock(mu);
  const auto now = std::chrono::steady_clock::now();
  if (auto it = started.find(base); it != started.end() && now - it->second.first < kListenSeconds)
    return std::pair<std::optional<Child>, pid_t>{std::nullopt, it->second.second};
  PARITY_ASSIGN_OR_RETURN(Child child, StartServer(base, env));
  started[base] = {now, child.pid()};
  return std::pair<std::optional<Child>, pid_t>{std::move(child), 0};
}

// A request with the environment and working dir a forked process gets, to the server at
// `server_base`: sent now where it listens (the connection), else left unsent until it does,
// the server started first (a pool's: it outlives this process).
struct Sending {
  int fd = -1;
  std::optional<Unsent> unsent;
};
Expected<Sending> SendRequest(const std::string& server_base, nlohmann::json request, const std::vector<std::string>& env) {
  if (auto refused = ReadFile(server_base + ".refused"); refused.ok())  // it said it cannot serve: not asked again
    return Error::Runtime("fork server " + server_base + " refused to serve: " + *refused);
  std::error_code ec;
  request["env"] = WorkerEnvironment(env);
  request["cwd"] = fs::current_path(ec).string();
  Sending out;
  if (const int fd = ConnectUnix(server_base + ".sock"); fd >= 0) {
    out.fd = fd;
    if (auto sent = Send(fd, request.dump() + "\n"); !sent.ok()) {
      ::close(fd);
      return sent.error();
    }
    return out;
  }
  PARITY_ASSIGN_OR_RETURN(auto started, StartOnce(server_base, env));
  out.unsent.emplace(server_base, request.dump() + "\n", std::move(started.first), std::chrono::steady_clock::now() + kListenSeconds);
  out.unsent->starting = started.second;
  return out;
}
}  // namespace

Expected<PendingFork> RequestFork(const std::string& server_base, const std::vector<std::string>& worker_args,
                                  const std::vector<std::string>& env, const std::string& log_path) {
  PARITY_ASSIGN_OR_RETURN(Sending s, SendRequest(server_base, {{"argv", worker_args}, {"log", log_path}}, env));
  return PendingFork(s.fd, server_base + ".log", std::move(s.unsent));
}

Expected<ForkedRun> RequestRun(const std::string& server_base, const std::string& module, const std::vector<std::string>& args,
                               const std::vector<std::string>& env, const std::string& log_path) {
  PARITY_ASSIGN_OR_RETURN(Sending s, SendRequest(server_base, {{"run", module}, {"argv", args}, {"log", log_path}}, env));
  return ForkedRun(s.fd, server_base + ".log", std::move(s.unsent));
}


ForkedRun::~ForkedRun() {
  if (!ended_) Kill();
  Close();
}

void ForkedRun::Close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void ForkedRun::Kill() {
  if (pid_ > 0 && !ended_) KillGroup(pid_);
  unsent_.reset();  // never sent: nothing ran
  Close();  // the supervisor kills the group too (the run may not have made it yet)
}

Expected<std::optional<ExitInfo>> ForkedRun::Poll() {
  if (unsent_) {
    auto fd = unsent_->Deliver();
    if (!fd.ok()) {
      unsent_.reset();
      return fd.error();
    }
    if (*fd < 0) return std::optional<ExitInfo>();  // its server does not listen yet
    fd_ = *fd;
    unsent_.reset();
  }
  for (;;) {
    if (ended_) return ended_;
    if (fd_ < 0) return Error::Runtime("fork server: the run's connection is closed");
    auto line = NextLine(fd_, buffer_, std::chrono::milliseconds(0));
    if (!line.ok()) {
      Close();
      if (pid_ == 0) return Error::Runtime("fork server ended without forking the run; see " + log_);
      ended_ = ExitInfo{};  // its supervisor died: how the run ended is unknown (it was killed with it)
      KillGroup(pid_);
      continue;
    }
    if (!line->has_value()) return std::optional<ExitInfo>();
    const auto message = nlohmann::json::parse(**line, nullptr, false);
    auto integer = [&message](const char* key) -> std::optional<int> {
      if (!message.is_object() || !message.contains(key) || !message[key].is_number_integer()) return std::nullopt;
      return message[key].get<int>();
    };
    if (pid_ == 0) {  // the first line: the run's pid
      auto pid = integer("pid");
      if (!pid || *pid <= 0) {
        Close();
        return Error::Runtime("fork server: answer is not {\"pid\": N}; see " + log_);
      }
      pid_ = *pid;
      continue;
    }
    ExitInfo how;  // the second: how it ended
    if (auto code = integer("exit")) how.exited = true, how.code = *code;
    if (auto sig = integer("signal")) how.signal = *sig;
    ended_ = how;
    Close();
  }
}

namespace {
constexpr const char* kLockSuffix = "-fs.lock";

// Each server's `<dir>/<key>-fs.lock` with the pid of the server up holding it (0: none).
std::vector<std::pair<fs::path, pid_t>> Servers(const fs::path& dir) {
  std::vector<std::pair<fs::path, pid_t>> out;
  const std::string suffix = kLockSuffix;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.size() <= suffix.size() || name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) continue;
    pid_t pid = 0;
    const int fd = ::open(e.path().c_str(), O_RDONLY | O_CLOEXEC);
    if (fd >= 0 && ::flock(fd, LOCK_EX | LOCK_NB) != 0) {  // held: its server is up, its pid inside
      auto text = ReadFile(e.path());
      pid = text.ok() ? static_cast<pid_t>(std::atoi(text->c_str())) : 0;
    }
    if (fd >= 0) ::close(fd);
    out.emplace_back(e.path(), pid);
  }
  return out;
}
}  // namespace

std::vector<std::pair<std::string, pid_t>> ListForkServers(const fs::path& dir) {
  std::vector<std::pair<std::string, pid_t>> out;
  for (const auto& [lock, pid] : Servers(dir)) {
    const std::string name = lock.filename().string();
    if (pid > 0) out.emplace_back(name.substr(0, name.size() - std::strlen(kLockSuffix)), pid);
  }
  return out;
}

int StopForkServers(const fs::path& dir) {
  int stopped = 0;
  std::error_code ec;
  for (const auto& [lock, pid] : Servers(dir)) {
    if (pid > 0 && ::kill(pid, SIGKILL) == 0) ++stopped;
    const std::string base = lock.string().substr(0, lock.string().size() - 5);  // less ".lock"
    for (const char* ext : {".sock", ".lock", ".log", ".refused"}) fs::remove(base + ext, ec);
  }
  return stopped;
}

}  // namespace parity::runtime
