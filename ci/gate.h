// The gate: each experiment's status against the baseline, with check_accuracy.py's verdicts
// (results/verdict.h) and what it lacks (reruns, numerics drift, a missing fp64 reference).
// Pure: records and a baseline in, verdict rows out, each deciding once whether it fails.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ci/baseline.h"
#include "results/record.h"
#include "results/verdict.h"

namespace parity::ci {

using results::GateRow;
using results::Verdict;

struct GateOptions {
  results::FailPolicy policy;  // --strict, --fail-on-drift
  double drift_factor = 10.0;
};

// Which baseline rows were asked for: MISSING is reported for a row of a configuration that
// ran, not run, when `complete` (results given to gate, or `--model all` unsharded: not chosen
// repro dirs or models, not one shard) and `wanted` accepts its name (--filter/--exclude).
struct GateScope {
  bool complete = true;
  std::function<bool(const std::string& name)> wanted;
};

struct GateResult {
  std::vector<GateRow> rows;  // by configuration, then model name; each knows whether it fails
  std::map<Verdict, int> counts;
  bool failed = false;  // exit 1: some row fails
};

// One record per (configuration, model): the last one wins (LatestPerRow). A drift is an output's error vs
// fp64 (RMSE) or max abs error grown past `drift_factor` times the baseline's, with a floor of
// kDriftFloor x the tolerance (a bit-exact baseline does not make every ulp a drift).
inline constexpr double kDriftFloor = 1e-4;
GateResult Gate(const std::vector<results::Record>& records, const Baseline& baseline, const GateOptions& options,
                const GateScope& scope);

// Whether an experiment whose attempts so far have `statuses` should run again: its last
// attempt failed (not pass or pass_due_to_skip) and does not match the baseline, the model is
// not in the flaky list, and fewer than 1 + retries ran.
bool ShouldRetry(const std::vector<std::string>& statuses, const std::optional<std::string>& expected, bool known_flaky,
                 int retries);

// What a failed gate says: the regressions, the improvements, the rest, and the command that
// updates the baseline (`update_command`).
std::string FailureMessage(const GateResult& result, const std::string& update_command);

}  // namespace parity::ci
