// parity profile [DIR] --model M --backend B [--device cpu|cuda] [--trace out.json] [--kernel NAME] ...
#include <iostream>

#include "cli/commands.h"
#include "cli/experiment_options.h"
#include "profile/profile.h"
#include "experiment/backend.h"

namespace parity::cli {

namespace {

struct ProfileArgs {
  std::vector<std::string> dirs, models, kernel_options;
  std::string backend = "inductor", test, dtype, output_dir = "parity-results", trace, kernel;
  ExperimentArgs experiment;
  int warmup = 3, iterations = 20, profile_iterations = 5, top = 15;
  bool json = false;
};

profile::ProfileOptions ToOptions(const ProfileArgs& a) {
  profile::ProfileOptions o;
  verify::VerifyOptions& m = o.matrix;
  m.repro_dirs = a.dirs;
  m.models = a.models;
  m.backends = {a.backend};
  if (!a.test.empty()) m.tests = {a.test};
  if (!a.dtype.empty()) m.dtypes = {a.dtype};
  m.output_dir = a.output_dir;
  m.experiment = ToExperimentOptions(a.experiment);
  o.warmup = a.warmup;
  o.iterations = a.iterations;
  o.profile_iterations = a.profile_iterations;
  if (!a.trace.empty()) o.trace = a.trace;
  o.kernel = a.kernel;
  o.kernel_options = experiment::OptionsFor(Unwrap(experiment::ParseBackendOptions(a.kernel_options, "--kernel-option")), a.backend);
  o.top = a.top;
  return o;
}

}  // namespace

void set_profile_command(CLI::App& app, int& exit_code) {
  auto a = std::make_shared<ProfileArgs>();
  CLI::App* cmd = app.add_subcommand("profile", "Where a compiled model spends its time, kernel by kernel, next to eager");
  cmd->add_option("dir", a->dirs, "a captured repro dir (instead of --model)");
  cmd->add_option("--model", a->models, "a suite model (parity models)");
  cmd->add_option("--backend", a->backend, "a backend run through torch.compile (default inductor)");
  cmd->add_option("--test", a->test, "eval or train (default eval; a repro dir: the test it was captured in)");
  cmd->add_option("--dtype", a->dtype, "float32, float16, bfloat16, amp (default float32; a repro dir: its capture's)");
  AddExperimentOptions(cmd, a->experiment, kBackendOptions | kDevice | kBatchSize | kTimeout | kCacheDir | kImports);
  cmd->add_option("--warmup", a->warmup, "warm iterations before timing (default 3)");
  cmd->add_option("--iterations", a->iterations, "timed iterations: medians and spread (default 20)");
  cmd->add_option("--profile-iterations", a->profile_iterations, "iterations under the profiler (default 5)");
  cmd->add_option("--trace", a->trace, "write a chrome/Perfetto trace of eager and the backend to this file");
  cmd->add_option("--kernel", a->kernel,
                  "benchmark this generated kernel alone (time, bandwidth); backward:NAME for a train step's backward kernel");
  cmd->add_option("--kernel-option", a->kernel_options, "[BACKEND:]KEY=VALUE: benchmark --kernel again compiled with this option");
  cmd->add_option("--top", a->top, "kernels in the table (default 15)");
  cmd->add_flag("--json", a->json, "print the report as JSON");
  cmd->add_option("--output-dir", a->output_dir, "where results.jsonl and performance.csv go (default parity-results)");
  cmd->callback([a, &exit_code] {
    std::ostream& progress = a->json ? std::cerr : std::cout;
    const profile::ProfileOptions o = ToOptions(*a);
    auto report = Unwrap(profile::Profile(o, progress));
    if (a->json)
      std::cout << report.ToJson().dump(2) << "\n";
    else
      std::cout << "\n" << profile::ReportText(report, o.top);
    exit_code = 0;
  });
}

}  // namespace parity::cli
