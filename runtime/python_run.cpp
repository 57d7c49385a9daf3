#include "runtime/python_run.h"

#include <fstream>
#include <thread>

#include "runtime/python_env.h"
#include "runtime/worker.h"
#include "runtime/worker_pool.h"

namespace parity::runtime {

Expected<PythonRun> PythonRun::Start(const std::string& module, const std::vector<std::string>& args,
                                     const std::vector<std::string>& env, const std::string& log) {
  PythonRun run(module, args, env, log);
  if (auto base = ForkServerBase(env)) {
    auto forked = RequestRun(*base, module, args, env, log);
    if (forked.ok()) {
      run.forked_.emplace(std::move(*forked));
      return run;
    }
  }
  PARITY_RETURN_IF_ERROR(run.Spawn());
  return run;
}

Status PythonRun::Spawn() {
  SpawnOptions so;
  so.env = env_;
  for (auto& e : PythonEnv()) so.env.push_back(e);
  so.stdout_path = log_;
  so.stderr_path = log_;
  std::vector<std::string> argv = PackageModuleCommand(WorkerPython(), module_);
  argv.insert(argv.end(), args_.begin(), args_.end());
  PARITY_ASSIGN_OR_RETURN(Child child, Child::Spawn(argv, so));
  child_.emplace(std::move(child));
  return Status::Ok();
}

std::optional<ExitInfo> PythonRun::Poll() {
  if (ended_) return ended_;
  if (forked_) {
    auto how = forked_->Poll();
    if (how.ok()) return ended_ = *how;
    forked_.reset();  // the server failed before forking it: nothing ran, so it starts afresh
    if (auto spawned = Spawn(); !spawned.ok()) {
      std::ofstream(log_, std::ios::app) << "parity: could not start " << module_ << ": " << spawned.error().message << "\n";
      return ended_ = ExitInfo{.exited = true, .code = 127};
    }
  }
  return ended_ = child_->Poll();
}

ExitInfo PythonRun::Wait(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (auto how = Poll()) return *how;
    if (std::chrono::steady_clock::now() > deadline) {
      Kill();
      ExitInfo how;
      how.timed_out = true;
      return ended_ = how, how;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

void PythonRun::Kill() {
  if (forked_) forked_->Kill();
  if (child_) child_->Kill();
}

}  // namespace parity::runtime
