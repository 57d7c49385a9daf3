#include "runtime/jobs.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <deque>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "runtime/job_dir.h"
#include "util/files.h"
#include "util/socket.h"

namespace parity::runtime {
namespace fs = std::filesystem;
using nlohmann::json;
using namespace job_dir;

namespace {

// A job's dir made ready for its child: no result or status of an earlier run, its spec.
Status PrepareDir(const Job& job, const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  fs::remove(dir / kResult, ec);
  fs::remove(dir / kStatus, ec);
  return WriteFileAtomic(dir / kSpec, job.spec.dump(2));
}

Expected<Child> SpawnJob(const Job& job, const fs::path& dir, const std::string& worker_socket, const std::vector<std::string>& env) {
  PARITY_RETURN_IF_ERROR(PrepareDir(job, dir));
  SpawnOptions so;
  so.env = env;
  so.stdout_path = (dir / kLog).string();
  so.stderr_path = so.stdout_path;
  if (!worker_socket.empty()) so.env.push_back("PARITY_WORKER_SOCKET=" + worker_socket);
  return Child::Spawn({SelfExe(), kJobCommand, "--dir", fs::absolute(dir).string()}, so);
}

}  // namespace

std::vector<std::string> JobChildMayDiffer() {
  return {"PARITY_*", kVisibleDevicesEnv, "MKL_NUM_THREADS", kCompileThreadsEnv, "CUBLAS_WORKSPACE_CONFIG"};
}

std::vector<std::vector<std::string>> SlotEnvironments(int jobs, bool cuda, int gpus, const std::string& visible_devices,
                                                       int cpus, bool compile_threads_given) {
  jobs = std::max(1, jobs);
  std::vector<std::vector<std::string>> env(static_cast<size_t>(jobs));
  const int share = std::max(1, cpus / jobs);  // a slot's share of the cores
  if (cuda) {
    // A CUDA run's host-side work is small; a runner and its worker each with a thread per core
    // made it 20x slower on a 16-core H100 host (a scan's noise-budget calibration 6.3 s, against
    // 0.28 s with one thread; measured, docs/gpu.md). Each slot gets its share, at most 4.
    const std::string threads = std::to_string(std::min(share, 4));
    for (auto& e : env)
      e = {"OMP_NUM_THREADS=" + threads, "MKL_NUM_THREADS=" + threads, std::string(kSlotCpusEnv) + "=" + std::to_string(share)};
    std::vector<std::string> ids;
    std::stringstream in(visible_devices);
    for (std::string id; std::getline(in, id, ',');)
      if (!id.empty()) ids.push_back(id);
    if (ids.empty())
      for (int i = 0; i < gpus; ++i) ids.push_back(std::to_string(i));
    if (ids.size() > 1 && jobs > 1)
      for (size_t i = 0; i < env.size(); ++i) env[i].push_back(std::string(kVisibleDevicesEnv) + "=" + ids[i % ids.size()]);
  } else if (jobs > 1) {
    const std::string threads = std::to_string(share);
    for (auto& e : env) e = {"OMP_NUM_THREADS=" + threads, "MKL_NUM_THREADS=" + threads};
  }
  if (jobs > 1 && !compile_threads_given)
    for (auto& e : env) e.push_back(std::string(kCompileThreadsEnv) + "=" + std::to_string(share));
  return env;
}

int SlotCpus() {
  const char* v = std::getenv(kSlotCpusEnv);
  if (!v || !*v) return 0;
  try {
    return std::max(0, std::stoi(v));
  } catch (const std::exception&) {
    return 0;
  }
}

int ComparisonCpus() {
  const int cpus = SlotCpus();
  return cpus - cpus / 4;
}

struct JobRunner::Running {
  size_t index, slot;
  std::optional<Child> child;  // its own child; none when its slot's server runs it
  std::chrono::steady_clock::time_point deadline;
  std::optional<ExitInfo> info;
  fs::path dir;
  bool needs_worker = false;
  std::string failure;  // why the driver ended it (its worker died starting)
};

JobRunner::JobRunner(fs::path scratch, int timeout_s, std::vector<std::vector<std::string>> slot_env)
    : scratch_(std::move(scratch)), timeout_s_(timeout_s), slots_(std::max<size_t>(1, slot_env.size())) {
  for (size_t i = 0; i < slot_env.size(); ++i) slots_[i].env = std::move(slot_env[i]);
  std::error_code ec;
  fs::create_directories(scratch_, ec);
}

JobRunner::~JobRunner() {
  // Every slot's server and worker killed and none waited for (Child::Abandon): a process holding
  // a CUDA context takes about a second to end, which waiting made the last second of every run.
  for (size_t i = 0; i < slots_.size(); ++i) {
    StopServer(i, /*wait=*/false);
    Slot& s = slots_[i];
    s.client.reset();
    if (s.worker) s.worker->Abandon();  // a pool entry's, live, is left for the pool's next user
    s.worker.reset();
  }
}

void JobRunner::Prestart(bool workers, const std::string& warm_device) {
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (workers) {
      WorkerOf(i).set_warm(warm_device);
      (void)WorkerOf(i).Launch();  // a failed start shows when a job needs it
    }
    if (persistent_) (void)LaunchServer(i);
  }
}

