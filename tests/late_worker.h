// Experiments whose backend waits for a worker that starts late, for the tests of running ahead
// (test_experiment_graph_run.cpp: a dir's later graphs; test_experiment_flow.cpp: the next
// experiment): a dir of two graphs, the steps an experiment said, and a fake worker that listens
// once the steps heard say so.
#pragma once

#include <filesystem>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "experiment/experiment.h"
#include "test_helpers.h"

namespace parity::testing {

// Two graphs over one input x [2, 3]: "a" relu(x), then "b": x @ x.t() (or, with `b_fails`, x @ x,
// which the eager run refuses: a [2, 3] by [2, 3] product).
void WriteTwoGraphs(const std::filesystem::path& dir, bool b_fails);

// The steps an experiment said, in order, as its on_phase callback heard them.
class Steps {
 public:
  void Add(const std::string& step);
  // How often `step` was said before the first `until`.
  int CountBefore(const std::string& step, const std::string& until) const;
  std::string Text() const;

 private:
  mutable std::mutex mu_;
  std::vector<std::string> steps_;
};

// The worker's answer to the backend's compile and first run of "a": an Inductor failure.
inline constexpr const char* kBackendFails = R"({"ok": false, "error_type": "BackendCompilerFailed", "error": "boom", "traceback": ""})";

// The flow sets up determinism as PyTorch's runner does, for the process (cuBLAS's workspace, the
// deterministic algorithms): what it was is put back when this ends.
class DeterminismKept {
 public:
  DeterminismKept();
  ~DeterminismKept();

 private:
  std::optional<std::string> workspace_;
  bool deterministic_, warn_only_;
};

// An Inductor experiment over `dir` in `work` (made here).
experiment::ExperimentSpec InductorSpec(const std::filesystem::path& dir, const std::filesystem::path& work);

// RunExperiment(spec, ..., prepared, next), its worker at a socket of `tmp` that listens once
// `listen_when` says so of the steps heard (checked every 10 ms; after 20 s regardless), or
// before the experiment starts where there is no `listen_when`; the process's determinism
// settings put back after.
experiment::ExperimentResult RunWithLateWorker(const TempDir& tmp, const experiment::ExperimentSpec& spec, Steps& steps,
                                               const std::function<bool(const Steps&)>& listen_when,
                                               experiment::PreparedExperiment* prepared = nullptr,
                                               const std::vector<experiment::PreparedExperiment*>& next = {});

}  // namespace parity::testing
