// Verification codes (PyTorch/XLA's experiment_runner) and results.jsonl records.
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <set>
#include <string>

#include "util/status.h"

namespace parity::verifier {

enum class Code { kPass, kFail, kEagerFailed, kExceptionRaised, kNondeterministicEagerRun, kVerifierSkipped, kVerifierDidntRun };
const char* ToString(Code c);
[[nodiscard]] Expected<Code> ParseCode(const std::string& s);
// FAIL, EAGER_FAILED, EXCEPTION_RAISED, NONDETERMINISTIC_EAGER_RUN, VERIFIER_DIDNT_RUN fail a run.
bool IsFailure(Code c);

// One experiment of a verify matrix.
struct ExperimentSpec {
  std::string model;            // suite name or repro dir's model
  std::string suite;
  std::string repro;            // the captured repro dir
  std::string backend;
  nlohmann::json backend_options = nlohmann::json::object();
  std::string test = "eval";    // eval | train
  std::string dtype = "float32";
  std::string device = "cpu";
  int batch_size = 0;
  int repeat = 1;
  int iterations_per_run = 1;
  std::optional<double> tol;    // --tol; else the suite default
  bool cosine = false;
  bool ignore_non_fp = false;   // integer/bool outputs that differ do not fail (minify's default)
  std::string cache_dir;
  std::string work_dir;

  nlohmann::json ToJson() const;
  static Expected<ExperimentSpec> FromJson(const nlohmann::json& j);
  // Stable identity for resume: everything that defines the experiment, nothing that varies.
  std::string Fingerprint() const;
};

// Appends one JSON line with a single write(2) to an O_APPEND file, then fsync: a killed run
// leaves whole lines only.
[[nodiscard]] Status AppendJsonLine(const std::filesystem::path& file, const nlohmann::json& line);
// Fingerprints of the lines already in a results file (torn trailing lines are ignored).
std::set<std::string> DoneFingerprints(const std::filesystem::path& file);

// Default tolerance as PyTorch's benchmark suites set it (docs/verify.md).
double DefaultTolerance(const std::string& suite, const std::string& test, const std::string& dtype);

}  // namespace parity::verifier
