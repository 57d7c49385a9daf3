#include "verifier/isolation.h"

#include <csignal>
#include <thread>

#include "util/subprocess.h"
#include "verifier/backend.h"
#include "verifier/child.h"

namespace parity::verifier {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {
// The backend's trait, or host ops (approved modules) that run in the worker.
bool NeedsWorker(const ExperimentSpec& spec) {
  auto info = FindBackend(spec.backend);
  return !info.ok() || info->needs_worker || !spec.imports.empty();
}
}  // namespace

struct IsolatedRunner::Running {
  size_t index, slot;
  Child child;
  std::optional<ExitInfo> info;
};

IsolatedRunner::IsolatedRunner(fs::path scratch, int timeout_s, int jobs)
    : scratch_(std::move(scratch)), timeout_s_(timeout_s), slots_(static_cast<size_t>(std::max(1, jobs))) {
  std::error_code ec;
  fs::create_directories(scratch_, ec);
}

IsolatedRunner::~IsolatedRunner() {
  for (auto& s : slots_) {
    s.client.reset();
    if (s.worker) s.worker->Stop();
  }
}

Status IsolatedRunner::EnsureWorker(size_t i) {
  Slot& s = slots_[i];
  if (!s.worker)
    s.worker = std::make_unique<WorkerProcess>((scratch_ / ("worker" + std::to_string(i) + ".sock")).string(),
                                               (scratch_ / ("worker" + std::to_string(i) + ".log")).string());
  if (s.worker->Check()) s.client.reset();
  return s.worker->Ensure();
}

void IsolatedRunner::RestartWorker(size_t i) {
  slots_[i].client.reset();
  if (slots_[i].worker) slots_[i].worker->Stop();
}

Expected<json> IsolatedRunner::Ask(const json& req) {
  PARITY_RETURN_IF_ERROR(EnsureWorker(0));
  if (!slots_[0].client) {
    PARITY_ASSIGN_OR_RETURN(auto c, WorkerClient::Connect(slots_[0].worker->socket_path()));
    slots_[0].client.emplace(std::move(c));
  }
  auto resp = slots_[0].client->Call(req);
  if (!resp.ok() && IsWorkerLost(resp.error())) RestartWorker(0);
  return resp;
}

std::optional<IsolatedRunner::Running> IsolatedRunner::Start(ExperimentBatch& batch, size_t index, size_t slot,
                                                             ExperimentResult& r) {
  auto& [spec, dir] = batch[index];
  std::string socket;
  if (NeedsWorker(spec)) {
    if (auto st = EnsureWorker(slot); !st.ok()) {
      r.error = st.error().message;
      return std::nullopt;
    }
    if (slot == 0) slots_[0].client.reset();  // the worker serves one connection at a time
    socket = slots_[slot].worker->socket_path();
  }
  auto child = SpawnExperiment(spec, dir, socket);
  if (!child.ok()) {
    r.error = child.error().message;
    return std::nullopt;
  }
  return Running{index, slot, std::move(*child), std::nullopt};
}

void IsolatedRunner::WaitAll(std::vector<Running>& running) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s_);
  for (bool pending = true; pending;) {
    pending = false;
    for (auto& run : running) {
      if (run.info) continue;
      run.info = run.child.Poll();
      if (!run.info && std::chrono::steady_clock::now() >= deadline) {
        run.child.Kill();
        ExitInfo t;
        t.timed_out = true;
        t.signal = SIGKILL;
        run.info = t;
      }
      if (!run.info) pending = true;
    }
    if (pending) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

std::vector<ExperimentResult> IsolatedRunner::RunMany(ExperimentBatch batch) {
  std::vector<ExperimentResult> results(batch.size());
  for (size_t next = 0; next < batch.size();) {
    std::vector<Running> running;
    for (size_t slot = 0; slot < slots_.size() && next < batch.size(); ++slot, ++next)
      if (auto run = Start(batch, next, slot, results[next])) running.push_back(std::move(*run));
    WaitAll(running);
    for (auto& run : running) {
      const auto& [spec, dir] = batch[run.index];
      ExperimentResult& r = results[run.index] = CollectExperiment(dir, *run.info, timeout_s_);
      if (r.code != Code::kVerifierDidntRun || !NeedsWorker(spec)) continue;
      // A hang or crash inside a Python backend leaves its worker busy or dead: start afresh.
      auto ended = slots_[run.slot].worker ? slots_[run.slot].worker->Check() : std::nullopt;
      if (ended) r.error += "; python worker " + ended->Describe();
      RestartWorker(run.slot);
    }
  }
  return results;
}

}  // namespace parity::verifier
