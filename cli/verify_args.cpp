#include "cli/verify_args.h"

#include <unistd.h>

#include <cstdlib>

#include "cli/commands.h"
#include "compare/same.h"
#include "verifier/backend.h"
#include "verifier/host_ops.h"

namespace parity::cli {

void AddVerifyOptions(CLI::App* cmd, VerifyArgs& a) {
  cmd->add_option("dirs", a.dirs, "captured repro dirs to verify (instead of, or besides, --model)");
  cmd->add_option("--model", a.models, "suite model(s) (parity models), or 'all'");
  cmd->add_option("--backend", a.backends, "backend(s) (parity backends); default inductor");
  cmd->add_option("--backend-option", a.backend_options, "KEY=VALUE passed to the backend (inductor: config keys)");
  cmd->add_option("--test", a.tests, "eval and/or train (default eval; a repro dir: the test it was captured in)");
  cmd->add_option(
      "--dtype", a.dtypes,
      "float32, float16, bfloat16, amp (autocast: float16 on CUDA, bfloat16 on the CPU) (default float32; a repro dir: "
      "its capture's)");
  cmd->add_option("--device", a.device, "cpu or cuda (default cpu; a repro dir: where it was captured or failed)");
  cmd->add_option("--batch-size", a.batch_size, "batch size (default: the model's)");
  cmd->add_option("--repeat", a.repeat, "timed repetitions (default 1)");
  cmd->add_option("--iterations-per-run", a.iterations, "iterations per repetition (default 1)");
  cmd->add_option("--filter", a.filter, "only models matching this regex");
  cmd->add_option("--exclude", a.exclude, "skip models matching this regex");
  cmd->add_option("--tol", a.tol, "tolerance (default: per suite, test and dtype; docs/verify.md)")
      ->each([&a](const std::string&) { a.tol_given = true; });
  cmd->add_flag("--cosine", a.cosine, "compare by cosine similarity");
  cmd->add_option("--timeout", a.timeout, "seconds per experiment (default 1800)");
  cmd->add_option("--output-dir", a.output_dir, "where results.jsonl and repros/ go (default parity-results)");
  cmd->add_option("--cache-dir", a.cache_dir, "captures and compiled artifacts (default ~/.cache/parity)");
  cmd->add_option("--import", a.imports, "allow importing MODULE (in the worker) for host ops of the repro dirs");
  cmd->add_option("--jobs,-j", a.jobs, "experiments at once (one GPU each with --device cuda and several GPUs; default 1)");
  cmd->add_option("--shard", a.shard,
                  "run shard I of N (I/N, 1-based); default from $JOB_COMPLETION_INDEX, $SLURM_ARRAY_TASK_ID or "
                  "$CI_NODE_INDEX (docs/ci.md)");
  cmd->add_option("--shards", a.shards, "the number of shards of a Kubernetes Indexed Job (with $JOB_COMPLETION_INDEX)");
  cmd->add_option("--shard-costs", a.shard_costs, "results.jsonl of an earlier run: balance the shards by its wall times");
}

verifier::VerifyOptions ToVerifyOptions(const VerifyArgs& a) {
  verifier::VerifyOptions o;
  o.repro_dirs = a.dirs;
  o.models = a.models;
  o.backends = a.backends;
  o.backend_options = Unwrap(verifier::ParseBackendOptions(a.backend_options));
  o.tests = a.tests;
  o.dtypes = a.dtypes;
  o.device = a.device;
  o.batch_size = a.batch_size;
  o.repeat = a.repeat;
  o.iterations_per_run = a.iterations;
  o.filter = a.filter;
  o.exclude = a.exclude;
  if (a.tol_given) {
    Unwrap(compare::CheckTolerance(a.tol, "--tol"));
    o.tol = a.tol;
  }
  o.cosine = a.cosine;
  o.timeout_s = a.timeout;
  o.output_dir = a.output_dir;
  o.cache_dir = a.cache_dir;
  o.progress = ::isatty(1);
  o.imports = Unwrap(verifier::ApprovedImports(a.imports));
  if (a.jobs < 1) throw Failure{Error::BadInput("--jobs " + std::to_string(a.jobs) + ": expected 1 or more")};
  o.jobs = a.jobs;
  o.shard = Unwrap(verifier::ResolveShard(a.shard, a.shards, [](const char* name) { return std::getenv(name); }));
  for (const auto& f : a.shard_costs) {
    if (!std::filesystem::is_regular_file(f)) throw Failure{Error::BadInput("--shard-costs " + f + ": no such file")};
    o.cost_files.emplace_back(f);
  }
  return o;
}

}  // namespace parity::cli
