// A Python module's main as a process of its own, watched as a Child is (a real replay's rank,
// distributed/real.h; a profile's child, profile/profile.h; `parity import`'s, cli/cmd_import.cpp):
// forked from the fork server of its environment when this process keeps workers
// (runtime/fork_server.h: torch, dynamo and Inductor imported once, about 0.05 s a start against
// 3-4 CPU-s of imports on a 2-core CPU and 10 s on a GPU host), else, or when the server fails
// before forking it, a fresh interpreter (`python -m parity_capture.<module>`).
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "runtime/fork_server.h"
#include "util/status.h"
#include "util/subprocess.h"

namespace parity::runtime {

class PythonRun {
 public:
  // parity_capture.`module`'s main with `args`, `env` on top of this process's environment and
  // PythonEnv(), its stdout and stderr in `log`.
  [[nodiscard]] static Expected<PythonRun> Start(const std::string& module, const std::vector<std::string>& args,
                                                 const std::vector<std::string>& env, const std::string& log);
  PythonRun(PythonRun&&) noexcept = default;
  PythonRun& operator=(PythonRun&&) = delete;
  ~PythonRun() = default;  // a run still going is killed (by its ForkedRun or Child)

  // Non-blocking: how it ended, once it has.
  std::optional<ExitInfo> Poll();
  // Waits up to `timeout`; on expiry kills it (its process group) and says timed_out.
  ExitInfo Wait(std::chrono::milliseconds timeout);
  void Kill();
  bool forked() const { return forked_.has_value(); }

 private:
  PythonRun(std::string module, std::vector<std::string> args, std::vector<std::string> env, std::string log)
      : module_(std::move(module)), args_(std::move(args)), env_(std::move(env)), log_(std::move(log)) {}
  Status Spawn();
  std::string module_;
  std::vector<std::string> args_, env_;
  std::string log_;
  std::optional<ForkedRun> forked_;
  std::optional<Child> child_;
  std::optional<ExitInfo> ended_;
};

}  // namespace parity::runtime
