// `parity verify`: the experiment matrix (models or repro dirs x backends x tests x dtypes),
// this shard's part of it (matrix/shard.h), each experiment in an isolated child process with
// a timeout, `jobs` at once, records appended atomically to results.jsonl as they end
// (verify/record.h), resumable by experiment fingerprint, a repro dir written for every FAIL
// and EXCEPTION_RAISED. The command (cli/) writes the reports of the whole results file.
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <functional>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "results/record.h"
#include "util/status.h"
#include "experiment/experiment.h"
#include "experiment/options.h"
#include "matrix/options.h"
#include "matrix/repro_dirs.h"
#include "matrix/shard.h"

namespace parity::verify {

using results::Code;
using experiment::ExperimentResult;
using experiment::ExperimentSpec;

// The matrix (matrix/options.h) and what this command adds to it.
struct VerifyOptions : matrix::MatrixOptions {
  std::filesystem::path output_dir = "parity-results";
  bool progress = false;                          // live status line (a TTY)
  matrix::Shard shard;                            // this process's part of the matrix
  std::vector<std::filesystem::path> cost_files;  // earlier results: wall times that balance the shards
};

// What a caller adds to the flow (`parity ci`: retries of failures).
struct VerifyHooks {
  // After each run of an experiment (`attempts`, oldest first); true runs it again. The record
  // keeps the first attempt and, when there were more, every attempt's code ("attempts").
  std::function<bool(const ExperimentSpec& spec, const std::vector<ExperimentResult>& attempts)> retry;
};

using matrix::BadDir;

struct VerifySummary {
  int total = 0, passed = 0, failed = 0, skipped = 0, resumed = 0;
  int matrix = 0;                         // experiments in the whole matrix (before sharding)
  std::vector<results::Record> records;   // the records written by this run
  std::vector<std::string> fingerprints;  // this shard's experiments (run now or resumed)
  std::vector<BadDir> bad_dirs;           // set aside, not verified (the command then exits 2)
  std::filesystem::path results_file;
  // Counts one experiment's record by its code (PASS, VERIFIER_SKIPPED, or a failure).
  void Tally(Code code) {
    ++total;
    if (code == results::Code::kPass)
      ++passed;
    else if (code == results::Code::kVerifierSkipped)
      ++skipped;
    else
      ++failed;
  }
};

[[nodiscard]] Expected<VerifySummary> Verify(const VerifyOptions& options, std::ostream& out, const VerifyHooks& hooks = {});
// The same, where the dirs of `read` (named in options.repro_dirs as given) were read already.
[[nodiscard]] Expected<VerifySummary> Verify(const VerifyOptions& options, const std::vector<matrix::LoadedDir>& read,
                                             std::ostream& out, const VerifyHooks& hooks = {});

}  // namespace parity::verify
