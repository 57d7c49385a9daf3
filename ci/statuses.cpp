#include "ci/statuses.h"

#include <algorithm>

#include "util/files.h"
#include "verifier/backend.h"
#include "verifier/experiment.h"

namespace parity::ci {

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

std::string Status(const std::string& code, const std::string& phase, bool timed_out, bool oom) {
  if (code == "PASS") return "pass";
  if (code == "FAIL") return "fail_accuracy";
  if (code == "NONDETERMINISTIC_EAGER_RUN") return "eager_two_runs_differ";
  if (code == "VERIFIER_SKIPPED") return "pass_due_to_skip";
  if (code == "EAGER_FAILED") {
    if (phase == "capture" || phase == "load") return "model_fail_to_load";
    if (phase == "eager") return oom ? "eager_1st_run_OOM" : "eager_1st_run_fail";
    if (phase == "eager_2nd_run") return oom ? "eager_2nd_run_OOM" : "eager_2nd_run_fail";
    return "eager_fail_to_run";
  }
  if (code == "EXCEPTION_RAISED") return oom ? "OOM" : "fail_to_run";
  if (timed_out) return "timeout";
  return phase.rfind("eager", 0) == 0 ? "eager_fail_to_run" : "fail_to_run";  // VERIFIER_DIDNT_RUN
}

std::string Str(const nlohmann::json& j, const char* key) {
  return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : std::string();
}

}  // namespace

std::string StatusOf(const nlohmann::json& r) {
  return Status(Str(r, "verification_code"), Str(r, "phase"), r.value("timed_out", false),
                OutOfMemory(Str(r, "exception_type"), Str(r, "error")));
}

std::string StatusOfResult(const verifier::ExperimentResult& r) {
  return Status(verifier::ToString(r.code), r.phase, r.timed_out, OutOfMemory(r.exception_type, r.error));
}

std::string ConfigName(const std::string& backend, const std::string& suite, const std::string& dtype, const std::string& test,
                       const std::string& device) {
  const std::string type = device.substr(0, device.find(':'));
  // A dynamo backend is named as PyTorch names it, unless parity has a backend of that name:
  // torch_compile:aot_eager and parity's aot_eager must not share an expected file.
  std::string b = backend;
  if (backend.rfind("torch_compile:", 0) == 0)
    b = verifier::FindBackend(backend.substr(14)).ok() ? "torch_compile_" + backend.substr(14) : backend.substr(14);
  std::string name = (type == "cuda" ? "" : type + "_") + b + "_" + suite;
  if (dtype != "float32") name += "_" + dtype;
  name += test == "train" ? "_training" : "_inference";
  return FileNameSlug(name);
}

std::string ConfigOf(const nlohmann::json& r) {
  const auto& m = r.value("model", nlohmann::json::object());
  const auto& e = r.value("experiment", nlohmann::json::object());
  auto s = [](const nlohmann::json& j, const char* k) { return Str(j, k); };
  return ConfigName(s(e, "backend"), s(m, "suite_name"), s(e, "dtype"), s(e, "test"), s(e, "accelerator"));
}

std::string ConfigOfSpec(const verifier::ExperimentSpec& spec) {
  return ConfigName(spec.backend, spec.suite, spec.dtype, spec.test, spec.device);
}

}  // namespace parity::ci
