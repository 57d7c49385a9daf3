// `parity verify`: the experiment matrix (models or repro dirs x backends x tests x dtypes),
// this shard's part of it (verifier/shard.h), each experiment in an isolated child process
// with a timeout, `jobs` at once, results appended atomically to results.jsonl as they end,
// resumable by experiment fingerprint, a repro dir written for every FAIL and EXCEPTION_RAISED,
// then the reports of the whole results file (report/reports.h).
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <functional>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "util/status.h"
#include "verifier/experiment.h"
#include "verifier/shard.h"

namespace parity::verifier {

struct VerifyOptions {
  std::vector<std::string> models;      // suite names ("all" = every model)
  std::vector<std::string> repro_dirs;  // captured repro dirs
  std::vector<std::string> backends{"inductor"};
  nlohmann::json backend_options = nlohmann::json::object();
  // Empty: the default, eval and float32 for suite models, the capture's own for a repro dir (a
  // repro dir refuses a test or dtype it was not captured in).
  std::vector<std::string> tests;
  std::vector<std::string> dtypes;
  std::string device;  // --device; empty: a repro dir's own (its manifest's), cpu for suite models
  int batch_size = 0;  // 0: the model's default
  int repeat = 1;
  int iterations_per_run = 1;
  std::string filter, exclude;  // regexes over model names
  std::optional<double> tol;
  bool cosine = false;
  int timeout_s = 1800;
  std::filesystem::path output_dir = "parity-results";
  std::filesystem::path cache_dir;                // default DefaultCacheDir()
  bool progress = false;                          // live status line (a TTY)
  std::vector<std::string> imports;               // approved host-op modules (--import + config; verifier/host_ops.h)
  Shard shard;                                    // this process's part of the matrix
  std::vector<std::filesystem::path> cost_files;  // earlier results: wall times that balance the shards
  int jobs = 1;                                   // experiments at once (one GPU each on CUDA)
  bool reports = true;                            // accuracy.csv, junit.xml, summary.md beside results.jsonl (report/reports.h)
};

// What a caller adds to the flow (`parity ci`: retries of failures).
struct VerifyHooks {
  // After each run of an experiment (`attempts`, oldest first); true runs it again. The record
  // keeps the first attempt and, when there were more, every attempt's code ("attempts").
  std::function<bool(const ExperimentSpec& spec, const std::vector<ExperimentResult>& attempts)> retry;
};

struct VerifySummary {
  int total = 0, passed = 0, failed = 0, skipped = 0, resumed = 0;
  int matrix = 0;                         // experiments in the whole matrix (before sharding)
  std::vector<nlohmann::json> lines;      // the records written by this run
  std::vector<std::string> fingerprints;  // this shard's experiments (run now or resumed)
  std::filesystem::path results_file;
};

[[nodiscard]] Expected<VerifySummary> Verify(const VerifyOptions& options, std::ostream& out, const VerifyHooks& hooks = {});

}  // namespace parity::verifier
