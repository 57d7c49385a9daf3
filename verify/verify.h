// `parity verify`: the experiment matrix (models or repro dirs x backends x tests x dtypes),
// this shard's part of it (verify/shard.h), each experiment in an isolated child process with
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
#include "verifier/experiment.h"
#include "verifier/options.h"
#include "verify/shard.h"

namespace parity::verify {

using results::Code;
using verifier::ExperimentResult;
using verifier::ExperimentSpec;

struct VerifyOptions {
  std::vector<std::string> models;      // suite names ("all" = every model)
  std::vector<std::string> repro_dirs;  // captured repro dirs
  std::vector<std::string> backends{"inductor"};
  // Empty: the default, eval and float32 for suite models, the capture's own for a repro dir (a
  // repro dir refuses a test or dtype it was not captured in).
  std::vector<std::string> tests;
  std::vector<std::string> dtypes;
  verifier::ExperimentOptions experiment;  // how each experiment runs (device, tolerance, timeout, jobs, ...)
  std::string filter, exclude;             // regexes over model names
  std::filesystem::path output_dir = "parity-results";
  bool progress = false;                          // live status line (a TTY)
  Shard shard;                                    // this process's part of the matrix
  std::vector<std::filesystem::path> cost_files;  // earlier results: wall times that balance the shards
};

// What a caller adds to the flow (`parity ci`: retries of failures).
struct VerifyHooks {
  // After each run of an experiment (`attempts`, oldest first); true runs it again. The record
  // keeps the first attempt and, when there were more, every attempt's code ("attempts").
  std::function<bool(const ExperimentSpec& spec, const std::vector<ExperimentResult>& attempts)> retry;
};

// A repro dir given on the command line that could not be verified (bad input: the message names
// its file and field).
struct BadDir {
  std::string dir;
  Error error;
};

struct VerifySummary {
  int total = 0, passed = 0, failed = 0, skipped = 0, resumed = 0;
  int matrix = 0;                         // experiments in the whole matrix (before sharding)
  std::vector<results::Record> records;   // the records written by this run
  std::vector<std::string> fingerprints;  // this shard's experiments (run now or resumed)
  std::vector<BadDir> bad_dirs;           // set aside, not verified (the command then exits 2)
  std::filesystem::path results_file;
};

[[nodiscard]] Expected<VerifySummary> Verify(const VerifyOptions& options, std::ostream& out, const VerifyHooks& hooks = {});

}  // namespace parity::verify
