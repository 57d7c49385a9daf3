// The gate: each experiment's status against the baseline, with check_accuracy.py's verdicts
// and what it lacks (reruns, numerics drift). Pure: records and a baseline in, verdicts out.
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "ci/baseline.h"

namespace parity::ci {

//   PASS      status is the expected "pass"
//   XFAIL     an expected failure, failing the same way
//   FAIL      a different failure than expected (a regression)
//   IMPROVED  an expected failure now passes (the baseline must be updated)
//   MISSING   in the baseline, not run (within what was asked for)
//   NEW       run, not in the baseline
//   FLAKY     a rerun gave the expected status, or the model is in the flaky list
//   DRIFT     passes, but an output's error vs fp64 (RMSE) or its max abs error grew more
//             than drift_factor x over the baseline's (floor: 1e-4 x the tolerance)
//   NO_FP64   passes, but its fp64 reference could not run: cosine similarity, a weaker rule,
//             decided
enum class Verdict { kPass, kXfail, kFail, kImproved, kMissing, kNew, kFlaky, kDrift, kNoFp64 };
const char* ToString(Verdict v);

struct GateOptions {
  bool strict = false;  // FLAKY and NO_FP64 fail the gate
  double drift_factor = 10.0;
  bool fail_on_drift = false;  // DRIFT fails the gate
};

// Which baseline rows were asked for: MISSING is reported for a row of a configuration that
// ran, not run, when `complete` (results given to gate, or `--model all` unsharded: not chosen
// repro dirs or models, not one shard) and `wanted` accepts its name (--filter/--exclude).
struct GateScope {
  bool complete = true;
  std::function<bool(const std::string& name)> wanted;
};

struct GateRow {
  std::string config, name;
  Verdict verdict = Verdict::kPass;
  std::string status, expected;  // expected empty for NEW; status empty for MISSING
  int runs = 1, passes = 0;      // attempts and how many of them passed
  std::string note;              // why (flaky, drift detail, the error)
  std::string repro_dir;         // a failure's repro dir
  const nlohmann::json* record = nullptr;
};

struct GateResult {
  std::vector<GateRow> rows;  // by configuration, then model name
  std::map<Verdict, int> counts;
  bool failed = false;  // exit 1
};

// FAIL, IMPROVED, MISSING and NEW fail the gate (as check_accuracy.py's lists do); FLAKY and
// NO_FP64 with `strict`; DRIFT with `fail_on_drift`.
bool FailsGate(Verdict v, const GateOptions& options);

// `records` must outlive the result (rows point at them). One record per (configuration,
// model): the last one wins.
GateResult Gate(const std::vector<nlohmann::json>& records, const Baseline& baseline, const GateOptions& options,
                const GateScope& scope);

// Whether an experiment whose attempts so far have `statuses` should run again: its last
// attempt failed (not pass or pass_due_to_skip) and does not match the baseline, the model is
// not in the flaky list, and fewer than 1 + retries ran.
bool ShouldRetry(const std::vector<std::string>& statuses, const std::optional<std::string>& expected, bool known_flaky,
                 int retries);

// What a failed gate says: the regressions, the improvements, the rest, and the command that
// updates the baseline (`update_command`).
std::string FailureMessage(const GateResult& result, const GateOptions& options, const std::string& update_command);

}  // namespace parity::ci
