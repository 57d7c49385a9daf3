// Child processes: spawn (own process group), wait with a timeout, kill the whole group, and
// describe how it ended (exit code or signal). Nothing parity-specific.
#pragma once

#include <sys/types.h>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "util/status.h"

namespace parity {

struct ExitInfo {
  bool exited = false;  // normal exit: `code` is valid
  int code = -1;
  int signal = 0;                // killed by this signal
  bool timed_out = false;        // we killed it at its deadline
  std::string Describe() const;  // "exit 1", "signal 11 (SIGSEGV)", "timeout after 30 s"
};

struct SpawnOptions {
  std::vector<std::string> env;            // extra NAME=VALUE entries
  std::optional<std::string> stdout_path;  // redirect (append) to a file; else inherit
  std::optional<std::string> stderr_path;
  bool stdin_null = true;
  // The child lives on when this process ends (its own session, no death signal): for a process
  // meant to outlive the invocation that started it (a kept worker, runtime/worker_pool.h).
  bool outlive_parent = false;
};

// A child of this binary itself (argv[0] == SelfExe(), not outliving this process) is forked by
// the zygote (util/zygote.h) when there is one: it then is the zygote's child, and how it ended
// comes on the zygote's status socket instead of from waitpid; the rest is the same.
class Child {
 public:
  [[nodiscard]] static Expected<Child> Spawn(const std::vector<std::string>& argv, const SpawnOptions& options = {});
  Child(Child&& o) noexcept : pid_(o.pid_), status_fd_(o.status_fd_), reported_(std::move(o.reported_)) {
    o.pid_ = -1;
    o.status_fd_ = -1;
  }
  Child& operator=(Child&& o) noexcept;
  ~Child();  // kills a child still running

  pid_t pid() const { return pid_; }
  // Waits up to `timeout` (nullopt: forever); on expiry kills the process group (SIGKILL).
  ExitInfo Wait(std::optional<std::chrono::milliseconds> timeout);
  // Non-blocking: set when the child has ended.
  std::optional<ExitInfo> Poll();
  void Kill();
  // Sends what Kill sends (SIGKILL to its process group) without waiting for its end, which a
  // later Kill, Wait or the destructor waits for: a caller ending several children signals them
  // all first, so that their ends overlap (a process holding a CUDA context takes about a second
  // to end).
  void Signal();
  // Kills the child (what Signal sends) and leaves waiting for its end to others: a zygote child's
  // to the zygote, this process's own child to a thread of its own (reaped while this process
  // lives; after it, by whoever inherits it). For a run's end, where nothing asks how the child
  // ended and waiting would only delay the exit (a process holding a CUDA context takes about a
  // second to end: each run's last second, measured on an H200).
  void Abandon();
  // Forgets the child without killing it (it lives on; once it ends it stays a zombie until this
  // process ends). Returns its pid.
  pid_t Release();

 private:
  explicit Child(pid_t pid, int status_fd = -1) : pid_(pid), status_fd_(status_fd) {}
  // A zygote child's end as the zygote said it, waiting up to `wait_ms` (-1: until it says);
  // nullopt while it has not. An unknown end (the zygote died first) reads as ExitInfo{}.
  std::optional<ExitInfo> Reported(int wait_ms);
  void CloseStatus();
  pid_t pid_ = -1;
  int status_fd_ = -1;    // a zygote child's status socket; -1: a child of this process
  std::string reported_;  // what came on it and is not a whole line yet
};

std::string SignalName(int sig);

// Path of the running executable (/proc/self/exe).
std::string SelfExe();

// `word` as one word of a shell command a person copies (a path with spaces or quotes
// single-quoted, as Python's shlex.quote does); a plain word stays as it is.
std::string ShellWord(const std::string& word);

}  // namespace parity
