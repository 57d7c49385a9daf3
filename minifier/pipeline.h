// One minify run's collaborators: the runner and its slots, the tensors candidates read, a
// candidate writer and an interestingness test per graph, the steps' context, and the backend
// runs of candidates (made ahead where a step asked for them: ahead.h).
#pragma once

#include <ATen/core/Tensor.h>

#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "minifier/ahead.h"
#include "minifier/interesting.h"
#include "minifier/minify.h"
#include "minifier/reduction.h"
#include "minifier/steps/steps.h"
#include "experiment/runner.h"

namespace parity::minifier {

// One minify run's pieces: the runner, the tensors candidates read, a writer and test per graph.
struct Pipeline {
  const MinifyOptions& o;
  const ReproDir& repro;
  const std::filesystem::path out;
  experiment::IsolatedRunner runner;
  std::map<std::string, at::Tensor> tensors;
  ReductionState state;

  CandidateWriter Writer(size_t gi) const {
    const GraphEntry& g = repro.graphs()[gi];
    Manifest m = repro.manifest();
    m.backend = state.base.backend;
    m.backend_options = state.base.backend_options;
    return CandidateWriter(m, g, tensors);
  }
  DirJudge Judge(const std::string& name) {
    if (!o.check_command.empty()) return CheckCommandJudge(o.check_command, o.experiment.jobs, o.experiment.timeout_s);
    return BackendJudge(runner, state.base, state.original, out / "work" / name);
  }
  std::unique_ptr<Interestingness> Test(size_t gi, const std::string& name) {
    return std::make_unique<CandidateTest>(Writer(gi), Judge(name), out / "work" / name, state.original.ToJson());
  }
  void Checkpoint(const ir::Graph& g) const { state.SaveCheckpoint(out, Writer(state.graph_index), g); }
  StepContext Context(std::ostream& log);
  // The experiment that runs a candidate of the graph being reduced through the backend, the
  // candidate written to a dir named after its graph (the same graph, the same experiment: a run
  // made ahead of it is found); nullopt when it cannot be written.
  std::optional<std::pair<experiment::ExperimentSpec, std::filesystem::path>> CandidateRun(const ir::Graph& g);
  // Candidates of the graph being reduced through the backend as one batch, the whole results
  // in order (a candidate that cannot be written: an error result).
  std::vector<experiment::ExperimentResult> RunCandidates(const std::vector<const ir::Graph*>& gs);
  AheadRunner ahead{runner};  // what every step runs through (runs made ahead, then the runner)
};

// The slots of a minify run: on CUDA the environments verify's runs have (their GPU, a share of
// host threads); on the CPU every candidate keeps the machine's threads, as a failing
// `verify -j 1` ran (Inductor generates its CPU kernels for the thread count, and its caches key
// on it, so a split would compile every candidate afresh, and otherwise than the failure was
// compiled).
std::vector<std::vector<std::string>> SlotEnvironments(const MinifyOptions& o, const experiment::ExperimentSpec& base);
// Candidates run one after another in each slot's job server unless --fresh-runners; the
// workers of a dynamo backend start now, warming up for its compile.
void StartRunner(experiment::IsolatedRunner& runner, const MinifyOptions& o, const experiment::ExperimentSpec& base);

}  // namespace parity::minifier
