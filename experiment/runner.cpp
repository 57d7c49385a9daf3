#include "experiment/runner.h"

#include "experiment/backend.h"
#include "experiment/devices.h"
#include "runtime/worker.h"
#include "runtime/worker_requests.h"

#include <ATen/Context.h>

#include <algorithm>
#include <cstdlib>
#include <deque>
#include <iterator>
#include <thread>

namespace parity::experiment {
namespace fs = std::filesystem;

namespace {

// The backend's trait, or host ops (approved modules) that run in the worker.
bool NeedsWorker(const ExperimentSpec& spec) {
  auto info = FindBackend(spec.backend);
  return !info.ok() || info->needs_worker || !spec.imports.empty();
}

std::vector<runtime::Job> JobsOf(const ExperimentBatch& batch) {
  std::vector<runtime::Job> jobs;
  // The same experiment twice (a failure's confirmations): one slot, one after the other.
  for (const auto& [spec, dir] : batch) {
    nlohmann::json j = spec.ToJson();
    std::string affinity = j.dump();
    jobs.push_back({std::move(j), dir, NeedsWorker(spec), std::move(affinity)});
  }
  return jobs;
}

}  // namespace

ExperimentResult ResultOf(const runtime::JobOutcome& o) {
  if (o.result) return ExperimentResult::FromJson(*o.result);
  ExperimentResult r;
  r.code = results::Code::kVerifierDidntRun;
  r.phase = o.phase;
  if (!o.how.exited && !o.how.timed_out && o.how.signal == 0 && !o.failure.empty()) {  // it never started
    r.error = o.failure;
    return r;
  }
  r.signal = o.how.timed_out ? 0 : o.how.signal;
  r.timed_out = o.how.timed_out;
  r.error = "experiment process " + (o.how.timed_out ? "timed out after " + std::to_string(o.timeout_s) + " s" : o.how.Describe()) +
            (o.phase.empty() ? "" : " during " + o.phase);
  if (!o.log_tail.empty()) r.error += "; log tail: " + o.log_tail;
  if (!o.failure.empty()) r.error += "; " + o.failure;
  return r;
}

void IsolatedRunner::RunStream(ExperimentBatch batch, const OnDone& on_done, const runtime::JobRunner::OnStart& on_start,
                               const runtime::JobRunner::OnTick& on_tick) {
  jobs_.RunStream(
      JobsOf(batch), [&](size_t i, const runtime::JobOutcome& o) { return on_done(i, ResultOf(o)); }, on_start, on_tick);
}

std::vector<ExperimentResult> IsolatedRunner::RunMany(ExperimentBatch batch) {
  std::vector<ExperimentResult> results(batch.size());
  RunStream(std::move(batch), [&](size_t i, const ExperimentResult& r) {
    results[i] = r;
    return false;
  });
  return results;
}

namespace {
// The accelerator's name, found once per process: as its driver gives it (DriverDeviceName), else
// as this process's worker says it (only a worker the experiment already talked to: never waiting
// for one to start); "" otherwise, and the driver asks a worker.
std::string DeviceName(const ExperimentSpec& spec) {
  static std::string name;
  if (!name.empty() || spec.device.rfind("cpu", 0) == 0) return name;
  try {
    name = DriverDeviceName(c10::Device(spec.device));
  } catch (const std::exception&) {  // a device string torch does not know: the experiment said so
  }
  if (!name.empty() || !runtime::WorkerConnected()) return name;
  if (auto pong = runtime::AskWorker(runtime::requests::Ping()); pong.ok()) name = pong->value("device_name", std::string());
  return name;
}

// The spec of a job dir, run in that dir (a rerun runs in its own dir).
Expected<ExperimentSpec> SpecOf(const nlohmann::json& j, const fs::path& dir) {
  PARITY_ASSIGN_OR_RETURN(ExperimentSpec spec, ExperimentSpec::FromJson(j));
  spec.work_dir = fs::absolute(dir).string();
  return spec;
}

// One experiment of a job dir: DIR/spec.json's, run in DIR. In a job server, an experiment an
// earlier job prepared is this one's where its dir is (those told of before it are dropped: they
// will not come); the next ones the driver told of are prepared while this one waits for its worker.
Expected<nlohmann::json> RunJob(const nlohmann::json& j, const fs::path& dir, const runtime::PhaseFn& on_phase,
                                const std::vector<runtime::NextJob>& next) {
  // The job server's next jobs, prepared, in order; never torn down at exit (they may hold tensors).
  static auto* parked = new std::deque<std::unique_ptr<PreparedExperiment>>();
  PARITY_ASSIGN_OR_RETURN(ExperimentSpec spec, SpecOf(j, dir));
  std::unique_ptr<PreparedExperiment> prepared;
  auto dir_of = [](const std::unique_ptr<PreparedExperiment>& p) { return p->spec().work_dir; };
  if (auto it = std::find_if(parked->begin(), parked->end(), [&](const auto& p) { return dir_of(p) == spec.work_dir; });
      it != parked->end()) {
    prepared = std::move(*it);
    parked->erase(parked->begin(), it + 1);
  }
  for (const auto& n : next) {
    auto told = SpecOf(n.spec, n.dir);
    if (!told.ok()) break;
    if (std::none_of(parked->begin(), parked->end(), [&](const auto& p) { return dir_of(p) == told->work_dir; }))
      parked->push_back(std::make_unique<PreparedExperiment>(std::move(*told)));
  }
  std::vector<PreparedExperiment*> ahead;
  for (const auto& p : *parked) ahead.push_back(p.get());
  ExperimentResult r = RunExperiment(spec, on_phase, prepared.get(), ahead);
  prepared.reset();
  r.device_name = DeviceName(spec);  // the driver's record names it without asking a worker while jobs run
  nlohmann::json result = r.ToJson();
  try {
    ReleaseCachedMemory(c10::Device(spec.device));  // a job server's next experiment gets it all
  } catch (const std::exception&) {
  }
  return result;
}
}  // namespace

int ExperimentChildMain(const fs::path& dir) { return runtime::JobChildMain(dir, &RunJob); }

int ExperimentServerMain(const std::string& socket) { return runtime::JobServerMain(socket, &RunJob); }

std::vector<std::vector<std::string>> SlotEnvironmentsHere(int jobs, bool cuda) {
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  const int gpus = cuda && jobs > 1 && at::hasCUDA() ? static_cast<int>(at::getNumGPUs()) : 0;
  const char* compile_threads = std::getenv(runtime::kCompileThreadsEnv);
  return runtime::SlotEnvironments(jobs, cuda, gpus, visible ? visible : "", static_cast<int>(std::thread::hardware_concurrency()),
                                   compile_threads && *compile_threads);
}

bool PoisonsItsProcess(const ExperimentResult& r) {
  if (r.code == results::Code::kPass || r.code == results::Code::kFail) return false;
  static const char* const kMarks[] = {"CUDA error", "CUDA out of memory", "out of memory", "CUBLAS_STATUS", "CUDNN_STATUS",
                                       "cuDNN error", "device-side assert", "illegal memory access", "NCCL error",
                                       "failed to allocate", "can't allocate memory", "std::bad_alloc"};
  return std::any_of(std::begin(kMarks), std::end(kMarks), [&](const char* m) { return r.error.find(m) != std::string::npos; });
}

IsolatedRunner::IsolatedRunner(fs::path scratch, int timeout_s, std::vector<std::vector<std::string>> slot_env)
    : jobs_(std::move(scratch), timeout_s, std::move(slot_env)) {
  jobs_.set_retire([](const nlohmann::json& j) { return PoisonsItsProcess(ExperimentResult::FromJson(j)); });
}

void IsolatedRunner::UsePersistentRunners() { jobs_.set_persistent(true); }

}  // namespace parity::experiment
