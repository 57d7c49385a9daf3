// Jobs in isolated child processes, and the job slots that run them: each job runs in a fresh
// process of the parity binary (`parity _experiment --dir DIR`, forked by the zygote where the
// command started one (util/zygote.h), else exec'd; in its own process group, killed at its
// deadline and when the driver dies); `jobs` slots keep a job each running, every slot with
// its own persistent Python worker (started when a job needs one, restarted when a job crashed or
// hung in it) and its own environment (its GPU, its share of CPU threads: SlotEnvironments).
// Knows nothing of what a job computes: a job is a JSON spec in, a JSON result out.
//
// The child protocol, both ends here: the driver writes DIR/spec.json and spawns the child; the
// child writes each phase's name to DIR/status.txt as it starts and its result to
// DIR/result.json; the driver reads the result back, or, when the child crashed, hung or was
// killed, reports how it ended, the phase it was in and the tail of DIR/log.txt.
//
// Job servers (set_persistent): each slot keeps one child (`parity _experiment --serve SOCKET`)
// that runs the slot's jobs one after another, so what a process start costs (libtorch's and
// CUDA's initialization, kernels loaded, caches warmed) is paid once per slot, not per job. Per
// job the protocol is the same (the job's DIR sent over the socket; its stdout and stderr go to
// DIR/log.txt; the exit code sent back). A server that crashes (its job ends as a crashed child's
// would), hangs (killed at the job's deadline), is poisoned (`set_retire` says so of a job's
// result: a CUDA error, an out-of-memory) or whose slot's worker was restarted is never used
// again: the next job of the slot starts a fresh one.
//
// A job whose slot's worker is still starting is sent with the slot's next jobs (up to
// kNextJobsTold, their dirs, their specs written): the server may prepare them while this one
// waits for the worker (their repro dirs read, their references run: experiment/experiment.h
// PreparedExperiment), saying kAheadPhase meanwhile. They are the slot's, taken from the queue
// then, and run next there in that order. A job that crashes or hangs in kAheadPhase is run again
// without next jobs: what failed was a next job's, which then fails in its own turn.
//
// A slot's worker may be one an earlier run kept warm (runtime/worker_pool.h, --keep-workers):
// adopted when the slot first needs one, handed back when the runner ends unless it was retired.
// A job starts without waiting for its slot's worker to listen: the child waits for the socket
// when it first needs it, and a worker that dies starting ends the job with why.
#pragma once

#include <nlohmann/json.hpp>

#include <chrono>
#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/worker.h"
#include "util/subprocess.h"

namespace parity::runtime {

// The hidden subcommand of a job's child (cli/cmd_experiment.cpp registers it).
inline constexpr const char* kJobCommand = "_experiment";
// The phase a job says while it prepares its slot's next jobs (above), and how many it is told of:
// on two H200s a slot's first job waited 1.9-3.3 s for its worker, a next job's reference about 1 s.
inline constexpr const char* kAheadPhase = "ahead";
inline constexpr size_t kNextJobsTold = 2;

// The extra environment of each of `jobs` slots. On CUDA each slot gets cpus/jobs threads, at
// most 4 (OMP_NUM_THREADS, MKL_NUM_THREADS: the host side of a CUDA run is small, and full
// thread pools in a slot's processes were measured to slow it), and with several GPUs (`gpus`,
// the ids in `visible_devices` = $CUDA_VISIBLE_DEVICES when set, else 0..gpus-1) and several
// slots slot i is pinned to GPU i mod n; on the CPU with jobs > 1 each slot gets cpus/jobs
// threads. One CPU slot gets nothing.
// On CUDA each slot also gets kSlotCpusEnv: its share of the cores (cpus/jobs), for host work
// once the backend is done (the comparison: ComparisonCpus).
// With several slots each worker's Inductor compiles on its share of the cores too
// (TORCHINDUCTOR_COMPILE_THREADS=cpus/jobs), unless `compile_threads_given` (the user's own
// $TORCHINDUCTOR_COMPILE_THREADS, which every slot then inherits): otherwise every slot's worker
// starts a compile pool of a process per core, each importing torch, all at once at the first
// compiles of a run.
std::vector<std::vector<std::string>> SlotEnvironments(int jobs, bool cuda, int gpus, const std::string& visible_devices,
                                                       int cpus, bool compile_threads_given = false);
inline constexpr const char* kCompileThreadsEnv = "TORCHINDUCTOR_COMPILE_THREADS";
inline constexpr const char* kVisibleDevicesEnv = "CUDA_VISIBLE_DEVICES";
// The variables a job child's environment may set otherwise than the driver's as it started, for
// the zygote that forks job children instead of exec'ing the binary (util/zygote.h): what parity
// reads only after it loaded (its own settings), every variable a slot sets (SlotEnvironments:
// its GPU, MKL's thread count, Inductor's compile threads; OpenMP's the zygote applies again) and
// cuBLAS's workspace (experiment/flow.cpp). A slot variable left out would make every job child
// of such slots an exec, the binary's start again (0.22 CPU-s, libtorch's static initialisation).
std::vector<std::string> JobChildMayDiffer();
inline constexpr const char* kSlotCpusEnv = "PARITY_SLOT_CPUS";
// This process's slot's share of the cores ($PARITY_SLOT_CPUS), 0 when none was given.
int SlotCpus();
// The threads of the comparison: three quarters of the slot's cores (SlotCpus), 0 when none was
// given. The slot's other processes are not idle then: the worker's compile pool starts one
// process per core at the compile, each importing torch, and a parallel region with a thread on
// every core waits for the cores they took (measured on an H200's 16 cores, a BERT train step's
// comparison while the pool started: 1.9-2.1 s with 16 threads, 0.73-0.85 s with 12 and 0.84-0.88 s
// with 8; without a pool 0.63 s with 16 and 0.83 s with 8).
int ComparisonCpus();

struct Job {
  nlohmann::json spec;         // what the child reads (DIR/spec.json)
  std::filesystem::path dir;   // the child's dir (its scratch space)
  bool needs_worker = false;   // the child talks to its slot's Python worker ($PARITY_WORKER_SOCKET)
  // With job servers, the jobs of one RunStream with the same non-empty affinity run in one slot,
  // one after another (the same experiment again: the second finds what the first compiled in
  // its process), while the other slots take other jobs.
  std::string affinity;
};

// How a job ended.
struct JobOutcome {
  std::optional<nlohmann::json> result;  // DIR/result.json of a child that exited 0 having written it
  ExitInfo how;                          // how the child ended (timed_out: killed at the deadline)
  std::string phase;                     // the last phase it started
  std::string log_tail;                  // the end of its log
  std::string failure;                   // set when the job could not start, or its worker died with it
  int timeout_s = 0;                     // the deadline it ran under
};

class JobRunner {
 public:
  // `slot_env`: one entry per slot (its size is the number of slots); empty: one slot.
  JobRunner(std::filesystem::path scratch, int timeout_s, std::vector<std::vector<std::string>> slot_env);
  ~JobRunner();
  JobRunner(const JobRunner&) = delete;
  JobRunner& operator=(const JobRunner&) = delete;

