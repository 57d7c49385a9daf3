// `parity ci`: the pre-merge accuracy gate. Runs verify's matrix (this shard of it), rerunning
// a failure that does not match the baseline up to `retries` times, or reads results already
// produced (`results`, e.g. merged shards); gates them against the baseline (ci/gate.h);
// rewrites the baseline with `update_expected`; minifies each new failure with `minify`.
// Writes OUTPUT_DIR/gate.json (the verdicts) beside results.jsonl.
#pragma once

#include <filesystem>
#include <iosfwd>
#include <string>
#include <vector>

#include "ci/gate.h"
#include "util/status.h"
#include "verifier/verify.h"

namespace parity::ci {

// The verdicts' file in the output dir (`parity report` reads it beside results.jsonl).
inline constexpr const char* kGateFile = "gate.json";

struct CiOptions {
  verifier::VerifyOptions verify;
  std::filesystem::path expected;              // --expected: a directory of expected files, or one
  std::vector<std::filesystem::path> results;  // --results: gate these instead of running
  bool update_expected = false;
  int retries = 2;
  GateOptions gate;
  bool minify = false;
};

// The command that updates the baseline from what was gated (the failure message shows it).
std::string UpdateCommand(const CiOptions& options);

struct CiOutcome {
  GateResult gate;
  std::vector<nlohmann::json> records;  // what was gated (gate rows point here)
  int exit_code = 0;                    // 0 gate passed (or baseline updated), 1 gate failed
};

[[nodiscard]] Expected<CiOutcome> RunCi(const CiOptions& options, std::ostream& out);

}  // namespace parity::ci
