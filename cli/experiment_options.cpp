#include "cli/experiment_options.h"

#include <unistd.h>

#include <cstdlib>

#include "cli/commands.h"
#include "host_ops/host_ops.h"
#include "runtime/worker.h"
#include "runtime/worker_pool.h"
#include "experiment/backend.h"

namespace parity::cli {

void AddExperimentOptions(CLI::App* cmd, ExperimentArgs& a, unsigned which) {
  const experiment::ExperimentOptions& d = a.options;
  auto has = [which](ExperimentFlag f) { return (which & f) != 0; };
  // A command whose experiments have a deadline runs them as job children: forked, not exec'd.
  if (has(kTimeout)) cmd->preparse_callback([](std::size_t) { StartJobZygote(); });
  if (has(kBackendOptions))
    cmd->add_option("--backend-option", a.backend_options,
                    "[BACKEND:]KEY=VALUE passed to the backends, or with BACKEND: to that one only (inductor: config keys; a repro dir: its own for its backend)");
  if (has(kDevice))
    cmd->add_option("--device", a.device, "cpu or cuda (default cpu; a repro dir: where it was captured or failed)");
  if (has(kTol))
    cmd->add_option("--tol", a.tol, "tolerance (default: a failure repro dir's, else per suite, test and dtype; docs/verify.md)")
        ->each([&a](const std::string& v) { a.options.tol = std::stod(v); });  // set: --tol was given
  if (has(kCosine)) cmd->add_flag("--cosine", a.options.cosine, "compare by cosine similarity");
  if (has(kBatchSize))
    cmd->add_option("--batch-size", a.options.batch_size, "batch size of suite models (default: the model's)");
  if (has(kRepeat)) {
    cmd->add_option("--repeat", a.options.repeat, "timed repetitions (default " + std::to_string(d.repeat) + ")");
    cmd->add_option("--iterations-per-run", a.options.iterations_per_run,
                    "iterations per repetition (default " + std::to_string(d.iterations_per_run) + ")");
  }
  if (has(kTimeout))
    cmd->add_option("--timeout", a.options.timeout_s, "seconds per experiment (default " + std::to_string(d.timeout_s) + ")");
  if (has(kJobs))
    cmd->add_option("--jobs,-j", a.options.jobs,
                    "experiments at once, isolated processes (one GPU each with --device cuda and several GPUs; default " +
                        std::to_string(d.jobs) + ")");
  if (has(kCacheDir)) cmd->add_option("--cache-dir", a.cache_dir, "captures and compiled artifacts (default " + runtime::ParityCacheDir().string() +
                                                        ": $PARITY_CACHE_DIR, else ~/.cache/parity)");
  if (has(kShapes))
    cmd->add_option("--shapes", a.options.shapes,
                    "symbolic graphs: at the recorded shape (recorded), or at N more points of their symbols' ranges too "
                    "(sweep = sweep=3, sweep=N); static graphs run as recorded (default " + d.shapes + ")");
  if (has(kRule))
    cmd->add_option("--rule", a.rule,
                    "what decides PASS/FAIL: same (torch._dynamo.utils.same, PyTorch's) or calibrated (each output within "
                    "its noise budget, measured from eager reruns that move only the rounding; docs/verify.md) (default "
                    "same; a failure repro dir: the rule it failed by)")
        ->check(CLI::IsMember({experiment::kRuleSame, experiment::kRuleCalibrated}));
  if (has(kRule))
    cmd->add_flag("--noise-budgets", a.options.noise_budgets,
                  "measure every output's noise budget (four more eager runs per graph), also where same() passes: "
                  "a PASS further from fp64 than rounding goes is then said (default: only where the rule or a "
                  "failure needs them)");
  if (has(kWhileLimit))
    cmd->add_option("--while-limit", a.options.while_limit,
                    "the most iterations a while_loop may run in parity's interpreter (default: 16x what the program ran "
                    "it, at least 1024, at most 1048576; a loop past it is an error naming its node)")
        ->check(CLI::NonNegativeNumber);
  if (has(kKeepWorkers))
    cmd->add_option("--keep-workers", a.keep_workers,
                    "leave this run's Python workers warm for SECONDS once idle: the next parity run with the same "
                    "environment (a minify after its verify) adopts them instead of starting its own (default $" +
                        std::string(runtime::kKeepWorkersEnv) + ", else 0; docs/worker.md)")
        ->check(CLI::NonNegativeNumber);
  if (has(kImports))
    cmd->add_option("--import", a.imports,
                    "import MODULE in every Python process that compiles or runs the graph (a backend plugin that "
                    "registers passes, backends or devices; a module registering host ops of the repro dirs)");
}

experiment::ExperimentOptions ToExperimentOptions(const ExperimentArgs& a) {
  experiment::ExperimentOptions o = a.options;
  if (!a.backend_options.empty()) o.backend_options = Unwrap(experiment::ParseBackendOptions(a.backend_options));
  if (!a.device.empty()) o.device = a.device;
  if (!a.cache_dir.empty()) o.cache_dir = a.cache_dir;
  if (!a.rule.empty()) o.rule = a.rule;
  o.imports = Unwrap(host_ops::ApprovedImports(a.imports));
  Unwrap(o.Check());
  if (const char* e = std::getenv(runtime::kKeepWorkersEnv); e && *e && std::string(e).find_first_not_of("0123456789") != std::string::npos)
    throw Failure{Error::BadInput(std::string("$") + runtime::kKeepWorkersEnv + "=" + e + ": not a number of seconds")};
  if (a.keep_workers >= 0) runtime::SetKeepWorkers(a.keep_workers);
  if (runtime::KeepWorkers() > 0) Unwrap(runtime::PoolDir(true));  // a pool this user cannot own: exit 2 now
  runtime::SetImportModules(a.imports);
  Unwrap(runtime::CheckImportModules());
  return o;
}

void AddMatrixOptions(CLI::App* cmd, MatrixArgs& a) {
  cmd->add_option("dirs", a.dirs, "captured repro dirs to verify (instead of, or besides, --model)");
  cmd->add_option("--model", a.models, "suite model(s) (parity models), or 'all'");
  cmd->add_option("--backend", a.backends, "backend(s) (parity backends); default inductor");
  cmd->add_option("--test", a.tests, "eval and/or train (default eval; a repro dir: the test it was captured in)");
  cmd->add_option(
      "--dtype", a.dtypes,
      "float32, float16, bfloat16, amp (autocast: float16 on CUDA, bfloat16 on the CPU) (default float32; a repro dir: "
      "its capture's)");
  cmd->add_option("--filter", a.filter, "only models matching this regex");
  cmd->add_option("--exclude", a.exclude, "skip models matching this regex");
  cmd->add_option("--output-dir", a.output_dir, "where results.jsonl and repros/ go (default parity-results)");
  cmd->add_option("--shard", a.shard,
                  "run shard I of N (I/N, 1-based); default from $JOB_COMPLETION_INDEX, $SLURM_ARRAY_TASK_ID or "
                  "$CI_NODE_INDEX (docs/ci.md)");
  cmd->add_option("--shards", a.shards, "the number of shards of a Kubernetes Indexed Job (with $JOB_COMPLETION_INDEX)");
  cmd->add_option("--shard-costs", a.shard_costs, "results.jsonl of an earlier run: balance the shards by its wall times");
  AddExperimentOptions(cmd, a.experiment);
}

verify::VerifyOptions ToVerifyOptions(const MatrixArgs& a) {
  verify::VerifyOptions o;
  o.models = a.models;
  o.repro_dirs = a.dirs;
  o.backends = a.backends;
  o.tests = a.tests;
  o.dtypes = a.dtypes;
  o.experiment = ToExperimentOptions(a.experiment);
  o.filter = a.filter;
  o.exclude = a.exclude;
  o.output_dir = a.output_dir;
  o.progress = ::isatty(1) != 0;
  o.shard = Unwrap(matrix::ResolveShard(a.shard, a.shards, [](const char* name) { return std::getenv(name); }));
  for (const auto& f : a.shard_costs) {
    if (!std::filesystem::is_regular_file(f)) throw Failure{Error::BadInput("--shard-costs " + f + ": no such file")};
    o.cost_files.emplace_back(f);
  }
  return o;
}

}  // namespace parity::cli
