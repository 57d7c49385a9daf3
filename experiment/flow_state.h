// One experiment's state across the steps of RunExperiment (flow.cpp; a prepared experiment's
// too), and the steps that live in files of their own: a graph's reference and backend runs
// (graph_run.cpp), noise budgets where they are needed (budgets.cpp). Internal to experiment/.
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "experiment/backend.h"
#include "experiment/experiment.h"
#include "experiment/judge.h"
#include "experiment/phase_clock.h"
#include "experiment/reference.h"
#include "interpreter/interpreter.h"

namespace parity::experiment::flow {

inline ExperimentResult Finish(ExperimentResult r, Code code, std::string error = "") {
  r.code = code;
  r.error = std::move(error);
  return r;
}

inline void Note(ExperimentResult& r, const std::string& note) { r.notes += (r.notes.empty() ? "" : "; ") + note; }

// One graph at one shape, as the later steps need it: calibration reruns its program on its
// inputs; its results are [begin, end) of Collected.
struct Unit {
  const interp::Program* program;
  const ReproDir* repro;
  const GraphEntry* graph;
  std::string mode;
  ReferenceOptions eager;
  bool fp64_ran = false;
  size_t begin = 0, end = 0;
};

// One experiment's state across its steps.
struct Flow {
  const ExperimentSpec& spec;
  ExperimentResult r;
  PhaseClock clock;
  std::deque<interp::Program> programs;  // every graph's, for its shapes' units
  std::deque<ReproDir> variants;         // --shapes: the variant dirs the units point into
  std::vector<Unit> units;
  Collected c;
  // On an accelerator, the most memory this experiment's runs held before the device's peak was
  // last reset (another experiment's steps ran between: PreparedExperiment).
  int64_t peak_before = 0;
};

// The repro dir, the device and the backend: what every graph's steps need.
struct Setup {
  std::optional<ReproDir> repro;
  std::unique_ptr<Backend> backend;
  ExperimentContext ctx;
};

using Stop = std::optional<ExperimentResult>;  // set when the experiment ends early

inline Stop Early(Flow& f, Code code, std::string error) { return Finish(f.r, code, std::move(error)); }

// Each graph's reference steps and what they made so far (graph_run.cpp), kept across the flow's
// steps and across a prepared experiment's run ahead.
struct GraphRuns;
struct GraphRunsDelete {
  void operator()(GraphRuns* g) const;
};
using GraphRunsPtr = std::unique_ptr<GraphRuns, GraphRunsDelete>;
GraphRunsPtr NewGraphRuns(const ExperimentContext& ctx);

// One reference step of the first graph with one left (planned first); false when none is left or
// a graph failed (kept, said at its turn).
bool StepAhead(Flow& f, Backend& backend, const ExperimentContext& ctx, GraphRuns& runs);

// Every graph of the repro dir (ctx.repro) in order: at each of its shapes the reference (eager
// twice, fp64), and the backend at every shape; each graph's units added to f.units, its results
// to f.c. Later graphs' references may run while an earlier graph's backend waits for its worker,
// and once none is left `beyond` (a step of another experiment; false: none is left); the record
// is the same as without.
Stop RunGraphs(Flow& f, Backend& backend, const ExperimentContext& ctx, GraphRuns& runs, const std::function<bool()>& beyond);

// Budgets where they are needed (the units `judged` says); whether any was measured.
bool Calibrate(Flow& f, const ExperimentResult& judged);

}  // namespace parity::experiment::flow

namespace parity::experiment {

// A prepared experiment's state: its own spec, the flow's state over it, how far it went.
struct PreparedExperiment::State {
  explicit State(ExperimentSpec s);
  ExperimentSpec spec;
  flow::Flow f;
  flow::Setup setup;
  flow::GraphRunsPtr graphs;  // set once it is set up (by a step ahead, or at its turn)
  bool usable = true;         // false: what ran ahead is dropped, it runs afresh
};

}  // namespace parity::experiment