  // One request to slot 0's worker (capture, listings, repro scripts); a worker that died is
  // restarted on the next request.
  [[nodiscard]] Expected<nlohmann::json> Ask(const nlohmann::json& request);

  // Called in the driver's thread as each job ends, in the order they end; returning true runs
  // that job again (in `<dir>.rN`), e.g. a retry of a failure.
  using OnDone = std::function<bool(size_t index, const JobOutcome& outcome)>;
  using OnStart = std::function<void(size_t index, const std::filesystem::path& dir)>;
  using OnTick = std::function<void()>;  // while jobs run, about 4 times a second
  // Keeps every slot busy until every job is done (a new job starts as soon as one ends).
  void RunStream(std::vector<Job> jobs, const OnDone& on_done, const OnStart& on_start = nullptr, const OnTick& on_tick = nullptr);
  int slots() const { return static_cast<int>(slots_.size()); }
  // Job servers instead of a child per job (see above).
  void set_persistent(bool persistent) { persistent_ = persistent; }
  // Starts each slot's server (with persistent runners) and, with `workers`, its Python worker,
  // without waiting: their start-up overlaps with what the driver does before its first jobs.
  // `warm_device`: the slots' workers (these and their restarts) prepare a backend's first compile
  // on it before they listen (WorkerProcess::set_warm): a slot whose worker is still starting takes
  // no job while another can, so no job waits for those imports while a warm slot could run it.
  void Prestart(bool workers, const std::string& warm_device = {});
  // Whether a job's result leaves the processes that ran it unfit for the next job: its server,
  // and its slot's worker when the job used it (a CUDA error in a Python backend is the worker's).
  void set_retire(std::function<bool(const nlohmann::json& result)> retire) { retire_ = std::move(retire); }
  // Servers started so far (a fresh one per slot, plus one per retirement).
  int servers_started() const { return servers_started_; }
  // Slots whose worker was found warm in the pool (runtime/worker_pool.h).
  int workers_adopted() const { return workers_adopted_; }