WorkerProcess& JobRunner::WorkerOf(size_t i) {
  Slot& s = slots_[i];
  if (!s.worker) {
    s.worker = WorkerProcess::ForSlot((scratch_ / ("worker" + std::to_string(i) + ".sock")).string(),
                                      (scratch_ / ("worker" + std::to_string(i) + ".log")).string(), s.env);
    if (s.worker->adopted()) ++workers_adopted_;
  }
  return *s.worker;
}

static std::string ServerSocket(const fs::path& scratch, size_t i) {
  return UsableSocketPath((scratch / ("server" + std::to_string(i) + ".sock")).string());
}

Status JobRunner::LaunchServer(size_t i) {
  Slot& s = slots_[i];
  if (s.server && !s.server->child.Poll()) return Status::Ok();
  StopServer(i);
  const std::string socket = ServerSocket(scratch_, i);
  std::error_code ec;
  fs::remove(socket, ec);
  SpawnOptions so;
  so.env = s.env;
  so.env.push_back("PARITY_WORKER_SOCKET=" + WorkerOf(i).socket_path());
  so.stdout_path = (scratch_ / ("server" + std::to_string(i) + ".log")).string();
  so.stderr_path = so.stdout_path;
  PARITY_ASSIGN_OR_RETURN(Child child, Child::Spawn({SelfExe(), kJobCommand, "--serve", socket}, so));
  s.server = std::make_unique<Server>(Server{std::move(child)});
  ++servers_started_;
  return Status::Ok();
}

