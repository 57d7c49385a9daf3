// One experiment's state across the steps of RunExperiment (flow.cpp), and the steps that live
// in files of their own: a graph's reference and backend runs (graph_run.cpp), noise budgets
// where they are needed (budgets.cpp). Internal to experiment/.
#pragma once

#include <deque>
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
};

using Stop = std::optional<ExperimentResult>;  // set when the experiment ends early

inline Stop Early(Flow& f, Code code, std::string error) { return Finish(f.r, code, std::move(error)); }

// Every graph of the repro dir (ctx.repro) in order: at each of its shapes the reference (eager
// twice, fp64), and the backend at every shape; each graph's units added to f.units, its results
// to f.c. Later graphs' references may run while an earlier graph's backend waits for its worker;
// the record is the same as without.
Stop RunGraphs(Flow& f, Backend& backend, const ExperimentContext& ctx);

// Budgets where they are needed (the units `judged` says); whether any was measured.
bool Calibrate(Flow& f, const ExperimentResult& judged);

}  // namespace parity::experiment::flow
