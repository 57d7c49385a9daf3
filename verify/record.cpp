#include "verify/record.h"

#include <ctime>

#include "results/statuses.h"
#include "verifier/backend.h"

namespace parity::verify {

results::Attempt AttemptOf(const verifier::ExperimentResult& r) {
  results::Attempt a;
  a.code = r.code;
  a.phase = r.code == results::Code::kPass ? "" : r.phase;
  a.timed_out = r.timed_out;
  a.exception_type = r.exception_type;
  a.error = r.error.substr(0, 300);
  return a;
}

std::string ConfigOfSpec(const verifier::ExperimentSpec& spec) {
  const std::string prefix = "torch_compile:";
  std::string b = spec.backend;
  if (b.rfind(prefix, 0) == 0) {
    const std::string name = b.substr(prefix.size());
    b = verifier::FindBackend(name).ok() ? "torch_compile_" + name : name;
  }
  return results::ConfigName(b, spec.suite, spec.dtype, spec.test, spec.device);
}

results::Record RecordOf(const verifier::ExperimentSpec& spec, const verifier::ExperimentResult& r, const RecordContext& c) {
  results::Record rec;
  rec.suite = spec.suite;
  rec.model = spec.model;
  rec.accelerator = spec.device.rfind("cuda", 0) == 0 ? "cuda" : "cpu";
  rec.accelerator_model = c.accelerator_model;
  rec.backend = spec.backend;
  rec.backend_options = spec.backend_options;
  rec.test = spec.test;
  rec.batch_size = c.batch_size;
  rec.dtype = spec.dtype;
  rec.config = ConfigOfSpec(spec);
  rec.repeat = spec.repeat;
  rec.iterations_per_run = spec.iterations_per_run;
  rec.total_time = r.total_time;
  rec.per_iter_time = r.per_iter_time;
  rec.compile_time_s = r.compile_time_s;
  rec.wall_time_s = c.wall_time_s;
  rec.timestamp = static_cast<double>(std::time(nullptr));
  rec.code = r.code;
  rec.tolerance = r.tol;
  rec.cosine = r.cosine;
  rec.outputs = r.outputs;
  rec.fingerprint = spec.Fingerprint();
  rec.error = r.error;
  rec.exception_type = r.exception_type;
  rec.notes = r.notes;
  rec.phase = r.code == results::Code::kPass ? "" : r.phase;
  if (r.code == results::Code::kPass || r.code == results::Code::kFail) rec.fp64_reference = r.has_fp64_reference();
  rec.reference_error = r.reference_error;
  rec.repro_input = c.repro_input;
  rec.repro_dir = c.repro_dir;
  rec.timed_out = r.timed_out;
  if (c.graphs > 0) rec.graph_breaks = c.graphs - 1;
  if (c.attempts.size() > 1)
    for (const auto& a : c.attempts) rec.attempts.push_back(AttemptOf(a));
  return rec;
}

}  // namespace parity::verify
