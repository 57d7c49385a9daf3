#include "verifier/runner.h"

#include "verifier/backend.h"

namespace parity::verifier {
namespace fs = std::filesystem;

namespace {

// The backend's trait, or host ops (approved modules) that run in the worker.
bool NeedsWorker(const ExperimentSpec& spec) {
  auto info = FindBackend(spec.backend);
  return !info.ok() || info->needs_worker || !spec.imports.empty();
}

std::vector<runtime::Job> JobsOf(const ExperimentBatch& batch) {
  std::vector<runtime::Job> jobs;
  for (const auto& [spec, dir] : batch) jobs.push_back({spec.ToJson(), dir, NeedsWorker(spec)});
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

int ExperimentChildMain(const fs::path& dir) {
  return runtime::JobChildMain(dir, [&](const nlohmann::json& j, const runtime::PhaseFn& on_phase) -> Expected<nlohmann::json> {
    PARITY_ASSIGN_OR_RETURN(ExperimentSpec spec, ExperimentSpec::FromJson(j));
    spec.work_dir = fs::absolute(dir).string();  // a rerun runs in its own dir
    return RunExperiment(spec, on_phase).ToJson();
  });
}

}  // namespace parity::verifier
