#include "verify/record.h"

#include <algorithm>

#include "results/statuses.h"
#include "experiment/backend.h"

namespace parity::verify {

results::Attempt AttemptOf(const experiment::ExperimentResult& r) {
  return {.code = r.code,
          .phase = r.code == results::Code::kPass ? "" : r.phase,
          .timed_out = r.timed_out,
          .exception_type = r.exception_type,
          .error = r.error.substr(0, 300)};
}

std::string ConfigOfSpec(const experiment::ExperimentSpec& spec) {
  const std::string prefix = "torch_compile:";
  std::string b = spec.backend;
  if (b.rfind(prefix, 0) == 0) {
    const std::string name = b.substr(prefix.size());
    b = experiment::FindBackend(name).ok() ? "torch_compile_" + name : name;
  }
  return results::ConfigName(b, spec.suite, spec.dtype, spec.test, spec.device);
}

results::Record RecordOf(const experiment::ExperimentSpec& spec, const experiment::ExperimentResult& r, const RecordContext& c) {
  results::Record rec;
  rec.suite = spec.suite;
  rec.model = spec.model;
  if (spec.rank >= 0) rec.distributed = results::RankOf{spec.rank, spec.world_size, "per-rank"};
  rec.experiment = {spec.device.rfind("cuda", 0) == 0 ? "cuda" : "cpu", c.accelerator_model, spec.backend, spec.backend_options,
                    spec.test, spec.dtype, c.batch_size, ConfigOfSpec(spec)};
  rec.repeat = spec.repeat;
  rec.iterations_per_run = spec.iterations_per_run;
  rec.metrics = {r.total_time, r.per_iter_time, r.compile_time_s, 0.0, r.calibration_time_s, r.phase_seconds, r.peak_memory_bytes};
  AddDriverTime(rec, c);
  rec.timestamp = results::Now();
  rec.fingerprint = spec.Fingerprint();
  // What the result says: its code and verdicts, why it is not a pass, how it ended.
  const results::Attempt first = AttemptOf(r);
  rec.code = first.code;
  rec.phase = first.phase;
  rec.timed_out = first.timed_out;
  rec.exception_type = first.exception_type;
  rec.error = r.error;
  rec.tolerance = r.tol;
  rec.cosine = r.cosine;
  rec.outputs = r.outputs;
  rec.notes = r.notes;
  rec.rule = spec.rule;
  rec.justification = r.justification;
  if (r.code == results::Code::kPass || r.code == results::Code::kFail) rec.fp64_reference = r.has_fp64_reference();
  rec.reference_error = r.reference_error;
  // What the run knows beside: where the case came from, the failure's repro dir, the graphs.
  rec.repro_input = c.repro_input;
  rec.repro_dir = c.repro_dir;
  if (c.graphs > 0) rec.graph_breaks = c.graphs - 1;
  rec.shapes = r.shapes;
  if (c.attempts.size() > 1)
    for (const auto& a : c.attempts) rec.attempts.push_back(AttemptOf(a));
  return rec;
}

void AddDriverTime(results::Record& rec, const RecordContext& c) {
  auto& phases = rec.metrics.phase_seconds;
  double own = 0;
  for (const auto& [name, s] : phases) own += s;
  auto add = [&phases](const char* name, double s) {
    if (s > 0) phases[name] += s;
  };
  add("capture", c.capture_s);
  add("process", c.job_wall_s - own);  // what the job's own clock did not see: its process's start and end
  add("reports", c.reports_s);
  rec.metrics.wall_time_s = c.capture_s + std::max(c.job_wall_s, own) + c.reports_s;
}

}  // namespace parity::verify
