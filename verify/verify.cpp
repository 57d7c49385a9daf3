#include "verify/verify.h"

#include <unistd.h>

#include <chrono>
#include <ostream>
#include <optional>
#include <set>

#include "runtime/jobs.h"
#include "runtime/worker.h"
#include "runtime/worker_requests.h"
#include "matrix/matrix.h"
#include "matrix/repro_dirs.h"
#include "util/files.h"
#include "experiment/backend.h"
#include "experiment/case.h"
#include "experiment/runner.h"
#include "verify/console.h"
#include "verify/experiments.h"
#include "verify/order.h"

namespace parity::verify {
namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

// Whether a run of repro dirs talks to the Python worker: a backend that compiles there, approved
// host-op modules.
bool DirsNeedWorkers(const VerifyOptions& o) {
  if (!o.experiment.imports.empty()) return true;
  for (const auto& b : o.backends) {
    auto info = experiment::FindBackend(b);
    if (!info.ok() || info->needs_worker) return true;
  }
  return false;
}

// Whether the run's experiments talk to the Python worker: what DirsNeedWorkers says, or a suite
// model of the matrix `specs` not captured yet.
bool NeedsWorkers(const VerifyOptions& o, const std::vector<experiment::ExperimentSpec>& specs,
                  const matrix::CaptureCache& captures) {
  for (const auto& spec : specs)
    if (spec.repro.empty() && !captures.Has(spec)) return true;
  return DirsNeedWorkers(o);
}

// The run's runner (one made before replaced): each slot keeps its experiment process (libtorch
// and the device initialized once, a crashed, hung or poisoned one replaced: runtime/jobs.h).
void MakeRunner(std::optional<experiment::IsolatedRunner>& runner, const VerifyOptions& o, const fs::path& run_dir, bool cuda) {
  runner.emplace(run_dir, o.experiment.timeout_s, experiment::SlotEnvironmentsHere(o.experiment.jobs, cuda));
  runner->UsePersistentRunners();
}

// A run of repro dirs only starts its slots' processes and workers before it reads the dirs (the
// device from --device or the manifests alone): a worker's start-up (Python, torch's imports, the
// device's context: seconds) then overlaps the dirs' reads and checks (each tensors file's
// SHA-256). Returns the device it started them for; nullopt (nothing started) where suite models
// are in the matrix (a cached capture needs no worker), a manifest does not say, or a backend is
// unknown (the run ends as bad input).
std::optional<bool> StartBeforeReading(std::optional<experiment::IsolatedRunner>& runner, const VerifyOptions& o,
                                       const fs::path& run_dir) {
  for (const auto& b : o.backends)
    if (!experiment::FindBackend(b).ok()) return std::nullopt;
  const std::optional<bool> cuda = o.models.empty() ? matrix::UsesCudaBeforeReading(o) : std::nullopt;
  if (!cuda) return std::nullopt;
  MakeRunner(runner, o, run_dir, *cuda);
  runner->Prestart(DirsNeedWorkers(o), experiment::WarmDevice(o.backends, *cuda ? "cuda" : "cpu"));
  return cuda;
}

// Runs the experiments, `jobs` at once, recording each as it ends (after its retries).
Status RunAll(std::vector<Item>& items, Session& s, const fs::path& run_dir, const VerifyHooks& hooks, VerifySummary& summary,
              VerifyConsole& console) {
  Status status = Status::Ok();
  // One attempt ended; false when the experiment is done (recorded).
  auto finish = [&](size_t i, const experiment::ExperimentResult& r) {
    Item& item = items[i];
    if (item.attempts.empty()) item.wall_s = std::chrono::duration<double>(Clock::now() - item.started).count();
    item.attempts.push_back(r);
    if (hooks.retry && hooks.retry(item.spec, item.attempts)) return true;
    results::Record record = Record(item, s);
    if (auto st = results::AppendRecord(summary.results_file, record); !st.ok() && status.ok()) status = st;
    // A worker of another torch build than parity's (runtime/worker.h kTorchBuiltEnv): every
    // experiment meets it; the run ends as bad input (exit 2) once its records are written.
    if (r.exception_type == runtime::kTorchMismatch && status.ok()) status = Error::BadInput(r.error);
    summary.records.push_back(std::move(record));
    summary.Tally(item.attempts.front().code);
    console.Finished(i + 1, item.spec, item.attempts.front(), summary.records.back().metrics);
    return false;
  };
  experiment::ExperimentBatch batch;
  std::vector<size_t> index_of;
  for (size_t i = 0; i < items.size(); ++i) {
    if (items[i].early) {
      console.Started(i + 1, items[i].spec);
      while (finish(i, *items[i].early)) {
      }
      continue;
    }
    index_of.push_back(i);
  }
  // With several slots the longest first (the run ends when its longest experiment does); one
  // slot keeps the matrix's order.
  if (s.runner.jobs() > 1) index_of = LongestFirst(items, index_of, s.o.cost_files);
  for (size_t i : index_of) batch.emplace_back(items[i].spec, run_dir / ("exp" + std::to_string(i + 1)));
  s.runner.RunStream(
      std::move(batch), [&](size_t k, const experiment::ExperimentResult& r) { return finish(index_of[k], r); },
      [&](size_t k, const fs::path& dir) {
        Item& item = items[index_of[k]];
        if (item.attempts.empty()) item.started = Clock::now();
        console.Started(index_of[k] + 1, item.spec, dir);
      },
      [&] { console.Tick(); });
  return status;
}

}  // namespace

