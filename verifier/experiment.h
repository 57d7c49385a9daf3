// One verification experiment, as PyTorch's accuracy checks run it: eager twice with a fixed
// seed (a mismatch is NONDETERMINISTIC_EAGER_RUN), an fp64 reference (cosine when it cannot
// run), the backend, then same() with the suite's tolerance. Runs in an isolated child process
// (`parity _experiment`) that the verify driver watches.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "verifier/results.h"

namespace parity::verifier {

struct ExperimentResult {
  Code code = Code::kVerifierDidntRun;
  std::string error;          // why, when not PASS
  std::string phase;          // the phase that decided (or was running)
  double tol = 0.0;
  bool cosine = false;
  double compile_time_s = 0.0;
  std::vector<double> total_time, per_iter_time;
  nlohmann::json outputs = nlohmann::json::array();  // per-output verdicts and stats
  std::string exception_type;  // EXCEPTION_RAISED: the exception's type, when known
  int signal = 0;              // VERIFIER_DIDNT_RUN: the signal that ended the process
  bool timed_out = false;      // VERIFIER_DIDNT_RUN: killed at the deadline
  nlohmann::json ToJson() const;
  static ExperimentResult FromJson(const nlohmann::json& j);
};

// Runs the flow in this process; writes each phase's name to `status_file` as it starts.
ExperimentResult RunExperiment(const ExperimentSpec& spec, const std::filesystem::path& status_file);

}  // namespace parity::verifier
