// Workers forked from their pool key's fork server (tools/parity_capture/forkserver.py): the
// server imports torch, dynamo and Inductor once, and each new worker of a pool entry is a fork
// of it (about 0.05 s) instead of a fresh interpreter importing them again (about 4 CPU-s on a
// 2-core CPU, 10 s on a GPU host): a matrix's slots, a minify's fresh worker after its compiler
// bisection retired one, the next run's worker where the kept one was busy.
//
// Only pool entries' workers are forked: like the server, they outlive the process that asked
// for them, while a private worker must die with its parent (PR_SET_PDEATHSIG), which a fork of
// the server cannot promise. The server's key is the pool key, so what torch read from the
// environment at import is what a fresh worker would have read. It ends after KeepWorkers() idle
// seconds. Whatever goes wrong here, the caller starts its worker as before: the server saves
// time, it is never needed.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "util/status.h"
#include "util/subprocess.h"

namespace parity::runtime {

// "0": workers are never forked (each pool entry's worker starts a fresh interpreter).
inline constexpr const char* kForkServerEnv = "PARITY_FORK_SERVER";
bool ForkServersEnabled();

// The server a run this process asks for with `extra_env` is forked from
// (`<pool dir>/<ForkServerKey(extra_env)>-fs`, as a pool entry's worker's) while this process keeps
// workers (KeepWorkers() > 0) and fork servers are on; nullopt otherwise.
std::optional<std::string> ForkServerBase(const std::vector<std::string>& extra_env);

// A request whose server does not listen yet (one just started listens once the package's
// imports, torch among them, are done: seconds on a GPU host): it is sent by the first poll that
// finds the server listening, so that asking never waits for a server's start.
struct Unsent {
  std::string base;             // the server's `<base>.sock`
  std::string line;             // the request
  std::optional<Child> server;  // the server this process started for it, watched until it listens
  std::chrono::steady_clock::time_point deadline;
  pid_t starting = 0;           // without `server`: the one another request of this process started
  ~Unsent();  // a server started here that outlives this process is released, never killed
  Unsent(std::string b, std::string l, std::optional<Child> s, std::chrono::steady_clock::time_point d)
      : base(std::move(b)), line(std::move(l)), server(std::move(s)), deadline(d) {}
  Unsent(Unsent&&) noexcept = default;
  Unsent& operator=(Unsent&&) = delete;
  // The connection once the request is sent (-1 while the server does not listen yet); kRuntime
  // when the server ended at start-up or did not listen by the deadline.
  [[nodiscard]] Expected<int> Deliver();
};

// A fork asked for and not answered yet: the server answers once its imports are done.
class PendingFork {
 public:
  PendingFork(PendingFork&& o) noexcept
      : fd_(o.fd_), buffer_(std::move(o.buffer_)), log_(std::move(o.log_)), unsent_(std::move(o.unsent_)) {
    o.fd_ = -1;
  }
  PendingFork& operator=(PendingFork&&) = delete;
  ~PendingFork();  // an unanswered fork's worker ends at once (its client is gone)
  // The worker's pid once the server answered, nullopt while it has not (waiting up to `wait`);
  // kRuntime when the server ended or refused without answering.
  [[nodiscard]] Expected<std::optional<pid_t>> Poll(std::chrono::milliseconds wait);

 private:
  friend Expected<PendingFork> RequestFork(const std::string&, const std::vector<std::string>&,
                                           const std::vector<std::string>&, const std::string&);
  PendingFork(int fd, std::string log, std::optional<Unsent> unsent) : fd_(fd), log_(std::move(log)), unsent_(std::move(unsent)) {}
  int fd_ = -1;
  std::string buffer_;
  std::string log_;  // the server's, named in errors
  std::optional<Unsent> unsent_;  // the request, while its server does not listen yet
};

// Asks the fork server at `server_base` (`<pool dir>/<pool key>-fs`: its .sock, .lock and .log;
// started there when none answers, with the extra environment `env`) for a worker run with
// worker.py's arguments `worker_args` and the same `env`, its output in `log_path`.
[[nodiscard]] Expected<PendingFork> RequestFork(const std::string& server_base, const std::vector<std::string>& worker_args,
                                                const std::vector<std::string>& env, const std::string& log_path);

// A run of a Python module's main (forkserver.py's RUNS: a real replay's rank) forked from the
// server, watched as a Child is: the server's supervisor of the run answers its pid, then how it
// ended ({"exit"} or {"signal"}), over a connection that stays open as the run's lifeline: when
// this end closes (Kill, the destructor, this process's end) the supervisor kills the run's
// process group.
class ForkedRun {
 public:
  ForkedRun(ForkedRun&& o) noexcept
      : fd_(o.fd_), pid_(o.pid_), buffer_(std::move(o.buffer_)), log_(std::move(o.log_)), ended_(o.ended_),
        unsent_(std::move(o.unsent_)) {
    o.fd_ = -1;
  }
  ForkedRun& operator=(ForkedRun&&) = delete;
  ~ForkedRun();  // kills a run still going

  // 0 until the server answered.
  pid_t pid() const { return pid_; }
  // Non-blocking: how the run ended once it has; kRuntime when the server ended or refused before
  // forking it (nothing ran: the caller may start the run another way).
  [[nodiscard]] Expected<std::optional<ExitInfo>> Poll();
  void Kill();

 private:
  friend Expected<ForkedRun> RequestRun(const std::string&, const std::string&, const std::vector<std::string>&,
                                        const std::vector<std::string>&, const std::string&);
  ForkedRun(int fd, std::string log, std::optional<Unsent> unsent) : fd_(fd), log_(std::move(log)), unsent_(std::move(unsent)) {}
  void Close();
  int fd_ = -1;
  pid_t pid_ = 0;
  std::string buffer_;
  std::string log_;  // the server's, named in errors
  std::optional<ExitInfo> ended_;
  std::optional<Unsent> unsent_;  // the request, while its server does not listen yet
};

// Asks the fork server at `server_base` (as RequestFork does) to run parity_capture.`module`'s
// main with `args`, in the environment `env` on top of this process's, its output in `log_path`.
[[nodiscard]] Expected<ForkedRun> RequestRun(const std::string& server_base, const std::string& module,
                                             const std::vector<std::string>& args, const std::vector<std::string>& env,
                                             const std::string& log_path);


// The fork servers up in pool dir `dir`: (key, pid) of each.
std::vector<std::pair<std::string, pid_t>> ListForkServers(const std::filesystem::path& dir);
// Ends the fork servers of pool dir `dir` and removes their files (a refused server's
// `<base>.refused`, which keeps its key's clients from asking it, too); returns how many it ended.
int StopForkServers(const std::filesystem::path& dir);

}  // namespace parity::runtime