Status JobRunner::EnsureServer(size_t i) {
  PARITY_RETURN_IF_ERROR(LaunchServer(i));
  Server& server = *slots_[i].server;
  if (server.fd >= 0) return Status::Ok();
  const std::string socket = ServerSocket(scratch_, i);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!fs::exists(socket)) {
    if (auto ended = server.child.Poll()) {
      StopServer(i);
      return Error::Runtime("job server exited at start-up: " + ended->Describe());
    }
    if (std::chrono::steady_clock::now() > deadline) {
      StopServer(i);
      return Error::Runtime("job server did not start within 60 s");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  server.fd = ConnectUnix(socket);
  if (server.fd < 0) return Error::Runtime("job server: cannot connect to " + socket + ": " + std::strerror(errno));
  return Status::Ok();
}

void JobRunner::StopServer(size_t i, bool wait) {
  auto& server = slots_[i].server;
  if (!server) return;
  if (server->fd >= 0) ::close(server->fd);  // a server between jobs reads EOF and exits
  if (!wait) server->child.Abandon();
  else if (!server->child.Poll()) server->child.Kill();
  server.reset();
}

std::optional<ExitInfo> JobRunner::PollServed(size_t slot) {
  Server& server = *slots_[slot].server;
  pollfd p{server.fd, POLLIN, 0};
  if (::poll(&p, 1, 0) > 0) {
    char buf[256];
    ssize_t n = ::recv(server.fd, buf, sizeof buf, 0);
    if (n > 0) server.buffer.append(buf, static_cast<size_t>(n));
    const auto nl = server.buffer.find('\n');
    if (nl != std::string::npos) {
      ExitInfo done;
      done.exited = true;
      try {
        done.code = std::stoi(server.buffer.substr(0, nl));
      } catch (const std::exception&) {
        done.code = 3;
      }
      server.buffer.erase(0, nl + 1);
      return done;
    }
    if (n == 0) return server.child.Wait(std::chrono::milliseconds(2000));  // the server closed: it is ending
  }
  return server.child.Poll();  // it died in the job
}

Status JobRunner::EnsureWorker(size_t i) {
  Slot& s = slots_[i];
  if (WorkerOf(i).Check()) s.client.reset();
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

bool JobRunner::WorkerStarting(size_t slot) {
  std::error_code ec;
  return !fs::exists(WorkerOf(slot).socket_path(), ec);
}

Expected<JobRunner::Running> JobRunner::Start(const Job& job, const fs::path& dir, size_t index, size_t slot,
                                              const std::vector<std::pair<const Job*, fs::path>>& next) {
  std::string socket;
  if (job.needs_worker) {
    // Launched, not waited for: the child does what needs no worker while it starts, and waits
    // for its socket when it first needs it (a worker that dies starting ends the job: WaitAny).
    if (WorkerOf(slot).Check()) slots_[slot].client.reset();
    PARITY_RETURN_IF_ERROR(slots_[slot].worker->Launch());
    if (slot == 0) slots_[0].client.reset();  // the worker serves one connection at a time
    socket = slots_[slot].worker->socket_path();
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s_);
  if (persistent_) {
    PARITY_RETURN_IF_ERROR(EnsureServer(slot));
    PARITY_RETURN_IF_ERROR(PrepareDir(job, dir));
    std::string line = fs::absolute(dir).string();
    for (const auto& [next_job, next_dir] : next) {
      if (!PrepareDir(*next_job, next_dir).ok()) break;
      line += "\t" + fs::absolute(next_dir).string();
    }
    if (!SendAll(slots_[slot].server->fd, line + "\n")) {
      StopServer(slot);
      return Error::Runtime("job server of slot " + std::to_string(slot) + " stopped taking jobs");
    }
    return Running{index, slot, std::nullopt, deadline, std::nullopt, dir, job.needs_worker, ""};
  }
  PARITY_ASSIGN_OR_RETURN(Child child, SpawnJob(job, dir, socket, slots_[slot].env));
  return Running{index, slot, std::move(child), deadline, std::nullopt, dir, job.needs_worker, ""};
}

std::optional<std::string> JobRunner::WorkerFailedToStart(size_t slot) {
  WorkerProcess* w = slots_[slot].worker.get();
  if (!w || fs::exists(w->socket_path())) return std::nullopt;
  auto ended = w->Check();
  if (!ended) return std::nullopt;
  return "python worker (" + WorkerPython() + ") exited at start-up: " + ended->Describe();
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
      run.info = run.child ? run.child->Poll() : PollServed(run.slot);
      if (!run.info && run.needs_worker)
        if (auto why = WorkerFailedToStart(run.slot)) {  // its child would wait for that socket until the deadline
          if (run.child)
            run.child->Kill();
          else
            StopServer(run.slot);
          run.failure = *why;
          ExitInfo k;
          k.signal = SIGKILL;
          run.info = k;
        }
      if (!run.info && std::chrono::steady_clock::now() >= run.deadline) {
        if (run.child)
          run.child->Kill();
        else
          StopServer(run.slot);  // a hung server is never used again
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
  const bool served = !run.child;
  if (served && !(o.how.exited && o.how.code == 0)) StopServer(run.slot);  // crashed, hung or failed: a fresh one next
  if (o.how.exited && o.how.code == 0) {
    auto text = ReadFile(run.dir / kResult);
    auto j = text.ok() ? json::parse(*text, nullptr, false) : json();
    if (j.is_object()) {
      if (retire_ && retire_(j)) {  // poisoned (a CUDA error, out of memory): its processes are never used again
        if (served) StopServer(run.slot);
        if (job.needs_worker) RestartWorker(run.slot);
      }
      o.result = std::move(j);
      return o;
    }
  }
  o.phase = CurrentPhase(run.dir);
  o.log_tail = Tail(run.dir / kLog, 600);
  if (!job.needs_worker) return o;
  // A hang or crash inside a Python backend leaves its worker busy or dead: start afresh.
  auto ended = slots_[run.slot].worker ? slots_[run.slot].worker->Check() : std::nullopt;
  if (!run.failure.empty())
    o.failure = run.failure + "; see " + slots_[run.slot].worker->log_path();
  else if (ended)
    o.failure = "python worker " + ended->Describe();
  // One that ended preparing a next job had not asked the worker yet (steps ahead run only
  // while its socket is missing), and a worker outlives a client that dies: it is kept.
  if (FailedAhead(o)) return o;
  RestartWorker(run.slot);
  StopServer(run.slot);  // its connection to the old worker is gone
  return o;
}

std::deque<size_t>::iterator NextJobFor(size_t slot, std::deque<size_t>& pending, const std::vector<Job>& jobs,
                                        std::map<std::string, size_t>* bound) {
  auto next = std::find_if(pending.begin(), pending.end(), [&](size_t i) {
    if (bound == nullptr || jobs[i].affinity.empty()) return true;
    auto it = bound->find(jobs[i].affinity);
    return it == bound->end() || it->second == slot;
  });
  if (next != pending.end() && bound != nullptr && !jobs[*next].affinity.empty()) bound->emplace(jobs[*next].affinity, slot);
  return next;
}

JobQueue::JobQueue(const std::vector<Job>& jobs, size_t slots, bool bind_affinities)
    : jobs_(jobs), told_(slots), bind_(bind_affinities) {
  for (size_t i = 0; i < jobs.size(); ++i) pending_.push_back(i);
}

bool JobQueue::Empty() const {
  return pending_.empty() && std::all_of(told_.begin(), told_.end(), [](const auto& t) { return t.empty(); });
}

std::optional<size_t> JobQueue::Take(size_t slot) {
  if (!told_[slot].empty()) {
    const size_t i = told_[slot].front();
    told_[slot].pop_front();
    return i;
  }
  auto next = NextJobFor(slot, pending_, jobs_, bind_ ? &bound_ : nullptr);
  if (next == pending_.end()) return std::nullopt;
  const size_t i = *next;
  pending_.erase(next);
  return i;
}

void JobQueue::Tell(const std::vector<size_t>& slots) {
  for (size_t turn = 0; turn < kNextJobsTold; ++turn)
    for (size_t slot : slots) {
      if (told_[slot].size() > turn) continue;
      auto next = NextJobFor(slot, pending_, jobs_, &bound_);
      if (next == pending_.end()) continue;
      told_[slot].push_back(*next);
      pending_.erase(next);
    }
}

void JobRunner::RunStream(std::vector<Job> jobs, const OnDone& on_done, const OnStart& on_start, const OnTick& on_tick) {
  JobQueue queue(jobs, slots_.size(), persistent_);
  std::vector<int> attempts(jobs.size(), 0);
  std::vector<bool> busy(slots_.size(), false);
  std::vector<Running> running;
  std::vector<bool> untold(jobs.size(), false);  // ended in kAheadPhase once: run without next jobs
  auto dir_of = [&](size_t i) {
    const fs::path& d = jobs[i].dir;
    return attempts[i] == 0 ? d : fs::path(d.string() + ".r" + std::to_string(attempts[i]));
  };
  auto done = [&](size_t i, const JobOutcome& o) {
    if (on_done(i, o)) {
      ++attempts[i];
      queue.PushFront(i);
    }
  };
  while (!queue.Empty() || !running.empty()) {
    // Every free slot takes a job, whether or not its worker listens yet (Start).
    std::vector<std::pair<size_t, size_t>> taken;  // (slot, job)
    for (size_t slot = 0; slot < slots_.size(); ++slot)
      if (!busy[slot])
        if (auto i = queue.Take(slot)) taken.emplace_back(slot, *i);
    // Where a job will wait for its slot's worker to start, its server is told of the slot's next jobs.
    std::vector<size_t> telling;
    for (const auto& [slot, i] : taken)
      if (persistent_ && jobs[i].needs_worker && !untold[i] && WorkerStarting(slot)) telling.push_back(slot);
    queue.Tell(telling);
    for (const auto& [slot, i] : taken) {
      std::vector<std::pair<const Job*, fs::path>> ahead;
      if (std::find(telling.begin(), telling.end(), slot) != telling.end())
        for (size_t j : queue.Told(slot)) ahead.emplace_back(&jobs[j], dir_of(j));
      if (on_start) on_start(i, dir_of(i));
      auto run = Start(jobs[i], dir_of(i), i, slot, ahead);
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
    JobOutcome outcome = Finish(jobs[run.index], run);
    if (FailedAhead(outcome) && !untold[run.index]) {
      untold[run.index] = true;  // a next job's failure, not this one's: this one again, alone
      queue.PushFront(run.index);
      continue;
    }
    done(run.index, outcome);
  }
}

bool FailedAhead(const JobOutcome& outcome) {
  return !outcome.result && outcome.failure.empty() && outcome.phase == kAheadPhase;
}

std::string CurrentPhase(const fs::path& dir) {
  std::string phase = Tail(dir / kStatus, 200);
  while (!phase.empty() && (phase.back() == '\n' || phase.back() == ' ')) phase.pop_back();
  return phase;
}

}  // namespace parity::runtime
