// The verdict of an experiment from what its runs collected: same() on every reference result
// against the backend's (the fp64 reference deciding where allclose fails), each result against
// its noise budget where one was measured, the rule (--rule) deciding, and the verdict in one
// sentence. Pure: runs nothing.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "compare/budget.h"
#include "repro/sym_expr.h"
#include "experiment/backend.h"
#include "experiment/experiment.h"

namespace parity::experiment {

// The results of every graph at every shape; with several graphs a result is named
// "<graph>/<result>", at a --shapes variant "<graph>/[s0=12]/<result>".
struct Collected {
  NamedTensors ref, fp64, got;
  std::vector<std::string> shown;  // readable names, as reported
  std::vector<double> tols;        // each result's tolerance (its graph's mode and dtype)
  std::vector<std::optional<compare::NoiseBudget>> budgets;  // each result's, where it was measured
  bool fp64_ok = true;
  std::vector<double> run_times;
  // --shapes sweep: which results belong to which shape of a symbolic graph.
  struct Span {
    std::string graph;
    sym::Bindings symbols;
    size_t begin, end;
  };
  std::vector<Span> spans;
};

// The verdict (PASS or FAIL), every output's statistics and the justification.
ExperimentResult Judge(const ExperimentSpec& spec, ExperimentResult r, const Collected& c);

}  // namespace parity::experiment
