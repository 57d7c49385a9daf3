// The gate's verdicts and what every report makes of them. A verdict row carries whether it
// fails the gate under the policy the gate ran with (--strict, --fail-on-drift), decided once
// here, so the gate's exit status, junit.xml, summary.md and the HTML report agree by
// construction. gate.json is their one file format.
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>
#include <vector>

#include "results/record.h"
#include "util/status.h"

namespace parity::results {

//   PASS      status is the expected "pass"
//   XFAIL     an expected failure, failing the same way
//   FAIL      a different failure than expected (a regression)
//   IMPROVED  an expected failure now passes (the baseline must be updated)
//   MISSING   in the baseline, not run (within what was asked for)
//   NEW       run, not in the baseline
//   FLAKY     a rerun gave the expected status, or the model is in the flaky list
//   DRIFT     passes, but an output's error vs fp64 (RMSE) or its max abs error grew past the
//             drift factor over the baseline's
//   NO_FP64   passes, but its fp64 reference could not run: cosine similarity, a weaker rule,
//             decided
enum class Verdict { kPass, kXfail, kFail, kImproved, kMissing, kNew, kFlaky, kDrift, kNoFp64 };
const char* ToString(Verdict v);
[[nodiscard]] Expected<Verdict> ParseVerdict(const std::string& s);

struct FailPolicy {
  bool strict = false;         // FLAKY and NO_FP64 fail
  bool fail_on_drift = false;  // DRIFT fails
};
// FAIL, IMPROVED, MISSING and NEW fail the gate (as check_accuracy.py's lists do); FLAKY and
// NO_FP64 with `strict`; DRIFT with `fail_on_drift`. The one place this is decided.
bool Fails(Verdict v, const FailPolicy& policy);

struct GateRow {
  std::string config, name;
  Verdict verdict = Verdict::kPass;
  bool fails = false;            // Fails(verdict, the gate's policy)
  std::string status, expected;  // expected empty for NEW; status empty for MISSING
  int runs = 1, passes = 0;      // attempts and how many of them passed
  std::string note;              // why (flaky, drift detail, the error, the weaker rule)
  std::string repro_dir;         // a failure's repro dir
  std::string fingerprint;       // the record judged ("" for MISSING)
  std::string minified_dir;      // --minify
  std::string culprit_op, culprit_source;
  std::string compiler_culprit;  // --minify: the compiler's part, in one sentence (minifier CompilerCulpritSentence)
  nlohmann::json ToJson() const;
  [[nodiscard]] static Expected<GateRow> FromJson(const nlohmann::json& j, const std::string& where);
};

// OUTPUT_DIR/gate.json: {"passed", "expected", "rows"}.
inline constexpr const char* kGateFile = "gate.json";
struct GateFile {
  bool passed = true;
  std::string expected;  // the baseline's path
  std::vector<GateRow> rows;
};
[[nodiscard]] Status WriteGateFile(const std::filesystem::path& file, const GateFile& gate);
[[nodiscard]] Expected<GateFile> ReadGateFile(const std::filesystem::path& file);

// What an experiment amounts to for every report: `kind` pass, skipped, fail or error, `label`
// the verdict (after a gate) or the code shown. After a gate its row decides (`fails`).
struct Outcome {
  std::string kind, label;
};
Outcome OutcomeOf(const Record& record, const GateRow* row);

}  // namespace parity::results
