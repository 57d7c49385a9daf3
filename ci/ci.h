// `parity ci`: the pre-merge accuracy gate. Runs verify's matrix (this shard of it), rerunning
// a failure that does not match the baseline up to `retries` times, or reads results already
// produced (`results`, e.g. merged shards); gates them against the baseline (ci/gate.h);
// rewrites the baseline with `update_expected`; minifies each new failure with `minify`.
// Writes OUTPUT_DIR/gate.json (the verdicts, results/verdict.h) beside results.jsonl; the
// command writes the reports. Runs experiments through verify::Verify and minifier::Minify only.
#pragma once

#include <filesystem>
#include <iosfwd>
#include <string>
#include <vector>

#include "ci/gate.h"
#include "util/status.h"
#include "verify/verify.h"

namespace parity::ci {

struct CiOptions {
  verify::VerifyOptions verify;
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
  std::vector<results::Record> records;  // what was gated
  int exit_code = 0;                    // 0 gate passed (or baseline updated), 1 gate failed
};

[[nodiscard]] Expected<CiOutcome> RunCi(const CiOptions& options, std::ostream& out);

}  // namespace parity::ci
