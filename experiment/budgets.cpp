// Noise budgets of a graph's results where the rule or the verdict needs them (flow_state.h).
#include <ATen/Context.h>
#include <ATen/Parallel.h>

#include <chrono>
#include <deque>
#include <thread>

#include "compare/budget.h"
#include "compare/same.h"
#include "interpreter/interpreter.h"
#include "host_ops/host_ops.h"
#include "runtime/jobs.h"
#include "runtime/worker.h"
#include "util/files.h"
#include "experiment/backend.h"
#include "experiment/calibration.h"
#include "experiment/case.h"
#include "experiment/devices.h"
#include "experiment/experiment.h"
#include "experiment/judge.h"
#include "experiment/phase_clock.h"
#include "experiment/reference.h"
#include "experiment/shapes.h"
#include "experiment/flow_state.h"


namespace parity::experiment::flow {

namespace {

using Clock = std::chrono::steady_clock;

// Which units' noise budgets to measure: every one where the rule or --noise-budgets asks, else
// (same()) those where the verdict without budgets (`judged`) fails an output: whether rounding
// alone explains that failure.
std::vector<bool> UnitsToCalibrate(const Flow& f, const ExperimentResult& judged) {
  std::vector<bool> want(f.units.size(), false);
  if (!f.c.fp64_ok || f.spec.noise_budgets == NoiseBudgets::kNever) return want;
  const bool every = f.spec.noise_budgets == NoiseBudgets::kAlways || f.spec.rule == kRuleCalibrated;
  for (size_t u = 0; u < f.units.size(); ++u) {
    const Unit& unit = f.units[u];
    if (!unit.fp64_ran) continue;
    want[u] = every;
    for (size_t k = unit.begin; k < unit.end && !want[u] && k < judged.outputs.size(); ++k)
      want[u] = !judged.outputs[k].value("pass", true);
  }
  return want;
}

// The noise budget of each floating result of one unit, from its calibration runs (eager's own
// error the first sample). None when the calibration cannot run: the notes say why, and the
// calibrated rule leaves those results to same().
void MeasureBudgets(Flow& f, const Unit& u) {
  const auto started = Clock::now();
  auto runs = CalibrationRuns(*u.program, *u.repro, *u.graph, u.mode, u.eager);
  if (!runs.ok()) {
    Note(f.r, "no noise budget: a calibration run failed: " + runs.error().message.substr(0, 200));
  } else {
    for (size_t k = u.begin; k < u.end; ++k) {
      const at::Tensor& ref = f.c.ref[k].second;
      const at::Tensor& fp64 = f.c.fp64[k].second;
      if (!compare::FloatingOutput(ref) || fp64.numel() != ref.numel()) continue;
      std::vector<std::pair<std::string, at::Tensor>> samples = {{"eager", ref}};
      for (const auto& run : *runs)
        if (k - u.begin < run.results.size() && run.results[k - u.begin].second.numel() == ref.numel())
          samples.emplace_back(run.label, run.results[k - u.begin].second);
      f.c.budgets[k] = compare::MeasureBudget(fp64, samples);
    }
  }
  f.r.calibration_time_s += std::chrono::duration<double>(Clock::now() - started).count();
}

}  // namespace

// Budgets where they are needed (UnitsToCalibrate of `judged`); whether any was measured.
bool Calibrate(Flow& f, const ExperimentResult& judged) {
  const std::vector<bool> want = UnitsToCalibrate(f, judged);
  bool any = false;
  for (size_t u = 0; u < f.units.size(); ++u)
    if (want[u]) {
      f.clock.Enter("calibration");
      MeasureBudgets(f, f.units[u]);
      any = true;
    }
  return any;
}

}  // namespace parity::experiment::flow
