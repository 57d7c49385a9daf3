// The persistent Python worker (tools/parity_capture/worker.py): WorkerProcess starts and
// restarts it; WorkerClient speaks its protocol (JSON lines over a Unix socket, and 8-byte frames
// for host op plan repeats; docs/worker.md).
#pragma once

#include <nlohmann/json.hpp>

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/fork_server.h"
#include "runtime/python_env.h"
#include "runtime/worker_pool.h"
#include "util/status.h"
#include "util/subprocess.h"

namespace parity::runtime {

// The Python interpreter parity uses: $PARITY_PYTHON, else the venv it was built against.
std::string WorkerPython();
// The environment a worker started with the extra NAME=VALUE entries `extra` gets (this
// process's, `extra` over it, PythonEnv() over that), as a map: what a worker's pool key digests
// and a forked worker runs with.
std::map<std::string, std::string> WorkerEnvironment(const std::vector<std::string>& extra);
inline constexpr const char* kTorchMismatch = "TorchMismatch";  // the worker's error type then

class WorkerProcess {
 public:
  // `log_path`: the worker's stdout/stderr go there; `env`: extra NAME=VALUE entries.
  WorkerProcess(std::string socket_path, std::string log_path, std::vector<std::string> env = {});
  // The worker of a pool entry (runtime/worker_pool.h): its warm worker, adopted, or one started
  // there that outlives this process for KeepWorkers() idle seconds.
  WorkerProcess(PoolClaim claim, std::vector<std::string> env);
  // Without a pool entry, stops the worker; with one, leaves a live worker running and releases
  // the entry (a worker that must not be reused was stopped before: Stop()).
  ~WorkerProcess();
  // A pool entry's worker when one is there for `env`, else a private one at `socket_path`.
  static std::unique_ptr<WorkerProcess> ForSlot(std::string socket_path, std::string log_path, std::vector<std::string> env);
  // Starts the worker unless it is running; waits until it listens.
  [[nodiscard]] Status Ensure(std::chrono::seconds startup_timeout = std::chrono::seconds(120));
  // Starts the worker unless it is running, without waiting (a later Ensure waits): its start-up
  // (Python, torch's import) overlaps with what the caller does meanwhile.
  [[nodiscard]] Status Launch();
  // How it ended, if it is no longer running (the next Ensure starts a new one).
  std::optional<ExitInfo> Check();
  // Launched and alive, not listening yet (an Ensure now would wait for its start).
  bool Starting();
  void Stop();
  // Ends it without waiting for its end (Child::Abandon): for a run's end, where nothing asks how
  // it ended. A worker the pool keeps is left alone.
  void Abandon();
  const std::string& socket_path() const { return socket_path_; }
  const std::string& log_path() const { return log_path_; }
  // Workers this object starts from now on prepare, before they listen, what a backend's first
  // compile on `device` ("cpu" or "cuda") needs (worker.py --warm); empty: none. An adopted worker
  // did that in its first run.
  void set_warm(std::string device) { warm_ = std::move(device); }
  // Whether this process found the worker warm in the pool (and has not restarted it since).
  bool adopted() const { return pid_ > 0 && !forked_; }

 private:
  // A live pool entry's worker: left running for the pool's next user when this object ends.
  bool KeptForPool();
  // worker.py's arguments for this worker.
  std::vector<std::string> WorkerArgs() const;
  // A pool entry's worker forked by its key's fork server (runtime/fork_server.h); false when
  // that cannot be asked (the caller starts one itself).
  bool LaunchForked();
  // Starts the worker as a fresh interpreter of its own (a child of this process).
  [[nodiscard]] Status LaunchSpawned();
  // The fork server's answer to a pending fork, waiting up to `wait`: true when it answered with
  // the worker's pid (taken: it is then tracked as an adopted one is), false while it has not or
  // when it failed (no fork pending then).
  bool TakeFork(std::chrono::milliseconds wait);
  // TakeFork, and where the server failed, a worker spawned instead.
  [[nodiscard]] Status Settle(std::chrono::milliseconds wait);

  std::string socket_path_, log_path_, warm_;
  std::vector<std::string> env_;
  std::optional<Child> child_;   // a worker this process started
  pid_t pid_ = 0;                // a worker adopted from the pool (another process's child), or forked for it
  bool forked_ = false;          // pid_ is a worker forked for this process by the fork server
  std::optional<PendingFork> forking_;  // a fork asked for, not answered yet
  std::optional<PoolClaim> claim_;
};

// The exception_type of a transport failure: the worker died or the connection broke (the
// worker is restarted; the request was not answered).
inline constexpr const char* kWorkerLost = "parity.WorkerLost";
inline bool IsWorkerLost(const Error& e) { return e.exception_type == kWorkerLost; }

// The one client of the worker protocol.
class WorkerClient {
 public:
  // `answer_timeout`: how long a receive may wait before the worker counts as lost (none: forever).
  [[nodiscard]] static Expected<WorkerClient> Connect(const std::string& socket_path,
                                                      std::optional<std::chrono::milliseconds> answer_timeout = std::nullopt);
  WorkerClient(WorkerClient&& o) noexcept : fd_(o.fd_), buffer_(std::move(o.buffer_)), next_id_(o.next_id_) { o.fd_ = -1; }
  ~WorkerClient();
  // Sends one request and waits for its answer. An {"ok": false} answer is a Runtime error
  // carrying the Python exception's type, message and traceback as they are; a transport
  // failure is a Runtime error whose exception_type is kWorkerLost.
  [[nodiscard]] Expected<nlohmann::json> Call(nlohmann::json request);

