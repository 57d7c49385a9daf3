// parity minify DIR [--backend B] [--backend-option K=V] [--jobs N] [--check CMD] ...
#include <iostream>

#include "cli/commands.h"
#include "cli/experiment_options.h"
#include "minifier/delta.h"
#include "minifier/minify.h"

namespace parity::cli {

namespace {

struct MinifyArgs {
  std::string dir, out, backend, check;
  ExperimentArgs experiment{minifier::MinifyOptions::MinifyDefaults()};
  int confirm = 3, scan_max = 1024;
  bool strict = false, majority = false, no_stage_bisect = false, no_scan = false, no_compiler_bisect = false,
       fresh_runners = false, print_passes = false;
};

int RunMinify(const MinifyArgs& a) {
  if (a.print_passes) {
    for (const auto& p : minifier::DeltaPasses()) std::cout << p.name << ": " << p.description << "\n";
    return 0;
  }
  if (a.dir.empty()) throw Failure{Error::BadInput("minify: a repro dir is required")};
  minifier::MinifyOptions o;
  o.repro_dir = a.dir;
  o.out_dir = a.out;
  if (!a.backend.empty()) o.backend = a.backend;
  o.experiment = ToExperimentOptions(a.experiment);
  if (a.strict) o.experiment.ignore_non_fp = false;
  o.confirm_runs = a.confirm;
  if (a.scan_max < 1) throw Failure{Error::BadInput("--scan-max " + std::to_string(a.scan_max) + ": expected at least 1")};
  o.scan_max = a.scan_max;
  o.majority = a.majority;
  o.stage_bisect = !a.no_stage_bisect;
  o.scan = !a.no_scan;
  o.compiler_bisect = !a.no_compiler_bisect;
  o.fresh_runners = a.fresh_runners;
  o.check_command = a.check;
  std::cout << std::unitbuf;               // progress lines appear as they happen (and survive a crash)
  Unwrap(minifier::Minify(o, std::cout));  // a failure to reproduce is an error (exit 1)
  return 0;
}

}  // namespace

void set_minify_command(CLI::App& app, int& exit_code) {
  auto a = std::make_shared<MinifyArgs>();
  CLI::App* cmd = app.add_subcommand("minify", "Shrink a failing repro dir to the smallest graph that fails the same way");
  cmd->add_option("dir", a->dir, "the failing repro dir (e.g. parity-results/repros/...)");
  cmd->add_option("--out", a->out, "output dir (default DIR-minify): minified/, repro.py, summary.json");
  cmd->add_option("--backend", a->backend, "backend (default: the manifest's)");
  AddExperimentOptions(cmd, a->experiment, kBackendOptions | kDevice | kTol | kRule | kTimeout | kJobs | kCacheDir | kImports | kKeepWorkers | kWhileLimit);
  cmd->add_flag("--strict", a->strict, "accuracy: integer/bool outputs that differ count too");
  cmd->add_option("--confirm", a->confirm, "runs of the original before reducing (default 3)");
  cmd->add_flag("--majority", a->majority, "reduce a flaky original by majority vote");
  cmd->add_flag("--no-stage-bisect", a->no_stage_bisect, "skip eager -> aot_eager -> decompositions -> backend bisection");
  cmd->add_option("--scan-max", a->scan_max, "values the divergence scan exposes at most (default 1024; a sample beyond)");
  cmd->add_flag("--no-scan", a->no_scan,
                "find the culprit by node bisection only (no divergence scan of the intermediate values first)");
  cmd->add_flag("--fresh-runners", a->fresh_runners,
                "run each candidate in a fresh child process (default: one job server per slot, kept across candidates "
                "and replaced when one crashes, hangs or is poisoned)");
  cmd->add_flag("--no-compiler-bisect", a->no_compiler_bisect,
                "skip naming the compiler's part at the end (PyTorch's compiler bisector on the minified graph)");
  cmd->add_option("--check", a->check, "interestingness command: run with the candidate dir appended; exit 0 = still fails");
  cmd->add_flag("--print-passes", a->print_passes, "list the delta passes and exit");
  cmd->callback([a, &exit_code] { exit_code = RunMinify(*a); });
}

}  // namespace parity::cli
