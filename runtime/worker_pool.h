// Python workers kept warm across parity invocations (`--keep-workers SECONDS`, default
// $PARITY_KEEP_WORKERS): `parity verify` leaves its slots' workers running, torch imported and
// Inductor's first compile paid, and the `parity minify` (or the next verify, or `parity ci
// --minify`'s minify) that runs next with the same environment adopts them instead of starting
// its own.
//
// The pool is a dir (PoolDir: $PARITY_WORKER_POOL, else /tmp/parity-workers-<uid>; this user's
// own, closed to others) of entries `<key>-<n>.{lock,sock,json,log}`. The key (PoolKey) is a
// digest of everything a worker's behaviour depends on: the Python interpreter, the whole
// environment it starts with (so --import, TORCHINDUCTOR_*, CUDA_VISIBLE_DEVICES, a slot's
// thread counts...), the working dir, the parity binary and parity's Python sources. A process
// uses an entry only while it holds the entry's lock (flock on `.lock`): one user at a time,
// released when the process ends however it ends.
//
// Isolation, the kept runners' rules (runtime/jobs.h): a worker a job crashed or hung in, or a
// job's result poisoned (a CUDA error, an out-of-memory), is killed, never handed back. A worker
// that imported a repro dir's host-op modules beyond its own --import (`import_modules`) or ran a
// compiler bisection (`compiler_bisect`: Inductor's bisector leaves global state) ends as soon as
// it is released.
// A worker ends itself after SECONDS without a user (it checks the lock: never while one holds
// it). Adopting is tried whenever the pool dir exists, also without --keep-workers (a worker
// whose user did not ask to keep workers ends as soon as it is released).
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "util/status.h"

namespace parity::runtime {

inline constexpr const char* kKeepWorkersEnv = "PARITY_KEEP_WORKERS";
inline constexpr const char* kWorkerPoolEnv = "PARITY_WORKER_POOL";

// How many idle seconds the workers this process starts stay warm after it releases them (0:
// they end with their user, as before). Default: $PARITY_KEEP_WORKERS.
void SetKeepWorkers(int seconds);
int KeepWorkers();

// The pool's dir (created, mode 0700, when `create`). kBadInput naming it when it is not a dir of
// this user's, or others may enter it.
[[nodiscard]] Expected<std::filesystem::path> PoolDir(bool create);

// The key of a worker started with `extra_env` on top of this process's environment.
std::string PoolKey(const std::vector<std::string>& extra_env);
// The key of the fork server such a worker is forked from (runtime/fork_server.h): the pool key
// less the variables a worker reads only after its fork, so that workers of several pool keys
// (other --import modules, other CI shards) share one server.
std::string ForkServerKey(const std::vector<std::string>& extra_env);

// Whether `pid` is a live (not zombie) process running parity's Python worker.
bool IsLiveWorker(pid_t pid);

// One pool entry held by this process (its lock taken); released (unlocked) when destroyed.
class PoolClaim {
 public:
  // An entry for a worker with `extra_env`: a warm one (warm_pid() its worker), else, when this
  // process keeps workers, a new entry (warm_pid() 0); nullopt when there is neither.
  static std::optional<PoolClaim> Claim(const std::vector<std::string>& extra_env);
  PoolClaim(PoolClaim&& o) noexcept
      : base_(std::move(o.base_)), lock_fd_(o.lock_fd_), warm_pid_(o.warm_pid_), launches_(o.launches_) {
    o.lock_fd_ = -1;
  }
  PoolClaim& operator=(PoolClaim&&) = delete;
  ~PoolClaim();

  pid_t warm_pid() const { return warm_pid_; }
  std::string socket_path() const { return base_ + ".sock"; }
  std::string log_path() const { return base_ + ".log"; }
  std::string lock_path() const { return base_ + ".lock"; }
  // Where the fork server of ForkServerKey(`extra_env`) listens and logs (runtime/fork_server.h):
  // `<pool dir>/<key>-fs`.
  std::string fork_server_base(const std::vector<std::string>& extra_env) const;
  // Records the worker started in this entry (its pid, the idle seconds it keeps, how many this
  // claim started: more than one when one was retired or died).
  void Started(pid_t pid, int keep_idle_s);

 private:
  PoolClaim(std::string base, int lock_fd, pid_t warm_pid) : base_(std::move(base)), lock_fd_(lock_fd), warm_pid_(warm_pid) {}
  std::string base_;  // <dir>/<key>-<n>
  int lock_fd_ = -1;
  pid_t warm_pid_ = 0;
  int launches_ = 0;
};

// What `parity workers` shows of each entry.
struct PooledWorker {
  std::string key;
  int index = 0;
  pid_t pid = 0;
  bool live = false;
  bool in_use = false;        // another process holds its lock
  int keep_idle_s = 0;
  int launches = 0;           // workers its last holder started in it (more than 1: one was retired or died)
  std::string started;        // when, UTC ISO 8601
  std::string cwd, python;
};
[[nodiscard]] Expected<std::vector<PooledWorker>> ListPool();
// Ends every worker of the pool no process holds and removes its entry (dead entries too), and
// the pool's fork servers (runtime/fork_server.h); returns how many workers it ended.
[[nodiscard]] Expected<int> StopPool();

}  // namespace parity::runtime