Expected<VerifySummary> Verify(const VerifyOptions& opts, std::ostream& out, const VerifyHooks& hooks) {
  return Verify(opts, {}, out, hooks);
}

Expected<VerifySummary> Verify(const VerifyOptions& opts, const std::vector<matrix::LoadedDir>& read, std::ostream& out,
                               const VerifyHooks& hooks) {
  VerifyOptions o = opts;
  o.experiment.cache_dir = fs::absolute(o.experiment.cache_dir.empty() ? experiment::DefaultCacheDir() : o.experiment.cache_dir);
  const fs::path run_dir = ProcessScratchDir("parity-verify-");
  std::optional<experiment::IsolatedRunner> runner;
  const std::optional<bool> early_cuda = StartBeforeReading(runner, o, run_dir);
  const matrix::LoadedDirs dirs = matrix::LoadReproDirs(o, read);
  for (const auto& b : dirs.bad) out << "not verified: " << b.dir << ": " << b.error.message << "\n";
  if (!dirs.bad.empty() && dirs.good.empty() && o.models.empty()) return dirs.bad.front().error;
  PARITY_RETURN_IF_ERROR(matrix::ValidateMatrixOptions(o));
  std::error_code ec;
  fs::create_directories(o.output_dir, ec);
  if (ec) return Error::BadInput("--output-dir " + o.output_dir.string() + ": " + ec.message());
  const bool cuda = matrix::UsesCuda(o, dirs);
  const bool started = early_cuda == cuda;  // else none started, or only a bad dir named that device
  if (!started) MakeRunner(runner, o, run_dir, cuda);
  auto ask = [&](const nlohmann::json& req) { return runner->Ask(req); };
  Session s{o, *runner, matrix::CaptureCache(o.experiment.cache_dir, ask), dirs, ""};
  // The matrix before the workers start, so that a run whose captures are cached and whose
  // backends parity runs itself starts none. Suite models are listed from the cache dir once
  // listed there; the first listing asks slot 0's worker, which then starts without the warm-up.
  PARITY_ASSIGN_OR_RETURN(auto all, matrix::ExpandMatrix(o, dirs, [&] {
    return matrix::ModelListing(o.experiment.cache_dir, [&] { return runner->Ask(runtime::requests::ListModels()); });
  }));
  if (!started) runner->Prestart(NeedsWorkers(o, all, s.captures), experiment::WarmDevice(o.backends, cuda ? "cuda" : "cpu"));
  PARITY_RETURN_IF_ERROR(matrix::ImportHostOps(dirs, o, ask));

  VerifySummary summary;
  summary.bad_dirs = dirs.bad;
  summary.matrix = static_cast<int>(all.size());
  summary.results_file = o.output_dir / "results.jsonl";
  const std::set<std::string> done = results::DoneFingerprints(summary.results_file);
  std::vector<Item> items;
  for (auto& spec : SelectShard(std::move(all), o, out)) {
    if (done.count(spec.Fingerprint())) {
      ++summary.resumed;
      summary.fingerprints.push_back(spec.Fingerprint());
      continue;
    }
    summary.fingerprints.push_back(spec.Fingerprint());
    items.emplace_back();
    items.back().spec = std::move(spec);
  }
  VerifyConsole console(out, o.progress, items.size());
  Prepare(items, s);
  PARITY_RETURN_IF_ERROR(RunAll(items, s, run_dir, hooks, summary, console));
  RemoveAll(run_dir);
  console.Summary(summary);
  return summary;
}

}  // namespace parity::verify