 private:
  // One request out, one answer in: a JSON line each way, or for a plan repeat an 8-byte frame
  // (worker.cpp, docs/worker.md "Frames").
  [[nodiscard]] Expected<nlohmann::json> Exchange(nlohmann::json request);
  [[nodiscard]] Status Send(const std::string& bytes);
  [[nodiscard]] Status Fill(size_t at_least);  // reads until buffer_ holds `at_least` bytes
  explicit WorkerClient(int fd) : fd_(fd) {}
  int fd_ = -1;
  std::string buffer_;
  int next_id_ = 1;
};

// One request to this process's worker: the one at $PARITY_WORKER_SOCKET (an experiment child,
// whose worker may still be starting: the connection waits for its socket, up to
// kWorkerStartSeconds; the driver ends a child whose worker died starting), or a private worker
// started on first use and kept for the life of the process. A connection the worker lost is
// dropped: the next request connects again. Not for two threads at once.
[[nodiscard]] Expected<nlohmann::json> AskWorker(nlohmann::json request);
// This process's connection to its worker, made now (waiting for it to listen) if there is none:
// what a caller does to know when the worker became ready, before its first request.
[[nodiscard]] Status ConnectWorker();
// Whether the worker $PARITY_WORKER_SOCKET names listens now (its socket appears once it does): a
// slot's kept worker at once, a starting one once its imports are done. False where none is named.
// Asks only the filesystem: safe beside a thread that talks to the worker.
bool NamedWorkerListening();
// This process's private worker (where no $PARITY_WORKER_SOCKET names one) started now, without
// waiting for it to listen. A child dies with the thread that started it (PR_SET_PDEATHSIG): a
// caller that talks to the worker from a thread of its own starts it here first, from the thread
// that outlives the worker's use.
[[nodiscard]] Status LaunchWorker();
inline constexpr int kWorkerStartSeconds = 300;
// Closes this process's connection to its worker (the next AskWorker connects again). The worker
// serves one connection at a time: a job server releases its own after each job, so the worker
// serves its driver between jobs.
void ReleaseWorker();
// While one lives, this thread's requests to the worker (AskWorker, ConnectWorker) are refused at
// once, an error of kind kUnsupported, instead of waiting for a worker that may still be starting
// or talking to it beside the thread whose turn it is: for work run ahead of its turn
// (experiment/experiment.h PreparedExperiment), which is then left to run at its turn.
class WorkerRefusal {
 public:
  WorkerRefusal();
  ~WorkerRefusal();
  WorkerRefusal(const WorkerRefusal&) = delete;
  WorkerRefusal& operator=(const WorkerRefusal&) = delete;
  bool refused() const { return refused_; }  // whether a request was refused
  Error Refuse();

 private:
  WorkerRefusal* outer_;
  bool refused_ = false;
};
// Whether this process holds a connection to its worker (it asked it something since it last
// released it): asking it more then waits for no worker to start.
bool WorkerConnected();
// When this process last connected to its worker: the end of its wait for one still starting
// (what a caller that saw no connection before a request charges to the worker's start).
std::optional<std::chrono::steady_clock::time_point> WorkerConnectedAt();

// `wanted`, or a short path in the temp dir unique to this process and `wanted` when it does not
// fit a Unix socket address (108 bytes).
std::string UsableSocketPath(const std::string& wanted);

// The environment variable that carries the modules `--import` names, comma-separated.
inline constexpr const char* kImportEnv = "PARITY_IMPORT";
// The modules `--import` names. Every Python process parity starts (each worker, the profiling
// child) imports them first, through kImportEnv, which this sets for this process and every
// process it starts (experiment children and their workers included): what a backend plugin
// registers at import (passes, decompositions, backends, devices) is in effect wherever a graph
// is compiled or run. Call before any worker starts.
void SetImportModules(const std::vector<std::string>& modules);
// The modules set (kImportEnv of this process).
std::vector<std::string> ImportModules();
// kBadInput naming the module when one of them does not import in this process's worker; Ok
// when none is set.
[[nodiscard]] Status CheckImportModules();

}  // namespace parity::runtime
