// The command-line options of every subcommand that runs experiments (verify, ci, minify,
// profile, repro run), declared once: AddExperimentOptions declares the ones a command takes
// (`which`), with the defaults its ExperimentOptions holds (experiment/options.h, the one place
// for them), and ToExperimentOptions checks and converts after parsing. The options verify and
// ci share beyond those (the matrix, sharding, output) are declared once too: AddMatrixOptions.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "experiment/options.h"
#include "verify/verify.h"

namespace parity::cli {

enum ExperimentFlag : unsigned {
  kBackendOptions = 1u << 0,  // --backend-option KEY=VALUE
  kDevice = 1u << 1,          // --device
  kTol = 1u << 2,             // --tol
  kCosine = 1u << 3,          // --cosine
  kBatchSize = 1u << 4,       // --batch-size
  kRepeat = 1u << 5,          // --repeat, --iterations-per-run
  kTimeout = 1u << 6,         // --timeout
  kJobs = 1u << 7,            // --jobs, -j
  kCacheDir = 1u << 8,        // --cache-dir
  kImports = 1u << 9,         // --import
  kShapes = 1u << 10,         // --shapes
  kRule = 1u << 11,           // --rule
  kKeepWorkers = 1u << 12,    // --keep-workers
  kWhileLimit = 1u << 13,     // --while-limit
  kAllExperimentFlags = (1u << 14) - 1,
};

// What the parser fills; the defaults are `options`' (a command may set its own first, as
// minify does: MinifyOptions::MinifyDefaults).
struct ExperimentArgs {
  explicit ExperimentArgs(experiment::ExperimentOptions defaults = {}) : options(std::move(defaults)) {}
  experiment::ExperimentOptions options;
  std::vector<std::string> backend_options, imports;
  std::string device, cache_dir, rule;
  double tol = 0;  // --tol's value; options.tol is set when it is given
  int keep_workers = -1;  // --keep-workers; unset: $PARITY_KEEP_WORKERS (runtime/worker_pool.h)
};

void AddExperimentOptions(CLI::App* cmd, ExperimentArgs& a, unsigned which = kAllExperimentFlags);
// Throws Failure on bad input (exit 2): a malformed KEY=VALUE, a tolerance or count out of range,
// an import no allow-list approves.
experiment::ExperimentOptions ToExperimentOptions(const ExperimentArgs& a);

// verify's and ci's: what to run (repro dirs, --model, --backend, --test, --dtype, --filter,
// --exclude), where the records go (--output-dir), sharding (--shard, --shards, --shard-costs),
// and every experiment option.
struct MatrixArgs {
  std::vector<std::string> dirs, models, backends{"inductor"}, tests, dtypes, shard_costs;
  std::string filter, exclude, output_dir = "parity-results", shard;
  int shards = 0;
  ExperimentArgs experiment;
};
void AddMatrixOptions(CLI::App* cmd, MatrixArgs& a);
// Throws Failure on bad input (exit 2); the shard comes from --shard or the environment.
verify::VerifyOptions ToVerifyOptions(const MatrixArgs& a);

}  // namespace parity::cli
