// parity profile [DIR] --model M --backend B [--device cpu|cuda] [--trace out.json] [--kernel NAME] ...
#include <iostream>

#include "cli/commands.h"
#include "profile/profile.h"
#include "verifier/backend.h"
#include "verifier/host_ops.h"

namespace parity::cli {

namespace {

struct ProfileArgs {
  std::vector<std::string> dirs, models, backend_options, kernel_options, imports;
  std::string backend = "inductor", test, dtype, device, output_dir = "parity-results", cache_dir, trace, kernel;
  int batch_size = 0, timeout = 1800, warmup = 3, iterations = 20, profile_iterations = 5, top = 15;
  bool json = false;
};

profile::ProfileOptions ToOptions(const ProfileArgs& a) {
  profile::ProfileOptions o;
  verifier::VerifyOptions& e = o.experiment;
  e.repro_dirs = a.dirs;
  e.models = a.models;
  e.backends = {a.backend};
  e.backend_options = Unwrap(verifier::ParseBackendOptions(a.backend_options));
  if (!a.test.empty()) e.tests = {a.test};
  if (!a.dtype.empty()) e.dtypes = {a.dtype};
  e.device = a.device;
  e.batch_size = a.batch_size;
  e.timeout_s = a.timeout;
  e.output_dir = a.output_dir;
  e.cache_dir = a.cache_dir;
  e.imports = Unwrap(verifier::ApprovedImports(a.imports));
  e.reports = false;
  o.warmup = a.warmup;
  o.iterations = a.iterations;
  o.profile_iterations = a.profile_iterations;
  if (!a.trace.empty()) o.trace = a.trace;
  o.kernel = a.kernel;
  o.kernel_options = Unwrap(verifier::ParseBackendOptions(a.kernel_options));
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
  cmd->add_option("--backend-option", a->backend_options, "KEY=VALUE passed to the backend (inductor: config keys)");
  cmd->add_option("--test", a->test, "eval or train (default eval; a repro dir: the test it was captured in)");
  cmd->add_option("--dtype", a->dtype, "float32, float16, bfloat16, amp (default float32; a repro dir: its capture's)");
  cmd->add_option("--device", a->device, "cpu or cuda (default cpu; a repro dir: where it was captured or failed)");
  cmd->add_option("--batch-size", a->batch_size, "batch size (default: the model's)");
  cmd->add_option("--warmup", a->warmup, "warm iterations before timing (default 3)");
  cmd->add_option("--iterations", a->iterations, "timed iterations: medians and spread (default 20)");
  cmd->add_option("--profile-iterations", a->profile_iterations, "iterations under the profiler (default 5)");
  cmd->add_option("--trace", a->trace, "write a chrome/Perfetto trace of eager and the backend to this file");
  cmd->add_option("--kernel", a->kernel,
                  "benchmark this generated kernel alone (time, bandwidth); backward:NAME for a train step's backward kernel");
  cmd->add_option("--kernel-option", a->kernel_options, "KEY=VALUE: benchmark --kernel again compiled with this option");
  cmd->add_option("--top", a->top, "kernels in the table (default 15)");
  cmd->add_flag("--json", a->json, "print the report as JSON");
  cmd->add_option("--timeout", a->timeout, "seconds for the whole profile (default 1800)");
  cmd->add_option("--output-dir", a->output_dir, "where results.jsonl and performance.csv go (default parity-results)");
  cmd->add_option("--cache-dir", a->cache_dir, "captures (default ~/.cache/parity)");
  cmd->add_option("--import", a->imports, "allow importing MODULE for host ops of the repro dir");
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
