// How experiments run, for every command that runs them (verify, ci, minify, profile, repro
// run): declared once on the command line (cli/experiment_options.h), defaults here and nowhere
// else, resolved per experiment by experiment/case.h. A newcomer adding such an option adds a
// field here (with its JSON key in options.cpp), its flag in cli/experiment_options.cpp, and its
// use where the experiment reads it.
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "util/status.h"

namespace parity::experiment {

// The rules a verdict can be decided by (--rule): same() (torch._dynamo.utils.same, PyTorch's,
// the default), or calibrated (each output within its noise budget, compare/budget.h).
inline constexpr const char* kRuleSame = "same";
inline constexpr const char* kRuleCalibrated = "calibrated";
// kBadInput naming --rule unless `rule` is one of them.
[[nodiscard]] Status CheckRule(const std::string& rule);

struct ExperimentOptions {
  // --backend-option KEY=VALUE; unset: a repro dir's own, when it names the same backend.
  std::optional<nlohmann::json> backend_options;
  // --device; unset: a repro dir's own (where it was captured, or where it failed), else cpu.
  std::optional<std::string> device;
  // --tol; unset: a failure's tolerance (a failure repro dir's), else the suite's default.
  std::optional<double> tol;
  bool cosine = false;         // --cosine: compare by cosine similarity
  bool ignore_non_fp = false;  // integer/bool outputs that differ do not fail (minify without --strict)
  int batch_size = 0;          // --batch-size; 0: the suite model's own (repro dirs: as captured)
  int repeat = 1;              // --repeat: timed repetitions
  int iterations_per_run = 1;  // --iterations-per-run
  int timeout_s = 1800;        // --timeout: seconds per experiment (per candidate in minify)
  int jobs = 1;                // --jobs: experiments at once (one GPU each on CUDA)
  // --shapes: a symbolic graph at its recorded shape ("recorded"), or at N more points of its
  // symbols' ranges too ("sweep", "sweep=N"; experiment/shapes.h). Static graphs: as recorded.
  std::string shapes = "recorded";
  // --rule: what decides PASS/FAIL (every record says what both rules make of it); unset: a
  // failure repro dir's (the rule that failed it), else same.
  std::optional<std::string> rule;
  // --noise-budgets: every graph's noise budgets measured (four more eager runs each), also where
  // same() passes every output; else only where the rule or a failure needs them (NoiseBudgets).
  bool noise_budgets = false;
  // --while-limit: the most iterations a while_loop may run in parity's interpreter; 0: the rule
  // (interpreter.h WhileLimit: 16x what the program ran, at least 1024, at most 2^20).
  int64_t while_limit = 0;
  std::filesystem::path cache_dir;   // --cache-dir; empty: DefaultCacheDir()
  std::vector<std::string> imports;  // --import, and parity's config allow-list: approved host-op modules

  nlohmann::json ToJson() const;
  // kBadInput naming the field when `j` holds a field of the wrong type.
  [[nodiscard]] static Expected<ExperimentOptions> FromJson(const nlohmann::json& j);
  // kBadInput naming the flag: a tolerance not finite and >= 0, repeats, iterations, timeout or
  // jobs below 1.
  [[nodiscard]] Status Check() const;
};

}  // namespace parity::experiment
