#include "runtime/jobs.h"

#include <algorithm>
#include <csignal>
#include <deque>
#include <fstream>
#include <sstream>
#include <thread>

#include "util/files.h"

namespace parity::runtime {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const char* const kSpec = "spec.json";
const char* const kResult = "result.json";
const char* const kStatus = "status.txt";
const char* const kLog = "log.txt";

std::string Tail(const fs::path& file, size_t max_chars) {
  auto t = ReadFile(file);
  if (!t.ok()) return "";
  return t->size() > max_chars ? t->substr(t->size() - max_chars) : *t;
}

Expected<Child> SpawnJob(const Job& job, const fs::path& dir, const std::string& worker_socket, const std::vector<std::string>& env) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  fs::remove(dir / kResult, ec);
  fs::remove(dir / kStatus, ec);
  PARITY_RETURN_IF_ERROR(WriteFileAtomic(dir / kSpec, job.spec.dump(2)));
  SpawnOptions so;
  so.env = env;
  so.stdout_path = (dir / kLog).string();
  so.stderr_path = so.stdout_path;
  if (!worker_socket.empty()) so.env.push_back("PARITY_WORKER_SOCKET=" + worker_socket);
  return Child::Spawn({SelfExe(), kJobCommand, "--dir", fs::absolute(dir).string()}, so);
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

struct JobRunner::Running {
  size_t index, slot;
  Child child;
  std::chrono::steady_clock::time_point deadline;
  std::optional<ExitInfo> info;
  fs::path dir;
};

JobRunner::JobRunner(fs::path scratch, int timeout_s, std::vector<std::vector<std::string>> slot_env)
    : scratch_(std::move(scratch)), timeout_s_(timeout_s), slots_(std::max<size_t>(1, slot_env.size())) {
  for (size_t i = 0; i < slot_env.size(); ++i) slots_[i].env = std::move(slot_env[i]);
  std::error_code ec;
  fs::create_directories(scratch_, ec);
}

JobRunner::~JobRunner() {
  for (auto& s : slots_) {
    s.client.reset();
    if (s.worker) s.worker->Stop();
  }
}

Status JobRunner::EnsureWorker(size_t i) {
  Slot& s = slots_[i];
  if (!s.worker)
    s.worker = std::make_unique<WorkerProcess>((scratch_ / ("worker" + std::to_string(i) + ".sock")).string(),
                                               (scratch_ / ("worker" + std::to_string(i) + ".log")).string(), s.env);
  if (s.worker->Check()) s.client.reset();
  return s.worker->Ensure();
}

void JobRunner::RestartWorker(size_t i) {
  slots_[i].client.reset();
  if (slots_[i].worker) slots_[i].worker->Stop();
}

Expected<json> JobRunner::Ask(const json& req) {
  PARITY_RETURN_IF_ERROR(EnsureWorker(0));
  if (!slots_[0].client) {
    PARITY_ASSIGN_OR_RETURN(auto c, WorkerClient::Connect(slots_[0].worker->socket_path()));
    slots_[0].client.emplace(std::move(c));
  }
  auto resp = slots_[0].client->Call(req);
  if (!resp.ok() && IsWorkerLost(resp.error())) RestartWorker(0);
  return resp;
}

Expected<JobRunner::Running> JobRunner::Start(const Job& job, const fs::path& dir, size_t index, size_t slot) {
  std::string socket;
  if (job.needs_worker) {
    PARITY_RETURN_IF_ERROR(EnsureWorker(slot));
    if (slot == 0) slots_[0].client.reset();  // the worker serves one connection at a time
    socket = slots_[slot].worker->socket_path();
  }
  PARITY_ASSIGN_OR_RETURN(Child child, SpawnJob(job, dir, socket, slots_[slot].env));
  return Running{index, slot, std::move(child), std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s_), std::nullopt, dir};
}

size_t JobRunner::WaitAny(std::vector<Running>& running, const OnTick& on_tick) {
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

JobOutcome JobRunner::Finish(const Job& job, Running& run) {
  JobOutcome o;
  o.how = *run.info;
  o.timeout_s = timeout_s_;
  if (o.how.exited && o.how.code == 0) {
    auto text = ReadFile(run.dir / kResult);
    auto j = text.ok() ? json::parse(*text, nullptr, false) : json();
    if (j.is_object()) {
      o.result = std::move(j);
      return o;
    }
  }
  o.phase = CurrentPhase(run.dir);
  o.log_tail = Tail(run.dir / kLog, 600);
  if (!job.needs_worker) return o;
  // A hang or crash inside a Python backend leaves its worker busy or dead: start afresh.
  auto ended = slots_[run.slot].worker ? slots_[run.slot].worker->Check() : std::nullopt;
  if (ended) o.failure = "python worker " + ended->Describe();
  RestartWorker(run.slot);
  return o;
}

void JobRunner::RunStream(std::vector<Job> jobs, const OnDone& on_done, const OnStart& on_start, const OnTick& on_tick) {
  std::deque<size_t> pending;
  for (size_t i = 0; i < jobs.size(); ++i) pending.push_back(i);
  std::vector<int> attempts(jobs.size(), 0);
  std::vector<bool> busy(slots_.size(), false);
  std::vector<Running> running;
  auto dir_of = [&](size_t i) {
    const fs::path& d = jobs[i].dir;
    return attempts[i] == 0 ? d : fs::path(d.string() + ".r" + std::to_string(attempts[i]));
  };
  auto done = [&](size_t i, const JobOutcome& o) {
    if (on_done(i, o)) {
      ++attempts[i];
      pending.push_front(i);
    }
  };
  while (!pending.empty() || !running.empty()) {
    for (size_t slot = 0; slot < slots_.size() && !pending.empty(); ++slot) {
      if (busy[slot]) continue;
      const size_t i = pending.front();
      pending.pop_front();
      if (on_start) on_start(i, dir_of(i));
      auto run = Start(jobs[i], dir_of(i), i, slot);
      if (run.ok()) {
        running.push_back(std::move(*run));
        busy[slot] = true;
      } else {
        JobOutcome failed;
        failed.failure = run.error().message;
        done(i, failed);
      }
    }
    if (running.empty()) continue;
    const size_t k = WaitAny(running, on_tick);
    Running run = std::move(running[k]);
    running.erase(running.begin() + static_cast<std::ptrdiff_t>(k));
    busy[run.slot] = false;
    done(run.index, Finish(jobs[run.index], run));
  }
}

std::string CurrentPhase(const fs::path& dir) {
  std::string phase = Tail(dir / kStatus, 200);
  while (!phase.empty() && (phase.back() == '\n' || phase.back() == ' ')) phase.pop_back();
  return phase;
}

int JobChildMain(const fs::path& dir, const std::function<Expected<json>(const json& spec, const PhaseFn& on_phase)>& run) {
  auto text = ReadFile(dir / kSpec);
  if (!text.ok()) return 2;
  const json spec = json::parse(*text, nullptr, false);
  const fs::path status = dir / kStatus;
  auto result = run(spec, [&](const std::string& phase) { std::ofstream(status, std::ios::trunc) << phase << "\n"; });
  if (!result.ok()) {
    std::fprintf(stderr, "%s\n", result.error().message.c_str());
    return 2;
  }
  return WriteFileAtomic(dir / kResult, result->dump()).ok() ? 0 : 3;
}

}  // namespace parity::runtime
