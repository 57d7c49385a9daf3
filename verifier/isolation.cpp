#include "verifier/isolation.h"

#include <algorithm>
#include <csignal>
#include <deque>
#include <sstream>
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

std::vector<std::vector<std::string>> SlotEnvironments(int jobs, bool cuda, int gpus, const std::string& visible_devices,
                                                       int cpus) {
  jobs = std::max(1, jobs);
  std::vector<std::vector<std::string>> env(static_cast<size_t>(jobs));
  if (jobs == 1) return env;
  if (cuda) {
    std::vector<std::string> ids;
    std::stringstream in(visible_devices);
    for (std::string id; std::getline(in, id, ',');)
      if (!id.empty()) ids.push_back(id);
    if (ids.empty())
      for (int i = 0; i < gpus; ++i) ids.push_back(std::to_string(i));
    if (ids.size() > 1)
      for (size_t i = 0; i < env.size(); ++i) env[i].push_back("CUDA_VISIBLE_DEVICES=" + ids[i % ids.size()]);
    return env;
  }
  const std::string threads = std::to_string(std::max(1, cpus / jobs));
  for (auto& e : env) e = {"OMP_NUM_THREADS=" + threads, "MKL_NUM_THREADS=" + threads};
  return env;
}

struct IsolatedRunner::Running {
  size_t index, slot;
  Child child;
  std::chrono::steady_clock::time_point deadline;
  std::optional<ExitInfo> info;
  fs::path child_dir;
};

IsolatedRunner::IsolatedRunner(fs::path scratch, int timeout_s, std::vector<std::vector<std::string>> slot_env)
    : scratch_(std::move(scratch)), timeout_s_(timeout_s), slots_(std::max<size_t>(1, slot_env.size())) {
  for (size_t i = 0; i < slot_env.size(); ++i) slots_[i].env = std::move(slot_env[i]);
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
                                               (scratch_ / ("worker" + std::to_string(i) + ".log")).string(), s.env);
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

std::optional<IsolatedRunner::Running> IsolatedRunner::Start(const ExperimentSpec& spec, const fs::path& dir, size_t index,
                                                             size_t slot, ExperimentResult& r) {
  std::string socket;
  if (NeedsWorker(spec)) {
    if (auto st = EnsureWorker(slot); !st.ok()) {
      r.error = st.error().message;
      return std::nullopt;
    }
    if (slot == 0) slots_[0].client.reset();  // the worker serves one connection at a time
    socket = slots_[slot].worker->socket_path();
  }
  auto child = SpawnExperiment(spec, dir, socket, slots_[slot].env);
  if (!child.ok()) {
    r.error = child.error().message;
    return std::nullopt;
  }
  return Running{index,        slot, std::move(*child), std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s_),
                 std::nullopt, dir};
}

size_t IsolatedRunner::WaitAny(std::vector<Running>& running, const OnTick& on_tick) {
  auto next_tick = std::chrono::steady_clock::now();
  while (true) {
    if (on_tick && std::chrono::steady_clock::now() >= next_tick) {
      on_tick();
      next_tick = std::chrono::steady_clock::now() + std::chrono::milliseconds(250);
    }
    for (size_t i = 0; i < running.size(); ++i) {
      Running& run = running[i];
      run.info = run.child.Poll();
      if (!run.info && std::chrono::steady_clock::now() >= run.deadline) {
        run.child.Kill();
        ExitInfo t;
        t.timed_out = true;
        t.signal = SIGKILL;
        run.info = t;
      }
      if (run.info) return i;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

ExperimentResult IsolatedRunner::Finish(const ExperimentSpec& spec, Running& run) {
  ExperimentResult r = CollectExperiment(run.child_dir, *run.info, timeout_s_);
  if (r.code != Code::kVerifierDidntRun || !NeedsWorker(spec)) return r;
  // A hang or crash inside a Python backend leaves its worker busy or dead: start afresh.
  auto ended = slots_[run.slot].worker ? slots_[run.slot].worker->Check() : std::nullopt;
  if (ended) r.error += "; python worker " + ended->Describe();
  RestartWorker(run.slot);
  return r;
}

void IsolatedRunner::RunStream(ExperimentBatch batch, const OnDone& on_done, const OnStart& on_start, const OnTick& on_tick) {
  std::deque<size_t> pending;
  for (size_t i = 0; i < batch.size(); ++i) pending.push_back(i);
  std::vector<int> attempts(batch.size(), 0);
  std::vector<bool> busy(slots_.size(), false);
  std::vector<Running> running;
  auto dir_of = [&](size_t i) {
    const fs::path& d = batch[i].second;
    return attempts[i] == 0 ? d : fs::path(d.string() + ".r" + std::to_string(attempts[i]));
  };
  auto done = [&](size_t i, const ExperimentResult& r) {
    if (on_done(i, r)) {
      ++attempts[i];
      pending.push_front(i);
    }
  };
  while (!pending.empty() || !running.empty()) {
    for (size_t slot = 0; slot < slots_.size() && !pending.empty(); ++slot) {
      if (busy[slot]) continue;
      const size_t i = pending.front();
      pending.pop_front();
      ExperimentResult failed;
      if (on_start) on_start(i, dir_of(i));
      if (auto run = Start(batch[i].first, dir_of(i), i, slot, failed)) {
        running.push_back(std::move(*run));
        busy[slot] = true;
      } else {
        done(i, failed);
      }
    }
    if (running.empty()) continue;
    const size_t k = WaitAny(running, on_tick);
    Running run = std::move(running[k]);
    running.erase(running.begin() + static_cast<std::ptrdiff_t>(k));
    busy[run.slot] = false;
    done(run.index, Finish(batch[run.index].first, run));
  }
}

std::vector<ExperimentResult> IsolatedRunner::RunMany(ExperimentBatch batch) {
  std::vector<ExperimentResult> results(batch.size());
  RunStream(std::move(batch), [&](size_t i, const ExperimentResult& r) {
    results[i] = r;
    return false;
  });
  return results;
}

}  // namespace parity::verifier
