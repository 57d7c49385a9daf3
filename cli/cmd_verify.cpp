// parity verify [DIR...] --model M --backend B ...   and the internal `parity _experiment`.
#include <unistd.h>

#include <iostream>

#include "cli/commands.h"
#include "verifier/backend.h"
#include "verifier/host_ops.h"
#include "verifier/verify.h"

namespace parity::cli {

namespace {

struct VerifyArgs {
  std::vector<std::string> dirs, models, backends{"inductor"}, backend_options, tests{"eval"}, dtypes{"float32"}, imports;
  std::string device = "cpu", filter, exclude, output_dir = "parity-results", cache_dir;
  int batch_size = 0, repeat = 1, iterations = 1, timeout = 1800;
  double tol = -1;
  bool cosine = false;
};

int RunVerify(const VerifyArgs& a) {
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
  if (a.tol >= 0) o.tol = a.tol;
  o.cosine = a.cosine;
  o.timeout_s = a.timeout;
  o.output_dir = a.output_dir;
  o.cache_dir = a.cache_dir;
  o.progress = ::isatty(1);
  o.imports = Unwrap(verifier::ApprovedImports(a.imports));
  auto summary = Unwrap(verifier::Verify(o, std::cout));
  return summary.failed > 0 ? 1 : 0;
}

}  // namespace

void set_verify_command(CLI::App& app, int& exit_code) {
  auto a = std::make_shared<VerifyArgs>();
  CLI::App* cmd = app.add_subcommand("verify", "Verify backends against eager and an fp64 reference (accuracy check)");
  cmd->add_option("dirs", a->dirs, "captured repro dirs to verify (instead of, or besides, --model)");
  cmd->add_option("--model", a->models, "suite model(s) (parity models), or 'all'");
  cmd->add_option("--backend", a->backends, "backend(s) (parity backends); default inductor");
  cmd->add_option("--backend-option", a->backend_options, "KEY=VALUE passed to the backend (inductor: config keys)");
  cmd->add_option("--test", a->tests, "eval and/or train (default eval)");
  cmd->add_option("--dtype", a->dtypes,
                  "float32, float16, bfloat16, amp (autocast: float16 on CUDA, bfloat16 on the CPU) (default float32)");
  cmd->add_option("--device", a->device, "cpu or cuda (default cpu)");
  cmd->add_option("--batch-size", a->batch_size, "batch size (default: the model's)");
  cmd->add_option("--repeat", a->repeat, "timed repetitions (default 1)");
  cmd->add_option("--iterations-per-run", a->iterations, "iterations per repetition (default 1)");
  cmd->add_option("--filter", a->filter, "only models matching this regex");
  cmd->add_option("--exclude", a->exclude, "skip models matching this regex");
  cmd->add_option("--tol", a->tol, "tolerance (default: per suite, test and dtype; docs/verify.md)");
  cmd->add_flag("--cosine", a->cosine, "compare by cosine similarity");
  cmd->add_option("--timeout", a->timeout, "seconds per experiment (default 1800)");
  cmd->add_option("--output-dir", a->output_dir, "where results.jsonl and repros/ go (default parity-results)");
  cmd->add_option("--cache-dir", a->cache_dir, "captures and compiled artifacts (default ~/.cache/parity)");
  cmd->add_option("--import", a->imports, "allow importing MODULE (in the worker) for host ops of the repro dirs");
  cmd->callback([a, &exit_code] { exit_code = RunVerify(*a); });
}

}  // namespace parity::cli