 private:
  struct Server {
    Child child;
    int fd = -1;
    std::string buffer{};  // what came back and is not a whole line yet
  };
  struct Slot {
    std::vector<std::string> env;
    std::unique_ptr<WorkerProcess> worker;
    std::optional<WorkerClient> client;
    std::unique_ptr<Server> server;
  };
  struct Running;
  // The slot's worker (a pool entry's when there is one: runtime/worker_pool.h), made on first
  // use without starting it.
  WorkerProcess& WorkerOf(size_t slot);
  [[nodiscard]] Status EnsureWorker(size_t slot);
  void RestartWorker(size_t slot);
  [[nodiscard]] Status EnsureServer(size_t slot);
  [[nodiscard]] Status LaunchServer(size_t slot);
  void StopServer(size_t slot, bool wait = true);  // wait false: killed, left to be reaped (Child::Abandon)
  // A served job's end, if it has come: its exit code back, the server's death, or nullopt.
  std::optional<ExitInfo> PollServed(size_t slot);
  // Starts `job` in `slot` in `dir`, telling a job server of `next` (the slot's next jobs and their
  // dirs); why it could not start otherwise.
  Expected<Running> Start(const Job& job, const std::filesystem::path& dir, size_t index, size_t slot,
                          const std::vector<std::pair<const Job*, std::filesystem::path>>& next = {});
  // Whether the slot's worker is one still to start or starting (its socket not there yet).
  bool WorkerStarting(size_t slot);
  // Waits until one of `running` ends (or passes its deadline, or its worker died starting) and
  // returns its position.
  size_t WaitAny(std::vector<Running>& running, const OnTick& on_tick);
  // Why the slot's worker will never listen (it exited before its socket appeared), if so.
  std::optional<std::string> WorkerFailedToStart(size_t slot);
  JobOutcome Finish(const Job& job, Running& run);
  std::filesystem::path scratch_;
  int timeout_s_;
  std::vector<Slot> slots_;
  bool persistent_ = false;
  std::function<bool(const nlohmann::json&)> retire_;
  int servers_started_ = 0;
  int workers_adopted_ = 0;
};

// The pending job (indices into `jobs`) free slot `slot` takes next: the first whose affinity is
// empty, new, or bound to this slot (binding a new one to it); end() when all that is left waits
// for other slots. `bound` (affinity -> slot) null: affinities are ignored (fresh children).
std::deque<size_t>::iterator NextJobFor(size_t slot, std::deque<size_t>& pending, const std::vector<Job>& jobs,
                                        std::map<std::string, size_t>* bound);

// The jobs of one RunStream still to start, and which slot takes which: the queue (each slot the
// first job NextJobFor gives it), the jobs each slot was told it takes next (see above), the
// affinities bound to slots (with job servers).
class JobQueue {
 public:
  JobQueue(const std::vector<Job>& jobs, size_t slots, bool bind_affinities);
  bool Empty() const;  // nothing queued, nothing told
  // The job `slot` takes now: the first it was told of, else the queue's first it may take; none
  // when what is left waits for other slots.
  std::optional<size_t> Take(size_t slot);
  // Each of `slots` (each starting a job that will wait for its worker) told of its next jobs, up
  // to kNextJobsTold each: taken from the queue in turns, a job per slot a turn, as the slots would
  // take them one after another.
  void Tell(const std::vector<size_t>& slots);
  const std::deque<size_t>& Told(size_t slot) const { return told_[slot]; }
  void PushFront(size_t job) { pending_.push_front(job); }  // taken next (a retry)

 private:
  const std::vector<Job>& jobs_;
  std::deque<size_t> pending_;
  std::vector<std::deque<size_t>> told_;
  std::map<std::string, size_t> bound_;  // affinity -> the slot its first job ran in
  bool bind_;
};

// Whether a job that ended so failed in another job's place: its process crashed or hung in
// kAheadPhase, preparing a next job (see above), its worker alive; it is then run again without
// next jobs.
bool FailedAhead(const JobOutcome& outcome);

// Driver side: the phase a running child is in ("" before its first).
std::string CurrentPhase(const std::filesystem::path& dir);

// Child side: the entry of `parity _experiment --dir DIR`: `run` gets DIR/spec.json, DIR and a
// callback that records each phase as it starts; what it returns is written to DIR/result.json.
// Exit 0 when the result was written, 2 when the spec cannot be read.
using PhaseFn = std::function<void(const std::string& phase)>;
// `next`: the jobs this process runs next, in order, where the driver told of them (a job server's
// job whose worker is starting) and their specs could be read.
struct NextJob {
  nlohmann::json spec;
  std::filesystem::path dir;
};
using JobFn = std::function<Expected<nlohmann::json>(const nlohmann::json& spec, const std::filesystem::path& dir,
                                                     const PhaseFn& on_phase, const std::vector<NextJob>& next)>;
// `next`: the next jobs' dirs, where the driver told of them.
int JobChildMain(const std::filesystem::path& dir, const JobFn& run, const std::vector<std::filesystem::path>& next = {});
// Child side of a job server (`parity _experiment --serve SOCKET`): listens on `socket`, serves
// one driver: for each line it sends (DIR, then TAB NEXT for each next job it tells of), runs
// JobChildMain(DIR, run, NEXTs) with stdout and stderr in DIR/log.txt, releases its worker
// connection, and sends the exit code back. Returns when the
// driver closes the connection.
int JobServerMain(const std::string& socket, const JobFn& run);

}  // namespace parity::runtime
