#include "results/statuses.h"

#include <algorithm>

#include "util/files.h"

namespace parity::results {

const std::vector<std::string>& KnownStatuses() {
  static const std::vector<std::string> k = {"pass",
                                             "pass_due_to_skip",
                                             "fail_accuracy",
                                             "fail_to_run",
                                             "eager_fail_to_run",
                                             "eager_1st_run_fail",
                                             "eager_1st_run_OOM",
                                             "eager_2nd_run_fail",
                                             "eager_2nd_run_OOM",
                                             "eager_two_runs_differ",
                                             "model_fail_to_load",
                                             "timeout",
                                             "infra_error",
                                             "OOM"};
  return k;
}

bool IsKnownStatus(const std::string& s) {
  const auto& k = KnownStatuses();
  return std::find(k.begin(), k.end(), s) != k.end();
}

namespace {

bool OutOfMemory(const std::string& exception_type, const std::string& error) {
  return exception_type.find("OutOfMemoryError") != std::string::npos || error.find("out of memory") != std::string::npos ||
         error.find("not enough memory") != std::string::npos;
}

}  // namespace

std::string StatusOf(const Attempt& a) {
  const bool oom = OutOfMemory(a.exception_type, a.error);
  switch (a.code) {
    case Code::kPass: return "pass";
    case Code::kFail: return "fail_accuracy";
    case Code::kNondeterministicEagerRun: return "eager_two_runs_differ";
    case Code::kVerifierSkipped: return "pass_due_to_skip";
    case Code::kEagerFailed:
      if (a.phase == "capture" || a.phase == "load") return "model_fail_to_load";
      if (a.phase == "eager") return oom ? "eager_1st_run_OOM" : "eager_1st_run_fail";
      if (a.phase == "eager_2nd_run") return oom ? "eager_2nd_run_OOM" : "eager_2nd_run_fail";
      return "eager_fail_to_run";
    case Code::kExceptionRaised: return oom ? "OOM" : "fail_to_run";
    case Code::kVerifierDidntRun:
      if (a.timed_out) return "timeout";
      return a.phase.rfind("eager", 0) == 0 ? "eager_fail_to_run" : "fail_to_run";
  }
  return "fail_to_run";
}

std::string StatusOf(const Record& r) { return StatusOf(r.FirstAttempt()); }

std::string CiDefaultDtype(const std::string& device_type, const std::string& test) {
  if (device_type == "cuda") return test == "train" ? "amp" : "bfloat16";
  return "float32";
}

std::string ConfigName(const std::string& backend, const std::string& suite, const std::string& dtype, const std::string& test,
                       const std::string& device) {
  const std::string type = device.substr(0, device.find(':'));
  std::string name = (type == "cuda" ? "" : type + "_") + backend;
  if (dtype != CiDefaultDtype(type, test)) name += "_" + dtype;
  name += "_" + suite + (test == "train" ? "_training" : "_inference");
  return FileNameSlug(name);
}

std::string ConfigOf(const Record& r) {
  if (!r.experiment.config.empty()) return r.experiment.config;
  const std::string prefix = "torch_compile:";
  const std::string backend = r.experiment.backend.rfind(prefix, 0) == 0 ? r.experiment.backend.substr(prefix.size()) : r.experiment.backend;
  return ConfigName(backend, r.suite, r.experiment.dtype, r.experiment.test, r.experiment.accelerator);
}

}  // namespace parity::results
