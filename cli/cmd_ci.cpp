// parity ci --expected PATH [verify's options | --results FILE...] [--update-expected]
#include <iostream>

#include "ci/ci.h"
#include "cli/commands.h"
#include "cli/experiment_options.h"
#include "report/reports.h"

namespace parity::cli {

namespace {

struct CiArgs {
  MatrixArgs verify;
  std::string expected;
  std::vector<std::string> results;
  bool update = false, strict = false, fail_on_drift = false, minify = false;
  int retries = 2;
  double drift_factor = 10.0;
};

int RunCiCommand(const CiArgs& a) {
  ci::CiOptions o;
  o.verify = ToVerifyOptions(a.verify);
  o.expected = a.expected;
  for (const auto& r : a.results) o.results.emplace_back(r);
  o.update_expected = a.update;
  if (a.retries < 0) throw Failure{Error::BadInput("--retries " + std::to_string(a.retries) + ": expected 0 or more")};
  o.retries = a.retries;
  if (!(a.drift_factor > 1.0)) throw Failure{Error::BadInput("--drift-factor: expected a number above 1")};
  o.gate.policy.strict = a.strict;
  o.gate.policy.fail_on_drift = a.fail_on_drift;
  o.gate.drift_factor = a.drift_factor;
  o.minify = a.minify;
  const ci::CiOutcome outcome = Unwrap(ci::RunCi(o, std::cout));
  Unwrap(report::WriteReports(o.verify.output_dir, report::Entries(outcome.records, outcome.gate.rows),
                              std::string("parity ci: ") + (outcome.gate.failed ? "FAILED" : "passed")));
  return outcome.exit_code;
}

}  // namespace

void set_ci_command(CLI::App& app, int& exit_code) {
  auto a = std::make_shared<CiArgs>();
  CLI::App* cmd = app.add_subcommand(
      "ci", "Pre-merge accuracy gate: verify (or read results) and compare with an expected baseline (docs/ci.md)");
  cmd->add_option("--expected", a->expected,
                  "the baseline: a directory of PyTorch-style expected CSVs (one per configuration), or one CSV")
      ->required();
  cmd->add_option("--results", a->results, "gate these results.jsonl files (e.g. merged shards) instead of running");
  cmd->add_flag("--update-expected", a->update, "rewrite the baseline from the results (stable order, minimal diff)");
  cmd->add_option("--retries", a->retries, "reruns of a failure that does not match the baseline (default 2)");
  cmd->add_flag("--strict", a->strict, "FLAKY and NO_FP64 fail the gate");
  cmd->add_option("--drift-factor", a->drift_factor, "DRIFT when an output's error grew more than this (default 10)");
  cmd->add_flag("--fail-on-drift", a->fail_on_drift, "DRIFT fails the gate");
  cmd->add_flag("--minify", a->minify, "minify each FAIL and name the culprit op and its source line");
  AddMatrixOptions(cmd, a->verify);
  cmd->callback([a, &exit_code] { exit_code = RunCiCommand(*a); });
}

}  // namespace parity::cli
